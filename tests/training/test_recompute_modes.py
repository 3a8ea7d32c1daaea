"""The partial recompute modes (MaxText's ``save_qkv_proj``, torchtitan's per-op ``selective_op``)
against values counted by hand from the two frameworks' policies: what each keeps per token,
which GEMM FLOPs and TP collectives each runs again, and what that costs a step on both compute
models. The policies (flowsolver/training/_recompute.py cites them): MaxText saves the Q, K, V
projections' outputs; torchtitan saves the attention kernel's output, the TP reduce-scatters'
outputs and the 1st, 3rd, 5th, 7th matmul of a block run ``wq wk wv wo w1 w3 w2``."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, memory_per_gpu, training_step
from flowsolver.traces import workload_from_step
from flowsolver.training import ModelSpec, get_model
from flowsolver.training._compose import layer_compute
from flowsolver.training._compute import stage_seconds
from flowsolver.training._kernel_costs import layer_kernel_costs
from flowsolver.training._memory import activation_bytes_per_layer
from flowsolver.training._recompute import layer_recompute

H100 = tp.get_gpu("h100_sxm")
L8B = get_model("llama-3-8b")            # h 4096, kv 8 of 32 heads (kv width 1024), ffn 14336, gated


def test_which_gemm_flops_each_mode_runs_again():
    h, kv, f = 4096, 1024, 14336
    op = layer_recompute(L8B, "selective_op")
    # wq wk wv | wo | w1 w3 | w2: every second matmul (wk, wo, w3) runs again
    assert op.gemms["qkv"] == pytest.approx(h * kv / (h * h + 2 * h * kv))
    assert (op.gemms["proj"], op.gemms["fc1"], op.gemms["fc2"]) == (1.0, 0.5, 0.0)
    assert not op.attention                           # the attention kernel's output is saved
    # MaxText: all but Q, K, V; FC2's output only feeds the residual add, so JAX's replay (which
    # runs what the backward's residuals need) never runs it again
    qkv = layer_recompute(L8B, "save_qkv_proj")
    assert qkv.gemms == dict(qkv=0.0, proj=1.0, fc1=1.0, fc2=0.0) and qkv.attention
    full = layer_recompute(L8B, "full")
    assert set(full.gemms.values()) == {1.0} and full.attention
    assert not layer_recompute(L8B, "selective").any and not layer_recompute(L8B, "none").any
    # a plain MLP (w1 w2): wq wk wv wo w1 w2, the 2nd and 4th (wk, wo) run again; the 6th, w2, is
    # not saved but the replay stops before it (nothing the backward needs comes after it)
    gpt = get_model("gpt-3-175b")
    plain = layer_recompute(gpt, "selective_op")
    assert (plain.gemms["fc1"], plain.gemms["fc2"], plain.gemms["proj"]) == (0.0, 0.0, 1.0)
    assert plain.gemms["qkv"] == pytest.approx(1 / 3)       # MHA: wk is a third of QKV


def test_what_each_mode_keeps_per_layer():
    h, kv, f, a, s, b = 4096, 1024, 14336, 32, 8192, 2
    act = dict(micro_batch=b, cp=1, sequence_parallel=True)
    # tp 1: input, Q, V, attention output (+ fp32 log-sum-exp per head), w1's and w2's outputs
    want = s * b * (2 * (h + h + kv + h + f + h) + 4 * a)
    assert activation_bytes_per_layer(L8B, tp=1, recompute="selective_op", **act) == want
    # tp 8 with sequence parallelism: the input and column-parallel outputs split, w2's local
    # (pre-reduction) output whole, plus the two reduce-scatters' split outputs
    t = 8
    want8 = s * b * (2 * (h + h + kv + h + f) / t + 4 * a / t + 2 * h + 2 * 2 * h / t)
    assert activation_bytes_per_layer(L8B, tp=t, recompute="selective_op", **act) == pytest.approx(want8)
    # MaxText: the input and Q, K, V
    assert activation_bytes_per_layer(L8B, tp=t, recompute="save_qkv_proj", **act) == pytest.approx(
        s * b * (2 * h / t + 2 * (h + 2 * kv) / t))
    # the order the definitions give: full < save_qkv_proj < selective_op < selective
    kept = [activation_bytes_per_layer(L8B, tp=1, recompute=r, **act)
            for r in ("full", "save_qkv_proj", "selective_op", "selective")]
    assert kept == sorted(kept) and len(set(kept)) == 4


def test_a_partial_mode_holds_its_kept_set_and_one_layers_working_set():
    kw = dict(tp=1, pp=1, dp=8, zero=3, micro_batch=2, microbatches=1, attention="fa2")
    act = dict(micro_batch=2, tp=1, cp=1, sequence_parallel=True)
    for mode in ("save_qkv_proj", "selective_op"):
        diff = memory_per_gpu(L8B, recompute=mode, **kw) - memory_per_gpu(L8B, recompute="full", **kw)
        per_layer = (activation_bytes_per_layer(L8B, recompute=mode, **act)
                     - activation_bytes_per_layer(L8B, recompute="full", **act))
        assert diff == pytest.approx(32 * per_layer, rel=1e-12)


def test_the_flat_model_charges_the_recomputed_share_of_the_forward_gemms():
    kw = dict(tokens=8192, shards=1, gpu=H100, precision="bf16", efficiency=0.5)
    h, kv, f, s = 4096, 1024, 14336, 8192
    params = dict(qkv=h * (h + 2 * kv), proj=h * h, fc1=2 * h * f, fc2=f * h)
    for mode in ("save_qkv_proj", "selective_op", "full"):
        share = layer_recompute(L8B, mode)
        again = sum(share.gemms[g] * n for g, n in params.items())
        # and the recomputed layer's attention forward (2 h s per token, causal) where the mode
        # runs it again (full, save_qkv_proj; fix19a: charged to the recomputed layer alone)
        attention = 2 * h * s if share.attention else 0
        extra = (stage_seconds(L8B, 1, False, recompute=mode, recomputed=1, **kw)
                 - stage_seconds(L8B, 1, False, recompute=mode, recomputed=0, **kw))
        assert extra == pytest.approx(8192 * (2 * again + attention) / (0.5 * 989e12), rel=1e-12)


def test_the_kernel_tables_charge_the_recomputed_kernels():
    g = tp.rail_optimized(1)
    for mode in ("save_qkv_proj", "selective_op", "full"):
        r = training_step(g, L8B, Parallelism(tp=8), Schedule(4, recompute=mode, attention="fa3"))
        s = r.schedule
        costs = layer_kernel_costs(L8B, micro_batch=1, tp=8, cp=1, ep=1, sequence_parallel=True, gpu=H100,
                                   precision="bf16", attention="fa3", tp_overlap=s.tp_overlap,
                                   tp_overlap_impl=s.tp_overlap_impl)
        parts = layer_compute(r.profile, s)
        share = layer_recompute(L8B, mode)
        redo = (sum(share.gemms[k] * t for k, t in costs["gemm_fwd"].items()) + costs["memory_fwd"]
                + (costs["attention_fwd"] if share.attention else 0.0))
        u = r.schedule.kernel_utilization
        assert parts["layer_recomputed"] - parts["layer"] == pytest.approx(redo / u, rel=1e-9)
        assert r.compute_time == pytest.approx(r.microbatches * (32 * parts["layer_recomputed"] + parts["output"]),
                                               rel=1e-9)


def test_each_mode_runs_its_own_tp_collectives_again():
    g = tp.rail_optimized(1)
    calls = {m: training_step(g, L8B, Parallelism(tp=8), Schedule(4, recompute=m)).phases["tp"].calls
             for m in ("selective", "selective_op", "save_qkv_proj", "full")}
    per_layer = {m: c / (32 * 4) for m, c in calls.items()}        # 32 layers, 4 microbatches
    # 4 forward + 6 backward (2 of them the QKV and FC1 inputs gathered again for the weight
    # gradients); again: none (op: the reduce-scatters' outputs saved, the gathers those of the
    # backward), proj's reduce-scatter (qkv: its output feeds the MLP's recomputed norm), all 4
    # (Megatron's full recompute re-gathers as well)
    assert per_layer == dict(selective=10, selective_op=10, save_qkv_proj=11, full=14)


def test_step_time_orders_as_the_modes_recompute_more():
    g = tp.rail_optimized(1)
    times = [training_step(g, L8B, Parallelism(tp=8), Schedule(8, recompute=m)).step_time
             for m in ("selective", "selective_op", "save_qkv_proj", "full")]
    assert times == sorted(times) and len(set(times)) == 4


def test_refusals_name_the_mode():
    with pytest.raises(ValueError, match=r"recompute_layers \(2\) .* needs recompute='full'"):
        memory_per_gpu(L8B, tp=8, pp=1, dp=1, recompute="selective_op", recompute_layers=2)
    with pytest.raises(ValueError, match=r"selective_op.*attention='unfused'"):
        training_step(tp.rail_optimized(1), L8B, Parallelism(tp=8), Schedule(8, recompute="selective_op",
                                                                             attention="unfused"))
    moe = ModelSpec("moe", 4, 1024, 2048, 8, 8, 256, experts=8, top_k=2)
    with pytest.raises(ValueError, match=r"selective_op.*dense models.*8 experts"):
        layer_recompute(moe, "selective_op")
    with pytest.raises(ValueError, match=r"recompute_layers .* needs recompute='full'"):
        training_step(tp.rail_optimized(1), L8B, Parallelism(tp=8),
                      Schedule(8, recompute="save_qkv_proj", recompute_layers=2))
    r = training_step(tp.rail_optimized(1), L8B, Parallelism(tp=8), Schedule(4, recompute="selective_op"))
    with pytest.raises(ValueError, match=r"recompute='selective_op': a trace lays out"):
        workload_from_step(r)


def test_a_recomputed_moe_layer_dispatches_and_combines_again():
    # 4 all-to-alls a layer (dispatch and combine, forward and backward); a layer whose MLP runs
    # again in its backward (full; MaxText's save_qkv_proj) adds its forward's two
    moe = ModelSpec("moe", 4, 1024, 2048, 8, 8, 256, experts=8, top_k=2)
    g = tp.rail_optimized(2)
    calls = {m: training_step(g, moe, Parallelism(tp=1, dp=16, ep=8), Schedule(16, recompute=m)).phases["ep"]
             for m in ("selective", "full", "save_qkv_proj")}
    per = {m: c.calls / (4 * 1) for m, c in calls.items()}          # 4 layers, 1 microbatch
    assert per == dict(selective=4, full=6, save_qkv_proj=6)
    for m, c in calls.items():
        assert c.exposed == pytest.approx(c.calls * c.per_call, rel=1e-12)


def test_selective_runs_the_core_attention_forward_again_on_both_compute_models():
    # Megatron-Core's recompute_granularity="selective" with its default recompute_modules
    # ["core_attn"] wraps the core attention in tensor_parallel.checkpoint
    # (megatron/core/transformer/attention.py, _checkpointed_attention_forward, NVIDIA/Megatron-LM
    # d98e8a64): its forward runs again in every layer's backward, a flash kernel included. By
    # hand: one causal attention forward, 2 s^2 h / tp FLOPs a layer and microbatch, 32 layers x
    # 8 microbatches (TP 8, batch 8, no pipeline, no DP: nothing else moves with it)
    from flowsolver.training._kernels import attention_rates
    assert layer_recompute(L8B, "selective").core_attention and not layer_recompute(L8B, "none").core_attention
    g, s, h = tp.rail_optimized(1), 8192, 4096
    flops = 2 * s * s * h / 8
    kernels = {m: training_step(g, L8B, Parallelism(tp=8), Schedule(8, recompute=m, attention="fa3"))
               for m in ("none", "selective")}
    r_fwd, _ = attention_rates(H100, "fa3", head_dim=128, tokens=s)
    u = kernels["none"].schedule.kernel_utilization
    extra = kernels["selective"].step_time - kernels["none"].step_time
    assert extra == pytest.approx(8 * 32 * flops / r_fwd / u, rel=1e-9)
    assert extra == pytest.approx(0.037, abs=0.001)              # on 1.105 s
    assert kernels["selective"].memory_per_gpu == kernels["none"].memory_per_gpu    # flash keeps no scores
    flat = {m: training_step(g, L8B, Parallelism(tp=8), Schedule(8, recompute=m, compute_efficiency=0.46))
            for m in ("none", "selective")}
    assert flat["selective"].step_time - flat["none"].step_time == pytest.approx(
        8 * 32 * flops / (0.62 * 989e12), rel=1e-9)               # attention at 0.62 of the bf16 peak


def test_both_compute_models_run_the_attention_forward_again_for_the_same_modes():
    # Megatron: selective checkpoints the core attention, full the whole layer; MaxText's
    # save_qkv_proj recomputes what follows Q, K, V; torchtitan's per-op policy saves the
    # attention kernel's output (flowsolver/training/_recompute.py cites each)
    want = dict(none=False, selective=True, full=True, save_qkv_proj=True, selective_op=False)
    g = tp.rail_optimized(1)
    for flat in (False, True):
        parts = {}
        for mode in want:
            r = training_step(g, L8B, Parallelism(tp=8), Schedule(4, recompute=mode, attention="fa3",
                                                                  compute_efficiency=0.46 if flat else None))
            parts[mode] = layer_compute(r.profile, r.schedule)
        base = parts["none"]["attention"]
        again = {m: p["attention"] / base - 1 for m, p in parts.items()}
        one = base / 3 if flat else parts["none"]["attention_fwd"]          # one attention forward
        assert {m: a * base / one == pytest.approx(1.0 if want[m] else 0.0, abs=1e-9) for m, a in again.items()} \
            == dict.fromkeys(want, True)


def test_the_modules_that_name_a_default_recompute_name_schedules():
    # adv17b finding 6: _compute's docstring called "selective" the default where Schedule's
    # default (and Megatron-Core's, recompute_granularity None) is "none"
    import re

    from flowsolver.training import _compute, _recompute

    default = Schedule().recompute
    assert default == "none"
    for module in (_compute, _recompute):
        named = re.findall(r'``"(\w+)"``\s*\(the default', module.__doc__)
        assert named == [default], module.__name__
