"""An all-to-all's cost of its peers: NCCL sets up every peer's send and receive in turn, so a
small all-to-all's time grows with the ranks (units: seconds, bytes)."""

import pytest

import topologies as tp
from flowsolver import collective, concurrent
from flowsolver.collectives._nccl import PEER_LATENCY, peer_latency
from flowsolver.collectives._trees import StepFlows

# nccl-tests' zero-byte all-to-all on ALCF Polaris (argonne-lcf/alcf-nccl-tests, commit 1922bfd,
# results_polaris/nccl_2_21/n256.g4.2024-04-29-19-19-41/alltoall_output.dat.5): 1024 ranks,
# steady rows 2126.0-2154.7 us out of place; n8 (32 ranks) 74.4-86.9 us with the same NCCL 2.21.5
POLARIS_1024_US = (2126.0, 2154.7)
POLARIS_32_US = (74.4, 86.9)


def test_one_peer_a_rank_costs_nothing_however_many_channels_repeat_it():
    ring = StepFlows([(i, (i + 1) % 8, 1.0) for _ in range(16) for i in range(8)])    # 16 channels
    assert peer_latency(ring) == 0.0


def test_each_further_peer_costs_the_measured_latency():
    star = StepFlows([(0, j, 1.0) for j in range(1, 9)] + [(j, 0, 1.0) for j in range(1, 9)])
    assert peer_latency(star) == pytest.approx(7 * PEER_LATENCY)


def test_a_small_all_to_all_grows_with_its_peers_as_measured():
    # the model's own hop latencies differ from Polaris's fabric; the growth per peer between 32
    # and 1024 ranks is what the measurement fixes: (2126 - 86.9) / 992 = 2.06 us at least,
    # (2154.7 - 74.4) / 992 = 2.10 at most; the model within 10 % of that slope
    small = collective(tp.rail_optimized(nodes=4), "all_to_all", 8 * 32).time
    large = collective(tp.rail_optimized(nodes=128), "all_to_all", 8 * 1024).time
    slope = (large - small) / (1023 - 31)
    lo = (POLARIS_1024_US[0] - POLARIS_32_US[1]) / 992 * 1e-6
    hi = (POLARIS_1024_US[1] - POLARIS_32_US[0]) / 992 * 1e-6
    assert 0.9 * lo <= slope <= 1.1 * hi
    assert large == pytest.approx(sum(POLARIS_1024_US) / 2 * 1e-6, rel=0.1)


def test_a_fixed_step_latency_leaves_the_peers_to_the_caller():
    # step_latency is the whole of a step's latency: 8 B a peer costs the same on 32 ranks as on 256
    times = [collective(tp.rail_optimized(nodes=n), "all_to_all", 8 * 8 * n, step_latency=5e-6).time for n in (4, 32)]
    assert times[1] == pytest.approx(times[0], abs=0.5e-6)


def test_the_event_engine_pays_the_peers_as_collective_does():
    # concurrent's event engine prices a step with its own latencies: the same cost a peer
    g = tp.rail_optimized(nodes=4)
    alone = collective(g, "all_to_all", 2**10)
    together = concurrent(g, [dict(op="all_to_all", size=2**10, ranks=list(range(32)))]).together[0]
    assert together == pytest.approx(alone.time, rel=1e-9)
    assert together > 31 * PEER_LATENCY


def test_only_grouped_sends_pay_for_their_peers(monkeypatch):
    # a ring's channels visit the ranks in other orders, so a rank may have two next peers in
    # one step of a real layout: that is one kernel's connections, not NCCL's grouped sends
    import flowsolver.collectives._nccl as nccl
    from flowsolver.collectives._solve import _peers
    monkeypatch.setattr(nccl, "PEER_LATENCY", 1.0)            # a second a peer: unmissable
    _peers.cache_clear()
    try:
        g = tp.rail_optimized(nodes=2)
        assert collective(g, "broadcast", 8).time < 1e-3           # the ring's chain: no peer cost
        assert collective(g, "all_to_all", 8 * 16).time > 14.0      # 15 peers a rank
    finally:
        _peers.cache_clear()
