"""What routing keeps per graph between calls: the graph's signature (what an edit
changes), the indexes by graph, and the fabric and server-template paths per pair."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ._keys import ranges

#: graph -> its GraphIndex with everything routing built from it (the cache of route())
_INDEXES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: held while an index is looked up or replaced, or a memo entry built: threads of one
#: process (a sweep's thread pool) share the indexes and must never see one half-updated
LOCK = threading.RLock()
#: fabric path computations (calls that computed pairs no earlier route() had asked for)
_PATHS = {"count": 0}


#: attribute values hashed together at most (then the chunk's hash is kept): the signature's
#: memory stays bounded (~0.5 MB) on a graph of millions of links
_CHUNK = 1 << 16


def _signature(graph) -> tuple:
    """What an edit changes: the node and edge counts, a hash of every edge's endpoints and
    attribute values (all of them, in the edge's key order), of every node's id with the
    attributes routing and the collectives read (kind, server, rail, role, group, network
    mark), and the generator's record. A cached index is used only while the graph still
    has the same: a failure moved from one cable to another of the same capacity, or two
    links' cables swapped, changes it though no count or total does.

    One pass over networkx's adjacency dicts, as fast as the counts and totals it replaced
    (best of 300 on a busy 2-core machine: ``rail_optimized(128)``, 7,168 links, 2.4 ms
    against 2.5 ms; ``rail_optimized(1024)``, 61,440 links, 35 against 33-36 ms), the edge
    values hashed in chunks of ``_CHUNK`` (bounded memory). Python's tuple hash is 64-bit:
    two graph states that differ yet hash alike are a 2**-64 chance per edit.
    """
    succ = getattr(graph, "_succ", None)
    succ = graph.succ if succ is None else succ         # networkx's dicts of dicts, read directly
    nodes = getattr(graph, "_node", None)
    nodes = graph.nodes if nodes is None else nodes
    values, chunks = [], []
    put, extend = values.append, values.extend
    for u, out in succ.items():
        if len(values) > _CHUNK:
            chunks.append(_hash(values))
            values.clear()
        put(u)
        put(len(out))
        for v, d in out.items():
            put(v)
            put(len(d))
            extend(d.values())          # in the edge's key order
    chunks.append(_hash(values))
    node_attrs = _hash([(n, d.get("kind"), d.get("server"), d.get("rail"), d.get("role"), d.get("group"),
                         "network" in d) for n, d in nodes.items()])
    meta = getattr(graph, "graph", {})
    record = (meta.get("generator"), repr(meta.get("params")))
    return graph.number_of_nodes(), graph.number_of_edges(), hash(tuple(chunks)), node_attrs, hash(record)


def _hash(values: list) -> int:
    """Hash of a list of attribute values; an unhashable one (a list attribute) by its repr."""
    try:
        return hash(tuple(values))
    except TypeError:
        return hash(repr(values))


def path_computations() -> int:
    """How many times :func:`~flowsolver.route` computed fabric paths that no earlier call on
    the same (unedited) graph had computed, in this process: a collective routed a second
    time, or a step whose pairs an earlier step covered, adds nothing.

    >>> import topologies as tp
    >>> from flowsolver import Flows, route
    >>> g = tp.fat_tree(4)
    >>> before = path_computations()
    >>> _ = route(g, Flows.all_to_all(16)); _ = route(g, Flows.ring(16))
    >>> path_computations() - before                  # the ring's leaf pairs were known
    1
    """
    return _PATHS["count"]


def clear_route_cache() -> None:
    """Forget every graph's cached index and paths (an edit :func:`_signature` does not
    read: a node attribute other than those it lists)."""
    _INDEXES.clear()


class _NoPath(Exception):
    """A pair inside a server template has no working path."""


class PairPaths:
    """Fabric paths of attach-node pairs under one rule, kept per :class:`GraphIndex`:
    ``entries`` computes only the pairs not asked for before and returns every pair's
    entries sorted by link, so a route is the same whatever was routed before it. The
    known pairs are held as arrays (pair keys sorted, and their entries in that order),
    so a call looks its pairs up with one search, not one dictionary read per pair."""

    def __init__(self):
        self.lock = threading.Lock()                     # one writer at a time; readers see whole states
        self.keys = np.empty(0, dtype=np.int64)          # known pair keys, sorted
        self.ptr = np.zeros(1, dtype=np.int64)           # entries of keys[i]: ptr[i]:ptr[i+1]
        self.link = np.empty(0, dtype=np.int64)
        self.frac = np.empty(0)
        self.checked = False

    def rows(self, keys):
        """Row of each key among the known ones (-1: not known)."""
        pos = np.searchsorted(self.keys, keys)
        hit = pos < len(self.keys)
        hit[hit] = self.keys[pos[hit]] == keys[hit]
        return np.where(hit, pos, -1)

    def _learn(self, new_keys, pair, link, frac):
        """Add the entries of the pairs ``new_keys`` (distinct, unknown; ``pair`` indexes them)."""
        # each pair's entries by link: the order a batch emits them in depends on the
        # other pairs of the batch, so a route must not depend on which came first
        # (one stable sort of the key pair << 32 | link: lexsort's order, 2.5x faster)
        order = np.argsort((pair << 32) | link, kind="stable")
        pair, link, frac = pair[order], link[order], frac[order]
        counts = np.bincount(pair, minlength=len(new_keys))
        keys = np.concatenate([self.keys, new_keys])
        lengths = np.concatenate([np.diff(self.ptr), counts])
        starts = np.concatenate([self.ptr[:-1], len(self.link) + np.cumsum(counts) - counts])
        links, fracs = np.concatenate([self.link, link]), np.concatenate([self.frac, frac])
        by_key = np.argsort(keys, kind="stable")
        idx = ranges(starts[by_key], lengths[by_key])
        self.keys, self.link, self.frac = keys[by_key], links[idx], fracs[idx]
        self.ptr = np.concatenate([[0], np.cumsum(lengths[by_key])])

    def entries(self, keys, ua, ub, compute, count: bool = True):
        """(pair, link, frac) entries of the pairs ``keys`` (``ua[i] -> ub[i]``);
        ``compute(a, b)`` gives (pair, link, frac) for the pairs it is handed."""
        keys = np.asarray(keys, dtype=np.int64)
        with self.lock:         # threads sharing the graph: learning rewrites every array below
            return self._entries(keys, ua, ub, compute, count)

    def _entries(self, keys, ua, ub, compute, count):
        rows = self.rows(keys)
        if (rows < 0).any() or not self.checked:    # the first call also checks the rule applies (raises)
            miss_keys, first = np.unique(keys[rows < 0], return_index=True)
            miss = np.flatnonzero(rows < 0)[first]
            pair, link, frac = compute(ua[miss], ub[miss])
            self.checked = True
            _PATHS["count"] += count
            if len(miss):
                self._learn(miss_keys, np.asarray(pair, np.int64), np.asarray(link, np.int64),
                            np.asarray(frac, np.float64))
                rows = self.rows(keys)
        lengths = self.ptr[rows + 1] - self.ptr[rows]
        idx = ranges(self.ptr[rows], lengths)
        return np.repeat(np.arange(len(keys)), lengths), self.link[idx], self.frac[idx]
