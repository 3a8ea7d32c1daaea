"""Reading a cluster graph: rank order, description, schema validation, JSON files."""

from __future__ import annotations

import json
import math
import re
from collections import Counter, deque
from pathlib import Path

import networkx as nx

from ._graph import NODE_KINDS, compute_fabric, fingerprint
from .links import get_link

__all__ = ["gpus", "describe", "format_description", "validate", "save", "load",
           "bisection_max_flow", "TopologyError"]

#: BFS for the diameter is run only up to this many endpoints (cost grows as endpoints x edges)
DIAMETER_BFS_LIMIT = 2048


class TopologyError(ValueError):
    """A cluster graph breaks the schema; the message names the node or edge."""


def _natural_key(node):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(node))]


def gpus(g: nx.DiGraph) -> list:
    """The GPU nodes in canonical rank order.

    The generators give every GPU a ``rank`` attribute: servers in the order they were
    placed (fabric port order), GPUs of a server by local index, so rank
    ``r = server * gpus_per_server + local_rank``. A graph whose GPUs lack ``rank``
    (built by hand) is ordered by node id, numbers compared as numbers ("gpu2" before
    "gpu10").

    >>> from topologies import fat_tree
    >>> gpus(fat_tree(4))[:2]
    ['s0/gpu0', 's1/gpu0']
    """
    nodes = [n for n, d in g.nodes(data=True) if d.get("kind") == "gpu"]
    if nodes and all("rank" in g.nodes[n] for n in nodes):
        return sorted(nodes, key=lambda n: g.nodes[n]["rank"])
    return sorted(nodes, key=_natural_key)


def _endpoints_and_fabric(g: nx.DiGraph):
    """Network endpoints (compute NICs, or GPUs where the fabric joins GPUs directly) and
    the subgraph of endpoints plus compute switches."""
    core = compute_fabric(g)
    nics = [n for n, d in core.nodes(data=True) if d.get("kind") == "nic"]
    switches = [n for n, d in core.nodes(data=True) if d.get("kind") == "switch"]
    ends = nics if nics else [n for n, d in core.nodes(data=True) if d.get("kind") == "gpu"]
    return ends, core.subgraph(ends + switches)


def _bfs_diameter(fabric: nx.DiGraph, ends: list) -> int | None:
    ends_set = set(ends)
    best = 0
    adj = {n: list(fabric.successors(n)) for n in fabric}
    for src in ends:
        dist = {src: 0}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        reached = [dist[e] for e in ends_set if e in dist]
        if len(reached) < len(ends_set):
            return None  # disconnected network
        best = max(best, max(reached))
    return best


def bisection_max_flow(g: nx.DiGraph, first=None, second=None) -> float:
    """Maximum flow (bytes/s, one direction) from the GPUs of ``first`` to those of
    ``second`` over edge capacities; defaults: the two halves of the rank order.

    This is the capacity of a minimum cut between the two GPU sets; for the rank halves
    it is an upper bound on the true bisection bandwidth (a minimum over all balanced
    partitions, NP-hard in general).

    >>> from topologies import fat_tree
    >>> bisection_max_flow(fat_tree(4)) / 50e9      # 8 NDR links of 50 GB/s
    8.0
    """
    core = compute_fabric(g)
    order = gpus(core)
    if first is None or second is None:
        half = len(order) // 2
        first, second = order[:half], order[half:2 * half]
    net = nx.DiGraph()
    for u, v, d in core.edges(data=True):
        net.add_edge(u, v, capacity=float(d.get("capacity", 0.0)))
    src, dst = ("__source__",), ("__sink__",)
    for n in first:
        net.add_edge(src, n)  # no capacity attribute: unbounded
    for n in second:
        net.add_edge(n, dst)
    return float(nx.maximum_flow_value(net, src, dst))


def describe(g: nx.DiGraph, *, exact: bool = False) -> dict:
    """Summary of a cluster: counts, links by technology, bisection, diameter, cost proxy.

    Bisection bandwidth (bytes/s, one direction) comes from the generator's formula for
    its family (recorded on the graph at generation and used while the compute fabric is
    unchanged since); otherwise, or with ``exact=True``, from a maximum flow between the
    two halves of the GPU rank order (:func:`bisection_max_flow`). The network diameter is
    the largest shortest-path hop count between two network endpoints (compute NICs, or
    GPUs where GPUs are cabled directly), by formula or by breadth-first search. Storage
    and front-end parts are left out of both. The cost proxy counts switches, switch ports
    and physical cables by technology.

    Examples
    --------
    >>> from topologies import fat_tree
    >>> d = describe(fat_tree(4))
    >>> d["gpus"], d["switches"], d["network_diameter"], d["bisection_bandwidth"] / 50e9
    (16, 20, 6, 8.0)
    """
    nodes = g.nodes
    kinds = Counter(d.get("kind", "?") for _, d in g.nodes(data=True))
    roles = Counter(d.get("role", "?") for _, d in g.nodes(data=True) if d.get("kind") == "switch")
    tiers = Counter(d.get("tier") for _, d in g.nodes(data=True) if d.get("kind") == "switch")
    cables_by_tech, cables_by_tier = Counter(), Counter()
    ports = 0
    for u, v, d in g.edges(data=True):
        n = d.get("cables", 1)
        if nodes[u].get("kind") == "switch":
            ports += n
        if _cable_owner(u, v, g):
            cables_by_tech[d.get("tech", "unspecified")] += n
            cables_by_tier[d.get("tier", "unspecified")] += n
    edited = g.graph.get("fingerprint") != fingerprint(g)
    bisection = g.graph.get("bisection_bandwidth")
    method = g.graph.get("bisection_method", "")
    if exact or edited or bisection is None:
        bisection = bisection_max_flow(g) if kinds.get("gpu", 0) >= 2 else None
        method = "max flow between the GPU rank halves" + (
            " (graph edited since generation)" if edited and "fingerprint" in g.graph else "")
    diameter = None if edited else g.graph.get("network_diameter")
    diameter_method = "formula"
    if diameter is None:
        ends, fabric = _endpoints_and_fabric(g)
        if len(ends) < 2:
            diameter_method = "fewer than two network endpoints"
        elif len(ends) > DIAMETER_BFS_LIMIT:
            diameter_method = f"not computed (more than {DIAMETER_BFS_LIMIT} endpoints)"
        else:
            diameter = _bfs_diameter(fabric, ends)
            diameter_method = ("breadth-first search" if diameter is not None
                               else "endpoints not all joined by the network")
    servers = {d["server"] for _, d in g.nodes(data=True) if d.get("kind") == "gpu" and "server" in d}
    return dict(
        generator=g.graph.get("generator", "user"),
        params=g.graph.get("params", {}),
        gpus=kinds.get("gpu", 0),
        servers=len(servers),
        switches=kinds.get("switch", 0),
        nodes_by_kind=dict(sorted(kinds.items())),
        switches_by_role=dict(sorted(roles.items())),
        switches_by_tier={t: n for t, n in sorted(tiers.items(), key=lambda kv: str(kv[0]))},
        cables_by_tech=dict(sorted(cables_by_tech.items())),
        cables_by_tier=dict(sorted(cables_by_tier.items())),
        bisection_bandwidth=bisection,
        bisection_method=method,
        network_diameter=diameter,
        diameter_method=diameter_method,
        cost=dict(switches=kinds.get("switch", 0), switch_ports=ports,
                  cables=sum(cables_by_tech.values()), cables_by_tech=dict(sorted(cables_by_tech.items()))),
    )


def _cable_owner(u, v, g) -> bool:
    """Count a full-duplex cable once: from its smaller endpoint (or a one-way edge)."""
    return str(u) < str(v) or not g.has_edge(v, u)


def _rate(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x / 1e9:,.1f} GB/s ({x * 8 / 1e12:,.2f} Tb/s)"


def format_description(d: dict) -> str:
    """Human-readable text of :func:`describe`'s result (GB = 1e9 bytes).

    >>> from topologies import fat_tree
    >>> print(format_description(describe(fat_tree(4))).splitlines()[0])
    cluster: fat_tree(k=4, link=ib_ndr, server=host)
    """
    params = {k: (v["name"] if isinstance(v, dict) and "name" in v else v)
              for k, v in d["params"].items() if k not in ("servers",)}
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if v is not None and
                      k in ("k", "nodes", "dims", "p", "a", "h", "g", "leaves", "spines",
                            "hosts_per_leaf", "link", "link_local", "link_global", "server",
                            "oversubscription", "wrap"))
    lines = [f"cluster: {d['generator']}({shown})",
             f"  GPUs {d['gpus']}, servers {d['servers']}, switches {d['switches']}",
             "  nodes by kind: " + ", ".join(f"{k} {n}" for k, n in d["nodes_by_kind"].items())]
    if d["switches_by_role"]:
        lines.append("  switches by role: " + ", ".join(f"{k} {n}" for k, n in d["switches_by_role"].items()))
    lines.append("  cables by technology: " + ", ".join(f"{k} {n}" for k, n in d["cables_by_tech"].items()))
    lines.append("  cables by tier: " + ", ".join(f"{k} {n}" for k, n in d["cables_by_tier"].items()))
    lines.append(f"  bisection bandwidth (one direction): {_rate(d['bisection_bandwidth'])}"
                 f"  [{d['bisection_method']}]")
    diam = "n/a" if d["network_diameter"] is None else f"{d['network_diameter']} hops"
    lines.append(f"  network diameter: {diam}  [{d['diameter_method']}]")
    techs = []
    for name in d["cables_by_tech"]:
        try:
            t = get_link(name)
        except ValueError:
            continue
        eff = "" if t.efficiency is None else f", {t.effective_bandwidth / 1e9:.1f} GB/s effective"
        techs.append(f"    {name}: {t.bandwidth / 1e9:.1f} GB/s per direction{eff}, "
                     f"{t.latency * 1e6:.2f} us per link ({t.family})")
    if techs:
        lines.append("  link technologies:")
        lines.extend(techs)
    c = d["cost"]
    lines.append(f"  cost proxy: {c['switches']} switches, {c['switch_ports']} switch ports, "
                 f"{c['cables']} cables")
    return "\n".join(lines)


def validate(g) -> nx.DiGraph:
    """Check a cluster graph (generated, edited or built by hand) against the schema.

    * a ``networkx.DiGraph`` (not a multigraph) with at least one GPU;
    * every node has ``kind`` in ``"gpu", "nic", "nvswitch", "pcie_switch", "cpu",
      "switch", "storage"``;
    * every edge has a finite ``capacity >= 0`` bytes/s (0 is a failed link), an optional
      finite ``latency >= 0`` s and an optional string ``tech``; ``cables`` if present is
      an integer >= 1;
    * every edge has its reverse (a cable is full duplex);
    * every GPU has at least one link; GPU ``rank`` attributes, where present, are
      distinct integers.

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
    for n, d in g.nodes(data=True):
        kind = d.get("kind")
        if kind not in NODE_KINDS:
            raise TopologyError(f"node {n!r}: kind must be one of {', '.join(NODE_KINDS)}, "
                                f"got {kind!r}")
        if kind == "gpu":
            n_gpu += 1
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
    for u, v, d in g.edges(data=True):
        cap = d.get("capacity")
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap) or cap < 0:
            raise TopologyError(f"edge {u!r} -> {v!r}: capacity must be a finite number >= 0 "
                                f"bytes/s (0 = failed link), got {cap!r}")
        lat = d.get("latency", 0.0)
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not math.isfinite(lat) or lat < 0:
            raise TopologyError(f"edge {u!r} -> {v!r}: latency must be a finite number >= 0 s, "
                                f"got {lat!r}")
        if "tech" in d and not isinstance(d["tech"], str):
            raise TopologyError(f"edge {u!r} -> {v!r}: tech must be a string, got {d['tech']!r}")
        if "cables" in d and (isinstance(d["cables"], bool) or not isinstance(d["cables"], int)
                              or d["cables"] < 1):
            raise TopologyError(f"edge {u!r} -> {v!r}: cables must be an integer >= 1, "
                                f"got {d['cables']!r}")
        if not g.has_edge(v, u):
            raise TopologyError(f"edge {u!r} -> {v!r} has no reverse edge {v!r} -> {u!r}: "
                                "a cable is two directed edges")
    return g


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
    and validate it; see :func:`save` for an example."""
    data = json.loads(Path(path).read_text())
    key = "edges" if "edges" in data else "links"
    g = nx.node_link_graph(data, directed=True, multigraph=False, edges=key)
    return validate(g)
