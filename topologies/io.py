"""Cluster graphs in files: networkx node-link JSON, validated on reading."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx

from ._validate import validate

__all__ = ["save", "load"]


def save(g: nx.DiGraph, path) -> Path:
    """Write ``g`` as networkx node-link JSON (edges under ``"edges"``); returns the path.

    >>> import tempfile, os
    >>> from topologies import torus
    >>> p = save(torus((2, 3)), os.path.join(tempfile.mkdtemp(), "t.json"))
    >>> load(p).number_of_nodes()
    6
    """
    path = Path(path)
    data = nx.node_link_data(g, edges="edges")
    path.write_text(json.dumps(data))
    return path


def load(path) -> nx.DiGraph:
    """Read a cluster graph saved by :func:`save` (also accepts the older ``"links"`` key)
    and validate it (:func:`topologies.validate`).

    >>> import tempfile, os
    >>> from topologies import fat_tree
    >>> g = load(save(fat_tree(4), os.path.join(tempfile.mkdtemp(), "f.json")))
    >>> g.graph["generator"], g.number_of_edges() == fat_tree(4).number_of_edges()
    ('fat_tree', True)
    """
    data = json.loads(Path(path).read_text())
    key = "edges" if "edges" in data else "links"
    g = nx.node_link_graph(data, directed=True, multigraph=False, edges=key)
    return validate(g)
