"""rail_optimized beyond 64 units (pods sharing spines), its size limit, and validate's
check that every GPU reaches every other. Counts are derived here from the Clos rules
(independently of the generator's code): a leaf per rail per unit, 32 down + 32 up;
a spine or core switch uses at most its radix ports; every leaf reaches every spine of its
pod, every spine every core of its group."""

import math
from collections import Counter

import networkx as nx
import pytest

import topologies as tp
from topologies import TopologyError

RAILS = 8          # DGX H100: 8 NICs
SPU = 32           # servers per scalable unit
DUO = tp.ServerModel("test_duo", gpus=2, layout="nvswitch", nvlink="nvlink4", nics=2)


def _switches(g, role):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("role") == role]


def _expected(nodes, radix, rails, spu):
    """(leaves, spines, cores, spines a leaf reaches) of a full-unit, non-blocking fabric
    whose leaves have ``spu`` down and ``spu`` up ports, from the Clos rules."""
    units = nodes // spu
    half = radix // 2
    leaves = units * rails
    if units * rails <= radix:                     # two tiers, every leaf to every spine
        spines = math.ceil(leaves * spu / radix)   # the fewest whose ports hold every uplink
        return leaves, spines, 0, spines
    per_pod = 1 if units <= radix else math.ceil(units / radix)
    pods = math.ceil(units / per_pod)
    spines_per_pod = per_pod * rails * spu // half  # each spine: half down, half up
    cores_per_group = math.ceil(pods * half / radix)
    return leaves, pods * spines_per_pod, spines_per_pod * cores_per_group, spines_per_pod


# (servers, radix, servers per unit): two tiers, one pod per unit, pods of 2 and of 4 units
@pytest.mark.parametrize("nodes,radix,spu", [(8 * 6, 16, 8), (8 * 16, 16, 8), (8 * 18, 16, 8),
                                             (8 * 32, 16, 8), (8 * 64, 16, 8), (32 * 12, 64, 32)])
def test_counts_ports_and_reach(nodes, radix, spu):
    server = DUO if spu == 8 else "dgx_h100"
    rails = 2 if spu == 8 else RAILS
    g = tp.rail_optimized(nodes, radix=radix, servers_per_unit=spu, server=server)
    leaves, spines, cores, reach = _expected(nodes, radix, rails, spu)
    assert (len(_switches(g, "leaf")), len(_switches(g, "spine")), len(_switches(g, "core"))) == \
        (leaves, spines, cores)
    # cables by tier: one per NIC at the access layer and, non-blocking, at every layer above
    d = tp.describe(g)
    nics = nodes * rails
    assert d["cables_by_tier"]["access"] == nics
    assert d["cables_by_tier"]["leaf-spine"] == nics
    assert d["cables_by_tier"].get("spine-core", 0) == (nics if cores else 0)
    kind = nx.get_node_attributes(g, "kind")
    for n in g:
        if kind[n] == "switch":
            assert sum(e["cables"] for e in g[n].values()) <= radix
    # every leaf reaches every spine of its pod; every spine every core of its group
    cores_in_group = Counter(g.nodes[c]["group"] for c in _switches(g, "core"))
    for leaf in _switches(g, "leaf"):
        assert sum(1 for v in g[leaf] if g.nodes[v].get("role") == "spine") == reach
    for spine in _switches(g, "spine"):
        ups = [v for v in g[spine] if g.nodes[v].get("role") == "core"]
        if cores:
            group = {g.nodes[v]["group"] for v in ups}
            assert len(group) == 1 and len(ups) == cores_in_group[group.pop()]
    assert tp.validate(g) is g


def test_dgx_at_64_and_128_units():
    # NVIDIA DGX SuperPOD B200 RA, "Larger DGX SuperPOD component counts" (docs.nvidia.com/
    # dgx-superpod/reference-architecture-scalable-infrastructure-b200, "DGX SuperPOD
    # Architecture"): 32 SU -> 256/256/128, 64 SU (2048 nodes) -> 512 leaf, 512 spine, 256 core (8 NICs per node,
    # as DGX H100). 128 SU needs pods of 2 units: 1024 spines, 8 x 32 x 2 = 512 cores.
    for nodes, counts in [(1024, (256, 256, 128)), (2048, (512, 512, 256)), (4096, (1024, 1024, 512))]:
        g = tp.rail_optimized(nodes)
        d = tp.describe(g)["switches_by_role"]
        assert (d["leaf"], d["spine"], d["core"]) == counts
    tp.validate(g)


def test_the_largest_size_and_the_error_beyond():
    # 64-port switches, 8 rails: 64 pods of 4 units of 32 servers = k^3/4 NICs
    assert tp.rail_optimized_limit() == 64 ** 3 // 4 // RAILS == 8192
    assert tp.rail_optimized_limit(radix=128) == 128 * (64 // RAILS) * SPU == 32768
    with pytest.raises(ValueError, match="nodes must be at most 8192 .*radix=64"):
        tp.rail_optimized(8193)
    # 128 ports, units of 64 (64 down + 64 up a leaf): 128 pods of 64 // 8 = 8 units
    with pytest.raises(ValueError, match="nodes must be at most 65536 .*radix=128"):
        tp.rail_optimized(128 * 8 * 64 + 1, radix=128, servers_per_unit=64)
    # units of 128: a leaf of 128 down and 128 up is no 128-port switch
    with pytest.raises(ValueError, match=r"servers_per_unit=128 .* 256 ports, more than radix=128; use "
                                         r"servers_per_unit <= 64"):
        tp.rail_optimized(4096 * 32 + 1, radix=128, servers_per_unit=32 * 4)


def test_h100_reference_architecture_spines_and_full_units():
    # NVIDIA DGX SuperPOD H100 RA, Table 4 (docs.nvidia.com/dgx-superpod/reference-architecture-
    # scalable-infrastructure-h100, "Network Fabrics"): 1-4 SU -> leaf 8/16/24/32, spine
    # 4/8/16/16, spine-leaf cables 256/512/768/1024 (the fabric is cabled for full SUs: 31,
    # 63, 95, 127 DGX plus the UFM appliance). 3 SU is the exception: the RA's 16 spines take 2
    # cables from each leaf (48 of 64 ports), where the fewest that hold 24 leaves x 32 uplinks
    # are 768 / 64 = 12 (3 or 2 cables a leaf-spine pair), which rail_optimized builds.
    for units, leaf, spine in [(1, 8, 4), (2, 16, 8), (3, 24, 12), (4, 32, 16)]:
        g = tp.rail_optimized(32 * units - 1, full_units=True)
        d = tp.describe(g)
        assert (d["switches_by_role"]["leaf"], d["switches_by_role"]["spine"]) == (leaf, spine)
        assert d["cables_by_tier"]["leaf-spine"] == 256 * units
        assert d["cables_by_tier"]["access"] == (32 * units - 1) * 8   # + 4 UFM cables in the RA


def test_validate_finds_gpus_that_cannot_reach_each_other():
    g = nx.DiGraph()
    for a, b in [("g0", "g1"), ("g2", "g3")]:
        g.add_node(a, kind="gpu")
        g.add_node(b, kind="gpu")
        g.add_edge(a, b, capacity=1e9)
        g.add_edge(b, a, capacity=1e9)
    with pytest.raises(TopologyError, match="cannot reach .* 2 disconnected parts"):
        tp.validate(g)
    g.add_node("sw", kind="switch")
    for n in ("g1", "g2"):
        g.add_edge(n, "sw", capacity=0.0)    # a failed cable still joins them
        g.add_edge("sw", n, capacity=0.0)
    assert tp.validate(g) is g
