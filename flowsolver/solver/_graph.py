"""The bottleneck structure as a networkx DiGraph (Ros-Giralt et al.'s bottleneck
precedence graph, with flows as nodes): link -> flow where the link is the flow's
bottleneck, flow -> link where the flow crosses a saturated link held by others (it takes
part of that link's capacity without being held there). Flows may be grouped (one node per
collective step, per rank, ...) so that the graph stays readable at 1,000+ GPUs; the flows
are counted into their nodes and edges with array operations, so a million flows in a few
hundred groups build a graph of a few hundred nodes in about a second."""

from __future__ import annotations

import networkx as nx
import numpy as np

from ._structure import Structure


def _labels(groups, n):
    """Each flow's node index and the node labels (``("flow", f)``, or ``("group", label)``)."""
    if groups is None:
        return np.arange(n), [("flow", f) for f in range(n)]
    groups = np.asarray(groups)
    if groups.shape != (n,):
        raise ValueError(f"groups must have one label per flow: shape ({n},), got {groups.shape}")
    try:
        names, index = np.unique(groups, return_inverse=True)
        names = names.tolist()
    except TypeError:                           # labels that do not sort: first-seen order
        seen = {}
        index = np.array([seen.setdefault(g, len(seen)) for g in groups.tolist()], dtype=np.int64)
        names = list(seen)
    return index.reshape(-1), [("group", g) for g in names]


def bottleneck_graph(s: Structure, groups=None, link_names=None) -> nx.DiGraph:
    """The DiGraph of structure ``s``. Link nodes are ``("link", l)`` (saturated links only)
    with ``capacity`` (bytes/s), ``level`` (the largest level on it) and ``name``; flow nodes
    ``("flow", f)``, or ``("group", label)`` when ``groups`` (one label per flow) is given,
    with ``flows`` (how many) and ``level`` (the lowest, bytes/s per unit weight); edges
    carry ``flows``, how many flows they stand for. A flow held by its cap has no incoming
    edge and ``capped=True``."""
    index, names = _labels(groups, s.n_flows)
    k = len(names)
    count = np.bincount(index, minlength=k)
    lowest = np.full(k, np.inf)
    np.minimum.at(lowest, index, s.level)
    capped = np.bincount(index, weights=s.bottleneck < 0, minlength=k) > 0
    g = nx.DiGraph()
    for l in np.flatnonzero(s.saturated):
        g.add_node(("link", int(l)), kind="link", capacity=float(s.capacity[l]), level=float(s.top[l]),
                   name=str(l) if link_names is None else str(link_names[l]))
    for i in np.flatnonzero(count):
        g.add_node(names[i], kind="flow", flows=int(count[i]), level=float(lowest[i]), capped=bool(capped[i]))
    coo = s.matrix.tocoo()
    on_sat = s.saturated[coo.row]
    rows, cols = coo.row[on_sat], coo.col[on_sat]
    held = s.bottleneck[cols] == rows
    for mask, outward in ((held, True), (~held, False)):
        pairs, flows = np.unique(rows[mask].astype(np.int64) * k + index[cols[mask]], return_counts=True)
        for key, c in zip(pairs.tolist(), flows.tolist()):
            link, node = ("link", key // k), names[key % k]
            g.add_edge(*((link, node) if outward else (node, link)), flows=c)
    return g
