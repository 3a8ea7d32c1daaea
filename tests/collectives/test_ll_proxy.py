"""LL across nodes: a network proxy thread hands every LL line to its NIC (NCCL keeps a network
connection's LL send buffer in host memory and its proxy reads each line's flags before it posts
a step, src/transport/net.cc), so a node's busiest proxy bounds an LL collective across nodes."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives import _pipeline
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants

MIB = 1 << 20


def _ring_ll(graph, size):
    return collective(graph, "all_gather", size, algorithm="ring", protocol="LL")


def test_proxy_bound_slope_is_the_lines_a_proxy_hands_on():
    # 2 DGX H100 (8 GPUs, 8 NICs each, one beside each GPU): 16 ranks, 16 channels all running
    # from 1 MiB (ring LL's threshold: 512 threads x 8 B x 16 ranks = 64 KiB a channel), 2 a
    # proxy; each channel carries 15/16 of its 1/16 share across, twice over (16-byte lines).
    g = tp.rail_optimized(nodes=2)
    small, large = _ring_ll(g, 8 * MIB), _ring_ll(g, 16 * MIB)
    assert small.channels_run == large.channels_run == 16
    lines_per_mib = 2 * 2 * (15 / 16) * MIB / 16            # channels a proxy x lines a channel
    expected = 8 * lines_per_mib / _pipeline.LL_PROXY_RATE
    assert large.time - small.time == pytest.approx(expected, rel=1e-9)
    # the tuner's own LL bandwidth across 2 nodes (llMaxBws, Intel: 39 GB/s bus) moves 8 MiB
    # more in less: the proxy binds
    assert expected > 8 * MIB / (39e9 * 16 / 15)


def test_one_node_ll_has_no_proxy():
    g = tp.rail_optimized(nodes=1)
    ranks, layout = participants(g, "all_gather", None, None)
    assert describe(g, ranks, layout).net_senders == 0
    assert _pipeline.ll_proxy_seconds("ring", "all_gather", 8 * MIB, 8, 1, 16, 0) == 0.0
    # unchanged whatever the rate
    before = _ring_ll(g, 4 * MIB).time
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_pipeline, "LL_PROXY_RATE", 1.0)
        assert _ring_ll(g, 4 * MIB).time == before


def test_senders_are_the_nodes_nearest_nics():
    g2 = tp.rail_optimized(nodes=2)
    ranks, layout = participants(g2, "all_reduce", None, None)
    assert describe(g2, ranks, layout).net_senders == 8        # a NIC beside each H100
    server = tp.get_server("dgx_a100").with_(nics=4, nic="efa1_100g")     # p4d.24xlarge's layout
    p4d = tp.rail_optimized(nodes=2, server=server, link="efa1_100g")
    ranks, layout = participants(p4d, "all_reduce", None, None)
    assert describe(p4d, ranks, layout).net_senders == 4       # p4d: 4 NICs, one a GPU pair


def test_nccl_chooses_without_the_proxy():
    # NCCL's estimate (what it chooses by) is its tuner's: the proxy is what the kernels take
    g = tp.rail_optimized(nodes=2)
    r = collective(g, "all_reduce", 2 * MIB)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_pipeline, "LL_PROXY_RATE", 1e30)
        fast = collective(g, "all_reduce", 2 * MIB)
    assert r.estimates == fast.estimates
    assert r.choices["ring/LL"] > fast.choices["ring/LL"]


def test_tree_and_chain_traffic():
    # a 2-node tree sends its share once across (one node up, the other down); deeper trees
    # twice (the double tree's interior node up and to two children); a chain the whole share
    one = _pipeline.ll_proxy_seconds("tree", "all_reduce", MIB, 16, 2, 8, 8)
    assert one == pytest.approx(2 * MIB / 8 / _pipeline.LL_PROXY_RATE)
    assert _pipeline.ll_proxy_seconds("tree", "all_reduce", MIB, 32, 4, 8, 8) == pytest.approx(2 * one)
    assert _pipeline.ll_proxy_seconds("ring", "broadcast", MIB, 16, 2, 8, 8) == pytest.approx(one)
    assert _pipeline.ll_proxy_seconds("nvls", "all_reduce", MIB, 16, 2, 8, 8) == 0.0
