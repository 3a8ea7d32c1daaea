"""Indexing a cluster graph and splitting paths into server and fabric parts.

A path between GPUs of different servers is cut into three segments:

* **up**: sending GPU -> its NIC -> the NIC's switch (inside the server: fluid over the
  server's shortest paths, e.g. GPU -> PCIe -> NIC on a DGX);
* **fabric**: switch -> ... -> switch, chosen by the routing policy;
* **down**: switch -> receiving NIC -> receiving GPU.

Segments are shared: every flow of a GPU uses the same up segment, every flow between two
leaf switches the same fabric segment. Servers whose internal graph is identical (same
local node names, same working links) share one template of internal paths.
"""

from __future__ import annotations

import numpy as np

import topologies as tp

import contextlib
import weakref

from .. import _checks

from ._cache import _INDEXES, LOCK, PairPaths, _NoPath, _signature
from ._shortest_paths import CompactGraph, ecmp_fluid
from ._keys import ranges
from ._links import capacity_array


class RoutingError(ValueError):
    """Routing is impossible as asked (no path, unknown endpoint, policy not applicable)."""


def no_path(ix, src, dst, what: str = "route") -> RoutingError:
    """The error for a pair without a path: missing or failed links, or, on a fabric whose
    rails no switch joins (``rail_only``), traffic between rails that needs PXN."""
    text = f"no path from {ix.name(src)} to {ix.name(dst)} ({what}); "
    if ix.graph.graph.get("generator") == "rail_only":
        return RoutingError(text + "rail_only has no switch between rails: traffic between rails first "
                                   "crosses NVLink to the GPU on the destination's rail (NCCL's PXN): "
                                   "pass pxn=True, and a GPU of the communicator must sit on that rail "
                                   "of the sending server (PXN relays through the communicator's GPUs "
                                   "only: the collective's ranks, route(relays=))")
    return RoutingError(text + "the links between them are missing or failed")


@contextlib.contextmanager
def unchanged(graph, *, checked: bool = False):
    """A block in which ``graph`` is not edited: every :func:`~flowsolver.route` on it inside
    uses one index without checking the graph's signature again (an O(edges) pass per call).
    Collectives, concurrent runs and training steps route their steps inside one. With
    ``checked=True`` (the caller validated the graph: ``flowsolver._checks.checked_graph``)
    the entry points called inside skip that check too (its fingerprint walks every edge).
    The block is this thread's (``flowsolver._checks.pinned``: one registry for both). Nothing of
    the graph may change inside it, node attributes routing does not read included: NCCL's view
    of a group (a GPU's type, its host's CPU) is computed once per block
    (``flowsolver._checks.block_memo``); edit between blocks.

    >>> import topologies as tp
    >>> g = tp.fat_tree(4)
    >>> with unchanged(g) as ix:
    ...     GraphIndex.of(g) is ix
    True
    """
    with _checks.pinned(graph, GraphIndex.of(graph), checked) as ix:
        yield ix


def gpu_nodes(graph) -> list:
    """``topologies.gpus(graph)``, sorted once per unchanged graph (its routing index's)."""
    return GraphIndex.of(graph).gpus


def graph_memo(graph, key, build):
    """``build()`` once per graph for as long as it is unchanged (kept with its routing
    index: free inside an :func:`unchanged` block), e.g. ``topologies.gpus(graph)``."""
    return GraphIndex.of(graph).memo(key, build)


class GraphIndex:
    """Integer view of a cluster graph: nodes in ``graph.nodes`` order, links in
    ``graph.edges`` order. :meth:`of` keeps one per graph, with what routing builds from it
    (:meth:`memo`), for as long as the graph is unchanged."""

    @classmethod
    def of(cls, graph) -> "GraphIndex":
        """The index of ``graph``, built once and reused while :func:`_signature` says the
        graph is unchanged (an edited graph gets a fresh one)."""
        pin = _checks.PINS.by_graph.get(id(graph))
        if pin is not None and pin[0].ref() is graph:
            return pin[0]
        sig = _signature(graph)
        with LOCK:
            ix = _INDEXES.get(graph)
            if ix is None or ix.signature != sig:
                ix = cls(graph)
                ix.signature = sig
                ix.graph = weakref.proxy(graph)       # the cache must not keep the graph alive
                ix.ref = weakref.ref(graph)
                _INDEXES[graph] = ix
        return ix

    def memo(self, key, build):
        """``build()`` once per index (the link table, server parts, fabric tables, paths).
        Threads asking at once may each build, but all get the one value kept (``setdefault``
        is atomic), so a mutable value (a path memo) is never split between them."""
        try:
            return self._memo[key]
        except KeyError:
            return self._memo.setdefault(key, build())

    def __init__(self, graph):
        self._memo: dict = {}
        self.signature = None
        self.graph = graph
        self.nodes = list(graph.nodes)
        self.nv = len(self.nodes)
        self.idx = {n: i for i, n in enumerate(self.nodes)}
        data = [graph.nodes[n] for n in self.nodes]
        self.kind = np.array([d.get("kind", "") for d in data], dtype=object)
        self.server = np.array([d["server"] if isinstance(d.get("server"), int) and "network" not in d
                                else -1 for d in data], dtype=np.int64)
        self.rail = np.array([d.get("rail", -1) if isinstance(d.get("rail"), int) else -1 for d in data],
                             dtype=np.int64)
        self.role = np.array([d.get("role", "") for d in data], dtype=object)
        self.is_switch = self.kind == "switch"
        self.is_gpu = self.kind == "gpu"
        tails, heads, caps, cables = [], [], [], []
        idx = self.idx
        for u, v, d in graph.edges(data=True):
            tails.append(idx[u])
            heads.append(idx[v])
            caps.append(d.get("capacity", 0.0))
            cables.append(int(d.get("cables", 1)))
        self.tail = np.array(tails, dtype=np.int64)
        self.head = np.array(heads, dtype=np.int64)
        # the one reading of the graph's capacities for routing: a string, None, inf refused naming the edge
        self.capacity = capacity_array(caps, lambda i: (self.nodes[tails[i]], self.nodes[heads[i]]))
        self.cables = np.array(cables, dtype=np.int64)
        self.usable = self.capacity > 0
        keys = self.tail * self.nv + self.head
        self._key_order = np.argsort(keys)
        self._keys = keys[self._key_order]
        self.gpus = tp.gpus(graph)            # GPU node ids in rank order
        self.gpu_by_rank = np.array([idx[n] for n in self.gpus], dtype=np.int64)

    def link_ids(self, u, v) -> np.ndarray:
        """Link ids of edges ``u[i] -> v[i]`` (node indices); -1 where there is none."""
        keys = np.asarray(u, dtype=np.int64) * self.nv + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self._keys, keys)
        pos = np.minimum(pos, len(self._keys) - 1)
        found = self._keys[pos] == keys
        return np.where(found, self._key_order[pos], -1)

    def working_link_ids(self, u, v, route_of) -> np.ndarray:
        """Link ids of ``u[i] -> v[i]``; raises RoutingError naming the first that is
        missing or failed, with ``route_of(i)`` describing the route that needs it."""
        lid = self.link_ids(u, v)
        broken = (lid < 0) | ~self.usable[np.maximum(lid, 0)]
        if broken.any():
            j = int(np.flatnonzero(broken)[0])
            raise RoutingError(f"{route_of(j)} needs link {self.name(u[j])} -> {self.name(v[j])}, which is "
                               "missing or failed; use policy 'shortest' to route around failures")
        return lid

    def name(self, i) -> str:
        return repr(self.nodes[int(i)])

    def resolve(self, values, what: str, listed: bool = False) -> np.ndarray:
        """Flow endpoints (ranks or node ids) -> node indices, naming the first bad flow
        (``listed``: naming the bad entry of the list ``what`` instead, ``relays[0]``)."""
        n_gpu = len(self.gpu_by_rank)

        def where(i):
            return f"{what}[{i}]:" if listed else f"flow {i}: {what}"
        if values.dtype != object:
            bad = (values < 0) | (values >= n_gpu)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise RoutingError(f"{where(i)} rank {int(values[i])} is not a GPU rank of this "
                                   f"graph (0 ... {n_gpu - 1})")
            return self.gpu_by_rank[values]
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            if isinstance(v, (int, np.integer)):
                if not 0 <= v < n_gpu:
                    raise RoutingError(f"{where(i)} rank {int(v)} is not a GPU rank of this "
                                       f"graph (0 ... {n_gpu - 1})")
                out[i] = self.gpu_by_rank[v]
            elif v in self.idx:
                out[i] = self.idx[v]
            else:
                raise RoutingError(f"{where(i)} {v!r} is not a node of this graph")
        return out

    def compact(self, nodes, transit=None) -> tuple[CompactGraph, np.ndarray]:
        """Usable links among ``nodes`` as a CompactGraph; also the global -> compact map."""
        nodes = np.asarray(nodes, dtype=np.int64)
        local = np.full(self.nv, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        ok = self.usable & (local[self.tail] >= 0) & (local[self.head] >= 0)
        links = np.flatnonzero(ok)
        tr = None if transit is None else np.asarray(transit, dtype=bool)[nodes]
        return CompactGraph(len(nodes), local[self.tail[links]], local[self.head[links]],
                            self.cables[links], links, tr), local


class Segments:
    """Accumulates segments (sparse columns) and hands out their ids."""

    def __init__(self):
        self.owner, self.link, self.frac = [], [], []
        self.count = 0

    def add(self, owner, link, frac, count: int) -> int:
        """Add ``count`` segments given as entries (local owner id, link, frac); returns the
        id of the first (ids are consecutive)."""
        first = self.count
        self.owner.append(np.asarray(owner, dtype=np.int64) + first)
        self.link.append(np.asarray(link, dtype=np.int64))
        self.frac.append(np.asarray(frac, dtype=np.float64))
        self.count += int(count)
        return first

    def finish(self):
        if not self.owner:
            return np.zeros(1, dtype=np.int64), np.empty(0, np.int32), np.empty(0)
        owner = np.concatenate(self.owner)
        link = np.concatenate(self.link)
        frac = np.concatenate(self.frac)
        order = np.argsort(owner, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=self.count))])
        return ptr.astype(np.int64), link[order].astype(np.int32), frac[order]


class ServerParts:
    """Up, down and intra-server segments of the servers of a graph, from shared templates."""

    def __init__(self, index: GraphIndex):
        self.ix = index
        servers = index.server
        members = np.flatnonzero(servers >= 0)
        self.n_servers = int(servers.max()) + 1 if members.size else 0
        order = members[np.argsort(servers[members], kind="stable")]
        bounds = np.searchsorted(servers[order], np.arange(self.n_servers + 1))
        self.local_of = np.full(index.nv, -1, dtype=np.int64)   # node -> local position
        self.sig_of = np.full(self.n_servers, -1, dtype=np.int64)
        self.templates: list[dict] = []
        signatures: dict = {}
        # internal links of each server
        internal = index.usable & (servers[index.tail] >= 0) & (servers[index.tail] == servers[index.head])
        int_links = np.flatnonzero(internal)
        by_server = servers[index.tail[int_links]]
        link_order = int_links[np.argsort(by_server, kind="stable")]
        lb = np.searchsorted(np.sort(by_server), np.arange(self.n_servers + 1))
        self.server_links = {}
        for s in range(self.n_servers):
            nodes = order[bounds[s]:bounds[s + 1]]
            if not nodes.size:
                continue
            prefix = f"s{s}/"
            names = [str(index.nodes[n]) for n in nodes]
            names = [nm[len(prefix):] if nm.startswith(prefix) else nm for nm in names]
            sort = np.argsort(names, kind="stable")
            nodes = nodes[sort]
            names = [names[i] for i in sort]
            self.local_of[nodes] = np.arange(len(nodes))
            links = link_order[lb[s]:lb[s + 1]]
            lt, lh = self.local_of[index.tail[links]], self.local_of[index.head[links]]
            lorder = np.lexsort((lh, lt))
            links, lt, lh = links[lorder], lt[lorder], lh[lorder]
            key = (tuple(names), lt.tobytes(), lh.tobytes())
            sig = signatures.get(key)
            if sig is None:
                sig = len(self.templates)
                signatures[key] = sig
                self.templates.append(dict(n=len(nodes), tail=lt, head=lh,
                                           cables=index.cables[links], kinds=index.kind[nodes],
                                           pairs={}))
            self.sig_of[s] = sig
            self.server_links[s] = links
        # per template: one row of global link ids per server using it
        self.sig_row = np.full(self.n_servers, -1, dtype=np.int64)
        for sig, t in enumerate(self.templates):
            servers_of = np.flatnonzero(self.sig_of == sig)
            self.sig_row[servers_of] = np.arange(len(servers_of))
            t["links"] = np.stack([self.server_links[int(x)] for x in servers_of])
        del self.server_links

    def template_paths(self, sig: int, a_local, b_local):
        """Entries (pair, template edge, frac) of fluid paths a -> b inside a template, and
        the pairs without a path; each pair computed once per template (kept, like the
        fabric's paths, in edge order)."""
        known = self.__dict__.setdefault("_paths", {}).setdefault(sig, PairPaths())   # atomic: one wins
        keys = np.asarray(a_local, dtype=np.int64) * (self.templates[sig]["n"] + 1) + np.asarray(b_local)
        failed: list = []

        def compute(x, y):
            t = self.templates[sig]
            g = CompactGraph(t["n"], t["tail"], t["head"], t["cables"], np.arange(len(t["tail"])))
            pair, edge, frac, bad = ecmp_fluid(g, x, y)
            if len(bad):
                failed.extend(bad.tolist())
                raise _NoPath
            return pair, edge, frac

        try:
            pair, edge, frac = known.entries(keys, np.asarray(a_local), np.asarray(b_local), compute, count=False)
        except _NoPath:
            unknown = known.rows(keys) < 0          # the pairs compute() was handed, in its order
            _, first = np.unique(keys[unknown], return_index=True)
            handed = np.flatnonzero(unknown)[first]
            return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), handed[np.asarray(failed, np.int64)])
        return pair, edge, frac, np.empty(0, np.int64)

    def segments(self, store: Segments, server, a, b, extra_link=None):
        """Segments for paths ``a[i] -> b[i]`` inside ``server[i]`` (global node indices),
        optionally with one more link per path (a NIC's uplink or downlink) added.

        Returns segment ids (one per input row).
        """
        ix = self.ix
        server, a, b = (np.asarray(x, dtype=np.int64) for x in (server, a, b))
        seg_ids = np.empty(len(server), dtype=np.int64)
        sig = self.sig_of[server]
        for s_sig in np.unique(sig):
            rows = np.flatnonzero(sig == s_sig)
            la, lb = self.local_of[a[rows]], self.local_of[b[rows]]
            same = la == lb
            pairs = np.unique(np.stack([la[~same], lb[~same]], axis=1), axis=0) if (~same).any() \
                else np.empty((0, 2), dtype=np.int64)
            pair, edge, frac, bad = self.template_paths(int(s_sig), pairs[:, 0], pairs[:, 1])
            if len(bad):
                p = pairs[bad[0]]
                r = rows[np.flatnonzero((la == p[0]) & (lb == p[1]))[0]]
                raise RoutingError(f"no working path inside server {int(server[r])} from "
                                   f"{ix.name(a[r])} to {ix.name(b[r])}")
            # template pair id of every row (-1 where a == b: no internal hop)
            code = la * (self.templates[s_sig]["n"] + 1) + lb
            pcode = pairs[:, 0] * (self.templates[s_sig]["n"] + 1) + pairs[:, 1]
            pid = np.full(len(rows), -1, dtype=np.int64)
            if len(pcode):
                pos = np.searchsorted(pcode, code[~same])
                pid[~same] = pos
            # instantiate per (server, pair, extra) row; rows are unique by construction
            p_ptr = np.concatenate([[0], np.cumsum(np.bincount(pair, minlength=len(pairs)))])
            p_order = np.argsort(pair, kind="stable")
            counts = np.where(pid >= 0, p_ptr[np.maximum(pid, 0) + 1] - p_ptr[np.maximum(pid, 0)], 0)
            ent = p_order[_gather_ranges(p_ptr, pid, counts)]
            owner = np.repeat(np.arange(len(rows)), counts)
            srv_row = self.sig_row[server[rows]]
            table = self.templates[s_sig]["links"]
            glink = table[srv_row[owner], edge[ent]] if len(ent) else np.empty(0, dtype=np.int64)
            gfrac = frac[ent]
            if extra_link is not None:
                ex = np.asarray(extra_link, dtype=np.int64)[rows]
                owner = np.concatenate([owner, np.arange(len(rows))])
                glink = np.concatenate([glink, ex])
                gfrac = np.concatenate([gfrac, np.ones(len(rows))])
            first = store.add(owner, glink, gfrac, len(rows))
            seg_ids[rows] = first + np.arange(len(rows))
        return seg_ids


def _gather_ranges(ptr, pid, counts):
    starts = np.where(pid >= 0, ptr[np.maximum(pid, 0)], 0)
    return ranges(starts, counts)


def unique_pairs(a, b, n_nodes: int):
    """The distinct pairs ``(a[i], b[i])`` of node indices (< ``n_nodes``) in the order of
    ``a * n_nodes + b`` (as ``np.unique`` of that key returns them), and each input's pair:
    ``(ua, ub, inverse)``. Without a sort when the distinct nodes of each side make a small
    table (a million-flow all-to-all has few (GPU, NIC) pairs): both sides are numbered
    in node order and the pairs found through a mask over that table.

    >>> ua, ub, inv = unique_pairs(np.array([3, 1, 3]), np.array([0, 2, 0]), 4)
    >>> ua.tolist(), ub.tolist(), inv.tolist()
    ([1, 3], [2, 0], [1, 0, 1])
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)

    def numbered(x):
        seen = np.zeros(n_nodes, dtype=bool)
        seen[x] = True
        number = np.cumsum(seen) - 1
        return number[x], np.flatnonzero(seen)

    if len(a) < 4096:
        table = None
    else:
        (na, nodes_a), (nb, nodes_b) = numbered(a), numbered(b)
        table = len(nodes_a) * len(nodes_b)
    if table is None or table > max(4 * len(a), 1 << 20):
        key = a * n_nodes + b
        uniq, inv = np.unique(key, return_inverse=True)
        return uniq // n_nodes, uniq % n_nodes, inv.reshape(-1)
    key = na * len(nodes_b) + nb
    mask = np.zeros(table, dtype=bool)
    mask[key] = True
    number = np.cumsum(mask) - 1
    cells = np.flatnonzero(mask)
    return nodes_a[cells // len(nodes_b)], nodes_b[cells % len(nodes_b)], number[key]
