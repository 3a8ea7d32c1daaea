"""Link failures and degradations: a copy of a cluster graph with some cables at capacity 0,
or running at a fraction of their rate."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ._graph import check_int

__all__ = ["fail_links", "fabric_cables", "tier_cables", "degrade_links"]


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
    """A copy of ``g`` with ``round(fraction x cables)`` of its working physical
    switch-to-switch cables failed, chosen uniformly at random among them with ``seed``: the
    first of one random order of the cables, so at one ``seed`` a larger ``fraction`` fails every
    cable a smaller one fails, and more.

    A bundle of parallel cables (one edge per direction whose ``cables`` attribute counts
    them) holds that many physical cables, each as likely to fail as a single one. A bundle
    that loses some keeps the rest: both directions' ``capacity`` shrink by the failed share
    and ``cables`` counts the working ones (so routing spreads over those); one that loses all
    is down (capacity 0 both ways, ``cables`` as it was), and routing never uses it. Cables
    already failed (a graph failed before) are not drawn again. The graph's ``failed``
    attribute lists the failed cables as ``(u, v)`` pairs, one entry per physical cable (a
    bundle's pair as often as its cables failed), those of earlier calls first.

    >>> from topologies import fat_tree, rail_optimized
    >>> h = fail_links(fat_tree(4), 0.1, seed=1)
    >>> len(h.graph["failed"]), sum(d["capacity"] == 0 for *_, d in h.edges(data=True))   # 32 cables
    (3, 6)
    >>> len(fail_links(rail_optimized(64), 0.1).graph["failed"])   # 128 bundles of 4: 512 cables
    51
    """
    fraction, seed = checked_failures(fraction, seed)
    h = g.copy()
    bundles = fabric_cables(h)
    if fraction > 0 and not bundles:         # the same graph back, said to have lost a fraction of its cables
        raise ValueError("fraction: this graph has no switch-to-switch cables to fail (a rail-only fabric of one "
                         "switch a rail, a GPU torus, one server); fail_links fails fabric cables only")
    working = np.array([int(h[u][v].get("cables", 1)) if h[u][v].get("capacity", 0) > 0 else 0
                        for u, v in bundles], dtype=np.int64)
    total = int(working.sum())
    count = int(round(fraction * total))
    # the first ``count`` of one seeded order of the cables: at one seed a larger fraction fails a
    # superset of a smaller one's (a sweep over fractions never shows more failures running faster)
    pick = np.random.default_rng(seed).permutation(total)[:count] if count else []
    # physical cable i is in the bundle whose cumulative working count first exceeds i
    lost = np.bincount(np.searchsorted(np.cumsum(working), np.sort(pick), side="right"), minlength=len(bundles))
    failed = []
    for b in np.flatnonzero(lost):
        u, v = bundles[b]
        k, n = int(lost[b]), int(working[b])
        for x, y in ((u, v), (v, u)):
            d = h[x][y]
            if k == n:
                d["capacity"] = 0.0
            else:
                d["capacity"] = float(d["capacity"] * (n - k) / n)
                d["cables"] = n - k
        failed.extend([(u, v)] * k)
    # a graph failed before keeps its list (a loaded graph's pairs are lists)
    h.graph["failed"] = [tuple(c) for c in g.graph.get("failed", [])] + failed
    return h


def checked_failures(fraction, seed, name: str = "fraction") -> tuple:
    """``(fraction, seed)`` of a failure draw, checked: ``fraction`` (called ``name`` in the
    message) a number in [0, 1], ``seed`` an integer >= 0 (NumPy's generator takes no other)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (0.0 <= fraction <= 1.0) \
            or math.isnan(fraction):
        raise ValueError(f"{name} must be in [0, 1], got {fraction!r}")
    return fraction, check_int("seed", seed, 0)


def tier_cables(g: nx.DiGraph, tier: str) -> list:
    """The cables of one ``tier`` (edge attribute) as ``(u, v)`` pairs, one per pair of
    opposite edges (a one-way edge is its own cable), in edge order.

    >>> from topologies import rail_optimized
    >>> len(tier_cables(rail_optimized(4), "leaf-spine"))        # 8 leaves x 1 spine
    8
    """
    seen, out = set(), []
    for u, v, d in g.edges(data=True):
        if d.get("tier") == tier and (v, u) not in seen:
            seen.add((u, v))
            out.append((u, v))
    if not out:
        tiers = sorted({str(d.get("tier")) for *_, d in g.edges(data=True)})
        raise ValueError(f"tier {tier!r} has no links in this graph; its tiers: {', '.join(tiers)}")
    return out


def degrade_links(g: nx.DiGraph, cables, factor: float) -> nx.DiGraph:
    """A copy of ``g`` in which each cable ``(u, v)`` of ``cables`` (both directions where
    both exist) runs at ``factor`` of its capacity, ``0 < factor <= 1``: a link trained
    down to fewer lanes, or losing packets to a dirty optic. Structure, routes and
    latencies are unchanged; the graph's ``degraded`` attribute lists the cables.

    Examples
    --------
    >>> from topologies import rail_optimized
    >>> g = rail_optimized(4)
    >>> u, v = tier_cables(g, "leaf-spine")[0]
    >>> h = degrade_links(g, [(u, v)], 0.5)
    >>> h[u][v]["capacity"] / g[u][v]["capacity"], h[v][u]["capacity"] / g[v][u]["capacity"]
    (0.5, 0.5)
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0.0 < factor <= 1.0):
        raise ValueError(f"factor must be in (0, 1] (the fraction of the capacity kept), got {factor!r}")
    h = g.copy()
    done = list(h.graph.get("degraded", []))
    given = set()
    for u, v in cables:
        if not h.has_edge(u, v):
            raise ValueError(f"cables: ({u!r}, {v!r}) is not an edge of the graph")
        if (u, v) in given or (v, u) in given:       # each was degraded by factor twice (0.5: to 0.25)
            raise ValueError(f"cables: ({u!r}, {v!r}) is given twice (a cable's two directions are one cable, "
                             "degraded together): give each cable once")
        given.add((u, v))
        h[u][v]["capacity"] = float(h[u][v]["capacity"] * factor)
        if h.has_edge(v, u):
            h[v][u]["capacity"] = float(h[v][u]["capacity"] * factor)
        done.append((u, v))
    h.graph["degraded"] = done
    return h
