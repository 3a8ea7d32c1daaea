"""The network's bisection cuts between whole servers (topologies.analysis.server_halves)."""

import pytest

import topologies as tp

NDR = 400e9 / 8          # an NDR port: 400 Gb/s one direction (NVIDIA ConnectX-7 / Quantum-2), bytes/s


@pytest.mark.parametrize("nodes, want", [
    # NVIDIA's H100 SuperPOD sizes with one DGX left for the UFM host: the smaller half is
    # floor(n/2) whole servers, non-blocking, so its 8 NICs a server bound the cut. The GPU
    # rank halves split server 63 (31) and counted 4 GPUs' NVLink: 27.2 (14.4) TB/s
    (127, 63 * 8 * NDR),     # 25.2 TB/s, under 128 DGX's 25.6
    (63, 31 * 8 * NDR),      # 12.4 TB/s
    (3, 1 * 8 * NDR),        # 400 GB/s (was 2.4 TB/s)
])
@pytest.mark.parametrize("full_units", [False, True])
def test_rail_optimized_at_an_odd_server_count_cuts_between_servers(nodes, want, full_units):
    d = tp.describe(tp.rail_optimized(nodes, full_units=full_units))
    assert d["bisection_method"] == "max flow between the server halves"
    assert d["bisection_bandwidth"] == pytest.approx(want, rel=1e-12)
    assert d["bisection_bandwidth"] <= d["gpus"] // 2 * NDR      # never above half the GPUs' NICs


def test_other_families_at_an_odd_server_count():
    # fat_tree(10) of DGX H100: 250 edge ports hold 31 servers; non-blocking, so 15 servers'
    # 120 NICs (was 8.0 TB/s across a split server)
    d = tp.describe(tp.fat_tree(10, server="dgx_h100"))
    assert (d["servers"], d["bisection_bandwidth"]) == (31, pytest.approx(15 * 8 * NDR, rel=1e-12))
    # dragonfly(8, 1, 2, g=3): a DGX on each group's one router, one global cable between each
    # pair of groups: one server against two crosses its group's 2 global cables (was 2.1 TB/s)
    d = tp.describe(tp.dragonfly(8, 1, 2, g=3, server="dgx_h100"))
    assert (d["servers"], d["bisection_bandwidth"]) == (3, pytest.approx(2 * NDR, rel=1e-12))
    # leaf_spine(3, 2, 8): a DGX a leaf, 8 uplinks: one server against two, its 8 NICs
    d = tp.describe(tp.leaf_spine(3, 2, 8, server="dgx_h100"))
    assert d["bisection_bandwidth"] == pytest.approx(8 * NDR, rel=1e-12)


def test_server_halves_and_the_single_server():
    first, second = tp.analysis.server_halves(tp.rail_optimized(127))
    assert (len(first), len(second)) == (63 * 8, 64 * 8)
    assert {n.split("/")[0] for n in first}.isdisjoint(n.split("/")[0] for n in second)
    # one server is no network: measured, it reports its NVLink halves as its formula does, and says so
    d = tp.describe(tp.rail_optimized(1), exact=True)
    assert d["bisection_method"] == "max flow between the GPU rank halves of its one server"
    assert d["bisection_bandwidth"] == pytest.approx(4 * 450e9, rel=1e-12)   # 4 GPUs x NVLink 4's 450 GB/s
