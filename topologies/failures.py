"""Link failures: a copy of a cluster graph with some cables at capacity 0."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

__all__ = ["fail_links", "fabric_cables"]


def fabric_cables(g: nx.DiGraph) -> list:
    """Switch-to-switch cables as ``(u, v)`` pairs, one per pair of opposite edges, in edge order."""
    kind = nx.get_node_attributes(g, "kind")
    seen, out = set(), []
    for u, v in g.edges():
        if kind.get(u) == "switch" and kind.get(v) == "switch" and (v, u) not in seen and g.has_edge(v, u):
            seen.add((u, v))
            out.append((u, v))
    return out


def fail_links(g: nx.DiGraph, fraction: float, *, seed: int = 0) -> nx.DiGraph:
    """A copy of ``g`` with ``round(fraction x cables)`` switch-to-switch cables failed (both
    directions at capacity 0), chosen uniformly at random with ``seed``. Routing never uses a
    failed link; the graph's ``failed`` attribute lists the cables.

    >>> from topologies import fat_tree
    >>> h = fail_links(fat_tree(4), 0.1, seed=1)
    >>> len(h.graph["failed"]), sum(d["capacity"] == 0 for *_, d in h.edges(data=True))   # 32 cables
    (3, 6)
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (0.0 <= fraction <= 1.0) \
            or math.isnan(fraction):
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
    h = g.copy()
    cables = fabric_cables(h)
    count = int(round(fraction * len(cables)))
    pick = np.random.default_rng(seed).choice(len(cables), size=count, replace=False) if count else []
    failed = [cables[i] for i in sorted(pick)]
    for u, v in failed:
        h[u][v]["capacity"] = 0.0
        h[v][u]["capacity"] = 0.0
    h.graph["failed"] = failed
    return h
