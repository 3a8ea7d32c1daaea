"""adv19b F6 (memory part): with TP (and its required sequence parallelism) a mixture of experts'
grouped GEMM keeps the routed tokens the all-to-all dispatcher all-gathered over TP after the
all-to-all (Megatron-Core's MoEAlltoAllTokenDispatcher.dispatch_postprocess,
megatron/core/transformer/moe/token_dispatcher.py): its FC1 inputs, top_k x capacity_factor of
them a token, are whole on every TP rank, not split over tp."""

import pytest

from flowsolver.training import get_model
from flowsolver.training._memory import activation_bytes_per_layer

# Mixtral 8x7B by hand: hidden 4096, 8 KV heads of 128, FFN 14336 (gated), top 2; 4096 tokens
H, KV, FFN, TOP_K, S = 4096, 8 * 128, 14336, 2, 4096


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("cf", [1.0, 1.5])
def test_moe_fc1_input_is_whole_on_every_tp_rank(tp, cf):
    spec = get_model("mixtral-8x7b")
    # sharded by SP: the two norm inputs, the QKV input, Q, K and V, the attention output, the
    # experts' inner tensors (column-parallel); whole: the gathered expert inputs
    sharded = 2 * H + H + H + 2 * KV + H + TOP_K * cf * 3 * FFN
    hand = 2 * S * (sharded / tp + TOP_K * cf * H)
    got = activation_bytes_per_layer(spec, micro_batch=1, tp=tp, cp=1, recompute="selective",
                                     sequence_parallel=True, capacity_factor=cf)
    assert got == pytest.approx(hand, rel=1e-12)


def test_fp8_keeps_the_gathered_input_at_one_byte():
    spec = get_model("mixtral-8x7b")
    kw = dict(micro_batch=1, tp=2, cp=1, recompute="selective", sequence_parallel=True)
    saved = activation_bytes_per_layer(spec, **kw) - activation_bytes_per_layer(spec, fp8_activations=True, **kw)
    # one byte fewer per value: the QKV input and projection input (h each, sharded) and the
    # experts' FC2 inputs (top_k ffn, sharded), and the gathered FC1 inputs (top_k h, whole)
    assert saved == pytest.approx(S * ((2 * H + TOP_K * FFN) / 2 + TOP_K * H), rel=1e-12)


def test_dense_and_tp1_unchanged():
    x = get_model("mixtral-8x7b")
    tp1 = activation_bytes_per_layer(x, micro_batch=1, tp=1, cp=1, recompute="selective", sequence_parallel=True)
    assert tp1 == 2 * S * (2 * H + H + H + 2 * KV + H + TOP_K * H + TOP_K * 3 * FFN)
    m = get_model("llama-3-8b")
    assert activation_bytes_per_layer(m, micro_batch=1, tp=8, cp=1, recompute="selective",
                                      sequence_parallel=True) == 34 * 8192 * 4096 / 8
