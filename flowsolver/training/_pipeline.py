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

from functools import lru_cache

import numpy as np

__all__ = ["stage_layers", "chunk_layers", "bubble_slots", "critical_sends", "peak_in_flight"]


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
    return tuple(sum(chunks) for chunks in chunk_layers(layers, pp, vp))


def chunk_layers(layers: int, pp: int, vp: int) -> tuple:
    """Transformer layers of each model chunk, per stage: ``pp`` tuples of ``vp`` counts,
    summing to :func:`stage_layers`. Uneven (Megatron's split with the embedding and the
    loss as one layer each): the first chunk of stage 0 and the last chunk of the last stage
    hold one layer fewer -- with one layer per chunk, only the embedding and only the output
    projection and loss, as the Llama 3 paper describes its 405B pipeline (section 3.3.2).

    >>> chunk_layers(30, 4, 1), chunk_layers(14, 2, 2)
    (((7,), (8,), (8,), (7,)), ((3, 4), (4, 3)))
    >>> chunk_layers(126, 16, 8)[0]
    (0, 1, 1, 1, 1, 1, 1, 1)
    """
    if layers % (pp * vp) == 0:
        return ((layers // (pp * vp),) * vp,) * pp
    if pp == 1 or (layers + 2) % (pp * vp):
        what = "pp" if vp == 1 else f"pp x vp ({pp} x {vp} = {pp * vp} virtual stages)"
        raise ValueError(f"{what} must divide the model's {layers} layers, or {layers} + 2 (Megatron's uneven "
                         f"split: the embedding and the loss count as one layer each on the end stages); "
                         f"got pp={pp}, vp={vp}")
    per = (layers + 2) // (pp * vp)
    out = [[per] * vp for _ in range(pp)]
    out[0][0] -= 1
    out[-1][-1] -= 1
    return tuple(tuple(c) for c in out)


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


def peak_in_flight(chunk_bytes, stage: int, pp: int, vp: int, microbatches: int) -> float:
    """The most activation bytes ``stage`` holds at once: each forward pass of a model chunk
    keeps ``chunk_bytes[c]`` until that chunk's backward pass of the same microbatch,
    in Megatron-Core's order.

    1F1B (``vp = 1``): ``pp - 1 - stage`` warm-up forwards, then one forward and one backward
    in turn, so ``min(pp - stage, m)`` microbatches are held. Interleaved
    (``forward_backward_pipelining_with_interleaving``, microbatches in groups of ``pp``):
    ``2 (pp - 1 - stage) + (vp - 1) pp`` warm-up forwards (at most ``m vp``); forward ``k``
    runs chunk ``(k // pp) mod vp``, backward ``k`` chunk ``vp - 1 -`` that; the peak is the
    largest held sum over the steady state. Uneven chunks (an embedding-only first chunk)
    make it differ from a count of chunks times their mean.

    >>> peak_in_flight((5.0,), 0, 4, 1, 16), peak_in_flight((5.0,), 3, 4, 1, 16)
    (20.0, 5.0)
    >>> peak_in_flight((1.0, 1.0), 0, 4, 2, 16)      # 2 (pp - 1) + pp warm-up forwards, + 1
    11.0
    >>> peak_in_flight((0.0, 1.0), 0, 4, 2, 16)      # the first chunk holds nothing
    4.0
    """
    return _peak_in_flight(tuple(float(b) for b in chunk_bytes), stage, pp, vp, microbatches)


@lru_cache(maxsize=4096)        # a planner asks for the same stage under several ZeRO stages
def _peak_in_flight(chunk_bytes: tuple, stage: int, pp: int, vp: int, microbatches: int) -> float:
    weights = np.asarray(chunk_bytes, dtype=np.float64)
    if vp == 1:
        return float(min(pp - stage, microbatches) * weights[0])
    total = microbatches * vp
    warm = min(2 * (pp - 1 - stage) + (vp - 1) * pp, total)
    chunk = (np.arange(total) // pp) % vp
    held_after_forward = np.cumsum(weights[chunk])                  # forwards 0..k done
    freed_before = np.concatenate(([0.0], np.cumsum(weights[vp - 1 - chunk])))    # backwards 0..j-1 done
    steady = np.arange(total - warm)        # forward warm + j, then backward j
    peak = held_after_forward[warm - 1] if warm else 0.0
    if steady.size:
        peak = max(peak, float(np.max(held_after_forward[warm + steady] - freed_before[steady])))
    return float(peak)
