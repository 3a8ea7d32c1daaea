"""A floor under every time a lockstep kind (:func:`flowsolver.collectives.concurrent_kinds`)
can take, per (algorithm, protocol) its pick may land on, without routing or solving: what a
planner bounds a step's collectives by before it solves them."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from ..routing import gpu_nodes, graph_memo

from ._bound import Capacities, lower_bound
from ._choice import is_tuned
from ._planned import _plans
from ._concurrent import _options, _sends_simple
from ._nccl_timing import _protocols, runs, steady_parts, tuned_time
from ._options import check_call

__all__ = ["kind_floors"]


def _capacities(graph, ranks, efficiency) -> Capacities:
    """``Capacities(graph, ranks, efficiency)``, from one built for every GPU of the graph
    (once per unchanged graph and efficiency): the same capacities per GPU and server, the
    group's positions pointed at its ranks."""
    every = graph_memo(graph, ("floor-capacities", repr(efficiency)),
                       lambda: Capacities(graph, list(range(len(gpu_nodes(graph)))), efficiency))
    view = copy.copy(every)
    view.pos_rank = np.append(np.asarray(ranks, dtype=np.int64), -1)
    return view


def _transfer(capacities, steps, parts) -> float:
    """Least transfer (s) of ``steps`` weighted as ``parts`` (``[(index, multiplier)]``)."""
    return float(sum(m * capacities.transfer(steps[i].flows) for i, m in parts))


def kind_floors(graph, op: str, size: float, group, algorithm: str = "auto", *, model=None, **keywords) -> dict:
    """``{(algorithm, protocol): seconds}``: for each entry the pick of
    ``concurrent_kinds(graph, [[dict(op=op, size=size, ranks=g, algorithm=algorithm) for g
    in groups]], **keywords)`` can land on, a time that entry cannot beat, when ``group`` is
    the first of ``groups`` (NCCL's view of the ranks is the first group's, and the other
    groups only add flows). The kind's time is never below the least of them.

    * An entry NCCL's cost model times (ring, tree, NVLS, NVLSTree, PAT on all-reduce,
      reduce-scatter, all-gather) is its own formula (:func:`~._nccl_timing.tuned_time`:
      NCCL's latency, the bandwidth NCCL grants the graph's bus bandwidth, the kernels' chunk
      pipeline) with the ring's flow-solved transfer, and the algorithm's own, replaced by the
      least transfer of their steps through the group's GPUs and servers
      (:class:`~._bound.Capacities`) and no slow path: the formula only grows as those
      transfers grow (a bandwidth is a least of terms rising with the bus bandwidth, a
      pipeline's time falls as its bandwidth rises) and slow paths only add latency.
    * An entry the per-step model times (``step_latency`` given, or an op NCCL's model does
      not price) is the candidates' pruning bound (:func:`~._bound.lower_bound`).

    ``keywords`` and ``model`` are :func:`~flowsolver.collectives.concurrent_kinds`'s (a
    training step's ``collective_options``); a send / receive or an all-to-all is floored at
    Simple whatever their protocol, as :func:`~flowsolver.collectives.concurrent_kinds` runs
    it (NCCL_PROTO does not govern sends). ValueError where the kind cannot run.

    >>> import topologies as tp
    >>> floors = kind_floors(tp.rail_optimized(1), "reduce_scatter", 2 ** 26, range(8))
    >>> sorted(floors)
    [('nvls', 'Simple'), ('ring', 'Simple')]
    """
    options = _options(graph, model, **keywords)
    # a send / receive or an all-to-all runs Simple whatever the job's protocol, as concurrent_kinds times it
    options = _sends_simple(op, replace(options, channels=None, tuner=options.step_latency is None))
    check_call(op, algorithm, size, options)
    size = float(size)
    planned = _plans(graph, op, size, [list(group)], algorithm, options)
    capacities = _capacities(graph, planned.ranks, options.efficiency)
    plans, hw, p = planned.plans, planned.hw, planned.p
    ring = plans.get("ring")
    ring_transfer = None if ring is None else _transfer(capacities, ring, [(i, st.count) for i, st in enumerate(ring)])
    floors = {}
    for a, steps in plans.items():
        if algorithm != "auto" and a != algorithm:
            continue                # timed for NCCL's bus bandwidth only: the pick is the algorithm asked
        if not is_tuned(a, op, options):
            floors[a, options.step_protocol] = float(lower_bound(capacities, steps, options, model))
            continue
        if ring_transfer is None:
            continue
        own = _transfer(capacities, steps, steady_parts(steps, lambda st: capacities.transfer(st.flows)))
        for proto in _protocols(options):
            if runs(a, proto, op, hw, options):
                floors[a, proto] = float(tuned_time(a, proto, op, size, p, ring_transfer, own, hw, options, model)[0])
    return floors
