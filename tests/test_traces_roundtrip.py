"""The whole training model as a trace: training_step -> Chakra files -> replay reproduces
the step time (the closed form of flowsolver.training.compose, an independent model of the
same schedule) for the default TP overlap, pipelines (1F1B, interleaved, uneven stages) and
context parallelism; the interleaved DAG's structure against Megatron's schedule."""

import re

import pytest

import topologies as tp
from flowsolver import collective, training_step
from flowsolver.traces import read_chakra, replay, workload_from_step, write_chakra
from flowsolver.training import ModelSpec

#: replay vs training_step: the DAG runs the schedule event by event where the closed form
#: times every stage at the slowest one's pace, every send at the slowest pair's, and shares
#: no link between parallelisms (README, "Workloads from traces"); the cases here stay within 1 %
TOLERANCE = 0.01

# small decoder shapes (Llama-3-8B's layer, few layers) so that a trace has few nodes;
# vocabulary 256: the output projection negligible, stages of equal layers equal in time
TINY = ModelSpec("tiny-8", 8, 4096, 14336, 32, 8, 256)
SIXTEEN = ModelSpec("tiny-16", 16, 4096, 14336, 32, 8, 256)
# vocabulary 64,171: the output projection costs one layer (6 V h = one layer's training
# FLOPs with selective recompute), as Megatron's uneven split assumes; 30 = 4 x 8 - 2 layers
UNEVEN = ModelSpec("uneven-30", 30, 4096, 14336, 32, 8, 64171)
UNEVEN_VP = ModelSpec("uneven-38", 38, 4096, 14336, 32, 8, 64171)    # 38 = 4 x 2 x 5 - 2


def _hosts(n):
    """``n`` single-GPU servers on one rail: every pipeline transfer crosses the network alone."""
    return tp.rail_optimized(n, server="host")


CASES = {
    # training_step's defaults (TP overlap 7/8, DP overlap 1, ZeRO 1, sequence parallel)
    "default": (lambda: tp.rail_optimized(2), dict(model="llama-3-8b", tp=8, global_batch=4)),
    "cp2": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, cp=2, global_batch=8)),
    "pp4": (lambda: tp.rail_optimized(4), dict(model=TINY, tp=8, pp=4, global_batch=16)),
    "pp4-vp2": (lambda: _hosts(4), dict(model=SIXTEEN, pp=4, vp=2, global_batch=16)),
    "uneven": (lambda: _hosts(4), dict(model=UNEVEN, pp=4, global_batch=16)),
    "uneven-vp2": (lambda: _hosts(4), dict(model=UNEVEN_VP, pp=4, vp=2, global_batch=16)),
    "fsdp": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=3, dp_overlap=0.0)),
    "zero0": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=0, tp_overlap=0.0)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_step_to_chakra_to_replay_reproduces_the_step_time(tmp_path, case):
    pytest.importorskip("google.protobuf")
    graph, kw = CASES[case]
    g = graph()
    step = training_step(g, **kw)
    write_chakra(workload_from_step(step), tmp_path, compress=True)
    res = replay(g, read_chakra(tmp_path))
    assert res.iteration_time == pytest.approx(step.step_time, rel=TOLERANCE)


def test_the_tp_overlap_hides_what_compose_hides():
    # one server, TP only: nothing shares a link, no pipeline, no DP; each TP call runs beside
    # the last tp_overlap x its time of compute, so the replay takes the composed step exactly
    g = tp.rail_optimized(1)
    for overlap in (None, 0.5, 0.0):
        step = training_step(g, model=TINY, tp=8, global_batch=2, tp_overlap=overlap)
        tp_phase = step.phases["tp"]
        assert tp_phase.exposed == pytest.approx((1 - step.tp_overlap) * tp_phase.total, rel=1e-12)
        res = replay(g, workload_from_step(step))
        assert res.iteration_time == pytest.approx(step.step_time, rel=1e-9)
        # the critical path runs through every TP call whole and skips the compute beside it
        assert res.exposed_communication == pytest.approx(tp_phase.total, rel=1e-9)
        assert res.path_compute == pytest.approx(step.compute_time - step.tp_overlap * tp_phase.total, rel=1e-9)


def test_interleaving_exposes_every_virtual_stage_boundary_of_the_fill_and_drain():
    # the first microbatch crosses all pp vp - 1 virtual-stage boundaries (the wrap included)
    # before the first backward, the last backward as many: 2 (pp vp - 1) sends on the
    # critical path where the closed form counts 2 (pp - 1)
    g = _hosts(4)
    step = training_step(g, **CASES["pp4-vp2"][1])
    pp, vp, send = 4, 2, step.phases["pp"].per_call
    extra = (2 * (pp * vp - 1) - 2 * (pp - 1)) * send
    res = replay(g, workload_from_step(step))
    assert res.iteration_time - step.step_time == pytest.approx(extra, rel=0.02)


def _pass_of(name):
    found = re.match(r"([FB])(\d+)\.c(\d+)\.L(\d+)\.", name)
    return None if found is None else (found[1], int(found[2]), int(found[3]), int(found[4]))


def test_an_interleaved_trace_has_megatron_s_passes_and_transfers():
    pp, vp, m = 4, 2, 4
    g = _hosts(pp)
    step = training_step(g, model=SIXTEEN, pp=pp, vp=vp, global_batch=m)
    w = workload_from_step(step)
    layers_per_chunk = 16 // (pp * vp)
    seen_layers = {}
    for q, trace in enumerate(w.ranks):          # dp = tp = cp = 1: rank q is stage q
        compute = [p for n in trace.nodes if n.kind == "compute" and (p := _pass_of(n.name))]
        passes = list(dict.fromkeys(p[:3] for p in compute))            # in node order
        for d in "FB":
            mine = [p for p in passes if p[0] == d]
            assert len(mine) == vp * m and {(i, c) for _, i, c in mine} == {(i, c) for i in range(m)
                                                                         for c in range(vp)}
        # two compute nodes (attention, MLP) per layer and pass, no TP: nothing else
        assert len(compute) == 2 * 2 * vp * m * layers_per_chunk
        # Megatron's warm-up, 2 (pp - 1 - q) + (vp - 1) pp forwards, then the steady state's
        # first forward, before the first backward
        first_b = next(k for k, p in enumerate(passes) if p[0] == "B")
        assert first_b == min(2 * (pp - 1 - q) + (vp - 1) * pp + 1, m * vp)
        for d, i, c, layer in compute:
            if (d, i) == ("F", 0):
                seen_layers.setdefault(layer, set()).add(q)
        # a chunk's input comes from the stage before, chunk c > 0 of stage 0 from the last stage
        sends = [n for n in trace.nodes if n.kind == "send"]
        recvs = [n for n in trace.nodes if n.kind == "recv"]
        forward_out = vp * m if q < pp - 1 else (vp - 1) * m
        backward_out = vp * m if q > 0 else (vp - 1) * m
        assert len(sends) == forward_out + backward_out
        assert len(recvs) == (vp * m if q > 0 else (vp - 1) * m) + (vp * m if q < pp - 1 else (vp - 1) * m)
        assert {n.peer for n in sends} == {(q + 1) % pp, (q - 1) % pp}
    # every layer computed on exactly one stage: layer l in virtual stage l // 2, on stage (l // 2) mod pp
    assert {layer: stages for layer, stages in seen_layers.items()} == {
        layer: {(layer // layers_per_chunk) % pp} for layer in range(16)}
    p2p = [c for c in w.comms if c.op == "send_recv"]
    assert len(p2p) == 2 * m * (pp * vp - 1)                # every virtual-stage boundary, both ways


def test_uneven_stages_hold_megatron_s_layer_counts():
    g = _hosts(4)
    step = training_step(g, model=UNEVEN, pp=4, global_batch=4)
    assert step.stage_layers == (7, 8, 8, 7)
    w = workload_from_step(step)
    for q, trace in enumerate(w.ranks):
        layers = {p[3] for n in trace.nodes if n.kind == "compute" and (p := _pass_of(n.name))}
        start = sum(step.stage_layers[:q])
        assert layers == set(range(start, start + step.stage_layers[q]))
        outputs = [n for n in trace.nodes if n.name.endswith(".output")]
        assert len(outputs) == (2 * 4 if q == 3 else 0)       # the loss on the last stage, F and B
    # 1F1B: each of the 3 stage boundaries crossed once per microbatch each way
    assert len([c for c in w.comms if c.op == "send_recv"]) == 2 * 4 * 3


def test_what_the_writer_cannot_express_is_refused():
    g = _hosts(4)
    with pytest.raises(ValueError, match="global_batch"):
        workload_from_step(training_step(g, model=SIXTEEN, pp=4, vp=2, global_batch=6))
    g8 = _hosts(8)
    with pytest.raises(ValueError, match="zero=3"):
        workload_from_step(training_step(g8, model=SIXTEEN, pp=4, vp=2, global_batch=8, zero=3))


def test_tp_overlap_beyond_the_compute_is_capped_at_the_compute():
    # a narrow model on PCIe: each TP call takes longer than the compute of its part, so at
    # most the part's compute hides it and every part takes its TP call's time; the closed
    # form hides (tp - 1) / tp of the calls whatever the compute (it is the shorter)
    g = tp.rail_optimized(1, server="pcie_8gpu")
    narrow = ModelSpec("narrow", 4, 1024, 4096, 8, 8, 256, seq_len=2048)
    step = training_step(g, model=narrow, tp=8, global_batch=2)
    m, layers, size = step.microbatches, 4, step.profile.comms["tp"].bytes
    # reduce-scatter + all-gather after each part, each alone (as the replay prices them)
    call = collective(g, "reduce_scatter", size).time + collective(g, "all_gather", size).time
    gpu = tp.get_gpu("h100_pcie")
    output = 2048 * 6 * 256 * 1024 / (8 * step.compute_efficiency * gpu.peak_bf16_flops)
    per_part = {d: (step.compute_time / m - output) * share / (2 * layers) for d, share in (("F", 1 / 3), ("B", 2 / 3))}
    assert all(step.tp_overlap * call > c for c in per_part.values())
    expected = m * (output + sum(2 * layers * max(c, call) for c in per_part.values()))
    res = replay(g, workload_from_step(step))
    assert res.iteration_time == pytest.approx(expected, rel=1e-9)
    assert res.iteration_time > 2 * step.step_time
