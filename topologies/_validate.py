"""The cluster-graph schema: :func:`validate` checks a graph against it and raises
:class:`TopologyError` naming the first offending node or edge."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ._graph import NODE_KINDS, edited

__all__ = ["TopologyError", "validate"]


class TopologyError(ValueError):
    """A cluster graph breaks the schema; the message names the node or edge."""


def validate(g) -> nx.DiGraph:
    """Check a cluster graph (generated, edited or built by hand) against the schema.

    * a ``networkx.DiGraph`` (not a multigraph) with at least one GPU;
    * every node has ``kind`` in ``"gpu", "nic", "nvswitch", "pcie_switch", "cpu",
      "switch", "storage"``;
    * every edge has a finite ``capacity >= 0`` bytes/s (0 is a failed link), an optional
      finite ``latency >= 0`` s, an optional string ``tech`` and an optional ``efficiency`` in
      (0, 1]; ``cables`` if present is an integer >= 1;
    * every edge has its reverse (a cable is full duplex);
    * every GPU has at least one link; GPU ``rank`` attributes, where present, are
      distinct integers;
    * every GPU reaches every other GPU over the graph's cables (one connected component
      holds all GPUs: one breadth-first pass over the edges, not a search per pair). A failed
      cable (capacity 0) still counts as cabled: a failure scenario that cuts GPUs off is a
      routing outcome, not a malformed graph.

    Returns ``g``; raises :class:`TopologyError` naming the first offending node or edge.

    >>> import networkx as nx
    >>> g = nx.DiGraph()
    >>> g.add_node("a", kind="gpu"); g.add_node("b", kind="gpu")
    >>> g.add_edge("a", "b", capacity=50e9); g.add_edge("b", "a", capacity=50e9)
    >>> validate(g) is g
    True
    """
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise TopologyError(f"a cluster graph must be a networkx.DiGraph, got {type(g).__name__}")
    n_gpu = 0
    ranks = {}
    index = {}
    gpu_nodes = []
    for n, d in g.nodes(data=True):
        index[n] = len(index)
        kind = d.get("kind")
        if kind not in NODE_KINDS:
            raise TopologyError(f"node {n!r}: kind must be one of {', '.join(NODE_KINDS)}, "
                                f"got {kind!r}")
        if kind == "gpu":
            n_gpu += 1
            gpu_nodes.append(n)
            if g.degree(n) == 0:
                raise TopologyError(f"node {n!r}: this GPU has no links")
            if "rank" in d:
                r = d["rank"]
                if isinstance(r, bool) or not isinstance(r, int):
                    raise TopologyError(f"node {n!r}: rank must be an integer, got {r!r}")
                if r in ranks:
                    raise TopologyError(f"node {n!r}: rank {r} is also the rank of {ranks[r]!r}")
                ranks[r] = n
    if n_gpu == 0:
        raise TopologyError("the graph has no node of kind 'gpu'")
    succ = g._succ                      # networkx's adjacency dicts: ~1 M edges checked in one pass
    inf = math.inf
    for u, nbrs in succ.items():
        for v, d in nbrs.items():
            cap = d.get("capacity")
            lat = d.get("latency", 0.0)
            # the common case (float capacity and latency in range, no cables or tech
            # attribute of another type) decided at once; anything else checked in full
            if not (type(cap) is float and 0.0 <= cap < inf and type(lat) is float and 0.0 <= lat < inf):
                _check_numbers(u, v, cap, lat)
            if "tech" in d and not isinstance(d["tech"], str):
                raise TopologyError(f"edge {u!r} -> {v!r}: tech must be a string, got {d['tech']!r}")
            eff = d.get("efficiency")
            if eff is not None and not (type(eff) is float and 0.0 < eff <= 1.0):
                _check_efficiency(u, v, eff)
            if "cables" in d:
                c = d["cables"]
                if type(c) is not int and (isinstance(c, bool) or not isinstance(c, int)) or c < 1:
                    raise TopologyError(f"edge {u!r} -> {v!r}: cables must be an integer >= 1, "
                                        f"got {c!r}")
            if u not in succ[v]:
                raise TopologyError(f"edge {u!r} -> {v!r} has no reverse edge {v!r} -> {u!r}: "
                                    "a cable is two directed edges")
    _check_gpus_joined(g, index, gpu_nodes)
    return g


def _check_numbers(u, v, cap, lat) -> None:
    """Raise TopologyError unless ``cap`` is a finite number >= 0 and ``lat`` one >= 0."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap) or cap < 0:
        raise TopologyError(f"edge {u!r} -> {v!r}: capacity must be a finite number >= 0 "
                            f"bytes/s (0 = failed link), got {cap!r}")
    if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not math.isfinite(lat) or lat < 0:
        raise TopologyError(f"edge {u!r} -> {v!r}: latency must be a finite number >= 0 s, "
                            f"got {lat!r}")


def _check_efficiency(u, v, eff) -> None:
    """Raise TopologyError unless ``eff`` is a fraction in (0, 1] (the share of the raw rate a
    link reaches; a NaN read from a file silently turned NVLS off)."""
    if isinstance(eff, bool) or not isinstance(eff, (int, float)) or not 0.0 < eff <= 1.0:
        raise TopologyError(f"edge {u!r} -> {v!r}: efficiency must be a fraction in (0, 1], got {eff!r}")


def _check_gpus_joined(g: nx.DiGraph, index: dict, gpu_nodes: list) -> None:
    """Raise TopologyError unless one connected component (over all cables) holds every GPU."""
    if len(gpu_nodes) < 2:
        return
    m = g.number_of_edges()
    rows = np.fromiter((index[u] for u, _ in g.edges()), dtype=np.int64, count=m)
    cols = np.fromiter((index[v] for _, v in g.edges()), dtype=np.int64, count=m)
    n = len(index)
    from scipy.sparse import coo_matrix                     # here: `flowsolver --help` imports no SciPy
    from scipy.sparse.csgraph import connected_components

    adj = coo_matrix((np.ones(m, dtype=np.int8), (rows, cols)), shape=(n, n)).tocsr()
    _, label = connected_components(adj, directed=False)
    gpu_label = label[[index[x] for x in gpu_nodes]]
    first = gpu_label[0]
    apart = np.flatnonzero(gpu_label != first)
    if apart.size:
        other = gpu_nodes[int(apart[0])]
        parts = len(np.unique(gpu_label))
        raise TopologyError(f"GPU {other!r} cannot reach GPU {gpu_nodes[0]!r}: the GPUs lie in {parts} "
                            "disconnected parts of the network (no chain of cables joins them)")


def validate_edited(g) -> nx.DiGraph:
    """:func:`validate` ``g`` unless a generator built it and its fingerprint still matches (a
    generated, unedited graph is trusted: validate walks every node and edge in Python).

    >>> from topologies import fat_tree
    >>> g = fat_tree(4)
    >>> validate_edited(g) is g                       # generated, unedited: trusted
    True
    >>> g.edges["pod0/edge0", "pod0/agg0"]["latency"] = -1.0
    >>> try:
    ...     validate_edited(g)
    ... except TopologyError as err:
    ...     print(str(err).split(": ")[1])
    latency must be a finite number >= 0 s, got -1.0
    """
    if edited(g):
        validate(g)
    return g
