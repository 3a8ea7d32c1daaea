"""How ``"auto"`` chooses: the candidates' lower bounds and the two solving rounds (every
algorithm NCCL's cost model times, or the most promising one, first; then the others whose
bound is below the best time so far), and the pick among the solved ones (NCCL's least
estimate against the fastest of the per-step model's)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._tolerance import RTOL
from ._algorithms import TUNED_OPS, algorithm_of
from ._bound import Capacities, lower_bound
from ._nccl import PROTOCOLS
from ._nccl_model import _BASE
from ._nccl_timing import nccl_pick, rescaled, transfer_of, tuned_times
from ._p2p import p2p_bound
from ._solve import TimedScenario, time_plans

__all__ = ["is_tuned"]


@dataclass(frozen=True)
class _Pick:
    """What :func:`_pick` chose: ``algorithm`` and ``protocol``, its ``time`` (s), ``steps``
    and link ``utilization``, every entry's time (``choices``) and NCCL estimate
    (``estimates``), each algorithm's best time (``candidates``) and the entries NCCL's cost
    model ties with the choice (``rivals``)."""

    algorithm: str
    protocol: str
    time: float
    steps: tuple
    utilization: np.ndarray
    choices: dict
    estimates: dict
    candidates: dict
    rivals: list


@dataclass(frozen=True)
class _FirstRound:
    """What a call solves first: ``solve`` (algorithm names); for ``"auto"`` with several
    candidates also each one's lower ``bounds`` (s) and the candidates in their ``order``
    (None otherwise: every candidate is solved at once)."""

    solve: list
    bounds: dict | None = None
    order: list | None = None


def _auto_first(graph, ranks, plans, options, model=None) -> _FirstRound:
    """``"auto"``'s first round: each candidate's lower bound (needs no routing), the
    candidates in order of it, and those solved first: every algorithm NCCL's cost model
    times (with the model), else the most promising one."""
    capacities = Capacities(graph, ranks, options.efficiency)
    bounds = {a: lower_bound(capacities, plans[a], options, model) for a in plans}
    order = sorted(plans, key=bounds.get)
    first = [a for a in plans if algorithm_of(a).nccl_model] if options.tuner else []
    return _FirstRound(first or order[:1], bounds, order)


def _auto_rest(graph, ranks, plans, options, tune, bounds, order, table, results):
    """``"auto"``'s second round, given the first's ``results``: in one batched call every
    other candidate whose bound is below the best time so far; the rest cannot win and are
    never routed or solved. Returns the TimedScenario and the pruned candidates' bounds."""
    best_time = min(r.time for r in results.values())
    if options.tuner and (pick := nccl_pick(tune(results))) is not None:
        best_time = min(best_time, pick[1][0])
    rest = [a for a in order if a not in results and bounds[a] < best_time]
    if rest:
        results.update(time_plans(graph, ranks, {a: plans[a] for a in rest}, options, [graph])[0].results)
    timed = TimedScenario(table, {a: results[a] for a in plans if a in results})
    return timed, {a: bounds[a] for a in plans if a not in results}


def is_tuned(algorithm, op, options) -> bool:
    """Whether NCCL's cost model times ``algorithm`` for ``op`` (else the per-step model)."""
    return options.tuner and algorithm_of(algorithm).nccl_model and op in TUNED_OPS


def _pick(op, size, p, results, hw, options, model, only=None) -> _Pick:
    """NCCL's pick among the algorithms its cost model times (the least estimate, :func:`~._nccl_timing.nccl_pick`)
    against the fastest of the others (among the algorithms ``only`` where given: a tuple of
    names; the others solved, the ring for the graph's bus bandwidth, are not picked)."""
    tuned = tuned_times(op, size, p, results, hw, options, model) if options.tuner else {}
    if only is not None:
        results = {a: r for a, r in results.items() if a in only}
        tuned = {k: v for k, v in tuned.items() if k[0] in only}
    entries = {}
    for a, r in results.items():
        if is_tuned(a, op, options):
            continue                # the host's floor (several GPUs a thread) is in the tuned times already
        steps, gpu, load = p2p_bound(r.steps, r.time, size, hw, model)   # a send's P2P channels may bound it
        if model is not None:       # a calibration's latency scale and launch latency: every call's
            moved = transfer_of(steps)
            gpu = model.flow_timed(gpu - moved, moved)
            steps = steps if not np.isfinite(gpu) else rescaled(steps, gpu, gpu - moved, options.base)
        total = options.with_host(gpu)
        steps = steps if total == gpu or not np.isfinite(total) else \
            rescaled(steps, total, total - transfer_of(steps), options.base)   # the host's time is latency
        entries[a, options.step_protocol] = (total, steps, r.utilization * load)
    own = dict(entries)
    for (a, proto), (total, lat, _) in tuned.items():
        base = _BASE[a][PROTOCOLS.index(proto)] * 1e-6 if options.base_latency is None else options.base_latency
        steps = results[a].steps
        timed = rescaled(steps, total, lat, base) if np.isfinite(total) else steps
        # the same bytes over the tuned transfer: each link's mean utilization scales inversely
        solved, tuned_transfer = transfer_of(steps), transfer_of(timed)
        ratio = solved / tuned_transfer if tuned_transfer > 0 and np.isfinite(tuned_transfer) else 1.0
        if algorithm_of(a).derived(op):
            # NVLS / NVLSTree / PAT timed from the ring's solve: the links carried the ring's bytes
            # only in the model, so a time shorter than those bytes allow says they moved fewer
            # (NVLS reduces in the switch), not that a link ran above its rate (NVLSTree on 2 x DGX
            # H100 at 1 GiB read 1.27): shown as the ring's solve had them
            ratio = min(ratio, 1.0)
        entries[a, proto] = (total, timed, results[a].utilization * ratio)
    pick = nccl_pick(tuned)
    # NCCL's pick first: it wins a tie (two times at the host's floor, gpus_per_thread > 1)
    contest = {pick[0]: entries[pick[0]], **own} if pick is not None else own
    (a, proto), (total, steps, util) = min(contest.items(), key=lambda kv: kv[1][0])
    candidates = {name: t for (name, _), (t, _, _) in own.items()}
    for name in {name for name, _ in tuned}:           # each algorithm with the protocol NCCL would pick
        (_, pr), _ = nccl_pick({k: v for k, v in tuned.items() if k[0] == name})
        candidates[name] = min(entries[name, pr][0], candidates.get(name, np.inf))
    choices = {f"{name}/{pr}": v[0] for (name, pr), v in entries.items()}
    rivals = [] if pick is None or (a, proto) != pick[0] else \
        [f"{n}/{pr}" for (n, pr), (_, _, est) in tuned.items()
         if (n, pr) != pick[0] and abs(est - pick[1][2]) <= RTOL * pick[1][2]]
    estimates = {f"{name}/{pr}": est for (name, pr), (_, _, est) in tuned.items()}
    return _Pick(a, proto, total, steps, util, choices, estimates, candidates, rivals)
