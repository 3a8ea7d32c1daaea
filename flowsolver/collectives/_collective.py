"""One collective (or one per rank group, in lockstep) on a graph and its variants:
candidate schedules, the lower-bound pruning of ``"auto"``, batched solving, results."""

from __future__ import annotations

import numpy as np

from .. import _checks
from .._status import Status
from ..routing import unchanged
from ._bound import Capacities, lower_bound
from ._layout import participants, unavailable
from ._nccl import ALGORITHMS, DEFAULT_CHUNK, busbw_factor
from ._options import Options, check_call
from ._results import CollectiveResult, Derivation
from ._schedules import schedule
from ._solve import time_plans
from ._trees import Step

__all__ = ["collective", "collective_variants", "solve_collective"]

_STALLED = ("a collective step cannot complete: one of its flows crosses a failed (zero-capacity) link on "
            "every path")


def _merged(per_group, p):
    """Step ``j`` of every group as one step, the positions of group ``g`` offset by ``g p``."""
    merged, cache = [], {}
    for parts in zip(*per_group):
        key = tuple(st.flows for st in parts)
        if key not in cache:
            cache[key] = tuple((x + g * p if isinstance(x, int) else x, y + g * p if isinstance(y, int) else y, n)
                               for g, st in enumerate(parts) for x, y, n in st.flows)
        merged.append(Step(parts[0].count, cache[key], parts[0].latency_count))
    return tuple(merged)


def _plans(graph, op, size, rank_groups, algorithm, options):
    """All ranks (the groups' in order), and the steps of every candidate algorithm."""
    laid = [participants(graph, op, ranks, options.channels) for ranks in rank_groups]
    p = len(laid[0][0])
    if any(len(r) != p for r, _ in laid):
        raise ValueError(f"groups run in lockstep must have equal sizes, got {sorted({len(r) for r, _ in laid})}")
    ranks = [r for group, _ in laid for r in group]     # groups may share GPUs (a pipeline stage
    # sends to the next while it receives from the previous): their flows share links
    if algorithm != "auto":
        for _, layout in laid:
            if why := unavailable(algorithm, p, layout):
                raise ValueError(f"algorithm {algorithm!r} {why}")
    names = [a for a in (ALGORITHMS[op] if algorithm == "auto" else (algorithm,))
             if not any(unavailable(a, p, layout) for _, layout in laid)]
    chunk = float(options.chunk)
    plans = {}
    for a in names:
        per_group = [schedule(op, a, p, size, layout, chunk) for _, layout in laid]
        plans[a] = per_group[0] if len(per_group) == 1 else _merged(per_group, p)
    return ranks, p, plans


def _auto(graph, ranks, plans, options):
    """``"auto"`` on one graph: candidates in order of a lower bound that needs no routing;
    the most promising one is solved first, then, in one batched call, every other whose
    bound is below its time; the rest cannot win and are never routed or solved."""
    capacities = Capacities(graph, ranks, options.efficiency)
    bounds = {a: lower_bound(capacities, plans[a], options) for a in plans}
    order = sorted(plans, key=bounds.get)
    (table, results), = time_plans(graph, ranks, {order[0]: plans[order[0]]}, options, [graph])
    best_time = min(r[0] for r in results.values())
    rest = [a for a in order if a not in results and bounds[a] < best_time]
    if rest:
        results.update(time_plans(graph, ranks, {a: plans[a] for a in rest}, options, [graph])[0][1])
    timed = [(table, {a: results[a] for a in plans if a in results})]
    return timed, {a: bounds[a] for a in plans if a not in results}


def solve_collective(graph, op, size, rank_groups, algorithm, options: Options, variants=None) -> list:
    """One collective per rank group, the groups in lockstep (step ``j`` of every group runs
    at the same time; one group is :func:`collective`), on ``graph`` or on each of its
    same-structure ``variants``: one :class:`CollectiveResult` per scenario."""
    with unchanged(graph):          # laid out and every step routed on one index of the graph
        ranks, p, plans = _plans(graph, op, size, rank_groups, algorithm, options)
        if algorithm == "auto" and variants is None and len(plans) > 1:
            timed, pruned = _auto(graph, ranks, plans, options)
        else:
            scenarios = [graph] if variants is None else list(variants)
            timed, pruned = time_plans(graph, ranks, plans, options, scenarios), {}
    out = []
    for table, results in timed:
        best = min(results, key=lambda a: results[a][0])
        total, steps, util, solved_on, cap = results[best]
        stalled = not np.isfinite(total)
        algbw = 0.0 if stalled else float(size) / total
        out.append(CollectiveResult(op=op, algorithm=best, size=float(size), ranks=p, time=total, algbw=algbw,
                                    busbw=algbw * busbw_factor(op, p), steps=steps, link_utilization=util,
                                    links=table, candidates={a: r[0] for a, r in results.items()},
                                    pruned=dict(pruned), status=Status.STALLED if stalled else Status.OK,
                                    message=_STALLED if stalled else "",
                                    solved_on=Derivation(solved_on, cap, table.capacity)))
    return out


def collective(graph, op: str, size: float, *, ranks=None, algorithm: str = "auto",
               policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK,
               efficiency=None, step_latency: float | None = None,
               base_latency: float | None = None) -> CollectiveResult:
    """Time a collective on a cluster graph.

    Parameters
    ----------
    graph : networkx.DiGraph
    op : str
        One of ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``,
        ``broadcast``, ``reduce``, ``send_recv``.
    size : float
        Bytes, as nccl-tests counts them for ``op`` (see :mod:`flowsolver.collectives`).
    ranks : sequence of int, optional
        GPU ranks taking part, in order (placement); default every GPU. The first rank is
        the root of broadcast / reduce and the sender of send/recv.
    algorithm : str
        ``"auto"`` (solve every algorithm of ``ALGORITHMS[op]`` that can run on these ranks,
        all their steps in one batched call, and keep the fastest) or one of them.
    policy, policy_options, pxn
        Routing policy (``flowsolver.POLICIES``) and its options (``subflows``, ``seed``); PXN for cross-rail hops.
    channels : int, optional
        Rings (and tree pairs) run side by side (default: NICs per server when the ranks
        span servers, else 1).
    protocol : {"LL", "LL128", "Simple"}
        NCCL protocol whose latency constants are used.
    chunk : float
        Pipeline chunk of tree all-reduce and ring broadcast / reduce, bytes (default
        512 KiB: NCCL's 4 MiB buffer over its 8 steps).
    efficiency : float or dict, optional
        Fraction of the raw link rate reached (all links, or by tech); default the catalogue's.
    step_latency, base_latency : float, optional
        Override the per-step latency (alpha, s) and the per-collective base latency (s).

    A collective whose flows cannot complete (a failed link on every path) raises ValueError.

    Examples
    --------
    >>> import topologies as tp
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32, algorithm="ring")
    >>> round(r.busbw / 1e9), r.bottleneck_tier   # NVLink 4 at NCCL's 20.6 GB/s per link
    (370, 'nvlink')
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32)
    >>> r.algorithm, round(r.busbw / 1e9)        # in-switch reduction (measured ~480 GB/s)
    ('nvls', 490)
    """
    options = Options(policy=policy, policy_options=dict(policy_options or {}), pxn=pxn, protocol=protocol,
                      chunk=chunk, efficiency=efficiency, step_latency=step_latency, base_latency=base_latency,
                      channels=channels)
    return collective_with(graph, op, size, ranks, algorithm, options)


def collective_with(graph, op, size, ranks, algorithm, options: Options) -> CollectiveResult:
    """:func:`collective` with its options already gathered in an :class:`Options`."""
    check_call(op, algorithm, size, options)
    _checks.checked_graph(graph)
    result, = solve_collective(graph, op, float(size), [ranks], algorithm, options)
    if result.status != Status.OK:
        raise ValueError(result.message)
    return result


def collective_variants(graphs, op: str, size: float, *, ranks=None, algorithm: str = "auto",
                        policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
                        pxn: bool = True, protocol: str = "Simple", chunk: float = DEFAULT_CHUNK,
                        efficiency=None, step_latency: float | None = None,
                        base_latency: float | None = None) -> list:
    """:func:`collective` on several graphs of one structure (same nodes and edges, other
    capacities or latencies: a technology swap, derated links, failed links at capacity 0),
    routed once on the first and solved for all in one batched call.

    Returns one :class:`CollectiveResult` per graph; a variant that cannot complete has
    ``status`` ``Status.STALLED``, ``time`` inf and the reason in ``message``. Routes are
    the first graph's: a link failed in another variant is not routed around (its flows
    stall; call :func:`collective` on the edited graph to reroute).

    >>> import topologies as tp
    >>> ndr, hdr = tp.rail_optimized(2), tp.rail_optimized(2, link="ib_hdr")
    >>> [round(r.busbw / 1e9) for r in collective_variants([ndr, hdr], "all_reduce", 2**30, algorithm="ring")]  # 8 NICs: 376, 192
    [340, 183]
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs must be a non-empty list of cluster graphs")
    edges = list(graphs[0].edges())
    for i, g in enumerate(graphs[1:], 1):
        if list(g.edges()) != edges:
            raise ValueError(f"graphs[{i}] has other nodes or edges than graphs[0]: variants must share the structure")
    options = Options(policy=policy, policy_options=dict(policy_options or {}), pxn=pxn, protocol=protocol,
                      chunk=chunk, efficiency=efficiency, step_latency=step_latency, base_latency=base_latency,
                      channels=channels)
    check_call(op, algorithm, size, options)
    return solve_collective(graphs[0], op, float(size), [ranks], algorithm, options, variants=graphs)
