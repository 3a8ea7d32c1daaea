"""NCCL-style collectives on a cluster graph: completion time, algbw, busbw, bottlenecks.

Time model
----------
An algorithm is a sequence of steps; a step is a set of concurrent flows. A step's time is

    latency + transfer,

* ``transfer``: all flows of the step start together and share the links max-min fairly;
  a flow that finishes releases its bandwidth to the others (:func:`completion_times`);
  the step ends with its last flow. Link capacities are the raw rates times each
  technology's measured efficiency from the catalogue (1 where none is known, or where the
  graph has no ``tech``); ``efficiency=`` overrides it (one number, or a dict by tech):
  this is the calibration hook, applied once here and nowhere else.
* ``latency``: NCCL's per-hop software latency for the slowest kind of hop in the step
  (NVLink, PCIe or network; NCCL 2.30 src/graph/tuning.cc, Simple protocol by default) plus
  the largest path latency of the step's flows (sum of link latencies along the path,
  fluid-weighted). ``step_latency=`` replaces it by a fixed alpha per step.

A collective adds NCCL's base latency once (``base_latency=`` overrides). Identical steps
(a ring's 2(p-1) steps, say) are solved once, and the distinct steps of every candidate
algorithm are solved together in one batched call (each step on its own copy of the links,
with its own event clock). Pipelined algorithms (tree all-reduce, ring broadcast / reduce)
move ``chunk``-byte pieces (default 512 KiB, NCCL's Simple step) through their stages and pay
their depth in latencies once, not once per chunk: NCCL keeps 8 chunks in flight per channel.
Sizes follow nccl-tests: all-reduce the per-rank buffer, all-gather / reduce-scatter the
full array, all-to-all the per-rank buffer (``size / p`` to each peer, the self chunk stays
local), broadcast / reduce / send-recv the message. ``busbw = algbw x factor`` with
nccl-tests' factors.

Algorithms (``ALGORITHMS[op]``):

* ``ring``: all-reduce, reduce-scatter, all-gather, and pipelined broadcast / reduce. A ring
  uses ``channels`` rings (default: the NIC count of a server, at most the ranks per server, when the ranks span several
  servers, else 1). Ring ``c`` visits the GPUs of the ``k``-th server starting from local GPU
  ``(c - k) mod m``, so it leaves a server from the GPU whose rail the next server is entered
  on: every cross-server hop but the wrap-around stays on one rail. Hops that change rail
  are routed with PXN (over NVLink to the right rail first).
* ``tree``: NCCL's double binary tree all-reduce: two trees, each carrying half the buffer,
  the second the first mirrored (even size) or shifted (odd), so a rank inner in one is a
  leaf in the other; across servers the trees join servers and each server is a chain
  starting at the GPU of the channel's rail. Reduce up and broadcast down are pipelined.
* ``halving_doubling``: Rabenseifner (recursive-halving reduce-scatter, recursive-doubling
  all-gather), power-of-two ranks.
* ``hierarchical``: reduce-scatter inside each server (ring over NVLink), all-reduce of the
  ``1/m`` shards across servers (one ring per local index, i.e. per rail), all-gather inside.
* ``nvls``: NVLink SHARP in-switch reduction on one NVSwitch domain: each GPU sends its buffer
  and its reduced shard up (``n (1 + 1/m)``) and receives its reduced shard and the multicast
  result (the same), at NCCL's NVLS efficiency of the NVLink rate (``NVLS_EFFICIENCY``,
  counted as extra wire bytes).
* ``direct`` (every peer at once) and ``pairwise`` (p-1 shifted exchanges) all-to-all;
  ``binomial`` broadcast / reduce; ``direct`` send/recv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

import topologies as tp

from . import _checks
from .routing import LinkTable, route
from .solver import max_min_fair
from .timing import completion_times
from .traffic import Flows

__all__ = ["collective", "collective_variants", "concurrent", "CollectiveResult", "ConcurrentResult", "CollectiveStep", "OPS", "ALGORITHMS",
           "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY", "NVLS_EFFICIENCY", "DEFAULT_CHUNK"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "send_recv")
ALGORITHMS = {
    "all_reduce": ("ring", "tree", "halving_doubling", "hierarchical", "nvls"),
    "reduce_scatter": ("ring", "halving_doubling"),
    "all_gather": ("ring", "halving_doubling"),
    "all_to_all": ("pairwise", "direct"),
    "broadcast": ("ring", "binomial"),
    "reduce": ("ring", "binomial"),
    "send_recv": ("direct",),
}
PROTOCOLS = ("LL", "LL128", "Simple")
# NCCL 2.30 src/graph/tuning.cc (../shared/REFERENCE.md), microseconds, (LL, LL128, Simple)
NCCL_BASE_LATENCY = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4)}
NCCL_HOP_LATENCY = {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7), "network": (2.7, 4.0, 14.0)}
# NCCL src/tuning (nvls.cc) nvlsEfficiency: the fraction of the NVLink rate NVLS reaches,
# Hopper 0.85, Blackwell 0.74 (Volta and Ampere have no NVLS); keyed by our GPU types
NVLS_EFFICIENCY = {"h100_sxm": 0.85, "b200": 0.74, "gb200": 0.74}
# NCCL's Simple protocol moves its 4 MiB channel buffer (NCCL_BUFFSIZE) in 8 steps
# (NCCL_STEPS): 512 KiB per pipeline chunk
DEFAULT_CHUNK = 512 * 1024


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' bus-bandwidth factor.

    >>> busbw_factor("all_reduce", 8)
    1.75
    """
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (p - 1) / p
    return 1.0


@dataclass(frozen=True)
class CollectiveStep:
    """One distinct step: ``count`` identical steps of ``flows`` flows of ``bytes`` each
(bytes on the wire; for ``nvls`` the in-switch reduction's NCCL efficiency is counted as
extra wire bytes).

    ``transfer`` and ``latency`` are seconds per step; ``bottleneck`` lists the saturated
    links that are the max-min bottleneck of some flow of the step, as ``(src, dst, tier,
    utilization)``, the link whose flows would take longest at the step's first rates first
    (the links that set the step time).
    """

    count: int
    flows: int
    bytes: float
    transfer: float
    latency: float
    bottleneck: tuple
    latency_count: int | None = None

    @property
    def time(self) -> float:
        """Seconds for all ``count`` steps: ``count`` transfers and ``latency_count`` (default
        ``count``) latencies; a pipeline pays its depth in latencies, not one per chunk."""
        paid = self.count if self.latency_count is None else self.latency_count
        return self.count * self.transfer + paid * self.latency


@dataclass(frozen=True)
class CollectiveResult:
    """Result of :func:`collective`.

    ``time`` seconds; ``algbw = size / time`` and ``busbw`` bytes/s (nccl-tests);
    ``steps`` the distinct steps; ``link_utilization`` per link (graph edge order), the
    time-weighted mean over the transfers; ``candidates`` the time of every algorithm solved;
    ``pruned`` the algorithms ``"auto"`` did not solve, with the lower bound (s) that showed
    they cannot beat the chosen one.
    """

    op: str
    algorithm: str
    size: float
    ranks: int
    time: float
    algbw: float
    busbw: float
    steps: tuple
    link_utilization: np.ndarray
    links: object
    candidates: dict = field(default_factory=dict)
    pruned: dict = field(default_factory=dict)

    def to_dataframe(self):
        """The steps as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame([dict(count=s.count, latency_count=s.latency_count, flows=s.flows, bytes=s.bytes, transfer=s.transfer,
                                  latency=s.latency, time=s.time,
                                  bottleneck_tier=s.bottleneck[0][2] if s.bottleneck else "",
                                  bottleneck=" ".join(f"{u}->{v}" for u, v, _, _ in s.bottleneck[:3]))
                             for s in self.steps])


# --------------------------------------------------------------------------- steps
@dataclass(frozen=True)
class _Step:
    """``count`` repetitions of the concurrent ``flows`` ((src, dst, bytes); src / dst are rank
    positions or node ids); the step latency is paid ``latency_count`` times in all."""

    count: int
    flows: list
    latency_count: int


def _server_groups(graph, ranks):
    """Rank positions grouped by server, servers in order of first appearance."""
    nodes = tp.gpus(graph)
    servers: dict = {}
    for pos, r in enumerate(ranks):
        servers.setdefault(graph.nodes[nodes[r]].get("server", ("rank", r)), []).append(pos)
    return list(servers.values())


def _ring_orders(groups, channels):
    """Ring orders (positions), one per channel: ring ``c`` enters the ``k``-th server at its
    local GPU ``(c - k) mod m``, the rail the previous server was left by."""
    rings = []
    for c in range(channels):
        ring = []
        for idx, members in enumerate(groups):
            k = (c - idx) % len(members)
            ring.extend(members[k:] + members[:k])
        rings.append(ring)
    return rings


def _btree(u):
    """NCCL's binary tree over 0 ... u-1 (parent per node, -1 at the root 0): a node's
    parent clears its lowest set bit and sets the next, so odd nodes are leaves."""
    parent = [-1] * u
    for r in range(1, u):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parent[r] = up if up < u else r ^ bit
    return parent


def _double_btree(u):
    """The two trees of NCCL's double binary tree: the second is the first mirrored (even u)
    or shifted by one (odd u), so a node inner in one tree is a leaf in the other."""
    first = _btree(u)
    if u % 2 == 0:
        to, back = (lambda x: u - 1 - x), (lambda y: u - 1 - y)
    else:
        to, back = (lambda x: (x + 1) % u), (lambda y: (y - 1) % u)
    second = [back(first[to(x)]) if first[to(x)] >= 0 else -1 for x in range(u)]
    return first, second


def _tree_edges(groups, parent_of_group, channel):
    """(child, parent) rank positions of one tree: the tree over servers (or ranks), each
    server a chain that starts at local GPU ``channel mod m`` (its NIC's rail)."""
    chains = [g[channel % len(g):] + g[:channel % len(g)] for g in groups]
    edges = []
    for gi, chain in enumerate(chains):
        up = parent_of_group[gi]
        if up >= 0:
            edges.append((chain[0], chains[up][0]))
        edges.extend((chain[j], chain[j - 1]) for j in range(1, len(chain)))
    return edges


def _pipeline(stages, k, piece):
    """Steps of ``k`` chunks of ``piece`` bytes flowing through the stages in order (a chunk
    crosses stage ``t`` at pipeline step ``chunk + t``). Distinct active-stage ranges become
    one step each; the pipeline pays its depth (number of stages) in step latencies, once:
    NCCL keeps several chunks in flight per channel (NCCL_STEPS = 8), so later chunks'
    latencies overlap the transfers."""
    n = len(stages)
    keys = [((0, s), 1) for s in range(min(k, n) - 1)]
    if k >= n:
        keys.append(((0, n - 1), k - n + 1))
    else:
        keys.extend(((s - k + 1, s), 1) for s in range(k - 1, n))
    keys.extend(((s - k + 1, n - 1), 1) for s in range(max(k, n), k + n - 1))
    steps = [_Step(c, [(a, b, piece) for t in range(lo, hi + 1) for a, b in stages[t]], 0) for (lo, hi), c in keys]
    widest = max(range(len(steps)), key=lambda i: len(steps[i].flows))
    steps[widest] = _Step(steps[widest].count, steps[widest].flows, n)
    return steps


def _steps(op, algorithm, p, size, layout, chunk):
    """The algorithm as a list of :class:`_Step`."""
    rings, groups, channels = layout["rings"], layout["groups"], layout["channels"]
    if op == "send_recv":
        return [_Step(1, [(0, 1, size)], 1)]
    if op == "all_to_all":
        per = size / p
        if algorithm == "direct":
            return [_Step(1, [(i, j, per) for i in range(p) for j in range(p) if i != j], 1)]
        return [_Step(1, [(i, (i + s) % p, per) for i in range(p)], 1) for s in range(1, p)]
    if algorithm == "halving_doubling":    # Rabenseifner; p is a power of two
        k = p.bit_length() - 1
        halving = [_Step(1, [(i, i ^ (p >> (s + 1)), size / 2 ** (s + 1)) for i in range(p)], 1) for s in range(k)]
        doubling = [_Step(1, [(i, i ^ (1 << s), size / p * 2 ** s) for i in range(p)], 1) for s in range(k)]
        return {"reduce_scatter": halving, "all_gather": doubling}.get(op, halving + doubling)
    if algorithm == "ring" and op in ("all_reduce", "reduce_scatter", "all_gather"):
        per = size / p / len(rings)
        count = 2 * (p - 1) if op == "all_reduce" else p - 1
        return [_Step(count, [(ring[i], ring[(i + 1) % p], per) for ring in rings for i in range(p)], count)]
    if algorithm == "hierarchical":
        m, n_srv = len(groups[0]), len(groups)
        intra = [(g[i], g[(i + 1) % m], size / m) for g in groups for i in range(m)]
        inter = [(groups[x][j], groups[(x + 1) % n_srv][j], size / (m * n_srv))
                 for j in range(m) for x in range(n_srv)]
        steps = [_Step(2 * (n_srv - 1), inter, 2 * (n_srv - 1))]
        if m > 1:       # the reduce-scatter and all-gather inside the servers (one flow list)
            steps = [_Step(m - 1, intra, m - 1)] + steps + [_Step(m - 1, intra, m - 1)]
        return steps
    if algorithm == "nvls":
        wire = size * (1 + 1 / p) / layout["nvls_efficiency"]
        switch = layout["switch"]
        return [_Step(1, [(i, switch, wire) for i in range(p)] + [(switch, i, wire) for i in range(p)], 1)]
    if algorithm == "tree":
        units = groups if len(groups) > 1 else [[i] for i in range(p)]
        half = size / 2 / channels
        k = max(1, math.ceil(half / chunk))
        edges = []
        for c in range(channels):
            for parent in _double_btree(len(units)):
                edges.append(_tree_edges(units, parent, c))
        depth_stages = []
        for tree in edges:
            parent = dict(tree)
            depth = {}
            for child in parent:
                d, x = 0, child
                while x in parent:
                    x, d = parent[x], d + 1
                depth[child] = d
            depth_stages.append((tree, depth))
        D = max(max(dep.values(), default=0) for _, dep in depth_stages)
        stages = [[] for _ in range(2 * D)]
        for tree, depth in depth_stages:
            for child, par in tree:
                d = depth[child]
                stages[D - d].append((child, par))          # reduce, up the tree
                stages[D + d - 1].append((par, child))      # broadcast, down again
        return _pipeline(stages, k, half / k)
    if algorithm == "binomial":
        steps = []
        for s in range(math.ceil(math.log2(p))):
            span = 1 << s
            flows = [(i, i + span, size) for i in range(span) if i + span < p]
            steps.append(_Step(1, flows if op == "broadcast" else [(b, a, n) for a, b, n in flows], 1))
        return steps if op == "broadcast" else steps[::-1]
    # pipelined ring broadcast / reduce: the chain root -> ... in `chunk` pieces
    k = max(1, math.ceil(size / chunk))
    chain = rings[0]
    hops = [[(chain[j], chain[j + 1])] for j in range(p - 1)]
    if op == "reduce":
        hops = [[(b, a)] for [(a, b)] in reversed(hops)]
    return _pipeline(hops, k, size / k)


def _efficiency(tech, efficiency) -> float:
    """The fraction of ``tech``'s raw rate reached: ``efficiency`` overrides (one number, or
    by tech), else the catalogue's (1 for an unknown technology)."""
    if isinstance(efficiency, dict) and tech in efficiency:
        return float(efficiency[tech])
    if isinstance(efficiency, (int, float)):
        return float(efficiency)
    try:
        eff = tp.get_link(tech).efficiency if tech else None
    except ValueError:
        eff = None
    return 1.0 if eff is None else float(eff)


def _effective_capacity(rm, efficiency, links=None):
    """Capacities (bytes/s) of ``links`` (default ``rm.links``) scaled by each technology's
    efficiency (:func:`_efficiency`)."""
    links = rm.links if links is None else links
    return links.capacity * np.array([_efficiency(tech, efficiency) for tech in links.tech], dtype=np.float64)


def _lower_bound(graph, ranks, steps, base, protocol, step_latency, efficiency) -> float:
    """A time (s) the candidate cannot beat, without routing. In every step each GPU sends
    and receives its bytes through at most its links' effective capacity (each link
    counted at most at the capacity of the hop after it, unless that is a GPU: a GPU behind
    one NIC sends at the NIC's rate), each server's bytes to other servers leave through at most the effective
    capacity of the links leaving the server, and every step pays at least the smallest
    NCCL hop latency (or ``step_latency``)."""
    nodes = tp.gpus(graph)
    cap = lambda d: d.get("capacity", 0.0) * _efficiency(d.get("tech", ""), efficiency)  # noqa: E731

    def two_hop(g, v):          # g: the graph, or its reverse view for what v receives
        total = 0.0
        for _, u, d in g.out_edges(v, data=True):
            beyond = sum(cap(e) for _, w, e in g.out_edges(u, data=True) if w != v)
            # bytes through a NIC, PCIe or NVSwitch hop must go on (a GPU may be the end)
            total += cap(d) if g.nodes[u].get("kind") == "gpu" else min(cap(d), beyond)
        return total

    reverse = graph.reverse(copy=False)
    out_gpu = {r: two_hop(graph, nodes[r]) for r in set(ranks)}
    in_gpu = {r: two_hop(reverse, nodes[r]) for r in set(ranks)}
    server = {r: graph.nodes[nodes[r]].get("server") for r in set(ranks)}
    out_srv, in_srv = {}, {}
    for s_id in {s for s in server.values() if s is not None}:
        inside = {nodes[r] for r in server if server[r] == s_id}     # every rank's GPU is inside
        todo = list(inside)
        while todo:                           # the server's nodes: neighbours with its id
            v = todo.pop()
            for w in graph.successors(v):
                if w not in inside and graph.nodes[w].get("server") == s_id:
                    inside.add(w)
                    todo.append(w)
        out_srv[s_id] = sum(cap(d) for v in inside for _, w, d in graph.out_edges(v, data=True) if w not in inside)
        in_srv[s_id] = sum(cap(d) for v in inside for w, _, d in graph.in_edges(v, data=True) if w not in inside)
    latency = float(step_latency) if step_latency is not None else \
        min(h[PROTOCOLS.index(protocol)] for h in NCCL_HOP_LATENCY.values()) * 1e-6
    # per rank position: its rank's GPU and server capacities (index -1: not a GPU end)
    order = sorted(set(ranks))
    where = {r: i for i, r in enumerate(order)}
    pos_rank = np.array([where[r] for r in ranks] + [-1])
    servers = sorted({s for s in server.values() if s is not None}, key=str)
    s_index = {s_id: i for i, s_id in enumerate(servers)}
    rank_srv = np.array([s_index.get(server[r], -1) for r in order] + [-1])
    caps = [np.array([out_gpu[r] for r in order]), np.array([in_gpu[r] for r in order]),
            np.array([out_srv[s_id] for s_id in servers]), np.array([in_srv[s_id] for s_id in servers])]
    total = base
    for st in steps:
        x = pos_rank[[f[0] if isinstance(f[0], int) else -1 for f in st.flows]]
        y = pos_rank[[f[1] if isinstance(f[1], int) else -1 for f in st.flows]]
        n = np.array([f[2] for f in st.flows], dtype=np.float64)
        sx, sy = rank_srv[x], rank_srv[y]
        cross = (sx >= 0) & (sy >= 0) & (sx != sy)
        parts = [(x >= 0, x), (y >= 0, y), (cross, sx), (cross, sy)]
        transfer = 0.0
        for (mask, key), c in zip(parts, caps):
            if mask.any():
                amount = np.bincount(key[mask], weights=n[mask], minlength=len(c))
                with np.errstate(divide="ignore", invalid="ignore"):
                    need = np.where(amount > 0, amount / c, 0.0)
                transfer = max(transfer, float(need.max()))
        paid = st.count if st.latency_count is None else st.latency_count
        total += st.count * transfer + paid * latency
    return total


def _path_latency(rm) -> np.ndarray:
    """Per flow: sum over its links of fraction x latency (s), from the factored matrix."""
    owner = np.repeat(np.arange(rm.n_segments), np.diff(rm.seg_ptr))
    seg_latency = np.bincount(owner, weights=rm.seg_frac * rm.links.latency[rm.seg_link],
                              minlength=rm.n_segments)
    used = rm.flow_seg >= 0
    coef = 1.0 if rm.flow_coef is None else rm.flow_coef
    return np.where(used, seg_latency[np.maximum(rm.flow_seg, 0)] * coef, 0.0).sum(axis=1)


def _link_classes(graph, rm):
    """Per link: 2 network (touches a switch), 1 PCIe / host, 0 NVLink."""
    kind = {n: d.get("kind") for n, d in graph.nodes(data=True)}
    net = np.array([kind[u] == "switch" or kind[v] == "switch" for u, v in zip(rm.links.src, rm.links.dst)])
    nvl = np.array([str(t).startswith("nvlink") for t in rm.links.tech])
    return np.where(net, 2, np.where(nvl, 0, 1))


def _route_step(graph, ranks, flows_pos, policy, policy_options):
    """The step's flows routed; also their sizes (bytes). Endpoints are rank positions, or
    for in-switch algorithms a GPU position and the switch's node id: such a flow is the one
    GPU-switch link."""
    size = np.array([n for _, _, n in flows_pos], dtype=np.float64)
    if any(isinstance(a, str) or isinstance(b, str) for a, b, _ in flows_pos):
        import scipy.sparse as sp

        from .routing import LinkTable, RoutingMatrix

        nodes = tp.gpus(graph)
        end = lambda x: x if isinstance(x, str) else nodes[ranks[x]]  # noqa: E731
        index = {(u, v): i for i, (u, v) in enumerate(graph.edges())}
        try:
            rows = [index[(end(a), end(b))] for a, b, _ in flows_pos]
        except KeyError as err:
            raise ValueError(f"in-switch step: no link {err.args[0]}") from None
        links = LinkTable.from_graph(graph)
        matrix = sp.csc_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))),
                               shape=(len(links), len(rows)))
        rm = RoutingMatrix.from_scipy(matrix, capacity=links.capacity)
        return replace(rm, links=links, policy="in-switch"), size
    src = np.array([ranks[a] for a, _, _ in flows_pos])
    dst = np.array([ranks[b] for _, b, _ in flows_pos])
    return route(graph, Flows(src, dst, size), policy=policy, **policy_options), size


def _step_latency(graph, rm, protocol, step_latency) -> float:
    """NCCL per-hop latency of the step's slowest hop class + its largest path latency (s)."""
    if step_latency is not None:
        return float(step_latency)
    classes = _link_classes(graph, rm)
    used = np.flatnonzero(rm.link_loads(np.ones(rm.n_flows)) > 0)
    worst = ("nvlink", "pcie", "network")[int(classes[used].max()) if used.size else 0]
    hop = NCCL_HOP_LATENCY[worst][PROTOCOLS.index(protocol)] * 1e-6
    return hop + float(_path_latency(rm).max(initial=0.0))


def _stack(matrices, separate_links: bool):
    """One RoutingMatrix holding the flows of several, in order. With ``separate_links``
    each matrix gets its own copy of the links it uses (block diagonal: independent
    problems, solved together); also returns, per matrix, the original index of its links."""
    from .routing import RoutingMatrix

    K = max(m.slots for m in matrices)
    seg_off = np.cumsum([0] + [m.n_segments for m in matrices])
    ent_off = np.cumsum([0] + [len(m.seg_link) for m in matrices])
    ptr = np.concatenate([[0]] + [m.seg_ptr[1:] + ent_off[i] for i, m in enumerate(matrices)])
    slots, coefs, seg_links, used = [], [], [], []
    link_off = 0
    for i, m in enumerate(matrices):
        s = np.full((m.n_flows, K), -1, dtype=np.int32)
        s[:, :m.slots] = np.where(m.flow_seg >= 0, m.flow_seg + seg_off[i], -1)
        c = np.zeros((m.n_flows, K))
        c[:, :m.slots] = 1.0 if m.flow_coef is None else m.flow_coef
        slots.append(s)
        coefs.append(c)
        if separate_links:
            links, local = np.unique(m.seg_link, return_inverse=True)
            seg_links.append((local + link_off).astype(np.int32))
            used.append(links)
            link_off += len(links)
        else:
            seg_links.append(m.seg_link)
    first = matrices[0]
    capacity = np.concatenate([first.capacity[u] for u in used]) if separate_links else first.capacity
    stacked = RoutingMatrix(seg_ptr=ptr, seg_link=np.concatenate(seg_links),
                            seg_frac=np.concatenate([m.seg_frac for m in matrices]),
                            flow_seg=np.concatenate(slots), flow_coef=np.concatenate(coefs),
                            capacity=capacity, weights=np.concatenate([m.weights for m in matrices]),
                            demands=np.concatenate([m.demands for m in matrices]),
                            links=None if separate_links else first.links)
    return (stacked, used) if separate_links else stacked


def _solve_steps(rms, sizes, cap):
    """Transfer time (s), per-link utilisation and critical links of many steps, solved in
    one call: each step on its own copy of its links, each with its own event clock.
    ``cap`` is (links,) or (scenarios, links); with scenarios the result is a list per
    scenario. A step with a flow that can never move gets transfer ``inf``."""
    batched = np.ndim(cap) == 2
    caps = np.atleast_2d(cap)
    if len(rms) == 1:
        block, used = rms[0], [np.arange(rms[0].n_links)]
        block_cap = caps
    else:
        block, used = _stack(rms, separate_links=True)
        block_cap = np.concatenate([caps[:, u] for u in used], axis=1)
    counts = [m.n_flows for m in rms]
    groups = np.repeat(np.arange(len(rms)), counts)
    size = np.concatenate(sizes)
    arg = block_cap if batched else block_cap[0]
    done = completion_times(block, size, arg, groups=groups if len(rms) > 1 else None)
    alloc = max_min_fair(block, arg)
    finish, stalled = np.atleast_2d(done.finish), np.atleast_2d(done.stalled)
    rates = np.atleast_2d(np.asarray(alloc.rates, dtype=np.float64))
    util_all = np.atleast_2d(np.asarray(alloc.utilization, dtype=np.float64))
    bott_all = np.atleast_2d(alloc.bottleneck)
    results = []
    for b in range(caps.shape[0]):
        with np.errstate(divide="ignore"):
            flow_time = np.where(rates[b] > 0, size / np.where(rates[b] > 0, rates[b], 1.0), np.inf)
        out = []
        f0 = l0 = 0
        for m, u, n in zip(rms, used, counts):
            fs, ls = slice(f0, f0 + n), slice(l0, l0 + len(u))
            f0, l0 = f0 + n, l0 + len(u)
            transfer = np.inf if stalled[b, fs].any() else float(finish[b, fs].max(initial=0.0))
            util = np.zeros(m.n_links)
            util[u] = util_all[b, ls]
            # critical links: those holding the flows that would take longest at the first rates
            bott = bott_all[b, fs]
            held = bott >= 0
            critical = np.full(m.n_links, -1.0)
            np.maximum.at(critical, u[bott[held] - ls.start], flow_time[fs][held])
            hot = np.flatnonzero(critical >= 0)
            hot = hot[np.argsort(-critical[hot], kind="stable")]
            bottleneck = tuple((m.links.src[l], m.links.dst[l], m.links.tier[l], float(util[l])) for l in hot[:8])
            out.append((transfer, util, bottleneck))
        results.append(out)
    return results if batched else results[0]


def _policy_options(policy, policy_options, pxn) -> dict:
    options = dict(policy_options or {})
    if policy in ("ecmp", "ecmp_hash"):
        options.setdefault("pxn", pxn)
    return options


def _base_latency(protocol, base_latency) -> float:
    if base_latency is not None:
        return float(base_latency)
    return NCCL_BASE_LATENCY["ring"][PROTOCOLS.index(protocol)] * 1e-6


def _participants(graph, op, ranks, channels):
    """Checked ranks and their layout: ``groups`` (rank positions by server), ``rings`` (one
    ring order per channel) and ``channels`` (default: the NICs of a server when the ranks
    span several servers, else 1)."""
    nodes = tp.gpus(graph)
    n_gpu = len(nodes)
    ranks = list(range(n_gpu)) if ranks is None else _checks.rank_indices(graph, ranks)
    if len(ranks) < 2 or len(set(ranks)) != len(ranks):
        raise ValueError(f"ranks must be at least 2 distinct GPU ranks in 0 ... {n_gpu - 1}, got {ranks[:8]}")
    if op == "send_recv":
        ranks = ranks[:2]
    groups = _server_groups(graph, ranks)
    if channels is None:
        first = graph.nodes[nodes[ranks[0]]].get("server")
        nics = [d for _, d in graph.nodes(data=True)
                if d.get("kind") == "nic" and d.get("role") == "compute" and d.get("server") == first]
        # one ring per NIC, but no more than the GPUs a server contributes (a ring through
        # one GPU per server can only use that GPU's NIC: more channels change nothing)
        channels = max(1, min(len(nics), max(len(g) for g in groups))) if len(groups) > 1 else 1
    channels = _checks.integer("channels", channels)
    layout = dict(groups=groups, rings=_ring_orders(groups, channels), channels=channels)
    layout["nvls"] = _nvls_domain(graph, [nodes[r] for r in ranks], len(groups))
    if isinstance(layout["nvls"], tuple):
        layout["switch"], layout["nvls_efficiency"] = layout["nvls"]
    return ranks, layout


def _nvls_domain(graph, gpu_nodes, n_servers):
    """(switch node, NVLS efficiency) when the GPUs share one NVSwitch with NVLS support,
    else the reason they do not (a string)."""
    if n_servers > 1:
        return f"the ranks span {n_servers} servers (NVLS reduces inside one NVSwitch domain)"
    switches = {v for g in gpu_nodes for v in graph.successors(g) if graph.nodes[v].get("kind") == "nvswitch"}
    if len(switches) != 1 or not all(graph.has_edge(g, next(iter(switches))) for g in gpu_nodes):
        return "the ranks do not all hang off one NVSwitch"
    gpu_types = {graph.nodes[g].get("gpu_type") for g in gpu_nodes}
    eff = {NVLS_EFFICIENCY.get(t) for t in gpu_types}
    if None in eff or len(eff) != 1:
        return f"GPU type {sorted(map(str, gpu_types))} has no NVLS (NCCL: Hopper and Blackwell only)"
    return next(iter(switches)), eff.pop()


def _unavailable(algorithm, p, layout) -> str | None:
    """Why ``algorithm`` cannot run on these ranks, or None."""
    if algorithm == "halving_doubling" and p & (p - 1):
        return f"needs a power-of-two number of ranks, got {p}"
    if algorithm == "nvls" and isinstance(layout["nvls"], str):
        return f"needs every rank on one NVSwitch with NVLS: {layout['nvls']}"
    if algorithm == "hierarchical":
        sizes = {len(g) for g in layout["groups"]}
        if len(layout["groups"]) < 2 or len(sizes) != 1:
            return ("needs ranks on at least 2 servers with the same number of ranks on each, got "
                    f"{len(layout['groups'])} server(s) with {sorted(sizes)} ranks")
    return None


def _check_arguments(op, algorithm, protocol, size, chunk):
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    allowed = ALGORITHMS[op]
    if algorithm != "auto" and algorithm not in allowed:
        raise ValueError(f"algorithm for {op} must be 'auto' or one of {', '.join(allowed)}, got {algorithm!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    _checks.positive_number("size", size, "bytes")
    _checks.positive_number("chunk", chunk, "bytes")


def collective(graph, op: str, size: float, *, ranks=None, algorithm: str = "auto",
               policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK,
               efficiency=None, step_latency: float | None = None,
               base_latency: float | None = None) -> CollectiveResult:
    """Time a collective on a cluster graph.

    Parameters
    ----------
    graph : networkx.DiGraph
    op : str
        One of ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``,
        ``broadcast``, ``reduce``, ``send_recv``.
    size : float
        Bytes, as nccl-tests counts them for ``op`` (see the module docstring).
    ranks : sequence of int, optional
        GPU ranks taking part, in order (placement); default every GPU. The first rank is
        the root of broadcast / reduce and the sender of send/recv.
    algorithm : str
        ``"auto"`` (solve every algorithm of ``ALGORITHMS[op]`` that can run on these ranks,
        all their steps in one batched call, and keep the fastest) or one of them.
    policy, policy_options, pxn
        Routing policy (``flowsolver.POLICIES``) and its options (``subflows``, ``seed``); PXN for cross-rail hops.
    channels : int, optional
        Rings (and tree pairs) run side by side (default: NICs per server when the ranks
        span servers, else 1).
    protocol : {"LL", "LL128", "Simple"}
        NCCL protocol whose latency constants are used.
    chunk : float
        Pipeline chunk of tree all-reduce and ring broadcast / reduce, bytes (default
        512 KiB: NCCL's 4 MiB buffer over its 8 steps).
    efficiency : float or dict, optional
        Fraction of the raw link rate reached (all links, or by tech); default the catalogue's.
    step_latency, base_latency : float, optional
        Override the per-step latency (alpha, s) and the per-collective base latency (s).

    Examples
    --------
    >>> import topologies as tp
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32, algorithm="ring")
    >>> round(r.busbw / 1e9)                     # NVLink 4 at NCCL's 20.6 GB/s per link
    370
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32)
    >>> r.algorithm, round(r.busbw / 1e9)        # in-switch reduction (measured ~480 GB/s)
    ('nvls', 490)
    """
    _check_arguments(op, algorithm, protocol, size, chunk)
    _checks.checked_graph(graph)
    return _collective(graph, op, float(size), [ranks], algorithm, policy, policy_options, channels, pxn,
                       protocol, float(chunk), efficiency, step_latency, base_latency)


def _time_plans(graph, ranks, plans, policy, options, efficiency, scenarios, protocol, step_latency, base):
    """Route every distinct step of ``plans`` (algorithm -> steps) once and solve them all in
    one batched call; per scenario (``scenarios``: the graph, or its same-structure
    variants) its link table and ``{algorithm: (time, steps, utilisation)}``."""
    distinct: dict = {}
    for steps in plans.values():
        for st in steps:
            distinct.setdefault(id(st.flows), st.flows)
    routed = {key: _route_step(graph, ranks, flows, policy, options) for key, flows in distinct.items()}
    keys = list(routed)
    rms = [routed[k][0] for k in keys]
    tables = [rms[0].links] if len(scenarios) == 1 and scenarios[0] is graph else \
        [LinkTable.from_graph(g) for g in scenarios]
    caps = np.stack([_effective_capacity(rms[0], efficiency, t) for t in tables])
    solved_all = _solve_steps(rms, [routed[k][1] for k in keys], caps)
    timed = []
    for g_b, table, solved_b in zip(scenarios, tables, solved_all):
        solved = dict(zip(keys, solved_b))
        latency = {k: _step_latency(g_b, replace(routed[k][0], links=table), protocol, step_latency) for k in keys}
        results = {}
        for alg, steps in plans.items():
            parts, util_time, busy, total = [], np.zeros(rms[0].n_links), 0.0, base
            for st in steps:
                transfer, util, bottleneck = solved[id(st.flows)]
                step = CollectiveStep(count=st.count, flows=len(st.flows), bytes=st.flows[0][2], transfer=transfer,
                                      latency=latency[id(st.flows)], bottleneck=bottleneck,
                                      latency_count=st.latency_count)
                parts.append(step)
                total += step.time
                if np.isfinite(transfer):
                    util_time += util * st.count * transfer
                    busy += st.count * transfer
            results[alg] = (total, tuple(parts), util_time / busy if busy > 0 else util_time)
        timed.append((table, results))
    return timed


def _collective(graph, op, size, rank_groups, algorithm, policy, policy_options, channels, pxn, protocol,
                chunk, efficiency, step_latency, base_latency, variants=None):
    """One collective per rank group, the groups in lockstep (step ``j`` of every group runs
    at the same time); one group is :func:`collective`."""
    allowed = ALGORITHMS[op]
    laid = [_participants(graph, op, ranks, channels) for ranks in rank_groups]
    p = len(laid[0][0])
    if any(len(r) != p for r, _ in laid):
        raise ValueError(f"groups run in lockstep must have equal sizes, got {sorted({len(r) for r, _ in laid})}")
    ranks = [r for group, _ in laid for r in group]     # groups may share GPUs (a pipeline stage
    # sends to the next while it receives from the previous): their flows share links
    options = _policy_options(policy, policy_options, pxn)
    base = _base_latency(protocol, base_latency)
    if algorithm != "auto":
        for _, layout in laid:
            if why := _unavailable(algorithm, p, layout):
                raise ValueError(f"algorithm {algorithm!r} {why}")
    names = [a for a in (allowed if algorithm == "auto" else (algorithm,))
             if not any(_unavailable(a, p, layout) for _, layout in laid)]
    plans = {}
    for a in names:
        per_group = [_steps(op, a, p, size, layout, chunk) for _, layout in laid]
        if len(per_group) == 1:
            plans[a] = per_group[0]
            continue
        merged, cache = [], {}
        for parts in zip(*per_group):       # step j of every group, positions offset by group
            key = tuple(id(st.flows) for st in parts)
            if key not in cache:
                cache[key] = [(x + g * p if isinstance(x, int) else x, y + g * p if isinstance(y, int) else y, n)
                              for g, st in enumerate(parts) for x, y, n in st.flows]
            merged.append(_Step(parts[0].count, cache[key], parts[0].latency_count))
        plans[a] = merged
    scenarios = [graph] if variants is None else list(variants)
    if algorithm == "auto" and variants is None and len(plans) > 1:
        # candidates in order of a lower bound that needs no routing: the most promising one
        # is solved first, then, in one batched call, every other whose bound is below its
        # time; the rest cannot win and are never routed or solved
        bounds = {a: _lower_bound(graph, ranks, plans[a], base, protocol, step_latency, efficiency) for a in plans}
        order = sorted(plans, key=bounds.get)
        wave = order[:1]
        (table, results), = _time_plans(graph, ranks, {a: plans[a] for a in wave}, policy, options, efficiency,
                                        scenarios, protocol, step_latency, base)
        best_time = min(r[0] for r in results.values())
        rest = [a for a in order if a not in results and bounds[a] < best_time]
        if rest:
            results.update(_time_plans(graph, ranks, {a: plans[a] for a in rest}, policy, options, efficiency,
                                       scenarios, protocol, step_latency, base)[0][1])
        timed = [(table, {a: results[a] for a in plans if a in results})]
        pruned = {a: bounds[a] for a in plans if a not in results}
    else:
        timed = _time_plans(graph, ranks, plans, policy, options, efficiency, scenarios, protocol, step_latency,
                            base)
        pruned = {}
    out = []
    for table, results in timed:
        best = min(results, key=lambda a: results[a][0])
        total, steps, util = results[best]
        if not np.isfinite(total):
            out.append(ValueError("a collective step cannot complete: one of its flows crosses a failed "
                                  "(zero-capacity) link on every path"))
            continue
        algbw = float(size) / total
        out.append(CollectiveResult(op=op, algorithm=best, size=float(size), ranks=p, time=total, algbw=algbw,
                                    busbw=algbw * busbw_factor(op, p), steps=steps, link_utilization=util,
                                    links=table, candidates={a: r[0] for a, r in results.items()},
                                    pruned=dict(pruned)))
    if variants is None:
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]
    return out


def collective_variants(graphs, op: str, size: float, *, ranks=None, algorithm: str = "auto",
                        policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
                        pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK,
                        efficiency=None, step_latency: float | None = None,
                        base_latency: float | None = None) -> list:
    """:func:`collective` on several graphs of one structure (same nodes and edges, other
    capacities or latencies: a technology swap, derated links, failed links at capacity 0),
    routed once on the first and solved for all in one batched call.

    Returns one entry per graph: a :class:`CollectiveResult`, or the ``ValueError`` of a
    scenario that cannot complete. Routes are the first graph's: a link failed in another
    variant is not routed around (its flows stall; call :func:`collective` on the edited
    graph to reroute).

    >>> import topologies as tp
    >>> ndr, hdr = tp.rail_optimized(2), tp.rail_optimized(2, link="ib_hdr")
    >>> [round(r.busbw / 1e9) for r in collective_variants([ndr, hdr], "all_reduce", 2**30, algorithm="ring")]  # 8 NICs: 376, 192
    [340, 183]
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs must be a non-empty list of cluster graphs")
    edges = list(graphs[0].edges())
    for i, g in enumerate(graphs[1:], 1):
        if list(g.edges()) != edges:
            raise ValueError(f"graphs[{i}] has other nodes or edges than graphs[0]: variants must share the structure")
    _check_arguments(op, algorithm, protocol, size, chunk)
    return _collective(graphs[0], op, float(size), [ranks], algorithm, policy, policy_options, channels, pxn,
                       protocol, float(chunk), efficiency, step_latency, base_latency, variants=graphs)


# --------------------------------------------------------------------------- concurrency
@dataclass(frozen=True)
class ConcurrentResult:
    """Result of :func:`concurrent`: per collective, its time alone and together (s) and
    the slowdown (together / alone); ``makespan`` is when the last one finished;
    ``bottleneck`` the links that set the time of the collectives' first steps run together,
    as ``(src, dst, tier, utilization)``."""

    alone: tuple
    together: tuple
    slowdown: tuple
    makespan: float
    algorithms: tuple
    bottleneck: tuple = ()


def _prepare(graph, ranks, flows, options, cache):
    """A step routed, its sizes and latency, cached by (ranks, flows) object: repeated steps
    are one list object, and the solo and joint runs of :func:`concurrent` share them."""
    policy, policy_options, _, protocol, step_latency = options
    key = (id(ranks), id(flows))
    if key not in cache:
        rm, sizes = _route_step(graph, ranks, flows, policy, policy_options)
        cache[key] = (rm, sizes, _step_latency(graph, rm, protocol, step_latency))
    return cache[key]


def _timeline(graph, plans, options, cache):
    """Event-driven run of several step sequences sharing the fabric; finish time of each."""
    efficiency = options[2]

    def prepared(i, j):
        ranks, steps, _ = plans[i]
        flows, factor = steps[j]
        rm, sizes, latency = _prepare(graph, ranks, flows, options, cache)
        return rm, sizes, latency * factor

    n = len(plans)
    step = [0] * n
    # latency left before the current step's transfer (the base latency, then each step's own)
    wait = [plans[i][2] + prepared(i, 0)[2] for i in range(n)]
    remaining = [None] * n
    finish = [np.inf] * n
    clock = 0.0
    cap = None
    for _ in range(10 ** 7):
        live = [i for i in range(n) if finish[i] == np.inf]
        if not live:
            break
        for i in live:
            if remaining[i] is None and wait[i] <= 0:
                rm, sizes, _ = prepared(i, step[i])
                remaining[i] = sizes.copy()
        moving = [i for i in live if remaining[i] is not None]
        dt = min([wait[i] for i in live if remaining[i] is None] + [np.inf])
        rates = {}
        if moving:
            mats = [prepared(i, step[i])[0] for i in moving]
            rm = _stack(mats, separate_links=False)
            if cap is None:
                cap = _effective_capacity(rm, efficiency)
            left = np.concatenate([remaining[i] for i in moving])
            alloc = max_min_fair(rm, cap, demands=np.where(left > 0, np.inf, 0.0))
            r = np.asarray(alloc.rates, dtype=np.float64)
            off = 0
            for i in moving:
                k = len(remaining[i])
                rates[i] = r[off:off + k]
                off += k
                going = remaining[i] > 0
                if going.any():
                    dt = min(dt, float((remaining[i][going] / rates[i][going]).min()))
        if not np.isfinite(dt):
            raise ValueError("a collective can make no progress (a flow crosses failed links only)")
        clock += dt
        for i in live:
            if remaining[i] is None:
                wait[i] -= dt
                continue
            remaining[i] = np.where(remaining[i] > 0, remaining[i] - rates[i] * dt, 0.0)
            remaining[i][remaining[i] <= 1e-9 * np.maximum(prepared(i, step[i])[1], 1.0)] = 0.0
            if not remaining[i].any():
                remaining[i] = None
                step[i] += 1
                if step[i] == len(plans[i][1]):
                    finish[i] = clock
                else:
                    wait[i] = prepared(i, step[i])[2]
    return finish


def concurrent(graph, collectives, *, policy: str = "ecmp", policy_options: dict | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK, efficiency=None,
               step_latency: float | None = None, base_latency: float | None = None,
               alone: bool = True, lockstep: bool = False) -> ConcurrentResult:
    """Run several collectives at once on one fabric and report how much each slowed.

    ``collectives`` is a list of dicts with the keys of :func:`collective` (``op``, ``size``,
    ``ranks``, ``algorithm``, ``channels``); ``"auto"`` is resolved by timing each alone.
    Every collective runs its steps in order (latency, then the step's flows); between events
    (a flow finishing, a latency elapsing) all active flows of all collectives share the links
    max-min fairly. ``alone=False`` skips the solo runs (``alone`` and ``slowdown`` are then
    NaN) when only the times together are wanted.

    ``lockstep=True`` is for symmetric groups of one kind (the data-parallel groups of a job:
    same op, size, algorithm and channels): step ``j`` of every group runs at the same time,
    so each distinct step is solved once for all groups together (a ring's ``2(p-1)`` steps
    cost one solve instead of one event each); ``"auto"`` then picks the algorithm that is
    fastest with all groups running, not alone. Without it, every collective advances on its
    own clock, event by event.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> r = concurrent(g, [dict(op="all_reduce", size=2**28, ranks=range(8), algorithm="ring"),
    ...                    dict(op="all_reduce", size=2**28, ranks=range(8, 16), algorithm="ring")])
    >>> [round(s, 3) for s in r.slowdown]        # one server each: they do not meet
    [1.0, 1.0]
    """
    if not collectives:
        raise ValueError("collectives must be a non-empty list of dicts")
    _checks.checked_graph(graph)
    if lockstep:
        return _lockstep(graph, collectives, policy, policy_options, pxn, protocol, chunk, efficiency,
                         step_latency, base_latency, alone)
    options = _policy_options(policy, policy_options, pxn)
    base = _base_latency(protocol, base_latency)
    plans, algorithms = [], []
    for spec in map(_checked_spec, collectives):
        algorithm = spec.get("algorithm", "auto")
        if algorithm == "auto":   # the fastest alone (collective() also checks every argument)
            algorithm = collective(graph, spec["op"], spec["size"], ranks=spec.get("ranks"),
                                   policy=policy, policy_options=policy_options,
                                   channels=spec.get("channels"), pxn=pxn, protocol=protocol, chunk=chunk,
                                   efficiency=efficiency, step_latency=step_latency,
                                   base_latency=base_latency).algorithm
        elif spec["op"] not in ALGORITHMS or algorithm not in ALGORITHMS[spec["op"]]:
            raise ValueError(f"op must be one of {', '.join(OPS)} and algorithm one of its "
                             f"ALGORITHMS entry, got {spec['op']!r} / {algorithm!r}")
        ranks, layout = _participants(graph, spec["op"], spec.get("ranks"), spec.get("channels"))
        if why := _unavailable(algorithm, len(ranks), layout):
            raise ValueError(f"algorithm {algorithm!r} {why}")
        sequence = []
        for st in _steps(spec["op"], algorithm, len(ranks), float(spec["size"]), layout, float(chunk)):
            # the step's latencies spread evenly over its repetitions
            sequence.extend([(st.flows, st.latency_count / st.count)] * st.count)
        plans.append((ranks, sequence, base))
        algorithms.append(algorithm)
    opts = (policy, options, efficiency, protocol, step_latency)
    cache: dict = {}
    # the links holding the first steps of all of them together
    firsts = [_prepare(graph, ranks, seq[0][0], opts, cache)[:2] for ranks, seq, _ in plans]
    stacked = _stack([rm for rm, _ in firsts], separate_links=False)
    _, _, bottleneck = _solve_steps([stacked], [np.concatenate([sz for _, sz in firsts])],
                                    _effective_capacity(firsts[0][0], efficiency))[0]
    alone_t = [_timeline(graph, [plan], opts, cache)[0] if alone else np.nan for plan in plans]
    together = _timeline(graph, plans, opts, cache)
    return ConcurrentResult(alone=tuple(alone_t), together=tuple(together),
                            slowdown=tuple(t / a for t, a in zip(together, alone_t)),
                            makespan=max(together), algorithms=tuple(algorithms), bottleneck=bottleneck)


def _checked_spec(spec) -> dict:
    spec = dict(spec)
    if set(spec) - {"op", "size", "ranks", "algorithm", "channels"} or "op" not in spec or "size" not in spec:
        raise ValueError(f"each collective needs 'op' and 'size' (optional 'ranks', 'algorithm', "
                         f"'channels'), got keys {sorted(spec)}")
    return spec


def _lockstep(graph, collectives, policy, policy_options, pxn, protocol, chunk, efficiency, step_latency,
              base_latency, alone) -> ConcurrentResult:
    specs = [_checked_spec(spec) for spec in collectives]
    kinds = {(spec["op"], float(spec["size"]), spec.get("algorithm", "auto"), spec.get("channels")) for spec in specs}
    if len(kinds) != 1:
        raise ValueError("lockstep=True needs collectives with one op, size, algorithm and channels, got "
                         f"{len(kinds)} different ones")
    op, size, algorithm, channels = kinds.pop()
    _check_arguments(op, algorithm, protocol, size, chunk)
    res = _collective(graph, op, size, [spec.get("ranks") for spec in specs], algorithm, policy, policy_options,
                      channels, pxn, protocol, float(chunk), efficiency, step_latency, base_latency)
    n = len(specs)
    alone_t = [collective(graph, op, size, ranks=spec.get("ranks"), algorithm=res.algorithm, policy=policy,
                          policy_options=policy_options, channels=channels, pxn=pxn, protocol=protocol,
                          chunk=chunk, efficiency=efficiency, step_latency=step_latency,
                          base_latency=base_latency).time if alone else np.nan for spec in specs]
    slowest = max(res.steps, key=lambda st: st.time)
    return ConcurrentResult(alone=tuple(alone_t), together=(res.time,) * n,
                            slowdown=tuple(res.time / a for a in alone_t), makespan=res.time,
                            algorithms=(res.algorithm,) * n, bottleneck=slowest.bottleneck)
