"""Solving steps: route the distinct steps once, their latencies, and the transfer times of
many steps in one batched call (each step on its own copy of the links, its own clock)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import topologies as tp

from ..routing import HOP_CLASSES, LinkTable, RoutingMatrix, route
from ..solver import max_min_fair
from ..timing import completion_times
from ..traffic import Flows
from ._nccl import hop_latency
from ._results import CollectiveStep

__all__ = ["route_step", "step_latency", "solve_steps", "time_plans"]



def route_step(graph, ranks, flows, options):
    """The step's flows routed; also their sizes (bytes). Endpoints are rank positions, or
    for in-switch algorithms a GPU position and the switch's node id: such a flow is the one
    GPU-switch link."""
    size = flows.nbytes
    if flows.has_node_ids:
        nodes = tp.gpus(graph)
        end = lambda x: x if isinstance(x, str) else nodes[ranks[x]]  # noqa: E731
        try:
            return RoutingMatrix.one_hop(graph, [(end(a), end(b)) for a, b, _ in flows], policy="in-switch"), size
        except ValueError as err:
            raise ValueError(f"in-switch step: {err}") from None
    a, b = flows.positions()
    src, dst = np.asarray(ranks)[a], np.asarray(ranks)[b]
    return route(graph, Flows(src, dst, size), policy=options.policy, **options.route_options), size


def step_latency(rm, options) -> float:
    """NCCL per-hop latency of the step's slowest hop class + its largest path latency (s),
    or ``options.step_latency``."""
    if options.step_latency is not None:
        return float(options.step_latency)
    used = np.flatnonzero(rm.link_loads(np.ones(rm.n_flows)) > 0)
    worst = int(rm.links.hop_rank[used].max(initial=0))
    return hop_latency(HOP_CLASSES[worst], options.protocol) + float(rm.path_latency().max(initial=0.0))


def _critical(m, u, bott, start, flow_time, util):
    """Bottleneck records of one step (``bott`` its flows' bottleneck links in the block,
    whose links start at ``start``): the links holding the flows that would take longest
    at the first rates, longest first (at most 8)."""
    held = bott >= 0
    critical = np.full(m.n_links, -1.0)
    np.maximum.at(critical, u[bott[held] - start], flow_time[held])
    hot = np.flatnonzero(critical >= 0)
    hot = hot[np.argsort(-critical[hot], kind="stable")]
    return tuple(m.links.bottleneck(l, util[l]) for l in hot[:8])


def solve_steps(rms, sizes, cap):
    """Transfer time (s), per-link utilisation and bottleneck records of many steps, solved
    in one call: each step on its own copy of its links, each with its own event clock.
    ``cap`` is (links,) or (scenarios, links); with scenarios the result is a list per
    scenario. A step with a flow that can never move gets transfer ``inf``."""
    batched = np.ndim(cap) == 2
    caps = np.atleast_2d(cap)
    if len(rms) == 1:
        block, used = rms[0], [np.arange(rms[0].n_links)]
    else:
        block, used = RoutingMatrix.stack(rms, separate_links=True)
    block_cap = np.concatenate([caps[:, u] for u in used], axis=1) if len(rms) > 1 else caps
    counts = [m.n_flows for m in rms]
    size = np.concatenate(sizes)
    arg = block_cap if batched else block_cap[0]
    done = completion_times(block, size, arg, groups=np.repeat(np.arange(len(rms)), counts) if len(rms) > 1 else None)
    alloc = max_min_fair(block, arg)
    finish, stalled = np.atleast_2d(done.finish), np.atleast_2d(done.stalled)
    rates = np.atleast_2d(np.asarray(alloc.rates, dtype=np.float64))
    util_all = np.atleast_2d(np.asarray(alloc.utilization, dtype=np.float64))
    bott_all = np.atleast_2d(alloc.bottleneck)
    results = []
    for b in range(caps.shape[0]):
        with np.errstate(divide="ignore"):
            flow_time = np.where(rates[b] > 0, size / np.where(rates[b] > 0, rates[b], 1.0), np.inf)
        out = []
        f0 = l0 = 0
        for m, u, n in zip(rms, used, counts):
            fs, ls = slice(f0, f0 + n), slice(l0, l0 + len(u))
            f0, l0 = f0 + n, l0 + len(u)
            transfer = np.inf if stalled[b, fs].any() else float(finish[b, fs].max(initial=0.0))
            util = np.zeros(m.n_links)
            util[u] = util_all[b, ls]
            out.append((transfer, util, _critical(m, u, bott_all[b, fs], ls.start, flow_time[fs], util)))
        results.append(out)
    return results if batched else results[0]


def _result_of(steps, solved, latency, n_links, base, routed=None):
    """(time, CollectiveSteps, link utilisation, what each step's transfer was solved on:
    ``(routing, sizes, count)`` per step) of one algorithm from its solved steps."""
    parts, util_time, busy, total = [], np.zeros(n_links), 0.0, base
    for st in steps:
        transfer, util, bottleneck = solved[st.flows]
        step = CollectiveStep(count=st.count, flows=len(st.flows), bytes=st.flows[0][2], transfer=transfer,
                              latency=latency[st.flows], bottleneck=bottleneck, latency_count=st.latency_count)
        parts.append(step)
        total += step.time
        if np.isfinite(transfer):
            util_time += util * st.count * transfer
            busy += st.count * transfer
    solved_on = () if routed is None else tuple((*routed[st.flows], st.count) for st in steps)
    return total, tuple(parts), util_time / busy if busy > 0 else util_time, solved_on


def time_plans(graph, ranks, plans, options, scenarios):
    """Route every distinct step of ``plans`` (algorithm -> steps; steps are values, so
    identical steps are routed and solved once) and solve them all in one batched call; per
    scenario (``scenarios``: the graph, or its same-structure variants) its link table and
    ``{algorithm: (time, steps, utilisation)}``."""
    routed = {}
    for steps in plans.values():
        for st in steps:
            if st.flows not in routed:
                routed[st.flows] = route_step(graph, ranks, st.flows, options)
    keys = list(routed)
    rms = [routed[k][0] for k in keys]
    tables = [rms[0].links] if len(scenarios) == 1 and scenarios[0] is graph else \
        [LinkTable.from_graph(g) for g in scenarios]
    caps = np.stack([t.effective_capacity(options.efficiency) for t in tables])
    solved_all = solve_steps(rms, [routed[k][1] for k in keys], caps)
    timed = []
    for table, cap, solved_b in zip(tables, caps, solved_all):
        solved = dict(zip(keys, solved_b))
        latency = {k: step_latency(replace(routed[k][0], links=table), options) for k in keys}
        timed.append((table, {alg: (*_result_of(steps, solved, latency, rms[0].n_links, options.base, routed), cap)
                              for alg, steps in plans.items()}))
    return timed
