"""Formula network diameters of one-pod / one-leaf builds against a breadth-first search over
the graph, and the one-leaf rail fabric built without a spine that would carry nothing."""

import pytest

import topologies as tp
from topologies.analysis import _bfs_diameter, _endpoints_and_fabric


def _bfs(g):
    ends, fabric = _endpoints_and_fabric(g)
    return _bfs_diameter(fabric, ends)


@pytest.mark.parametrize("pods, racks, hops", [
    (1, 4, 4),      # NIC - ToR - cluster switch - ToR - NIC (no aggregation tier): was 6
    (1, 1, 2),      # one ToR: NIC - ToR - NIC
    (2, 1, 6),      # through the aggregation switches
    (3, 2, 6),
])
def test_meta_24k_diameter_is_the_breadth_first_search(pods, racks, hops):
    g = tp.meta_24k(pods=pods, racks_per_pod=racks)
    assert tp.describe(g)["network_diameter"] == hops
    assert tp.describe(g)["diameter_method"] == "formula"
    assert _bfs(g) == hops


@pytest.mark.parametrize("nodes, ratio", [(2, 1.0), (3, 1.0), (32, 1.0), (32, 3.0)])
def test_one_leaf_rail_fabric_is_that_leaf_alone(nodes, ratio):
    # one NIC per server, one unit: every NIC on rail leaf 0, NIC - leaf - NIC = 2 hops (was 4),
    # and no spine (was 1 spine with the leaf's uplinks, 32 cables at 1:1, carrying nothing)
    g = tp.rail_optimized(nodes, server="host", oversubscription=ratio)
    d = tp.describe(g)
    assert d["network_diameter"] == 2 == _bfs(g)
    assert d["switches_by_role"] == {"leaf": 1}
    assert d["cables_by_tier"] == {"access": nodes, "pcie": nodes}     # a NIC's cable, its PCIe
    assert g.graph["params"]["tiers"] == 1 and g.graph["params"]["uplinks"] == 0
    # one switch is non-blocking: floor(n/2) NICs of 50 GB/s, as the max flow finds
    assert d["bisection_bandwidth"] == pytest.approx(nodes // 2 * 50e9)
    assert tp.bisection_max_flow(g) == pytest.approx(nodes // 2 * 50e9)


def test_two_leaves_still_have_their_spine():
    g = tp.rail_optimized(33, server="host")
    d = tp.describe(g)
    assert d["switches_by_role"] == {"leaf": 2, "spine": 1}
    assert d["network_diameter"] == 4 == _bfs(g)
