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
    # Bisection: the cheapest balanced cut by coordinates (_coordinate_cut): across an even
    # dimension K, 2 * nodes / K cables with wrap-around (K >= 3, or K = 2 with its doubled
    # cables), nodes / K without; across an odd one, its rings cut as well plus the middle
    # plane bisected the same way. Servers can cap it at their NICs; where a plane is split,
    # a router of its cut may cost less on the other side (its NICs instead of its cables:
    # torus((2, 9), server="host") 250 GB/s, not 300), so describe() takes the max flow there,
    # between the server halves and this cut's halves.
    crossing, first, split = _coordinate_cut(dims, wrap)
    bisection = crossing * tech.bandwidth
    if not chips:
        bisection = None if split else min(bisection, nodes // 2 * model.nics * endpoint_rate(model, tech))
    hops = sum(k // 2 if wrap else k - 1 for k in dims)
    params = dict(dims=list(dims), wrap=wrap, link=tech.name, nodes=nodes,
                  server=server_params(model), servers=nodes)
    # the formula's halves, as GPU ranks (cell s holds GPUs s x gpus ... of its server, or is one)
    per = 1 if chips else model.gpus
    cut = [s * per + j for s, c in enumerate(coords) if first(c) for j in range(per)]
    return finish(net, "torus", params, bisection=bisection,
                  bisection_method="formula: cables across the cheapest balanced cut by coordinates (a longest "
                                   "even dimension's halves; an odd dimension's with its middle plane bisected)",
                  network_diameter=hops if chips else hops + 2, bisection_cut=cut)


def _coordinate_cut(dims: tuple, wrap: bool):
    """The cheapest balanced cut of a torus (or mesh) of ``dims`` found by coordinates:
    ``(cables crossing, is_first(coords), split)``, the first half ``floor(nodes/2)`` cells,
    ``split`` whether it cuts through a plane (an odd dimension's middle).

    Across dimension ``d`` of even length ``K``: the cells with ``c[d] < K/2``, whose every
    ring along ``d`` is cut twice with wrap-around (``2 N / K`` cables; a length-2 ring's
    doubled cables too), once without (``N / K``): the k-ary n-cube bisection, Dally &
    Towles sec. 5.2. Across an odd ``K = 2m + 1``: the cells with ``c[d] < m`` plus the first
    half of the middle plane ``c[d] = m``, itself bisected the same way (its rings are still
    cut twice, once without wrap), so ``2 N / K`` plus the plane's cut. The least over the
    dimensions, a longest even one first on a tie (a torus (3, 4, 5): 30 cables across the
    4, which the rank-order halves cut as 50; (2, 9): 6 across the 9, not 18 across the 2).
    An upper bound on the bisection width: no formula here proves it minimal for odd lengths.

    >>> _coordinate_cut((4, 4), True)[0], _coordinate_cut((3, 4, 5), True)[0], _coordinate_cut((5,), False)[0]
    (8, 30, 1)
    """
    nodes = math.prod(dims)
    per_ring = 2 if wrap else 1
    order = sorted(range(len(dims)), key=lambda d: (dims[d] % 2, -dims[d], d))
    best = None
    for d in order:
        k = dims[d]
        cost = per_ring * nodes // k
        if k % 2 == 0:
            inside = (lambda d, h: lambda c: c[d] < h)(d, k // 2)
        else:
            rest = dims[:d] + dims[d + 1:]
            sub_cost, sub_first, _ = _coordinate_cut(rest, wrap) if rest else (0, lambda c: False, True)
            cost += sub_cost
            inside = (lambda d, m, sub: lambda c: c[d] < m or (c[d] == m and sub(tuple(c[:d]) + tuple(c[d + 1:]))))(
                d, k // 2, sub_first)
        if best is None or cost < best[0]:
            best = (cost, inside, k % 2 == 1)
    return best
