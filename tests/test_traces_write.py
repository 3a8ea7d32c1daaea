"""Our writer: a training step as a Chakra trace, read back node by node and replayed to
the step's own time; the file format checked against the independent wire encoder."""

import pytest

pytest.importorskip("google.protobuf")

import topologies as tp  # noqa: E402
from flowsolver import training_step  # noqa: E402
from flowsolver.traces import (RankTrace, TraceNode, build_workload, read_chakra, replay,  # noqa: E402
                               workload_from_step, write_chakra)

from . import chakra_wire as cw  # noqa: E402

#: Chakra durations are integer microseconds; the writer rounds each rank's running total,
#: so a rank's chain of compute is off by at most 0.5 us, and the replay's float arithmetic
#: adds ~1e-9 relative: the round trip must hold to 1 us + 1e-9 x the step time
ROUNDING = 1e-6


@pytest.mark.parametrize("kw", [dict(tp=8, global_batch=4, dp_overlap=0.0, zero=1),
                                dict(tp=8, global_batch=4, dp_overlap=1.0, zero=0),
                                dict(tp=1, global_batch=16, dp_overlap=1.0, zero=1),
                                dict(tp=8, global_batch=4, dp_overlap=0.0, zero=3)],
                         ids=["tp8-zero1-no-overlap", "tp8-zero0-overlap", "dp16-hidden", "tp8-fsdp"])
def test_step_to_trace_to_replay_reproduces_the_step_time(tmp_path, kw):
    g = tp.rail_optimized(2)
    # the DAG puts every TP call on the critical path: the step with no TP overlap
    step = training_step(g, model="llama-3-8b", tp_overlap=0.0, **kw)
    write_chakra(workload_from_step(step), tmp_path, compress=True)
    res = replay(g, read_chakra(tmp_path))
    # with its window long enough, the step still exposes one gradient bucket of 32 (one per
    # layer, and one of the parameter all-gather), the DAG none
    dp, comm = step.phases["dp"], step.profile.comms["dp"]
    bucket = (comm.per_call + comm.gather) / 32 if kw["dp_overlap"] > 0 else 0.0
    assert dp.exposed == pytest.approx(bucket if bucket else dp.exposed, rel=1e-12)
    assert abs(res.iteration_time - (step.step_time - bucket)) <= ROUNDING + 1e-9 * step.step_time
    exposed = sum(p.exposed for p in step.phases.values()) - bucket
    assert abs(res.exposed_communication - exposed) <= ROUNDING + 1e-9 * step.step_time


def test_a_pipeline_replays_its_1f1b_schedule_with_every_stage_transfer():
    g = tp.rail_optimized(1)
    step = training_step(g, model="llama-3-8b", tp=4, pp=2, global_batch=8)
    w = workload_from_step(step)
    sends = [c for c in w.comms if c.op == "send_recv"]
    m, layers = step.microbatches, 32 // 2
    # dp = 1: m = 8 microbatches, forward and backward across the one boundary, for each of the 4 TP lanes
    assert m == 8 and len(sends) == m * 2 * 4 and {c.bytes for c in sends} == {step.phases["pp"].bytes}
    res = replay(g, w)
    # 1F1B's makespan: (m + pp - 1) microbatch times (forward and backward, each layer's compute
    # and its TP collectives, sequence parallel: 2 reduce-scatters + 2 all-gathers forward, 2 +
    # 4 backward) plus a forward and a backward transfer per boundary; the slower (last) stage's compute
    rs, ag = step.profile.comms["tp"].per_call, step.profile.comms["tp"].gather
    p2p, t_mb = step.phases["pp"].per_call, step.compute_time / m
    one_f_one_b = (m + 1) * (t_mb + layers * (4 * rs + 6 * ag)) + 2 * p2p
    # the stage transfers share NVLink ports with the TP collectives: they can only slow down
    assert one_f_one_b * (1 - 1e-9) <= res.iteration_time <= one_f_one_b * 1.01
    assert res.iteration_time > step.step_time          # the step hides (tp - 1) / tp of the TP calls


def test_the_written_files_are_the_schema_s_bytes(tmp_path):
    a = RankTrace(0, [TraceNode(5, "mm", "compute", duration=1.5e-3, flops=2e12),
                      TraceNode(9, "ar", "collective", deps=(5,), op="all_reduce", bytes=4096, group="1")])
    b = RankTrace(1, [TraceNode(0, "ar", "collective", op="all_reduce", bytes=4096, group="1")])
    write_chakra(build_workload([a, b], {"1": (0, 1)}), tmp_path)
    expected = cw.stream([
        cw.metadata("0.0.4"),
        cw.node(0, "mm", cw.COMP, duration_us=1500, attrs=[cw.attr("is_cpu_op", boolean=False),
                                                          cw.attr("num_ops", int64=2 * 10**12)]),
        cw.node(1, "ar", cw.COLL, data_deps=(0,), attrs=[cw.attr("is_cpu_op", boolean=False),
                                                          cw.attr("comm_type", int64=cw.ALL_REDUCE),
                                                          cw.attr("comm_size", int64=4096),
                                                          cw.attr("pg_name", string="1")])])
    assert (tmp_path / "trace.0.et").read_bytes() == expected
    assert (tmp_path / "comm_group.json").read_text() == '{"1": [0, 1]}'


def test_durations_round_without_drifting(tmp_path):
    nodes = [TraceNode(i, f"k{i}", "compute", deps=(i - 1,) if i else (), duration=0.4e-6) for i in range(1000)]
    write_chakra(build_workload([RankTrace(0, nodes)]), tmp_path)
    back = read_chakra(tmp_path).ranks[0].nodes
    assert sum(n.duration for n in back) == pytest.approx(400e-6, abs=0.5e-6)
