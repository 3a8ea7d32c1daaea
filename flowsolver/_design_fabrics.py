"""The fabrics :func:`flowsolver.design` builds for a GPU count: one builder per family, each
sized from the GPU count, the server's NICs and the switch radix.

A fabric sized by whole switches can have more host ports than the job's NICs (a fat-tree
whole pods, a leaf-spine whole leaves) and its generator fills every one with
servers. The design places the job's servers on the first host ports (the generator's order:
consecutive ports, switch by switch; GPU ranks ``0 .. gpus - 1``) and leaves the rest empty, as
an architect buys the last leaf or the fat-tree's pods for a cluster that does not fill them:
every switch and switch-to-switch cable is built and billed, NICs and host cables only for the
servers placed."""

from __future__ import annotations

import math

import topologies as tp

#: families :func:`flowsolver.design` can build for a GPU count (each sized from the GPU count and radix)
DESIGN_FAMILIES = ("rail_optimized", "leaf_spine", "fat_tree", "rail_only", "dragonfly_plus")


def server_with(base, nics: int, link: str):
    """The server with ``nics`` NICs running at the fabric's rate."""
    model = tp.get_server(base)
    if model.gpus % nics:
        raise ValueError(f"nics ({nics}) must divide the server's GPUs ({model.gpus})")
    # the same name while the NIC count is the server's (its NIC cages, as the bill knows them)
    name = model.name if nics == model.nics else f"{model.name}_{nics}nic"
    return model.with_(name=name, nics=nics, nic=None)


def nic_credit(bill, server, *, prices: dict | None = None) -> float:
    """USD of ``bill``'s compute NICs that a GPU price holding ``server``'s own NICs already
    pays for: per server up to its ``nics`` NICs, each at the lesser of its price and that of
    the server's own NIC (the catalogue NIC of its ``nic`` rate, ``prices`` overriding: a DGX
    H100's ConnectX-7 400G). A dearer NIC (ConnectX-8 for XDR, a BlueField) pays the
    difference; a cheaper one, or fewer, is no refund. A server with no NIC technology of its
    own: the bill's NICs."""
    return _own_nics(bill, server, "price", prices)


def _own_nics(bill, server, figure: str, overrides: dict | None) -> float:
    """:func:`nic_credit` of one ``figure`` of the parts, ``"price"`` (USD) or ``"power"`` (W),
    the server's own NIC's taken from ``overrides`` where named there."""
    from topologies.parts import _rate_part         # the NIC the bill picks for a rate

    model = tp.get_server(server)
    lines = [line for line in bill.lines if line.part.category == "nic"]
    if model.nic is None:
        return float(sum(getattr(line, figure) for line in lines))
    own = _rate_part("nic", model.nic_ports * tp.get_link(model.nic).bandwidth)
    own_figure = float((overrides or {}).get(own.name, getattr(own, figure)))
    left, credit = (bill.gpus // model.gpus) * model.nics, 0.0
    for line in sorted(lines, key=lambda line: -getattr(line.part, figure)):
        n = min(line.count, left)
        credit, left = credit + n * min(getattr(line.part, figure), own_figure), left - n
    return float(credit)


def server_parts(bill, server, *, nics: bool, prices: dict | None = None, power: dict | None = None) -> tuple:
    """``(USD, W)`` of ``bill``'s parts that come with ``server``'s servers, not bought for the
    network: the scale-up switch trays of a rack (an NVL72's 9 NVLink switch trays, bought with
    the rack as a DGX's NVSwitch chips are, which no bill lists) and, with ``nics``, the NICs the
    servers ship with (:func:`nic_credit`, for their power too: per server up to its NIC count,
    each at the lesser of the billed NIC's figure and the server's own NIC's)."""
    trays = [line for line in bill.lines if line.part.category == "nvswitch_tray"]
    usd, watts = sum(line.price for line in trays), sum(line.power for line in trays)
    if nics:
        usd, watts = usd + _own_nics(bill, server, "price", prices), watts + _own_nics(bill, server, "power", power)
    return float(usd), float(watts)


def build(family: str, servers: int, server, link: str, ratio: float, radix: int):
    """The fabric of ``family`` for ``servers`` servers of ``server``, sized by ``radix``: the
    job's servers on its first host ports (see the module docstring)."""
    return _first_servers(_family(family, servers, server, link, ratio, radix), servers)


def _first_servers(g, servers: int):
    """``g`` with the servers after the first ``servers`` taken out, their NICs' ports left
    empty; ``params["server_slots"]`` records how many servers its host ports hold."""
    slots = g.graph["params"].get("servers")
    if not isinstance(slots, int) or slots <= servers:
        return g
    g.remove_nodes_from([n for n, d in g.nodes(data=True) if d.get("server", -1) >= servers])
    g.graph["params"] = dict(g.graph["params"], servers=servers, server_slots=slots)
    # the family's formula holds with every port filled: describe() finds the max flow instead
    g.graph["bisection_bandwidth"] = None
    g.graph["bisection_method"] = f"not recorded: {servers} servers on the first host ports of {slots}"
    g.graph["fingerprint"] = tp.fingerprint(g)    # built so by the design, not edited since
    return g


def nic_behind_pcie(server, link: str) -> str:
    """What a candidate's NICs lose to the server's PCIe ("" if nothing): an XDR NIC's 800 Gb/s
    (100 GB/s) behind a Hopper / Blackwell server's PCIe Gen5 x16 (63 GB/s) sends at most the
    PCIe's rate, which the timing models (the GPU-NIC link), but its price is on the bill.

    >>> nic_behind_pcie(server_with("dgx_h200", 8, "ib_xdr"), "ib_xdr")
    "its 100 GB/s NICs sit behind the server's pcie5 (63 GB/s, 48 GB/s as a long transfer reaches it): they send at most that"
    >>> nic_behind_pcie(server_with("dgx_h200", 8, "ib_ndr"), "ib_ndr")
    ''
    """
    host = tp.get_link(server.host_link)
    pcie, rate = host.bandwidth, server.nic_rate(link)
    if rate <= pcie:
        return ""
    # the effective rate too (newuser27 #4: the raw 63 GB/s suggested XDR a third faster than NDR's
    # 47 GB/s, where the PCIe passes 48: 2-5 % on H200 / B200)
    return (f"its {rate / 1e9:.0f} GB/s NICs sit behind the server's {server.host_link} ({pcie / 1e9:.0f} GB/s, "
            f"{host.effective_bandwidth / 1e9:.0f} GB/s as a long transfer reaches it): they send at most that")


def spare_ports(g) -> str:
    """What a fabric's empty host ports are, for a candidate's message ("" if none)."""
    params = g.graph.get("params") or {}
    slots, servers = params.get("server_slots"), params.get("servers")
    if not slots:
        return ""
    gen = g.graph.get("generator")
    pods = f" of {params['pods']} pods" if params.get("pods") else ""
    what = {"fat_tree": f"a k = {params.get('k')} fat-tree{pods}", "leaf_spine": f"{params.get('leaves')} leaves"}.get(
        gen, f"the {gen}")
    return (f"{what} billed whole: ports for {slots} servers, {servers} placed on the first, "
            f"{slots - servers} servers' ports empty (room to grow)")


def hosts_per_leaf(server_nics: int, ports: int, exact: bool = False) -> int:
    """Host ports of a leaf of ``ports`` host ports that a fabric fills: whole servers where a
    server's NICs fit (a DGX's 8 on one top-of-rack leaf), else every port, a server's NICs
    spread over consecutive leaves (two NVL72 racks' 144 NICs on 5 leaves of 32, the last
    leaf's spare ports empty). ``exact``: leaves that hold a share of one server's NICs that
    divides them (72 over 3 leaves of 24), for a fabric that must hold the NICs exactly
    (DragonFly+).

    >>> hosts_per_leaf(8, 32), hosts_per_leaf(72, 32), hosts_per_leaf(72, 32, exact=True), hosts_per_leaf(7, 4)
    (32, 32, 24, 4)
    """
    if server_nics <= ports:
        return ports - ports % server_nics
    if not exact:
        return ports
    return max((d for d in range(1, ports + 1) if server_nics % d == 0), default=0)


def _family(family: str, servers: int, server, link: str, ratio: float, radix: int):
    nics = servers * server.nics
    if family == "rail_optimized":
        return tp.rail_optimized(servers, server=server, link=link, oversubscription=ratio, radix=radix)
    if family == "leaf_spine":
        down = hosts_per_leaf(server.nics, radix // 2)     # whole servers, or every port (a server over leaves)
        leaves = math.ceil(nics / down)
        if leaves == 1:                     # one leaf: no spine, no uplinks (one switch)
            return tp.leaf_spine(1, 0, nics, link=link, server=server)
        uplinks = tp.uplinks_for(down, ratio)          # leaf_spine's own rule (never more oversubscribed)
        spines = max(1, math.ceil(leaves * uplinks / radix))
        if spines > uplinks or leaves > radix:
            raise ValueError(f"two tiers of {radix}-port switches hold at most {radix * down} NICs "
                             f"at oversubscription {ratio:g}; {nics} asked")
        return tp.leaf_spine(leaves, spines, down, uplinks=uplinks, link=link, server=server)
    if family == "rail_only":
        if ratio != 1:
            raise ValueError("rail_only is non-blocking only (oversubscription 1)")
        return tp.rail_only(servers, server=server, link=link, radix=radix)
    if family == "fat_tree":
        if ratio != 1:
            raise ValueError("fat_tree is non-blocking only (oversubscription 1)")
        return _fat_tree(servers, server, link, radix)
    if family == "dragonfly_plus":
        return _dragonfly_plus(nics, server, link, ratio, radix)
    raise ValueError(f"family must be one of {', '.join(DESIGN_FAMILIES)}, got {family!r}")


def _fat_tree(servers: int, server, link: str, radix: int):
    """The non-blocking Clos of ``radix``-port switches with the fewest tiers that holds the
    servers' NICs, as an architect buys it: one switch up to ``radix`` NICs; two tiers by the
    leaf-spine candidate's own rule at 1:1 (leaves of ``radix/2`` host ports, whole servers;
    the same fabric as the ``leaf_spine`` candidate at oversubscription 1) while ``radix``
    leaves hold them; beyond, the ``k = radix`` fat-tree with the ``ceil(NICs / (radix/2)^2)``
    pods the NICs fill and the core switches those pods use (``topologies.fat_tree(pods=)``),
    at most ``radix^3/4`` NICs. (A smaller k-ary tree has k-port switches, billed as
    ``radix``-port boxes: a k = 8 tree for 64 NICs was 80 of them where one holds the NICs.)"""
    nics = servers * server.nics
    if nics <= radix:
        return tp.leaf_spine(1, 0, nics, link=link, server=server)
    try:
        return _family("leaf_spine", servers, server, link, 1.0, radix)
    except ValueError:
        pass                                    # more than two tiers hold: three
    half = radix // 2
    pods = max(2, math.ceil(nics / (half * half)))     # more than two tiers hold: at least two pods
    if radix % 2 or pods > radix:
        raise ValueError(f"three tiers of {radix}-port switches (a k = {radix} fat-tree) hold at most "
                         f"{radix ** 3 // 4} NICs{' with an even radix' if radix % 2 else ''}; {nics} asked")
    return tp.fat_tree(radix, pods=pods, link=link, server=server)


def _dragonfly_plus(nics: int, server, link: str, ratio: float, radix: int):
    """The DragonFly+ of ``radix``-port switches holding exactly ``nics`` NICs, sized as an
    architect sizes each group's leaf-spine: leaves of ``radix/2`` host ports (whole servers)
    and ``u = ceil(hosts / ratio)`` uplinks; ``S`` spines a group, a divisor of ``u`` (every
    leaf sends ``u / S`` parallel cables to each spine), at least ``ceil(leaves x u / radix)``,
    each with ``h`` global ports, ``ceil(its down ports / ratio)`` or more and no more than it
    has left, that divide evenly among the other groups. Of the groups (>= 2) and spines that
    fit, the fewest switches, then the fewest groups. (Until 2026-12-07 a group had ``u``
    spines of one cable per leaf: 64 GPUs were 2 leaves and 64 spines, 66 switches, where 4
    hold them.)"""
    hosts = hosts_per_leaf(server.nics, radix // 2, exact=True)
    up = tp.uplinks_for(hosts, ratio)
    best = None
    for groups in range(2, nics // hosts + 1):
        if nics % (groups * hosts):
            continue
        leaves = nics // (groups * hosts)
        for spines in (s for s in range(max(1, math.ceil(leaves * up / radix)), up + 1) if up % s == 0):
            down = leaves * (up // spines)
            h = next((h for h in range(tp.uplinks_for(down, ratio), radix - down + 1)
                      if (spines * h) % (groups - 1) == 0), None)
            if h is not None and (best is None or groups * (leaves + spines) < best[0]):
                best = (groups * (leaves + spines), groups, leaves, spines, h)
    if best is None:
        raise ValueError(f"no DragonFly+ of {radix}-port switches holds exactly {nics} NICs "
                         f"({hosts} per leaf) with evenly divided global links")
    _, groups, leaves, spines, h = best
    g = tp.dragonfly_plus(leaves, spines, hosts, h, groups=groups, link_local=link, link_global=link, server=server)
    return _parallel_local(g, up // spines, server)


def _parallel_local(g, per_pair: int, server):
    """``g`` (a DragonFly+ of one cable per leaf-spine pair) with ``per_pair`` parallel cables
    on each, its leaf radix, bisection and fingerprint recorded for them."""
    if per_pair == 1:
        return g
    for *_, d in g.edges(data=True):
        if d["tier"] == "local":
            d.update(cables=int(d.get("cables", 1)) * per_pair, capacity=float(d["capacity"]) * per_pair)
    p = g.graph["params"]
    p.update(leaf_radix=p["hosts_per_leaf"] + p["spines"] * per_pair,
             spine_radix=p["leaves"] * per_pair + p["global_per_spine"], local_cables_per_pair=per_pair)
    # the generator's formula with the local term per_pair times its one cable
    if g.graph.get("bisection_bandwidth") is not None:
        groups, local = p["groups"], tp.get_link(p["link_local"]).bandwidth
        glob = tp.get_link(p["link_global"]).bandwidth
        m = p["cables_per_group_pair"]
        small_nics = (groups // 2) * p["leaves"] * p["hosts_per_leaf"]
        nic_rate = min(tp.get_link(server.host_link).bandwidth, server.nic_rate(p["link_local"]))
        g.graph["bisection_bandwidth"] = min((groups // 2) * (groups - groups // 2) * m * glob,
                                             small_nics * nic_rate,
                                             (groups // 2) * p["leaves"] * p["spines"] * per_pair * local)
    g.graph["fingerprint"] = tp.fingerprint(g)    # built so by the design, not edited since
    return g


def radixes_boxes_have(radixes, links) -> dict:
    """``{(link, radix): why}`` for each radix above the ports of the largest catalogue switch for
    the link's family and rate (such a fabric would be timed as one crossbar of that many ports
    and billed as boxes with nothing between them; adv25 F1: 1,024 GPUs on NDR at radix 2,048
    came out at 3.37 M USD, a buildable radix-64 Clos at 4.99 M); a ValueError naming
    ``radixes`` where no link of the grid has a box that large."""
    too_big = {}
    for link in links:
        try:
            tech = tp.get_link(link)
        except ValueError:
            continue                    # not in the catalogue: the bill says what it cannot price
        box = tp.largest_switch(tech.family, tech.bandwidth)
        for r in radixes:
            if box is not None and r > box.ports:
                too_big[(link, r)] = (f"radix {r} is more than the {box.ports} ports of the largest catalogue switch "
                                      f"for {tech.name} ({box.name}): a larger switch is a fabric of such boxes")
    for r in radixes:
        if all((link, r) in too_big for link in links):
            raise ValueError(f"radixes must be at most the ports of the largest catalogue switch of a link, got {r}: "
                             f"{too_big[(links[0], r)]} (a family with more tiers), or register_part a larger box")
    return too_big
