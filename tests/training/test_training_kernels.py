"""The kernel tables and the mechanisms built on them, against values derived by hand from the
published figures (tables in flowsolver/training/_kernel_data.py) and from the formulas the
mechanisms are: the GEMM curve refitted and checked against its own published points, a GEMM
time by hand, flash attention's rates, the power cap, FSDP's per-layer overlap, ring
attention step by step, DP buckets under pipelining, the GPU catalogue rows."""

import math
import re
import statistics

import pytest

import topologies as tp
from flowsolver import collective, training_step
from flowsolver.training import ModelSpec
from flowsolver.training import _kernel_data as D
from flowsolver.training import _kernels as K
from flowsolver.training._compose import dp_overlap_costs, layer_compute
from flowsolver.training._exposed import cp_ring_exposed, fsdp_exposed

H100 = tp.get_gpu("h100_sxm")
TINY = ModelSpec("tiny-4", 4, 4096, 14336, 32, 8, 256)


# --- the published tables -----------------------------------------------------------------------

def _numbers(text):
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)}


def test_every_table_figure_is_in_its_verbatim_line():
    for source, fam, prec, m, n, k, tflops, verbatim in D.GEMM_POINTS:
        assert source in D.SOURCES
        if source == "xla":      # FLOP/s printed as an integer
            assert str(round(tflops * 1e12)) in verbatim.replace(".", "") or f"{tflops * 1e12:.0f}" in verbatim
        else:
            assert {float(m), float(n), float(k), tflops} <= _numbers(verbatim), verbatim
    for fam, prec, mamf, spec, shape, verbatim in D.MAMF:
        assert {mamf, float(spec)} <= _numbers(verbatim) and "x".join(map(str, shape)) in verbatim
    for fam, cap, prec, m, n, k, tflops, verbatim in D.POWER_CAPPED_GEMM:
        assert {float(m), float(n), float(k), tflops} <= _numbers(verbatim)
    for source, fam, kernel, causal, d, s, direction, tflops, verbatim in D.ATTENTION_POINTS:
        assert tflops in _numbers(verbatim) and source in D.SOURCES


def test_the_gemm_curve_is_the_least_squares_fit_of_its_table_and_follows_it():
    # refit from the published rows alone and compare with what the model uses
    for key in (("h100", "bf16"), ("h100", "fp8"), ("a100", "bf16"), ("h200", "fp8"), ("gb200", "fp8")):
        assert K.gemm_curve(*key) == K.fit_gemm_curve(*key)
    # the curve against every published large GEMM (all dimensions >= 2048, > 10 us): within 15 %
    for _, fam, prec, m, n, k, tflops, _ in D.GEMM_POINTS:
        if min(m, n, k) < 2048 or fam == "gb200":
            continue
        gpu = {"a100": tp.get_gpu("a100_sxm"), "h100": H100, "h200": tp.get_gpu("h200")}[fam]
        model = 2 * m * n * k / K.gemm_seconds_shape(m, n, k, gpu, prec) / 1e12
        # the curve runs at the VM's measured Triad bandwidth; gpu at its own (the same VMs)
        assert model == pytest.approx(tflops, rel=0.15), (fam, prec, m, n, k)


def test_a_gemm_time_by_hand():
    # H100 FP8, 8192 x 4096 by 4096 x 512 (a TP-8 projection): compute 2 m n k / (eta P q),
    # q = 1 - exp(-m n / (c SMs)); memory (m k + k n) 1 B + m n 2 B at 2.97 TB/s (Azure Triad);
    # plus t0; eta, c, t0 the fit of Azure's ND H100 v5 FP8 table
    eta, c, t0 = K.gemm_curve("h100", "fp8")
    m, n, k = 8192, 512, 4096
    q = 1 - math.exp(-m * n / (c * 132))
    compute = 2 * m * n * k / (eta * 1979e12 * q)
    memory = ((m * k + k * n) * 1 + 2 * m * n) / 2.97e12
    assert K.gemm_seconds_shape(m, n, k, H100, "fp8") == pytest.approx(max(compute, memory) + t0, rel=1e-12)
    # the large-GEMM fraction sits within the published points' range (Azure 0.615-0.698, MAMF 0.709)
    assert 0.61 <= eta <= 0.71
    # BF16 is compute-bound at this shape, FP8 memory-bound: FP8 gains less than its peak's 2x
    bf16 = K.gemm_seconds_shape(m, n, k, H100, "bf16")
    assert 1.2 < bf16 / K.gemm_seconds_shape(m, n, k, H100, "fp8") < 2 * eta / K.gemm_curve("h100", "bf16")[0]


def test_achieved_bandwidth_is_babelstream_triad_over_the_datasheet():
    assert K.memory_fraction(H100) == pytest.approx(2.97 / 3.35)
    assert K.memory_fraction(tp.get_gpu("h200")) == pytest.approx(4.15 / 4.8)
    assert K.memory_fraction(tp.get_gpu("a100_sxm")) == pytest.approx(1.70 / 2.039)
    assert K.memory_fraction(tp.get_gpu("h100_sxm_hbm2e")) == 0.92          # torchao, Meta's H100
    assert K.memory_seconds(2.97e12, H100) == pytest.approx(1.0)


def test_attention_rates_are_the_published_ones_and_their_derivations():
    # H100, causal, head dim 128, 8192 tokens: flash-attention PR 1791 as printed
    assert [r / 1e12 for r in K.attention_rates(H100, "fa3", head_dim=128, tokens=8192)] == [630.0, 531.6]
    assert [r / 1e12 for r in K.attention_rates(H100, "fa2", head_dim=128, tokens=8192)] == [284.1, 287.1]
    # A100 FA2: the FA2 paper's non-causal 16k peak (225 / 196) times H100 FA2's causal /
    # non-causal ratio at 8k, times the non-causal ramp 16k -> 8k
    s = [p for p in D.ATTENTION_SEQ_RAMP if not p[3]][0][5]
    x = [1 / a for a, _ in s]
    y = [1 / b for _, b in s]
    xm, ym = statistics.mean(x), statistics.mean(y)
    slope = sum((a - xm) * (b - ym) for a, b in zip(x, y)) / sum((a - xm) ** 2 for a in x)
    s0 = slope / (ym - slope * xm)
    ramp = (1 + s0 / 16384) / (1 + s0 / 8192)
    fwd, bwd = K.attention_rates(tp.get_gpu("a100_sxm"), "auto", head_dim=128, tokens=8192)
    assert fwd / 1e12 == pytest.approx(225 * ramp * 284.1 / 369.9, rel=1e-9)
    assert bwd / 1e12 == pytest.approx(196 * ramp * 287.1 / 290.6, rel=1e-9)
    # head dimension 64 at the FA3 paper's 475 / 616; no FA3 on an A100
    assert K.attention_rates(H100, "fa3", head_dim=64, tokens=8192)[0] / 1e12 == pytest.approx(630 * 475 / 616)
    with pytest.raises(ValueError, match="FlashAttention-3 needs Hopper"):
        K.attention_rates(tp.get_gpu("a100_sxm"), "fa3", head_dim=128, tokens=8192)


def test_a_power_cap_follows_the_published_capped_gemms():
    # H100 at 500 W (FBGEMM PR 2546): bf16 585.23 / 575.12 / 546.31 TFLOP/s at three shapes; the
    # capped fraction is the uncapped eta times the median of measured / uncapped curve
    eta, c, t0 = K.gemm_curve("h100", "bf16")
    ratios = []
    for m, n, k, tflops in ((8192, 8192, 8192, 585.23), (65536, 8192, 7168, 575.12), (65536, 3584, 8192, 546.31)):
        q = 1 - math.exp(-m * n / (c * 132))
        t = max(2 * m * n * k / (eta * 989e12 * q), (2 * (m * k + k * n) + 2 * m * n) / 2.97e12) + t0
        ratios.append(tflops / (2 * m * n * k / t / 1e12))
    at500 = eta * statistics.median(ratios)
    assert K.gemm_fraction("h100", "bf16", 500, 700) == pytest.approx(at500, rel=1e-12)
    assert K.gemm_fraction("h100", "bf16", 600, 700) == pytest.approx((at500 + eta) / 2, rel=1e-12)
    assert 0.55 < at500 / 1 < 0.62          # the measured 546-585 TFLOP/s of 989
    with pytest.raises(ValueError, match="below the lowest published cap"):
        K.gemm_fraction("h100", "bf16", 400, 700)
    with pytest.raises(ValueError, match="power_cap needs a GPU"):
        training_step(tp.rail_optimized(1, server="pcie_8gpu"), model=TINY, power_cap=300, gpu="h100_pcie")
    capped = training_step(tp.rail_optimized(1), model=TINY, global_batch=8, power_cap=500)
    free = training_step(tp.rail_optimized(1), model=TINY, global_batch=8)
    assert capped.compute_time > 1.2 * free.compute_time


def test_the_gpu_catalogue_rows():
    rows = {name: tp.get_gpu(name) for name in ("h100_sxm", "h200", "a100_sxm", "a100_40gb", "b200", "gb200",
                                                "h100_sxm_hbm2e")}
    # H200 memory: nvidia-smi's 143771MiB (an H200 SXM reading, topologies/gpu_types.py), not the datasheet's 141 GB
    assert (rows["h200"].peak_bf16_flops, rows["h200"].peak_fp8_flops, rows["h200"].memory) == (989e12, 1979e12,
                                                                                               143771 * 2**20)
    assert rows["a100_40gb"].memory == 40960 * 2**20 and rows["a100_40gb"].hbm_bandwidth == 1.555e12
    assert (rows["b200"].hbm_bandwidth, rows["b200"].tdp, rows["gb200"].tdp) == (8e12, 1000.0, 1200.0)
    assert {g.family for g in rows.values()} == {"h100", "h200", "a100", "b200", "gb200"}
    assert all(g.tdp > 0 and g.hbm_bandwidth > 0 for g in rows.values())


def test_every_catalogue_gpu_has_its_nccl_generation():
    # the collectives read NVLS's efficiency from the generation (NCCL tuning.cc nvlsEfficiency:
    # Hopper 0.85, Blackwell 0.74); the new Hopper rows are Hopper parts (H200 and the 96 GB
    # HBM2e H100 SXM: the GH100 die), A100 40 GB an Ampere part (no NVLS)
    from topologies.gpu_types import _GPUS
    from flowsolver.collectives._nccl import GPU_GENERATION, NVLS_EFFICIENCY

    assert set(_GPUS) <= set(GPU_GENERATION)
    assert (GPU_GENERATION["h200"], GPU_GENERATION["h100_sxm_hbm2e"], GPU_GENERATION["a100_40gb"]) == \
        ("hopper", "hopper", "ampere")
    assert NVLS_EFFICIENCY["h100_sxm_hbm2e"] == NVLS_EFFICIENCY["h200"] == 0.85
    assert "a100_40gb" not in NVLS_EFFICIENCY


# --- mechanisms ----------------------------------------------------------------------------------

def test_fsdp_overlaps_each_layers_gather_and_reduce_with_the_neighbouring_compute():
    # a toy of 4 layers: gather 1, reduce-scatter 2, forward 0.5, backward 2.5 per layer.
    # forward: the first gather exposed, the next three beside 0.5 s of compute each: 1 + 3 x 0.5;
    # backward: layer 3 overlaps a gather (hidden), layers 2 and 1 a gather and a reduce-scatter
    # (3 - 2.5 each), layer 0 a reduce-scatter (hidden), then layer 0's reduce-scatter: 2
    assert fsdp_exposed(layers=4, gather=1.0, reduce=2.0, forward=0.5, backward=2.5) == (2.5, 1.0 + 2.0)
    # parameters kept (pipelining): no gather in the backward
    assert fsdp_exposed(layers=4, gather=1.0, reduce=2.0, forward=0.5, backward=1.5, keep_params=True) == \
        (2.5, 3 * 0.5 + 2.0)
    # through training_step: the DP phase is the formula on the solved per-layer collectives
    r = training_step(tp.rail_optimized(2), model=TINY, tp=8, global_batch=4, zero=3, dp_overlap=1.0)
    c, parts = r.profile.comms, layer_compute(r.profile, r.schedule)
    root = r.profile.fsdp_unit_scale()
    g, rs = c["dp_gather"].per_call, c["dp_reduce"].per_call
    costs = dp_overlap_costs(r.profile, parts)         # the compute NCCL's kernels take beside each call
    f, b = fsdp_exposed(layers=4, gather=g, reduce=rs, forward=parts["forward"], backward=parts["backward"],
                        root_gather=root * g, root_reduce=root * rs, gather_cost=costs["dp_gather"][0],
                        reduce_cost=costs["dp_reduce"][0])
    assert r.phases["dp"].exposed == pytest.approx(r.microbatches * (f + b), rel=1e-12)
    assert c["dp_gather"].bytes == pytest.approx((TINY.attention_params + TINY.mlp_params) / 8 * 2)


def test_fsdp_prefetches_beside_a_layers_whole_run_so_faster_compute_is_never_slower():
    # tp 8 x dp 2 on two DGX H100: the TP all-reduces outlast their GEMMs at high efficiency, so a
    # layer's run is its compute plus its exposed TP waits, and ZeRO-3's gathers and reduce-scatters
    # go on beside all of it. Counted beside the compute alone, the same seconds hid both the TP and
    # the DP traffic and the step got slower as the GPU got faster (1.0024 s at 0.8, 1.0176 s at 1.0)
    from flowsolver import Parallelism, Schedule

    r = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8, dp=2, zero=3),
                      Schedule(global_batch=16, compute_efficiency=0.8))
    times = [r.recompose(compute_efficiency=e).step_time for e in (0.7, 0.8, 0.85, 0.9, 0.95, 1.0)]
    assert all(b <= a for a, b in zip(times, times[1:]))
    # the experts' shards too (Mixtral, tp 4 x ep 4 x dp 8: 1.8074 s at 0.5, 1.8508 s at 1.0 beside the compute alone)
    moe = training_step(tp.rail_optimized(4), "mixtral-8x7b", Parallelism(tp=4, ep=4, dp=8, zero=3),
                        Schedule(global_batch=64, compute_efficiency=0.5))
    times = [moe.recompose(compute_efficiency=e).step_time for e in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:]))     # (equal ones: to rounding)
    # the DP phase is fsdp_exposed with each layer's window its compute plus its share of the waits
    parts = layer_compute(r.profile, r.schedule)
    c, layers = r.profile.comms, r.profile.model.layers
    waits = sum(p.exposed for name, p in r.phases.items() if name in ("tp", "cp", "ep")) / r.microbatches / layers
    assert waits > 0
    share = parts["forward"] / (parts["forward"] + parts["backward"])
    root = r.profile.fsdp_unit_scale()
    g, rs = c["dp_gather"].per_call, c["dp_reduce"].per_call
    costs = dp_overlap_costs(r.profile, parts)
    f, b = fsdp_exposed(layers=layers, gather=g, reduce=rs, forward=parts["forward"] + share * waits,
                        backward=parts["backward"] + (1 - share) * waits, root_gather=root * g, root_reduce=root * rs,
                        gather_cost=costs["dp_gather"][0], reduce_cost=costs["dp_reduce"][0])
    assert r.phases["dp"].exposed == pytest.approx(r.microbatches * (f + b), rel=1e-9)


def test_fsdp_under_a_pipeline_gathers_on_the_fill_of_every_stage_and_reduces_once():
    # pp 2: parameters kept between microbatches; each stage's first forward waits for its own
    # gathers after its activations arrive (the two stages' forward exposures add up on the
    # pipeline's fill), the last backward's reduce-scatters are exposed once (the first stage's)
    r = training_step(tp.rail_optimized(4), model=TINY, tp=8, pp=2, global_batch=8, zero=3, dp_overlap=1.0)
    c, parts = r.profile.comms, layer_compute(r.profile, r.schedule)
    root = r.profile.fsdp_unit_scale() / 2
    g, rs = c["dp_gather"].per_call, c["dp_reduce"].per_call
    costs = dp_overlap_costs(r.profile, parts)
    f, b = fsdp_exposed(layers=2, gather=g, reduce=rs, forward=parts["forward"], backward=parts["backward"],
                        root_gather=root * g, root_reduce=root * rs, keep_params=True,
                        gather_cost=costs["dp_gather"][0], reduce_cost=costs["dp_reduce"][0])
    assert r.phases["dp"].exposed == pytest.approx(2 * f + b, rel=1e-12)


def test_fp32_reduction_and_fp8_gathers_change_the_bytes():
    a = training_step(tp.rail_optimized(2), model=TINY, tp=8, global_batch=4, zero=3)
    b = training_step(tp.rail_optimized(2), model=TINY, tp=8, global_batch=4, zero=3, reduce_dtype="fp32",
                      precision="fp8", fp8_param_gather=True)
    assert b.profile.comms["dp_reduce"].bytes == 2 * a.profile.comms["dp_reduce"].bytes
    assert b.profile.comms["dp_gather"].bytes == a.profile.comms["dp_gather"].bytes / 2
    assert b.profile.comms["dp"].bytes == 2 * a.profile.comms["dp"].bytes


def test_ring_attention_exposes_each_step_beyond_its_block():
    # cp 4: 3 steps; forward one KV chunk (1 s) beside a quarter of 2 s, backward two chunks
    # beside a quarter of 4 s
    assert cp_ring_exposed(1.0, 4, 2.0, 4.0) == pytest.approx(3 * 0.5 + 3 * 1.0)
    assert cp_ring_exposed(1.0, 4, 8.0, 16.0) == 0.0
    r = training_step(tp.rail_optimized(4), model=TINY, tp=8, cp=4, global_batch=4)
    parts = layer_compute(r.profile, r.schedule)
    # a step is one KV chunk (2 x s/cp x kv_heads/tp x head_dim x 2 bytes: 1 MiB here) sent
    # to the ring's next rank: on a rail-optimized cluster each rank's own NIC, each pair alone
    step = r.profile.comms["cp_step"]
    assert step.bytes == 2 * (8192 // 4) * 1 * 128 * 2
    assert step.per_call == pytest.approx(collective(tp.rail_optimized(4), "send_recv", step.bytes,
                                                     ranks=[0, 8]).time, rel=1e-9)
    want = 4 * cp_ring_exposed(step.per_call, 4, parts["attention_fwd"], parts["attention_bwd"])
    assert r.phases["cp"].exposed == pytest.approx(r.microbatches * want, rel=1e-12)


def test_dp_reduces_per_layer_bucket_under_1f1b_pipelining():
    # pp 2, vp 1: Megatron launches each layer's gradient bucket as the last microbatch's
    # backward finishes it: max(R / L, R - 2/3 t) exposed, and the parameters' gather beside
    # the first forward: max(G / L, G - t / 3), L the stage's layers; the buckets beside the
    # compute ((L - 1) / L of each) cost it what NCCL's kernels take from it (dp_overlap_costs)
    r = training_step(tp.rail_optimized(4), model=TINY, tp=8, pp=2, global_batch=8, zero=1,
                      algorithms=dict(dp="ring"))
    c, m = r.profile.comms["dp"], r.microbatches
    t_mb = r.compute_time / m
    c_r, c_g = dp_overlap_costs(r.profile, layer_compute(r.profile, r.schedule))["dp"]
    want = (max(c.per_call / 2 + c_r / 2, c.per_call - 2 * t_mb / 3)
            + max(c.gather / 2 + c_g / 2, c.gather - t_mb / 3))
    assert r.phases["dp"].exposed == pytest.approx(want, rel=1e-12)


def test_kernel_tables_give_fp8_a_smaller_gain_than_its_peak_and_rowwise_less_than_tensorwise():
    # Llama 3 8B on 8 H100s, DP only: the kernel tables' FP8 / BF16 speed-up falls inside the
    # published range of identical jobs (1.33-1.62x, the corpus' NeMo / torchtitan pairs), the
    # flat model's is the 2x peak ratio diluted by attention only. Without recompute: selective
    # runs the bf16 attention forward again in both precisions (1.347x -> 1.326x here)
    kw = dict(model="llama-3-8b", global_batch=16, compute_efficiency=None, recompute="none")
    g = tp.rail_optimized(1)
    bf16 = training_step(g, **kw)
    fp8 = training_step(g, precision="fp8", **kw)
    assert 1.33 <= bf16.step_time / fp8.step_time <= 1.62
    flat = training_step(g, model="llama-3-8b", global_batch=16, compute_efficiency=0.44)
    assert flat.step_time / flat.recompose(precision="fp8").step_time > 1.62
    rowwise = fp8.recompose(fp8_recipe="rowwise")
    tensorwise = fp8.recompose(fp8_recipe="tensorwise")
    assert rowwise.step_time > tensorwise.step_time > fp8.step_time          # torchao casts more than TE


def test_the_flat_model_keeps_its_calibration_row():
    # docs/accuracy.md's Llama 3 8B FP8 calibration row with the flat 0.44: compute-bound, per
    # token 32 + 5/3 layers' GEMMs (1.3086 GFLOP each) at 0.44 x 1979 TFLOP/s, the logits (3.152
    # GFLOP) at 0.44 x 989, the same layers' attention (6 h s = 0.2013 GFLOP) at 0.62 x 989:
    # 14,515 tokens/s per GPU (tests/training/test_default_compute_efficiency.py derives 0.44)
    layers = 32 + 5 / 3
    bound = 1 / ((layers * 1308622848 / 1979e12 + 3152019456 / 989e12) / 0.44
                 + layers * 6 * 4096 * 8192 / (0.62 * 989e12))
    r = training_step(tp.rail_optimized(1), model="llama-3-8b", dp=8, global_batch=128, precision="fp8",
                      recompute="full", recompute_layers=5, compute_efficiency=0.44)
    # (the step: the compute and DP's exposed bucket and the compute NCCL's CTAs take beside the
    # rest, ~0.2 %: tests/training/test_default_compute_efficiency.py)
    assert r.compute_efficiency == 0.44 and r.tokens_per_gpu == pytest.approx(bound, rel=2.5e-3)
    assert r.global_batch * 8192 / r.compute_time / 8 == pytest.approx(bound, rel=1e-3)
    k = r.recompose(compute_efficiency=None)
    assert k.schedule.kernels and k.compute_efficiency is None and k.tokens_per_gpu != r.tokens_per_gpu
    assert r.recompose(compute_efficiency="auto").step_time == k.step_time        # H100: the tables
    with pytest.raises(ValueError, match="attention must be one of"):
        training_step(tp.rail_optimized(1), model=TINY, attention="fa4")
    with pytest.raises(ValueError, match="fp8_recipe must be one of"):
        training_step(tp.rail_optimized(1), model=TINY, fp8_recipe="mx")


def test_the_default_is_the_kernel_tables_where_the_gpu_has_them():
    # "auto": the tables on every catalogue GPU with a kernel family, the flat 0.44 on the H100 PCIe
    g = tp.rail_optimized(1)
    default = training_step(g, model="llama-3-8b", dp=8, global_batch=16)
    tables = training_step(g, model="llama-3-8b", dp=8, global_batch=16, compute_efficiency=None)
    assert default.schedule.kernels and default.step_time == tables.step_time
    pcie = training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu="h100_pcie")
    flat = training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu="h100_pcie", compute_efficiency=0.44)
    assert pcie.compute_efficiency == 0.44 and pcie.step_time == flat.step_time
    with pytest.raises(ValueError, match="compute_efficiency must be 'auto', None"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, compute_efficiency="kernels")
    with pytest.raises(ValueError, match="has no kernel family"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu="h100_pcie", compute_efficiency=None)


def test_auto_falls_back_to_the_flat_model_where_the_tables_cannot_time_the_gpu():
    # a family the tables do not hold, or no HBM bandwidth (the memory-bound work's rate)
    g = tp.rail_optimized(1)
    odd = tp.GpuSpec("odd", 900e12, 80e9, "a user's GPU", 1800e12, 3e12, 700, family="mi300x")
    slow = tp.GpuSpec("no-hbm", 989e12, 80e9, "a user's GPU", 1979e12, 0.0, 0.0, family="h100")
    for gpu in (odd, slow):
        auto = training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu=gpu)
        flat = training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu=gpu, compute_efficiency=0.44)
        assert auto.compute_efficiency == 0.44 and auto.step_time == flat.step_time
    with pytest.raises(ValueError, match="family 'mi300x', which the kernel tables do not hold"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu=odd, compute_efficiency=None)
    with pytest.raises(ValueError, match="has no hbm_bandwidth"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu=slow, compute_efficiency=None)
    # the kernel tables' own settings are refused, not ignored, where the flat model runs
    with pytest.raises(ValueError, match=r"kernel_utilization=0.8 sets the kernel-table compute model.*"
                                         r"compute_efficiency='auto' on odd"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, gpu=odd, kernel_utilization=0.8)
    with pytest.raises(ValueError, match=r"fp8_recipe='rowwise' .*\(compute_efficiency=0.44\); leave fp8_recipe "
                                         r"at its default \('te'\) or pass compute_efficiency=None"):
        training_step(g, model="llama-3-8b", dp=8, global_batch=16, precision="fp8", fp8_recipe="rowwise",
                      compute_efficiency=0.44)


def test_a_hand_built_schedule_is_resolved_and_checked_as_training_step_does():
    from flowsolver import Parallelism, Schedule
    from flowsolver.training import compose

    g = tp.rail_optimized(1)
    r = training_step(g, "llama-3-8b", Parallelism(tp=8), Schedule(8))
    assert layer_compute(r.profile, Schedule(8)) == layer_compute(r.profile, r.schedule)
    assert compose(r.profile, Schedule(8)).step_time == r.step_time
    with pytest.raises(ValueError, match=r"compute_efficiency must be in \(0, 1\]"):
        compose(r.profile, Schedule(8, compute_efficiency=-1))
