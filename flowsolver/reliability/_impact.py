"""Which degradations matter: one cable of each tier degraded in turn, the step re-solved
exactly beside the linear estimate from the healthy run's sensitivities."""

from __future__ import annotations

import numpy as np

import topologies as tp

from .._status import Status
from ..collectives import collective
from ._fabric import _COLLECTIVE_KEYS, _check_workload, state_changes
from ._views import _capacities, steps_times

__all__ = ["degradation_impact"]


def degradation_impact(graph, workload, factor: float = 0.5, *, tiers=None, seed: int = 0, base=None) -> list:
    """Which degradations matter: for each tier, the collective step with one of its physical
    cables at ``factor`` of its rate (chosen as :func:`state_graphs` chooses; in an edge
    bundling ``n`` cables, the bundle at ``1 - (1 - factor) / n`` of its capacity), exactly re-solved
    (:func:`steps_times`) beside the linear estimate from the healthy result's sensitivities
    (:meth:`~flowsolver.CollectiveResult.time_directional`; NaN where a tie of NCCL's choices
    leaves none). Rows ``tier``, ``cables`` (physical), ``healthy_s``, ``exact_s``, ``linear_s``,
    ``slowdown`` (exact / healthy), slowest first. Collective workloads only. ``base``: the
    workload's collective already solved on the healthy ``graph`` (e.g.
    :attr:`GoodputResult.healthy_result`), not solved again.

    >>> import topologies as tp
    >>> rows = degradation_impact(tp.rail_optimized(4), dict(op="all_reduce", size=2**28, algorithm="ring"))
    >>> [r["tier"] for r in rows][:1], rows[0]["slowdown"] > 1.0      # a NIC cable at half rate
    (['access'], True)
    """
    if _check_workload(workload) != "collective":
        raise ValueError("degradation_impact takes a collective workload (a dict with 'op')")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor < 1):
        raise ValueError(f"factor must be in (0, 1), got {factor!r}")
    args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
    if base is None:
        base = collective(graph, **args)
    elif getattr(base, "solved_on", None) is None and not hasattr(base, "status"):
        raise TypeError(f"base must be the workload's CollectiveResult on the healthy graph, got {type(base).__name__}")
    if base.status != Status.OK or base.solved_on is None or base.solved_on.why_not:
        raise ValueError("degradation_impact: the healthy collective has no solved steps to re-solve "
                         f"({base.message or base.solved_on.why_not if base.solved_on else base.message})")
    tiers = sorted({d.get("tier") for *_, d in graph.edges(data=True) if d.get("tier")}) if tiers is None \
        else list(tiers)
    degrades = [(t, float(factor)) for t in tiers]
    states = np.eye(len(tiers), dtype=np.int64)
    caps = _capacities(graph, base.solved_on.raw, state_changes(graph, degrades, states, seed=seed))
    exact = steps_times(base, caps)
    raw = np.asarray(base.solved_on.raw, dtype=np.float64)
    rows = []
    for tier, cap, t in zip(tiers, caps, exact):
        try:
            linear = base.time + base.time_directional(cap - raw)
        except ValueError:
            linear = float("nan")
        cables = sum(int(graph.edges[c].get("cables", 1)) for c in tp.tier_cables(graph, tier))
        rows.append(dict(tier=tier, cables=cables, healthy_s=float(base.time),
                         exact_s=float(t), linear_s=float(linear), slowdown=float(t / base.time)))
    return sorted(rows, key=lambda r: -r["slowdown"])
