"""Transformer Engine's FP8 keeps each weight GEMM's input at one byte (the quantized copy its
weight-gradient GEMM reads: TE layernorm_linear.py / linear.py save it, not the 16-bit tensor).
Hand counts per token of one Llama layer (sequence parallel, so everything is split over tp):

bf16: norm inputs 2h, QKV input h, FC1 input h, Q K V (h + 2 h kv / a), attention output h
(also the projection's input), FC1's two outputs 2 ffn, the activation's output ffn: two bytes
each. FP8: the QKV, FC1, FC2 (the activation's output) and projection (the attention output)
inputs at one byte: ``3 h + ffn`` bytes fewer per token; where a fused attention runs without
recompute it keeps its 16-bit output (TE's FusedAttnFunc) and the projection's one byte is a
second copy: ``h + ffn`` fewer."""

import pytest

import topologies as tp
from flowsolver import training_step
from flowsolver.planning import layout_space
from flowsolver.training import get_model, memory_per_gpu
from flowsolver.training._memory import activation_bytes_per_layer


def test_fp8_activations_keep_the_gemm_inputs_at_one_byte():
    m = get_model("llama-3-70b")                       # h 8192, ffn 28672, 8 of 64 heads for K and V
    h, ffn, s = 8192, 28672, 8192
    kw = dict(micro_batch=1, tp=1, cp=1, recompute="selective", sequence_parallel=True)
    bf16 = 2 * s * (2 * h + h + h + (h + 2 * h * 8 / 64) + h + 3 * ffn)
    fp8 = 2 * s * (2 * h + (h + 2 * h * 8 / 64) + 2 * ffn) + s * (h + h + ffn + h)
    kept = fp8 + 2 * s * h                             # the fused attention's own 16-bit output
    assert activation_bytes_per_layer(m, **kw) == pytest.approx(bf16, rel=1e-12)
    assert activation_bytes_per_layer(m, fp8_activations=True, **kw) == pytest.approx(fp8, rel=1e-12)
    assert activation_bytes_per_layer(m, fp8_activations=True, attention_output_kept=True,
                                      **kw) == pytest.approx(kept, rel=1e-12)
    assert bf16 - fp8 == s * (3 * h + ffn) and bf16 - kept == s * (h + ffn)
    # a plain MLP (GPT-3): FC1's output kept in 16 bits for the GeLU's backward, FC2's input at one byte
    g = get_model("gpt-3-175b")
    hg, fg, sg = g.hidden, g.ffn, g.seq_len
    saved = activation_bytes_per_layer(g, **kw) - activation_bytes_per_layer(g, fp8_activations=True, **kw)
    assert saved == pytest.approx(sg * (3 * hg + fg), rel=1e-12)
    # MoE (Mixtral, top 2): each routed token's FC1 and FC2 inputs at one byte, twice
    x = get_model("mixtral-8x7b")
    saved = activation_bytes_per_layer(x, **kw) - activation_bytes_per_layer(x, fp8_activations=True, **kw)
    assert saved == pytest.approx(x.seq_len * ((2 + 2) * x.hidden + 2 * x.ffn), rel=1e-12)
    # full recompute keeps only the layer's 16-bit input, in FP8 as in bf16
    full = dict(kw, recompute="full")
    assert activation_bytes_per_layer(m, fp8_activations=True, **full) == activation_bytes_per_layer(m, **full)


def test_an_fp8_step_on_transformer_engine_counts_its_one_byte_activations():
    # one stage, one microbatch in flight: the step's memory falls by the layers' 3 h + ffn bytes
    # a token with selective recompute, h + ffn without (the flash attention keeps its output),
    # split over tp by sequence parallelism; torchao's float8 keeps the 16-bit inputs
    g = tp.rail_optimized(1)
    m = get_model("llama-3-8b")
    common = dict(model=m, global_batch=8, tp=8, pp=1, dp=1, micro_batch=1)
    per = m.layers * m.seq_len / 8
    for recompute, saved in (("selective", 3 * m.hidden + m.ffn), ("none", m.hidden + m.ffn)):
        bf16 = training_step(g, precision="bf16", recompute=recompute, **common).memory_per_gpu
        te = training_step(g, precision="fp8", recompute=recompute, **common).memory_per_gpu
        torchao = training_step(g, precision="fp8", fp8_recipe="tensorwise", recompute=recompute,
                                **common).memory_per_gpu
        assert bf16 - te == pytest.approx(per * saved, rel=1e-9)
        assert torchao == bf16
        assert te == memory_per_gpu(m, tp=8, pp=1, dp=1, microbatches=8, recompute=recompute, attention="auto",
                                    fp8_activations=True)


def test_the_planner_prunes_with_the_fp8_activations():
    spec = get_model("llama-3-8b")
    grid = dict(gpu_memory=1e12, tp=8, cp=1, pp=1, vp=1, micro_batch=1, recompute="selective", zero=1,
                sequence_parallel=True, orders="tp-cp-dp-pp")
    plain = layout_space(spec, 8, 8, attention="auto", **grid).memory[0]
    fp8 = layout_space(spec, 8, 8, attention="auto", fp8_activations=True, **grid).memory[0]
    assert plain - fp8 == pytest.approx(spec.layers * spec.seq_len * (3 * spec.hidden + spec.ffn) / 8, rel=1e-9)


def test_fp8_activations_must_be_a_bool():
    with pytest.raises(TypeError, match="fp8_activations"):
        memory_per_gpu("llama-3-8b", tp=8, pp=1, dp=1, fp8_activations="yes")
