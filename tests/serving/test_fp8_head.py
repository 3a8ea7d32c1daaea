"""FP8 serving keeps the embedding and LM head in bf16 (adv20a F3): vLLM's FP8 quantizes the
Linear modules but the lm_head, llm-compressor's FP8 recipes ignore "lm_head"."""

import warnings

import pytest
import topologies as tp

import flowsolver as fs

HBM = 2.97e12 / 3.35e12          # the tester's achieved HBM3 rate of one H100 SXM, 2.97 of 3.35 TB/s


def _run():
    warnings.simplefilter("ignore")
    g = tp.rail_optimized(nodes=1)
    return fs.serve(g, "llama-3-8b", rate=1.0, duration=2.0, prompt=128, output=8, tp=1, ranks=[0],
                    precision="fp8", compute_efficiency=0.44, hbm_efficiency=HBM)


def test_fp8_decode_reads_the_lm_head_at_two_bytes():
    r = _run()
    m = fs.MODELS["llama-3-8b"]
    bw = 2.97e12
    body = m.layers * (m.attention_params + m.mlp_params)
    hand = (1.0 * body + 2.0 * m.vocab * m.hidden) / bw                 # ~2.704 ms (was 2.527: head at 1 byte)
    seconds, comm = r.decode_step(1, 0)
    assert seconds - comm == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(2.704e-3, abs=1e-6)


def test_fp8_kv_capacity_leaves_room_for_bf16_embedding_and_head():
    r = _run()
    m = fs.MODELS["llama-3-8b"]
    free = tp.get_gpu("h100_sxm").memory * 0.9                          # default memory_utilization 0.9
    body = m.layers * (m.attention_params + m.mlp_params)
    per_token = 2 * m.layers * m.kv_heads * (m.hidden // m.heads) * 2   # K and V, bf16: 131,072 B
    # fix22c: less one layer's activations for the 8,192-token step (bf16, 2 B x 8,192 x (2 x 4,096 + 3 x 14,336))
    # and vLLM's logged 1.79 GiB of runtime memory on one GPU
    other = 2 * 8192 * (2 * m.hidden + 3 * m.ffn) + 1.79 * 1024**3
    assert r.kv_capacity == (free - body - 2 * m.embedding_params - other) // per_token     # 496,881 (was 517,945)


def test_fp8_compute_bound_decode_runs_the_lm_head_at_the_bf16_peak():
    # adv20d F3: the flat step divided the head's FLOPs by the FP8 peak; at batch 1024 a decode
    # step is compute-bound and the head, kept bf16, runs at half the FP8 rate
    from flowsolver.serving._steps import InstanceLayout, StepModel
    m, gpu = fs.MODELS["llama-3-8b"], tp.get_gpu("h100_sxm")
    sm = StepModel(m, gpu, InstanceLayout(1, 1, 1, (0,)), "fp8", 2.0, 0.44, 0.62, 3.35e12)
    assert sm.kernels is None                                          # the flat model
    b = 1024
    body = 2.0 * b * m.layers * (m.attention_params + m.mlp_params)
    head = 2.0 * b * m.vocab * m.hidden
    hand = body / (gpu.peak_fp8_flops * 0.44) + head / (gpu.peak_bf16_flops * 0.44)    # 18.89 ms
    assert sm.decode_seconds(b, 0) == pytest.approx(hand, rel=1e-12)
