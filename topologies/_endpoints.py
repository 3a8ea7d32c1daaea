"""Private: fill a fabric's endpoint ports with servers."""

from __future__ import annotations

import networkx as nx

from ._graph import add_cable
from .links import LinkTech, get_link
from .servers import ServerModel


def attach_servers(g: nx.DiGraph, server: ServerModel, ports: list, link: LinkTech,
                   *, tier: str = "access", max_servers: int | None = None) -> int:
    """Fill ``ports`` (switch node ids, one entry per endpoint port, in order) with servers.

    Servers take consecutive ports: NIC ``j`` of server ``s`` is cabled to
    ``ports[s * nics + j]``. Ports left over when ``len(ports)`` is not a multiple of the
    NIC count stay empty. A NIC of ``nic_ports`` ports gets that many parallel cables.
    Returns the number of servers placed.
    """
    nics = server.nics
    count = len(ports) // nics
    if count == 0:           # a graph without GPUs was built, and every collective on it failed obscurely
        raise ValueError(f"the fabric's {len(ports)} endpoint ports hold no {server.name} server ({nics} NICs "
                         "a server): choose a larger fabric or a server with fewer NICs")
    if max_servers is not None:
        count = min(count, max_servers)
    tech = server.nic_tech(link)
    for s in range(count):
        built = server.build(g, s, s * server.gpus)
        for j, nic in enumerate(built.nics):
            add_cable(g, nic, ports[s * nics + j], tech, tier=tier, cables=server.nic_ports)
    return count


def endpoint_rate(server: ServerModel, link: LinkTech) -> float:
    """Rate one NIC can carry into the fabric: min(GPU-NIC path, NIC-switch cables), bytes/s."""
    return min(get_link(server.host_link).bandwidth, server.nic_rate(link))


def server_params(server: ServerModel | None) -> dict | None:
    return None if server is None else server.to_dict()


def server_parts(server: ServerModel) -> int:
    """Nodes and directed edges one server adds to a fabric: its own parts (GPUs, NICs,
    switches inside, their cables both ways) and its NICs' cables to the fabric, both ways
    (built once per server model)."""
    try:
        return _PARTS[server]
    except (KeyError, TypeError):
        one = nx.DiGraph()
        server.build(one, 0, 0)
        parts = one.number_of_nodes() + one.number_of_edges() + 2 * server.nics
        try:
            _PARTS[server] = parts
        except TypeError:              # a model that cannot be a key: counted each time
            pass
        return parts


_PARTS: dict = {}
