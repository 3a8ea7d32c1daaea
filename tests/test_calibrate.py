"""flowsolver.calibrate: known constants recovered, held-out sizes of a real log predicted,
logs that do not match the graph refused."""

from pathlib import Path

import pytest

pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import Calibration, calibrate, collective, nccl_tests  # noqa: E402

LOGS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nccl-tests"
HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"


def _log(rows, ranks):
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r // 8} device {r % 8} [0x0f] NVIDIA H100\n"
                      for r in range(ranks))
    return devices + HEADER + "".join(f"{int(s):12d} {int(s) // 4:12d} float sum -1 {t * 1e6:10.2f} 0 0 0\n"
                                      for s, t in rows)


def test_known_constants_are_recovered():
    # "measured" = the model (NCCL_ALGO=Ring, NCCL's protocol choice) with an NVLink
    # efficiency of 0.70 and NCCL's latencies x 1.3, on one node (NVLink is the only
    # technology the ring crosses: links in series cannot be told apart by one log)
    g = tp.rail_optimized(nodes=1)
    truth = Calibration(efficiency={"nvlink4": 0.70}, latency_scale=1.3, ranks=8, ops=("all_reduce",))
    sizes = [2**k for k in (12, 17, 22, 27, 32)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring", model=truth).time) for s in sizes], 8)
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring")
    assert cal.converged and cal.ranks == 8 and cal.ops == ("all_reduce",)
    assert cal.efficiency == {"nvlink4": pytest.approx(0.70, rel=0.03)}
    assert cal.latency_scale == pytest.approx(1.3, rel=0.05)
    assert cal.residuals["error"].abs().max() < 0.03 and len(cal.residuals) == len(sizes)


@pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/nccl-tests is absent")
def test_the_lower_half_of_a_real_log_predicts_its_upper_half():
    df = nccl_tests.read(LOGS / "nccl1047_1xH100_reducescatter_ring.txt")
    rows = df[df["placement"] == "out-of-place"].sort_values("size")
    half = len(rows) // 2
    low = rows.iloc[:half].copy()
    low.attrs.update(df.attrs)
    g = tp.rail_optimized(nodes=1)
    cal = calibrate(g, [low], algorithm="ring")          # the run forced NCCL_ALGO=Ring
    for size, time_us in zip(rows["size"].iloc[half:], rows["time"].iloc[half:]):
        model = collective(g, "reduce_scatter", float(size), model=cal).time * 1e6
        assert model == pytest.approx(time_us, rel=0.10), size


def test_logs_that_do_not_match_the_graph_are_refused():
    g = tp.rail_optimized(nodes=1)
    log = _log([(2**20, 30e-6), (2**24, 80e-6)], 16)
    with pytest.raises(ValueError, match="ran on 16 ranks, the graph .* has 8"):
        calibrate(g, [log], op="all_reduce")
    with pytest.raises(ValueError, match="does not say which collective"):
        calibrate(g, [_log([(2**20, 30e-6)], 8)])
    with pytest.raises(ValueError, match="tests all_reduce, not all_gather"):
        calibrate(g, ["# Collective test starting: all_reduce_perf\n" + _log([(2**20, 30e-6)], 8)], op="all_gather")
    with pytest.raises(ValueError, match="calibrated on 16 ranks; this graph has 8 GPUs"):
        collective(g, "all_reduce", 2**20, model=Calibration({}, 1.0, 16, ("all_reduce",)))


def test_collective_variants_take_the_model_too():
    from flowsolver import collective_variants

    g = tp.rail_optimized(nodes=1)
    cal = Calibration(efficiency={"nvlink4": 0.5}, latency_scale=2.0, ranks=8, ops=("all_reduce",))
    kw = dict(algorithm="ring", protocol="Simple")
    together, = collective_variants([g], "all_reduce", 2**26, model=cal, **kw)
    assert together.time == pytest.approx(collective(g, "all_reduce", 2**26, model=cal, **kw).time)
    # the same efficiency without the model: the latency scale 2 adds NCCL's ring Simple
    # latency once more, 56.0 us on 8 ranks of one node (REFERENCE's worked figure)
    bare = collective(g, "all_reduce", 2**26, efficiency={"nvlink4": 0.5}, **kw)
    assert together.time - bare.time == pytest.approx(56.0e-6, rel=1e-6)


def test_concurrent_and_training_steps_take_the_model_too():
    from flowsolver import concurrent, training_step

    g = tp.rail_optimized(nodes=2)
    cal = Calibration(efficiency={"nvlink4": 0.5}, latency_scale=2.0, ranks=8, ops=("all_reduce",))
    groups = [dict(op="all_reduce", size=2**26, ranks=range(8 * s, 8 * s + 8), algorithm="ring") for s in range(2)]
    kw = dict(protocol="Simple")
    lock = concurrent(g, groups, lockstep=True, alone=False, model=cal, **kw)
    # one server each: the groups never meet, so each takes its collective() time under the model,
    # which is the efficiency's time plus NCCL's ring Simple latency once more (56.0 us, REFERENCE)
    bare = collective(g, "all_reduce", 2**26, ranks=range(8), algorithm="ring", efficiency={"nvlink4": 0.5}, **kw)
    assert lock.makespan == pytest.approx(bare.time + 56.0e-6, rel=1e-6)
    step = dict(model="llama-3-8b", tp=8, dp=2, global_batch=16)
    slow = training_step(g, collective_options=dict(model=cal), **step)
    assert slow.phases["tp"].per_call > training_step(g, **step).phases["tp"].per_call
