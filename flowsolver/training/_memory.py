"""Memory per GPU of mixed-precision Adam training: weights, gradients, optimizer state and
activations, by ZeRO stage and parallel degrees."""

from __future__ import annotations

from .. import _checks
from ._compute import activation_bytes_per_layer, check_recompute
from ._models import get_model
from ._pipeline import chunks_in_flight, stage_layers

__all__ = ["memory_per_gpu", "ZERO_STAGES", "check_zero"]

ZERO_STAGES = (0, 1, 2, 3)


def check_zero(zero) -> int:
    """The ZeRO stage as an int (0 plain all-reduce, 1 / 2 distributed optimizer, 3 FSDP).

    >>> check_zero(3)
    3
    """
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    return int(zero)


def memory_per_gpu(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                   microbatches: int = 1, cp: int = 1, vp: int = 1, recompute: str = "selective",
                   sequence_parallel: bool = True, recompute_layers: int | None = None) -> float:
    """Estimated bytes per GPU of mixed-precision Adam training.

    Parameters held: ``(N - N_experts) / (tp pp) + N_experts / (tp pp ep)``. Per parameter
    (ZeRO paper, Rajbhandari et al. 2020): bf16 weights 2 bytes, bf16 gradients 2, fp32
    master weights + Adam moments 12; ZeRO stage 1 shards the 12 over ``dp x cp`` (the
    gradient group), stage 2 also the gradients, stage 3 also the weights. Activations per
    layer and microbatch: :func:`flowsolver.training._compute.activation_bytes_per_layer`
    (``34 s b h / tp`` with sequence parallelism and selective recompute, the default), for
    stage 0's layers and the microbatches its schedule keeps in flight (1F1B: ``min(pp, m)``;
    interleaved: Megatron's warm-up count, see ``chunks_in_flight``); with full recompute
    plus one layer's working set. ``recompute_layers`` (with full recompute): only the first
    that many layers of each of the stage's ``vp`` model chunks are recomputed, the others
    keep selective recompute's activations.

    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8) / 1e9, 1)
    71.3
    >>> memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, zero=4)
    Traceback (most recent call last):
    ...
    ValueError: zero must be 0, 1, 2 or 3, got 4
    """
    spec = get_model(model)
    tp, pp, dp, ep, micro_batch, microbatches, cp, vp = (
        _checks.integer(name, value) for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep),
                                                         ("micro_batch", micro_batch), ("microbatches", microbatches),
                                                         ("cp", cp), ("vp", vp)))
    zero = check_zero(zero)
    recompute = check_recompute(recompute)
    held = (spec.params - spec.expert_params) / (tp * pp) + spec.expert_params / (tp * pp * ep)
    shards = dp * cp
    weights = 2.0 * held / (shards if zero >= 3 else 1)
    grads = 2.0 * held / (shards if zero >= 2 else 1)
    optimizer = 12.0 * held / (shards if zero >= 1 else 1)
    per_layer = activation_bytes_per_layer(spec, micro_batch=micro_batch, tp=tp, cp=cp, recompute=recompute,
                                           sequence_parallel=sequence_parallel)
    kept = activation_bytes_per_layer(spec, micro_batch=micro_batch, tp=tp, cp=cp, recompute="selective",
                                      sequence_parallel=sequence_parallel)
    layers = stage_layers(spec.layers, pp, vp)[0]
    recomputed = layers if recompute != "full" or recompute_layers is None else min(layers, vp * recompute_layers)
    stage = per_layer * recomputed + kept * (layers - recomputed)
    activations = stage * chunks_in_flight(pp, vp, microbatches)
    if recompute == "full":     # the layer being recomputed holds its whole working set
        activations += kept
    return weights + grads + optimizer + activations
