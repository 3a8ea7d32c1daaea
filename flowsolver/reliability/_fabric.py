"""Step times of degraded fabrics: each distinct degraded state of the cluster solved once,
the collective ones in one batched call.

A *state* counts, for each degradation process, how many of its physical cables are degraded,
and for each straggler process how many GPUs straggle. The fabric of a state degrades, on
each tier, that many physical cables taken in a fixed order (one seeded permutation of the
tier's cables, the processes of one tier taking consecutive blocks of it): on the symmetric
fabrics the generators build every cable of a tier is alike, so the state, not the cables'
names, sets the step time. A graph edge bundles ``cables`` parallel cables (its capacity
their sum): one of ``n`` at ``factor`` leaves the bundle ``1 - (1 - factor) / n`` of its
capacity (the bundle's traffic shares its cables' rates, as the graph pools them). A
straggler does not change the fabric: the synchronous step waits for the slowest GPU, so
the step grows by ``compute_time (1 / factor - 1)`` (the smallest factor of the stragglers
active).

A *workload* is what one training step runs: a dict of :func:`~flowsolver.training_step`'s
arguments (with ``model``); a dict of :func:`~flowsolver.collective`'s (with ``op``) plus
``compute`` (seconds of computation per step, not overlapped, default 0) and ``tokens``
(tokens per step, optional); or a callable ``graph -> float`` (the step time, s), with an
optional attribute ``compute_time`` (the seconds of that step that are computation, which a
straggler slows).
"""

from __future__ import annotations

import numpy as np

import topologies as tp

from .._status import Status
from ..collectives import collective, collective_variants
from ..routing import policy_of
from ..training import step_arguments, training_step
from ._views import _capacities, _degraded_view, _owned_copy, _peak_loads, steps_times

__all__ = ["StateTimes", "state_graphs", "state_changes", "state_step_times", "healthy_step", "steps_times"]

#: degraded fabrics solved per batched call: on rail_optimized(2048), a 16,384-GPU ring
#: all-reduce step (131,072 flows, 139,264 links) re-solved for 1 / 8 / 32 fabrics took 1.6 /
#: 2.9 / 14.3 s on the project's 2 shared cores (benchmarks/goodput.py's job): ~8 a call is
#: the cheapest per fabric, and memory grows with the batch
BATCH = 8
_COLLECTIVE_KEYS = ("compute", "tokens")
#: what a job's traffic does on a degraded cable (see :func:`state_step_times`)
REROUTE = ("stay", "around")


class StateTimes:
    """Step time of each distinct state: ``states`` (m, processes) int, ``step_time`` (m,) s,
    ``status`` (m,) labels, ``message`` per state ("" when ok)."""

    def __init__(self, states, step_time, status, message, fabrics=0, solved=None):
        self.fabrics = int(fabrics)           # distinct degraded fabrics (the healthy one not counted)
        self.solved = self.fabrics if solved is None else int(solved)   # of which re-solved (the rest: unused links)
        self.rerouted = 0                     # of which routed around their degraded cables (reroute="around")
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
    """``step_time`` (s), ``compute_time`` (s, what a straggler slows; a callable's
    ``compute_time`` attribute, None without one) and ``tokens`` (per step, NaN when unknown)
    of ``workload`` on the healthy ``graph``; a training step's ``dp`` and ``replicas`` (GPU
    rank -> its data-parallel replica).

    >>> import topologies as tp
    >>> h = healthy_step(tp.rail_optimized(2), dict(op="all_reduce", size=2**30, compute=0.5, tokens=1e6))
    >>> h["step_time"] > 0.5, h["compute_time"], h["tokens"]
    (True, 0.5, 1000000.0)
    """
    kind = _check_workload(workload)
    if kind == "train":
        r = training_step(graph, **step_arguments(**workload))
        lay = r.profile.layout            # a GPU's replica: its DP index (CP ranks hold the same weights)
        replicas = {rank: pos // lay.cp for group in lay.groups("dp") for pos, rank in enumerate(group)}
        return dict(step_time=float(r.step_time), compute_time=float(r.compute_time), tokens=r.tokens_per_step,
                    dp=int(r.dp), replicas=replicas)
    if kind == "collective":
        args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
        r = collective(graph, **args)
        if r.status != Status.OK:
            raise ValueError(f"the workload cannot run on the healthy graph: {r.message}")
        compute = float(workload.get("compute", 0.0))
        tokens = workload.get("tokens")
        return dict(step_time=compute + float(r.time), compute_time=compute,
                    tokens=float("nan") if tokens is None else float(tokens), dp=None, result=r)
    t = float(workload(graph))
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"the workload callable must return a finite step time > 0 (s), got {t!r}")
    c = getattr(workload, "compute_time", None)          # None: the callable does not say
    if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= t):
        raise ValueError(f"the workload callable's compute_time must be the seconds of its step's computation, "
                         f"from 0 to its step time {t!r}, got {c!r}")
    return dict(step_time=t, compute_time=None if c is None else float(c), tokens=float("nan"), dp=None)


def tier_orders(graph, tiers, seed: int) -> dict:
    """For each tier, its physical cables in the order degradations take them: its edge
    bundles in a seeded random order, a bundle of ``n`` parallel cables (an edge's
    ``cables``) appearing ``n`` times, once in each pass over them (the degraded cables spread
    over the bundles before a bundle has two)."""
    rng = np.random.default_rng(seed)
    out = {}
    for tier in sorted(set(tiers)):
        cables = tp.tier_cables(graph, tier)
        order = [cables[i] for i in rng.permutation(len(cables))]
        sizes = [_bundle(graph, c) for c in order]
        out[tier] = [c for k in range(max(sizes)) for c, n in zip(order, sizes) if n > k]
    return out


def _bundle(graph, cable) -> int:
    """Physical cables in the edge bundle ``cable`` (its ``cables`` attribute, default 1)."""
    return int(graph.edges[cable].get("cables", 1))


def state_graphs(graph, degrades, states, *, seed: int = 0) -> list:
    """The degraded graph of each state: ``degrades`` a list of (tier, factor), one per
    degradation process, ``states`` (m, len(degrades)) counts of degraded cables. Counts
    beyond a tier's cables degrade all of them.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(4)
    >>> [len(h.graph.get("degraded", [])) for h in state_graphs(g, [("leaf-spine", 0.5)], [[0], [3]])]
    [0, 3]
    """
    return [_degraded_view(graph, changes) if changes else graph
            for changes in state_changes(graph, degrades, states, seed=seed)]


def state_changes(graph, degrades, states, *, seed: int = 0) -> list:
    """Per state, the ``((u, v), factor)`` changes of its fabric's edge bundles (see the module
    docstring: ``factor`` the bundle's, ``1 - sum(1 - f) / n`` over its degraded cables)."""
    return [[(cable, 1.0 - sum(1.0 - f for f in fs) / n) for cable, n, fs in row]
            for row in bundle_changes(graph, degrades, states, seed=seed)]


def bundle_changes(graph, degrades, states, *, seed: int = 0) -> list:
    """Per state, ``(cable, n, factors)`` for each edge bundle with degraded cables: its
    physical cables ``n`` and the factor of each degraded one."""
    states = np.asarray(states, dtype=np.int64).reshape(len(states), len(degrades))
    orders = tier_orders(graph, [t for t, _ in degrades], seed)
    out = []
    for row in states:
        hit, taken = {}, {t: 0 for t in orders}
        for (tier, factor), count in zip(degrades, row):
            if count <= 0:
                continue
            start = taken[tier]
            pick = orders[tier][start:start + int(count)]
            taken[tier] = start + len(pick)
            for cable in pick:
                hit.setdefault(cable, []).append(factor)
        out.append([(cable, _bundle(graph, cable), fs) for cable, fs in hit.items()])
    return out


def state_step_times(graph, workload, degrades, stragglers, states, *, compute_time: float, seed: int = 0,
                     batch: int = BATCH, healthy_time: float | None = None, healthy_result=None,
                     reroute: str = "stay", reroute_below: float = 1.0) -> StateTimes:
    """Step time of each distinct state (rows of ``states``: the degradation counts, then
    the straggler counts). Collective workloads: the collective solved once on the healthy
    graph, then every distinct step re-solved on the capacities of ``batch`` fabrics a
    batched call (:func:`steps_times`; where the healthy result has no such derivation, a
    tie between NCCL's choices, :func:`~flowsolver.collective_variants` on the degraded
    graphs); training and callables: one call per distinct fabric. A fabric that cannot run is
    reported in ``status`` (its time inf), never raised. ``healthy_time``: the step time of
    the undegraded fabric when already known (it is then not solved again); ``healthy_result``:
    the workload's collective on the healthy graph, when already solved.

    ``reroute``: what the traffic does on a degraded cable. ``"stay"``: it keeps its routes
    and the cable's share of it moves at the cable's lower rate (static ECMP hashing, or a
    fabric that does not see the degradation). ``"around"``: every degraded cable that slows
    the step and runs at less than ``reroute_below`` of its rate is taken out of routing
    (adaptive routing, or an operator draining it; ECMP rehashes onto the cables left; for
    a collective, a cable that still carries all the healthy step put on it slows nothing
    and keeps its traffic; for training steps and callables every degraded cable below the
    threshold is drained) and the step is routed and solved again on that fabric
    (:func:`~flowsolver.collective` with the healthy run's algorithm, protocol and channels,
    routed once per set of drained cables and solved in batches for the fabrics sharing it;
    :func:`~flowsolver.training_step`; or the callable); where no route is left around the
    cables, the traffic stays on them (that fabric as ``"stay"``). Routing again costs about
    one healthy solve per set of drained cables.
    """
    if reroute not in REROUTE:
        raise ValueError(f"reroute must be one of {', '.join(REROUTE)}, got {reroute!r}")
    if isinstance(reroute_below, bool) or not isinstance(reroute_below, (int, float)) \
            or not (0 < reroute_below <= 1):
        raise ValueError(f"reroute_below must be in (0, 1] (a fraction of a cable's rate), got {reroute_below!r}")
    states = np.asarray(states, dtype=np.int64)
    n_deg = len(degrades)
    fabric_rows, fabric_of = np.unique(states[:, :n_deg], axis=0, return_inverse=True) if len(states) else \
        (np.zeros((0, n_deg), np.int64), np.zeros(0, np.int64))
    fabric_of = np.asarray(fabric_of).reshape(-1)
    bundles = bundle_changes(graph, degrades, fabric_rows, seed=seed)
    all_changes = [[(cable, 1.0 - sum(1.0 - f for f in fs) / n) for cable, n, fs in row] for row in bundles]
    built: dict = {}

    def fabric(j):
        # a degraded graph is built only where it is solved as a graph (a view of a large
        # graph costs ~0.1 s; the batched re-solve of a collective needs only capacities)
        if j not in built:
            built[j] = _degraded_view(graph, all_changes[j]) if all_changes[j] else graph
        return built[j]

    kind = _check_workload(workload)
    times = np.full(len(all_changes), np.inf)
    status = [Status.OK.label] * len(all_changes)
    message = [""] * len(all_changes)
    solved = None
    healthy_rows = ~fabric_rows.any(axis=1) if len(fabric_rows) else np.zeros(0, bool)
    if healthy_time is not None:
        times[healthy_rows] = healthy_time
    # states whose counts differ but whose fabrics are the same cables at the same factors
    # (counts beyond a tier's cables) are solved once
    first_of: dict = {}
    same = np.array([first_of.setdefault(tuple(sorted(map(repr, ch))), j) for j, ch in enumerate(all_changes)],
                    dtype=np.int64)
    distinct = same == np.arange(len(all_changes))
    todo = [j for j in range(len(all_changes)) if distinct[j] and (healthy_time is None or not healthy_rows[j])]
    binding_of: dict = {}                 # fabric -> its degraded cables that bind (collectives)
    if kind == "collective" and todo:
        compute = float(workload.get("compute", 0.0))
        args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
        base = collective(graph, **args) if healthy_result is None else healthy_result
        if base.status == Status.OK and base.solved_on is not None and not base.solved_on.why_not:
            changes = [all_changes[j] for j in todo]
            all_todo = list(todo)
            # only the degraded cables that bind count: a cable whose lower rate still carries
            # the most the healthy run ever put on it (at any event of any step) leaves every
            # event's max-min allocation feasible, hence still max-min fair (the fair
            # allocation over a larger set stays optimal over any subset that holds it): the
            # step runs exactly as before. Fabrics equal in their binding cables are solved
            # once; a fabric with none runs the healthy step.
            index = {e: i for i, e in enumerate(graph.edges())}
            peak = _peak_loads(base)
            eff = np.asarray(base.solved_on.effective, dtype=np.float64)

            def binding(ch):
                keep = [(cable, f) for cable, f in ch
                        if any(e in index and eff[index[e]] * f < peak[index[e]]
                               for e in (cable, cable[::-1]))]
                return keep

            reduced = [binding(ch) for ch in changes]
            binding_of.update(zip(todo, reduced))
            rep: dict = {}
            for j, ch in zip(list(todo), reduced):
                if not ch:
                    times[j] = compute + float(base.time)
                else:
                    rep.setdefault(tuple(sorted(map(repr, ch))), []).append(j)
            groups = list(rep.values())
            todo = [js[0] for js in groups]
            by_fabric = dict(zip(all_todo, reduced))
            changes = [by_fabric[js[0]] for js in groups]
            solved = len(todo)
            for lo in range(0, len(todo), batch):
                caps = _capacities(graph, base.solved_on.raw, changes[lo:lo + batch], index)
                if lo and len(caps) < batch:
                    # the last, shorter batch padded to the others' shape: its solve reuses their
                    # compiled kernels instead of compiling new ones (~0.5 s a step shape)
                    caps = np.vstack([caps, np.repeat(caps[-1:], batch - len(caps), axis=0)])
                got = steps_times(base, caps)
                for js, t in zip(groups[lo:lo + batch], got):
                    for j in js:
                        if np.isfinite(t):
                            times[j] = compute + float(t)
                        else:
                            status[j], message[j] = Status.STALLED.label, "a flow of the collective cannot move"
            todo = []
        for lo in range(0, len(todo), batch):
            chunk = todo[lo:lo + batch]
            part = [graph] + [fabric(j) for j in chunk]     # routed on the healthy graph, solved for all
            for j, r in zip(chunk, collective_variants(part, **args)[1:]):
                if r.status == Status.OK:
                    times[j] = compute + float(r.time)
                else:
                    status[j], message[j] = r.status.label, r.message
    else:
        for j in todo:
            h = fabric(j) if kind == "train" or fabric(j) is graph else _owned_copy(fabric(j))
            try:
                if kind == "train":
                    times[j] = float(training_step(h, **step_arguments(**workload)).step_time)
                else:
                    times[j] = float(workload(h))
            except ValueError as err:                 # a fabric that cannot run: recorded, not raised
                status[j], message[j] = Status.FAILED.label, str(err).splitlines()[0]
    rerouted = 0
    if reroute == "around":
        base = healthy_result
        if kind == "collective" and base is None:
            base = collective(graph, **{k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS})
        by_drained: dict = {}
        for j, changes in enumerate(all_changes):
            if not distinct[j]:
                continue
            # adaptive routing moves traffic off a cable that slows it: the binding ones (a
            # cable that still carries its healthy load slows nothing and keeps it), of a bundle
            # whose every cable is below the threshold (one with cables left at full rate keeps
            # its traffic, already spread over its cables' rates)
            slow = {c for c, _ in binding_of.get(j, changes)} & \
                {c for c, n, fs in bundles[j] if len(fs) >= n and max(fs) < reroute_below}
            drained = [(cable, 0.0) for cable, f in changes if cable in slow]
            if drained:
                kept = [(cable, f) for cable, f in changes if cable not in slow]
                by_drained.setdefault(tuple(sorted(map(repr, drained))), (drained, []))[1].append((j, kept))
        for drained, fabrics in by_drained.values():
            got = _around_times(graph, workload, kind, drained, [kept for _, kept in fabrics], base, batch)
            for (j, _), t in zip(fabrics, got):
                if t is not None:
                    times[j], status[j], message[j] = t, Status.OK.label, ""
                    rerouted += 1
    times = times[same]
    status, message = [status[i] for i in same], [message[i] for i in same]
    step = times[fabric_of]
    st = [status[i] for i in fabric_of]
    msg = [message[i] for i in fabric_of]
    if stragglers:
        factors = np.array([f for f in stragglers], dtype=np.float64)
        active = states[:, n_deg:] > 0
        slowest = np.where(active, factors[None, :], 1.0).min(axis=1)
        step = step + compute_time * (1.0 / slowest - 1.0)
    degraded = int(sum(1 for j, ch in enumerate(all_changes) if ch and distinct[j]))
    out = StateTimes(states, step, st, msg, fabrics=degraded, solved=solved)
    out.rerouted = rerouted
    return out


def _around_times(graph, workload, kind, drained, kept_per_fabric, base, batch):
    """Step times on ``graph`` with the cables of ``drained`` taken out of routing and, per
    fabric, the ``(cable, factor)`` of ``kept_per_fabric`` degraded in place; None where no
    route is left (the caller keeps the traffic on the degraded cables). A collective is
    routed once on the drained fabric and solved for its fabrics in batches
    (:func:`~flowsolver.collective_variants`: routes depend on which links are out, not on
    the others' rates), except under a policy whose routes follow the load (``ugal``, any
    policy registered with ``depends_on_load``), fabric by fabric."""
    if kind != "collective" or policy_of(workload.get("policy") or "ecmp").depends_on_load:
        return [_around_time(graph, workload, kind, kept + list(drained), base) for kept in kept_per_fabric]
    args = _pinned(workload, base)
    compute = float(workload.get("compute", 0.0))
    routed = _degraded_view(graph, list(drained))
    try:
        first = collective(routed, **args)
    except ValueError:                                # no route around (RoutingError)
        return [None] * len(kept_per_fabric)
    if first.status != Status.OK:
        return [None] * len(kept_per_fabric)
    der = first.solved_on
    if der is not None and not der.why_not:
        # as for the cables left in place: only those that bind on the drained fabric's
        # routes count, fabrics equal in them are solved once, on the drained fabric's
        # routes, in batches (steps_times)
        index = {e: i for i, e in enumerate(graph.edges())}
        peak, eff = _peak_loads(first), np.asarray(der.effective, dtype=np.float64)
        reduced = [[(cable, f) for cable, f in kept
                    if any(e in index and eff[index[e]] * f < peak[index[e]] for e in (cable, cable[::-1]))]
                   for kept in kept_per_fabric]
        out = [compute + float(first.time)] * len(kept_per_fabric)
        groups: dict = {}
        for k, ch in enumerate(reduced):
            if ch:
                groups.setdefault(tuple(sorted(map(repr, ch))), []).append(k)
        keys = list(groups.values())
        for lo in range(0, len(keys), batch):
            chunk = keys[lo:lo + batch]
            got = steps_times(first, _capacities(graph, der.raw, [reduced[ks[0]] for ks in chunk], index))
            for ks, t in zip(chunk, got):
                for k in ks:
                    out[k] = compute + float(t) if np.isfinite(t) else None
        return out
    out = []                                          # a tie between NCCL's choices: routed once, solved in batches
    for lo in range(0, len(kept_per_fabric), batch):
        part = [routed] + [_degraded_view(graph, kept + list(drained)) for kept in kept_per_fabric[lo:lo + batch]]
        done = collective_variants(part, **args)[1:]
        out += [compute + float(r.time) if r.status == Status.OK else None for r in done]
    return out


def _pinned(workload, base):
    """The workload's collective arguments with the healthy run's algorithm, protocol and
    channels (NCCL tunes once, when the job starts)."""
    args = {k: v for k, v in workload.items() if k not in _COLLECTIVE_KEYS}
    args["algorithm"] = base.algorithm
    if base.nccl:
        args["protocol"] = base.protocol
    if base.channels:
        args["channels"] = base.channels
    return args


def _around_time(graph, workload, kind, changes, base):
    """The step time on ``graph`` with ``changes`` (a factor 0: a cable drained, taken out of
    routing), routed again; None where no route is left (the caller keeps the traffic on the
    degraded cables)."""
    h = _degraded_view(graph, changes)
    try:
        if kind == "collective":
            r = collective(h, **_pinned(workload, base))
            return float(workload.get("compute", 0.0)) + float(r.time) if r.status == Status.OK else None
        if kind == "train":
            return float(training_step(h, **step_arguments(**workload)).step_time)
        t = float(workload(_owned_copy(h)))
        return t if np.isfinite(t) and t > 0 else None
    except ValueError:                                # no route around (RoutingError) or cannot run
        return None
