"""The flat compute model charges a recomputed layer's attention forward again to the layers that
run it (fix19a): with ``recompute="full"`` and ``recompute_layers`` (Megatron's
``recompute_num_layers``, the first ``n`` layers of a chunk) only those ``n`` layers run their
forward again, attention included; ``"selective"`` checkpoints the core attention in every layer
(its forward again in each); ``"selective_op"`` keeps the attention output (no attention again).
Until fix19a every layer of the stage was charged the attention forward again under ``"full"``
/ ``"save_qkv_proj"``, whatever ``recomputed`` said.

Hand counts: Llama 3 8B (h 4096, 8 of 32 heads for K and V, ffn 14336 gated, vocab 128256,
8192 tokens), per token and layer the weight GEMMs ``G = 6 x`` the layer's parameters and the
causal attention ``A = 6 h s`` (forward ``2 h s``, backward twice that); the recomputed forward
is a third of each. Peaks from the GPU entry (H100 SXM: 989 / 1979 TFLOP/s dense bf16 / FP8).
"""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import get_model
from flowsolver.training._compute import stage_seconds

H100 = tp.get_gpu("h100_sxm")
L8B = get_model("llama-3-8b")
H, KV, FFN, VOCAB, SEQ = 4096, 1024, 14336, 128256, 8192
G = 6 * (H * (H + 2 * KV) + H * H + 3 * H * FFN)          # QKV, proj, gated FC1 (2 x), FC2
A = 6 * H * SEQ                                            # causal attention, forward and backward
OUT = 6 * VOCAB * H                                        # the logits
EFF, ATT = 0.5, 0.62
KW = dict(tokens=SEQ, shards=1, gpu=H100, precision="fp8", efficiency=EFF, attention_efficiency=ATT)


def _hand(gemm_layers, attention_layers, last=False):
    """Seconds of a stage whose GEMMs run ``gemm_layers`` layers' worth and attention
    ``attention_layers`` layers' worth (a layer's forward again: a third of a layer)."""
    fp8, bf16 = H100.peak_fp8_flops, H100.peak_bf16_flops
    seconds = gemm_layers * G / (fp8 * EFF) + attention_layers * A / (bf16 * ATT)
    return SEQ * (seconds + (OUT / (bf16 * EFF) if last else 0.0))


def test_the_hand_counts_are_the_models_arithmetic():
    assert (L8B.layer_linear_flops, L8B.layer_attention_flops(), L8B.output_flops) == (G, A, OUT)
    assert (H100.peak_bf16_flops, H100.peak_fp8_flops) == (989e12, 1979e12)


@pytest.mark.parametrize("recompute,recomputed,gemm_layers,attention_layers", [
    ("none", None, 32, 32),
    ("selective", None, 32, 32 + 32 / 3),          # the core attention's forward again, every layer
    ("full", 32, 32 + 32 / 3, 32 + 32 / 3),        # all 32 layers' forward again
    ("full", 5, 32 + 5 / 3, 32 + 5 / 3),           # recompute_num_layers=5: 5 layers' forward again
    ("full", 0, 32, 32),
], ids=["none", "selective", "full-32", "full-5", "full-0"])
def test_the_attention_forward_again_is_charged_to_the_layers_that_run_it(recompute, recomputed, gemm_layers,
                                                                         attention_layers):
    for last in (False, True):
        t = stage_seconds(L8B, 32, last, recompute=recompute, recomputed=recomputed, **KW)
        assert t == pytest.approx(_hand(gemm_layers, attention_layers, last), rel=1e-13)


def test_the_partial_modes_charge_attention_as_their_policies_say():
    # save_qkv_proj recomputes all but Q, K, V (attention included) in its recomputed layers;
    # selective_op keeps the attention kernel's output: no attention again in any layer
    h, kv, f = H, KV, FFN
    params = dict(qkv=h * (h + 2 * kv), proj=h * h, fc1=2 * h * f, fc2=f * h)
    qkv_share = (params["proj"] + params["fc1"]) / sum(params.values())
    op_share = (h * kv + params["proj"] + h * f) / sum(params.values())      # wk, wo, w3
    t = stage_seconds(L8B, 32, False, recompute="save_qkv_proj", recomputed=5, **KW)
    assert t == pytest.approx(_hand(32 + 5 * qkv_share / 3, 32 + 5 / 3), rel=1e-13)
    t = stage_seconds(L8B, 32, False, recompute="selective_op", recomputed=5, **KW)
    assert t == pytest.approx(_hand(32 + 5 * op_share / 3, 32), rel=1e-13)


def test_a_step_with_five_recomputed_layers_charges_five_attention_forwards():
    # the published Megatron-Bridge Llama 3 8B FP8 row's shape (DP 8, recompute_num_layers=5),
    # one microbatch of 8192 tokens per GPU: the step's compute is the hand count's
    r = training_step(tp.rail_optimized(1), L8B, Parallelism(dp=8),
                      Schedule(16, precision="fp8", recompute="full", recompute_layers=5,
                               compute_efficiency=EFF, attention_efficiency=ATT))
    assert r.microbatches == 2
    assert r.compute_time == pytest.approx(2 * _hand(32 + 5 / 3, 32 + 5 / 3, last=True), rel=1e-12)
