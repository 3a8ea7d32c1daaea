"""Derivatives of a training step's time with respect to every link capacity.

The step time is :func:`~flowsolver.training._compose.compose` of the per-call times of the
step's collectives: pure arithmetic, piecewise linear in them (sums, the slowest stage, the
exposed part of overlapped traffic: ``max(0, traffic - window)``). So

``d step / d capacity = sum over collectives of (d step / d per_call) x (d per_call / d capacity)``

with the first factor the one-sided slope of ``compose`` in that collective's time (in the
direction a capacity increase moves it: down for ``side="up"``), read off ``compose``
itself, and the second the collective's exact one-sided derivative
(:meth:`CollectiveResult.time_gradient`). At a kink of ``compose`` (traffic exactly filling
its overlap window) the slope is the one-sided one of the side asked for.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

__all__ = ["step_terms", "step_gradient", "step_directional"]

#: the relative step of the slope of ``compose`` (piecewise linear: exact away from a kink
#: closer than this; its rounding error is ~1e-16 / STEP relative)
STEP = 1e-6


def step_terms(result, compose, side: str = "up") -> list:
    """``[(slope, CollectiveResult)]``: each solved collective of the step (its per-call
    time, and the all-gather of the same bytes where there is one) with the one-sided
    slope of the step time in that collective's time (s per s); ``compose`` the step's
    composition (``training._compose.compose``)."""
    prof = result.profile
    terms = []
    for name, comm in prof.comms.items():
        for field, solved in (("per_call", comm.result), ("gather", comm.gather_result)):
            if field == "gather" and solved is None:
                continue
            if solved is None:
                raise ValueError(f"sensitivity: the {name} collective carries no solved steps; re-run training_step")
            t = getattr(comm, field)
            delta = STEP * max(abs(t), 1e-12) * (-1.0 if side == "up" else 1.0)
            moved = replace(prof, comms={**prof.comms, name: replace(comm, **{field: t + delta})})
            terms.append(((compose(moved, result.schedule).step_time - result.step_time) / delta, solved))
    return terms


def step_gradient(result, compose, side: str = "up") -> np.ndarray:
    """d step_time / d capacity of each link alone (graph edge order), s per byte/s."""
    terms = step_terms(result, compose, side)
    n = len(terms[0][1].links.capacity)
    return sum((slope * solved.time_gradient(side) for slope, solved in terms if slope != 0.0), np.zeros(n))


def step_directional(result, compose, d_capacity, side: str = "up") -> float:
    """One-sided derivative of step_time (s) along ``d_capacity`` (bytes/s per link)."""
    return float(sum(slope * solved.time_directional(d_capacity, side)
                     for slope, solved in step_terms(result, compose, side) if slope != 0.0))
