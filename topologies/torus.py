"""n-dimensional torus and mesh."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ._endpoints import endpoint_rate, server_parts, server_params
from ._graph import add_cable, check_scale, finish, resolve_link
from .servers import get_server

__all__ = ["torus"]


def torus(dims, *, link="ib_ndr", wrap: bool = True, server=None) -> nx.DiGraph:
    """n-dimensional torus (``wrap=True``) or mesh (``wrap=False``).

    With no server, every node is a chip - a GPU cabled straight to its ``2n`` neighbours
    (TPU style), node id ``"n{x}_{y}_..."``, rank in row-major order of the coordinates.
    With a server, every node is a router (kind ``"switch"``, role ``"router"``) holding one
    server whose NICs all plug into it. In a dimension of length 2 with wrap-around the
    ``+1`` and ``-1`` neighbours coincide: that pair gets two parallel cables.

    Parameters
    ----------
    dims : sequence of int
        Length of each dimension, each >= 2.
    link : str or LinkTech
        Technology of every torus cable (and of the NIC ports).
    wrap : bool
        Wrap-around links (torus) or not (mesh).
    server : str, ServerModel or None
        None: a torus of chips. Otherwise the server at each router.

    Examples
    --------
    >>> t = torus((4, 4, 4))
    >>> t.number_of_nodes(), {t.out_degree(n) for n in t}
    (64, {6})
    """
    # a string is a sequence too ("44" would be (4, 4)), and a float a truncated size
    if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__") or any(
            isinstance(d, bool) or not hasattr(d, "__index__") for d in dims):
        raise ValueError(f"dims must be a sequence of integers >= 2, got {dims!r}")
    dims = tuple(int(d) for d in dims)
    if not dims or any(d < 2 for d in dims):
        raise ValueError(f"dims must be a non-empty sequence of integers >= 2 (a dimension of "
                         f"0 or 1 has no neighbours), got {dims}")
    tech = resolve_link("link", link)
    chips = server is None
    model = None if chips else get_server(server)
    # a chip (or router and its server) a cell, its 2 cables a dimension both ways
    cells = math.prod(dims)
    check_scale("torus", cells * (1 + 2 * len(dims) + (0 if chips else server_parts(model))), f"dims {dims}")
    name = lambda c: ("n" if chips else "r") + "_".join(map(str, c))  # noqa: E731
    net = nx.DiGraph()
    coords = list(np.ndindex(*dims))
    for rank, c in enumerate(coords):
        if chips:
            net.add_node(name(c), kind="gpu", tier=0, rank=rank, server=rank, local_rank=0,
                         rail=0, coords=list(c), gpu_type="h100_sxm")
        else:
            net.add_node(name(c), kind="switch", role="router", tier=1, coords=list(c))
    for c in coords:
        for d, k in enumerate(dims):
            if c[d] + 1 < k or wrap:
                nb = list(c)
                nb[d] = (c[d] + 1) % k
                nb = tuple(nb)
                if k == 2 and wrap:
                    if c[d] == 0:
                        add_cable(net, name(c), name(nb), tech, tier="torus", cables=2)
                else:
                    add_cable(net, name(c), name(nb), tech, tier="torus")
    if not chips:
        nic_tech = model.nic_tech(tech)
        for s, c in enumerate(coords):
            built = model.build(net, s, s * model.gpus)
            for nic in built.nics:
                add_cable(net, nic, name(c), nic_tech, tier="access", cables=model.nic_ports)
    nodes = len(coords)
    longest = max(dims)
    # Bisection: cut across a longest dimension (halves by that coordinate). The cut
    # crosses 2 * nodes / K cables with wrap-around (K >= 3, or K = 2 with its doubled
    # cables), nodes / K without; servers can cap it at their NICs.
    bisection = None
    if longest % 2 == 0:
        crossing = (2 if wrap else 1) * nodes // longest
        bisection = crossing * tech.bandwidth
        if not chips:
            bisection = min(bisection, nodes // 2 * model.nics * endpoint_rate(model, tech))
    hops = sum(k // 2 if wrap else k - 1 for k in dims)
    params = dict(dims=list(dims), wrap=wrap, link=tech.name, nodes=nodes,
                  server=server_params(model), servers=nodes)
    # the formula's halves, as GPU ranks (cell s holds GPUs s x gpus ... of its server, or is one)
    axis = dims.index(longest)
    per = 1 if chips else model.gpus
    cut = [s * per + j for s, c in enumerate(coords) if c[axis] < longest // 2 for j in range(per)]
    return finish(net, "torus", params, bisection=bisection,
                  bisection_method="formula: cables across a longest dimension (halves by its "
                                   "coordinate)",
                  network_diameter=hops if chips else hops + 2, bisection_cut=cut)
