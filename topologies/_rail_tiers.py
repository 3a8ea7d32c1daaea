"""The switch tiers above the leaves of :func:`topologies.rail_optimized` (a leaf per rail per
scalable unit): two tiers of spines every leaf reaches, or pods of spines under core groups."""

from __future__ import annotations

import math

from ._graph import add_cable, cable_spread, spread


def rail_leaf(unit: int, rail: int) -> str:
    return f"su{unit}/leaf{rail}"


def two_tier_spine_count(leaves, uplinks, radix) -> int:
    """Spines of a two-tier rail fabric: the fewest that give every leaf uplink a spine port
    (``ceil(leaves * uplinks / radix)``), raised to the next divisor of a leaf's uplinks where
    one exists, so that every leaf spreads its uplinks evenly over all spines. (NVIDIA's DGX
    SuperPOD H100 reference architecture does the same: 3 units, 24 leaves x 32 uplinks,
    get 16 spines rather than 12.)"""
    need = max(1, math.ceil(leaves * uplinks / radix))
    for spines in range(need, uplinks + 1):
        if uplinks % spines == 0:
            return spines
    return need


def two_tier_spines(g, units, rails, uplinks, radix, tech) -> bool:
    """Spines every leaf is cabled to; True when every leaf spreads its uplinks evenly."""
    if len(set(uplinks)) == 1:
        spines = two_tier_spine_count(units * rails, uplinks[0], radix)
    else:   # a partial last unit: just enough spine ports
        spines = math.ceil(sum(uplinks) * rails / radix)
    for s in range(spines):
        g.add_node(f"spine{s}", kind="switch", role="spine", tier=2)
    spine_ids = [f"spine{s}" for s in range(spines)]
    uniform = True
    for u in range(units):
        for r in range(rails):
            uniform &= cable_spread(g, rail_leaf(u, r), spine_ids, uplinks[u], u * rails + r, tech, "leaf-spine")
    return uniform


def three_tier_spines(g, units, rails, uplinks, radix, tech, units_per_pod):
    """Spines shared by the ``units_per_pod`` units of a pod (one pod per unit up to ``radix``
    units: the SuperPOD layout), spine ``j`` of every pod under core group ``j``.

    Returns (uniform spreads, spines per pod, cores per group)."""
    half = radix // 2
    pods = math.ceil(units / units_per_pod)
    spines_per_pod = math.ceil(units_per_pod * rails * uplinks[0] / half)
    spine_up = math.ceil(units_per_pod * rails * uplinks[0] / spines_per_pod)
    cores_per_group = math.ceil(pods * spine_up / radix)
    for j in range(spines_per_pod):
        for c in range(cores_per_group):
            g.add_node(f"core{j}/{c}", kind="switch", role="core", tier=3, group=j)
    uniform = True
    cores = [[f"core{j}/{c}" for c in range(cores_per_group)] for j in range(spines_per_pod)]
    for p in range(pods):
        members = range(p * units_per_pod, min(units, (p + 1) * units_per_pod))
        if units_per_pod == 1:
            spine_ids = [f"su{p}/spine{j}" for j in range(spines_per_pod)]
            for name in spine_ids:
                g.add_node(name, kind="switch", role="spine", tier=2, unit=p)
        else:
            spine_ids = [f"pod{p}/spine{j}" for j in range(spines_per_pod)]
            for name in spine_ids:
                g.add_node(name, kind="switch", role="spine", tier=2, pod=p)
        down = [0] * spines_per_pod
        for i, u in enumerate(members):
            for r in range(rails):
                leaf = rail_leaf(u, r)
                offset = (i * rails + r) * (uplinks[u] % spines_per_pod)
                for j, n in enumerate(spread(uplinks[u], spines_per_pod, offset=offset)):
                    if n:
                        add_cable(g, leaf, spine_ids[j], tech, tier="leaf-spine", cables=n)
                        down[j] += n
                uniform &= uplinks[u] % spines_per_pod == 0
        # a spine sends up as many cables as it receives from its leaves
        for j in range(spines_per_pod):
            uniform &= cable_spread(g, spine_ids[j], cores[j], down[j], p, tech, "spine-core")
    return uniform, spines_per_pod, cores_per_group
