"""Cluster graphs in files: networkx node-link JSON, validated on reading.

:func:`save` writes what :func:`load` reads: ``{"directed": true, "multigraph": false,
"graph": {...}, "nodes": [{"id": ..., "kind": ...}, ...], "edges": [{"source": ...,
"target": ..., "capacity": bytes/s, "latency": s, ...}, ...]}`` (the older ``"links"`` key is
accepted for ``"edges"``). Everything the graph holds survives the round trip, JSON number
precision aside (floats are written to 17 significant digits, so they come back exactly).

A file that is not such a graph gets one ``ValueError`` (a :class:`TopologyError` when the
graph breaks the schema) whose one-line message names the file and what was expected: a file
that cannot be read, more than ``max_bytes`` bytes, bytes that are not UTF-8, text that is not
JSON or nests deeper than Python's parser goes (or gives a key twice in one object), JSON that
is not an object with ``"nodes"`` and ``"edges"`` lists of objects (a node id or an edge given
twice, both ``"edges"`` and ``"links"``; a node without a ``kind`` of the schema, no GPU, an edge
without a ``capacity``: these before a graph is built), or a graph :func:`topologies.validate`
refuses (a non-finite capacity such as JSON's ``1e400``, a missing reverse edge, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx

from ._common import MIB, DuplicateKey, read_text, short, unique_keys
from .._graph import NODE_KINDS, fingerprint
from .._validate import TopologyError, validate

__all__ = ["save", "load"]

# Memory budget ~1.5 GB peak. Measured (peak RSS over the import, CPython 3, networkx 3): a
# generated graph takes ~8-12x its file (meta_24k(): 37 MiB, 24,576 GPUs, 305 MB; rail_optimized
# (2048): 26.9 MiB, 226 MB); the worst is a file of tiny nodes, ~30x (2.5 M nodes '{"id":i,
# "kind":"nic"}', 65.7 MiB: 2.0 GB, 25 s), of which json.loads and _check_node_link's walk are
# ~22x (a file refused there stops at that). 48 MiB x 30 = 1.45 GB; a generated graph of 48 MiB is ~30,000
# GPUs at ~1.7 kB a GPU (rail_optimized(2048): 16,384 GPUs). Pass max_bytes= for a larger one.
MAX_JSON_BYTES = 48 * MIB
_SCALARS = (str, int, float, bool)


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


def load(path, *, max_bytes: int = MAX_JSON_BYTES) -> nx.DiGraph:
    """Read a cluster graph saved by :func:`save` (also accepts the older ``"links"`` key)
    and validate it (:func:`topologies.validate`).

    Parameters
    ----------
    path : str or Path
        The node-link JSON file.
    max_bytes : int
        Refuse a larger file before reading it (default 48 MiB, :data:`MAX_JSON_BYTES`: about
        30,000 GPUs of a generated fabric). Reading takes ~8-12x the file's size in memory for
        a generated graph, up to ~30x for a file of tiny nodes (~1.5 GB at the default); a
        node without a valid ``kind``, no GPU, or an edge without ``capacity`` is refused
        before the graph is built.

    Raises
    ------
    ValueError
        One line naming the file and what was expected (see the module docstring);
        :class:`TopologyError` when the graph breaks the schema.

    >>> import tempfile, os
    >>> from topologies import fat_tree
    >>> g = load(save(fat_tree(4), os.path.join(tempfile.mkdtemp(), "f.json")))
    >>> g.graph["generator"], g.number_of_edges() == fat_tree(4).number_of_edges()
    ('fat_tree', True)
    """
    text = read_text(path, max_bytes)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as err:
        raise ValueError(f"{path}: {err} (JSON keeps the last; which was meant?)") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested deeper than Python's parser goes; node-link JSON "
                         "nests a few levels") from None
    except ValueError as err:          # JSONDecodeError, or an integer beyond 4300 digits
        raise ValueError(f"{path}: not JSON ({str(err).splitlines()[0]})") from None
    key = _check_node_link(data, path)
    g = nx.node_link_graph(data, directed=True, multigraph=False, edges=key)
    try:
        validate(g)
    except TopologyError as err:
        raise TopologyError(f"{path}: {err}") from None
    stored, now = g.graph.get("fingerprint"), fingerprint(g)
    # saved before the fingerprint held latencies and cables (3 items) or its sums of squares,
    # efficiencies, technologies and edges' hash (7): kept as generated where what it held still matches
    if isinstance(stored, list) and len(stored) in (3, 7) and len(now) > 7 and stored == now[:len(stored)]:
        g.graph["fingerprint"] = now
    return g


def _check_node_link(data, path) -> str:
    """The edge key of node-link ``data`` ("edges" or "links") after checking its shape: what
    :func:`networkx.node_link_graph` indexes and hashes, and numbers the validator converts."""
    expected = ('expected node-link JSON: a JSON object with "nodes" and "edges" lists (what '
                "topologies.save writes)")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level is a JSON {_json_type(data)}; {expected}")
    if "edges" in data and "links" in data:
        raise ValueError(f'{path}: both "edges" and "links" are given; {expected}')
    key = "edges" if "edges" in data else "links"
    for name in ("nodes", key):
        if not isinstance(data.get(name), list):
            got = "missing" if name not in data else f"a JSON {_json_type(data[name])}"
            raise ValueError(f'{path}: "{name}" is {got}; {expected}')
    if not isinstance(data.get("graph", {}), dict):
        raise ValueError(f'{path}: "graph" must be a JSON object of graph attributes, got a '
                         f"JSON {_json_type(data['graph'])}")
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node or not _is_id(node["id"]):
            raise ValueError(f'{path}: node {i} must be an object with an "id" (a string, a '
                             f"number or a list of them), got {short(node)}")
    ids: set = set()
    for i, node in enumerate(data["nodes"]):
        if _hashable(node["id"]) in ids:        # networkx would merge the two, the last one's attributes kept
            raise ValueError(f"{path}: node {i}: the id {short(node['id'])} is given twice")
        ids.add(_hashable(node["id"]))
    pairs: set = set()
    for i, edge in enumerate(data[key]):
        if not isinstance(edge, dict) or not all(
                end in edge and _is_id(edge[end]) for end in ("source", "target")):
            raise ValueError(f'{path}: edge {i} must be an object with "source" and "target" '
                             f"node ids, got {short(edge)}")
        pair = (_hashable(edge["source"]), _hashable(edge["target"]))
        if pair in pairs:                       # a second cable is the edge's capacity (and "cables"), not an edge
            raise ValueError(f"{path}: edge {i}: {short(edge['source'])} -> {short(edge['target'])} is given "
                             "twice (one edge a direction; parallel cables add to its capacity)")
        pairs.add(pair)
        if "capacity" not in edge:
            raise TopologyError(f"{path}: edge {short(edge['source'])} -> {short(edge['target'])}: capacity must be "
                                "a finite number >= 0 bytes/s (0 = failed link), got no capacity")
        for name in ("capacity", "latency"):
            value = edge.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1e300:
                raise TopologyError(f"{path}: edge {edge['source']!r} -> {edge['target']!r}: "
                                    f"{name} {short(value)} is beyond float range")
    # validate's rules for the keys every node must have, before a graph is built (a file of a
    # million nodes without a kind, 13 MiB, took 632 MB and 12 s to be refused at node 0; now
    # json.loads and the id set above, 351 MB and 3.6 s, ~22x the file)
    gpus = 0
    for node in data["nodes"]:
        kind = node.get("kind")
        if not isinstance(kind, str) or kind not in NODE_KINDS:
            raise TopologyError(f"{path}: node {short(node['id'])}: kind must be one of {', '.join(NODE_KINDS)}, "
                                f"got {'no kind' if 'kind' not in node else short(kind)}")
        gpus += kind == "gpu"
    if not gpus:
        raise TopologyError(f"{path}: the graph has no node of kind 'gpu'")
    return key


def _hashable(value):
    """A node id as networkx holds it (a list read back as a tuple)."""
    return tuple(value) if isinstance(value, list) else value


def _is_id(value) -> bool:
    """A node id networkx can hold: a string, number or boolean, or a flat list of them (read
    back as a tuple, as :func:`save` writes tuple ids)."""
    if isinstance(value, list):
        return all(isinstance(v, _SCALARS) for v in value)
    return isinstance(value, _SCALARS)


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
