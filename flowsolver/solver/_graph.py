"""The bottleneck structure as a networkx DiGraph (Ros-Giralt et al.'s bottleneck
precedence graph, with flows as nodes): link -> flow where the link is the flow's
bottleneck, flow -> link where the flow crosses a saturated link held by others (it takes
part of that link's capacity without being held there). Flows may be grouped (one node per
collective step, per rank, ...) so that the graph stays readable at 1,000+ GPUs."""

from __future__ import annotations

import networkx as nx
import numpy as np

from ._structure import Structure


def bottleneck_graph(s: Structure, groups=None, link_names=None) -> nx.DiGraph:
    """The DiGraph of structure ``s``. Link nodes are ``("link", l)`` (saturated links only)
    with ``capacity`` (bytes/s), ``level`` (the largest level on it) and ``name``; flow nodes
    ``("flow", f)``, or ``("group", label)`` when ``groups`` (one label per flow) is given,
    with ``flows`` (how many) and ``level`` (the lowest, bytes/s per unit weight); edges
    carry ``flows``, how many flows they stand for. A flow held by its cap has no incoming
    edge and ``capped=True``."""
    n = s.n_flows
    if groups is None:
        label = [("flow", f) for f in range(n)]
    else:
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"groups must have one label per flow: shape ({n},), got {groups.shape}")
        label = [("group", g.item() if hasattr(g, "item") else g) for g in groups]
    g = nx.DiGraph()
    for l in np.flatnonzero(s.saturated):
        g.add_node(("link", int(l)), kind="link", capacity=float(s.capacity[l]), level=float(s.top[l]),
                   name=str(l) if link_names is None else str(link_names[l]))
    for f in range(n):
        node = label[f]
        if node in g:
            attrs = g.nodes[node]
            attrs["flows"] += 1
            attrs["level"] = min(attrs["level"], float(s.level[f]))
            attrs["capped"] = attrs["capped"] or bool(s.bottleneck[f] < 0)
        else:
            g.add_node(node, kind="flow", flows=1, level=float(s.level[f]), capped=bool(s.bottleneck[f] < 0))
    coo = s.matrix.tocoo()
    rows, cols = coo.row, coo.col
    on_sat = s.saturated[rows]
    held = on_sat & (s.bottleneck[cols] == rows)
    for l, f in zip(rows[held], cols[held]):
        _count(g, ("link", int(l)), label[f])
    for l, f in zip(rows[on_sat & ~held], cols[on_sat & ~held]):
        _count(g, label[f], ("link", int(l)))
    return g


def _count(g, u, v):
    if g.has_edge(u, v):
        g.edges[u, v]["flows"] += 1
    else:
        g.add_edge(u, v, flows=1)
