"""Memory per GPU of mixed-precision Adam training, stage by stage: weights, gradients,
optimizer state and the activations the pipeline schedule keeps in flight.

Per parameter (ZeRO paper, Rajbhandari et al. 2020): bf16 weights 2 bytes, bf16 gradients
2 (4 with ``grad_bytes=4``: accumulated in fp32), fp32 master weights and Adam's two moments 12. ZeRO stage 1 (Megatron's distributed
optimizer) shards the 12 over the gradient group, stage 2 also the gradients (the Llama 3
paper's FSDP, section 3.3.2, shards the optimizer state and the gradients but keeps the
weights after the forward pass), stage 3 also the weights. Megatron-Bridge's Llama
performance recipes keep 16-bit gradient buffers (``grad_reduce_in_fp32 = False``);
Megatron-LM's distributed-optimizer table counts ``4 + 16 / d`` bytes for them, the extra
``4 / d`` an fp32 copy of the gradient shard made for the optimizer step, after the
activations are freed: a stage needs the larger of its activations and that copy on top of
its states. Runs that accumulate gradients in fp32 (Megatron-LM's default for bf16,
``6 + 12 / d``) pass ``grad_bytes=4``. Not counted: FP8 copies of weights and FP8
activations (Transformer Engine), communication buffers, CUDA / NCCL workspace and
fragmentation (benchmarks/validation/memory.csv holds the published figures this is checked
against, tests/training/test_memory_published.py the errors).
"""

from __future__ import annotations

from functools import lru_cache

from .. import _checks
from ._compute import check_recompute
from ._models import get_model
from ._pipeline import chunk_layers, peak_in_flight

__all__ = ["memory_per_gpu", "stage_memory", "ZERO_STAGES", "check_zero", "activation_bytes_per_layer", "logits_bytes",
           "model_state_bytes"]

ZERO_STAGES = (0, 1, 2, 3)


def activation_bytes_per_layer(model, *, micro_batch: int, tp: int, cp: int, recompute: str,
                               sequence_parallel: bool, dropout: bool = False) -> float:
    """Bytes of activations one layer keeps per microbatch on one GPU for its backward pass
    (bf16), counted tensor by tensor from the model's shape as Korthikanti et al. 2022
    (section 4.1) count them, for a pre-norm transformer without dropout (Llama 3, and
    Megatron-Bridge's Llama recipes, train without): per token, the two norms' inputs
    (``2 h``), the QKV GEMM's input (``h``), Q, K and V (``h + 2 h kv_heads / heads``), the
    attention output (``h``, also the projection's input), the FC1 input(s) (``top_k h``) and
    the MLP's inner tensors (``top_k x 3 ffn`` gated: FC1's two outputs and the activation's;
    ``2 ffn`` plain). With sequence parallelism all of it is sharded over ``tp``; without,
    the norm and GEMM inputs are whole on every TP rank. For GPT-3's shape this is ``32 s b h
    / t`` (Korthikanti's ``34``, less two one-byte dropout masks); Llama 3 405B ``31.75``, 8B
    ``34``. Recompute: ``"none"`` keeps the ``2 a s^2 b / t`` bytes of attention
    probabilities an unfused attention stores (``"selective"``, flash attention, does not);
    ``"full"`` keeps only the layer's input, ``2 s b h / t``. ``s`` is the tokens per CP rank.
    ``dropout=True`` (GPT-3, Megatron's defaults) adds what Korthikanti et al. count for it:
    the two one-byte masks of the hidden dropouts (``2 s b h``, whole on every TP rank without
    sequence parallelism) and, where the scores are kept, the attention dropout's mask and
    output (``3 a s^2 b / t``): their Table 2 then comes out exactly (``34``, ``5 a s / h``).

    >>> from flowsolver.training import get_model
    >>> activation_bytes_per_layer(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1,
    ...                            recompute="selective", sequence_parallel=True) == 34 * 8192 * 4096 / 8
    True
    """
    s, b, h, a = model.seq_len / cp, micro_batch, model.hidden, model.heads
    if recompute == "full":
        return 2.0 * s * b * h / (tp if sequence_parallel else 1)
    whole = 3.0 * h + model.top_k * h                   # norm inputs, QKV and FC1 inputs
    split = 2.0 * h + 2.0 * h * model.kv_heads / a + model.top_k * (3 if model.gated_mlp else 2) * model.ffn
    values = (whole + split) / tp if sequence_parallel else whole + split / tp
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


def check_zero(zero) -> int:
    """The ZeRO stage as an int (0 plain all-reduce, 1 / 2 distributed optimizer, 3 FSDP).

    >>> check_zero(3)
    3
    """
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    return int(zero)


def model_state_bytes(params: float, *, shards: int = 1, zero: int = 0, param_bytes: int = 2,
                      grad_bytes: int = 2) -> tuple:
    """Bytes per GPU of the model states of ``params`` parameters under mixed-precision Adam,
    ZeRO stage ``zero`` sharding over ``shards`` ranks: ``(resident, at_step)``.

    ``resident`` is held through the step: weights (``param_bytes``; sharded from stage 3),
    gradients (``grad_bytes``, 2 for bf16 / fp16 buffers, 4 when accumulated in fp32;
    sharded from stage 2), fp32 master weights (4, none when the weights are fp32) and Adam's
    two fp32 moments (8), sharded from stage 1. ``at_step`` is what the optimizer step adds
    after the activations are freed: an fp32 copy of the (owned shard of the) gradients when
    they are 16-bit (Megatron's ``main_grad`` copy; 0 for fp32 gradients).

    With 16-bit weights and gradients ``resident`` is the ZeRO paper's ``(2 + 2 + K) Psi``
    with ``K = 12`` and its sharded forms (Rajbhandari et al. 2020, Figure 1: 7.5 B
    parameters, 64 ranks: 120, 31.4, 16.6 and 1.9 GB); ``resident + at_step`` per parameter
    is Megatron-LM's distributed-optimizer table (``20`` / ``4 + 16 / d`` for fp16 weights and
    gradients, ``18`` / ``6 + 12 / d`` for bf16 weights with fp32 gradients, ``16`` / ``8 + 8 / d``
    for fp32).

    >>> [round(sum(model_state_bytes(1, shards=8, zero=z, grad_bytes=g)), 3) for z, g in ((0, 2), (1, 2), (1, 4))]
    [20.0, 6.0, 7.5]
    """
    zero = check_zero(zero)
    if param_bytes not in (2, 4) or grad_bytes not in (2, 4):
        raise ValueError(f"param_bytes and grad_bytes must be 2 (bf16 / fp16) or 4 (fp32), got {param_bytes!r} and "
                         f"{grad_bytes!r}")
    optimizer = (4.0 if param_bytes == 2 else 0.0) + 8.0
    resident = params * (param_bytes / (shards if zero >= 3 else 1) + grad_bytes / (shards if zero >= 2 else 1)
                         + optimizer / (shards if zero >= 1 else 1))
    at_step = params * (4.0 if grad_bytes == 2 else 0.0) / (shards if zero >= 1 else 1)
    return resident, at_step


@lru_cache(maxsize=1 << 16)     # a planner asks again, composing the layouts it enumerated
def _stages(spec, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, recompute, sequence_parallel,
            recompute_layers, grad_bytes=2, flash=False) -> tuple:
    chunks = chunk_layers(spec.layers, pp, vp)
    moe = spec.experts > 1
    dense_layer = spec.attention_params + (0 if moe else spec.mlp_params)
    expert_layer = spec.experts * spec.mlp_params if moe else 0
    table = spec.vocab * spec.hidden
    act = dict(micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel)
    # a fused (flash) attention keeps no scores: "none" then stores what "selective" does
    kept = activation_bytes_per_layer(spec, recompute="selective" if recompute == "full" or flash else recompute,
                                      **act)
    again = activation_bytes_per_layer(spec, recompute="full", **act)
    out = []
    for q, layers in enumerate(chunks):
        first, last = q == 0, q == pp - 1
        ends = table * ((first + last) if pp > 1 else (1 if spec.tied_embeddings else 2))
        dense = (sum(layers) * dense_layer + ends) / tp
        experts = sum(layers) * expert_layer / (tp * ep)
        dense_state = model_state_bytes(dense, shards=dp * cp, zero=zero, grad_bytes=grad_bytes)
        expert_state = model_state_bytes(experts, shards=dp * cp // ep, zero=zero, grad_bytes=grad_bytes)
        state, at_step = dense_state[0] + expert_state[0], dense_state[1] + expert_state[1]
        redo = [0 if recompute != "full" else n if recompute_layers is None else min(n, recompute_layers)
                for n in layers]
        per_chunk = [r * again + (n - r) * kept for n, r in zip(layers, redo)]
        if last:
            per_chunk[-1] += logits_bytes(spec, micro_batch=micro_batch, tp=tp, cp=cp)
        activations = peak_in_flight(per_chunk, q, pp, vp, microbatches)
        if any(redo):           # the layer being recomputed holds its whole working set
            activations += kept
        out.append(state + max(activations, at_step))    # the step's fp32 gradient copy: once they are freed
    return tuple(out)


def stage_memory(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                 microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                 sequence_parallel: bool = True, recompute_layers: int | None = None, grad_bytes: int = 2,
                 attention: str | None = None) -> tuple:
    """Estimated bytes per GPU of each pipeline stage (a tuple of ``pp``, stage 0 first).

    A stage holds its own parameters: its layers' (``/ tp``; experts also ``/ ep``), the
    input embedding on the first stage and the output projection on the last (Megatron's
    vocabulary-parallel layers, ``vocab x hidden / tp`` each; one table with ``pp = 1`` and
    tied embeddings), at the module docstring's bytes per parameter, sharded over the
    gradient group (``dp x cp``; experts ``dp x cp / ep``; :func:`model_state_bytes`, gradient
    buffers of ``grad_bytes``: 2, or 4 when accumulated in fp32). Activations: each model chunk's
    layers at :func:`activation_bytes_per_layer` (with
    ``recompute="full"``, the first ``recompute_layers`` of each chunk, default all, keep only
    their input and the stage adds one layer's working set), the loss's softmax on the last
    chunk of the last stage, as many at once as Megatron's schedule keeps in flight on that
    stage (:func:`flowsolver.training._pipeline.peak_in_flight`). ``recompute="none"`` keeps
    the attention scores of an unfused attention (``attention`` None, the default, or
    ``"unfused"``); with a fused one (``"auto"``, ``"fa2"``, ``"fa3"``: flash attention keeps
    none) it stores what ``"selective"`` does. The optimizer step's fp32
    copy of 16-bit gradients comes after the activations are freed: a stage needs the larger
    of the two on top of its states.

    >>> [round(b / 1e9, 1) for b in stage_memory("llama-3-8b", tp=1, pp=2, dp=8, microbatches=16)]
    [58.6, 44.5]
    """
    spec = get_model(model)
    counts = (tp, pp, dp, ep, micro_batch, microbatches, cp, vp)
    if not all(type(v) is int and v >= 1 for v in counts):      # (a planner's are: checked at once)
        tp, pp, dp, ep, micro_batch, microbatches, cp, vp = (
            _checks.integer(name, value) for name, value in zip(("tp", "pp", "dp", "ep", "micro_batch",
                                                                 "microbatches", "cp", "vp"), counts))
    if dp % ep:
        raise ValueError(f"ep ({ep}) must divide dp ({dp})")
    if recompute_layers is not None:
        recompute_layers = _checks.integer("recompute_layers", recompute_layers)
    if grad_bytes not in (2, 4):
        raise ValueError(f"grad_bytes must be 2 (bf16 gradient buffers) or 4 (fp32), got {grad_bytes!r}")
    if attention not in (None, "auto", "fa2", "fa3", "unfused"):
        raise ValueError(f"attention must be None, 'auto', 'fa2', 'fa3' or 'unfused', got {attention!r}")
    return _stages(spec, tp, pp, dp, ep, check_zero(zero), micro_batch, microbatches, cp, vp,
                   check_recompute(recompute), bool(sequence_parallel), recompute_layers, grad_bytes,
                   attention not in (None, "unfused"))


def memory_per_gpu(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                   microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                   sequence_parallel: bool = True, recompute_layers: int | None = None, grad_bytes: int = 2,
                   attention: str | None = None) -> float:
    """Estimated bytes per GPU of mixed-precision Adam training: the largest of
    :func:`stage_memory` (the stage that needs the most sets what the job needs).

    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8) / 1e9, 1)
    71.5
    >>> memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, zero=4)
    Traceback (most recent call last):
    ...
    ValueError: zero must be 0, 1, 2 or 3, got 4
    """
    return max(stage_memory(model, tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, micro_batch=micro_batch,
                            microbatches=microbatches, cp=cp, vp=vp, recompute=recompute,
                            sequence_parallel=sequence_parallel, recompute_layers=recompute_layers,
                            grad_bytes=grad_bytes, attention=attention))
