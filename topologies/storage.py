"""Storage nodes: the third network level (data loading, checkpoints)."""

from __future__ import annotations

import networkx as nx

from ._graph import add_cable, check_int, resolve_link, spread

__all__ = ["add_storage"]

_NETWORKS = ("frontend", "compute")


def add_storage(g: nx.DiGraph, count: int = 4, *, link="eth_400g", network: str = "frontend",
                uplinks: int | None = None) -> list:
    """Attach ``count`` storage nodes to a cluster graph, in place; returns their ids.

    ``network="frontend"``: a separate front-end network, modelled as one non-blocking
    switch ``"frontend/switch"``. Every server gets a front-end NIC ``"s{i}/fe_nic"``
    (kind ``"nic"``, role ``"frontend"``) on its CPU ``"s{i}/cpu0"`` (created if the server
    model has none) through the server's PCIe path; storage traffic lands in host memory
    and never touches the compute fabric (DGX SuperPOD: storage on its own fabric).

    ``network="compute"``: a storage leaf ``"storage/leaf"`` cabled to the top tier of the
    compute fabric with ``uplinks`` cables of ``link`` (default: one per storage node,
    spread over the top-tier switches); storage traffic reaches the GPUs through their
    compute NICs (GPUDirect Storage) and shares the compute fabric.

    Every node and edge added carries ``network="storage"`` (storage nodes and their
    leaf) or ``"frontend"``; ``describe`` leaves them out of the compute fabric's
    bisection and diameter.

    Parameters
    ----------
    g : networkx.DiGraph
        A cluster graph from a generator.
    count : int
        Storage nodes (>= 1).
    link : str or LinkTech
        Technology of the storage nodes' ports and of the front-end cables.
    network : {"frontend", "compute"}
    uplinks : int, optional
        Cables from the storage leaf to the compute fabric, ``network="compute"`` only.

    Examples
    --------
    >>> from topologies import rail_optimized
    >>> g = rail_optimized(4)
    >>> add_storage(g, 2)
    ['storage0', 'storage1']
    >>> g.nodes["s3/fe_nic"]["role"]
    'frontend'
    """
    count = check_int("count", count, 1)
    tech = resolve_link("link", link)
    if network not in _NETWORKS:
        raise ValueError(f"network must be one of {', '.join(_NETWORKS)}, got {network!r}")
    ids = [f"storage{i}" for i in range(count)]
    if any(i in g for i in ids):
        raise ValueError("this graph already has storage nodes; add_storage once per graph")
    if network == "frontend":
        hub = "frontend/switch"
        g.add_node(hub, kind="switch", role="frontend", tier=1, network="frontend")
        servers = sorted({d["server"] for _, d in g.nodes(data=True)
                          if d.get("kind") == "gpu" and "server" in d})
        if not servers:
            raise ValueError("network='frontend' needs GPUs with a 'server' attribute "
                             "(graphs from the topologies generators have one)")
        model = (g.graph.get("params") or {}).get("server") or {}
        host = resolve_link("host_link", model.get("host_link", "pcie5"))
        for s in servers:
            cpu, nic = f"s{s}/cpu0", f"s{s}/fe_nic"
            if cpu not in g:
                g.add_node(cpu, kind="cpu", tier=0, server=s, socket=0, network="frontend")
            g.add_node(nic, kind="nic", tier=0, server=s, role="frontend", network="frontend")
            add_cable(g, cpu, nic, host, tier="pcie")
            add_cable(g, nic, hub, tech, tier="frontend")
        for i in ids:
            g.add_node(i, kind="storage", tier=0, network="frontend")
            add_cable(g, i, hub, tech, tier="frontend")
    else:
        switches = [(d.get("tier", 0), n) for n, d in g.nodes(data=True)
                    if d.get("kind") == "switch" and "network" not in d]
        if not switches:
            raise ValueError("network='compute' needs a switched compute fabric (this graph "
                             "has no switch); use network='frontend'")
        top_tier = max(t for t, _ in switches)
        tops = sorted(n for t, n in switches if t == top_tier)
        leaf = "storage/leaf"
        g.add_node(leaf, kind="switch", role="storage_leaf", tier=1, network="storage")
        n_up = count if uplinks is None else check_int("uplinks", uplinks, 1)
        for top, n in zip(tops, spread(n_up, len(tops))):
            if n:
                add_cable(g, leaf, top, tech, tier="storage", cables=n)
        for i in ids:
            g.add_node(i, kind="storage", tier=0, network="storage")
            add_cable(g, i, leaf, tech, tier="storage")
    g.graph.setdefault("storage", []).append(dict(count=count, link=tech.name, network=network))
    return ids
