"""Derivatives of a training step's time with respect to every link capacity.

``step_time = compute + bubble + exposed communication``. TP, PP and EP calls are all on the
critical path: ``calls x per_call``. The DP collectives share one overlap window ``W``: their
exposed parts add up to ``max(0, sum of their times - W)`` (ZeRO-3: per microbatch, ``m``
times), so they count only where the window is exceeded (one-sided at the kink). Each
collective's time has exact one-sided derivatives (:meth:`CollectiveResult.time_gradient`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["step_terms", "step_gradient", "step_directional"]


def step_terms(result):
    """``(critical, dp, dp_scale, dp_slack)``: ``critical`` and ``dp`` lists of
    ``(coefficient, CollectiveResult)``; the DP part is ``dp_scale x max(0, sum - W)`` with
    ``dp_slack = sum - W`` (s)."""
    prof, sched = result.profile, result.schedule
    critical, dp = [], []
    for name, phase in result.phases.items():
        comm = prof.comms[name]
        if comm.result is None:
            raise ValueError(f"sensitivity: the {name} collective carries no solved steps; re-run training_step")
        if name in ("tp", "pp", "ep"):
            critical.append((phase.calls, comm.result))
            continue
        gather_weight = 2.0 if prof.zero == 3 else 1.0
        dp.append((1.0, comm.result))
        if comm.gather_result is not None:
            dp.append((gather_weight, comm.gather_result))
    t_mb = result.compute_time / result.microbatches
    if prof.zero == 3:
        window, scale = sched.dp_overlap * t_mb, float(result.microbatches)
    else:
        window, scale = sched.dp_overlap * (2.0 / 3.0) * t_mb, 1.0
    slack = sum(c * r.time for c, r in dp) - window
    return critical, dp, scale, slack


def _combine(critical_part, dp_part, scale, slack, side):
    if slack > 1e-12 * max(abs(slack), 1e-300) and slack > 0:
        return critical_part + scale * dp_part
    if slack < 0:
        return critical_part
    kink = np.maximum(dp_part, 0.0) if side == "up" else np.minimum(dp_part, 0.0)
    return critical_part + scale * kink


def step_gradient(result, side: str = "up") -> np.ndarray:
    """d step_time / d capacity of each link alone (graph edge order), s per byte/s."""
    critical, dp, scale, slack = step_terms(result)
    n = len(next(r for _, r in critical + dp).links.capacity)
    crit = sum((c * r.time_gradient(side) for c, r in critical), np.zeros(n))
    dps = sum((c * r.time_gradient(side) for c, r in dp), np.zeros(n))
    return _combine(crit, dps, scale, slack, side)


def step_directional(result, d_capacity, side: str = "up") -> float:
    """One-sided derivative of step_time (s) along ``d_capacity`` (bytes/s per link)."""
    critical, dp, scale, slack = step_terms(result)
    crit = sum(c * r.time_directional(d_capacity, side) for c, r in critical)
    dps = sum(c * r.time_directional(d_capacity, side) for c, r in dp)
    return float(_combine(np.float64(crit), np.float64(dps), scale, slack, side))
