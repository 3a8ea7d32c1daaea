"""plan: the layouts of a job enumerated and pruned (``_space``), bounded without solving the
network (``_bound``: the collectives at their cut bounds), then timed exactly on the cluster best
bound first, each distinct collective kind solved once, until the best ``top`` are proven or the
solve budget ends."""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import time
from collections import Counter

import topologies as tp_

from .. import _checks
from ..routing import unchanged
from ..training import (DEFAULT_COMPUTE, DEFAULT_KERNEL_UTILIZATION, REDUCE_DTYPES, check_fp8_param_gather,
                        checked_expert_routing, checked_gpu, checked_schedule, compose, default_tp_overlap,
                        gather_bytes_of, get_model, layer_compute, prefetch_kinds, prepare_step, ring_pairs, solve_profile, step_collectives,
                        te_fp8_activations, time_collectives)
from ._bound import CutBound
from ._placement import place_job
from ._result import Plan, PlanRow, pareto_rows
from ._space import layout_space

__all__ = ["plan", "KindCache", "STEP_OPTIONS"]

#: training_step arguments plan passes through unchanged (the rest it searches or sets)
STEP_OPTIONS = ("compute_efficiency", "attention_efficiency", "tp_overlap", "dp_overlap", "top_k", "capacity_factor",
                "algorithms", "collective_options", "attention", "fp8_recipe", "power_cap", "kernel_utilization",
                "reduce_dtype", "fp8_param_gather", "tp_overlap_impl")
#: their defaults, training_step's
_STEP_DEFAULTS = dict(compute_efficiency=DEFAULT_COMPUTE, attention_efficiency=None, tp_overlap=None,
                      dp_overlap=1.0, top_k=None, capacity_factor=None, algorithms=None, collective_options=None,
                      attention="auto", fp8_recipe="te", power_cap=None,
                      kernel_utilization=DEFAULT_KERNEL_UTILIZATION, reduce_dtype="bf16", fp8_param_gather=False,
                      tp_overlap_impl="te")


class KindCache:
    """Remembers every collective kind solved: ``(op, bytes, rank groups, algorithm)`` ->
    what :func:`flowsolver.training._profile.time_collectives` returned for it. A kind's time does not
    depend on the other kinds solved beside it (each kind is timed as if alone on the fabric,
    :func:`flowsolver.collectives.concurrent_kinds`), so layouts that share a kind (the same
    TP groups and activation size, the same DP groups and gradient shard, ...) share its
    solve. ``solved`` counts the kinds solved, ``hits`` the ones found, ``calls`` the batched
    solver calls."""

    #: ranks of the group lists whose keys are remembered by identity (then forgotten at once)
    KEEP_RANKS = 1 << 22

    def __init__(self):
        self._store: dict = {}
        self._seen: dict = {}           # id(groups) -> (groups, their key): one list asked for again
        self._seen_ranks = 0
        self._groups: dict = {}         # (ParallelLayout, kind) -> its groups
        self._groups_ranks = 0
        self.solved = self.hits = self.calls = 0

    def _groups_key(self, groups) -> tuple:
        # groups hold Python ints (ParallelLayout.groups) or NumPy ints, which hash and compare
        # as the same key; the same list object (a profile's, prefetched then solved) is
        # converted once (kept alive here, so its id is not reused while remembered)
        seen = self._seen.get(id(groups))
        if seen is not None and seen[0] is groups:
            return seen[1]
        key = tuple(map(tuple, groups))
        size = sum(map(len, key))
        if self._seen_ranks + size > self.KEEP_RANKS:
            self._seen.clear()
            self._seen_ranks = 0
        self._seen[id(groups)] = (groups, key)
        self._seen_ranks += size
        return key

    def groups(self, layout, kind: str) -> list:
        """``layout.groups(kind)`` (``"cp_step"``: :func:`ring_pairs` of the CP groups), one
        list per layout and kind while remembered (layouts that differ in their micro-batch,
        ZeRO stage, ... share their groups, and the key made of them)."""
        seen = self._groups.get((layout, kind))
        if seen is None:
            seen = ring_pairs(self.groups(layout, "cp")) if kind == "cp_step" else layout.groups(kind)
            size = sum(map(len, seen))
            if self._groups_ranks + size > self.KEEP_RANKS:
                self._groups.clear()
                self._groups_ranks = 0
            self._groups[(layout, kind)] = seen
            self._groups_ranks += size
        return seen

    def _keys(self, calls) -> list:
        return [(op, float(size), self._groups_key(groups), algorithm) for op, size, groups, algorithm in calls]

    def fill(self, graph, calls, options) -> list:
        """Solve the kinds of ``calls`` not yet known, in one batched call; their keys."""
        keys = self._keys(calls)
        missing = list(dict.fromkeys(k for k in keys if k not in self._store))
        if missing:
            by_key = dict(zip(missing, time_collectives(graph, [(op, size, [list(g) for g in groups], algorithm)
                                                                for op, size, groups, algorithm in missing],
                                                        options)))
            for _, _, _, result in by_key.values():
                # the solve's kept events (a derivative's shortcut: without them it re-runs the
                # step, to the same numbers) are most of a kind's memory on a large cluster
                cache = getattr(getattr(result, "solved_on", None), "cache", None)
                if isinstance(cache, dict):
                    cache.pop("runs", None)
            self._store.update(by_key)
            self.solved += len(missing)
            self.calls += 1
        return keys

    def peek(self, calls) -> list:
        """What is known of ``calls`` (a KeyError for one not solved)."""
        return [self._store[k] for k in self._keys(calls)]

    def __call__(self, graph, calls, options) -> list:
        """:func:`flowsolver.training._profile.time_collectives` of ``calls``, each kind solved once."""
        keys = self._keys(calls)
        self.hits += sum(k in self._store for k in keys)
        self.fill(graph, calls, options)
        return [self._store[k] for k in keys]


@dataclasses.dataclass(frozen=True)
class _Degrees:
    """What :func:`compose` reads of a layout when nothing is solved (the bound)."""

    tp: int
    pp: int
    dp: int
    ep: int
    cp: int
    vp: int

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def etp(self) -> int:
        """The expert layers' TP degree: plan searches Megatron-Core's default, ``tp`` (expert
        TP 1, ``Parallelism(etp=1)``, is not in its layout space)."""
        return self.tp


def plan(graph, *, model="llama-3-70b", global_batch: int, seq_len: int | None = None, precision: str = "bf16",
         top: int = 20, headroom: float = 0.0, max_solves: int | None = None, max_tp: int | None = None,
         tp=None, cp=None, pp=None, vp=None, ep=None, micro_batch=None, recompute=None, zero=None,
         sequence_parallel=None, orders=None, gpu=None, prefetch: int | None = None, tolerance: float = 0.0,
         gpus: int | None = None, placement=None, **step_options) -> Plan:
    """The fastest layouts of ``model`` on the cluster ``graph``: parallel degrees, schedule,
    recompute, ZeRO stage, sequence parallelism and rank placement, searched.

    1. Every combination of the searched values is enumerated and pruned before any network
       work (:func:`flowsolver.planning.layout_space`: divisibility, heads, layers per stage,
       experts, batch, duplicates, memory over the GPU's memory less ``headroom``), with a
       count per reason.
    2. Each feasible layout gets a lower bound on its step time without solving the network:
       the step composed with every collective at its cut bound (the bytes the servers must
       receive over the capacity of the links into them; a send, PP's or a CP ring step's, at
       least NCCL's latency plus its bytes at the links' efficiencies,
       :mod:`flowsolver.planning._bound`); the exact step is never faster.
    3. Layouts are timed exactly, best bound first, as :func:`flowsolver.training_step`
       times them (the same numbers), each distinct collective kind (op, bytes, rank groups,
       algorithm) solved once (:class:`KindCache`) and each solved profile composed for every
       recompute mode. The search stops when the ``top``-th best exact time is no slower
       than the next bound (the top ``top`` are then the true best of the feasible set), or
       after ``max_solves`` profiles (then ``Plan.proven`` is False).

    Parameters
    ----------
    graph : networkx.DiGraph
        The cluster (all its GPUs run the job unless ``gpus`` or ``placement`` is given).
    model : str or ModelSpec
        A preset of ``flowsolver.MODELS`` or a shape.
    global_batch : int
        Sequences per step (fixed: a layout whose ``dp x micro_batch`` does not divide it is
        pruned).
    seq_len : int, optional
        Tokens per sequence (default the model's).
    precision : {"bf16", "fp8"}
    top : int
        Rows to return (ranked by step time; equal times by memory, the less first).
    headroom : float in [0, 1)
        Fraction of the GPU's memory a layout's estimate must leave free beyond the CUDA
        context, which the memory check always keeps free
        (:data:`flowsolver.training.FITS_RESERVE`, as ``StepResult.fits``).
    max_solves : int, optional
        Most profiles (distinct layouts but the recompute mode) solved on the network
        (default: no limit, stop when the top are proven).
    tolerance : float in [0, 1]
        Stop once no untimed layout can be more than this fraction faster than the
        ``top``-th row (default 0: the exact top); ``0.01`` proves the rows within 1 %.
    prefetch : int, optional
        Profiles whose new collective kinds are solved together in one batched call (default
        32 up to 8,192 GPUs, fewer above: a batch's memory grows with the GPUs).
    max_tp : int, optional
        Largest TP degree searched (default the GPUs of one server: TP inside NVLink).
    tp, cp, pp, vp, ep, micro_batch, recompute, zero, sequence_parallel, orders
        The values searched (one value or a sequence each; defaults in
        :func:`flowsolver.planning.layout_space`); ``orders`` are rank orders,
        fastest-varying first (``"tp-cp-dp-pp"``: Megatron's, DP across servers on a rail).
    gpu : str or GpuSpec, optional
        GPU type when the graph's GPUs carry none.
    gpus : int, optional
        GPUs of the job (whole servers; default all of the cluster's).
    placement : str or sequence of str, optional
        Which GPUs the job gets and which rank each hosts (:data:`flowsolver.planning.PLACEMENTS`:
        ``"packed"``, ``"rail_aligned"``, ``"spread"``, ``"rail_unaligned"``;
        :func:`flowsolver.planning.place_job`).
        A sequence searches each (one search per placement, the rows merged and ranked; a row's
        ``layout.placement`` names its own; time it again with ``training_step(place_job(graph,
        gpus, placement), ...)``). Default: the graph as given, ranks in ``topologies.gpus`` order
        (with ``gpus``: ``"packed"``).
    **step_options
        Passed to every :func:`flowsolver.training_step`: ``compute_efficiency``,
        ``tp_overlap``, ``dp_overlap``, ``algorithms``, ``collective_options``, ... (see
        :data:`STEP_OPTIONS`).

    Returns
    -------
    Plan
        ``rows`` (the ``top`` fastest, :class:`PlanRow`: step time s, tokens/s per GPU, MFU,
        memory bytes per GPU, exposed communication s per kind, bottleneck tier), ``front``
        (the Pareto front of throughput against memory among the layouts timed), the pruning
        counts and the search's figures.

    Examples
    --------
    >>> import topologies as tp
    >>> p = plan(tp.rail_optimized(2), model="llama-3-8b", global_batch=32, top=3, cp=1, zero=1,
    ...          micro_batch=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    >>> p.proven, len(p.rows), p.rows[0].step_time <= p.rows[1].step_time
    (True, 3, True)
    """
    if gpus is not None or placement is not None:
        return _placed(graph, gpus, placement, dict(
            model=model, global_batch=global_batch, seq_len=seq_len, precision=precision, top=top, headroom=headroom,
            max_solves=max_solves, max_tp=max_tp, tp=tp, cp=cp, pp=pp, vp=vp, ep=ep, micro_batch=micro_batch,
            recompute=recompute, zero=zero, sequence_parallel=sequence_parallel, orders=orders, gpu=gpu,
            prefetch=prefetch, tolerance=tolerance, **step_options))
    started = time.perf_counter()
    unknown = sorted(set(step_options) - set(STEP_OPTIONS))
    if unknown:
        raise TypeError(f"plan: unknown argument(s) {', '.join(unknown)}; it passes {', '.join(STEP_OPTIONS)} "
                        f"to training_step and searches the rest")
    top = _checks.integer("top", top)
    if max_solves is not None:
        max_solves = _checks.integer("max_solves", max_solves)
    if prefetch is not None:
        prefetch = _checks.integer("prefetch", prefetch)
    tolerance = _checks.fraction("tolerance", tolerance, zero_ok=True)
    spec = get_model(model)
    if seq_len is not None:
        spec = dataclasses.replace(spec, seq_len=_checks.integer("seq_len", seq_len))
    _checks.checked_graph(graph)
    ranks = tp_.gpus(graph)
    gpus = len(ranks)
    if prefetch is None:
        # fewer batched calls compile the solver fewer times; a batch of kinds over 16,384 GPUs
        # takes memory: 32 profiles up to 8,192 GPUs, 16 at 16,384 (Llama 3 405B's proven search:
        # 8 solver calls, peak 3.2 GiB; 8 a call took 16 calls, 2.9 GiB, half again the time)
        prefetch = max(4, min(32, 262144 // gpus))
    gpu_spec = checked_gpu(graph, gpu)
    if max_tp is None:
        max_tp = max(Counter(graph.nodes[v].get("server", i) for i, v in enumerate(ranks)).values())
    options = dict(_STEP_DEFAULTS, **step_options)
    top_k, factor = checked_expert_routing(spec, options["top_k"], options["capacity_factor"])
    spec = dataclasses.replace(spec, top_k=top_k) if top_k != spec.top_k else spec

    check_fp8_param_gather(precision, options["fp8_param_gather"])
    gather_bytes = float(gather_bytes_of(precision, options["fp8_param_gather"]))
    space = layout_space(spec, gpus, global_batch, gpu_memory=gpu_spec.memory, headroom=headroom, max_tp=max_tp,
                         tp=tp, cp=cp, pp=pp, vp=vp, ep=ep, micro_batch=micro_batch, recompute=recompute, zero=zero,
                         sequence_parallel=sequence_parallel, orders=orders, attention=options["attention"],
                         fp8_activations=te_fp8_activations(precision, options["fp8_recipe"]),
                         gather_bytes=int(gather_bytes), reduce_bytes=REDUCE_DTYPES[options["reduce_dtype"]],
                         capacity_factor=float(factor))
    enumerated = time.perf_counter()

    # 2. the bounds: the step with its collectives at their cut bounds (_bound), one bound
    # profile per layout but its recompute mode
    bounds, profiles, parts = [], {}, {}
    reduce_bytes = REDUCE_DTYPES[options["reduce_dtype"]]
    with unchanged(graph, checked=True):         # the floors read the graph through one index
        cut = CutBound(graph, options["collective_options"], options["algorithms"])
        for lay in space.feasible:
            shape = dataclasses.replace(lay, recompute="selective")
            if shape not in profiles:
                profiles[shape] = cut.profile(spec, lay, gpu=gpu_spec, top_k=spec.top_k, capacity_factor=factor,
                                              reduce_bytes=reduce_bytes, gather_bytes=gather_bytes,
                                              degrees=_Degrees(lay.tp, lay.pp, lay.dp, lay.ep, lay.cp, lay.vp))
            schedule = _schedule(lay, global_batch, precision, gpu_spec, options)
            # layer_compute reads the micro-batch, tp, cp, ep and sequence parallelism of a layout
            # (the model, GPU and routing are the search's) and the schedule: computed once for all
            # the layouts that share them
            compute_key = (lay.micro_batch, lay.tp, lay.cp, lay.ep, lay.sequence_parallel, schedule)
            if compute_key not in parts:
                parts[compute_key] = layer_compute(profiles[shape], schedule)
            bounds.append(compose(profiles[shape], schedule, parts[compute_key]).step_time)
    bounded = time.perf_counter()

    # 3. exact, best bound first; a profile (the layout but its recompute mode) solved once
    order = sorted(range(len(space.feasible)), key=lambda i: (bounds[i], space.feasible[i]))
    groups: dict = {}
    for i in order:
        lay = space.feasible[i]
        groups.setdefault(dataclasses.replace(lay, recompute="selective"), []).append(i)
    cache = KindCache()
    exact: dict = {}
    fastest: list = []                  # a max-heap (negated) of the `top` fastest exact times
    solved_profiles = 0
    proven = True
    next_bound = None
    with unchanged(graph, checked=True):
        for pos, i in enumerate(order):
            if i in exact:
                continue
            kth = -fastest[0] if len(fastest) >= top else math.inf
            # strictly slower bounds stop the search: a layout whose bound ties the top-th time
            # may tie it exactly with less memory, which ranks it first
            if kth < bounds[i] * (1.0 + tolerance):
                next_bound = bounds[i]
                break
            if max_solves is not None and solved_profiles >= max_solves:
                proven, next_bound = False, bounds[i]
                break
            # this profile and the next ones not solved, their new collective kinds in one call
            room = prefetch if max_solves is None else min(prefetch, max_solves - solved_profiles)
            keys: list = []
            for j in order[pos:]:
                if bounds[j] * (1.0 + tolerance) > kth or len(keys) >= room:
                    break
                key = dataclasses.replace(space.feasible[j], recompute="selective")
                if j not in exact and key not in keys:
                    keys.append(key)
            prepared = [_prepared(graph, spec, key, global_batch, precision, gpu_spec, options) for key in keys]
            planned = _prefetch(graph, cache, prepared)
            for key, prep, steps in zip(keys, prepared, planned):
                profile = solve_profile(graph, **prep.solve, timed=cache, steps=steps)
                solved_profiles += 1
                for j in groups[key]:
                    exact[j] = _recomposed(profile, prep.schedule, space.feasible[j].recompute)
                    heapq.heappush(fastest, -exact[j].step_time)
                    if len(fastest) > top:
                        heapq.heappop(fastest)
    finished = time.perf_counter()

    rows = [PlanRow.of(space.feasible[i], r, bounds[i], space.memory[i]) for i, r in exact.items()]
    rows.sort(key=lambda row: (row.step_time, row.memory, row.layout))       # ties: the less memory first
    return Plan(model=spec.name, gpus=gpus, global_batch=global_batch, seq_len=spec.seq_len, precision=precision,
                rows=tuple(rows[:top]), timed=tuple(rows), front=tuple(pareto_rows(rows)),
                total=space.total, feasible=len(space.feasible), pruned=space.pruned,
                usable_memory=space.usable_memory, proven=proven, next_bound=next_bound,
                tolerance=tolerance, profiles_solved=solved_profiles, kinds_solved=cache.solved, kinds_reused=cache.hits,
                solver_calls=cache.calls,
                seconds=dict(enumerate=enumerated - started, bound=bounded - enumerated, exact=finished - bounded,
                             total=finished - started))


def _placed(graph, gpus, placement, kw) -> Plan:
    """:func:`plan` once per placement on :func:`place_job`'s graph, the rows merged: ranked
    together, ``proven`` when every search is, the counts summed."""
    names = ("packed",) if placement is None else (placement,) if isinstance(placement, str) else tuple(placement)
    if not names:
        raise ValueError("placement: give at least one policy to search, got an empty sequence")
    plans = []
    for name in dict.fromkeys(names):
        found = plan(place_job(graph, gpus, name), **kw)
        relabel = {}
        for row in found.timed:
            relabel[id(row)] = dataclasses.replace(row, layout=dataclasses.replace(row.layout, placement=name))
        plans.append((found, relabel))
    timed = [relabel[id(r)] for found, relabel in plans for r in found.timed]
    timed.sort(key=lambda row: (row.step_time, row.memory, row.layout))
    first = plans[0][0]
    bounds = [found.next_bound for found, _ in plans if found.next_bound is not None]
    pruned = Counter()
    for found, _ in plans:
        pruned.update(found.pruned)
    seconds = Counter()
    for found, _ in plans:
        seconds.update(found.seconds)
    return dataclasses.replace(
        first, rows=tuple(timed[:kw["top"]]), timed=tuple(timed),
        front=tuple(pareto_rows(timed)), total=sum(f.total for f, _ in plans),
        feasible=sum(f.feasible for f, _ in plans), pruned={k: pruned[k] for k in first.pruned},
        proven=all(f.proven for f, _ in plans), next_bound=min(bounds) if bounds else None,
        profiles_solved=sum(f.profiles_solved for f, _ in plans), kinds_solved=sum(f.kinds_solved for f, _ in plans),
        kinds_reused=sum(f.kinds_reused for f, _ in plans), solver_calls=sum(f.solver_calls for f, _ in plans),
        seconds=dict(seconds))


def _schedule(lay, global_batch, precision, gpu_spec, options):
    """The schedule training_step would check for ``lay`` (see prepare_step)."""
    return checked_schedule(dp=lay.dp, micro_batch=lay.micro_batch, global_batch=global_batch,
                            dp_overlap=options["dp_overlap"], compute_efficiency=options["compute_efficiency"],
                            precision=precision, recompute=lay.recompute, gpu=gpu_spec,
                            attention_efficiency=options["attention_efficiency"], recompute_layers=None,
                            tp_overlap=default_tp_overlap(lay.tp) if options["tp_overlap"] is None
                            else options["tp_overlap"],
                            attention=options["attention"], fp8_recipe=options["fp8_recipe"],
                            power_cap=options["power_cap"], kernel_utilization=options["kernel_utilization"],
                            tp_overlap_impl=options["tp_overlap_impl"])


def _prefetch(graph, cache: KindCache, prepared: list) -> list:
    """:func:`flowsolver.training.prefetch_kinds` into ``cache``, its rank groups laid out by
    the cache (shared by the profiles that lay them out alike)."""
    def groups(layout):
        return functools.partial(cache.groups, layout)
    return prefetch_kinds(graph, prepared, cache.fill, cache.peek, groups=groups)


def _prepared(graph, spec, lay, global_batch, precision, gpu_spec, options):
    kw = {k: options[k] for k in STEP_OPTIONS}
    return prepare_step(graph, model=spec, **lay.step_kwargs(), global_batch=global_batch, seq_len=None,
                        precision=precision, recompute_layers=None, ranks=None, gpu=gpu_spec, check_graph=False,
                        **kw)


def _recomposed(profile, schedule, recompute):
    return compose(profile, dataclasses.replace(schedule, recompute=recompute))
