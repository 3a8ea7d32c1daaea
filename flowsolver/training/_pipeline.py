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

__all__ = ["stage_layers", "chunk_layers", "bubble_slots", "critical_sends", "peak_in_flight", "warmup_passes",
           "virtual_pass", "pass_order"]


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


def bubble_slots(pp: int, vp: int = 1, microbatches: int | None = None) -> float:
    """Idle time of a 1F1B pipeline in units of one stage's microbatch time (forward and
    backward of all its layers): ``(pp - 1) / vp`` (interleaved with ``vp`` model chunks). With
    fewer ``microbatches`` than stages the interleaving cannot fill the pipeline: each microbatch
    still passes every stage's chunks in turn (``pp`` slots), the others ``1 / vp`` behind it,
    so the step is ``pp + (m - 1) / vp`` slots and the idle part ``pp - m + (m - 1) / vp`` (the
    same at ``m = pp``; ``pp - 1`` at ``vp = 1`` for any ``m``).

    >>> bubble_slots(16, 1), bubble_slots(8, 5), bubble_slots(4, 8, microbatches=1)
    (15.0, 1.4, 3.0)
    """
    interleaved = (pp - 1) / vp
    if microbatches is None or microbatches >= pp:
        return interleaved
    return max(interleaved, pp - microbatches + (microbatches - 1) / vp)


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


def warmup_passes(stage: int, pp: int, vp: int, microbatches: int) -> int:
    """Forward passes ``stage`` runs before its first backward in Megatron-Core's order:
    1F1B (``vp = 1``, ``forward_backward_pipelining_without_interleaving``) ``pp - 1 -
    stage``; interleaved (``forward_backward_pipelining_with_interleaving``) ``2 (pp - 1 -
    stage) + (vp - 1) pp``; at most every pass (``m vp``).

    >>> warmup_passes(0, 4, 1, 8), warmup_passes(3, 4, 1, 8), warmup_passes(0, 4, 2, 8), warmup_passes(0, 4, 2, 2)
    (3, 0, 10, 4)
    """
    if vp == 1:
        return min(pp - 1 - stage, microbatches)
    return min(2 * (pp - 1 - stage) + (vp - 1) * pp, microbatches * vp)


def virtual_pass(k, pp: int, vp: int, backward: bool = False) -> tuple:
    """``(microbatch, model chunk)`` of the ``k``-th forward (``backward``: backward) pass of
    a stage in Megatron's interleaved order: microbatches in groups of ``pp``, each group
    through chunk 0, then 1, ...; the backward passes from the last chunk. ``k`` an int or a
    NumPy array of them; with ``vp = 1`` pass ``k`` is microbatch ``k``, chunk 0.

    >>> virtual_pass(5, 4, 2), virtual_pass(5, 4, 2, backward=True), virtual_pass(9, 4, 2)
    ((1, 1), (1, 0), (5, 0))
    """
    chunk = (k // pp) % vp
    return (k // (pp * vp)) * pp + k % pp, (vp - 1 - chunk if backward else chunk)


def pass_order(stage: int, pp: int, vp: int, microbatches: int) -> list:
    """``(direction, microbatch, chunk)`` of every pass of ``stage``, in Megatron-Core's order
    (``"F"`` / ``"B"``): :func:`warmup_passes` forwards, then a forward and a backward in turn,
    then the cool-down backwards, over ``m vp`` virtual microbatches (:func:`virtual_pass`).

    >>> pass_order(0, 2, 1, 3)
    [('F', 0, 0), ('F', 1, 0), ('B', 0, 0), ('F', 2, 0), ('B', 1, 0), ('B', 2, 0)]
    >>> [f"{d}{i}.{c}" for d, i, c in pass_order(1, 2, 2, 2)][:5]
    ['F0.0', 'F1.0', 'F0.1', 'B0.1', 'F1.1']
    """
    total = microbatches * vp
    warm = warmup_passes(stage, pp, vp, microbatches)
    order = [("F", k) for k in range(warm)]
    for k in range(total - warm):
        order += [("F", warm + k), ("B", k)]
    order += [("B", k) for k in range(total - warm, total)]
    return [(d, *virtual_pass(k, pp, vp, d == "B")) for d, k in order]


def peak_in_flight(chunk_bytes, stage: int, pp: int, vp: int, microbatches: int) -> float:
    """The most activation bytes ``stage`` holds at once: each forward pass of a model chunk
    keeps ``chunk_bytes[c]`` until that chunk's backward pass of the same microbatch,
    in Megatron-Core's order.

    The passes of :func:`pass_order`: 1F1B (``vp = 1``): ``pp - 1 - stage`` warm-up forwards,
    then one forward and one backward in turn, so ``min(pp - stage, m)`` microbatches are
    held. Interleaved: :func:`warmup_passes` forwards, forward ``k`` running chunk
    :func:`virtual_pass` of ``k``, backward ``k`` the chunk counted from the last; the peak is
    the largest held sum over the steady state. Uneven chunks (an embedding-only first chunk)
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
    # The chunk of forward / backward pass k repeats every pp vp passes and each such period
    # forwards and frees the same bytes, so the held bytes after the warm-up repeat with that
    # period: past one full period beyond the warm-up, more microbatches add no new peak (this
    # keeps the arrays bounded for any microbatch count).
    period = pp * vp
    microbatches = min(microbatches, -(-(2 * (pp - 1 - stage) + (vp - 1) * pp + period) // vp))
    total = microbatches * vp
    warm = warmup_passes(stage, pp, vp, microbatches)
    chunk = virtual_pass(np.arange(total), pp, vp)[1]
    held_after_forward = np.cumsum(weights[chunk])                  # forwards 0..k done
    freed_before = np.concatenate(([0.0], np.cumsum(weights[vp - 1 - chunk])))    # backwards 0..j-1 done
    steady = np.arange(total - warm)        # forward warm + j, then backward j
    peak = held_after_forward[warm - 1] if warm else 0.0
    if steady.size:
        peak = max(peak, float(np.max(held_after_forward[warm + steady] - freed_before[steady])))
    return float(peak)
