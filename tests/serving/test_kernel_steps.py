"""flowsolver.serve on the kernel tables (the default where a GPU has them): step times against
the kernel list of vLLM's decoder layer worked by hand (flowsolver/serving/_kernel_steps.py),
each kernel from the published-benchmark curves (GEMM launch-and-tail t0, torchao's least kernel
time, BabelStream's achieved bandwidth)."""

import math

import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.training._kernels import LAUNCH_SECONDS, attention_rates, gemm_curve

# Llama 3 8B (paper, table 3): 32 layers, hidden 4096, FFN 14336, 32 heads, 8 KV heads of 128,
# vocabulary 128256; H100 SXM: BabelStream Triad 2.97 TB/s (Azure), 989 TFLOP/s bf16, 132 SMs
L, H, F, KVH, D, V = 32, 4096, 14336, 8, 128, 128256
KV = KVH * D
HBM = 2.97e12
KV_PER_TOKEN = 2 * L * KVH * D * 2


@pytest.fixture(scope="module")
def one_server():
    return tp.rail_optimized(nodes=1)


@pytest.fixture(scope="module")
def r8b(one_server):
    return fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1)


def test_decode_of_one_sequence_is_every_gemm_memory_bound_plus_each_kernels_floor(r8b):
    # one token: every GEMM's FLOPs at its occupancy (1 x n outputs keep < 3 % of the SMs busy)
    # take less time than reading its weights, so each GEMM is its operands / HBM + t0; the four
    # memory-bound kernels a layer (2 norms, RoPE, SiluAndMul), the attention kernel (no context),
    # the last norm and the sampler each move < 1.1 MB: each their 2 us floor
    t0 = gemm_curve("h100", "bf16")[2]
    shapes = [(H + 2 * KV, H), (H, H), (2 * F, H), (H, F)]             # (n, k) of QKV, proj, gate_up, down
    layer_bytes = sum(2 * (k + n * k + n) for n, k in shapes)            # x (1 x k), W (k x n), y (1 x n), bf16
    out_bytes = 2 * (H + V * H + V)
    want = (L * (layer_bytes / HBM + 4 * t0 + 5 * LAUNCH_SECONDS)
            + out_bytes / HBM + t0 + 2 * LAUNCH_SECONDS)
    seconds, comm = r8b.decode_step(1, 0)
    assert comm == 0.0
    assert seconds == pytest.approx(want, rel=1e-12)
    # what the roofline of the whole step left out: 4 GEMM tails and 5 launches a layer, ~1 ms
    assert seconds - (layer_bytes * L + out_bytes) / HBM == pytest.approx(L * (4 * t0 + 5 * LAUNCH_SECONDS)
                                                                           + t0 + 2 * LAUNCH_SECONDS, rel=1e-9)


def test_decode_context_is_its_kv_cache_at_the_achieved_bandwidth(r8b):
    # no context: each layer's attention kernel its 2 us floor; 4,000 tokens: 16 MB a layer, past it
    base, _ = r8b.decode_step(4, 0)
    seconds, _ = r8b.decode_step(4, 4000)
    assert seconds - base == pytest.approx(4000 * KV_PER_TOKEN / HBM - L * LAUNCH_SECONDS, rel=1e-9)


def test_decode_at_tp8_keeps_every_gemm_memory_bound_one_sm_at_least():
    # Llama 3 70B (80 layers, hidden 8192, FFN 28672, 64 heads, 8 KV heads) on 8 H100, one token:
    # each GPU's GEMM slices (QKV 1 x 1280 by 8192 ...) keep one SM busy at least, whose share of
    # the peak (989 / 132 TFLOP/s x 0.82) computes QKV in 3.4 us, under its 7.1 us of weights
    # (the curve's occupancy alone, 0.24 % of the SMs, would give 10.9 us)
    g = tp.rail_optimized(nodes=1)
    r = fs.serve(g, "llama-3-70b", rate=1.0, duration=2.0, prompt=16, output=4, tp=8)
    seconds, comm = r.decode_step(1, 0)
    t0 = gemm_curve("h100", "bf16")[2]
    h, f, kv, v, layers = 8192, 28672, 8 * 128, 128256, 80
    shapes = [((h + 2 * kv) / 8, h), (h, h / 8), (2 * f / 8, h), (h, f / 8)]
    layer_bytes = sum(2 * (k + n * k + n) for n, k in shapes)
    out_bytes = 2 * (h + v / 8 * h + v / 8)
    want = layers * (layer_bytes / HBM + 4 * t0 + 5 * LAUNCH_SECONDS) + out_bytes / HBM + t0 + 2 * LAUNCH_SECONDS
    assert seconds - comm == pytest.approx(want, rel=1e-12)


def test_a_one_token_prompt_costs_what_a_decode_step_of_one_sequence_does():
    # the same GEMMs at m = 1, the same router and experts (top-2 of Mixtral's 8), attention over
    # nothing cached: a prefill of one token is a decode step with an empty cache
    r = fs.serve(tp.rail_optimized(nodes=1), "mixtral-8x7b", rate=1.0, duration=2.0, prompt=16, output=4, tp=2)
    assert r.prefill_step(1, 1)[0] == pytest.approx(r.decode_step(1, 0)[0], rel=1e-12)
    # 16 tokens reach about 7 of the 8 experts (8 (1 - (6/8)^16) = 7.92): no more than all 8
    one, many = r.prefill_step(1, 1)[0], r.prefill_step(16, 1)[0]
    assert one < many < 4.5 * one


def test_prefill_of_one_long_prompt_is_its_gemms_at_the_curve_and_flash_attention(r8b):
    # 4,096 tokens: every GEMM fills the SMs (q = 1 - exp(-m n / (c SMs)) = 1 to 1e-20) and is
    # compute-bound; attention at the FA3 rate for 4,096 keys; the memory-bound kernels at 2.97 TB/s
    eta, c, t0 = gemm_curve("h100", "bf16")
    T = 4096

    def gemm(m, n, k):
        q = 1 - math.exp(-m * n / (c * 132))
        return max(2 * m * n * k / (eta * 989e12 * q), 2 * (m * k + k * n + m * n) / HBM) + t0

    layer = sum(gemm(T, n, k) for n, k in [(H + 2 * KV, H), (H, H), (2 * F, H), (H, F)])
    fwd_rate = attention_rates(tp.get_gpu("h100_sxm"), "fa3", head_dim=D, tokens=T)[0]
    layer += 2 * H * T ** 2 / fwd_rate                                  # causal: half of 4 s^2 d heads
    layer += (2 * 4 * H + 2 * (H + KV) + 3 * F) * 2 * T / HBM          # norms, RoPE, SiluAndMul (bf16)
    out = max(2 * 4 * H / HBM, LAUNCH_SECONDS) + gemm(1, V, H) + max(8 * V / HBM, LAUNCH_SECONDS)
    seconds, comm = r8b.prefill_step(T, sequences=1)
    assert comm == 0.0
    assert seconds == pytest.approx(L * layer + out, rel=1e-12)
    # the flat model's 0.46 of the peak for the same prompt is slower: the measured curve reaches ~0.8
    flat, _ = fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1,
                       compute_efficiency=0.46).prefill_step(T, sequences=1)
    assert flat > 1.3 * seconds


def test_moe_decode_reads_the_busiest_ranks_expert_with_one_fused_tail_per_product(one_server):
    # Mixtral 8x7B on EP 8, one sequence: its rank runs the attention part, the router and the
    # one expert the busiest rank holds a token for (top-2 of 8 experts on 8 ranks), 1 token through
    # it; the two fused expert products each end with one GEMM tail t0
    m = fs.get_model("mixtral-8x7b")
    r = fs.serve(one_server, "mixtral-8x7b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, ep=8)
    seconds, comm = r.decode_step(1, 0)
    eta, c, t0 = gemm_curve("h100", "bf16")
    h, f, e = m.hidden, m.ffn, m.experts
    kv = m.kv_heads * (h // m.heads)
    dense = [(h + 2 * kv, h), (h, h), (2 * f, h), (h, f)]               # QKV, proj, the expert's two
    layer_bytes = sum(2 * (k + n * k + n) for n, k in dense)
    # the router's 8 outputs keep one SM busy (the curve's share, 8 / (c x 132 SMs), is less)
    q = max(1 - math.exp(-e / (c * 132)), 1 / 132)
    router = max(2 * e * h / (eta * 989e12 * q), 2 * (h + e * h + e) / HBM) + t0
    out_bytes = 2 * (h + m.vocab * h + m.vocab)
    # launches a layer: 2 norms, RoPE, top-k, SiluAndMul, attention
    want = (L * (layer_bytes / HBM + 4 * t0 + router + 6 * LAUNCH_SECONDS)
            + out_bytes / HBM + t0 + 2 * LAUNCH_SECONDS)
    assert seconds - comm == pytest.approx(want, rel=1e-9)


def test_compute_models_by_gpu_and_refusals(one_server):
    kw = dict(rate=1.0, duration=2.0, prompt=16, output=4, tp=1)
    auto = fs.serve(one_server, "llama-3-8b", **kw).decode_step(1, 0)[0]
    none = fs.serve(one_server, "llama-3-8b", compute_efficiency=None, **kw).decode_step(1, 0)[0]
    assert auto == none
    # an H100 PCIe has no kernel tables: "auto" is the flat model (every weight once at its bandwidth)
    pcie = tp.rail_optimized(nodes=1, server="pcie_8gpu")
    gpu = tp.get_gpu("h100_pcie")
    flat = fs.serve(pcie, "llama-3-8b", hbm_efficiency=0.9, **kw).decode_step(1, 0)[0]
    assert flat == pytest.approx(2 * (L * (2 * H * H + 2 * H * KV + 3 * H * F) + V * H) / (0.9 * gpu.hbm_bandwidth),
                                 rel=1e-12)
    with pytest.raises(ValueError, match="compute_efficiency=None needs the kernel tables"):
        fs.serve(pcie, "llama-3-8b", compute_efficiency=None, hbm_efficiency=0.9, **kw)
    with pytest.raises(ValueError, match="compute_efficiency must be 'auto', None"):
        fs.serve(one_server, "llama-3-8b", compute_efficiency="kernels", **kw)
    with pytest.raises(ValueError, match="attention_efficiency"):
        fs.serve(one_server, "llama-3-8b", attention_efficiency=1.5, **kw)


def test_cli_serve_takes_the_compute_model(capsys):
    import json

    from flowsolver.cli import main

    args = ["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "1", "--rate", "2", "--duration", "2",
            "--prompt", "64", "--output", "8", "--json"]
    tpot = {}
    for model in ("kernels", "0.46"):
        assert main(args + ["--compute-efficiency", model]) == 0
        tpot[model] = json.loads(capsys.readouterr().out)[0]["tpot_p50_ms"]
    r = fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=2.0, duration=2.0, prompt=64, output=8, tp=1,
                 compute_efficiency=0.46)
    assert tpot["0.46"] == pytest.approx(r.tpot_p50 * 1e3, rel=1e-9)
    assert tpot["kernels"] > tpot["0.46"]          # the launches and GEMM tails of a one-token step
    assert main(args + ["--compute-efficiency", "fast"]) == 2
    assert "--compute-efficiency" in capsys.readouterr().err
