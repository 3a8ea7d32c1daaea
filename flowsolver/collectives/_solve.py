"""Solving steps: route the distinct steps once, their latencies, and the transfer times of
many steps in one batched call (each step on its own copy of the links, its own clock)."""

from __future__ import annotations

import threading
from functools import lru_cache
from dataclasses import dataclass, replace

import numpy as np

import topologies as tp

from ..routing import HOP_CLASSES, LinkTable, RoutingMatrix, graph_memo, policy_of, route, unique_pairs
from ..traffic import Flows
from ._layout import edge_index, rank_server_codes
from ._nccl import hop_latency, peer_latency
from ._results import CollectiveStep
from ._step_solve import SolvedStep, solve_steps

__all__ = ["route_step", "route_steps", "step_latency", "step_latencies", "step_peer_latency", "solve_steps",
           "time_plans", "time_many",
           "catalogue_latency", "slow_paths", "SolvedStep", "Timed", "TimedScenario", "Job"]


@dataclass(frozen=True)
class Timed:
    """One algorithm of a collective timed on one scenario (:func:`time_many`): ``time``
    (s, per-step model), its ``steps`` (CollectiveSteps), link ``utilization`` (time-weighted
    fraction per link), ``solved_on`` (per step ``(routing, sizes, count)``, for the
    derivatives), the effective ``capacity`` (bytes/s) solved on and the forward's kept
    events ``run`` (:class:`flowsolver.timing.KeptRun`, or None)."""

    time: float
    steps: tuple
    utilization: np.ndarray
    solved_on: tuple = ()
    capacity: np.ndarray | None = None
    run: object = None


@dataclass(frozen=True)
class TimedScenario:
    """A collective's candidates timed on one scenario: its ``links`` (LinkTable) and
    ``results`` ({algorithm: :class:`Timed`})."""

    links: object
    results: dict


@dataclass(frozen=True)
class Job:
    """One collective's share of a batched solve (:func:`time_many`): its GPU ``ranks``, its
    ``plans`` ({algorithm: steps}) and :class:`~._options.Options`."""

    ranks: list
    plans: dict
    options: object



def route_step(graph, ranks, flows, options):
    """The step's flows routed; also their sizes (bytes). Endpoints are rank positions, or
    for in-switch algorithms a GPU position and the switch's node id: such a flow is the one
    GPU-switch link."""
    size = flows.nbytes
    if flows.has_node_ids:
        nodes = tp.gpus(graph)
        end = lambda x: x if isinstance(x, str) else nodes[ranks[x]]  # noqa: E731
        try:
            # the graph's link table and edge index kept while it is unchanged (an O(edges) build each)
            links = graph_memo(graph, "links", lambda: LinkTable.from_graph(graph))
            index = edge_index(graph)
            return RoutingMatrix.one_hop(graph, [(end(a), end(b)) for a, b, _ in flows], policy="in-switch",
                                         links=links, edge_index=index), size
        except ValueError as err:
            raise ValueError(f"in-switch step: {err}") from None
    a, b = flows.positions()
    src, dst = np.asarray(ranks)[a], np.asarray(ranks)[b]
    return route(graph, Flows(src, dst, size), policy=options.policy, **_with_relays(options, ranks)), size


def _with_relays(options, ranks) -> dict:
    """``route``'s options of a collective over ``ranks``: with PXN, its relays are the
    communicator's GPUs (NCCL relays through no GPU outside it): ``options.relays`` where the
    communicator is wider than the routed ranks (a send / receive), else ``ranks``."""
    kw = options.route_options
    if not kw.get("pxn") or options.relays is not None:
        return kw           # given, or any GPU (groups in lockstep, each its own communicator)
    return kw | {"relays": [int(r) for r in ranks]}


def step_latency(rm, options) -> float:
    """NCCL per-hop latency of the step's slowest hop class + its largest path latency (s),
    or ``options.step_latency``."""
    return float(step_latencies(rm, np.zeros(rm.n_flows, dtype=np.int64), 1, options)[0])


def step_latencies(rm, group, n_groups, options, per_flow=False):
    """:func:`step_latency` of every step of ``rm`` at once (``group``: the step of each
    flow, contiguous): the NCCL hop latency of each step's slowest hop class plus its
    largest path latency (s). ``per_flow``: also each flow's own (its slowest hop class's
    latency plus its path latency), for steps whose latency is some of their flows'
    (:attr:`~._trees.Step.latency_flows`)."""
    if options.step_latency is not None:
        fixed = np.full(n_groups, float(options.step_latency))
        return (fixed, np.full(rm.n_flows, float(options.step_latency))) if per_flow else fixed
    # the highest hop rank of each segment's links that carry a share (an extra 0 last, read
    # by unused slots -1), then of each flow's, column by column
    seg_rank = np.zeros(rm.n_segments + 1, dtype=np.int64)
    carry = rm.seg_frac > 0
    np.maximum.at(seg_rank, rm.entry_segment[carry], rm.links.hop_rank[rm.seg_link[carry]].astype(np.int64))
    flow_rank = np.zeros(rm.n_flows, dtype=np.int64)
    for k in range(rm.slots):
        rank = seg_rank[rm.flow_seg[:, k]]
        np.maximum(flow_rank, rank if rm.flow_coef is None else np.where(rm.flow_coef[:, k] > 0, rank, 0),
                   out=flow_rank)
    first = np.searchsorted(group, np.arange(n_groups))
    flow_path = rm.path_latency()
    worst = np.maximum.reduceat(flow_rank, first) if rm.n_flows else np.zeros(n_groups, dtype=np.int64)
    path = np.maximum.reduceat(flow_path, first) if rm.n_flows else np.zeros(n_groups)
    hop = np.array([hop_latency(c, options.step_protocol) for c in HOP_CLASSES])     # by hop rank
    steps = hop[worst] + np.maximum(path, 0.0)
    return (steps, hop[flow_rank] + np.maximum(flow_path, 0.0)) if per_flow else steps


def step_peer_latency(step, options) -> float:
    """Seconds a grouped step (NCCL's grouped sends and receives, :attr:`Step.grouped`) spends on
    its ranks' further peers (:func:`~._nccl.peer_latency`, computed once a step); 0 otherwise,
    and where ``options.step_latency`` fixes a step's whole latency."""
    if not getattr(step, "grouped", False) or options.step_latency is not None:
        return 0.0
    return _peers(step.flows)


@lru_cache(maxsize=8)       # an all-to-all's one step a communicator shape; kept few (they are large)
def _peers(flows) -> float:
    return peer_latency(flows)


def _catalogue_latencies(table) -> np.ndarray:
    known = set(tp.link_names())
    per = {t: (tp.get_link(t).latency if t in known else 0.0) for t in set(table.tech)}
    return np.fromiter((per[t] for t in table.tech), dtype=np.float64, count=len(table.tech))


def catalogue_latency(graph, table=None) -> np.ndarray:
    """Per link of ``graph`` (``table``: its link table, if built), the ``topologies`` link
    catalogue's latency for the link's technology (s; 0 for a technology the catalogue
    does not know): the latency NCCL's per-hop constants already include (the catalogue's
    NVLink and PCIe figures are NCCL's own, its switches' a few hundred ns). Kept with the
    unchanged graph."""
    def build():
        return _catalogue_latencies(graph_memo(graph, "links", lambda: LinkTable.from_graph(graph))
                                    if table is None else table)
    return graph_memo(graph, "catalogue-latency", build)


def slow_paths(rm, group, n_groups, reference, between) -> list:
    """Per step of ``rm`` (``group``: the step of each flow, contiguous) the
    ``(between_nodes, path, excess)`` triples of its flows slower than at the catalogue's
    ``reference`` latencies (see :class:`CollectiveStep`), ``between`` each flow's
    crossing of nodes; only the triples no other of the same step and kind exceeds in both
    path and excess. ``()`` for every step where no link is slower than its reference."""
    out = [()] * n_groups
    if not rm.n_flows or not (rm.links.latency > reference).any():
        return out
    path = rm.path_latency()
    excess = path - replace(rm, links=replace(rm.links, latency=reference)).path_latency()
    slow = np.flatnonzero(excess > 0)
    if not len(slow):
        return out
    # the Pareto front of each (step, kind) without a loop over flows: sorted by step, kind,
    # longest path first, a flow is kept when its excess beats every earlier one's of its
    # segment (excess ranks offset per segment, so one running maximum serves them all)
    grp, kind, p, e = group[slow], between[slow].astype(np.int64), path[slow], excess[slow]
    order = np.lexsort((-e, -p, kind, grp))
    grp, kind, p, e = grp[order], kind[order], p[order], e[order]
    segment = np.concatenate([[0], np.cumsum((np.diff(grp) != 0) | (np.diff(kind) != 0))])
    rank = np.unique(e, return_inverse=True)[1].reshape(-1)
    key = segment * (len(e) + 1) + rank
    before = np.concatenate([[-1], np.maximum.accumulate(key)[:-1]])
    fronts: dict = {}
    for i in np.flatnonzero(key > before):
        fronts.setdefault(int(grp[i]), []).append((bool(kind[i]), float(p[i]), float(e[i])))
    for g, kept in fronts.items():
        out[g] = tuple(kept)
    return out


def _between_nodes(graph, ranks, keys) -> np.ndarray:
    """Per flow of the steps ``keys`` (in order): whether its ends are GPUs of two servers
    (an end that is a switch, in-switch reduction, is inside its GPU's node)."""
    server = rank_server_codes(graph)[np.asarray(ranks, dtype=np.int64)]
    out = []
    for k in keys:
        a, b = k.positions()
        ends = (a >= 0) & (b >= 0)
        out.append(ends & (server[np.where(ends, a, 0)] != server[np.where(ends, b, 0)]))
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


def _result_of(steps, solved, latency, flow_latency, n_links, options, routed=None, slow=None, capacity=None,
               run=None) -> Timed:
    """One algorithm :class:`Timed` from its solved steps (``solved``: a SolvedStep per
    distinct step; ``latency`` / ``flow_latency``: each distinct step's, and each of its flows',
    :func:`step_latencies`; ``routed``: each step's ``(routing, sizes)``; ``slow``: each step's slow
    paths, :func:`slow_paths`; ``options``: the base latency, and a grouped step's further
    peers, :func:`step_peer_latency`)."""
    parts, util_time, busy, total = [], np.zeros(n_links), 0.0, options.base
    for st in steps:
        one = solved[st.flows]
        own = latency[st.flows] if st.latency_flows is None else \
            float(np.max(flow_latency[st.flows][list(st.latency_flows)]))     # one channel's hop
        lat = own + step_peer_latency(st, options)
        step = CollectiveStep(count=st.count, flows=len(st.flows), bytes=st.flows[0][2], transfer=one.transfer,
                              latency=lat, bottleneck=one.bottleneck, latency_count=st.latency_count,
                              slow_paths=() if slow is None else slow[st.flows])
        parts.append(step)
        total += step.time
        if np.isfinite(one.transfer):
            util_time += one.utilization * st.count * one.transfer
            busy += st.count * one.transfer
    solved_on = () if routed is None else tuple((*routed[st.flows], st.count) for st in steps)
    return Timed(total, tuple(parts), util_time / busy if busy > 0 else util_time, solved_on, capacity, run)


#: steps of at most this many flows in all keep their routing with the graph (the last
#: ``KEEP_ROUTED`` patterns), so the same steps at another size are not routed again
KEEP_ROUTED_FLOWS = 1 << 21
KEEP_ROUTED = 4
_ROUTED_LOCK = threading.Lock()
#: route a collective's distinct steps in one ``route`` call (False: one call per step,
#: stacked, as steps with in-switch flows always are; the two give the same routes)
STEPS_IN_ONE_CALL = True


def route_steps(graph, ranks, keys, options):
    """The flows of the distinct steps ``keys`` routed on shared links: (routing, the step
    of each flow, bytes of each flow). One ``route`` call for all of them (no in-switch
    step), else one per step, stacked. Under a policy whose routes depend on their call
    (its registration: load, order or per-call draws) each step is routed as its own call
    (``groups=``). The routing depends on the endpoints only (sizes are returned apart; a
    load-dependent policy's also on the sizes, which its key then holds), so a pattern
    routed before on this unchanged graph is served from its memo."""
    counts = np.array([len(k) for k in keys])
    group = np.repeat(np.arange(len(keys)), counts)
    size = np.concatenate([k.nbytes for k in keys])
    if STEPS_IN_ONE_CALL and not any(k.has_node_ids for k in keys):
        pos = np.asarray(ranks)
        src = np.concatenate([pos[k.positions()[0]] for k in keys])
        dst = np.concatenate([pos[k.positions()[1]] for k in keys])
        policy = policy_of(options.policy)
        grouped = policy.per_call          # each step routed as its own call, its flow counts in the key
        route_kw = _with_relays(options, ranks)
        route_all = lambda: route(graph, Flows(src, dst, size), policy=options.policy,  # noqa: E731
                                  groups=group if grouped else None, **route_kw)
        if len(src) > KEEP_ROUTED_FLOWS:
            if grouped or policy.depends_on_load:
                return route_all(), group, size
            # a route depends on its endpoints only: each distinct pair routed once (a long
            # pipeline's steps repeat its stages' pairs hundreds of times), the rows copied
            pair_src, pair_dst, again = unique_pairs(src, dst, int(max(src.max(), dst.max())) + 1)
            once = route(graph, Flows(pair_src, pair_dst, 1.0), policy=options.policy, **route_kw)
            return once.take_flows(again), group, size
        memo = graph_memo(graph, "routed-steps", dict)
        key = (policy, repr(sorted(route_kw.items())), src.tobytes() + dst.tobytes(),
               counts.tobytes() if grouped else b"", size.tobytes() if policy.depends_on_load else b"")
        rm = memo.get(key)
        if rm is None:
            rm = route_all()
            with _ROUTED_LOCK:      # threads sharing the graph (a sweep's pool) evict and add one at a time
                while len(memo) >= KEEP_ROUTED:
                    memo.pop(next(iter(memo)))
                memo[key] = rm
        return rm, group, size
    routed = [route_step(graph, ranks, k, options) for k in keys]
    rm = routed[0][0] if len(routed) == 1 else RoutingMatrix.stack([m for m, _ in routed])
    return rm, group, size


@dataclass(frozen=True)
class _Routed:
    """A job's distinct steps ``keys`` routed on shared links (:func:`route_steps`): the
    ``routing``, the step of each flow (``group``) and each flow's bytes (``sizes``)."""

    keys: list
    routing: RoutingMatrix
    group: np.ndarray
    sizes: np.ndarray


def time_plans(graph, ranks, plans, options, scenarios) -> list:
    """Route every distinct step of ``plans`` (algorithm -> steps; steps are values, so
    identical steps are routed and solved once) and solve them all in one batched call; per
    scenario (``scenarios``: the graph, or its same-structure variants) a
    :class:`TimedScenario` (its link table and ``{algorithm: Timed}``)."""
    return time_many(graph, [Job(ranks, plans, options)], scenarios)[0]


def time_many(graph, jobs, scenarios=None) -> list:
    """:func:`time_plans` for several collectives on one graph, ``jobs`` of :class:`Job`
    (one link efficiency for all): each job's distinct steps routed on its ranks, the steps
    of all of them solved in one batched call (each step on its own copy of its links, as
    one job's are). Per job, what :func:`time_plans` returns."""
    scenarios = [graph] if scenarios is None else list(scenarios)
    efficiency = jobs[0].options.efficiency
    if any(job.options.efficiency != efficiency for job in jobs):
        raise ValueError("collectives solved together must share the link efficiency")
    routed_jobs = []
    for job in jobs:
        keys = list(dict.fromkeys(st.flows for steps in job.plans.values() for st in steps))
        routed_jobs.append(_Routed(keys, *route_steps(graph, job.ranks, keys, job.options)))
    first = [0] + list(np.cumsum([len(r.keys) for r in routed_jobs]))
    if len(jobs) == 1:
        rm, group, size = routed_jobs[0].routing, routed_jobs[0].group, routed_jobs[0].sizes
    else:
        rm = RoutingMatrix.stack([r.routing for r in routed_jobs])
        group = np.concatenate([r.group + first[j] for j, r in enumerate(routed_jobs)])
        size = np.concatenate([r.sizes for r in routed_jobs])
    tables = [rm.links] if len(scenarios) == 1 and scenarios[0] is graph else \
        [LinkTable.from_graph(g) for g in scenarios]
    caps = np.stack([t.effective_capacity(efficiency) for t in tables])
    # one scenario is solved unbatched, so the solver may pick its frontier method
    kept = [] if len(caps) == 1 else None       # one scenario: its events kept for the derivatives
    solved_all = solve_steps(rm, group, size, caps if len(caps) > 1 else caps[0], first[-1], kept)
    solved_all = solved_all if len(caps) > 1 else [solved_all]
    run = kept[0] if kept else None
    out = []
    for j, (routed_j, job) in enumerate(zip(routed_jobs, jobs)):
        keys, rm_j, group_j, size_j, options = routed_j.keys, routed_j.routing, routed_j.group, routed_j.sizes, \
            job.options
        # each step's own routing (views of the job's) and sizes, for result.sensitivity()
        bounds = np.concatenate([[0], np.cumsum([len(k) for k in keys])])
        routed = {k: (rm_j.flow_rows(a, b), size_j[a:b]) for k, a, b in zip(keys, bounds[:-1], bounds[1:])}
        if run is not None:
            for i, k in enumerate(keys):
                run.add(routed[k][0], first[j] + i)
        timed = []
        between = None
        for table, scenario, cap, solved_b in zip(tables, scenarios, caps, solved_all):
            solved = dict(zip(keys, solved_b[first[j]:first[j + 1]]))
            on_table = replace(rm_j, links=table)
            per_step, per_flow = step_latencies(on_table, group_j, len(keys), options, per_flow=True)
            latency = dict(zip(keys, per_step.tolist()))
            flow_latency = {k: per_flow[a:b] for k, a, b in zip(keys, bounds[:-1], bounds[1:])}
            reference = catalogue_latency(graph, table) if scenario is graph else _catalogue_latencies(table)
            slow = None
            if options.tuner and (table.latency > reference).any():     # a path slower than the catalogue's
                between = _between_nodes(graph, job.ranks, keys) if between is None else between
                slow = dict(zip(keys, slow_paths(on_table, group_j, len(keys), reference, between)))
            timed.append(TimedScenario(table, {alg: _result_of(steps, solved, latency, flow_latency, rm_j.n_links,
                                                               options, routed, slow, cap, run)
                                               for alg, steps in job.plans.items()}))
        out.append(timed)
    return out
