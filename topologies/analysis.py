"""Reading a cluster graph: GPU rank order, description, bisection bandwidth.

The schema check is in :mod:`topologies._validate`, files in :mod:`topologies.formats`."""

from __future__ import annotations

import re
from collections import Counter, deque

import networkx as nx

from ._graph import compute_fabric, edited as was_edited
from .links import get_link

__all__ = ["gpus", "describe", "format_description", "bisection_max_flow", "server_halves"]

#: BFS for the diameter is run only up to this many endpoints (cost grows as endpoints x edges)
DIAMETER_BFS_LIMIT = 2048


def _natural_key(node):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(node))]


def gpus(g: nx.DiGraph) -> list:
    """The GPU nodes in canonical rank order.

    The generators give every GPU a ``rank`` attribute: servers in the order they were
    placed (fabric port order), GPUs of a server by local index, so rank
    ``r = server * gpus_per_server + local_rank``. A graph whose GPUs lack ``rank``
    (built by hand) is ordered by node id, numbers compared as numbers ("gpu2" before
    "gpu10").

    Examples
    --------
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


def server_halves(g: nx.DiGraph) -> tuple[list, list]:
    """The GPUs of the two sides of the network's bisection: the first ``floor(n/2)`` of the
    ``n`` servers in rank order against the other ``ceil(n/2)``.

    A bisection cuts the network's terminals into two halves of nearly equal size (sizes
    differing by at most one: Dally & Towles, *Principles and Practices of Interconnection
    Networks*, sec. 3.3). The terminals here are servers (GPU attribute ``server``; a GPU
    without one is a server of its own): a cut through a server would count its NVLink as
    network bandwidth (the GPU rank halves of 127 DGX H100 split server 63 and held
    27.2 TB/s, more than the 25.4 TB/s of half the GPUs' NICs). With an odd count the
    smaller half has ``floor(n/2)`` servers, which bound the cut by their NICs. A single
    server is no network: its GPU rank halves are returned (the bisection of its NVLink
    domain, as :func:`~topologies.rail_optimized` reports for ``nodes=1``).

    >>> from topologies import rail_optimized
    >>> [len(side) // 8 for side in server_halves(rail_optimized(127))]    # DGX: 8 GPUs each
    [63, 64]
    """
    order = gpus(g)
    by_server: dict = {}
    for n in order:
        by_server.setdefault(g.nodes[n].get("server", ("gpu", n)), []).append(n)
    servers = list(by_server.values())
    if len(servers) < 2:
        half = len(order) // 2
        return order[:half], order[half:2 * half]
    half = len(servers) // 2
    return ([n for s in servers[:half] for n in s], [n for s in servers[half:] for n in s])


def bisection_max_flow(g: nx.DiGraph, first=None, second=None) -> float:
    """Maximum flow (bytes/s, one direction) from the GPUs of ``first`` to those of
    ``second`` over edge capacities; defaults: the server halves of :func:`server_halves`
    (whole servers, the first ``floor(n/2)`` against the rest).

    This is the capacity of a minimum cut between the two GPU sets; for the server halves
    it is an upper bound on the true bisection bandwidth (a minimum over all balanced
    partitions of the servers, NP-hard in general).

    >>> from topologies import fat_tree
    >>> bisection_max_flow(fat_tree(4)) / 50e9      # 8 NDR links of 50 GB/s
    8.0
    """
    core = compute_fabric(g)
    if first is None or second is None:
        first, second = server_halves(core)
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
    two halves of the servers, whole servers on each side, ``floor(n/2)`` against the rest
    with an odd count (:func:`server_halves`, :func:`bisection_max_flow`). The network diameter is
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
    edited = was_edited(g, hashed=True)       # every edge hashed: a capacity moved misleads the formulas
    bisection, method = _bisection(g, exact, edited, kinds.get("gpu", 0))
    diameter, diameter_method = _diameter(g, edited)
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


def _bisection(g: nx.DiGraph, exact: bool, edited: bool, n_gpus: int):
    """Bisection bandwidth (bytes/s) and how it was found: the generator's formula on an
    unedited graph, else (or when ``exact``) a maximum flow between the server halves."""
    bisection = g.graph.get("bisection_bandwidth")
    method = g.graph.get("bisection_method", "")
    if exact or edited or bisection is None:
        bisection = bisection_max_flow(g) if n_gpus >= 2 else None
        halves = _halves_method(g)
        method = halves + (
            " (graph edited since generation)" if edited and "fingerprint" in g.graph else "")
        if g.graph.get("bisection_note"):
            # a reader's graph with no formula for its shape says what its max flow is (SimAI:
            # an upper bound, the rank-order server halves being one balanced cut of many)
            method += f"; {g.graph['bisection_note']}"
        cut = g.graph.get("bisection_cut")
        order = gpus(g) if bisection is not None and cut else []
        if order and _balanced(g, order, cut):
            # the formula's own cut too (a torus's longest dimension, not the server halves'
            # first one: failing cables raised the bisection from 200 to 400 GB/s), also for
            # an odd count, floor(n/2) servers against the rest (torus((3, 5, 7),
            # server="host"): 1,850 GB/s across it, 2,600 between the rank-order halves)
            first = set(int(r) for r in cut)
            across = bisection_max_flow(g, [order[r] for r in sorted(first)],
                                        [n for r, n in enumerate(order) if r not in first])
            if across < bisection:
                bisection, method = across, method.replace(halves, "max flow between the formula's halves")
    return bisection, method


def _balanced(g: nx.DiGraph, order: list, cut) -> bool:
    """Whether the GPU ranks ``cut`` are one side of a balanced cut as :func:`server_halves`
    draws one: whole servers, ``floor(n/2)`` or ``ceil(n/2)`` of the ``n`` (of one server,
    ``floor`` or ``ceil`` of half its GPUs)."""
    ranks = {int(r) for r in cut}
    if not ranks or min(ranks) < 0 or max(ranks) >= len(order):
        return False
    by_server: dict = {}
    for r, n in enumerate(order):
        by_server.setdefault(g.nodes[n].get("server", ("gpu", n)), []).append(r)
    if len(by_server) < 2:
        return len(ranks) in (len(order) // 2, (len(order) + 1) // 2)
    taken = [sum(r in ranks for r in rs) for rs in by_server.values()]
    whole = all(t in (0, len(rs)) for t, rs in zip(taken, by_server.values()))
    servers = sum(t > 0 for t in taken)
    return whole and servers in (len(by_server) // 2, (len(by_server) + 1) // 2)


def _halves_method(g: nx.DiGraph) -> str:
    """How :func:`server_halves` cuts ``g``: between whole servers, or, with one server,
    between its GPU rank halves."""
    servers = {d.get("server", ("gpu", n)) for n, d in g.nodes(data=True) if d.get("kind") == "gpu"}
    if len(servers) < 2:
        return "max flow between the GPU rank halves of its one server"
    return "max flow between the server halves"


def _diameter(g: nx.DiGraph, edited: bool):
    """Network diameter (hops, None when unknown) and how it was found: the generator's
    formula on an unedited graph, else breadth-first search between network endpoints."""
    diameter = None if edited else g.graph.get("network_diameter")
    if diameter is not None:
        return diameter, "formula"
    ends, fabric = _endpoints_and_fabric(g)
    if len(ends) < 2:
        return None, "fewer than two network endpoints"
    if len(ends) > DIAMETER_BFS_LIMIT:
        return None, f"not computed (more than {DIAMETER_BFS_LIMIT} endpoints)"
    diameter = _bfs_diameter(fabric, ends)
    return diameter, ("breadth-first search" if diameter is not None else "endpoints not all joined by the network")


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
                      k in ("k", "pods", "nodes", "dims", "p", "a", "h", "g", "leaves", "spines",
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
