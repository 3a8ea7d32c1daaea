"""Clos fabrics: the k-ary fat-tree, the two-tier leaf-spine and the rail-optimised
DGX SuperPOD layout.

Tier numbering (node attribute ``tier``): 0 inside servers, 1 edge / leaf, 2 aggregation /
spine, 3 core. Edge attribute ``tier`` names the layer a cable belongs to: ``"nvlink"``,
``"pcie"``, ``"cpu"`` (inside servers), ``"access"`` (NIC to its first switch),
``"edge-agg"`` / ``"agg-core"`` (fat-tree), ``"leaf-spine"`` / ``"spine-core"``.

Parallel cables between two switches are one directed edge per direction whose
``capacity`` is their sum and whose ``cables`` attribute counts them.
"""

from __future__ import annotations

import math

import networkx as nx

from ._endpoints import attach_servers, endpoint_rate, server_parts, server_params
from ._graph import (add_cable, cable_spread, check_int, check_ratio, check_scale, finish, resolve_link,
                     uplinks_for)
from ._rail_tiers import (SUPERPOD_UNIT, leaf_uplinks, limit_rule, max_units, pods, rail_groups, rail_leaf,
                          three_tier_spines, two_tier_spines, unit_size)
from ._mesh import mesh_link
from .links import get_link
from .servers import get_server

__all__ = ["fat_tree", "leaf_spine", "rail_optimized", "rail_optimized_limit"]


def fat_tree(k: int, *, pods: int | None = None, link="ib_ndr", server=None) -> nx.DiGraph:
    """k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008).

    ``k`` pods, each of ``k/2`` edge and ``k/2`` aggregation switches; ``(k/2)^2`` core
    switches; every switch has ``k`` ports of ``link``. Edge switch ``e`` of a pod joins
    every aggregation switch of the pod; aggregation switch ``a`` of every pod joins core
    switches ``a*k/2 ... a*k/2 + k/2 - 1``. With no server, each of the ``k^3/4`` edge
    ports holds a single-GPU host (``server="host"``). With a server, its NICs take
    consecutive edge ports, ``nic_ports`` each (a dual-port NIC two, so an edge switch keeps
    ``k/2`` ports down, ``k/2`` up and 1:1 bandwidth, with half the NICs), so the NICs of one
    server share an edge switch whenever they fill ``k/2`` ports evenly (k = 16 and DGX: one
    server per edge switch); servers that do not fit in the ports left are not placed.

    ``pods`` < ``k`` builds the k-ary fat-tree as a cluster that needs fewer pods is bought:
    those pods whole, and of each core group only the ``ceil(pods/2)`` core switches that
    hold the pods' ``pods * k/2`` uplinks to it, every aggregation switch's ``k/2`` uplinks
    spread evenly over its group (parallel cables where they outnumber the cores), so that
    the pods stay non-blocking between themselves.

    Parameters
    ----------
    k : int
        Switch radix, even and >= 4.
    pods : int, optional
        Pods built, 2 ... ``k`` (default ``k``).
    link : str or LinkTech
        Technology of every fabric cable (one direction), default InfiniBand NDR.
    server : str, ServerModel or None
        Endpoint model; None gives single-GPU hosts.

    Examples
    --------
    >>> g = fat_tree(4)
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "gpu")
    16
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "switch")
    20
    """
    k = check_int("k", k, 4, "an even switch radix")
    if k % 2:
        raise ValueError(f"k must be even (a switch splits its k ports half down, half up), got {k}")
    pods = k if pods is None else check_int("pods", pods, 2, f"at most k = {k}")
    if pods > k:
        raise ValueError(f"pods must be at most k = {k}, got {pods}")
    tech = resolve_link("link", link)
    model = get_server(server)
    # pods k^2/4 edge ports of servers, pods k + k^2/4 switches at most, two tiers of pods k^2/4 cables, both ways
    check_scale("fat_tree", pods * k * k // 4 // model.nics * server_parts(model) + pods * k + k * k // 4
                + pods * k * k, f"k = {k}" + (f", {pods} pods" if pods < k else ""))
    half = k // 2
    slots = half // model.nic_ports                                   # NICs an edge switch's k/2 down ports hold
    if not slots:
        raise ValueError(f"k = {k} gives an edge switch k/2 = {half} ports down, fewer than one NIC's nic_ports = "
                         f"{model.nic_ports} ({model.name}): use a larger k or a server with fewer NIC ports")
    per_group = math.ceil(pods * half / k)                            # core switches of a group (half at k pods)
    g = nx.DiGraph()
    ports = []
    for p in range(pods):
        for e in range(half):
            g.add_node(f"pod{p}/edge{e}", kind="switch", role="edge", tier=1, pod=p)
            ports.extend([f"pod{p}/edge{e}"] * slots)
        for a in range(half):
            g.add_node(f"pod{p}/agg{a}", kind="switch", role="aggregation", tier=2, pod=p)
    for c in range(half * per_group):
        g.add_node(f"core{c}", kind="switch", role="core", tier=3, group=c // per_group)
    for p in range(pods):
        for e in range(half):
            for a in range(half):
                add_cable(g, f"pod{p}/edge{e}", f"pod{p}/agg{a}", tech, tier="edge-agg")
        for a in range(half):
            group = [f"core{a * per_group + j}" for j in range(per_group)]
            cable_spread(g, f"pod{p}/agg{a}", group, half, p, tech, "agg-core")
    servers = attach_servers(g, model, ports, tech)
    # Bisection between the two halves of the pods (= the halves of the rank order when
    # whole servers fill every pod): k/2 pods send through (k/2)^2 core cables each.
    bisection = None
    if (half * slots) % model.nics == 0 and pods == k:
        nics_half = servers * model.nics // 2
        bisection = min(k ** 3 / 8 * tech.bandwidth, nics_half * endpoint_rate(model, tech))
    params = dict(k=k, link=tech.name, server=server_params(model), servers=servers)
    if pods < k:
        params["pods"] = pods
    return finish(g, "fat_tree", params, bisection=bisection,
                  bisection_method="formula: min(k^3/8 core cables, endpoint NICs of half the pods)",
                  network_diameter=6)


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, *, oversubscription=1.0,
               uplinks: int | None = None, link="ib_ndr", uplink=None, server=None) -> nx.DiGraph:
    """Two-tier Clos: ``leaves`` leaf switches each with ``hosts_per_leaf`` endpoint ports,
    every leaf cabled to the spines.

    A leaf has ``uplinks`` uplinks, by default as many as give the requested
    ``oversubscription`` (endpoint capacity / uplink capacity of a leaf, rounded up to whole
    cables: never more oversubscribed than asked; at least one), and at least one cable to
    every spine (``uplinks >= spines``, else two leaves could share no spine). The uplinks are
    spread evenly over the spines; where they outnumber the spines a leaf-spine pair gets
    parallel cables (``cables`` > 1), the extra cables of leaf ``l`` starting at spine
    ``l * uplinks mod spines`` so that the spines stay balanced. Servers take consecutive endpoint ports as in :func:`fat_tree`.
    ``g.graph["params"]["oversubscription"]`` is the ratio built (with ``params["uplinks"]``
    cables), at most the one asked: 4 hosts at 3 get 2 uplinks, a ratio of 2.

    Parameters
    ----------
    leaves, spines, hosts_per_leaf : int
        Counts, each >= 1, except ``spines=0`` with one leaf: a single switch, its ports all
        hosts, no uplinks (``oversubscription`` and ``uplinks`` ignored; built as 1:1).
    oversubscription : float
        >= 1; 1 is non-blocking; the most a leaf is built with. Ignored when ``uplinks`` is given.
    uplinks : int, optional
        Uplinks per leaf.
    link : str or LinkTech
        Endpoint-port technology.
    uplink : str or LinkTech, optional
        Leaf-spine technology; defaults to ``link``.
    server : str, ServerModel or None
        Endpoint model; None gives single-GPU hosts.

    Examples
    --------
    >>> g = leaf_spine(4, 2, 8, oversubscription=2)
    >>> g.graph["params"]["uplinks"], g["leaf0"]["spine0"]["cables"]
    (4, 2)
    >>> leaf_spine(4, 1, 5, oversubscription=2).graph["params"]["oversubscription"]   # 3 uplinks
    1.6666666666666667
    """
    leaves = check_int("leaves", leaves, 1)
    spines = check_int("spines", spines, 0, "0 only with one leaf: a single switch")
    hosts_per_leaf = check_int("hosts_per_leaf", hosts_per_leaf, 1)
    if spines == 0 and leaves > 1:
        raise ValueError(f"spines must be >= 1 with {leaves} leaves (0 only with one leaf: a single switch)")
    tech = resolve_link("link", link)
    up = resolve_link("uplink", uplink if uplink is not None else tech)
    model = get_server(server)
    if spines == 0:
        uplinks = 0
    elif uplinks is None:
        ratio = check_ratio("oversubscription", oversubscription)
        uplinks = uplinks_for(hosts_per_leaf * model.nic_rate(tech) / up.bandwidth, ratio)
    else:
        uplinks = check_int("uplinks", uplinks, 1)
    # the servers of the leaves' ports, the switches, a leaf's uplinks to every spine both ways
    check_scale("leaf_spine", leaves * hosts_per_leaf // model.nics * server_parts(model) + leaves + spines
                + 2 * leaves * min(uplinks, spines), f"{leaves} leaves x {hosts_per_leaf} hosts, {spines} spines")
    if uplinks < spines:
        raise ValueError(f"a leaf needs a cable to every spine: uplinks ({uplinks}) must be >= spines "
                         f"({spines}); use fewer spines or a lower oversubscription")
    g = nx.DiGraph()
    ports = []
    for s in range(spines):
        g.add_node(f"spine{s}", kind="switch", role="spine", tier=2)
    for l in range(leaves):
        g.add_node(f"leaf{l}", kind="switch", role="leaf", tier=1)
        ports.extend([f"leaf{l}"] * hosts_per_leaf)
        if spines:
            cable_spread(g, f"leaf{l}", [f"spine{s}" for s in range(spines)], uplinks, l, up, "leaf-spine")
    servers = attach_servers(g, model, ports, tech)
    bisection = None
    if leaves % 2 == 0 and uplinks % spines == 0 and hosts_per_leaf % model.nics == 0:
        per_leaf = min(hosts_per_leaf * endpoint_rate(model, tech), uplinks * up.bandwidth)
        bisection = leaves // 2 * per_leaf
    real_ratio = hosts_per_leaf * model.nic_rate(tech) / (uplinks * up.bandwidth) if uplinks else 1.0
    params = dict(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, uplinks=uplinks,
                  oversubscription=real_ratio, link=tech.name, uplink=up.name,
                  server=server_params(model), servers=servers)
    return finish(g, "leaf_spine", params, bisection=bisection,
                  bisection_method="formula: leaves/2 x min(endpoint, uplink capacity of a leaf)",
                  network_diameter=4 if leaves > 1 else 2)


def rail_optimized_limit(*, server="dgx_h100", servers_per_unit: int | None = None, radix: int = 64,
                         link="ib_ndr", oversubscription=1.0) -> int:
    """The most servers :func:`rail_optimized` builds in at most three tiers of ``radix``-port
    switches with every leaf reaching every spine of its pod and every spine every core of its
    group: ``radix`` pods of ``max(1, (radix/2) // rails)`` scalable units; where a server's
    rails outnumber ``radix/2``, each unit is split into the fewest equal rail groups of at most
    ``radix/2`` leaves, each a pod, so ``radix // groups`` units (two tiers if more: one unit
    of up to ``radix`` rails). 0 where not even one unit fits (a single server needs no switch).
    ``servers_per_unit``, ``link`` and ``oversubscription`` as :func:`rail_optimized` (None: the
    unit it builds; ValueError where a leaf of that many servers exceeds the radix).

    >>> rail_optimized_limit()                    # 64-port NDR switches, DGX H100: 65,536 GPUs
    8192
    >>> rail_optimized_limit(radix=128) * 8       # 128 ports of 400G (an 800G switch split)
    262144
    >>> rail_optimized_limit(server="nvl72")      # 72 rails: 3 pods of 24 leaves a unit, 21 units
    672
    """
    if servers_per_unit is not None:
        servers_per_unit = check_int("servers_per_unit", servers_per_unit, 1)
    radix = check_int("radix", radix, 4, "switch ports")
    model = get_server(server)
    units = max_units(model.rails, radix)
    if not units:
        return 0
    return units * unit_size(servers_per_unit, model, resolve_link("link", link),
                             check_ratio("oversubscription", oversubscription), radix)


def rail_optimized(nodes: int, *, server="dgx_h100", link="ib_ndr", oversubscription=1.0,
                   servers_per_unit: int | None = None, radix: int = 64, full_units: bool = False) -> nx.DiGraph:
    """The rail-optimised DGX SuperPOD compute fabric.

    Servers are grouped in scalable units (SU) of ``servers_per_unit``; leaf ``i`` of a
    unit serves rail ``i`` (NIC ``i`` of every server of the unit), so traffic between
    GPUs of one rail in one unit crosses a single leaf. A leaf has ``nic_ports`` downlinks per
    server and the fewest uplinks that carry its NICs' bandwidth at ``oversubscription``:
    ``ceil(servers x NIC rate / (uplink rate x oversubscription))`` (a dual-port NIC needs two
    uplinks, a 400G NIC under 800G cables half of one). No switch uses more than ``radix``
    ports: by default a unit is 32 servers, or the most whose leaf fits (16 with dual-port
    NICs on 64 ports); a ``servers_per_unit`` whose leaf does not fit raises ValueError.

    * Two tiers while every spine can reach every leaf (``units * rails <= radix``: up to 8
      units of DGX servers on 64-port Quantum-2 switches): the fewest spines that hold every
      uplink, ``ceil(leaves x uplinks / radix)``, every leaf cabled to every spine as evenly
      as the ports allow (4 units: 32 leaves x 32 uplinks over 16 spines, 2 cables per pair;
      31 DGX: 4 spines, 8/8/8/7 cables a leaf; 3 units: 12 spines, where NVIDIA's reference
      architecture cables 16, 2 a pair).
    * Three tiers up to ``radix`` units: each unit gets its own spines, each with
      ``radix/2`` down and ``radix/2`` up (8 per DGX unit); spine ``j`` of every unit joins
      core group ``j``, ``ceil(units * (radix/2) / radix)`` core switches per group, every
      spine cabled to every core of its group.
    * Three tiers beyond ``radix`` units: pods of ``ceil(units / radix)`` units share their
      spines (every leaf of a pod reaches every spine of the pod), so that at most ``radix``
      pods meet at each core.
    * A server with more rails than ``radix/2`` (``"nvl72"``: 72 NICs; 8 rails on 8-port
      switches): a spine's ``radix/2`` down ports cannot reach every leaf of a unit, so one
      unit of at most ``radix`` rails is two tiers, and otherwise every unit splits into the
      fewest equal groups of consecutive rails of at most ``radix/2`` leaves, each group a pod
      with its own spines (named ``su{u}/group{k}/spine{j}``) under the core groups. Two leaves
      of one pod always share every spine; cores join pods and carry what crosses them.
    * The largest fabric is :func:`rail_optimized_limit` servers (8,192 DGX servers, 65,536
      GPUs, on 64-port switches; 32,768 servers on 128 ports; 21 units of NVL72 racks on 64
      ports); a larger ``nodes`` raises ValueError naming the rule (no fourth tier is built;
      for NVL72 racks :func:`nvl72_cluster` serves a compute tray's NICs from one leaf).
    * Partial units are allowed: the last unit's leaves have fewer downlinks and uplinks,
      unless ``full_units`` cables every leaf's uplinks as for a full unit (NVIDIA's advice
      for node counts between units: "design the fabric for the full SU"); the spines are
      then the fewest that hold every uplink, the leaves' uneven extras laid end to end over
      them (40 DGX H100: 320 uplinks, 5 spines of 64); a partial unit's leaves of fewer uplinks
      than spines all share the same few, so any two leaves share a spine (a spine or two more
      where those would overfill: 69 DGX 10 spines, not 9). With an even count of full units
      before the partial one, the second half of them lays its extras as the first half did, so
      every spine has as many cables down to one server half as up from the other: non-blocking
      at 1:1 (laid on end to end, 28 of the sizes 33-256 DGX H100 fell 1-8 cables short, 195 DGX
      38.4 TB/s against half the servers' NICs' 38.8; now none, the same spines; three tiers,
      257-500 DGX, 8 sizes, none either). ``describe`` reports the max flow there (no formula
      for a partial unit).
    * ``nodes=1`` is one server with its NICs and no switch.
    * One unit of one-rail servers (``server="host"``, up to 32) puts every NIC on one leaf:
      that leaf alone, no spine (a spine cabled to it alone would carry nothing and add a
      switch and its cables to the bill), ``params["uplinks"]`` 0, one tier.

    These rules reproduce the switch and cable counts of NVIDIA's DGX SuperPOD reference
    architectures (H100: 1, 2 and 4 units, 8/4, 16/8, 32/16 leaf/spine, but 3 units 24/12
    where the RA has 24/16; B200: 16, 32 and 64 units, 128/128/64, 256/256/128 and
    512/512/256 leaf/spine/core).

    Parameters
    ----------
    nodes : int
        Servers (>= 1).
    server : str or ServerModel
        Server model, default ``"dgx_h100"``.
    link : str or LinkTech
        Technology of every fabric cable.
    oversubscription : float
        Leaf downlink / uplink bandwidth ratio (>= 1; 1 is non-blocking), the most a leaf is
        built with (uplinks rounded up); ``g.graph["params"]["oversubscription"]`` is the ratio
        built, that of the most oversubscribed leaf (32 servers at 3: 11 uplinks, 32/11), and
        ``params["uplinks"]`` a first-unit leaf's uplinks.
    servers_per_unit : int, optional
        Servers per scalable unit; default 32, or fewer where a leaf of 32 would exceed the
        radix. ``params["servers_per_unit"]`` is the unit built.
    radix : int
        Switch ports, default 64 (NVIDIA Quantum-2 QM9700: 64 ports of 400 Gb/s).
    full_units : bool
        Cable a partial unit's leaves to the spines as if the unit were full.

    Examples
    --------
    >>> g = rail_optimized(128)
    >>> roles = [d.get("role") for _, d in g.nodes(data=True) if d["kind"] == "switch"]
    >>> roles.count("leaf"), roles.count("spine")
    (32, 16)
    """
    nodes = check_int("nodes", nodes, 1)
    if servers_per_unit is not None:
        servers_per_unit = check_int("servers_per_unit", servers_per_unit, 1)
    radix = check_int("radix", radix, 4, "switch ports")
    ratio = check_ratio("oversubscription", oversubscription)
    tech = resolve_link("link", link)
    model = get_server(server)
    rails = model.rails
    limit = 0
    if nodes > 1:       # the unit whose leaves fit the radix (one server has no leaf)
        servers_per_unit = unit_size(servers_per_unit, model, tech, ratio, radix)
        limit = max_units(rails, radix) * servers_per_unit
    elif servers_per_unit is None:
        servers_per_unit = SUPERPOD_UNIT
    if nodes > max(limit, 1):
        raise ValueError(f"nodes must be at most {max(limit, 1)} for rail_optimized with radix={radix}, {rails} "
                         f"rails and servers_per_unit={servers_per_unit} ({limit_rule(rails, radix)}); got "
                         f"{nodes}. Use a larger radix (e.g. radix=128, 400G ports of an 800G switch) or fewer "
                         "nodes" + ("; for NVL72 racks, nvl72_cluster (a leaf per compute tray)"
                                    if model.gpus_per_tray else ""))
    # the servers, and each NIC's bandwidth carried up two tiers of cables, both ways (an upper bound)
    check_scale("rail_optimized", nodes * (server_parts(model) + 4 * model.nics), f"{nodes} nodes")
    g = nx.DiGraph()
    units = math.ceil(nodes / servers_per_unit)
    unit_servers = [min(servers_per_unit, nodes - u * servers_per_unit) for u in range(units)]
    params = dict(nodes=nodes, link=tech.name, server=server_params(model),
                  oversubscription=ratio, servers_per_unit=servers_per_unit, radix=radix,
                  units=units, full_units=bool(full_units))
    if nodes == 1:
        model.build(g, 0, 0)
        bisection, method = None, "formula: gpus/2 x NVLink bandwidth per GPU"
        if model.layout == "nvlink_mesh":   # halves of a mesh: every pair across crosses, on its own links
            bisection = (model.gpus // 2) * (model.gpus - model.gpus // 2) * model.links_per_pair \
                * mesh_link(model.nvlink)
            method = "formula: floor(gpus/2) x ceil(gpus/2) GPU pairs x links_per_pair x one NVLink's rate"
        elif model.has_nvlink:  # halves of one NVSwitch domain
            bisection = model.gpus // 2 * get_link(model.nvlink).bandwidth
        params["tiers"] = 0
        return finish(g, "rail_optimized", params, bisection=bisection, bisection_method=method,
                      network_diameter=None)
    cabled = [servers_per_unit if full_units else n for n in unit_servers]
    uplinks = [leaf_uplinks(n, model, tech, ratio) for n in cabled]  # per leaf of each unit, by bandwidth
    one_leaf = units * rails == 1           # every NIC on one leaf: nothing for a spine to carry
    if one_leaf:
        uplinks = [0]
    params["oversubscription"] = 1.0 if one_leaf else max(n * model.nic_rate(tech) / (up * tech.bandwidth)
                                                          for n, up in zip(unit_servers, uplinks))   # as built
    params["uplinks"] = uplinks[0]
    for u in range(units):
        for r in range(rails):
            g.add_node(rail_leaf(u, r), kind="switch", role="leaf", tier=1, unit=u, rail=r)
    three_tier = units * rails > radix
    tiers = 3 if three_tier else 1 if one_leaf else 2
    units_per_pod = 1
    if one_leaf:
        uniform = True
    elif not three_tier:
        uniform = two_tier_spines(g, units, rails, uplinks, radix, tech)
    else:
        split = pods(units, rails, radix)
        groups = rail_groups(rails, radix // 2)
        units_per_pod = len({u for u, _ in split[0][2]})
        uniform, spines_per_pod, cores_per_group = three_tier_spines(g, split, uplinks, radix, tech)
        params["units_per_pod"] = units_per_pod
        if groups > 1:
            params["rail_groups"] = groups
        params["spines_per_unit" if units_per_pod == 1 and groups == 1 else "spines_per_pod"] = spines_per_pod
        params["cores_per_group"] = cores_per_group
    params["tiers"] = tiers
    # endpoint ports: unit by unit, server by server, rail by rail
    ports = [rail_leaf(u, r) for u in range(units) for _ in range(unit_servers[u]) for r in range(rails)]
    attach_servers(g, model, ports, tech)
    # Bisection between the first and second half of the servers. Full units (and pods) on
    # both sides and uniform cable spreads make the cut at the leaves' uplinks (or, with
    # three tiers, the spines' uplinks, which equal them) the minimum.
    bisection = None
    if one_leaf:                            # one switch: non-blocking between any halves
        bisection = nodes // 2 * endpoint_rate(model, tech)
    elif uniform and units % (2 * units_per_pod) == 0 and len(set(unit_servers)) == 1:
        per_leaf = min(unit_servers[0] * endpoint_rate(model, tech), uplinks[0] * tech.bandwidth)
        bisection = units // 2 * rails * per_leaf
    elif units == 1 and ratio == 1.0 and nodes % 2 == 0:
        bisection = nodes // 2 * rails * endpoint_rate(model, tech)
    return finish(g, "rail_optimized", params, bisection=bisection,
                  bisection_method="formula: leaves of half the units x min(downlink, uplink capacity)",
                  network_diameter=6 if three_tier else 2 if one_leaf else 4)
