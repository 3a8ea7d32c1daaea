"""Multi-plane fabrics: every NIC port on its own plane, each plane a full rail-optimised fabric
(as the largest 2025-2026 clusters split an 800G NIC into planes of 400G or 200G ports, so
that switches of a given radix reach more endpoints in fewer tiers)."""

from __future__ import annotations

import networkx as nx

from ._endpoints import server_params
from ._graph import check_int, finish
from .clos import rail_optimized
from .servers import get_server

__all__ = ["multi_plane"]


def multi_plane(nodes: int, *, planes: int = 2, server="dgx_h100", link="ib_ndr", oversubscription=1.0,
                servers_per_unit: int | None = None, radix: int = 64) -> nx.DiGraph:
    """``planes`` copies of :func:`rail_optimized`'s switch fabric; port ``p`` of every NIC is
    cabled to plane ``p`` (a NIC of ``planes`` ports at ``link``'s rate each).

    Switch node ids are those of :func:`rail_optimized` prefixed ``"plane{p}/"``; switches carry
    ``plane``. Access cables are tier ``"access"``, one per NIC port. Counts: ``planes`` times
    the switches and switch-to-switch cables of one plane, ``planes`` access cables per NIC.

    Parameters
    ----------
    nodes, server, link, oversubscription, servers_per_unit, radix
        As :func:`rail_optimized`, for each plane.
    planes : int
        Planes (>= 1) = ports per NIC.

    Examples
    --------
    >>> g = multi_plane(64, planes=2)
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "switch")   # 2 x (16 leaves + 8 spines)
    48
    """
    planes = check_int("planes", planes, 1)
    model = get_server(server).with_(nic_ports=1)
    one = rail_optimized(nodes, server=model, link=link, oversubscription=oversubscription,
                         servers_per_unit=servers_per_unit, radix=radix)
    kind = {n: d.get("kind") for n, d in one.nodes(data=True)}
    g = nx.DiGraph()
    for n, d in one.nodes(data=True):
        if kind[n] != "switch":
            g.add_node(n, **d)
    for p in range(planes):
        for n, d in one.nodes(data=True):
            if kind[n] == "switch":
                g.add_node(f"plane{p}/{n}", **d, plane=p)
    for u, v, d in one.edges(data=True):
        su, sv = kind[u] == "switch", kind[v] == "switch"
        if not su and not sv:
            g.add_edge(u, v, **d)
            continue
        for p in range(planes):
            g.add_edge(f"plane{p}/{u}" if su else u, f"plane{p}/{v}" if sv else v, **d)
    params = dict(one.graph["params"], planes=planes, server=server_params(get_server(server).with_(nic_ports=planes)))
    return finish(g, "multi_plane", params, bisection=None, bisection_method="",
                  network_diameter=one.graph.get("network_diameter"))
