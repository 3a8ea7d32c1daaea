"""The whole training model as a trace: training_step -> Chakra files -> replay reproduces
the step time (the closed form of flowsolver.training.compose, an independent model of the
same schedule) for the default TP overlap, pipelines (1F1B, interleaved, uneven stages) and
context parallelism; the ten TP calls per layer each hiding tp_overlap x min(its time, its
GEMM's), repeated for recomputed layers; the interleaved DAG's structure against Megatron's
schedule."""

import functools
import re

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver import training_step as _training_step
from flowsolver.traces import read_chakra, replay, workload_from_step, write_chakra
from flowsolver.training import ModelSpec

#: replay vs training_step: the DAG runs the schedule event by event where the closed form
#: times every stage at the slowest one's pace, every send at the slowest pair's, and shares
#: no link between parallelisms (docs/guide/traces.md); the cases here stay within 1 %
TOLERANCE = 0.01

# small decoder shapes (Llama-3-8B's layer, few layers) so that a trace has few nodes;
# vocabulary 256: the output projection negligible, stages of equal layers equal in time
TINY = ModelSpec("tiny-8", 8, 4096, 14336, 32, 8, 256)
SIXTEEN = ModelSpec("tiny-16", 16, 4096, 14336, 32, 8, 256)
# vocabulary 61,352: the output projection costs one layer, as Megatron's uneven split
# assumes: 6 V h at the GEMMs' efficiency = one layer's GEMMs (6 x 212,992 x ... FLOPs per
# token, 1.3086e9) plus its attention with selective recompute (4/3 x 2.0133e8) at
# attention_efficiency 0.62 instead of compute_efficiency 0.46: V = (1.3086e9 + 2.6844e8 x
# 0.46 / 0.62) / (6 x 4096). 30 = 4 x 8 - 2 layers. (With a heavier output projection the
# last stage is the slowest and the closed form charges the bubble at its pace: README,
# "Workloads from traces".)
UNEVEN = ModelSpec("uneven-30", 30, 4096, 14336, 32, 8, 61352)
UNEVEN_VP = ModelSpec("uneven-38", 38, 4096, 14336, 32, 8, 61352)    # 38 = 4 x 2 x 5 - 2
MOE = ModelSpec("moe-4", 4, 4096, 14336, 32, 8, 256, seq_len=4096, experts=8, top_k=2)   # 8 experts, top-2

# Transformer Engine's overlapped TP ops of one layer with sequence parallelism and the GEMM
# each runs beside (Megatron-Bridge's TransformerLayerTPOverlapCfg): forward, then backward
SP_FORWARD = [("all_gather", "qkv"), ("reduce_scatter", "proj"), ("all_gather", "fc1"), ("reduce_scatter", "fc2")]
SP_BACKWARD = [("all_gather", "fc2"), ("all_gather", "fc1"), ("reduce_scatter", "fc1"), ("all_gather", "proj"),
               ("all_gather", "qkv"), ("reduce_scatter", "qkv")]


def _gemms(model, *, tokens, shards, rate):
    """Seconds of each forward weight GEMM of one layer: 2 x tokens x its parameters / shards / rate."""
    h, head = model.hidden, model.hidden // model.heads
    params = dict(qkv=h * (h + 2 * model.kv_heads * head), proj=h * h, fc1=h * 2 * model.ffn, fc2=model.ffn * h)
    return {k: 2.0 * tokens * n / (shards * rate) for k, n in params.items()}


def _hosts(n):
    """``n`` single-GPU servers on one rail: every pipeline transfer crosses the network alone."""
    return tp.rail_optimized(n, server="host")


#: the flat compute model and selective recompute unless a case says otherwise: the shapes above
#: are chosen for their rates (UNEVEN's output projection costs one layer at 0.46 / 0.62 with
#: the attention forward run again); the "-kernels" cases and the CP test time the kernel tables
training_step = functools.partial(_training_step, compute_efficiency=0.46, recompute="selective")

CASES = {
    # training_step's defaults (TP overlap 7/8, DP overlap 1, ZeRO 1, sequence parallel)
    "default": (lambda: tp.rail_optimized(2), dict(model="llama-3-8b", tp=8, global_batch=4)),
    "cp2": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, cp=2, global_batch=8)),
    "pp4": (lambda: tp.rail_optimized(4), dict(model=TINY, tp=8, pp=4, global_batch=16)),
    "pp4-vp2": (lambda: _hosts(4), dict(model=SIXTEEN, pp=4, vp=2, global_batch=16)),
    "uneven": (lambda: _hosts(4), dict(model=UNEVEN, pp=4, global_batch=16)),
    "uneven-vp2": (lambda: _hosts(4), dict(model=UNEVEN_VP, pp=4, vp=2, global_batch=16)),
    "fsdp": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=3, dp_overlap=0.0)),
    "fsdp-pp2": (lambda: tp.rail_optimized(4), dict(model=TINY, tp=8, pp=2, global_batch=8, zero=3)),
    # single-GPU hosts: each layer's gather and reduce-scatter outlast its compute (exposed
    # per layer on every stage's fill, and on the first stage's last backward)
    "fsdp-pp2-hosts": (lambda: _hosts(8), dict(model=TINY, pp=2, global_batch=8, zero=3, seq_len=2048)),
    # the kernel tables (compute_efficiency=None): forward and backward as the tables split them
    "cp2-kernels": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, cp=2, global_batch=8,
                                                       compute_efficiency=None)),
    "fsdp-kernels": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=3, dp_overlap=0.5,
                                                        compute_efficiency=None)),
    # review21 F3: FSDP at a partial dp_overlap with its DP ring on the NVLinks TP uses (tp 2:
    # dp 8 over both servers' GPUs); compose exposes each gather's cost at dp_overlap 0.3 as at 1
    "fsdp-tp2-partial": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=2, global_batch=16, zero=3,
                                                            dp_overlap=0.3)),
    "zero2": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=2)),
    "ep2": (lambda: tp.rail_optimized(2), dict(model=MOE, tp=8, ep=2, global_batch=4)),
    # full recompute: each layer's MLP dispatches and combines again in its recomputed forward
    "ep2-full": (lambda: tp.rail_optimized(2), dict(model=MOE, tp=8, ep=2, global_batch=4, recompute="full")),
    "zero0": (lambda: tp.rail_optimized(2), dict(model=TINY, tp=8, global_batch=4, zero=0, tp_overlap=0.0)),
}


#: ep2: the replay runs the DP all-reduce beside the TP calls on the same NVLinks, which the
#: closed form does not share: +1.5 % (NCCL's chunk pipeline makes the TP calls longer than its
#: estimate, so they meet more of the DP traffic; +1.2 % before Simple filled at a whole chunk's
#: pace, 2026-12-05)
CASE_TOLERANCE = {"ep2": 0.02, "ep2-full": 0.02}
#: fsdp-tp2-partial: each layer's FSDP gather / reduce-scatter shares the NVLinks with the
#: layer's TP all-gathers and reduce-scatters in the replay (its forward MLP all-gather 0.38 ms
#: against 0.27 ms alone), which the closed form does not share: +1.2 % (+5.2 % while the trace
#: issued the FSDP calls in the layer's last dp_overlap share, beside every TP call of the layer)
CASE_TOLERANCE["fsdp-tp2-partial"] = 0.015


@pytest.mark.parametrize("case", list(CASES))
def test_step_to_chakra_to_replay_reproduces_the_step_time(tmp_path, case):
    pytest.importorskip("google.protobuf")
    graph, kw = CASES[case]
    g = graph()
    step = training_step(g, **kw)
    write_chakra(workload_from_step(step), tmp_path, compress=True)
    res = replay(g, read_chakra(tmp_path))
    assert res.iteration_time == pytest.approx(step.step_time, rel=CASE_TOLERANCE.get(case, TOLERANCE))


def _alone(g, step):
    """Seconds of a TP all-gather and reduce-scatter of the step's size, each alone on ``g``."""
    return {op: collective(g, op, step.profile.comms["tp"].bytes).time for op in ("all_gather", "reduce_scatter")}


def _tp_budget(g, step, model, recomputed=0, time=None):
    """(seconds of the TP calls, seconds hidden, call times, GEMM times) of one microbatch:
    every layer's ten calls, the forward four again for ``recomputed`` layers, each hiding
    tp_overlap x min(its time, its GEMM's time); the calls priced alone on ``g`` unless
    ``time`` is given."""
    f, time = step.tp_overlap, _alone(g, step) if time is None else time
    gpu = step.profile.gpu
    gemm = _gemms(model, tokens=model.seq_len, shards=8, rate=step.compute_efficiency * gpu.peak_bf16_flops)
    layer = SP_FORWARD + SP_BACKWARD
    calls = model.layers * layer + recomputed * SP_FORWARD
    return sum(time[op] for op, _ in calls), sum(f * min(time[op], gemm[k]) for op, k in calls), time, gemm


def test_the_tp_overlap_hides_what_compose_hides():
    # one server, TP only: nothing shares a link, no pipeline, no DP; each TP call runs beside
    # tp_overlap x min(its time, its GEMM's) of compute, so the replay takes the composed step exactly
    g = tp.rail_optimized(1)
    for overlap in (None, 0.5, 0.0):
        step = training_step(g, model=TINY, tp=8, global_batch=2, tp_overlap=overlap)
        m, tp_phase = step.microbatches, step.phases["tp"]
        total, hidden, *_ = _tp_budget(g, step, TINY)
        assert tp_phase.calls == m * 10 * TINY.layers
        assert tp_phase.total == pytest.approx(m * total, rel=1e-9)
        assert tp_phase.exposed == pytest.approx(m * (total - hidden), rel=1e-9)
        res = replay(g, workload_from_step(step))
        assert res.iteration_time == pytest.approx(step.step_time, rel=1e-9)
        # the critical path runs through every TP call whole; what the compute beside a call
        # hides is compute, the rest exposed communication: compose's split
        assert res.exposed_communication == pytest.approx(m * (total - hidden), rel=1e-9)
        assert res.path_compute == pytest.approx(step.compute_time, rel=1e-9)


@pytest.mark.parametrize("kw, recomputed", [(dict(recompute="full"), 8),
                                            (dict(recompute="full", recompute_layers=3), 3),
                                            (dict(attention_efficiency=0.3), 0)],
                         ids=["full", "block-3", "attention-0.3"])
def test_recomputed_layers_repeat_their_forward_tp_calls(kw, recomputed):
    g = tp.rail_optimized(1)
    step = training_step(g, model=TINY, tp=8, global_batch=2, **kw)
    m = step.microbatches
    total, hidden, *_ = _tp_budget(g, step, TINY, recomputed)
    w = workload_from_step(step)
    calls = [n for n in w.ranks[0].nodes if n.kind == "collective"]
    assert len(calls) == m * (10 * TINY.layers + 4 * recomputed)
    assert step.phases["tp"].exposed == pytest.approx(m * (total - hidden), rel=1e-9)
    res = replay(g, w)
    assert res.iteration_time == pytest.approx(step.step_time, rel=1e-9)
    # the compute the DAG runs is compose's (recompute and attention efficiency included)
    assert res.path_compute == pytest.approx(step.compute_time, rel=1e-9)
    assert res.exposed_communication == pytest.approx(m * (total - hidden), rel=1e-9)


def test_block_recompute_repeats_the_first_layers_of_every_model_chunk():
    # pp 2 x vp 2 over 16 layers: chunks of 4; recompute_layers=1 recomputes layer 0 of each
    # chunk, so each stage repeats the forward TP calls of 2 layers per microbatch
    g = tp.rail_optimized(2)
    step = training_step(g, model=SIXTEEN, tp=8, pp=2, vp=2, global_batch=4, recompute="full", recompute_layers=1)
    w = workload_from_step(step)
    m = step.microbatches
    for trace in (w.ranks[0], w.ranks[8]):
        tp_calls = [n for n in trace.nodes if n.kind == "collective" and ".tp" in n.name]
        again = {n.name.split(".")[2] for n in tp_calls if ".recompute." in n.name}
        assert len(tp_calls) == m * (10 * 8 + 4 * 2)
        assert len(again) == 2                                # one layer per model chunk
    res = replay(g, w)
    assert res.iteration_time == pytest.approx(step.step_time, rel=TOLERANCE)


def test_a_recomputed_layer_runs_its_forward_again_in_the_backward_not_in_the_forward():
    # full recompute of layer 0 only: its forward pass is a plain layer's third (f = layer / 3);
    # its backward holds the rest of its recomputed total (layer_recomputed - f)
    from flowsolver.training._compose import layer_compute

    step = training_step(tp.rail_optimized(2), model="llama-3-8b", tp=8, pp=2, global_batch=8, recompute="full",
                         recompute_layers=1)
    c = layer_compute(step.profile, step.schedule)
    nodes = workload_from_step(step).ranks[0].nodes

    def seconds(prefix):
        return sum(n.duration or 0.0 for n in nodes if n.kind == "compute" and n.name.startswith(prefix))

    forward = c["layer"] / 3
    assert seconds("F0.c0.L0.") == pytest.approx(forward, rel=1e-12)          # recomputed layer
    assert seconds("F0.c0.L1.") == pytest.approx(forward, rel=1e-12)          # plain layer
    assert seconds("B0.c0.L0.") == pytest.approx(c["layer_recomputed"] - forward, rel=1e-12)
    assert seconds("B0.c0.L1.") == pytest.approx(c["layer"] - forward, rel=1e-12)


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


def _ancestors(trace, node_id):
    """Names of every node ``node_id`` waits for, directly or not."""
    by_id = {n.id: n for n in trace.nodes}
    seen, todo = set(), list(by_id[node_id].deps)
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(by_id[d].deps)
    return {by_id[d].name for d in seen}


def test_fsdp_with_a_pipeline_gathers_in_the_first_forward_and_reduces_beside_the_last_backward():
    # ZeRO 3 with pp = 2 (parameters kept between microbatches): stage 1 (layers 4 ... 7)
    # gathers each layer's parameters in its first forward, the layer waiting for them; it
    # reduce-scatters each layer's gradients in its last backward, on their own stream: the
    # gradients it sends back to stage 0 do not wait for them, the end of the step does
    step = training_step(tp.rail_optimized(4), model=TINY, tp=8, pp=2, global_batch=8, zero=3, dp_overlap=0.0)
    w = workload_from_step(step)
    m = step.microbatches
    assert m == 4
    last = w.ranks[16]                                    # stage 1 (TP 8 x DP 2 below it)
    calls = [n for n in last.nodes if ".fsdp." in n.name and n.kind == "collective"]
    gathers = {n.name for n in calls if n.op == "all_gather"}
    reduces = {n.name for n in calls if n.op == "reduce_scatter"}
    assert gathers == {"F0.fsdp.root"} | {f"F0.c0.L{k}.fsdp.gather" for k in range(4, 8)}
    assert reduces == {f"B{m - 1}.fsdp.root"} | {f"B{m - 1}.c0.L{k}.fsdp.reduce" for k in range(4, 8)}
    for k in range(4, 8):                                 # each layer's forward waits for its gather
        first = next(n for n in last.nodes if n.name.startswith(f"F0.c0.L{k}.") and n.kind == "compute")
        assert f"F0.c0.L{k}.fsdp.gather" in _ancestors(last, first.id)
    send, = [n for n in last.nodes if n.name == f"B{m - 1}.send"]
    assert f"B{m - 1}.c0.L4.attn" in _ancestors(last, send.id) and not reduces & _ancestors(last, send.id)
    assert reduces <= _ancestors(last, last.nodes[-1].id)


def test_ring_attention_is_written_step_by_step():
    # cp 4: per layer and microbatch 3 forward steps (one KV chunk to the ring's next rank, one
    # from the previous) and 3 backward steps (the chunk and its gradient), each beside a
    # quarter of the attention; selective recompute (this file's default) runs the checkpointed
    # core attention's forward again in the backward, its 3 KV steps included
    g = tp.rail_optimized(4)
    step = training_step(g, model=TINY, tp=8, cp=4, global_batch=4, compute_efficiency=None)
    w = workload_from_step(step)
    rank = w.ranks[8]                                     # CP ring 0 -> 8 -> 16 -> 24 -> 0
    sends = [n for n in rank.nodes if n.kind == "send" and ".cp." in n.name]
    recvs = [n for n in rank.nodes if n.kind == "recv" and ".cp." in n.name]
    per_layer = 3 * 1 + 3 * 1 + 3 * 2
    assert len(sends) == len(recvs) == step.microbatches * TINY.layers * per_layer
    assert {n.peer for n in sends} == {16} and {n.peer for n in recvs} == {0}
    assert {n.bytes for n in sends} == {step.profile.comms["cp_step"].bytes}
    blocks = [n for n in rank.nodes if n.name.startswith("F0.c0.L0.attention.")]
    from flowsolver.training._compose import layer_compute
    fwd = layer_compute(step.profile, step.schedule)["attention_fwd"]
    assert [n.duration for n in blocks] == pytest.approx([fwd / 4] * 4, rel=1e-12)


def test_what_the_writer_cannot_express_is_refused():
    g = _hosts(4)
    with pytest.raises(ValueError, match="global_batch"):
        workload_from_step(training_step(g, model=SIXTEEN, pp=4, vp=2, global_batch=6))
    g8 = _hosts(8)
    with pytest.raises(ValueError, match="zero=3"):
        workload_from_step(training_step(g8, model=SIXTEEN, pp=4, vp=2, global_batch=8, zero=3))


def test_a_tp_call_longer_than_its_gemm_hides_only_tp_overlap_of_the_gemm():
    # a narrow model on PCIe: each TP call takes longer than the GEMM it runs beside, so each
    # hides tp_overlap x its GEMM's time (compose's cap), and the DAG's compute beside it is
    # exactly that: the replay takes the composed step
    g = tp.rail_optimized(1, server="pcie_8gpu")
    narrow = ModelSpec("narrow", 4, 1024, 4096, 8, 8, 256, seq_len=2048)
    step = training_step(g, model=narrow, tp=8, global_batch=2)
    m, f, ops = step.microbatches, step.tp_overlap, SP_FORWARD + SP_BACKWARD
    # compose prices each call with the profile's solve (NCCL's cost model on the flows), the
    # replay each call alone on the graph; on PCIe the two differ by ~9 %: both are above every GEMM
    comm = step.profile.comms["tp"]
    solved = dict(all_gather=comm.gather, reduce_scatter=comm.per_call)
    for time in (solved, _alone(g, step)):
        total, hidden, _, gemm = _tp_budget(g, step, narrow, time=time)
        assert all(time[op] > gemm[k] for op, k in ops)
        assert hidden == pytest.approx(f * narrow.layers * sum(gemm[k] for _, k in ops), rel=1e-12)
        if time is solved:
            assert step.step_time == pytest.approx(step.compute_time + m * (total - hidden), rel=1e-9)
    w = workload_from_step(step)
    beside = sorted(n.duration for n in w.ranks[0].nodes if n.name.endswith(".hidden"))
    assert beside == pytest.approx(sorted([f * gemm[k] for _, k in ops] * (m * narrow.layers)), rel=1e-12)
    res = replay(g, w)
    assert res.iteration_time == pytest.approx(step.compute_time + m * (total - hidden), rel=1e-9)


def test_the_docs_trace_block_runs_as_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("google.protobuf")
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "traces.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "read_chakra" in b]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(block, "docs trace block", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == next(line[2:] for line in block.splitlines() if line.startswith("# "))
    step, res = scope["step"], scope["res"]
    # the replay splits the path as the step: compute, then exposed communication (no pipeline bubble)
    assert res.iteration_time == pytest.approx(step.step_time, rel=TOLERANCE)
    assert res.exposed_communication == pytest.approx(step.step_time - step.compute_time, rel=TOLERANCE)
    assert len(list(tmp_path.glob("trace/trace.*.et"))) == 16 and (tmp_path / "timeline.json").exists()
    (src, dst, mean), = eval(out[1])
    assert (src, dst) == ("s0/gpu0", "s0/nvswitch") and 0 < mean < 1


def test_kernel_table_compute_carries_the_executed_flops():
    # compute_efficiency=None: each compute node carries the FLOPs it executes (its share of
    # its pass's), so one TP rank's nodes add up to microbatches x tokens x (the model FLOPs per
    # token + selective recompute's attention forward again, 2 h s a layer) / tp
    # (test_traces_flops.py checks every mode against a hand count)
    step = training_step(tp.rail_optimized(1), model=TINY, tp=8, global_batch=2, compute_efficiency=None)
    nodes = workload_from_step(step).ranks[0].nodes
    flops = sum(n.flops for n in nodes if n.kind == "compute")
    per_token = TINY.flops_per_token + TINY.layers * 2 * TINY.hidden * TINY.seq_len
    assert flops == pytest.approx(step.microbatches * TINY.seq_len * per_token / 8, rel=1e-9)
    assert sum(n.duration for n in nodes if n.kind == "compute") == pytest.approx(step.compute_time, rel=1e-9)


def test_zero2_trace_reduce_scatters_the_gradients_in_every_microbatch():
    # DeepSpeed ZeRO-2 (sharded gradients) reduce-scatters in every microbatch's backward, as
    # compose times it; ZeRO-1 (whole gradients) in the last one only; one parameter gather each
    def dp_calls(zero):
        step = training_step(tp.rail_optimized(2), model=TINY, tp=8, global_batch=4, zero=zero)
        calls = [n for n in workload_from_step(step).ranks[0].nodes if n.kind == "collective" and ".dp." in n.name]
        return step.microbatches, [n.op for n in calls]
    m, two = dp_calls(2)
    assert m == 2 and two.count("reduce_scatter") == m * 2 and two.count("all_gather") == 2   # 2 buckets each
    _, one = dp_calls(1)
    assert one.count("reduce_scatter") == 2 and one.count("all_gather") == 2


def test_fsdp_replay_moves_with_dp_overlap_only_where_the_step_does():
    """review21 F3: ``compose`` counts ``dp_overlap`` as a shorter window beside each layer
    (``fsdp_exposed``: ``max(g - dp_overlap x layer, cost)``); where every gather and
    reduce-scatter hides even in the shorter window, the step is the same at 0.3 as at 1 and
    so must the replayed trace be (it moved by 3.7 % while the trace issued FSDP's calls in the
    layer's last ``dp_overlap`` share, beside the layer's TP calls)."""
    steps = {ov: training_step(tp.rail_optimized(2), model=TINY, tp=2, global_batch=16, zero=3, dp_overlap=ov)
             for ov in (0.3, 1.0)}
    assert steps[0.3].step_time == pytest.approx(steps[1.0].step_time, rel=1e-12)
    lay = steps[1.0].profile.comms
    # every layer's gather (and, backward, gather + reduce-scatter) fits 0.3 of its layer's compute
    assert lay["dp_gather"].per_call + lay["dp_reduce"].per_call < 0.3 * steps[1.0].compute_time / (
        steps[1.0].microbatches * TINY.layers)
    replays = {ov: replay(tp.rail_optimized(2), workload_from_step(s)).iteration_time for ov, s in steps.items()}
    assert replays[0.3] == pytest.approx(replays[1.0], rel=1e-3)
