"""Several collectives at once on one fabric: event by event on the timing engine
(:func:`flowsolver.timing.step_times`), or in lockstep for symmetric groups."""

from __future__ import annotations

from collections.abc import Mapping

from dataclasses import replace

import numpy as np

from .. import _checks
from .._status import Status
from ..routing import RoutingMatrix, unchanged
from ..timing import step_times
from ._calibration import checked_model
from ._algorithms import algorithm_of
from ._collective import Call, collective_with, solve_collectives
from ._hardware import describe, laid_out
from ._layout import participants, unavailable
from ._p2p import least_transfer, with_communicator
from ._nccl import DEFAULT_CHUNK
from ._options import CollectiveOptions, Options, check_call, check_efficiency_keys, check_split, merged_options
from ._results import ConcurrentResult
from ._schedules import schedule
from ._solve import route_step, solve_steps, step_latencies, step_peer_latency

__all__ = ["concurrent", "concurrent_kinds"]


def _checked_spec(spec) -> dict:
    if not isinstance(spec, Mapping):           # dict() of a tuple or a string says "dictionary update sequence"
        raise ValueError(f"collectives must be a list of dicts with 'op' and 'size' (optional 'ranks', 'algorithm', "
                         f"'channels'), got an item {spec!r}")
    spec = dict(spec)
    if set(spec) - {"op", "size", "ranks", "algorithm", "channels"} or "op" not in spec or "size" not in spec:
        raise ValueError(f"each collective needs 'op' and 'size' (optional 'ranks', 'algorithm', "
                         f"'channels'), got keys {sorted(spec)}")
    return spec


def _sends_simple(op, options):
    """``options`` for ``op``: a job's protocol setting is NCCL_PROTO's, which NCCL's sends do
    not take: a send / receive and an all-to-all run Simple (LL only for small parts inside a
    node; src/enqueue.cc addP2pToPlan), whatever the collectives beside them run (a single
    :func:`collective` call asking LL of a send is refused)."""
    return replace(options, protocol="Simple") if op in ("send_recv", "all_to_all") else options


def _plan(graph, spec, options):
    """(ranks, algorithm, steps, options) of one collective (its options: :func:`_sends_simple`);
    ``"auto"`` is the fastest alone."""
    opts = _sends_simple(spec["op"], replace(options, channels=spec.get("channels")))
    algorithm = spec.get("algorithm", "auto")
    check_call(spec["op"], algorithm, spec["size"], opts)     # the protocol as given, also under auto
    if algorithm == "auto":   # NCCL's choice alone, as collective() makes it (collective_with checks every argument)
        tuned = opts.step_latency is None
        # a list of protocols (NCCL_PROTO=LL,Simple) is what NCCL chooses among, as collective()
        # reads it; one name is the event engine's per-step constants (Simple unless set), not a limit
        limited = tuned and not isinstance(opts.protocol, str)
        chooser = replace(opts, tuner=tuned, protocol=opts.protocol if limited or not tuned else "auto")
        algorithm = collective_with(graph, spec["op"], spec["size"], spec.get("ranks"), "auto", chooser).algorithm
    ranks, layout = laid_out(graph, spec["op"], spec.get("ranks"), opts.channels)
    check_split(spec["op"], spec["size"], len(ranks), opts)
    if why := unavailable(algorithm, len(ranks), layout):
        raise ValueError(f"algorithm {algorithm!r} {why}")
    # an algorithm NCCL's cost model times from the ring's flows (NVLSTree, PAT, NVLS all-gather)
    # has no steps of its own: the event engine runs the ring's
    steps_of = "ring" if algorithm_of(algorithm).derived(spec["op"]) else algorithm
    return tuple(ranks), algorithm, schedule(spec["op"], steps_of, len(ranks), float(spec["size"]), layout,
                                             float(options.chunk)), opts


class _Routed:
    """Steps routed once per (ranks, flows) value, with their sizes and latency."""

    def __init__(self, graph, options):
        self.graph, self.options, self.cache = graph, options, {}

    def __call__(self, ranks, flows, options=None):
        """(routing, sizes, step latency, each flow's) of a step, its latency at ``options``'
        step protocol (default the call's)."""
        options = self.options if options is None else options
        key = (ranks, flows, options.step_protocol)
        if key not in self.cache:
            rm, sizes = route_step(self.graph, list(ranks), flows, options)
            step, per_flow = step_latencies(rm, np.zeros(rm.n_flows, dtype=np.int64), 1, options, per_flow=True)
            self.cache[key] = (rm, sizes, float(step[0]), per_flow)
        return self.cache[key]


def _timeline(plans, routed, cap):
    """Event-driven run of several step sequences (``(ranks, steps, options)``) sharing the
    fabric (every step after the previous one of its collective and its latency; the first
    after its options' base latency too): the finish time of each, and the engine's status."""
    parts, sizes, after, delay, last = [], [], [], [], []
    for ranks, steps, opts in plans:
        for j, st in enumerate(steps):
            rm, size, latency, per_flow = routed(ranks, st.flows, opts)
            # the step's slowest hop, or one channel's where channels pipeline apart (Step.latency_flows)
            latency = latency if st.latency_flows is None else float(np.max(per_flow[list(st.latency_flows)]))
            latency += step_peer_latency(st, opts)      # NCCL's grouped sends: each further peer
            # the step's latencies spread evenly over its repetitions
            for r in range(st.count):
                after.append(len(parts) - 1 if j or r else -1)
                delay.append(latency * (st.latency_count / st.count) + (0.0 if j or r else opts.base))
                parts.append(rm)
                sizes.append(size)
        last.append(len(parts) - 1)
    run = step_times(parts, cap, sizes=sizes, after=after, delay=delay)
    if run.status == Status.STALLED:
        raise ValueError("a collective can make no progress (a flow crosses failed links only)")
    return [float(run.finish[i]) for i in last], run.status


def concurrent(graph, collectives, *, policy: str = "ecmp", policy_options: dict | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK, efficiency=None,
               step_latency: float | None = None, base_latency: float | None = None,
               alone: bool = True, lockstep: bool = False, model=None,
               options: CollectiveOptions | None = None) -> ConcurrentResult:
    """Run several collectives at once on one fabric and report how much each slowed.

    ``collectives`` is a list of dicts with the keys of :func:`collective` (``op``, ``size``,
    ``ranks``, ``algorithm``, ``channels``); ``"auto"`` is NCCL's choice for each alone (as
    :func:`collective` makes it: among the protocols ``protocol`` lists where it lists several,
    ``NCCL_PROTO=LL,Simple``; one name sets the engine's per-step latency constants and, event
    by event, leaves NCCL every protocol to choose among). The times are the event engine's
    (per-step latencies, no NCCL chunk pipeline), so compare ``together`` with ``alone``, not
    with :func:`collective`'s time.
    Every collective runs its steps in order (latency, then the step's flows); between events
    (a flow finishing, a latency elapsing) all active flows of all collectives share the links
    max-min fairly (:func:`flowsolver.timing.step_times`). ``alone=False`` skips the solo runs
    (``alone`` and ``slowdown`` are then NaN) when only the times together are wanted.

    ``options``: a :class:`~flowsolver.CollectiveOptions` instead of the option keywords
    (not both; its ``protocol`` None is ``"Simple"`` here; ``channels`` and ``candidates``
    go in each collective's dict, not here).

    ``model``: a calibration (:func:`flowsolver.calibrate`): its fitted efficiencies apply
    to every collective; in lockstep, where NCCL's cost model times the groups, its latency
    scale too (the event engine prices steps with per-step latencies, which it leaves).

    ``lockstep=True`` is for symmetric groups of one kind (the data-parallel groups of a job:
    same op, size, algorithm and channels): step ``j`` of every group runs at the same time,
    so each distinct step is solved once for all groups together (a ring's ``2(p-1)`` steps
    cost one solve instead of one event each); ``"auto"`` then picks the algorithm that is
    fastest with all groups running, not alone, among those NCCL runs on every group. Groups
    NCCL sees unlike (other node counts or GPUs a node: 2 x 4 beside 1 x 8) are each timed with
    their own view of the merged solve and the slowest sets the time; the merged steps' transfer
    is the slowest group's, so a faster group's constants on it can overstate (ring, 256 MiB,
    2 x 4 beside 1 x 8 H100: 4 % above the slower group alone); an algorithm whose schedule
    differs between them (a tree: 15 steps on 2 x 4, 11 on 1 x 8) cannot run step for step and
    is refused when asked for, skipped by ``"auto"``. Without it, every collective advances on
    its own clock, event by event.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> r = concurrent(g, [dict(op="all_reduce", size=2**28, ranks=range(8), algorithm="ring"),
    ...                    dict(op="all_reduce", size=2**28, ranks=range(8, 16), algorithm="ring")])
    >>> [round(s, 3) for s in r.slowdown], r.status.label   # one server each: they do not meet
    ([1.0, 1.0], 'ok')
    """
    if isinstance(collectives, (str, bytes, Mapping)) or not collectives:
        raise ValueError(f"collectives must be a non-empty list of dicts, got {collectives!r}")
    kw = merged_options("concurrent", options, dict(
        policy=policy, policy_options=policy_options, pxn=pxn, protocol=protocol, chunk=chunk, efficiency=efficiency,
        step_latency=step_latency, base_latency=base_latency, model=model),
        concurrent.__kwdefaults__, _KEYWORDS)
    model = kw.pop("model")
    options = _options(graph, model, **kw)
    with unchanged(graph):          # every step routed on one index of the graph
        if lockstep:
            return _lockstep(graph, [collectives], options, alone, model)[0]
        return _events(graph, collectives, options, alone, model)


#: the option keywords of :func:`concurrent` and :func:`concurrent_kinds`
_KEYWORDS = ("policy", "policy_options", "pxn", "protocol", "chunk", "efficiency", "step_latency", "base_latency",
             "model")


def concurrent_kinds(graph, kinds, *, model=None, options: CollectiveOptions | None = None, **keywords) -> list:
    """``concurrent(graph, kind, lockstep=True, alone=False, **options)`` for each of
    ``kinds`` (lists of symmetric groups' specs, e.g. a training step's TP groups, its PP
    pairs, its DP groups), every kind's first candidates routed per kind and solved together
    in one batched call: one :class:`ConcurrentResult` per kind (each kind's groups run at
    once; different kinds are timed apart, as if each ran alone on the fabric). The options
    as keywords or as ``options=`` a :class:`~flowsolver.CollectiveOptions` (not both).

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> tp_groups = [dict(op="all_reduce", size=2**24, ranks=range(s * 8, s * 8 + 8)) for s in (0, 1)]
    >>> dp_groups = [dict(op="all_reduce", size=2**24, ranks=(r, r + 8), algorithm="ring") for r in range(8)]
    >>> inside, across = concurrent_kinds(g, [tp_groups, dp_groups])
    >>> inside.makespan < across.makespan       # NVLink inside a server, NICs across
    True
    """
    if not kinds or not all(kinds):
        raise ValueError("kinds must be a non-empty list of non-empty lists of collective dicts")
    if options is not None:
        if keywords or model is not None:
            raise ValueError("concurrent_kinds: pass the options either as options= or as keywords, not both (also "
                             f"got {', '.join(sorted(keywords) + (['model'] if model is not None else []))})")
        keywords = options.keywords("concurrent_kinds", _KEYWORDS)
        model = keywords.pop("model")
    unknown = sorted(set(keywords) - set(_KEYWORDS))
    if unknown:
        raise TypeError(f"concurrent_kinds() got unexpected keyword(s) {', '.join(unknown)}; it takes "
                        f"{', '.join(_KEYWORDS)} (gpus_per_thread and host_overhead time one call issued on its own, "
                        f"not collectives running together)")
    options = _options(graph, model, **keywords)
    with unchanged(graph):
        return _lockstep(graph, kinds, options, False, model)


def _options(graph, model, *, policy="ecmp", policy_options=None, pxn=True, protocol="Simple",
             chunk=DEFAULT_CHUNK, efficiency=None, step_latency=None, base_latency=None) -> Options:
    """The checked graph's :class:`Options` for :func:`concurrent` (a calibration applied)."""
    options = Options(policy=policy, policy_options=dict(policy_options or {}), pxn=pxn, protocol=protocol,
                      chunk=chunk, efficiency=efficiency, step_latency=step_latency, base_latency=base_latency)
    _checks.checked_graph(graph)
    check_efficiency_keys(options.efficiency, [graph])
    if checked_model(model, graph) is not None:
        options = model.apply(options)
    return options


def _p2p_floor(graph, spec, ranks, steps, routed, options, model) -> float:
    """The least time (s) a send / receive's or an all-to-all's P2P channels allow it (its base
    and step latency plus :meth:`~._p2p.P2pComm.least_transfer` in the communicator of the spec's
    ranks), 0 for another op. The event engine runs its flows at the fabric's rates; its finish
    is then no earlier than this (the others, which it would have left more bandwidth, are not
    re-run)."""
    op = spec["op"]
    if op not in ("send_recv", "all_to_all") or options.step_latency is not None:     # NCCL's model off: no bound
        return 0.0
    group, layout = participants(graph, op, spec.get("ranks"), spec.get("channels"))
    hw = with_communicator(graph, spec.get("ranks"), describe(graph, group, layout, spec.get("channels"),
                                                               options.efficiency, options.pxn), spec.get("channels"),
                           all_to_all=op == "all_to_all")
    least = least_transfer(hw, float(spec["size"]), model)
    return 0.0 if least <= 0 else options.base + routed(ranks, steps[0].flows, options)[2] + least


def _events(graph, collectives, options, alone, model=None) -> ConcurrentResult:
    """Every collective on its own clock, event by event (a send / receive no faster than
    its P2P channels allow, :func:`_p2p_floor`)."""
    specs = [_checked_spec(spec) for spec in collectives]
    planned = [_plan(graph, spec, options) for spec in specs]
    plans = [(ranks, steps, opts) for ranks, _, steps, opts in planned]
    routed = _Routed(graph, options)
    floors = [_p2p_floor(graph, spec, ranks, steps, routed, opts, model)
              for spec, (ranks, steps, opts) in zip(specs, plans)]
    # the links holding the first steps of all of them together
    firsts = [routed(ranks, steps[0].flows, opts)[:2] for ranks, steps, opts in plans]
    cap = firsts[0][0].links.effective_capacity(options.efficiency)
    stacked = RoutingMatrix.stack([rm for rm, _ in firsts])
    bottleneck = solve_steps(stacked, None, np.concatenate([sz for _, sz in firsts]), cap)[0].bottleneck
    alone_t = [max(_timeline([plan], routed, cap)[0][0], floor) if alone else np.nan
               for plan, floor in zip(plans, floors)]
    together, status = _timeline(plans, routed, cap)
    together = [max(t, floor) for t, floor in zip(together, floors)]
    return ConcurrentResult(alone=tuple(alone_t), together=tuple(together),
                            slowdown=tuple(t / a for t, a in zip(together, alone_t)),
                            makespan=max(together), algorithms=tuple(a for _, a, _, _ in planned),
                            bottleneck=bottleneck, status=status)


def _lockstep(graph, kinds, options, alone, model=None) -> list:
    """Each kind's groups in lockstep, the kinds solved together (:func:`solve_collectives`)."""
    calls, specs_of = [], []
    for collectives in kinds:
        specs = [_checked_spec(spec) for spec in collectives]
        found = {(spec["op"], float(spec["size"]), spec.get("algorithm", "auto"), spec.get("channels"))
                 for spec in specs}
        if len(found) != 1:
            raise ValueError("lockstep=True needs collectives with one op, size, algorithm and channels, got "
                             f"{len(found)} different ones")
        op, size, algorithm, channels = found.pop()
        # the groups together are one collective of the merged steps: NCCL's cost model times it,
        # as it times collective() (unless step_latency turns the model off)
        opts = _sends_simple(op, replace(options, channels=channels, tuner=options.step_latency is None))
        check_call(op, algorithm, size, opts)
        calls.append(Call(op, size, [spec.get("ranks") for spec in specs], algorithm, opts, model))
        specs_of.append(specs)
    out = []
    for call, specs, res in zip(calls, specs_of, solve_collectives(graph, calls)):
        if res.status != Status.OK:
            raise ValueError(res.message)
        n = len(specs)
        alone_t = [collective_with(graph, call.op, call.size, spec.get("ranks"), res.algorithm, call.options,
                                   model).time
                   if alone else np.nan for spec in specs]
        out.append(ConcurrentResult(alone=tuple(alone_t), together=(res.time,) * n,
                                    slowdown=tuple(res.time / a for a in alone_t), makespan=res.time,
                                    algorithms=(res.algorithm,) * n, bottleneck=res.bottleneck, lockstep=res))
    return out
