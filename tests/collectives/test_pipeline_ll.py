"""LL's pipeline (flowsolver.collectives._pipeline) against NCCL's rules written out by hand
(NCCL 2.30: src/enqueue.cc topoGetAlgoInfo / calcCollChunking for the channels and chunks,
src/transport/net.cc for LL's store-and-forward network hop, src/device/all_reduce.h
runTreeSplit for the tree's reduce and broadcast at once) and against a published nccl-tests curve."""

import pytest

import topologies as tp
from flowsolver.collectives._pipeline import Pipeline, ll_depth, pipeline_time

from ..helpers import errors_against_curve

KIB, MIB = 1 << 10, 1 << 20
# a fill and a floor that LL must not pay
PARAMS = Pipeline(floor_simple=5e-6, floor_nvls=5e-6, fill_ring=3.0, fill_tree=2.0, fill_nvls=3.0)


def test_tree_ll_across_two_nodes_by_hand():
    # 256 KiB on 2 x 8 GPUs, 16 channels: tree LL keeps a channel while 256 KiB >= channels x
    # 512 threads x 8 bytes, so all 16 (16 x 4 KiB = 64 KiB); 16 KiB a channel, under one LL
    # chunk (64 KiB slot / 2, half of each line is flags = 32 KiB): one step. Reduce and
    # broadcast run at once (runTreeSplit), so the step moves at the tree's step rate and
    # waits whole at the network hop up and the one down: two steps more,
    # (1 + 2) x 256 KiB / 19.5 GB/s
    t = pipeline_time("tree", "LL", "all_reduce", 256 * KIB, 16, 2, 16, 25.2e-6, 19.5e9, PARAMS)
    assert t == pytest.approx(25.2e-6 + 3 * 262144 / 19.5e9, rel=1e-12)
    assert t * 1e6 == pytest.approx(65.53, abs=0.01)


def test_tree_ll_steps_channels_and_levels_by_hand():
    # 4 nodes x 8, 1 MiB: 16 channels, 64 KiB a channel = 2 chunks of 32 KiB; 2 levels, 4 hops:
    # (2 + 4) steps of 1 MiB / 10 GB/s / 2
    t = pipeline_time("tree", "LL", "all_reduce", MIB, 32, 4, 16, 50e-6, 10e9, PARAMS)
    assert t == pytest.approx(50e-6 + 6 * (MIB / 10e9 / 2), rel=1e-12)
    # 8 KiB on 2 x 8: 8 KiB < 3 x 4 KiB, so 2 of 16 channels run (2/16 of the bandwidth), 4 KiB
    # each, one step, plus the two hops
    t = pipeline_time("tree", "LL", "all_reduce", 8 * KIB, 16, 2, 16, 25e-6, 16e9, PARAMS)
    assert t == pytest.approx(25e-6 + 3 * 8192 / 2e9, rel=1e-12)


def test_ll_inside_a_node_and_on_rings_keeps_the_estimate():
    # one node: lines stream over NVLink, no stored step; a ring across nodes runs its steps in
    # lock step, so its network hops add none: latency + size / bandwidth at the channels run
    assert pipeline_time("tree", "LL", "all_reduce", 256 * KIB, 8, 1, 16, 10e-6, 40e9, PARAMS) == \
        pytest.approx(10e-6 + 262144 / 40e9, rel=1e-12)
    # ring LL on 16 ranks: threshold 8 x 16 = 128 bytes a thread, 64 KiB a channel: 512 KiB keeps 8
    assert pipeline_time("ring", "LL", "all_reduce", 512 * KIB, 16, 2, 16, 20e-6, 40e9, PARAMS) == \
        pytest.approx(20e-6 + 524288 / 20e9, rel=1e-12)
    assert (ll_depth("tree", 1), ll_depth("tree", 2), ll_depth("tree", 8), ll_depth("ring", 4)) == (0, 2, 6, 0)


def test_two_dgx_h100_tree_ll_follows_the_published_curve_better_than_the_estimate():
    # dstack's Nebius 2 x 8 H100 (8 x 400G InfiniBand a node) all_reduce_perf, out-of-place
    # times (benchmarks/validation/collectives.csv, source dstack-docs): 37.2, 37.9 and 43.1 us
    # at 16, 64 and 128 KiB, where NCCL picks tree LL (at 256 KiB its tree correction puts tree
    # LL128 ahead: 51.2 us against ring LL's 52.6 and tree LL's 58.8) and its estimate is 10-29 %
    # fast
    errors = errors_against_curve("dstack-nebius-2x8H100-allreduce", tp.rail_optimized(nodes=2), "all_reduce",
                                  (16 * KIB, 64 * KIB, 128 * KIB), ("tree", "LL"))
    for size, (err, err_estimate) in errors.items():
        assert err_estimate < -0.1, size
        assert abs(err) < 0.1 and abs(err) < abs(err_estimate) - 0.05, (size, err, err_estimate)
