"""calibrate on an nccl-tests sendrecv log: the ring shift nccl-tests runs, not the first pair."""

import pytest

pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import calibrate, collective  # noqa: E402
from flowsolver.collectives._calibrate_model import row_groups  # noqa: E402

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
SIZES = [2**k for k in range(20, 31)]
# nccl-tests sendrecv_perf on 2 x 8: rank r sends to r + 1 mod 16 (src/sendrecv.cu), so GPU 7 ->
# GPU 8 (and 15 -> 0) cross the network. collective() times the pair ranks[0] -> ranks[1] in the
# communicator of all the ranks: that network pair first is its documented way to time the shift.
NETWORK_PAIR = [7, 8] + [r for r in range(16) if r not in (7, 8)]


def _sendrecv_log(times):
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r // 8} device {r % 8} [0x0f] NVIDIA H100\n"
                      for r in range(16))
    return ("# Collective test starting: sendrecv_perf\n" + devices + HEADER
            + "".join(f"{s} {s // 4} float sum -1 {t * 1e6:.2f} 0 0 0\n" for s, t in zip(SIZES, times)))


def test_the_ring_shift_is_one_pair_a_rank_each_first_in_the_whole_communicator():
    g = tp.rail_optimized(nodes=1)
    assert row_groups(g, "send_recv", [3, 5, 6]) == [[3, 5, 6], [5, 6, 3], [6, 3, 5]]
    assert row_groups(g, "all_reduce", None) == [None]


def test_a_2x8_sendrecv_log_of_the_models_own_prediction_calibrates_back_to_the_library():
    # before: the NVLink pair 0 -> 1 was modelled and the network's time fitted as P2P channels
    # at 0.548x of the library's
    g = tp.rail_optimized(nodes=2)
    own = [collective(g, "send_recv", s, ranks=NETWORK_PAIR).time for s in SIZES]
    cal = calibrate(g, [_sendrecv_log(own)])
    assert cal.p2p_bandwidth == pytest.approx(1.0, abs=1e-6)
    assert all(v == pytest.approx(tp.get_link(t).efficiency, rel=1e-3) for t, v in cal.efficiency.items())
    assert cal.residuals["error"].abs().max() < 1e-3


def test_a_slower_sendrecv_log_slows_the_network_pair_not_the_nvlink_pairs_it_never_measured():
    g = tp.rail_optimized(nodes=2)
    slow = [collective(g, "send_recv", s, ranks=NETWORK_PAIR).time / 0.8 for s in SIZES]
    cal = calibrate(g, [_sendrecv_log(slow)])
    assert cal.p2p_bandwidth == pytest.approx(1.0, abs=1e-6)
    for ranks in (list(range(16)), list(range(8))):         # 0 -> 1 over NVLink, in 16 and 8 ranks
        assert collective(g, "send_recv", 2**30, ranks=ranks, model=cal).time == \
            pytest.approx(collective(g, "send_recv", 2**30, ranks=ranks).time, rel=1e-9)
    # the network pair takes the log's time where the bandwidth rules (1 GiB: 20 % slower
    # throughput, 1 / 0.8 the time)
    assert collective(g, "send_recv", 2**30, ranks=NETWORK_PAIR, model=cal).time == pytest.approx(slow[-1], rel=0.01)
