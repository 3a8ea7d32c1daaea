"""Memory per GPU of mixed-precision Adam training, stage by stage: weights, gradients,
optimizer state and the activations the pipeline schedule keeps in flight.

Per parameter (ZeRO paper, Rajbhandari et al. 2020): bf16 weights 2 bytes, bf16 gradients
2 (4 with ``grad_bytes=4``: accumulated in fp32), fp32 master weights and Adam's two moments 12. ZeRO stage 1 (Megatron's distributed
optimizer) shards the 12 over the gradient group, stage 2 also the gradients (the Llama 3
paper's FSDP, section 3.3.2, shards the optimizer state and the gradients but keeps the
weights after the forward pass), stage 3 also the weights, gathering them whole while
they are used (FSDP, timed as PyTorch FSDP2 runs it: :func:`stage_memory`). Megatron-Bridge's Llama
performance recipes keep 16-bit gradient buffers (``grad_reduce_in_fp32 = False``);
Megatron-LM's distributed-optimizer table counts ``4 + 16 / d`` bytes for them, the extra
``4 / d`` an fp32 copy of the gradient shard made for the optimizer step, after the
activations are freed: a stage needs the larger of its activations and that copy on top of
its states. Runs that accumulate gradients in fp32 (Megatron-LM's default for bf16,
``6 + 12 / d``) pass ``grad_bytes=4``. :func:`memory_breakdown` lists each stage's terms;
what a run allocates beyond model states and activations is off by default and named in
:class:`MemoryOverheads` (the CUDA context, DeepSpeed's ZeRO step buffers and kept stage
outputs, the caching allocator's reserved view, as nvidia-smi shows it), so the published
tables that count only states or activations compare like with like. ``fp8_activations``
counts Transformer Engine's one-byte FP8 GEMM inputs (:func:`activation_bytes_per_layer`).
Not counted: FP8 copies of weights (Transformer Engine's cached casts), NCCL's buffers, cuBLAS workspace
and the activations' own fragmentation (benchmarks/validation/memory.csv holds the published
figures this is checked against, tests/training/test_memory_published.py the errors).
"""

from __future__ import annotations

import numbers
from functools import lru_cache

import numpy as np

from .. import _checks
from ._recompute import FORWARD_AGAIN, check_layers_mode, check_recompute
from ._activations import activation_bytes_per_layer, logits_bytes
from ._memory_overheads import (CUDA_CONTEXT_A100, DEEPSPEED_REDUCE_BUCKET, DEEPSPEED_ZERO_NVIDIA_SMI_A100,
                                MemoryOverheads, _peak_of, _step_events, caching_allocator_reserved)
from ._layout import check_sequence_split, checked_etp
from ._models import get_model
from ._pipeline import chunk_layers, peak_in_flight
from ._schedule import check_recompute_layers

__all__ = ["memory_per_gpu", "stage_memory", "memory_breakdown", "MemoryOverheads", "ZERO_STAGES", "TERMS",
           "CUDA_CONTEXT_A100", "DEEPSPEED_REDUCE_BUCKET", "DEEPSPEED_ZERO_NVIDIA_SMI_A100", "check_zero",
           "activation_bytes_per_layer", "logits_bytes", "model_state_bytes", "caching_allocator_reserved"]

ZERO_STAGES = (0, 1, 2, 3)


def te_fp8_activations(precision: str, fp8_recipe: str = "te") -> bool:
    """Whether a step keeps Transformer Engine's one-byte FP8 GEMM inputs
    (:func:`activation_bytes_per_layer`'s ``fp8_activations``): FP8 with the ``"te"`` recipe;
    torchao's float8 recipes keep the 16-bit inputs.

    >>> te_fp8_activations("fp8"), te_fp8_activations("fp8", "tensorwise"), te_fp8_activations("bf16")
    (True, False, False)
    """
    return precision == "fp8" and fp8_recipe == "te"


def check_fp8_param_gather(precision: str, fp8_param_gather) -> None:
    """Refuse an FP8 parameter all-gather in a step that is not FP8 (adv26 F4: taken and ignored):
    Megatron's ``--fp8-param-gather`` needs ``--fp8-format``, torchao's float8 all-gather its
    float8 linears; there is no FP8 copy of the weights to gather otherwise."""
    if not isinstance(fp8_param_gather, bool):
        raise TypeError(f"fp8_param_gather must be True or False, got {fp8_param_gather!r}")
    if fp8_param_gather and precision != "fp8":
        raise ValueError(f"fp8_param_gather=True needs precision='fp8' (the all-gather sends the FP8 weights an FP8 "
                         f"step keeps: Megatron's --fp8-param-gather needs --fp8-format), got precision={precision!r}")


def gather_bytes_of(precision: str, fp8_param_gather: bool) -> int:
    """Bytes a parameter of a linear layer takes in FSDP's all-gather: 1 with the FP8 all-gather
    of an FP8 step, else 2 (bf16). The embedding and the output projection are gathered in bf16
    either way (torchao's float8 converter turns ``nn.Linear`` weights only, and torchtitan's
    leaves the output layer out).

    >>> gather_bytes_of("fp8", True), gather_bytes_of("fp8", False), gather_bytes_of("bf16", True)
    (1, 2, 2)
    """
    return 1 if fp8_param_gather and precision == "fp8" else 2


def grad_bytes_of(reduce_bytes: float, zero: int) -> int:
    """Bytes a gradient value takes in the buffers the memory estimate counts
    (:func:`stage_memory`'s ``grad_bytes``) for a step whose gradients are reduced in
    ``reduce_bytes`` per value (``Parallelism.reduce_dtype``: 2 bf16, 4 fp32) at ZeRO stage
    ``zero``. Up to stage 2 (Megatron-Core's DDP and distributed optimizer) reducing in fp32 is
    ``grad_reduce_in_fp32``, which makes the gradient buffer itself fp32: ``grad_dtype =
    torch.float if grad_reduce_in_fp32 else param.dtype``
    (megatron/core/distributed/param_and_grad_buffer.py, NVIDIA/Megatron-LM d98e8a6), so 4.
    At stage 3 (FSDP2) the sharded gradients take the fp32 sharded parameters' dtype whatever
    the reduce dtype, and the unsharded ones the bf16 compute dtype: ``reduce_dtype`` only
    changes the reduce-scatter's bytes on the wire, so 2 (the estimate's 16 bytes a
    parameter either way).

    >>> grad_bytes_of(4, 1), grad_bytes_of(2, 1), grad_bytes_of(4, 3)
    (4, 2, 2)
    """
    return 4 if reduce_bytes == 4 and zero < 3 else 2


def check_zero(zero) -> int:
    """The ZeRO stage as an int (0 plain all-reduce, 1 / 2 distributed optimizer, 3 FSDP).

    >>> check_zero(3)
    3
    """
    if type(zero) is int and zero in ZERO_STAGES:      # the common case, without the ABC checks
        return zero
    if isinstance(zero, (bool, np.bool_)) or not isinstance(zero, numbers.Integral) or zero not in ZERO_STAGES:
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


#: the terms of :func:`memory_breakdown`, in the order they are listed
TERMS = ("weights", "gradients", "optimizer", "activations", "loss", "embedding", "stage_outputs", "step",
         "cuda_context")


@lru_cache(maxsize=1 << 16)     # a planner asks again, composing the layouts it enumerated
def _stages(spec, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, recompute, sequence_parallel,
            recompute_layers, grad_bytes=2, flash=False, dropout=False, embedding_norm=False,
            fp8_activations=False, over=MemoryOverheads(), gather_bytes=2, capacity_factor=1.0,
            etp=None) -> tuple:
    etp = tp if etp is None else etp
    chunks = chunk_layers(spec.layers, pp, vp)
    moe = spec.experts > 1
    dense_layer = spec.attention_params + (0 if moe else spec.mlp_params)
    expert_layer = spec.experts * spec.mlp_params if moe else 0
    table = spec.vocab * spec.hidden
    act = dict(micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel, dropout=dropout,
               fp8_activations=fp8_activations, attention_output_kept=flash and recompute == "none",
               capacity_factor=capacity_factor, etp=etp)
    # a fused (flash) attention keeps no scores: "none" then stores what "selective" does
    forward_again = recompute in FORWARD_AGAIN
    kept = activation_bytes_per_layer(spec, recompute="selective" if forward_again or flash else recompute, **act)
    again = activation_bytes_per_layer(spec, recompute=recompute if forward_again else "full", **act)
    tokens = micro_batch * spec.seq_len / cp                     # per CP rank
    split = tp if sequence_parallel else 1
    # the embedding is not recomputed: its norm keeps its 16-bit input, its dropout a 1-byte mask
    embedding = tokens * spec.hidden * (2.0 * embedding_norm + 1.0 * dropout) / split
    output = 2.0 * tokens * spec.hidden / tp if over.stage_outputs else 0.0
    head_dim = spec.hidden // spec.heads
    layer_largest = max((spec.hidden + 2 * spec.kv_heads * head_dim) * spec.hidden,
                        spec.mlp_params * (2 if spec.gated_mlp else 1) // (3 if spec.gated_mlp else 2)) / tp
    out, shared = [], {}
    logits = logits_bytes(spec, micro_batch=micro_batch, tp=tp, cp=cp)
    for q, layers in enumerate(chunks):
        first, last = q == 0, q == pp - 1
        key = (tuple(layers), first, last)
        if key not in shared:           # what does not depend on the stage's place in the pipeline
            ends = table * ((first + last) if pp > 1 else (1 if spec.tied_embeddings else 2))
            dense = (sum(layers) * dense_layer + ends) / tp
            # the experts over etp x ep GPUs (whole on each GPU at expert TP 1), their gradients and
            # optimizer states over the expert DP ranks, tp x dp x cp / (etp x ep) (Megatron-Core's
            # expert_data_parallel_size = world / (etp x ep x pp), parallel_state.py at d98e8a64)
            experts = sum(layers) * expert_layer / (etp * ep)
            expert_shards = tp * dp * cp // (etp * ep)
            weights = grads = optimizer = 0.0
            # FSDP's unsharded parameters (stage_memory's docstring): per GPU, the layers in flight and the root
            in_flight = min(2, sum(layers))
            for n, shards, layer, root in ((dense, dp * cp, dense_layer / tp, ends / tp),
                                           (experts, expert_shards, expert_layer / (etp * ep), 0.0)):
                w = model_state_bytes(n, shards=shards, zero=zero, grad_bytes=grad_bytes)[0]
                g = n * grad_bytes / (shards if zero >= 2 else 1)
                p = n * 2.0 / (shards if zero >= 3 else 1)
                optimizer += w - g - p
                if zero == 3 and shards > 1:    # the root (embedding, output) gathered in bf16 (gather_bytes_of)
                    if pp > 1:          # held whole for the step: the gathered weights hold the shard
                        p, g = (n - root) * gather_bytes + root * 2.0, n * grad_bytes
                    else:               # on top of the shards: the layers in flight and the root
                        p += in_flight * layer * gather_bytes + root * 2.0
                        g += (root + in_flight * layer) * grad_bytes
                weights, grads = weights + p, grads + g
            owned = dense / (dp * cp if zero >= 1 else 1) + experts / (expert_shards if zero >= 1 else 1)
            largest = max(layer_largest if sum(layers) else 0.0, table / tp if ends else 0.0)
            redo = [0 if not forward_again else n if recompute_layers is None else min(n, recompute_layers)
                    for n in layers]
            layer_chunks = [r * again + (n - r) * kept for n, r in zip(layers, redo)]
            loss = [0.0] * vp
            if last:
                loss[-1] = logits
            emb = [embedding if first and c == 0 else 0.0 for c in range(vp)]
            outs = [0.0 if last and c == vp - 1 else output for c in range(vp)]
            events = _step_events(owned, largest, grad_bytes, over)
            shared[key] = ((weights, grads, optimizer),
                           (("activations", layer_chunks), ("loss", loss), ("embedding", emb),
                            ("stage_outputs", outs)),
                           any(redo), caching_allocator_reserved(events)[1] if over.reserved else _peak_of(events))
        (weights, grads, optimizer), terms, recomputes, step_bytes = shared[key]
        # the peak of the sum, attributed term by term in this order (exact when vp = 1)
        parts, so_far, held = {}, [0.0] * vp, 0.0
        for name, chunk in terms:
            if not any(chunk):          # nothing added: the same peak (most stages hold no loss or embedding)
                parts[name] = 0.0
                continue
            so_far = [a + b for a, b in zip(so_far, chunk)]
            now = peak_in_flight(so_far, q, pp, vp, microbatches)
            parts[name], held = now - held, now
        if recomputes:          # the layer being recomputed holds its whole working set
            parts["activations"] += kept
            held += kept
        if over.reserved:       # the step's buffers get segments of their own, on top of the activations'
            step = step_bytes
        else:                   # after the activations are freed: the larger of the two
            step = max(0.0, step_bytes - held)
        out.append((("weights", weights), ("gradients", grads), ("optimizer", optimizer), *parts.items(),
                    ("step", step), ("cuda_context", over.cuda_context)))
    return tuple(out)


def _arguments(model, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, recompute, sequence_parallel,
               recompute_layers, grad_bytes, attention, dropout, embedding_norm, fp8_activations, overheads,
               gather_bytes=2, capacity_factor=1.0, etp=None) -> tuple:
    spec = get_model(model)
    if type(capacity_factor) is not float or capacity_factor != 1.0:      # (a planner's 1.0: checked at once)
        capacity_factor = _checks.positive_number("capacity_factor", capacity_factor)
        if spec.experts == 1 and capacity_factor != 1:
            raise ValueError(f"capacity_factor needs a mixture-of-experts model; {spec.name} is dense (experts = 1), "
                             f"got {capacity_factor!r}")
    counts = (tp, pp, dp, ep, micro_batch, microbatches, cp, vp)
    if not all(type(v) is int and v >= 1 for v in counts):      # (a planner's are: checked at once)
        tp, pp, dp, ep, micro_batch, microbatches, cp, vp = (
            _checks.integer(name, value) for name, value in zip(("tp", "pp", "dp", "ep", "micro_batch",
                                                                 "microbatches", "cp", "vp"), counts))
    etp = checked_etp(etp, tp)
    if etp != tp and spec.experts == 1:
        raise ValueError(f"etp ({etp}) sets the expert layers' TP degree: it needs a mixture-of-experts model; "
                         f"{spec.name} is dense (leave etp None)")
    if (dp * cp * tp // etp) % ep:
        over = f"dp x cp ({dp} x {cp})" if etp == tp else f"tp x dp x cp at etp 1 ({tp} x {dp} x {cp})"
        raise ValueError(f"ep ({ep}) must divide {over}")
    if ep > 1 and spec.experts % ep:
        raise ValueError(f"ep ({ep}) must divide the model's experts ({spec.experts}; 1 for a dense model)")
    if spec.seq_len % cp:
        raise ValueError(f"cp ({cp}) must divide the sequence of {spec.seq_len} tokens")
    # Megatron-Core's attention (megatron/core/transformer/attention.py): divide(num_attention_heads,
    # tp) and divide(num_query_groups, tp), each an assert that tp divides them
    if spec.heads % tp or spec.kv_heads % tp:
        raise ValueError(f"tp ({tp}) must divide the attention heads of {spec.name} ({spec.heads}) and its KV heads "
                         f"({spec.kv_heads}): each TP rank holds whole heads (Megatron-Core splits the heads and the "
                         f"query groups over the TP group)")
    if recompute_layers is not None:         # 1 ... the layers of the largest model chunk, as training_step
        check_recompute_layers(recompute_layers, spec.layers, pp, vp)
        recompute_layers = int(recompute_layers)
        check_layers_mode(recompute_layers, recompute)
    if isinstance(grad_bytes, (bool, np.bool_)) or not isinstance(grad_bytes, numbers.Integral) \
            or grad_bytes not in (2, 4):
        raise ValueError(f"grad_bytes must be 2 (bf16 gradient buffers) or 4 (fp32), got {grad_bytes!r}")
    if isinstance(gather_bytes, (bool, np.bool_)) or not isinstance(gather_bytes, numbers.Integral) \
            or gather_bytes not in (1, 2):
        raise ValueError(f"gather_bytes must be 2 (bf16 weights gathered) or 1 (FP8 all-gather), got {gather_bytes!r}")
    for name, flag in (("sequence_parallel", sequence_parallel), ("dropout", dropout),
                       ("embedding_norm", embedding_norm), ("fp8_activations", fp8_activations)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    if sequence_parallel:
        check_sequence_split(spec.seq_len, tp, cp)
    if attention not in (None, "auto", "fa2", "fa3", "unfused"):
        raise ValueError(f"attention must be None, 'auto', 'fa2', 'fa3' or 'unfused', got {attention!r}")
    overheads = MemoryOverheads() if overheads is None else overheads
    if not isinstance(overheads, MemoryOverheads):
        raise TypeError(f"overheads must be a MemoryOverheads or None, got {type(overheads).__name__}")
    zero = check_zero(zero)
    if overheads.deepspeed_zero and zero not in (1, 2):
        raise ValueError(f"overheads.deepspeed_zero models DeepSpeed's ZeRO stage 1 / 2 optimizer: zero must be 1 or "
                         f"2, got {zero}")
    return (spec, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, check_recompute(recompute),
            bool(sequence_parallel), recompute_layers, int(grad_bytes), attention not in (None, "unfused"),
            bool(dropout), bool(embedding_norm), bool(fp8_activations), overheads, int(gather_bytes),
            float(capacity_factor), etp)


def memory_breakdown(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                     microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                     sequence_parallel: bool = True, recompute_layers: int | None = None, grad_bytes: int = 2,
                     attention: str | None = None, dropout: bool = False, embedding_norm: bool = False,
                     fp8_activations: bool = False, overheads: MemoryOverheads | None = None,
                     gather_bytes: int = 2, capacity_factor: float = 1.0, etp: int | None = None) -> tuple:
    """Bytes per GPU of each pipeline stage, term by term: a tuple of ``pp`` dicts (stage 0
    first) with the keys of :data:`TERMS`; :func:`stage_memory` is their sums.

    ``weights``, ``gradients``, ``optimizer`` (fp32 master weights and Adam's moments): the
    model states of :func:`model_state_bytes`. ``activations``: the layers' saved tensors for
    the microbatches in flight (and, with full recompute, one layer's working set); ``loss``:
    the loss's fp32 softmax on the last stage; ``embedding``: what the first stage's embedding
    keeps per microbatch in flight (it is never recomputed): with ``embedding_norm`` (BLOOM's
    layer norm after the embedding) its 16-bit input, with ``dropout`` its one-byte mask
    (``dropout`` also counts Korthikanti et al.'s dropout tensors in every layer);
    ``stage_outputs``, ``step`` and ``cuda_context``: see :class:`MemoryOverheads`. ``step`` is
    what the optimizer step needs beyond the activations it follows (by default, Megatron's
    fp32 copy of the owned gradients, after the activations are freed: only the part above
    them counts).

    >>> b = memory_breakdown("llama-3-8b", tp=1, pp=2, dp=8, microbatches=16)
    >>> tuple(round(b[0].get(term) / 1e9, 2) for term in ("weights", "gradients", "optimizer", "activations", "step"))
    (8.03, 8.03, 6.02, 36.51, 0.0)
    >>> round(sum(b[0].values()) / 1e9, 1)
    58.6
    """
    args = _arguments(model, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, recompute, sequence_parallel,
                      recompute_layers, grad_bytes, attention, dropout, embedding_norm, fp8_activations,
                      overheads, gather_bytes, capacity_factor, etp)
    return tuple(dict(stage) for stage in _stages(*args))


def stage_memory(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                 microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                 sequence_parallel: bool = True, recompute_layers: int | None = None, grad_bytes: int = 2,
                 attention: str | None = None, dropout: bool = False, embedding_norm: bool = False,
                 fp8_activations: bool = False, overheads: MemoryOverheads | None = None,
                 gather_bytes: int = 2, capacity_factor: float = 1.0, etp: int | None = None) -> tuple:
    """Estimated bytes per GPU of each pipeline stage (a tuple of ``pp``, stage 0 first): the
    sums of :func:`memory_breakdown`'s terms.

    A stage holds its own parameters: its layers' (``/ tp``; experts ``/ (etp ep)``, ``etp`` the
    expert TP degree, ``None``: ``tp``, or 1: each expert whole on its GPU), the
    input embedding on the first stage and the output projection on the last (Megatron's
    vocabulary-parallel layers, ``vocab x hidden / tp`` each; one table with ``pp = 1`` and
    tied embeddings), at the module docstring's bytes per parameter, sharded over the
    gradient group (``dp x cp``; experts ``tp x dp x cp / (etp ep)``; :func:`model_state_bytes`, gradient
    buffers of ``grad_bytes``: 2, or 4 when accumulated in fp32). ZeRO 3 (FSDP) adds the
    parameters it gathers (``gather_bytes`` per weight: 2, 1 with an FP8 all-gather) and their
    unsharded gradients, as the step's timing schedules them (PyTorch FSDP2,
    :func:`flowsolver.training._exposed.fsdp_exposed`): without a pipeline, two layers' weights
    (the one computing and the next, whose gather FSDP2 issues beside it: one layer of
    prefetch) and two layers' gradients (the one computed and the previous one, until its
    reduce-scatter), and the root unit's weights and gradients (embedding and output
    projection: gathered before the first layer, reduced after the last backward); with ``pp >
    1`` the stage's parameters stay gathered for the whole step (its shard among them) and its
    gradients accumulate whole until the last backward's reduce-scatter (FSDP2 under a
    pipeline, not resharding between microbatches); the optimizer state stays sharded.
    Activations: each model chunk's
    layers at :func:`activation_bytes_per_layer` (with
    ``recompute="full"``, the first ``recompute_layers`` of each chunk, default all, keep only
    their input, with a partial mode their input and what it saves, and the stage adds one
    layer's working set), the loss's softmax on the last
    chunk of the last stage, as many at once as Megatron's schedule keeps in flight on that
    stage (:func:`flowsolver.training._pipeline.peak_in_flight`). ``recompute="none"`` keeps
    the attention scores of an unfused attention (``attention`` None, the default, or
    ``"unfused"``); with a fused one (``"auto"``, ``"fa2"``, ``"fa3"``: flash attention keeps
    none) it stores what ``"selective"`` does. The defaults here (``recompute="selective"``,
    ``attention`` None: the paper's table) keep what ``training_step``'s defaults keep
    (``recompute="none"`` with flash attention). The optimizer step's fp32
    copy of 16-bit gradients comes after the activations are freed: a stage needs the larger
    of the two on top of its states. ``dropout``, ``embedding_norm`` and ``overheads``
    (:class:`MemoryOverheads`: CUDA context, DeepSpeed's buffers, the caching allocator's
    reserved view) add the terms :func:`memory_breakdown` lists; all off by default.
    ``fp8_activations``: Transformer Engine's FP8 GEMM inputs kept at one byte
    (:func:`activation_bytes_per_layer`); ``capacity_factor``: a mixture of experts' expert
    inputs padded to (or cut at) that factor of the routed tokens, its expert MLP's saved
    tensors with them (:func:`activation_bytes_per_layer`; 1, dropless, by default).

    >>> tuple(round(b / 1e9, 1) for b in stage_memory("llama-3-8b", tp=1, pp=2, dp=8, microbatches=16))
    (58.6, 44.5)
    """
    args = _arguments(model, tp, pp, dp, ep, zero, micro_batch, microbatches, cp, vp, recompute, sequence_parallel,
                      recompute_layers, grad_bytes, attention, dropout, embedding_norm, fp8_activations,
                      overheads, gather_bytes, capacity_factor, etp)
    return tuple(sum(v for _, v in stage) for stage in _stages(*args))


def memory_per_gpu(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                   microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                   sequence_parallel: bool = True, recompute_layers: int | None = None, grad_bytes: int = 2,
                   attention: str | None = None, dropout: bool = False, embedding_norm: bool = False,
                   fp8_activations: bool = False, overheads: MemoryOverheads | None = None,
                   gather_bytes: int = 2, capacity_factor: float = 1.0, etp: int | None = None) -> float:
    """Estimated bytes per GPU of mixed-precision Adam training: the largest of
    :func:`stage_memory` (the stage that needs the most sets what the job needs).

    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8) / 1e9, 1)
    71.5
    >>> # Transformer Engine's FP8: 80 layers x 8192 tokens x (3 h + ffn) / 8 bytes fewer, 4.4 GB
    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, fp8_activations=True) / 1e9, 1)
    67.1
    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8,
    ...                      overheads=MemoryOverheads(cuda_context=CUDA_CONTEXT_A100)) / 1e9, 1)
    73.2
    >>> memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, zero=4)
    Traceback (most recent call last):
    ...
    ValueError: zero must be 0, 1, 2 or 3, got 4
    """
    return max(stage_memory(model, tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, micro_batch=micro_batch,
                            microbatches=microbatches, cp=cp, vp=vp, recompute=recompute,
                            sequence_parallel=sequence_parallel, recompute_layers=recompute_layers,
                            grad_bytes=grad_bytes, attention=attention, dropout=dropout,
                            embedding_norm=embedding_norm, fp8_activations=fp8_activations,
                            overheads=overheads, gather_bytes=gather_bytes, capacity_factor=capacity_factor,
                            etp=etp))
