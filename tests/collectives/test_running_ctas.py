"""k running CTAs (channels) priced alike whether NCCL drops to k at a small size or
``channels=`` (NCCL_MAX_NCHANNELS) sets k: NCCL runs the same kernel either way (enqueue.cc
topoGetAlgoInfo drops channels from the communicator's count; connect.cc keeps the first k)."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._channels import P2P_CHANNEL_SHARE
from flowsolver.collectives._pipeline import channels_used, pipeline_time

KIB = 1 << 10


@pytest.mark.parametrize("nodes, protocol, size", [
    # ring LL's threshold is 8 x ranks bytes a thread, 512 threads: on 2 x 8 ranks 64 KiB a
    # channel, so NCCL runs 1 channel at 64 KiB and 4 at 256 KiB
    (2, "LL", 64 * KIB), (2, "LL", 256 * KIB),
    # one node, 8 ranks: 32 KiB a channel; Simple 512 x 64 = 32 KiB a channel
    (1, "LL", 64 * KIB), (1, "LL", 256 * KIB), (1, "Simple", 64 * KIB), (1, "Simple", 256 * KIB),
])
def test_nccls_own_drop_to_k_channels_times_as_channels_k(nodes, protocol, size):
    g = tp.rail_optimized(nodes=nodes)
    ranks = 8 * nodes
    default = fs.collective(g, "all_reduce", size, algorithm="ring", protocol=protocol)
    k = channels_used("ring", protocol, size, ranks, default.channels)
    assert k < default.channels                      # NCCL runs fewer than its count here
    given = fs.collective(g, "all_reduce", size, algorithm="ring", protocol=protocol, channels=k)
    # across nodes channels=k flow-solves k rings (k NICs) and scales them back to NCCL's count's
    # (as for Simple below): a ring LL channel's own rate (its uncapped share) then agrees within the
    # solve's rounding of the idle NICs; in one node the two are the same solve
    assert given.time == pytest.approx(default.time, rel=1e-9 if nodes == 1 else 5e-3), (k, default.time, given.time)


def test_across_nodes_simple_k_channels_within_the_flow_solves_rings():
    # across nodes channels=k also flow-solves k rings (k NICs), scaled back to NCCL's count's:
    # the two agree within the solve's rounding of the idle NICs
    g = tp.rail_optimized(nodes=2)
    size = 64 * KIB
    default = fs.collective(g, "all_reduce", size, algorithm="ring", protocol="Simple")
    k = channels_used("ring", "Simple", size, 16, default.channels)
    given = fs.collective(g, "all_reduce", size, algorithm="ring", protocol="Simple", channels=k)
    assert given.time == pytest.approx(default.time, rel=2e-3)


def test_a_cta_alone_moves_its_own_rate_where_that_is_more_than_its_share():
    # LL has no fill: time = latency + size / bandwidth, bandwidth = algbw x nc x max(1 / 24, rate)
    size, algbw = 16 * KIB, 100e9
    nc = channels_used("ring", "LL", size, 8, 24)
    assert nc == 1
    share = pipeline_time("ring", "LL", "all_reduce", size, 8, 1, 24, 0.0, algbw)
    faster = pipeline_time("ring", "LL", "all_reduce", size, 8, 1, 24, 0.0, algbw, channel_rate=0.0575)
    assert share / faster == pytest.approx(0.0575 * 24, rel=1e-12)
    # a rate below the share changes nothing; share_of sets the share's count
    assert pipeline_time("ring", "LL", "all_reduce", size, 8, 1, 24, 0.0, algbw, channel_rate=0.01) == share
    halved = pipeline_time("ring", "LL", "all_reduce", size, 8, 1, 24, 0.0, algbw, share_of=48)
    assert halved == pytest.approx(2 * share, rel=1e-12)


def test_simple_small_sizes_on_one_dgx_h100_run_at_a_ctas_measured_rate(monkeypatch):
    # one DGX H100: NCCL's 24 channels share its ring's bus bandwidth, ~15 GB/s each, where one CTA
    # alone moves the P2P channel's measured 5.7 % of 370.8 GB/s = 21.1 GB/s: at 256 KiB 8 run, each
    # at its own rate (faster than its share); at 1 GiB all 24 run and share the links (unchanged)
    import flowsolver.collectives._nccl_timing as timing
    assert P2P_CHANNEL_SHARE * 18 * 20.6e9 > 365e9 / 24
    g = tp.rail_optimized(nodes=1)
    with_cta = [fs.collective(g, "all_reduce", s, algorithm="ring", protocol="Simple").time for s in (256 * KIB, 1 << 30)]
    monkeypatch.setattr(timing, "P2P_CHANNEL_SHARE", 0.0)
    share = [fs.collective(g, "all_reduce", s, algorithm="ring", protocol="Simple").time for s in (256 * KIB, 1 << 30)]
    assert with_cta[0] < share[0] * 0.99
    assert with_cta[1] == pytest.approx(share[1], rel=1e-3)       # (the last cells spread unevenly)


def _nic_pair(link):
    return tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(nic=link), link=link)


def test_a_tree_with_fewer_channels_never_loses_more_than_their_share():
    # 2 x DGX H100: doubling the CTAs a tree runs at most doubles its bandwidth (each moves its
    # share of NCCL's 16 channels' or its own rate), so a 64 MiB tree never runs more than twice as
    # long on k channels as on 2k (the reduced count was once charged twice: 3.6x from 1 to 2)
    g = tp.rail_optimized(2)
    times = [fs.collective(g, "all_reduce", 64 << 20, algorithm="tree", protocol=p, channels=k).time
             for p in ("Simple", "LL128") for k in (1, 2, 4, 8, 16)]
    for run in (times[:5], times[5:]):
        assert all(1.0 <= a / b <= 2.0 for a, b in zip(run, run[1:])), run


def test_a_ctas_own_rate_is_no_more_than_its_ring_crosses_nodes_on():
    # each ring crosses nodes on one NIC (search.cc gives channel c the NIC nets[c mod n]): k of
    # them move at most k x 12.5 GB/s over 100 Gb/s NICs, however fast a CTA could copy alone
    g = _nic_pair("eth_100g")
    nic = tp.get_link("eth_100g").bandwidth
    for k in (1, 2, 4):
        r = fs.collective(g, "all_reduce", 256 << 20, algorithm="ring", protocol="Simple", channels=k)
        assert r.busbw <= k * nic * 1.0001, (k, r.busbw)


def test_a_sensitivity_with_fewer_channels_sees_the_nics_it_runs_on():
    # ring Simple on 2 of 2 x DGX H100's channels: the NICs set the time; the derivative a
    # sensitivity reports for them must match a re-solve with 1e-4 faster NICs
    import copy

    import numpy as np
    g = tp.rail_optimized(2)
    kw = dict(algorithm="ring", protocol="Simple", channels=2)
    r = fs.collective(g, "all_reduce", 64 << 20, **kw)
    edges = list(g.edges(data=True))
    caps = np.array([d["capacity"] for _, _, d in edges])
    mask = np.array([d["tier"] == "access" for _, _, d in edges], float)
    dual = r.time_directional(caps * mask * 1e-4, side="up")
    h = copy.deepcopy(g)
    for _, _, d in h.edges(data=True):
        if d["tier"] == "access":
            d["capacity"] *= 1 + 1e-4
    fd = fs.collective(h, "all_reduce", 64 << 20, **kw).time - r.time
    assert fd < 0 and dual == pytest.approx(fd, rel=0.01)


def test_a_tree_given_nccls_own_count_times_as_none_over_slow_nics():
    # 2 x DGX H100 on 100 Gb/s NICs: NCCL runs 16 channels either way; given as channels=16 the
    # flow solve runs 16 trees, 4 chunks of 512 KiB each through 16 stages (half of 64 MiB / 16),
    # whose steady pace is its slowest step's, the NICs' (it took the step with most stages, which
    # held only NVLink hops: 1308 us, the NDR fabric's time, against 2106)
    g = _nic_pair("eth_100g")
    for size in (4 << 20, 64 << 20, 512 << 20):
        own = fs.collective(g, "all_reduce", size, algorithm="tree", protocol="Simple")
        given = fs.collective(g, "all_reduce", size, algorithm="tree", protocol="Simple", channels=own.channels)
        assert given.time == pytest.approx(own.time, rel=1e-9), size


def test_a_pipelines_steady_pace_is_its_slowest_steps():
    # 2 chunks through 3 stages, the last 10x slower: the steady state is 2 chunks at the slow
    # stage's pace, 2 x 10 = 20 (the step with most stages holds the two fast ones only)
    from flowsolver.collectives._nccl_timing import steady_transfer

    class S:
        def __init__(self, transfer, count=1, latency_count=0):
            self.transfer, self.count, self.latency_count = transfer, count, latency_count

    steps = [S(1.0), S(1.0, latency_count=3), S(10.0), S(10.0)]
    assert steady_transfer(steps) == pytest.approx(20.0)
