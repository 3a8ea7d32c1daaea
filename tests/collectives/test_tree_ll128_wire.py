"""adv26 F2: a tree's time is no faster than its own flow solve of the data's bytes, but LL128
puts 128 bytes on the wire for 120 of data (src/include/device.h NCCL_LL128_LINEELEMS 16,
NCCL_LL128_DATAELEMS 15): where that solve bound (a server holding one GPU of the group, an
oversubscribed core), tree LL128 ran at Simple's rate, under the wire's bound."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver import collective


@pytest.mark.parametrize("size", [1 << 26, 1 << 30, 1 << 32])
def test_a_lone_gpus_nic_bounds_tree_ll128_by_its_lines(size):
    # ranks 0, 1 on server 0 and 8 on server 1: server 1's one NIC receives the reduced buffer
    # and sends its own, each way the whole buffer in LL128 lines at the NIC's rate
    g = tp.rail_optimized(nodes=2)
    nic = tp.get_link("ib_ndr").effective_bandwidth          # 47 GB/s
    bound = size * 128 / 120 / nic
    t = collective(g, "all_reduce", size, ranks=[0, 1, 8], algorithm="tree", protocol="LL128").time
    assert t >= bound
    simple = collective(g, "all_reduce", size, ranks=[0, 1, 8], algorithm="tree", protocol="Simple").time
    if size >= 1 << 30:             # (at 64 MiB the latency and the pipeline's fill are 8 % of it)
        assert simple < bound       # Simple's bytes are the data: under LL128's bound


def test_an_oversubscribed_core_gives_tree_ll128_its_lines_share():
    g = fs.Upgrade("agg-core", factor=0.25).apply(tp.fat_tree(4))
    simple = collective(g, "all_reduce", 1 << 32, algorithm="tree", protocol="Simple").algbw
    ll128 = collective(g, "all_reduce", 1 << 32, algorithm="tree", protocol="LL128").algbw
    assert ll128 <= simple * 120 / 128 * (1 + 1e-9)
