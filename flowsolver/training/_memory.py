"""Memory per GPU of mixed-precision Adam training: weights, gradients, optimizer state and
activations, by ZeRO stage and parallel degrees."""

from __future__ import annotations

from .. import _checks
from ._models import get_model

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
                   microbatches: int = 1) -> float:
    """Estimated bytes per GPU of mixed-precision Adam training.

    Parameters held: ``(N - N_experts) / (tp pp) + N_experts / (tp pp ep)``. Per parameter
    (ZeRO paper, Rajbhandari et al. 2020): bf16 weights 2 bytes, bf16 gradients 2, fp32
    master weights + Adam moments 12; ZeRO stage 1 shards the 12 over ``dp``, stage 2 also
    the gradients, stage 3 also the weights. Activations: ``34 s b h / tp`` bytes per layer
    and microbatch with sequence parallelism and flash attention (Korthikanti et al. 2022,
    without the ``5 a s / h`` term that flash attention removes), for the ``L / pp`` layers
    of a stage and the ``min(pp, m)`` microbatches 1F1B keeps in flight on the first stage
    (``m = microbatches`` per step).

    >>> round(memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8) / 1e9, 1)
    71.3
    >>> memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, zero=4)
    Traceback (most recent call last):
    ...
    ValueError: zero must be 0, 1, 2 or 3, got 4
    """
    spec = get_model(model)
    tp, pp, dp, ep, micro_batch, microbatches = (
        _checks.integer(name, value) for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep),
                                                         ("micro_batch", micro_batch), ("microbatches", microbatches)))
    zero = check_zero(zero)
    held = (spec.params - spec.expert_params) / (tp * pp) + spec.expert_params / (tp * pp * ep)
    weights = 2.0 * held / (dp if zero >= 3 else 1)
    grads = 2.0 * held / (dp if zero >= 2 else 1)
    optimizer = 12.0 * held / (dp if zero >= 1 else 1)
    in_flight = min(pp, microbatches)
    activations = 34.0 * spec.seq_len * micro_batch * spec.hidden / tp * (spec.layers / pp) * in_flight
    return weights + grads + optimizer + activations
