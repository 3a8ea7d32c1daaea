"""Pipeline schedules, sequence / context / expert parallelism, precision, recompute and
placement against formulas written out here, and the bad inputs each one refuses."""

import functools

import pytest

import topologies as tp
from flowsolver import get_model
from flowsolver import training_step as _training_step
from flowsolver.study import cluster
from flowsolver.traces._schedule import pass_order
from flowsolver.training import ParallelLayout, memory_per_gpu, stage_layers
from flowsolver.training._compose import dp_overlap_costs, layer_compute
from flowsolver.training._pipeline import chunk_layers, peak_in_flight

ZERO = dict(step_latency=0.0, base_latency=0.0)
H100_BF16, H100_FP8 = 989e12, 1979e12          # H100 SXM datasheet, dense
# the formulas here are the flat compute model's (GEMMs at one fraction of the peak)
training_step = functools.partial(_training_step, compute_efficiency=0.46)


def test_uneven_stages_follow_megatrons_split_with_the_embedding_and_loss_as_layers():
    # 126 + 2 = 128 slots over 16 stages: 8 each, the end stages one transformer layer fewer
    assert stage_layers(126, 16) == (7,) + (8,) * 14 + (7,)
    assert stage_layers(126, 8, 8) == (15,) + (16,) * 6 + (15,)      # 128 / 64 = 2 per virtual stage
    assert stage_layers(80, 8, 5) == (10,) * 8                           # even: 2 layers per virtual stage
    # the Llama 3 paper's first stage starts with a model chunk holding the embedding alone, its
    # last stage ends with one holding the output and loss alone: for 126 layers on 16 stages
    # Megatron's split gives that with 8 chunks per stage only (the published rows' vp)
    assert [vp for vp in (1, 2, 4, 8) if chunk_layers(126, 16, vp)[0][0] == 0 == chunk_layers(126, 16, vp)[-1][-1]] \
        == [8]
    with pytest.raises(ValueError, match=r"pp x vp \(8 x 3 = 24 virtual stages\) must divide the model's 80 layers"):
        stage_layers(80, 8, 3)


def test_interleaving_divides_the_bubble_by_vp_and_sends_vp_times_as_often():
    g = cluster("ideal", nodes=2)
    kw = dict(model="llama-3-8b", tp=4, pp=4, global_batch=32, collective_options=ZERO)
    for vp in (1, 2, 4):
        r = training_step(g, vp=vp, **kw)
        m = r.microbatches
        slot = (r.compute_time + r.breakdown.get("tp", 0.0)) / m      # the slowest stage, per microbatch
        assert r.bubble_time == pytest.approx((4 - 1) / vp * slot, rel=1e-9)
        pp = r.phases["pp"]
        assert pp.calls == 2 * m * vp + 2 * 3
        exposed_sends = 2 * (m + 3) if vp == 1 else 2 * 3          # interleaved: only fill and drain
        assert pp.exposed == pytest.approx(exposed_sends * pp.per_call, rel=1e-12)
    # the model runs 126 layers on 16 stages
    r = training_step(tp.rail_optimized(4), model="llama-3-405b", tp=2, pp=16, global_batch=1)
    assert r.stage_layers[0] == 7 and sum(r.stage_layers) == 126


def test_interleaving_holds_megatrons_warm_up_activations():
    m = get_model("llama-3-70b")
    # 33.5 s b h / t per layer (GQA: K and V 1/8 of h; SwiGLU's 3 x 28672 inner values)
    per_layer = 2 * 8192 * (6 * 8192 + 2 * 1024 + 3 * 28672) / 4
    base = memory_per_gpu(m, tp=4, pp=8, dp=2, microbatches=64)
    inter = memory_per_gpu(m, tp=4, pp=8, dp=2, microbatches=64, vp=5)
    # 1F1B holds pp microbatches of the stage's 10 layers; interleaved 2 (pp-1) + (vp-1) pp + 1
    # model chunks of 2 layers on stage 0
    assert base - inter == pytest.approx(per_layer * (10 * 8 - 2 * (2 * 7 + 4 * 8 + 1)), rel=1e-12)


def _walked_peak(weights, stage, pp, vp, m):
    """The most a stage holds, walking the trace writer's pass order (its own implementation
    of Megatron's schedules) pass by pass."""
    held = peak = 0.0
    for direction, _, chunk in pass_order(stage, pp, vp, m):
        held += weights[chunk] if direction == "F" else -weights[chunk]
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize("pp,vp,m", [(2, 1, 1), (4, 1, 3), (4, 1, 16), (16, 1, 32), (2, 2, 4), (4, 2, 16),
                                     (4, 3, 8), (8, 5, 64), (16, 8, 32), (16, 8, 16), (4, 4, 4)])
def test_activations_in_flight_follow_megatrons_order_pass_by_pass(pp, vp, m):
    weights = [0.0] + [1.0 + c % 3 for c in range(1, vp)] if vp > 1 else [2.0]   # an embedding-only chunk
    for stage in range(pp):
        assert peak_in_flight(weights, stage, pp, vp, m) == _walked_peak(weights, stage, pp, vp, m)


def _pipelined_exposed(transfer, gemm, chunks):
    """Exposed seconds of a collective split into ``chunks`` equal pieces, each sent once its
    piece of the GEMM is computed (event by event: one GEMM piece and one transfer at a time)."""
    gemm_end = send_end = 0.0
    for _ in range(chunks):
        gemm_end += gemm / chunks
        send_end = max(send_end, gemm_end) + transfer / chunks
    return send_end - gemm


def test_sequence_parallel_tp_hides_behind_each_gemm_at_most_what_the_gemm_lasts():
    g = tp.rail_optimized(2)
    r = training_step(g, model="llama-3-8b", tp=8, global_batch=16)
    t, c = r.phases["tp"], r.profile.comms["tp"]
    assert t.op == "reduce_scatter+all_gather" and c.op == "reduce_scatter" and c.gather > 0
    # Transformer Engine's ten overlapped ops per layer (Megatron-Bridge comm_overlap.py):
    # forward AG+QKV, proj+RS, AG+FC1, FC2+RS; backward AG+FC2 dgrad, AG beside FC1 dgrad,
    # RS beside FC1 wgrad, AG+proj dgrad, AG beside QKV dgrad, RS beside QKV wgrad
    assert t.calls == 10 * 32 * r.microbatches and t.bytes == 8192 * 4096 * 2
    rate = 8 * r.compute_efficiency * H100_BF16                  # 8 GPUs share each bf16 GEMM
    gemm = dict(qkv=2 * 8192 * 4096 * (4096 + 2 * 1024) / rate, proj=2 * 8192 * 4096 ** 2 / rate,
                fc1=2 * 8192 * 4096 * 2 * 14336 / rate, fc2=2 * 8192 * 14336 * 4096 / rate)
    ag, rs = c.gather, c.per_call
    ops = [(ag, "qkv"), (rs, "proj"), (ag, "fc1"), (rs, "fc2"), (ag, "fc2"), (ag, "fc1"), (rs, "fc1"),
           (ag, "proj"), (ag, "qkv"), (rs, "qkv")]
    per_layer = sum(_pipelined_exposed(x, gemm[k], 8) for x, k in ops)
    assert t.exposed == pytest.approx(r.microbatches * 32 * per_layer, rel=1e-9)
    # the attention projections' GEMMs are shorter than their collectives: hidden time is capped
    assert gemm["proj"] < rs and t.exposed > r.microbatches * 32 * 10 * (ag + rs) / 2 / 8
    # no overlap: all of it exposed; without sequence parallelism, 4 all-reduces per layer
    none = training_step(g, model="llama-3-8b", tp=8, global_batch=16, tp_overlap=0.0)
    assert none.phases["tp"].exposed == pytest.approx(none.microbatches * 32 * (6 * ag + 4 * rs), rel=1e-9)
    plain = training_step(g, model="llama-3-8b", tp=8, global_batch=16, sequence_parallel=False, tp_overlap=0.0)
    assert plain.phases["tp"].op == "all_reduce" and plain.phases["tp"].calls == 4 * 32 * plain.microbatches
    # the default hides (tp - 1) / tp
    assert training_step(g, model="llama-3-8b", tp=8, global_batch=16).tp_overlap == 7 / 8


def test_without_sequence_parallelism_the_forward_all_reduces_are_exposed():
    # an all-reduce of proj's / FC2's output starts after that GEMM ends, and Megatron-LM runs no
    # TP communication / GEMM overlap without sequence parallelism (arguments.py: "Tensor parallel
    # communication/GEMM overlap can happen only when sequence parallelism is enabled"): the two
    # forward all-reduces are exposed whole and the GEMMs run unchunked; only the backward's async
    # all-reduces of the QKV and FC1 input gradients hide, (tp - 1) / tp of min(t, GEMM)
    g = tp.rail_optimized(1)
    r = _training_step(g, model="llama-3-8b", tp=8, global_batch=8, sequence_parallel=False)
    bare = _training_step(g, model="llama-3-8b", tp=8, global_batch=8, sequence_parallel=False, tp_overlap=0.0)
    gemms, bare_gemms = (layer_compute(x.profile, x.schedule)["gemms"] for x in (r, bare))
    assert gemms == pytest.approx(bare_gemms, rel=1e-12)           # no chunks, no SMs held
    ar, layers = r.profile.comms["tp"].per_call, 32 * r.microbatches
    backward_hidden = sum(7 / 8 * min(ar, gemms[k]) for k in ("fc1", "qkv"))
    assert r.phases["tp"].exposed == pytest.approx(layers * (4 * ar - backward_hidden), rel=1e-12)
    assert bare.phases["tp"].exposed == pytest.approx(layers * 4 * ar, rel=1e-12)
    assert r.step_time == pytest.approx(bare.step_time - layers * backward_hidden, rel=1e-12)


def test_context_parallel_rings_exchange_kv_per_layer_within_cp_groups():
    g = tp.rail_optimized(2)
    r = training_step(g, model="llama-3-8b", tp=4, cp=2, global_batch=4, seq_len=32768)
    c = r.phases["cp"]
    # each CP rank's K and V: 2 x (s / cp) tokens x (8 KV heads / tp 4) x 128 x 2 bytes, around a ring of 2
    assert c.op == "all_gather" and c.group_size == 2 and c.groups == 8
    assert c.bytes == 2 * 2 * (32768 // 2) * 2 * 128 * 2 and c.calls == 3 * 32 * r.microbatches
    # hidden behind the layer's attention (bf16, scores recomputed: 8 h s per token)
    attention = 32768 * 8 * 4096 * 32768 / (4 * 2 * r.attention_efficiency * H100_BF16)
    per_call = r.profile.comms["cp"].per_call
    assert 3 * per_call < attention          # the ring's traffic hides behind the attention
    # what stays exposed is what the ring's NCCL send / receive kernels take from the attention
    # beside them (fix22b): their CTAs over the H100's 132 SMs x each step's transfer, the
    # forward's one and the backward's two (KV and KV gradients) per step, cp - 1 = 1 step
    step = r.profile.comms["cp_step"]
    share = step.result.channels_run / 132
    assert 0 < share < 1
    assert c.exposed == pytest.approx(32 * r.microbatches * share * 3 * step.per_call, rel=1e-9)
    # placement: TP inside the server, then CP: rank 0's CP peer is rank tp
    assert r.profile.layout.groups("cp")[0] == [0, 4]
    assert ParallelLayout(tp=4, pp=1, dp=2, cp=2, order="tp-dp-cp-pp").groups("cp")[0] == [0, 8]


def test_fp8_runs_the_layer_gemms_at_the_fp8_peak_and_the_rest_at_bf16():
    g = cluster("ideal", nodes=1)
    m = get_model("llama-3-8b")
    r = training_step(g, model=m, dp=8, global_batch=8, precision="fp8", collective_options=ZERO)
    gemm = 6 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    attention, logits = 6 * 4096 * 8192, 6 * 128256 * 4096      # no recompute (the default): attention once
    per_token = (32 * gemm / H100_FP8 + logits / H100_BF16) / r.compute_efficiency
    per_token += 32 * attention / (H100_BF16 * r.attention_efficiency)       # attention: its own efficiency
    assert r.compute_time == pytest.approx(8192 * per_token, rel=1e-9)
    # MFU of an FP8 run is against the FP8 peak
    assert r.mfu == pytest.approx(r.tokens_per_gpu * m.flops_per_token / H100_FP8, rel=1e-12)


def test_recompute_costs_compute_and_saves_activations():
    g = cluster("ideal", nodes=1)
    kw = dict(model="llama-3-8b", tp=8, global_batch=8, collective_options=ZERO)
    runs = {k: training_step(g, recompute=k, **kw) for k in ("none", "selective", "full")}
    attention, gemm = 6 * 4096 * 8192, 6 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    logits = 6 * 128256 * 4096
    e, ea = runs["none"].compute_efficiency, runs["none"].attention_efficiency

    def seconds(gemm_layers, attention_share):     # per token: GEMMs at e, attention at ea
        return (gemm_layers * gemm + logits) / e + 32 * attention * attention_share / ea
    none = seconds(32, 1)
    for name, gemms, share in (("selective", 32, 4 / 3), ("full", 32 * 4 / 3, 4 / 3)):
        assert runs[name].compute_time / runs["none"].compute_time == pytest.approx(seconds(gemms, share) / none,
                                                                                   rel=1e-9)
    s, h, a, t = 8192, 4096, 32, 8
    # no recompute: an unfused attention keeps its bf16 probabilities, a s^2 per layer; the
    # step's default (flash) attention keeps none, so it holds what selective does
    unfused = training_step(g, recompute="none", attention="unfused", **kw)
    assert unfused.memory_per_gpu - runs["selective"].memory_per_gpu == pytest.approx(
        32 * 2 * a * s * s / t, rel=1e-9)
    assert runs["none"].memory_per_gpu == runs["selective"].memory_per_gpu
    # full keeps 2 s h / t per layer plus one layer's 34 s h / t working set, less than the fp32
    # copy of the bf16 gradients the optimizer step makes once activations are freed (Megatron's
    # main_grad, 4 bytes per parameter held): full's peak is that copy, selective's its activations
    # (34 s h / t per layer and the last stage's fp32 logits, s x vocab / t x 4 bytes)
    params = 32 * (2 * h ** 2 + 2 * h * 1024 + 3 * h * 14336) + 2 * 128256 * h
    full_activations, grad_copy = 32 * 2 * s * h / t + 34 * s * h / t, 4 * params / t
    assert full_activations < grad_copy
    assert runs["selective"].memory_per_gpu - runs["full"].memory_per_gpu == pytest.approx(
        32 * 34 * s * h / t + s * 128256 / t * 4 - grad_copy, rel=1e-9)


def test_recompute_layers_recomputes_the_first_layers_of_each_chunk_only():
    # Megatron's recompute_method="block": the Llama 3 8B FP8 row of Megatron-Bridge recomputes 5 of 32
    g = cluster("ideal", nodes=1)
    kw = dict(model="llama-3-8b", tp=8, global_batch=8, collective_options=ZERO)
    sel, five = training_step(g, recompute="selective", **kw), training_step(g, recompute="full", recompute_layers=5, **kw)
    gemm = 6 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) / 8     # per token, per GPU
    attention = 6 * 4096 * 8192 / 8                                           # causal, per token, per GPU
    # 5 layers' forward again (GEMMs and attention), where selective runs the attention forward
    # again in all 32: 5 GEMM forwards more, 32 - 5 = 27 attention forwards (at 0.62 of bf16) fewer
    # (until fix19a full charged the attention forward to all 32 as well: the GEMMs alone differed)
    extra = 8192 * (5 * gemm / 3 / (H100_BF16 * sel.compute_efficiency) - 27 * attention / 3 / (H100_BF16 * 0.62))
    assert five.compute_time - sel.compute_time == pytest.approx(sel.microbatches * extra, rel=1e-9)
    # the 5 layers keep 2 s h / t instead of 34 s h / t, and one layer's working set is added
    s, h, t = 8192, 4096, 8
    assert sel.memory_per_gpu - five.memory_per_gpu == pytest.approx(5 * 32 * s * h / t - 34 * s * h / t, rel=1e-9)
    # their forward TP collectives (2 all-gathers, 2 reduce-scatters) run again
    assert five.phases["tp"].calls == (10 * 32 + 4 * 5) * five.microbatches
    # with interleaving, per model chunk: 2 chunks of 8 layers on each of 2 stages, 3 recomputed in each
    p = dict(model="llama-3-8b", pp=2, vp=2, global_batch=8, collective_options=ZERO)
    a, b = training_step(g, recompute="selective", **p), training_step(g, recompute="full", recompute_layers=3, **p)
    # a stage's 16 layers (tp 1): 6 GEMM forwards more, 16 - 6 = 10 attention forwards fewer
    extra = 8192 * (6 * gemm * 8 / 3 / (H100_BF16 * a.compute_efficiency)
                    - 10 * attention * 8 / 3 / (H100_BF16 * 0.62))
    assert b.compute_time - a.compute_time == pytest.approx(a.microbatches * extra, rel=1e-9)
    with pytest.raises(ValueError, match=r"recompute_layers \(5\) .* needs recompute='full'"):
        training_step(g, recompute_layers=5, **kw)
    with pytest.raises(ValueError, match=r"recompute_layers must be an integer in 1 ... 8, got 9"):
        training_step(g, recompute="full", recompute_layers=9, **p)
    with pytest.raises(ValueError, match=r"recompute_layers must be an integer in 1 ... 8, got 9"):
        b.recompose(recompute_layers=9)          # recompose refuses it too (it clamped it before)


def test_expert_all_to_all_carries_top_k_times_capacity_factor():
    g = tp.rail_optimized(2)
    kw = dict(model="mixtral-8x7b", tp=2, ep=4, global_batch=8)
    base = training_step(g, **kw)
    padded = training_step(g, capacity_factor=1.25, **kw)
    one = training_step(g, top_k=1, **kw)
    tokens = 4096 * 4096 * 2 / 2                                # s h bf16 / tp
    assert base.phases["ep"].bytes == tokens * 2                  # Mixtral routes to 2 experts
    assert padded.phases["ep"].bytes == tokens * 2 * 1.25 and one.phases["ep"].bytes == tokens
    assert base.phases["ep"].calls == 4 * 32 * base.microbatches
    # the expert GEMMs run on the same tokens: 6 x 3 h ffn FLOPs per routed token and layer
    # (SwiGLU), split over tp 2, at the compute efficiency of the bf16 peak
    expert = 6 * 3 * 4096 * 14336 * 4096 * 32 / (2 * base.compute_efficiency * H100_BF16)   # one route, per microbatch
    assert padded.compute_time - base.compute_time == pytest.approx(base.microbatches * 2 * 0.25 * expert, rel=1e-9)
    assert base.compute_time - one.compute_time == pytest.approx(base.microbatches * expert, rel=1e-9)
    # and the model FLOPs behind MFU count the experts each token is routed to (padding is not model work)
    dense_part = 6 * (2 * 4096 ** 2 + 2 * 4096 * 1024) + 6 * 4096 * 4096       # weights and causal attention
    flops = {k: 32 * (dense_part + 6 * k * 3 * 4096 * 14336) + 6 * 32000 * 4096 for k in (1, 2)}
    for r, k in ((base, 2), (padded, 2), (one, 1)):
        assert r.mfu == pytest.approx(r.tokens_per_gpu * flops[k] / H100_BF16, rel=1e-12)


def test_capacity_factor_below_one_counts_the_dropped_tokens_out_of_the_model_flops():
    # experts taking cf x their share of the routed tokens drop the rest: those tokens skip the
    # expert MLP, so its FLOPs are neither computed nor model FLOPs of the step. Mixtral 8x7B per
    # token, by hand: attention projections 6 (2 h^2 + 2 h 1024) = 251,658,240 and causal
    # attention 6 h s = 100,663,296 per layer, the two experts 6 x 2 x 3 h ffn = 2,113,929,216
    # per layer, logits 6 x 32,000 h = 786,432,000: 32 x (251,658,240 + 100,663,296 + cf x
    # 2,113,929,216) + 786,432,000 FLOPs
    flops = {1.0: 32 * (251_658_240 + 100_663_296 + 2_113_929_216) + 786_432_000,     # 79,706,456,064
             0.5: 32 * (251_658_240 + 100_663_296 + 1_056_964_608) + 786_432_000,     # 45,883,588,608
             0.25: 32 * (251_658_240 + 100_663_296 + 528_482_304) + 786_432_000}      # 28,972,154,880
    assert flops[1.0] == 79_706_456_064 and flops[0.5] == 45_883_588_608
    g = tp.rail_optimized(2)
    kw = dict(model="mixtral-8x7b", tp=2, ep=4, global_batch=8)
    for cf in (0.5, 0.25):
        r = training_step(g, capacity_factor=cf, **kw)
        assert r.flops_per_token == flops[cf]
        assert r.mfu == pytest.approx(r.tokens_per_gpu * flops[cf] / H100_BF16, rel=1e-12)
        assert r.tflops_per_gpu == pytest.approx(r.tokens_per_gpu * flops[cf] / 1e12, rel=1e-12)
    # a factor of 1 or above counts every routed token (padding is not model work): as before
    for cf in (1.0, 1.25):
        assert training_step(g, capacity_factor=cf, **kw).flops_per_token == flops[1.0]
    # adv17b's case on the kernel tables: Mixtral EP 8 on two DGX H100, global batch 16; at cf
    # 0.1 it reported 125.5 % MFU (1,240 TFLOP/s per GPU over the 989 TFLOP/s bf16 peak). The
    # dropped tokens take the expert GEMMs, the layer's largest and most efficient, with them:
    # the MFU falls below the dropless step's, and stays below 1
    dropless = _training_step(g, "mixtral-8x7b", ep=8, global_batch=16)
    for cf in (0.5, 0.1):
        r = _training_step(g, "mixtral-8x7b", ep=8, capacity_factor=cf, global_batch=16)
        assert r.mfu < dropless.mfu < 1 and r.tflops_per_gpu < dropless.tflops_per_gpu


def test_dp_overlap_exposes_one_bucket_when_the_window_is_long_enough():
    g = tp.rail_optimized(1)
    r = training_step(g, model="llama-3-8b", dp=8, global_batch=64)
    c, d = r.profile.comms["dp"], r.phases["dp"]
    # backward window 2/3 and forward window 1/3 of a microbatch, both far longer: one layer's bucket
    # each, and the other 31 buckets cost the compute beside them what NCCL's kernels take from it
    # (its 24 CTAs of the 132 SMs and its HBM copies: tests/training/test_dp_overlap_contention.py)
    assert r.compute_time / r.microbatches / 3 > c.gather
    assert c.result.channels_run == 24
    c_reduce, c_gather = dp_overlap_costs(r.profile, layer_compute(r.profile, r.schedule))["dp"]
    assert 0.9 * 24 / 132 < c_reduce / c.per_call <= 24 / 132 + 0.05
    assert d.exposed == pytest.approx((c.per_call + c.gather) / 32 + 31 / 32 * (c_reduce + c_gather), rel=1e-12)
    none = r.recompose(dp_overlap=0.0)
    assert none.phases["dp"].exposed == pytest.approx(c.per_call + c.gather, rel=1e-12)


def test_zero2_reduce_scatters_the_sharded_gradients_every_microbatch():
    # DeepSpeed ZeRO-2 (engine.py allreduce_gradients: "ZeRO stage >= 2 communicates during non
    # gradient accumulation boundaries as well"): m reduce-scatters a step, one all-gather of the
    # parameters; ZeRO-1 (Megatron's distributed optimizer: whole gradients) one of each.
    # Llama 3 8B, DP 16, global batch 128: m = 8; bf16 gradients and parameters of
    # 32 x (4096 x (4096 + 2 x 1024) + 4096^2 + 3 x 4096 x 14336) + 2 x 128256 x 4096 weights
    g = tp.rail_optimized(2)
    weights = 32 * (4096 * (4096 + 2 * 1024) + 4096 ** 2 + 3 * 4096 * 14336) + 2 * 128256 * 4096
    one, two = (training_step(g, model="llama-3-8b", dp=16, global_batch=128, zero=z) for z in (1, 2))
    assert two.microbatches == 8 and one.phases["dp"].calls == 2 and two.phases["dp"].calls == 8 + 1
    c = two.profile.comms["dp"]
    assert c.op == "reduce_scatter" and c.bytes == 2 * weights and two.phases["dp"].bytes == 2 * weights
    assert two.phases["dp"].total == pytest.approx(8 * c.per_call + c.gather, rel=1e-12)
    # with no overlap every call is exposed: 7 reduce-scatters more than ZeRO-1's step
    bare1, bare2 = one.recompose(dp_overlap=0.0), two.recompose(dp_overlap=0.0)
    assert bare2.phases["dp"].exposed == pytest.approx(8 * c.per_call + c.gather, rel=1e-12)
    assert bare2.step_time - bare1.step_time == pytest.approx(7 * c.per_call, rel=1e-9)


@pytest.mark.parametrize("kw,message", [
    (dict(tp=8, cp=4), r"tp \* cp \* pp must divide the GPU count 16 \(dp is the quotient\), got tp=8, cp=4, pp=1"),
    (dict(tp=4, cp=2, dp=4), r"tp \* cp \* pp \* dp must equal the GPU count 16, got tp=4, cp=2, pp=1, dp=4"),
    (dict(tp=8, cp=2, seq_len=6), r"cp \(2\) must split the sequence of 6 tokens into 2 x cp equal chunks"),
    (dict(tp=8, seq_len=1001, sequence_parallel=True),
     r"tp \(8\) must split the sequence of 1001 tokens \(over cp 1\) into tp equal shards .* tp x cp \(8\) must"),
    (dict(tp=4, cp=2, seq_len=1004, sequence_parallel=True), r"tp \(4\) must split the sequence of 1004 tokens"),
    (dict(tp=8, vp=2), r"vp \(2\) interleaves pipeline stages: it needs pp > 1"),
    (dict(tp=4, pp=2, vp=3), r"pp x vp \(2 x 3 = 6 virtual stages\) must divide the model's 32 layers"),
    (dict(tp=8, ep=2), r"ep \(2\) needs a mixture-of-experts model"),
    (dict(model="mixtral-8x7b", tp=4, ep=3, dp=4), r"ep \(3\) needs a mixture-of-experts model and must divide dp"),
    (dict(tp=8, top_k=2), r"top_k and capacity_factor need a mixture-of-experts model; llama-3-8b is dense"),
    (dict(model="mixtral-8x7b", tp=8, top_k=9), r"top_k must be an integer in 1 ... 8, got 9"),
    (dict(model="mixtral-8x7b", tp=8, capacity_factor=0.0), r"capacity_factor must be"),
    (dict(model="mixtral-8x7b", tp=8, capacity_factor=5.0), r"capacity_factor \(5.0\) must be <= experts / top_k = 4"),
    (dict(tp=8, precision="fp16"), r"precision must be one of bf16, fp8, got 'fp16'"),
    (dict(tp=8, precision="fp8", gpu="a100_sxm"), r"precision='fp8' needs a GPU with FP8 tensor cores; a100_sxm"),
    (dict(tp=8, recompute="some"), r"recompute must be one of none, selective, full, save_qkv_proj, selective_op, got 'some'"),
    (dict(tp=8, tp_overlap=1.5), r"tp_overlap must be in \[0, 1\], got 1.5"),
    (dict(tp=8, attention_efficiency=0.0), r"attention_efficiency must be in \(0, 1\], got 0.0"),
    (dict(tp=8, recompute="full", recompute_layers=0), r"recompute_layers must be an integer in 1 ... 32, got 0"),
    (dict(tp=8, order="tp-dp"), r"order must be a permutation of tp, cp, dp, pp"),
])
def test_bad_parallelism_is_refused_naming_the_parameter(kw, message):
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=message):
        training_step(g, **{"model": "llama-3-8b", "global_batch": 16, **kw})


def test_an_odd_sequence_needs_no_ring_attention_split_at_cp_1():
    # 2 cp equal chunks are ring attention's load balance: at cp 1 there is none, and an odd
    # length trains (it was refused), a token shorter than the even one, no slower
    from dataclasses import replace

    import flowsolver as fs

    g = tp.rail_optimized(nodes=1)
    odd, even = (replace(get_model("llama-3-8b"), seq_len=n) for n in (8191, 8192))
    # (without sequence parallelism: it shards the sequence over the TP ranks, 8 must divide it)
    lay = fs.Parallelism(tp=8, sequence_parallel=False)
    t_odd = _training_step(g, odd, lay, fs.Schedule(global_batch=8)).step_time
    t_even = _training_step(g, even, lay, fs.Schedule(global_batch=8)).step_time
    assert 0 < t_odd <= t_even
    plan = fs.plan(g, model=odd, global_batch=8, top=1, max_solves=2)
    assert plan.best is not None and plan.best.layout.cp == 1       # cp 2-8 cannot split 8,191 tokens
    # nor tp 2-8 with sequence parallelism: pruned as "sequence", never timed (it would be refused)
    assert plan.best.layout.tp == 1 or not plan.best.layout.sequence_parallel
    with pytest.raises(ValueError, match=r"tp \(8\) must split the sequence of 8191 tokens"):
        memory_per_gpu(odd, tp=8, pp=1, dp=1, sequence_parallel=True)


def test_plan_prunes_sequence_parallel_layouts_whose_tp_does_not_split_the_sequence():
    # 1001 tokens = 7 x 11 x 13: of tp 1, 2, 4, 8 (cp 1) only tp 1 splits them; at tp 1 sequence
    # parallelism is kept and the row without it pruned as the same job. Each of tp 2, 4, 8 loses its SP row
    from dataclasses import replace

    from flowsolver.planning import layout_space
    spec = replace(get_model("llama-3-8b"), seq_len=1001)
    s = layout_space(spec, 8, 8, gpu_memory=1e15, tp=(1, 2, 4, 8), cp=1, pp=1, vp=1, micro_batch=1,
                     recompute="selective", zero=1, orders="tp-cp-dp-pp")
    assert s.pruned["sequence"] == 3 and s.pruned["same"] == 1
    assert sorted((lay.tp, lay.sequence_parallel) for lay in s.feasible) == [(1, True), (2, False), (4, False),
                                                                              (8, False)]
