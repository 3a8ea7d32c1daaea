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
    """A copy of ``g`` with ``round(fraction x cables)`` switch-to-switch cables failed (both
    directions at capacity 0), chosen uniformly at random with ``seed``. Routing never uses a
    failed link; the graph's ``failed`` attribute lists the cables.

    >>> from topologies import fat_tree
    >>> h = fail_links(fat_tree(4), 0.1, seed=1)
    >>> len(h.graph["failed"]), sum(d["capacity"] == 0 for *_, d in h.edges(data=True))   # 32 cables
    (3, 6)
    """
    fraction, seed = checked_failures(fraction, seed)
    h = g.copy()
    cables = fabric_cables(h)
    if fraction > 0 and not cables:          # the same graph back, said to have lost a fraction of its cables
        raise ValueError("fraction: this graph has no switch-to-switch cables to fail (a rail-only fabric of one "
                         "switch a rail, a GPU torus, one server); fail_links fails fabric cables only")
    count = int(round(fraction * len(cables)))
    pick = np.random.default_rng(seed).choice(len(cables), size=count, replace=False) if count else []
    failed = [cables[i] for i in sorted(pick)]
    for u, v in failed:
        h[u][v]["capacity"] = 0.0
        h[v][u]["capacity"] = 0.0
    # a graph failed before keeps its list: the cables at 0 are all listed (a second call replaced it)
    before = [tuple(c) for c in g.graph.get("failed", [])]      # (a loaded graph's are lists)
    listed = set(before)
    h.graph["failed"] = before + [c for c in failed if c not in listed]
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
