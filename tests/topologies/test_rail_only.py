"""topologies.rail_only: counts from the rail-only rules (one non-blocking network per rail,
none between rails), reach through NVLink, limits."""

import math

import networkx as nx
import pytest

import topologies as tp
from flowsolver import collective


@pytest.mark.parametrize("nodes,radix", [(16, 64), (64, 64), (100, 64), (128, 64), (40, 16), (128, 16)])
def test_counts(nodes, radix):
    g = tp.rail_only(nodes, radix=radix)
    rails, half = 8, radix // 2
    if nodes <= radix:
        leaves, spines = 1, 0
    else:
        leaves = math.ceil(nodes / half)
        spines = math.ceil(leaves / 2)
    d = tp.describe(g)
    assert d["switches_by_role"].get("leaf", 0) == rails * leaves
    assert d["switches_by_role"].get("spine", 0) == rails * spines
    # one access cable per NIC; non-blocking: as many leaf-spine cables as NICs behind leaves
    assert d["cables_by_tier"]["access"] == nodes * rails
    assert d["cables_by_tier"].get("leaf-spine", 0) == (nodes * rails if spines else 0)
    for n, data in g.nodes(data=True):
        if data["kind"] == "switch":
            assert sum(e["cables"] for e in g[n].values()) <= radix
            # no cable between rails
            assert all(g.nodes[v].get("rail") == data["rail"] for v in g[n] if g.nodes[v]["kind"] == "switch")
    assert tp.validate(g) is g


def test_rails_are_joined_only_through_nvlink():
    g = tp.rail_only(4)
    fabric = g.subgraph(n for n, d in g.nodes(data=True) if d["kind"] in ("nic", "switch"))
    assert nx.number_weakly_connected_components(fabric) == 8      # one network per rail
    r = collective(g, "all_to_all", 2**24)
    assert r.time > 0 and r.time < math.inf


def test_limits_and_errors():
    assert tp.rail_only(16 * 8, radix=16).graph["params"]["leaves_per_rail"] == 16
    with pytest.raises(ValueError, match="nodes must be at most 128 for rail_only with radix=16"):
        tp.rail_only(129, radix=16)
    with pytest.raises(ValueError, match="has no NVLink"):
        tp.rail_only(4, server="pcie_8gpu")
    b = tp.bill(tp.rail_only(32))
    assert b.count("quantum2_qm9700") == 8 and b.links[("access", "optical", 400)] == 256
