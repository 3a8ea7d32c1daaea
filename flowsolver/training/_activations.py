"""Activations a layer keeps for its backward pass, and the last stage's logits, per GPU and
microbatch (bytes), counted tensor by tensor from the model's shape (Korthikanti et al. 2022):
the per-layer term of :func:`flowsolver.training.memory_per_gpu`
(:mod:`flowsolver.training._memory`)."""

from __future__ import annotations

from ._recompute import FORWARD_AGAIN, kept_bytes_per_token

__all__ = ["activation_bytes_per_layer", "logits_bytes"]


def activation_bytes_per_layer(model, *, micro_batch: int, tp: int, cp: int, recompute: str,
                               sequence_parallel: bool, dropout: bool = False, fp8_activations: bool = False,
                               attention_output_kept: bool = False, capacity_factor: float = 1.0,
                               etp: int | None = None) -> float:
    """Bytes of activations one layer keeps per microbatch on one GPU for its backward pass
    (bf16), counted tensor by tensor from the model's shape as Korthikanti et al. 2022
    (section 4.1) count them, for a pre-norm transformer without dropout (Llama 3, and
    Megatron-Bridge's Llama recipes, train without): per token, the two norms' inputs
    (``2 h``), the QKV GEMM's input (``h``), Q, K and V (``h + 2 h kv_heads / heads``), the
    attention output (``h``, also the projection's input), the FC1 input(s) (``top_k h``) and
    the MLP's inner tensors (``top_k x 3 ffn`` gated: FC1's two outputs and the activation's;
    ``2 ffn`` plain). With sequence parallelism all of it is sharded over ``tp``; without,
    the norm and GEMM inputs are whole on every TP rank; a mixture of experts' FC1 inputs are
    whole on every TP rank either way (the all-to-all dispatcher all-gathers the routed tokens
    over TP after the all-to-all, and the grouped GEMM keeps what it gathered:
    ``MoEAlltoAllTokenDispatcher.dispatch_postprocess``, megatron/core/transformer/moe/token_dispatcher.py,
    NVIDIA/Megatron-LM d98e8a6; the expert TP size defaults to ``tp``, megatron/training/arguments.py).
    At expert TP 1 (``etp=1``) nothing is gathered: a GPU's experts keep the ``top_k h / tp``
    a token of the tokens routed to them (each whole expert takes its share of every EP rank's
    sequence-parallel tokens).
    For GPT-3's shape this is ``32 s b h
    / t`` (Korthikanti's ``34``, less two one-byte dropout masks); Llama 3 405B ``31.75``, 8B
    ``34``. Recompute: ``"none"`` keeps the ``2 a s^2 b / t`` bytes of attention
    probabilities an unfused attention stores (``"selective"``, flash attention, does not);
    ``"full"`` keeps only the layer's input, ``2 s b h / t``; the partial modes
    (``"save_qkv_proj"``, ``"selective_op"``) the input and what they save
    (:func:`~flowsolver.training._recompute.kept_bytes_per_token`). ``s`` is the tokens per CP rank.
    ``dropout=True`` (GPT-3, Megatron's defaults) adds what Korthikanti et al. count for it:
    the two one-byte masks of the hidden dropouts (``2 s b h``, whole on every TP rank without
    sequence parallelism) and, where the scores are kept, the attention dropout's mask and
    output (``3 a s^2 b / t``): their Table 2 then comes out exactly (``34``, ``5 a s / h``).
    ``fp8_activations=True`` (Transformer Engine's FP8 GEMMs) keeps each weight GEMM's input at
    one byte, the FP8 copy its weight-gradient GEMM reads (TE ``layernorm_linear.py`` and
    ``linear.py`` save the quantized input, one usage of it, not the 16-bit tensor): the QKV
    input (``h``), the FC1 inputs (``top_k h``), the FC2 inputs (``top_k ffn``, the
    activation's output, which nothing else keeps) and the projection's (``h``, the attention
    output). Where a fused attention kernel runs without recompute
    (``attention_output_kept=True``) it keeps its 16-bit output for its own backward (TE's
    ``FusedAttnFunc``), and the projection's one byte is a second copy beside it; recomputed
    (Megatron's selective recompute) or unfused, the one byte is the only copy. Per token,
    ``(2 + top_k) h + top_k ffn`` bytes fewer, ``(1 + top_k) h + top_k ffn`` beside a kept
    output. MXFP8's block scales (a byte per 32) are not counted; torchao's float8 keeps the
    16-bit inputs (its ``save_for_backward(input_hp, ...)``), so its runs pass False.
    ``capacity_factor`` (a mixture of experts): each expert's input is padded to, or cut at,
    ``capacity_factor x`` its even share of the routed tokens (Megatron-Core's
    ``moe_pad_expert_input_to_capacity``; the grouped GEMM saves the padded input), so the
    expert MLP's saved tensors (the FC1 inputs and the inner tensors, FP8 or not) count
    ``top_k x capacity_factor`` routed tokens a token, as the expert GEMMs and the all-to-alls
    do. The partial recompute modes keep their own count
    (:func:`~flowsolver.training._recompute.kept_bytes_per_token`), not scaled.

    >>> from flowsolver.training import get_model
    >>> activation_bytes_per_layer(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1,
    ...                            recompute="selective", sequence_parallel=True) == 34 * 8192 * 4096 / 8
    True
    >>> fp8 = activation_bytes_per_layer(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1,
    ...                                  recompute="selective", sequence_parallel=True, fp8_activations=True)
    >>> fp8 == (34 * 4096 - 3 * 4096 - 14336) * 8192 / 8
    True
    >>> mix = get_model("mixtral-8x7b")       # the gathered FC1 input, 2 h a token, whole at expert TP 2
    >>> (activation_bytes_per_layer(mix, micro_batch=1, tp=2, cp=1, recompute="selective", sequence_parallel=True)
    ...  - activation_bytes_per_layer(mix, micro_batch=1, tp=2, cp=1, recompute="selective", sequence_parallel=True,
    ...                               etp=1)) == 2 * 4096 * 2 * 4096 / 2
    True
    """
    s, b, h, a = model.seq_len / cp, micro_batch, model.hidden, model.heads
    if recompute == "full":
        return 2.0 * s * b * h / (tp if sequence_parallel else 1)
    if recompute in FORWARD_AGAIN:
        return s * b * kept_bytes_per_token(model, recompute, tp=tp, sequence_parallel=sequence_parallel)
    moe = model.experts > 1
    routed = model.top_k * (capacity_factor if moe else 1.0)    # expert rows a token, padded
    # a mixture of experts' FC1 input: the routed tokens the all-to-all dispatcher all-gathers over
    # the (expert) TP group after the all-to-all, whole on every TP rank, that its grouped GEMM keeps
    # (Megatron-Core's MoEAlltoAllTokenDispatcher.dispatch_postprocess, token_dispatcher.py)
    # (at expert TP 1 the expt_tp group has one rank: no gather, the rows stay split over the TP ranks)
    gathered = routed * h * ((tp if etp is None else etp) / tp) if moe else 0.0
    whole = 3.0 * h + (0.0 if moe else routed * h)      # norm inputs, QKV and (dense) FC1 inputs
    split = 2.0 * h + 2.0 * h * model.kv_heads / a + routed * (3 if model.gated_mlp else 2) * model.ffn
    if fp8_activations:     # the GEMM inputs at one byte (half a 16-bit value); beside a kept output, a copy
        whole -= 0.5 * (h + (0.0 if moe else routed * h))
        gathered *= 0.5
        split += (0.5 if attention_output_kept else -0.5) * h - 0.5 * routed * model.ffn
    values = (whole + split) / tp + gathered if sequence_parallel else whole + gathered + split / tp
    per_layer = 2.0 * s * b * values
    if dropout:                                         # two one-byte masks of s b h
        per_layer += 2.0 * s * b * h / (tp if sequence_parallel else 1)
    if recompute == "none":                             # local queries x all keys, bf16
        per_layer += (5.0 if dropout else 2.0) * a * s * model.seq_len * b / tp
    return per_layer


def logits_bytes(model, *, micro_batch: int, tp: int, cp: int) -> float:
    """Bytes the loss keeps per microbatch on the last stage: the softmax of the
    vocabulary-parallel logits, ``vocab / tp`` values per token in fp32 (Megatron-Core's
    ``vocab_parallel_cross_entropy`` saves it for its backward; the logits reach it in
    fp32 unless ``fp16_lm_cross_entropy``).

    >>> from flowsolver.training import get_model
    >>> logits_bytes(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1) == 8192 * 128256 / 8 * 4
    True
    """
    return 4.0 * micro_batch * model.seq_len / cp * model.vocab / tp
