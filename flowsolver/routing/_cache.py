"""What routing keeps per graph between calls: the graph's signature (what an edit
changes), the indexes by graph, and the fabric and server-template paths per pair."""

from __future__ import annotations

import weakref

import numpy as np

#: graph -> its GraphIndex with everything routing built from it (the cache of route())
_INDEXES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: fabric path computations (calls that computed pairs no earlier route() had asked for)
_PATHS = {"count": 0}


def _signature(graph) -> tuple:
    """What an edit changes: node and edge counts, working links, total capacity, latency
    and cables. A cached index is used only while the graph still has the same."""
    cap = lat = 0.0
    cables = usable = 0
    for _, _, d in graph.edges(data=True):
        c = float(d.get("capacity", 0.0))
        cap += c
        usable += c > 0
        lat += float(d.get("latency", 0.0))
        cables += int(d.get("cables", 1))
    return graph.number_of_nodes(), graph.number_of_edges(), usable, cap, lat, cables


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
    """Forget every graph's cached index and paths (an edit :func:`_signature` cannot see:
    two links' cables swapped, a node's attributes changed)."""
    _INDEXES.clear()


class _NoPath(Exception):
    """A pair inside a server template has no working path."""


class PairPaths:
    """Fabric paths of attach-node pairs under one rule, kept per :class:`GraphIndex`:
    ``entries`` computes only the pairs not asked for before and returns every pair's
    entries sorted by link, so a route is the same whatever was routed before it."""

    def __init__(self):
        self.links: dict = {}
        self.fracs: dict = {}
        self.checked = False

    def entries(self, keys, ua, ub, compute, count: bool = True):
        """(pair, link, frac) entries of the pairs ``keys`` (``ua[i] -> ub[i]``);
        ``compute(a, b)`` gives (pair, link, frac) for the pairs it is handed."""
        keys = keys.tolist()
        miss = np.array([i for i, k in enumerate(keys) if k not in self.links], dtype=np.int64)
        if len(miss) or not self.checked:    # the first call also checks the rule applies (raises)
            pair, link, frac = compute(ua[miss], ub[miss])
            self.checked = True
            _PATHS["count"] += count
            # each pair's entries by link: the order a batch emits them in depends on the
            # other pairs of the batch, so a route must not depend on which came first
            order = np.lexsort((link, pair))
            pair, link, frac = pair[order], link[order], frac[order]
            cuts = np.searchsorted(pair, np.arange(len(miss) + 1))
            for j, i in enumerate(miss.tolist()):
                self.links[keys[i]] = link[cuts[j]:cuts[j + 1]]
                self.fracs[keys[i]] = frac[cuts[j]:cuts[j + 1]]
        links = [self.links[k] for k in keys]
        lengths = np.fromiter(map(len, links), dtype=np.int64, count=len(links))
        return (np.repeat(np.arange(len(keys)), lengths), np.concatenate(links) if links else np.empty(0, np.int64),
                np.concatenate([self.fracs[k] for k in keys]) if links else np.empty(0))
