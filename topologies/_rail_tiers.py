"""The switch tiers above the leaves of :func:`topologies.rail_optimized` (a leaf per rail per
scalable unit): two tiers of spines every leaf reaches, or pods of spines under core groups."""

from __future__ import annotations

import math

from ._graph import add_cable, spread, uplinks_for

#: servers of a DGX SuperPOD scalable unit (NVIDIA DGX SuperPOD H100 and B200 reference
#: architectures: 32 DGX a unit, a leaf of 32 ports down and 32 up on 64-port Quantum-2)
SUPERPOD_UNIT = 32


def rail_leaf(unit: int, rail: int) -> str:
    return f"su{unit}/leaf{rail}"


def leaf_uplinks(servers: int, model, tech, ratio: float) -> int:
    """Uplinks of a rail leaf serving one NIC of each of ``servers`` servers: the fewest whole
    ``tech`` cables that carry those NICs' bandwidth (``model.nic_rate``: a dual-port NIC twice a
    port's, a 400G NIC under 800G uplinks half an uplink) at ``ratio`` or less."""
    return uplinks_for(servers * model.nic_rate(tech) / tech.bandwidth, ratio)


def leaf_ports(servers: int, model, tech, ratio: float) -> int:
    """Ports of that leaf: ``nic_ports`` cables down a server, and its uplinks."""
    return servers * model.nic_ports + leaf_uplinks(servers, model, tech, ratio)


def most_servers(model, tech, ratio: float, radix: int) -> int:
    """The most servers a rail leaf of ``radix`` ports serves at ``ratio`` (0: not one);
    :func:`leaf_ports` grows with the servers and is at least their count."""
    lo, hi = 0, radix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if leaf_ports(mid, model, tech, ratio) <= radix else (lo, mid - 1)
    return lo


def unit_size(servers_per_unit, model, tech, ratio: float, radix: int) -> int:
    """Servers a scalable unit: ``servers_per_unit`` where its leaves fit in ``radix`` ports, else
    ValueError naming the parameters; None: :data:`SUPERPOD_UNIT`, or fewer where a leaf of that
    many would exceed the radix (dual-port NICs on 64 ports: 16)."""
    most = most_servers(model, tech, ratio, radix)
    if servers_per_unit is None and most:
        return min(SUPERPOD_UNIT, most)
    n = SUPERPOD_UNIT if servers_per_unit is None else servers_per_unit
    if n <= most:
        return n
    up = leaf_uplinks(n, model, tech, ratio)
    raise ValueError(
        f"a rail leaf of servers_per_unit={n} servers needs {n * model.nic_ports} ports down (nic_ports="
        f"{model.nic_ports} a NIC) and {up} up for oversubscription={ratio:g} ({model.nic_rate(tech) / 1e9:g} GB/s "
        f"NICs under {tech.name} uplinks of {tech.bandwidth / 1e9:g} GB/s): {n * model.nic_ports + up} ports, more "
        f"than radix={radix}; " + (f"use servers_per_unit <= {most} (or leave it out: the most that fit, up to "
                                   f"{SUPERPOD_UNIT})" if most else
                                   "not one server's leaf fits: use a larger radix or a higher oversubscription"))


def cable_on(g, node, targets, count, start, tech, tier) -> int:
    """Cable ``count`` uplinks of ``node`` to ``targets`` as evenly as possible, the ``count mod
    len(targets)`` extras on consecutive targets from ``start``; returns where the next node's
    extras start. Successive nodes so lay their extras end to end around the targets, so no
    target gets more than ``ceil(total / len(targets))`` cables, however their counts differ (a
    partial unit's leaves have fewer uplinks)."""
    for target, n in zip(targets, spread(count, len(targets), offset=start)):
        if n:
            add_cable(g, node, target, tech, tier=tier, cables=n)
    return (start + count % len(targets)) % len(targets)


def leaf_spreads(counts, spines, limit, repeat_at=None) -> list | None:
    """Cables from each leaf (``counts``: its uplinks) to each of ``spines`` spines, no spine
    past ``limit`` (None where that fails). A leaf of fewer uplinks than spines (a partial
    unit's) has one to each of the first ``count``, so every two such leaves share a spine,
    and share one with the others, which reach all: ``count // spines`` cables each, the
    ``count mod spines`` extras laid end to end (the next leaf's start where this one's end)
    over the spines past the shared ones, or where that overfills one, over all.
    ``repeat_at``: the leaf whose extras start over where the first leaf's did, so the leaves
    from it lay them as the leaves before it (tried first; laid on end to end where that
    overfills a spine)."""
    shared = max((c for c in counts if c < spines), default=0)
    for repeat in dict.fromkeys((repeat_at, None)):
        for lo in dict.fromkeys((shared, 0)):
            if any(c % spines > spines - lo for c in counts if c >= spines):
                continue
            start, rows = 0, []
            for i, c in enumerate(counts):
                if i == repeat:
                    start = 0
                row = [1] * c + [0] * (spines - c) if c < spines else [c // spines] * spines
                if c >= spines:
                    for t in range(c % spines):
                        row[lo + (start + t) % (spines - lo)] += 1
                    start = (start + c % spines) % (spines - lo)
                rows.append(row)
            if max(map(sum, zip(*rows))) <= limit:
                return rows
    return None


def two_tier_spines(g, units, rails, uplinks, radix, tech) -> bool:
    """Spines every leaf is cabled to (:func:`leaf_spreads`; a partial unit's leaves to the
    same few): the fewest that give every leaf uplink a spine port, ``ceil(sum of uplinks /
    radix)`` (31 DGX H100, 8 leaves x 31 uplinks: 4 spines, 8/8/8/7 cables a leaf), more where a
    partial unit's shared spines would pass ``radix`` ports. At most ``uplinks`` while ``leaves <=
    radix`` (two tiers), so every leaf reaches every spine. (NVIDIA's DGX SuperPOD H100 reference
    architecture cables 3 units, 24 leaves x 32 uplinks, to 16 spines, 2 cables a pair; the
    fewest are 12, 3 or 2 cables a pair.) True when every leaf spreads evenly.

    An even count ``2m`` of full units before a partial one: the full units from ``m`` on lay
    their uneven extras over the spines as units ``0 ... m-1`` did, where that fits. The server
    halves are then units ``0 ... m-1`` (and the first servers of unit ``m``) against the rest,
    and every spine has as many cables down to the second half's full leaves as up from the
    first's: non-blocking at 1:1. Laid on end to end instead, some spine took more cables from
    the first half than it had down to the second (195 DGX H100: 38.4 TB/s between the halves,
    not the NICs' 38.8; 28 of the sizes 33-256 fell 1-8 cables short)."""
    counts = [uplinks[u] for u in range(units) for _ in range(rails)]
    full = sum(1 for up in uplinks if up == uplinks[0])
    repeat_at = full // 2 * rails if full < units and full % 2 == 0 else None
    spines = max(1, math.ceil(sum(counts) / radix))
    while (rows := leaf_spreads(counts, spines, radix, repeat_at)) is None:   # shared spines overfull
        spines += 1
    spine_ids = [f"spine{s}" for s in range(spines)]
    for name in spine_ids:
        g.add_node(name, kind="switch", role="spine", tier=2)
    leaves = [rail_leaf(u, r) for u in range(units) for r in range(rails)]
    for leaf, row in zip(leaves, rows):
        for name, n in zip(spine_ids, row):
            if n:
                add_cable(g, leaf, name, tech, tier="leaf-spine", cables=n)
    return all(c % spines == 0 for c in counts)


def rail_groups(rails: int, half: int) -> int:
    """Pods one unit's leaves split into: 1 while a unit's rails fit under a spine's ``half``
    down ports, else the fewest equal groups of at most ``half`` leaves (a divisor of ``rails``:
    every leaf of a pod then reaches every spine of the pod with one cable or more)."""
    if rails <= half:
        return 1
    return next(d for d in range(2, rails + 1) if rails % d == 0 and rails // d <= half)


def max_units(rails: int, radix: int) -> int:
    """The most scalable units a rail fabric of ``radix``-port switches holds: two tiers while
    ``units * rails <= radix``; three tiers of at most ``radix`` pods, each pod ``(radix/2) //
    rails`` units (at least 1) or, where a unit's rails outnumber ``radix/2``, one of a unit's
    :func:`rail_groups` (0: not even one unit fits)."""
    half = radix // 2
    groups = rail_groups(rails, half)
    three = radix * max(1, half // rails) if groups == 1 else radix // groups
    return max(radix // rails, three)


def limit_rule(rails: int, radix: int) -> str:
    """How :func:`max_units` counts, in words (for the error beyond it)."""
    half = radix // 2
    groups = rail_groups(rails, half)
    if groups == 1:
        return f"three tiers: {radix} pods of {max(1, half // rails)} units"
    return (f"a spine reaches at most radix/2 = {half} leaves, so a unit's {rails} rails split into {groups} pods "
            f"of {rails // groups} leaves, and at most radix = {radix} pods meet at a core: {radix // groups} units"
            + (", or one unit in two tiers" if rails <= radix else ""))


def pods(units: int, rails: int, radix: int) -> list:
    """The pods of a three-tier rail fabric as ``(spine name prefix, spine attributes, leaves)``,
    ``leaves`` a list of ``(unit, rail)``: one pod per unit up to ``radix`` units (the SuperPOD
    layout), pods of ``ceil(units / radix)`` units beyond, and a unit whose rails outnumber
    ``radix/2`` split into :func:`rail_groups` pods of consecutive rails."""
    half = radix // 2
    groups = rail_groups(rails, half)
    if groups > 1:
        size = rails // groups
        return [(f"su{u}/group{k}", dict(unit=u, rail_group=k), [(u, r) for r in range(k * size, (k + 1) * size)])
                for u in range(units) for k in range(groups)]
    per_pod = 1 if units <= radix else math.ceil(units / radix)
    out = []
    for p in range(math.ceil(units / per_pod)):
        members = range(p * per_pod, min(units, (p + 1) * per_pod))
        prefix, attrs = (f"su{p}", dict(unit=p)) if per_pod == 1 else (f"pod{p}", dict(pod=p))
        out.append((prefix, attrs, [(u, r) for u in members for r in range(rails)]))
    return out


def three_tier_spines(g, pods, uplinks, radix, tech):
    """Spines shared by the leaves of a pod (``pods`` from :func:`pods`), every leaf cabled to
    every spine of its pod, spine ``j`` of every pod under core group ``j``, every spine cabled
    to every core of its group (as many cables up as down, and one to each core at least).

    Returns (uniform spreads, spines per pod, cores per group)."""
    half = radix // 2
    full = max(len(leaves) for *_, leaves in pods) * max(uplinks)
    spines_per_pod = math.ceil(full / half)
    spine_up = math.ceil(full / spines_per_pod)
    cores_per_group = math.ceil(len(pods) * spine_up / radix)
    for j in range(spines_per_pod):
        for c in range(cores_per_group):
            g.add_node(f"core{j}/{c}", kind="switch", role="core", tier=3, group=j)
    uniform = True
    cores = [[f"core{j}/{c}" for c in range(cores_per_group)] for j in range(spines_per_pod)]
    core_start = [0] * spines_per_pod       # where the next spine's extras start in each core group
    for prefix, attrs, leaves in pods:
        spine_ids = [f"{prefix}/spine{j}" for j in range(spines_per_pod)]
        for name in spine_ids:
            g.add_node(name, kind="switch", role="spine", tier=2, **attrs)
        counts = [uplinks[u] for u, _ in leaves]
        # no spine takes more than a full pod's (over all spines, a partial unit's R leaves
        # add at most R to ceil(F x U / S) for F full leaves of U uplinks: <= spine_up)
        for (u, r), row in zip(leaves, leaf_spreads(counts, spines_per_pod, spine_up)):
            for name, n in zip(spine_ids, row):
                if n:
                    add_cable(g, rail_leaf(u, r), name, tech, tier="leaf-spine", cables=n)
        uniform &= all(c % spines_per_pod == 0 for c in counts)
        down = [sum(g[s][leaf]["cables"] for leaf in g.pred[s] if g.nodes[leaf].get("role") == "leaf")
                for s in spine_ids]
        # a spine sends up as many cables as it receives from its leaves, and one to every core
        # of its group at least (an uneven spread leaves some spines fewer cables down)
        for j in range(spines_per_pod):
            count = max(down[j], cores_per_group)
            core_start[j] = cable_on(g, spine_ids[j], cores[j], count, core_start[j], tech, "spine-core")
            uniform &= count % cores_per_group == 0
    return uniform, spines_per_pod, cores_per_group
