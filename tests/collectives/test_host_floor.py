"""The host's floor of a collective one thread issues for several GPUs (nccl-tests ``-g N``,
CollectiveOptions.gpus_per_thread): an iteration cannot take less than the thread's N NCCL
calls, 4.2 us each (nccl-tests issue #123: a DGX A100 ring all-reduce rising 4.24 us per GPU
of ``-g``), and the host's work overlaps the GPUs' (the time is the greater of the two, not
their sum).

Hand-computed reference: a 4 KiB ring LL all-reduce on one DGX H100 takes NCCL's ring LL
latency and a few LL steps, about 16 us on the GPUs, below 8 x 4.2 = 33.6 us and above
2 x 4.2 = 8.4 us; a 1 GiB all-reduce takes milliseconds, far above any floor.

A call timed on its own from an idle device (CollectiveOptions.host_overhead, e.g. one
``torch.distributed`` call per trial) pays the host's issuing before its kernel: the sum."""

import sys
from pathlib import Path

import numpy as np
import pytest

import topologies as tp
from flowsolver import CollectiveOptions, collective, collective_variants

RING_LL = dict(algorithm="ring", protocol="LL")
KIB4 = 4096


@pytest.fixture(scope="module")
def server():
    return tp.rail_optimized(nodes=1)


def test_eight_gpus_a_thread_take_eight_host_calls_at_a_small_size(server):
    alone = collective(server, "all_reduce", KIB4, **RING_LL)
    assert 8.4e-6 < alone.time < 33.6e-6            # the GPUs' time lies between the two floors below
    eight = collective(server, "all_reduce", KIB4, gpus_per_thread=8, **RING_LL)
    assert eight.time == pytest.approx(8 * 4.2e-6, rel=1e-12)
    assert eight.algbw == pytest.approx(KIB4 / (8 * 4.2e-6), rel=1e-12)
    via_options = collective(server, "all_reduce", KIB4,
                             options=CollectiveOptions(gpus_per_thread=8, protocol="LL"), algorithm="ring")
    assert via_options.time == eight.time


def test_the_floor_is_the_greater_of_the_two_not_their_sum(server):
    alone = collective(server, "all_reduce", KIB4, **RING_LL)
    two = collective(server, "all_reduce", KIB4, gpus_per_thread=2, **RING_LL)   # 8.4 us < the GPUs' time
    assert two.time == alone.time


def test_one_gpu_a_thread_adds_nothing_even_below_one_call(server):
    # a pure alpha-beta flow model with no latency: a 4 KiB all-reduce in nanoseconds, under one
    # call's 4.2 us; a process per GPU (the default) keeps it, two GPUs a thread raise it to 8.4 us
    free = dict(algorithm="ring", step_latency=0.0, base_latency=0.0)
    one = collective(server, "all_reduce", KIB4, **free)
    assert one.time < 4.2e-6
    assert collective(server, "all_reduce", KIB4, gpus_per_thread=1, **free).time == one.time
    assert collective(server, "all_reduce", KIB4, gpus_per_thread=2, **free).time == pytest.approx(8.4e-6, rel=1e-12)


def test_nothing_changes_at_a_large_size(server):
    size = 2 ** 30
    r1 = collective(server, "all_reduce", size)
    r8 = collective(server, "all_reduce", size, gpus_per_thread=8)
    assert r1.time > 1e-3 and r8.time == r1.time and r8.algorithm == r1.algorithm


def test_nccl_choice_is_not_changed_by_the_floor(server):
    # NCCL chooses by its own estimate, which knows nothing of the host: the same pick
    r1 = collective(server, "all_reduce", KIB4)
    r8 = collective(server, "all_reduce", KIB4, gpus_per_thread=8)
    assert (r8.algorithm, r8.protocol) == (r1.algorithm, r1.protocol)
    assert r8.estimates == r1.estimates
    assert r8.time == pytest.approx(33.6e-6, rel=1e-12)


def test_no_link_changes_a_time_held_at_the_floor(server):
    eight = collective(server, "all_reduce", KIB4, gpus_per_thread=8, **RING_LL)
    assert np.all(eight.time_gradient() == 0.0)
    free = collective(server, "all_reduce", KIB4, algorithm="ring", step_latency=0.0, base_latency=0.0,
                      gpus_per_thread=2)
    assert free.time == pytest.approx(8.4e-6, rel=1e-12)
    with pytest.raises(ValueError, match="host's floor"):
        free.time_gradient()


def test_variants_take_it_too(server):
    times = [r.time for r in collective_variants([server, server], "all_reduce", KIB4, gpus_per_thread=8,
                                                 **RING_LL)]
    assert times == pytest.approx([33.6e-6, 33.6e-6], rel=1e-12)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8", None])
def test_bad_values_are_refused_naming_the_option(server, bad):
    with pytest.raises(ValueError, match="gpus_per_thread"):
        CollectiveOptions(gpus_per_thread=bad)
    with pytest.raises(ValueError, match="gpus_per_thread"):
        collective(server, "all_reduce", KIB4, gpus_per_thread=bad)


def test_the_validation_setups_read_minus_g_from_the_run():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "validation"))
    import setups as S

    assert S.gpus_per_thread("NCCL_ALGO=Ring ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 4 -n 40") == 4
    assert S.gpus_per_thread("all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50") == 8
    assert S.gpus_per_thread("mpirun -np 2 (1 process x -g 8 per node) NCCL_IB_QPS_PER_CONNECTION=4") == 8
    assert S.gpus_per_thread("all_reduce_perf -b 8 -e 2G -f 2 -t 1 -g 1 -c 1 -n 100") == 1
    assert S.gpus_per_thread("torch.distributed all_reduce (all_reduce_bench.py)") == 1
    assert S.gpus_per_thread("NCCL_IB_GID_INDEX=3 -x NCCL_IGNORE_CPU_AFFINITY=1") == 1


# --- the host's work before a call timed on its own (CollectiveOptions.host_overhead) -------------

def test_a_call_timed_from_an_idle_device_adds_the_hosts_overhead(server):
    # nothing queued ahead hides the host's issuing: the time is the sum, at every size and algorithm
    for size, kw in ((KIB4, RING_LL), (1 << 20, {}), (1 << 30, {})):
        alone = collective(server, "all_reduce", size, **kw)
        idle = collective(server, "all_reduce", size, host_overhead=25e-6, **kw)
        assert idle.time == pytest.approx(alone.time + 25e-6, rel=1e-12)
    # PyTorch's per-call overhead, "some 20-30us" (ml-engineering's all_reduce_bench.py): the middle
    from flowsolver.collectives import TORCH_CALL_OVERHEAD
    assert TORCH_CALL_OVERHEAD == 25e-6


def test_the_overhead_adds_to_the_floor_of_several_gpus_a_thread(server):
    both = collective(server, "all_reduce", KIB4, gpus_per_thread=8, host_overhead=10e-6, **RING_LL)
    assert both.time == pytest.approx(8 * 4.2e-6 + 10e-6, rel=1e-12)


@pytest.mark.parametrize("bad", [-1e-6, None, float("nan"), float("inf"), "25us", True])
def test_a_bad_host_overhead_is_refused_by_name(server, bad):
    with pytest.raises(ValueError, match="host_overhead must be a finite number of seconds >= 0"):
        CollectiveOptions(host_overhead=bad)
    with pytest.raises(ValueError, match="host_overhead"):
        collective(server, "all_reduce", KIB4, host_overhead=bad)


def test_an_overhead_in_microseconds_given_as_seconds_is_refused(server):
    # 25 (microseconds meant) would add 25 s to every call; 10 ms is the most a host's call is let take
    with pytest.raises(ValueError, match=r"host_overhead is seconds .* got 25, above 0.01 s"):
        collective(server, "all_reduce", KIB4, host_overhead=25)
    assert collective(server, "all_reduce", KIB4, host_overhead=0.01).time > 0.01


def test_a_training_step_refuses_a_host_overhead(server):
    from flowsolver import training_step
    with pytest.raises(ValueError, match="does not take CollectiveOptions.host_overhead"):
        training_step(server, "llama-3-8b", collective_options=CollectiveOptions(host_overhead=1e-6))


def test_the_hosts_time_is_latency_no_link_carries_it(server):
    # the steps' transfers are the link solve's with or without the host's floor and overhead, and
    # the steps add up to the time less the collective's base latency (NCCL's ring LL 6.6 us,
    # Simple 8.4 us: tuning.cc baseLat) for a tuned and an untuned algorithm alike
    from flowsolver.collectives._nccl_timing import transfer_of

    def stepped(r):
        return sum(s.count * s.transfer + (s.count if s.latency_count is None else s.latency_count) * s.latency
                   for s in r.steps)
    for algorithm, kw, base in (("ring", dict(protocol="LL"), 6.6e-6), ("halving_doubling", {}, 8.4e-6)):
        alone = collective(server, "all_reduce", KIB4, algorithm=algorithm, **kw)
        for host in (dict(gpus_per_thread=8), dict(host_overhead=25e-6)):
            r = collective(server, "all_reduce", KIB4, algorithm=algorithm, **host, **kw)
            assert transfer_of(r.steps) == pytest.approx(transfer_of(alone.steps), rel=1e-12)
            assert stepped(r) == pytest.approx(r.time - base, rel=1e-9)


def test_more_gpus_a_thread_than_the_call_has_is_refused(server):
    with pytest.raises(ValueError, match=r"gpus_per_thread must divide the GPUs the call has on each server \(2 of "
                                         r"its 2"):
        collective(server, "all_reduce", KIB4, ranks=[0, 1], gpus_per_thread=8)
    # sendrecv_perf -g 8: one thread drives 8 GPUs, each sending to the next: a pair is one call
    pair = collective(server, "send_recv", KIB4, ranks=[0, 1], gpus_per_thread=8)
    assert pair.time == pytest.approx(8 * 4.2e-6, rel=1e-12)


def test_gpus_per_thread_is_what_nccl_tests_can_run():
    """adv26 F3: nccl-tests' -g N is one thread's GPUs of a process on one server, every process
    as many: 16 on two 8-GPU servers (67.2 us against 27.7 us at 1 KiB) and 3 of 16 ranks were
    taken. N must divide the call's GPUs on each server."""
    g = tp.rail_optimized(2)
    for n in (16, 3):
        with pytest.raises(ValueError, match=rf"divide the GPUs the call has on each server \(8 of its 16.*got {n}$"):
            collective(g, "all_reduce", 1024, gpus_per_thread=n)
    with pytest.raises(ValueError, match=r"\(2, 4 of its 6"):        # 2 GPUs on one server, 4 on the other
        collective(g, "all_reduce", 1024, ranks=[0, 1, 8, 9, 10, 11], gpus_per_thread=4)
    for n in (2, 4, 8):
        assert collective(g, "all_reduce", 1024, gpus_per_thread=n).time > 0


def test_a_numpy_overhead_gives_plain_floats(server):
    assert type(collective(server, "all_reduce", 1 << 20, host_overhead=np.float32(1e-5)).time) is float


def test_replay_refuses_the_hosts_options(server):
    from flowsolver import Parallelism, Schedule, replay, training_step, workload_from_step
    step = training_step(server, "llama-3-8b", Parallelism(tp=8), Schedule(2))
    with pytest.raises(ValueError, match="does not take CollectiveOptions.gpus_per_thread"):
        replay(server, workload_from_step(step), options=CollectiveOptions(gpus_per_thread=8))
    with pytest.raises(ValueError, match="replay does not take host_overhead"):
        replay(server, workload_from_step(step), host_overhead=25e-6)


def _graph_log(server, graph):
    """An all-reduce log of ``-g 8`` on one server (``graph: graph``, nccl-tests ``-G``; header as
    src/util.cu prints it) whose rows are the GPUs' own ring LL time, no host floor."""
    head = ("# nThread 1 nGpus 8 minBytes 4096 maxBytes 16384 step: 2(factor) warmup iters: 5 iters: 20 "
            f"agg iters: 1 validation: 1 graph: {graph} unalign: 0\n#\n# Using devices\n")
    head += "".join(f"#  Rank {r:2d} Group  0 Pid   4242 on      hostA device {r:2d} [0000:{r:02x}:00] NVIDIA H100 80GB "
                    "HBM3\n" for r in range(8))
    head += "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    rows = ""
    for size in (KIB4, 2 * KIB4, 4 * KIB4):
        t = collective(server, "all_reduce", size, **RING_LL).time * 1e6
        rows += f"{size:12d} {size // 4:12d}  float  sum  -1  {t:7.2f}  {size / t / 1e3:6.2f}  " \
                f"{size / t / 1e3 * 1.75:6.2f}  0\n"
    return head + rows


def test_a_cuda_graph_log_has_no_host_floor(server):
    # nccl-tests -G (src/common.cu BenchTime): the calls are captured into a graph before the timer
    # starts and only cudaGraphLaunch is timed: no 8 x 4.2 us floor under a -g 8 run's rows
    from flowsolver import calibrate, nccl_tests
    from flowsolver.collectives import log_gpus_per_thread

    df = nccl_tests.read(_graph_log(server, graph=1), op="all_reduce")
    assert df.attrs["graph"] == 1 and df.attrs["gpus_per_thread"] == 8 and log_gpus_per_thread(df.attrs) == 1
    cal = calibrate(server, [df], algorithm="ring", protocol="LL")
    assert cal.residuals["error"].abs().max() < 0.02          # the model's own times, fitted back
    # the same log without -G: one thread's 8 calls (33.6 us) bound the 4-16 KiB rows (16-19 us)
    plain = nccl_tests.read(_graph_log(server, graph=0), op="all_reduce")
    assert plain.attrs["graph"] == 0 and log_gpus_per_thread(plain.attrs) == 8
    assert calibrate(server, [plain], algorithm="ring", protocol="LL").residuals["error"].max() > 0.5
