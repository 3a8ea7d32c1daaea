"""The FLOPs a step's trace gives its compute nodes (Chakra's ``num_ops``): the floating-point
operations the GPU executes, one meaning in every compute mode, counted by hand from the
model's shapes (adv18b finding 2: the flat model annotated seconds x its GEMM rate, the
kernel tables seconds x the step's model-FLOP rate: 0.968 / 1.000 / 1.270 / 1.000 of the model
FLOPs for the same step, flat / kernels, without / with full recompute)."""

import dataclasses

import pytest

import topologies as tp
from flowsolver import training_step
from flowsolver.training import get_model
from flowsolver.traces import workload_from_step

# Llama 3 8B (Llama 3 paper, table 3): 32 layers, model dim 4096, FFN 14336, 32 heads, 8 KV
# heads (head dim 128), vocabulary 128,256; sequence 8,192
L, H, FFN, KV_DIM, V, S = 32, 4096, 14336, 8 * 128, 128256, 8192
LAYER_PARAMS = 2 * H * H + 2 * H * KV_DIM + 3 * H * FFN       # Q, O; K, V; gate, up, down
ATTENTION = 4 * H * S // 2            # forward QK^T and AV, 2 x 2 h s over the square, halved by the causal mask


def _per_token(layers_again=0, attention_again=0):
    """Executed FLOPs per token: per layer forward 2 x params + attention, backward twice that;
    the output projection 2 V h forward, twice that backward; each recomputed layer's forward
    again, each layer's attention forward again under selective recompute."""
    forward = 2 * LAYER_PARAMS + ATTENTION
    return 3 * L * forward + 3 * 2 * V * H + layers_again * forward + attention_again * ATTENTION


def _rank0_flops(step):
    return sum(n.flops for n in workload_from_step(step).ranks[0].nodes if n.kind == "compute")


def _all_flops(step):
    return sum(n.flops for r in workload_from_step(step).ranks for n in r.nodes if n.kind == "compute")


@pytest.mark.parametrize("efficiency", [0.46, None], ids=["flat", "kernels"])
@pytest.mark.parametrize("recompute, layers_again, attention_again", [
    ("none", 0, 0), ("full", L, 0), ("selective", 0, L)])
def test_a_gpu_s_trace_flops_are_its_executed_flops_in_every_compute_mode(efficiency, recompute, layers_again,
                                                                          attention_again):
    # 4 sequences of 8,192 tokens over 16 GPUs (TP 8 x DP 2): each GPU executes 1/16 of the
    # work; full recompute runs every layer's forward again (4/3 of the layers' FLOPs)
    step = training_step(tp.rail_optimized(2), "llama-3-8b", tp=8, global_batch=4, dp_overlap=0,
                         compute_efficiency=efficiency, recompute=recompute)
    expected = 4 * S * _per_token(layers_again, attention_again) / 16
    assert _rank0_flops(step) == pytest.approx(expected, rel=1e-9)


def test_the_hand_count_is_the_library_s_model_count():
    # the hand count without recompute is 6 x params x tokens + attention, the model FLOPs the
    # step's MFU counts (ModelSpec.flops_per_token); with full recompute 4/3 of its layers' part
    model = get_model("llama-3-8b")
    assert _per_token() == model.flops_per_token
    assert _per_token(L) == pytest.approx(model.flops_per_token + L * (model.layer_linear_flops
                                                                       + model.layer_attention_flops()) / 3,
                                          rel=1e-15)


def test_block_recompute_adds_the_forward_of_the_recomputed_layers_only():
    # recompute_layers=5 (Megatron-Bridge's Llama 3 8B FP8 setting): 5 forwards again, not 32
    step = training_step(tp.rail_optimized(1), "llama-3-8b", tp=8, global_batch=2, compute_efficiency=0.46,
                         recompute="full", recompute_layers=5)
    assert _rank0_flops(step) == pytest.approx(2 * S * _per_token(5) / 8, rel=1e-9)


@pytest.mark.parametrize("efficiency", [0.46, None], ids=["flat", "kernels"])
def test_every_gpu_s_share_adds_up_over_context_and_pipeline_parallelism(efficiency):
    # 8 layers over TP 4 x CP 2 x PP 2 x DP 2 (32 GPUs): the ranks together execute the whole
    # batch once; ring attention's blocks each carry their share of the attention
    model = dataclasses.replace(get_model("llama-3-8b"), name="llama-8-layers", layers=8)
    step = training_step(tp.rail_optimized(4), model, tp=4, cp=2, pp=2, global_batch=8, dp_overlap=0,
                         compute_efficiency=efficiency, recompute="none")
    per_token = 3 * 8 * (2 * LAYER_PARAMS + ATTENTION) + 3 * 2 * V * H
    assert _all_flops(step) == pytest.approx(8 * S * per_token, rel=1e-9)
    w = workload_from_step(step)
    blocks = [n for n in w.ranks[0].nodes if n.name.startswith("F0.c0.L0.attention.F")]
    per_gpu_tokens = step.profile.micro_batch * S / (4 * 2)
    assert [n.flops for n in blocks] == pytest.approx([per_gpu_tokens * ATTENTION / 2] * 2, rel=1e-12)


def test_padded_experts_execute_their_padding():
    # Mixtral 8x7B (Jiang et al. 2024, table 1: 32 layers, dim 4096, FFN 14336, 8 KV heads,
    # vocabulary 32,000, top 2 of 8 experts; sequence 4,096 here) at capacity factor 2: every
    # expert runs on twice its share of the routed tokens, so its GEMMs execute twice the FLOPs
    # (the model FLOPs count them once)
    h, ffn, kv, v, s = 4096, 14336, 8 * 128, 32000, 4096
    expert = 3 * h * ffn
    forward = 2 * (2 * h * h + 2 * h * kv) + 2 * 2 * 2 * expert + 2 * h * s
    step = training_step(tp.rail_optimized(2), "mixtral-8x7b", tp=2, ep=8, global_batch=16, capacity_factor=2.0,
                         compute_efficiency=0.46, recompute="none")
    assert _all_flops(step) == pytest.approx(16 * s * (3 * 32 * forward + 3 * 2 * v * h), rel=1e-9)
