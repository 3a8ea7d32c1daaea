"""Pipeline schedules: how a model's layers split over ``pp`` stages of ``vp`` virtual
stages (model chunks) each, the 1F1B / interleaved-1F1B bubble, the point-to-point sends on
the critical path and the activations a stage keeps in flight.

References: Narayanan et al. 2021 ("Efficient large-scale language model training on GPU
clusters using Megatron-LM", section 2.2: 1F1B bubble ``(pp - 1) / m``, interleaved
``(pp - 1) / (vp m)``, ``vp`` times the point-to-point traffic); Megatron-Core's
``get_forward_backward_func`` (warm-up microbatches of the interleaved schedule) and its
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split`` (the
embedding and the loss count as one layer each, so the end stages get one layer fewer:
what the Llama 3 paper did for 405B's 126 layers on 16 stages).
"""

from __future__ import annotations

__all__ = ["stage_layers", "bubble_slots", "critical_sends", "chunks_in_flight"]


def stage_layers(layers: int, pp: int, vp: int = 1) -> tuple:
    """Transformer layers per pipeline stage (a tuple of ``pp`` counts, stage 0 first).

    Even when ``pp x vp`` divides ``layers``. Otherwise, with ``pp > 1``, Megatron's split
    with the embedding and the loss counted as one layer each: ``layers + 2`` slots,
    ``(layers + 2) / (pp vp)`` per virtual stage, so the first and the last stage hold one
    transformer layer fewer. A ``ValueError`` naming ``pp`` / ``vp`` when neither splits.

    >>> stage_layers(126, 16)[:2], stage_layers(126, 16)[-1], sum(stage_layers(126, 16))
    ((7, 8), 7, 126)
    >>> stage_layers(80, 8, 5)
    (10, 10, 10, 10, 10, 10, 10, 10)
    """
    if layers % (pp * vp) == 0:
        return (layers // pp,) * pp
    if pp > 1 and (layers + 2) % (pp * vp) == 0:
        per_stage = (layers + 2) // pp
        return (per_stage - 1,) + (per_stage,) * (pp - 2) + (per_stage - 1,)
    what = "pp" if vp == 1 else f"pp x vp ({pp} x {vp} = {pp * vp} virtual stages)"
    raise ValueError(f"{what} must divide the model's {layers} layers, or {layers} + 2 (Megatron's uneven split: "
                     f"the embedding and the loss count as one layer each on the end stages); got pp={pp}, vp={vp}")


def bubble_slots(pp: int, vp: int = 1) -> float:
    """Idle time of a 1F1B pipeline in units of one stage's microbatch time (forward and
    backward of all its layers): ``(pp - 1) / vp`` (interleaved with ``vp`` model chunks).

    >>> bubble_slots(16, 1), bubble_slots(8, 5)
    (15.0, 1.4)
    """
    return (pp - 1) / vp


def critical_sends(pp: int, vp: int, microbatches: int) -> float:
    """Stage-boundary sends (forward activations and backward gradients) on the critical
    path. 1F1B (``vp = 1``, batched, not overlapped: Megatron-Bridge's default) exposes
    ``2 (m + pp - 1)``; the interleaved schedule sends ``vp`` times as often but overlaps the
    steady state with compute (``overlap_p2p_comm``, Megatron-Bridge's default with ``vp > 1``):
    only the ``2 (pp - 1)`` fill and drain sends are exposed.

    >>> critical_sends(4, 1, 8), critical_sends(4, 2, 8), critical_sends(1, 1, 8)
    (22, 6, 0)
    """
    if pp == 1:
        return 0
    return 2 * (microbatches + pp - 1) if vp == 1 else 2 * (pp - 1)


def chunks_in_flight(pp: int, vp: int, microbatches: int) -> float:
    """Stage 0's activations held at the peak, in units of one microbatch through all of the
    stage's layers. 1F1B: ``min(pp, m)``. Interleaved: Megatron's warm-up count on stage 0,
    ``2 (pp - 1) + (vp - 1) pp + 1`` model chunks (of ``1 / vp`` of the stage each), at most
    ``m vp``.

    >>> chunks_in_flight(4, 1, 16), chunks_in_flight(4, 2, 16), chunks_in_flight(1, 1, 16)
    (4, 5.5, 1)
    """
    if vp == 1:
        return min(pp, microbatches)
    return min(2 * (pp - 1) + (vp - 1) * pp + 1, microbatches * vp) / vp
