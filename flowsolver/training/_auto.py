"""``vp="auto"`` / ``micro_batch="auto"``: the values training_step leaves open, each candidate
timed exactly and the fastest that fits kept (every candidate's collective kinds in two batched
calls, each kind once, as :func:`flowsolver.plan` does: a kind's time does not depend on the
kinds solved beside it)."""

from __future__ import annotations

import dataclasses
import itertools

import topologies as tp_

from .. import _checks
from ..routing import unchanged
from ._compose import StepResult, compose
from ._schedule import default_batch
from ._parallelism import AUTO_CANDIDATES, _open_or_integer
from ._prepare import prepare_step
from ._profile import step_collectives, time_collectives, solve_profile

__all__ = ["AutoChoice", "Candidate", "Excluded", "choose_open"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate timed: its ``vp`` and ``micro_batch``, the step time (s), the memory per
    GPU (bytes) and whether it fits in the GPU's memory."""

    vp: int
    micro_batch: int
    step_time: float
    memory_per_gpu: float
    fits: bool


@dataclasses.dataclass(frozen=True)
class Excluded:
    """One candidate the job cannot run, and why (the error training_step gives for it)."""

    vp: int
    micro_batch: int
    reason: str


@dataclasses.dataclass(frozen=True)
class AutoChoice:
    """What :func:`flowsolver.training_step` picked for the fields left open (``open``: ``vp``
    and / or ``micro_batch``): ``vp`` and ``micro_batch`` of the fastest candidate that fits
    in the GPU's memory (of the fastest one if none fits), every candidate ``timed`` (in that
    order: those that fit, fastest first, then the others) and the ``excluded`` ones with
    their reason."""

    open: tuple
    vp: int
    micro_batch: int
    timed: tuple
    excluded: tuple

    def __str__(self) -> str:
        picked = ", ".join(f"{name}={getattr(self, name)}" for name in self.open)
        lines = [f"picked {picked} of {len(self.timed)} timed, {len(self.excluded)} excluded"]
        lines += [f"  vp={c.vp} micro_batch={c.micro_batch}: {c.step_time:.6g} s"
                  f"{'' if c.fits else ' (does not fit in memory)'}" for c in self.timed]
        lines += [f"  vp={e.vp} micro_batch={e.micro_batch}: excluded, {e.reason}" for e in self.excluded]
        return "\n".join(lines)


class _SolvedOnce:
    """:func:`time_collectives` remembering each collective kind ``(op, bytes, groups, algorithm)``."""

    def __init__(self):
        self._store: dict = {}

    def _keys(self, calls) -> list:
        return [(op, float(size), tuple(map(tuple, groups)), algorithm) for op, size, groups, algorithm in calls]

    def fill(self, graph, calls, options) -> None:
        """The kinds of ``calls`` not yet known, solved in one batched call."""
        missing = list(dict.fromkeys(k for k in self._keys(calls) if k not in self._store))
        if missing:
            self._store.update(zip(missing, time_collectives(graph, [(op, size, [list(g) for g in groups],
                                                                      algorithm)
                                                                     for op, size, groups, algorithm in missing],
                                                             options)))

    def __call__(self, graph, calls, options) -> list:
        self.fill(graph, calls, options)
        return [self._store[k] for k in self._keys(calls)]

    def prefetch(self, graph, prepared: list) -> list:
        """:func:`prefetch_kinds` into this store."""
        def chosen(calls):
            return self(graph, calls, prepared[0].solve["options"])
        return prefetch_kinds(graph, prepared, self.fill, chosen)


def prefetch_kinds(graph, prepared: list, fill, chosen, groups=None) -> list:
    """Every collective kind the ``prepared`` steps (:func:`prepare_step`'s) solve, in two
    batched calls of ``fill(graph, calls, options)`` (the kinds, then the all-gathers after
    their reduce-scatters with the algorithm ``chosen(calls)`` reports for each: what
    :func:`solve_profile` asks for, in the same way); returns each step's collectives
    (``step_collectives``'s list, for :func:`solve_profile`). ``groups(layout)``, when given,
    lays out each step's rank groups (a planner's cache of them)."""
    plans, first = [], []
    for prep in prepared:
        s = prep.solve
        extra = {} if groups is None else {"groups": groups(s["layout"])}
        steps = step_collectives(s["model"], s["layout"], s["micro_batch"], s["zero"], s["sequence_parallel"],
                                 s["model"].top_k, s["capacity_factor"], s["reduce_bytes"], s["gather_bytes"],
                                 param_sync=s.get("param_sync", "all_gather"), **extra)
        calls = [(op, size, groups_, s["algorithms"].get(kind, "auto")) for _, kind, op, size, groups_ in steps]
        plans.append((s, steps, calls))
        first += calls
    if not first:
        return [steps for _, steps, _ in plans]
    options = prepared[0].solve["options"]
    fill(graph, first, options)
    second = []
    for s, steps, calls in plans:
        for (name, _, op, size, groups_), (_, algorithm, _, _) in zip(steps, chosen(calls)):
            if op == "reduce_scatter" and name != "dp_reduce":
                gather = size * (s["gather_bytes"] / s["reduce_bytes"] if name.startswith("dp") else 1.0)
                second.append(("all_gather", gather, groups_, algorithm))
    if second:
        fill(graph, second, options)
    return [steps for _, steps, _ in plans]


def _candidates(name: str, value) -> tuple:
    value = _open_or_integer(name, value)
    return AUTO_CANDIDATES[name] if value == "auto" else value if isinstance(value, tuple) else (value,)


def _fixed_batch(graph, arguments: dict):
    """With ``micro_batch`` open and no ``global_batch``: the default batch for micro-batch 1
    (every candidate then runs the same batch); ``None`` when the degrees do not give ``dp``
    (training_step's own error then names them)."""
    try:
        n = len(tp_.gpus(graph))
        cells = 1
        for name in ("tp", "cp", "pp"):
            cells *= _checks.integer(name, arguments[name])
        dp = n // cells if arguments["dp"] is None else _checks.integer("dp", arguments["dp"])
    except (ValueError, TypeError, KeyError):
        return None
    return default_batch(dp, 1) if dp >= 1 else None


def choose_open(graph, arguments: dict) -> StepResult:
    """:func:`flowsolver.training_step` of ``arguments`` (every keyword of one release) with
    ``vp`` and / or ``micro_batch`` open (``"auto"`` or a tuple of candidates): each candidate
    checked as training_step checks it (an infeasible one excluded with training_step's error
    as the reason), the feasible ones timed exactly and the fastest that fits kept (ties: the
    less memory, then the smaller ``vp``, then ``micro_batch``), its result carrying the :class:`AutoChoice`.

    >>> import topologies as tp
    >>> from flowsolver import Parallelism, Schedule, training_step
    >>> r = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8, micro_batch="auto"),
    ...                   Schedule(global_batch=16))
    >>> r.chosen.open, r.micro_batch == r.chosen.micro_batch, len(r.chosen.timed)
    (('micro_batch',), True, 4)
    """
    names = tuple(n for n in ("vp", "micro_batch") if isinstance(arguments[n], (str, tuple, list, range)))
    values = {n: _candidates(n, arguments[n]) for n in ("vp", "micro_batch")}
    arguments = dict(arguments)
    if "micro_batch" in names and arguments["global_batch"] is None:
        arguments["global_batch"] = _fixed_batch(graph, arguments)
    _checks.checked_graph(graph)
    solved, prepared = _SolvedOnce(), {}
    timed, excluded, results = [], [], {}
    with unchanged(graph, checked=True):
        for vp, mb in itertools.product(values["vp"], values["micro_batch"]):
            try:
                prepared[(vp, mb)] = prepare_step(graph, **(arguments | dict(vp=vp, micro_batch=mb)),
                                                  check_graph=False)
            except ValueError as err:
                excluded.append(Excluded(vp=vp, micro_batch=mb, reason=str(err)))
        # every candidate's collective kinds in two batched calls, each kind once
        planned = solved.prefetch(graph, list(prepared.values()))
        for ((vp, mb), prep), steps in zip(prepared.items(), planned):
            r = compose(solve_profile(graph, **prep.solve, timed=solved, steps=steps), prep.schedule)
            results[(vp, mb)] = r
            timed.append(Candidate(vp=vp, micro_batch=mb, step_time=r.step_time, memory_per_gpu=r.memory_per_gpu,
                                   fits=r.fits))
    if not timed:
        reasons = "; ".join(f"vp={e.vp} micro_batch={e.micro_batch}: {e.reason}" for e in excluded[:4])
        raise ValueError(f"no candidate of {', '.join(names)} can run this job: {reasons}")
    timed.sort(key=lambda c: (not c.fits, c.step_time, c.memory_per_gpu, c.vp, c.micro_batch))
    best = timed[0]
    choice = AutoChoice(open=names, vp=best.vp, micro_batch=best.micro_batch, timed=tuple(timed),
                        excluded=tuple(excluded))
    return dataclasses.replace(results[(best.vp, best.micro_batch)], chosen=choice)
