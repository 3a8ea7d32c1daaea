"""DragonFly (Kim, Dally, Scott, Abts, ISCA 2008)."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx

from ._endpoints import attach_servers, endpoint_rate, server_parts, server_params
from ._graph import add_cable, check_int, check_scale, finish, resolve_link
from .servers import get_server

__all__ = ["dragonfly", "dragonfly_plus", "global_link_partner"]

_ARRANGEMENTS = ("absolute", "relative")


def global_link_partner(group: int, port: int, groups: int, arrangement: str = "absolute"):
    """Where global port ``port`` of ``group`` lands: ``(other_group, other_port)``.

    A group has ``a*h`` global ports numbered router by router (router ``r`` owns ports
    ``r*h ... r*h + h - 1``). With ``m = a*h / (groups - 1)`` cables per pair of groups,
    port ``j`` is the ``j // (groups-1)``-th cable towards offset ``t = j mod (groups-1)``:

    * ``"absolute"`` (Kim et al.): offset ``t`` means group ``t`` if ``t < group`` else
      ``t + 1`` - ports go to the other groups in increasing group order;
    * ``"relative"`` (circulant, Camarero et al.): offset ``t`` means group
      ``(group + t + 1) mod groups``.

    >>> global_link_partner(0, 0, 9), global_link_partner(1, 0, 9)
    ((1, 0), (0, 0))
    >>> global_link_partner(0, 0, 9, "relative"), global_link_partner(1, 7, 9, "relative")
    ((1, 7), (0, 0))
    """
    span = groups - 1
    k, t = divmod(port, span)
    if arrangement == "absolute":
        other = t if t < group else t + 1
        back = group if group < other else group - 1
    else:
        other = (group + t + 1) % groups
        back = (group - other - 1) % groups
    return other, k * span + back


def _divisors(n: int) -> list:
    """The divisors of ``n`` in increasing order, by trial division up to ``sqrt(n)``."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _checked_groups(name, groups, ports, label, allowed_text, why, arrangement, scale) -> int:
    """The group count ``name`` (default ``ports + 1``, one cable per group pair) of a
    DragonFly whose groups have ``ports`` global ports (``label`` in the messages): 2 ...
    ``ports + 1`` and ``groups - 1`` dividing ``ports``, so every pair of groups gets the same
    number of global cables; ``arrangement`` one of the known ones. ``scale(groups)`` checks
    the size first (it bounds ``ports``: the divisors listed in the message are then few)."""
    if groups is None:
        groups = ports + 1
    groups = check_int(name, groups, 2, allowed_text)
    if groups > ports + 1:
        raise ValueError(f"{name} must be between 2 and {label} + 1 = {ports + 1}{why}, got {groups}")
    if arrangement not in _ARRANGEMENTS:
        raise ValueError(f"arrangement must be one of {', '.join(_ARRANGEMENTS)}, got {arrangement!r}")
    scale(groups)
    if ports % (groups - 1):
        allowed = [d + 1 for d in _divisors(ports)]
        raise ValueError(f"{name} - 1 must divide {label} = {ports} so every pair of groups gets the same "
                         f"number of global cables; allowed {name}: {allowed}, got {groups}")
    return groups


def dragonfly(p: int, a: int, h: int, *, g: int | None = None, link_local="ib_ndr",
              link_global="ib_ndr", arrangement: str = "absolute", server=None) -> nx.DiGraph:
    """DragonFly of ``g`` groups of ``a`` routers.

    Routers of a group are joined all-to-all by ``link_local``; each router has ``h``
    global cables (``link_global``) and ``p`` endpoint ports. Every pair of groups is
    joined by ``m = a*h/(g-1)`` global cables, arranged as :func:`global_link_partner`
    describes; ``g - 1`` must divide ``a*h``. Balanced: ``a = 2p = 2h``. Router radix is
    ``p + a - 1 + h``; endpoints ``a*p*g``. Servers take consecutive endpoint ports
    (router by router, group by group).

    Parameters
    ----------
    p, a, h : int
        Endpoints per router (>= 1), routers per group (>= 1), global links per router (>= 1).
    g : int, optional
        Groups, 2 ... a*h + 1; default ``a*h + 1`` (the largest, one cable per group pair).
    link_local, link_global : str or LinkTech
        Intra-group and inter-group technologies; endpoint ports use ``link_local``.
    arrangement : {"absolute", "relative"}
        Global-link arrangement.
    server : str, ServerModel or None
        Endpoint model; None gives single-GPU hosts.

    Examples
    --------
    >>> net = dragonfly(4, 8, 4)
    >>> net.graph["params"]["groups"], net.graph["params"]["routers"], net.graph["params"]["servers"]
    (33, 264, 1056)
    """
    p = check_int("p", p, 1, "endpoints per router")
    a = check_int("a", a, 1, "routers per group")
    h = check_int("h", h, 1, "global links per router")
    local = resolve_link("link_local", link_local)
    glob = resolve_link("link_global", link_global)
    model = get_server(server)
    # routers, the servers of their ports, local all-to-all and global cables both ways
    g = _checked_groups("g", g, a * h, "a*h", f"groups, at most a*h + 1 = {a * h + 1}",
                        " (each group has a*h global ports)", arrangement,
                        lambda n: check_scale("dragonfly", n * a * (1 + (a - 1) + h)
                                              + n * a * p // model.nics * server_parts(model),
                                              f"p = {p}, a = {a}, h = {h}, g = {n}"))
    net = nx.DiGraph()
    router = lambda grp, r: f"g{grp}/r{r}"  # noqa: E731
    ports = []
    for grp in range(g):
        for r in range(a):
            net.add_node(router(grp, r), kind="switch", role="router", tier=1, group=grp)
            ports.extend([router(grp, r)] * p)
        for r in range(a):
            for q in range(r + 1, a):
                add_cable(net, router(grp, r), router(grp, q), local, tier="local")
    cables, halves_apart = Counter(), 0
    for grp in range(g):
        for port in range(a * h):
            other, back = global_link_partner(grp, port, g, arrangement)
            if (grp, port) < (other, back):
                cables[(router(grp, port // h), router(other, back // h))] += 1
                halves_apart += (port // h < a // 2) != (back // h < a // 2)
    for (u, v), n in cables.items():
        add_cable(net, u, v, glob, tier="global", cables=n)
    servers = attach_servers(net, model, ports, local)
    m = a * h // (g - 1)
    # Group-aligned halves: groups [0, g//2) against the rest. The cut holds (g//2) * (g - g//2)
    # * m global cables, unless the endpoints of the smaller side carry less. With an odd g the
    # sides differ by a group: no bisection (a balanced cut through a group can hold less:
    # dragonfly(2, 2, 2) has 250 GB/s where that cut has 300), a max flow is reported instead.
    # Every group halved (routers [0, a//2) of each group against the rest) is balanced too and
    # holds (a//2)^2 local cables a group plus the global cables between the halves: with the
    # absolute arrangement's a = 2 no global cable crosses (router r's cables reach router r), so
    # dragonfly(2, 2, 3, g=4) has 200 GB/s where the group-aligned cut has 400. The smaller of the
    # two is recorded (both are balanced cuts; an exact search over every balanced partition
    # agrees on the corpus of cases tests/topologies/test_dragonfly_bisection.py holds).
    bisection = None
    if (a * p) % model.nics == 0 and g % 2 == 0:
        small_side_nics = (g // 2) * a * p
        bisection = min((g // 2) * (g - g // 2) * m * glob.bandwidth,
                        small_side_nics * endpoint_rate(model, local))
        if a % 2 == 0 and (a // 2 * p) % model.nics == 0:
            bisection = min(bisection, g * (a // 2) ** 2 * local.bandwidth + halves_apart * glob.bandwidth)
    params = dict(p=p, a=a, h=h, g=g, groups=g, routers=a * g, cables_per_group_pair=m,
                  radix=p + a - 1 + h, link_local=local.name, link_global=glob.name,
                  arrangement=arrangement, server=server_params(model), servers=servers)
    # One cable per group pair: minimal routes are local-global-local, 3 router hops
    # (+ 2 NIC hops); with several cables per pair the diameter can be smaller: BFS then.
    diameter = 3 + 2 if (m == 1 and a >= 2) else None
    return finish(net, "dragonfly", params, bisection=bisection,
                  bisection_method="formula: the smaller of the cables between groups [0, g//2) and the "
                                   "rest and of those between every group's two halves of routers",
                  network_diameter=diameter)


def dragonfly_plus(leaves: int, spines: int, hosts_per_leaf: int, global_per_spine: int, *,
                   groups: int | None = None, link_local="ib_ndr", link_global="ib_ndr",
                   arrangement: str = "absolute", server=None) -> nx.DiGraph:
    """DragonFly+ (Shpiner et al., HOTI 2017): ``groups`` groups, each a two-tier leaf-spine
    (every leaf cabled to every spine of its group, tier ``"local"``), the spines carrying
    the global cables (tier ``"global"``) arranged between groups as :func:`global_link_partner`
    describes, with the group's ``spines * global_per_spine`` global ports numbered spine by
    spine. Endpoints hang off the leaves (``hosts_per_leaf`` ports each).

    Counts: ``groups * (leaves + spines)`` switches; ``groups * leaves * spines`` local
    cables; ``groups * spines * global_per_spine / 2`` global cables, ``m = spines *
    global_per_spine / (groups - 1)`` between every pair of groups. Leaf radix
    ``hosts_per_leaf + spines``, spine radix ``leaves + global_per_spine``; balanced with
    radix k: ``leaves = spines = hosts_per_leaf = global_per_spine = k/2`` and up to
    ``(k/2)**2 + 1`` groups.

    Parameters
    ----------
    leaves, spines, hosts_per_leaf, global_per_spine : int
        Per group (each >= 1).
    groups : int, optional
        2 ... ``spines * global_per_spine + 1`` (default the largest); ``groups - 1`` must
        divide ``spines * global_per_spine``.
    link_local, link_global : str or LinkTech
        Intra-group (and endpoint) and global technologies.
    arrangement : {"absolute", "relative"}
        Global-link arrangement.
    server : str, ServerModel or None
        Endpoint model; None gives single-GPU hosts.

    Examples
    --------
    >>> net = dragonfly_plus(4, 4, 4, 4)          # radix 8: 17 groups of 4 + 4 switches
    >>> net.graph["params"]["groups"], net.graph["params"]["switches"], net.graph["params"]["servers"]
    (17, 136, 272)
    """
    leaves = check_int("leaves", leaves, 1)
    spines = check_int("spines", spines, 1)
    hosts_per_leaf = check_int("hosts_per_leaf", hosts_per_leaf, 1)
    h = check_int("global_per_spine", global_per_spine, 1)
    ports = spines * h
    local = resolve_link("link_local", link_local)
    glob = resolve_link("link_global", link_global)
    model = get_server(server)
    # per group: its switches, every leaf to every spine and the global cables both ways, its servers
    groups = _checked_groups("groups", groups, ports, "spines*global_per_spine",
                             f"at most spines*global_per_spine + 1 = {ports + 1}", "", arrangement,
                             lambda n: check_scale("dragonfly_plus", n * (leaves + spines + 2 * leaves * spines + ports)
                                                   + n * leaves * hosts_per_leaf // model.nics * server_parts(model),
                                                   f"{leaves} leaves x {hosts_per_leaf} hosts, {spines} spines, "
                                                   f"{n} groups"))
    net = nx.DiGraph()
    leaf = lambda grp, i: f"g{grp}/leaf{i}"      # noqa: E731
    spine = lambda grp, j: f"g{grp}/spine{j}"    # noqa: E731
    endpoint_ports = []
    for grp in range(groups):
        for j in range(spines):
            net.add_node(spine(grp, j), kind="switch", role="spine", tier=2, group=grp)
        for i in range(leaves):
            net.add_node(leaf(grp, i), kind="switch", role="leaf", tier=1, group=grp)
            endpoint_ports.extend([leaf(grp, i)] * hosts_per_leaf)
            for j in range(spines):
                add_cable(net, leaf(grp, i), spine(grp, j), local, tier="local")
    cables = Counter()
    for grp in range(groups):
        for port in range(ports):
            other, back = global_link_partner(grp, port, groups, arrangement)
            if (grp, port) < (other, back):
                cables[(spine(grp, port // h), spine(other, back // h))] += 1
    for (u, v), n in cables.items():
        add_cable(net, u, v, glob, tier="global", cables=n)
    servers = attach_servers(net, model, endpoint_ports, local)
    m = ports // (groups - 1)
    bisection = None
    if (leaves * hosts_per_leaf) % model.nics == 0 and groups % 2 == 0:    # (odd: as dragonfly's)
        small_side_nics = (groups // 2) * leaves * hosts_per_leaf
        bisection = min((groups // 2) * (groups - groups // 2) * m * glob.bandwidth,
                        small_side_nics * endpoint_rate(model, local),
                        (groups // 2) * leaves * spines * local.bandwidth)
    params = dict(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, global_per_spine=h, groups=groups,
                  switches=groups * (leaves + spines), cables_per_group_pair=m,
                  leaf_radix=hosts_per_leaf + spines, spine_radix=leaves + h, link_local=local.name,
                  link_global=glob.name, arrangement=arrangement, server=server_params(model), servers=servers)
    return finish(net, "dragonfly_plus", params, bisection=bisection,
                  bisection_method="formula: global cables between groups [0, g//2) and the rest, or the "
                                   "endpoints / local cables of the smaller side",
                  network_diameter=None)
