"""Step times of degraded fabrics: each distinct degraded state of the cluster solved once,
the collective ones in one batched call.

A *state* counts, for each degradation process, how many of its links are degraded, and for
each straggler process how many GPUs straggle. The fabric of a state degrades, on each tier,
that many cables taken in a fixed order (one seeded permutation of the tier's cables, the
processes of one tier taking consecutive blocks of it): on the symmetric fabrics the
generators build every cable of a tier is alike, so the state, not the cables' names, sets the
step time. A straggler does not change the fabric: the synchronous step waits for the
slowest GPU, so the step grows by ``compute_time (1 / factor - 1)`` (the smallest factor of
the stragglers active).

A *workload* is what one training step runs: a dict of :func:`~flowsolver.training_step`'s
arguments (with ``model``); a dict of :func:`~flowsolver.collective`'s (with ``op``) plus
``compute`` (seconds of computation per step, not overlapped, default 0) and ``tokens``
(tokens per step, optional); or a callable ``graph -> float`` (the step time, s).
"""

from __future__ import annotations

import numpy as np

import topologies as tp

from .._status import Status
from ..collectives import collective_variants
from ..training import training_step

__all__ = ["StateTimes", "state_graphs", "state_step_times", "healthy_step"]

#: degraded fabrics solved per batched call (memory grows with the batch)
BATCH = 32
_COLLECTIVE_KEYS = ("compute", "tokens")


class StateTimes:
    """Step time of each distinct state: ``states`` (m, processes) int, ``step_time`` (m,) s,
    ``status`` (m,) labels, ``message`` per state ("" when ok)."""

    def __init__(self, states, step_time, status, message):
        self.states = np.asarray(states, dtype=np.int64)
        self.step_time = np.asarray(step_time, dtype=np.float64)
        self.status = list(status)
        self.message = list(message)

    def __len__(self):
        return len(self.step_time)


def _check_workload(workload):
    if callable(workload):
        return "callable"
    if isinstance(workload, dict) and "model" in workload:
        return "train"
    if isinstance(workload, dict) and "op" in workload:
        compute = workload.get("compute", 0.0)
        if isinstance(compute, bool) or not isinstance(compute, (int, float)) or not np.isfinite(compute) \
                or compute < 0:
            raise ValueError(f"workload['compute'] must be a finite number of seconds >= 0, got {compute!r}")
        tokens = workload.get("tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, (int, float))
                                   or not np.isfinite(tokens) or tokens <= 0):
            raise ValueError(f"workload['tokens'] must be a number of tokens per step > 0, got {tokens!r}")
        return "collective"
    raise TypeError("workload must be a dict of training_step() arguments (with 'model'), a dict of collective() "
                    "arguments (with 'op', optional 'compute' s and 'tokens' per step), or a callable "
                    f"graph -> step time; got {type(workload).__name__}")


def healthy_step(graph, workload) -> dict:
    """``step_time`` (s), ``compute_time`` (s, what a straggler slows) and ``tokens`` (per
    step, NaN when unknown) of ``workload`` on the healthy ``graph``.

    >>> import topologies as tp
    >>> h = healthy_step(tp.rail_optimized(2), dict(op="all_reduce", size=2**30, compute=0.5, tokens=1e6))
    >>> h["step_time"] > 0.5, h["compute_time"], h["tokens"]
    (True, 0.5, 1000000.0)
    """
    kind = _check_workload(workload)
    if kind == "train":
        r = training_step(graph, **workload)
        return dict(step_time=float(r.step_time), compute_time=float(r.compute_time), tokens=r.tokens_per_step,
                    dp=int(r.dp))
    if kind == "collective":
        args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
        r = collective_variants([graph], **args)[0]
        if r.status != Status.OK:
            raise ValueError(f"the workload cannot run on the healthy graph: {r.message}")
        compute = float(workload.get("compute", 0.0))
        tokens = workload.get("tokens")
        return dict(step_time=compute + float(r.time), compute_time=compute,
                    tokens=float("nan") if tokens is None else float(tokens), dp=None)
    t = float(workload(graph))
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"the workload callable must return a finite step time > 0 (s), got {t!r}")
    return dict(step_time=t, compute_time=0.0, tokens=float("nan"), dp=None)


def tier_orders(graph, tiers, seed: int) -> dict:
    """For each tier, its cables in a seeded random order (the order degradations take them)."""
    rng = np.random.default_rng(seed)
    out = {}
    for tier in sorted(set(tiers)):
        cables = tp.tier_cables(graph, tier)
        out[tier] = [cables[i] for i in rng.permutation(len(cables))]
    return out


def state_graphs(graph, degrades, states, *, seed: int = 0) -> list:
    """The degraded graph of each state: ``degrades`` a list of (tier, factor), one per
    degradation process, ``states`` (m, len(degrades)) counts of degraded cables. Counts
    beyond a tier's cables degrade all of them.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(4)
    >>> [len(h.graph.get("degraded", [])) for h in state_graphs(g, [("leaf-spine", 0.5)], [[0], [3]])]
    [0, 3]
    """
    states = np.asarray(states, dtype=np.int64).reshape(len(states), len(degrades))
    orders = tier_orders(graph, [t for t, _ in degrades], seed)
    out = []
    for row in states:
        if not row.any():
            out.append(graph)
            continue
        h, taken = graph, {t: 0 for t in orders}
        for (tier, factor), count in zip(degrades, row):
            if count <= 0:
                continue
            start = taken[tier]
            pick = orders[tier][start:start + int(count)]
            taken[tier] = start + len(pick)
            if pick:
                h = tp.degrade_links(h, pick, factor)
        out.append(h)
    return out


def state_step_times(graph, workload, degrades, stragglers, states, *, compute_time: float, seed: int = 0,
                     batch: int = BATCH) -> StateTimes:
    """Step time of each distinct state (rows of ``states``: the degradation counts, then
    the straggler counts). Collective workloads: every distinct fabric in batched calls of
    :func:`~flowsolver.collective_variants` (``batch`` fabrics a call, routed once);
    training and callables: one call per distinct fabric. A fabric that cannot run is
    reported in ``status`` (its time inf), never raised.
    """
    states = np.asarray(states, dtype=np.int64)
    n_deg = len(degrades)
    fabric_rows, fabric_of = np.unique(states[:, :n_deg], axis=0, return_inverse=True) if len(states) else \
        (np.zeros((0, n_deg), np.int64), np.zeros(0, np.int64))
    fabric_of = np.asarray(fabric_of).reshape(-1)
    graphs = state_graphs(graph, degrades, fabric_rows, seed=seed)
    kind = _check_workload(workload)
    times = np.full(len(graphs), np.inf)
    status = [Status.OK.label] * len(graphs)
    message = [""] * len(graphs)
    if kind == "collective":
        compute = float(workload.get("compute", 0.0))
        args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
        for lo in range(0, len(graphs), batch):
            part = [graph] + graphs[lo:lo + batch]      # routed on the healthy graph, solved for all
            for j, r in enumerate(collective_variants(part, **args)[1:]):
                if r.status == Status.OK:
                    times[lo + j] = compute + float(r.time)
                else:
                    status[lo + j], message[lo + j] = r.status.label, r.message
    else:
        for j, h in enumerate(graphs):
            try:
                if kind == "train":
                    times[j] = float(training_step(h, **workload).step_time)
                else:
                    times[j] = float(workload(h))
            except ValueError as err:                 # a fabric that cannot run: recorded, not raised
                status[j], message[j] = Status.FAILED.label, str(err).splitlines()[0]
    step = times[fabric_of]
    st = [status[i] for i in fabric_of]
    msg = [message[i] for i in fabric_of]
    if stragglers:
        factors = np.array([f for f in stragglers], dtype=np.float64)
        active = states[:, n_deg:] > 0
        slowest = np.where(active, factors[None, :], 1.0).min(axis=1)
        step = step + compute_time * (1.0 / slowest - 1.0)
    return StateTimes(states, step, st, msg)
