"""A mixture of experts with TP > 1: the MLP side's TP collectives are Megatron-Core's
MoEAlltoAllTokenDispatcher's (moe/token_dispatcher.py, NVIDIA/Megatron-LM d98e8a6): the routed
tokens all-gathered over the expert-TP group after the EP all-to-all (dispatch_postprocess) and
the experts' output reduce-scattered before the combine (combine_preprocess), backward their
transposes; each carries top_k x capacity_factor x the bytes of a dense layer's TP collective,
exposed (no userbuffers overlap: the expert linears run with explicit_expert_comm). The
attention side keeps Transformer Engine's five (SP: forward AG qkv, RS proj; backward AG proj,
AG qkv, RS qkv). adv19b F6: Mixtral 8x7B TP2 sends 67 MB there, not the 34 MB of a dense layer.

Every expected value is a hand count: bytes from the model's shape, calls per layer from the
op lists above, seconds from each collective timed alone on one TP pair (flowsolver.collective;
the TP pairs sit on separate NVLink ports, so all at once take the same)."""

import pytest

import topologies as tp
from flowsolver import ModelSpec, Parallelism, Schedule, collective, plan, training_step
from flowsolver.planning import layout_space
from flowsolver.traces import replay, workload_from_step

S, H, L = 4096, 4096, 32            # Mixtral 8x7B: seq_len, hidden, layers (top_k 2)


def _alone(g, size, ranks=(0, 1)):
    return {op: collective(g, op, size, ranks=list(ranks)).time for op in ("reduce_scatter", "all_gather")}


@pytest.fixture(scope="module")
def mixtral_tp2():
    g = tp.rail_optimized(2)
    return g, training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8), Schedule(global_batch=32))


def test_mixtral_tp2_the_dispatcher_moves_top_k_times_the_dense_bytes(mixtral_tp2):
    g, r = mixtral_tp2
    m = r.microbatches
    dense, routed = S * H * 2, 2 * S * H * 2           # bf16; top_k = 2 routed copies of each token
    assert r.profile.comms["tp"].bytes == dense == 33_554_432
    assert r.profile.comms["etp"].bytes == routed == 67_108_864
    etp = r.phases["etp"]
    assert etp.op == "reduce_scatter+all_gather" and etp.group_size == 2 and etp.groups == 8
    # forward AG + RS, backward RS + AG: 4 per MoE layer, none gathered again (the input is saved)
    assert etp.calls == 4 * L * m
    t = _alone(g, routed)
    assert etp.total == pytest.approx(2 * L * m * (t["reduce_scatter"] + t["all_gather"]), rel=1e-9)
    assert etp.exposed == pytest.approx(etp.total, rel=1e-12)        # nothing overlaps them
    # the attention side: 3 all-gathers and 2 reduce-scatters of the dense bytes per layer
    tp_phase, d = r.phases["tp"], _alone(g, dense)
    assert tp_phase.calls == 5 * L * m
    assert tp_phase.total == pytest.approx(L * m * (3 * d["all_gather"] + 2 * d["reduce_scatter"]), rel=1e-9)
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time, rel=1e-12)


def test_the_dispatcher_bytes_follow_the_capacity_factor():
    g = tp.rail_optimized(2)
    r = training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8, capacity_factor=1.5), Schedule(global_batch=32))
    assert r.profile.comms["etp"].bytes == 2 * 1.5 * S * H * 2
    assert r.profile.comms["ep"].bytes == 2 * 1.5 * S * H * 2 / 2     # each rank's s / tp tokens, routed


def test_full_recompute_runs_the_forward_all_gather_and_reduce_scatter_again(mixtral_tp2):
    g, r = mixtral_tp2
    full = r.recompose(recompute="full")
    m = full.microbatches
    assert full.phases["etp"].calls == (4 + 2) * L * m
    assert full.phases["ep"].calls == (4 + 2) * L * m
    assert full.phases["tp"].calls == (5 + 2) * L * m            # the attention's AG qkv and RS proj again


def test_a_dense_model_keeps_its_ten_tp_collectives():
    g = tp.rail_optimized(2)
    r = training_step(g, "llama-3-8b", Parallelism(tp=2), Schedule(global_batch=32))
    assert "etp" not in r.phases and "etp" not in r.profile.comms
    assert r.phases["tp"].calls == 10 * 32 * r.microbatches
    assert r.profile.comms["tp"].bytes == 8192 * 4096 * 2          # Llama 3 8B: s 8192, h 4096


TOY = ModelSpec("toy-moe", layers=4, hidden=1024, ffn=2048, heads=8, kv_heads=8, vocab=1024, seq_len=1024,
                experts=8, top_k=2)


@pytest.mark.parametrize("recompute, again", [("selective", 0), ("full", 4)])
def test_a_trace_carries_the_dispatcher_collectives(recompute, again):
    g = tp.rail_optimized(1)
    step = training_step(g, TOY, Parallelism(tp=2, ep=4),
                         Schedule(global_batch=8, dp_overlap=0.0, tp_overlap=0.0, recompute=recompute))
    w = workload_from_step(step)
    nodes = [n for n in w.ranks[0].nodes if n.kind == "collective" and ".etp." in n.name]
    routed = 2 * 1024 * 1024 * 2
    assert len(nodes) == step.microbatches * (4 * TOY.layers + 2 * again)
    assert {n.bytes for n in nodes} == {routed}
    assert sorted({n.op for n in nodes}) == ["all_gather", "reduce_scatter"]
    assert {w.groups[n.group] for n in nodes} == {(0, 1)}          # rank 0's TP pair
    assert replay(g, w).iteration_time == pytest.approx(step.step_time, rel=0.02)


@pytest.mark.slow          # ~10 s: 42 MoE layouts timed on 16 GPUs
def test_the_plan_bound_stays_below_the_exact_step_on_moe_layouts():
    g = tp.rail_optimized(2)
    grid = dict(tp=(1, 2, 8), cp=1, pp=(1, 2), vp=1, ep=(1, 2, 8), micro_batch=1, recompute=("selective", "full"),
                zero=1, sequence_parallel=True, orders=("tp-cp-dp-pp", "dp-tp-cp-pp"))   # TP inside / across servers
    space = layout_space(TOY, 16, 16, gpu_memory=80e9, **grid)
    p = plan(g, model=TOY, global_batch=16, top=len(space.feasible), **grid)
    assert len(p.timed) == len(space.feasible) and p.proven
    moe_tp = [r for r in p.timed if r.layout.tp > 1]
    assert moe_tp and all("etp" in r.result.phases for r in moe_tp)
    for r in p.timed:
        assert r.bound <= r.step_time
        assert r.exposed["tp"] == pytest.approx(r.result.breakdown.get("tp", 0.0)
                                                + r.result.breakdown.get("etp", 0.0), rel=1e-12)
