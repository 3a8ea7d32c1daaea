"""The memory estimate against the ZeRO bytes per parameter, activations counted tensor by
tensor from the model's shape, and Megatron's pipeline warm-up counts."""

import pytest

import topologies as tp
from flowsolver import get_model, training_step
from flowsolver.training import memory_per_gpu, stage_memory


def _layer_params(m):
    """Q and O (h x h), K and V (h x kv), three SwiGLU matrices (h x ffn)."""
    kv = m.hidden // m.heads * m.kv_heads
    return 2 * m.hidden ** 2 + 2 * m.hidden * kv + 3 * m.hidden * m.ffn


def _layer_bytes(m, s, tp, top_k=1):
    """bf16 bytes one layer keeps per microbatch of ``s`` tokens with sequence parallelism
    (sharded over tp) and flash attention: the two norm inputs, the QKV input, Q, K, V, the
    attention output, the FC1 input(s), FC1's two SwiGLU outputs and the SwiGLU output."""
    kv = m.hidden // m.heads * m.kv_heads
    values = 2 * m.hidden + m.hidden + m.hidden + 2 * kv + m.hidden + top_k * m.hidden + top_k * 3 * m.ffn
    return 2 * s * values / tp


def test_memory_estimate_follows_the_zero_bytes_and_the_activations_of_each_stage():
    m = get_model("llama-3-70b")
    n, layer, table = m.params, _layer_params(m), m.vocab * m.hidden
    act = _layer_bytes(m, 8192, 8)
    logits = 4 * 8192 * m.vocab / 8                     # the loss's fp32 softmax, vocab / tp per token
    assert act == 33.5 * 8192 * 8192 / 8                 # GQA and SwiGLU: 33.5 s h / t, not GPT's 34
    assert memory_per_gpu(m, tp=8, pp=1, dp=8, zero=1) == pytest.approx(
        4 * n / 8 + 12 * n / 64 + 80 * act + logits, rel=1e-12)
    # ZeRO 3 without a pipeline: besides the shards, two layers' weights and gradients unsharded (the layer
    # computing and the one prefetched / the one awaiting its reduce-scatter) and the root's (both tables)
    gathered = (2 * table + 2 * layer) / 8
    assert memory_per_gpu(m, tp=8, pp=1, dp=8, zero=3) == pytest.approx(
        16 * n / 64 + (2 + 2) * gathered + 80 * act + logits, rel=1e-12)
    # 1F1B on 4 stages: stage 0 holds its 20 layers and the embedding, 4 microbatches in flight;
    # the last stage its 20 layers and the output projection, one microbatch and its logits
    stages = stage_memory(m, tp=8, pp=4, dp=2, zero=1, microbatches=16)
    held = (20 * layer + table) / 8
    assert stages[0] == pytest.approx(4 * held + 12 * held / 2 + 4 * 20 * act, rel=1e-12)
    assert stages[3] == pytest.approx(4 * held + 12 * held / 2 + 20 * act + logits, rel=1e-12)
    assert memory_per_gpu(m, tp=8, pp=4, dp=2, zero=1, microbatches=16) == max(stages)
    g = tp.rail_optimized(8)
    r = training_step(g, model=m, tp=8, global_batch=8)
    assert r.fits and r.stage_memory == (r.memory_per_gpu,)                          # ~71.5 of 80 GB
    assert not training_step(g, model=m, tp=1, global_batch=64, zero=1).fits       # 4 bytes x 70.6 B per GPU


def test_uneven_interleaved_stages_peak_on_the_second_stage():
    # Llama 3 405B as the paper runs it on 8,192 GPUs: 126 layers on 16 stages of 8 one-layer
    # chunks (the first chunk of stage 0 only the embedding, the last of stage 15 only the loss),
    # 32 microbatches, gradients and optimizer state sharded over DP 64 (its FSDP)
    m = get_model("llama-3-405b")
    layer, table = _layer_params(m), m.vocab * m.hidden
    act, logits = _layer_bytes(m, 8192, 8), 4 * 8192 * m.vocab / 8
    per_param = 2 + 2 / 64 + 12 / 64
    stages = stage_memory(m, tp=8, pp=16, dp=64, vp=8, zero=2, microbatches=32)
    # Megatron's warm-up on stage q: 2 (pp - 1 - q) + (vp - 1) pp forwards, + 1 in the steady state.
    # Stage 1: 141 one-layer chunks. Stage 0: 143, of which 31 run the embedding-only chunk.
    assert stages[1] == pytest.approx(per_param * 8 * layer / 8 + 141 * act, rel=1e-12)
    assert stages[0] == pytest.approx(per_param * (7 * layer + table) / 8 + 112 * act, rel=1e-12)
    # stage 15: 112 one-layer forwards of its first 7 chunks, then the loss chunk one microbatch
    # at a time (112 layers and one softmax), then the next group of 16 microbatches starts on
    # chunk 0 before the backwards reach chunk 6: 113 layers, more than 112 and the softmax
    assert act > logits
    assert stages[15] == pytest.approx(per_param * (7 * layer + table) / 8 + 113 * act, rel=1e-12)
    assert max(stages) == stages[1]
    # 1F1B holds pp - q microbatches of the stage's layers: 15 x 8 on stage 1
    assert stage_memory(m, tp=8, pp=16, dp=64, zero=2, microbatches=32)[1] == pytest.approx(
        per_param * 8 * layer / 8 + 120 * act, rel=1e-12)


def test_memory_estimate_shards_experts_over_ep_and_checks_its_arguments():
    m = get_model("mixtral-8x7b")
    dense, experts = m.params - m.expert_params, m.expert_params
    act = 32 * _layer_bytes(m, 4096, 2, top_k=2) + 4 * 4096 * m.vocab / 2
    # ZeRO 0: 16 bytes per parameter held, the experts split over ep as well; the optimizer
    # step's fp32 gradient copy (4 bytes, Megatron's table: 20 in all) needs more than the
    # activations it follows
    held = dense / 2 + experts / 8
    assert 4 * held > act
    assert memory_per_gpu(m, tp=2, pp=1, dp=4, ep=4, zero=0) == pytest.approx(16 * held + 4 * held, rel=1e-12)
    # ZeRO 1: the experts' optimizer state over their own DP group, dp / ep = 1 rank
    step_copy = 4 * dense / 2 / 4 + 4 * experts / 8
    assert memory_per_gpu(m, tp=2, pp=1, dp=4, ep=4, zero=1) == pytest.approx(
        4 * (dense / 2 + experts / 8) + 12 * dense / 2 / 4 + 12 * experts / 8 + max(act, step_copy), rel=1e-12)
    with pytest.raises(ValueError, match="zero must be 0, 1, 2 or 3, got 4"):
        memory_per_gpu(m, tp=1, pp=1, dp=1, zero=4)
    with pytest.raises(ValueError, match="tp must be an integer >= 1, got 0"):
        memory_per_gpu(m, tp=0, pp=1, dp=1)
    with pytest.raises(ValueError, match=r"ep \(3\) must divide dp x cp \(4 x 1\)"):
        memory_per_gpu(m, tp=1, pp=1, dp=4, ep=3)
