"""A lower bound on a layout's step without solving the network: its collectives timed at the
bytes that must cross into the servers over the servers' external capacity (a cut bound), the
step composed from them.

Every collective of a kind runs at once on all its groups; whatever the algorithm, route or
protocol, the bytes a server must receive from outside it cross the links into the server,
which carry at most their capacity. Per group of ``n`` ranks with ``k`` in a server (``0 < k
< n``), at nccl-tests sizes ``S``, the server must receive at least:

* all-gather (``S`` the gathered total): the ``n - k`` outside shards, ``(n - k) S / n``;
* reduce-scatter (``S`` each rank's input): one reduced shard per local rank, ``k S / n``;
* all-reduce: the reduced result, ``S``;
* all-to-all (``S`` each rank's send buffer): ``S / n`` from every outside rank to every
  local one, ``k (n - k) S / n``;
* send / receive of ``S`` between servers: ``S``.

Summed over the servers and divided by the summed capacity of the links that enter them,
that is a lower bound on the kind's time (the latencies, protocol overheads and link
efficiencies only add). :func:`flowsolver.training.compose` of those times never exceeds the
exact step: every exposed term grows with the per-call times (checked against exact steps in
tests/test_planning.py).
"""

from __future__ import annotations

from collections import Counter

import topologies as tp_

from ..training._layout import ParallelLayout
from ..training._profile import CommProfile, CommTiming, _plan, ring_pairs

__all__ = ["CutBound"]


def _coefficient(op: str, groups, server_of) -> float:
    """Bytes into all servers together per byte of ``op``'s size, over ``groups``."""
    total = 0.0
    for g in groups:
        n = len(g)
        counts = Counter(server_of[r] for r in g)
        if len(counts) == 1:
            continue
        if op == "send_recv":
            total += 1.0
        elif op == "all_gather":
            total += sum((n - k) / n for k in counts.values())
        elif op == "reduce_scatter":
            total += sum(k / n for k in counts.values())
        elif op == "all_reduce":
            total += len(counts)
        elif op == "all_to_all":
            total += sum(k * (n - k) / n for k in counts.values())
        else:
            raise ValueError(f"no cut bound for op {op!r}")
    return total


class CutBound:
    """The cut bound of every collective of a layout on ``graph`` (its GPUs in
    ``topologies.gpus`` order, the identity placement); group lists and coefficients are
    remembered per layout's degrees and order, so many layouts share them.

    ``capacity``: bytes/s of all links that enter a server from outside (0 when the graph's
    nodes carry no ``server``: then every bound is 0, still a bound)."""

    def __init__(self, graph):
        nodes = graph.nodes
        self.server_of = [nodes[v].get("server") for v in tp_.gpus(graph)]
        if any(s is None for s in self.server_of):
            self.server_of = list(range(len(self.server_of)))
            self.capacity = 0.0
        else:
            self.capacity = float(sum(d.get("capacity", 0.0) for u, v, d in graph.edges(data=True)
                                      if nodes[v].get("server") is not None
                                      and nodes[u].get("server") != nodes[v].get("server")))
        self._groups: dict = {}
        self._coefficients: dict = {}

    def _layout_groups(self, key):
        def of(kind):
            if (key, kind) not in self._groups:
                tp, cp, pp, dp, ep, order = key
                lay = ParallelLayout(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, order=order)
                self._groups[(key, kind)] = ring_pairs(lay.groups("cp")) if kind == "cp_step" else lay.groups(kind)
            return self._groups[(key, kind)]
        return of

    def seconds(self, op: str, size: float, key, kind: str) -> float:
        """Lower bound (s) of ``op`` of ``size`` bytes on the groups of ``kind`` of the layout
        ``key`` = (tp, cp, pp, dp, ep, order)."""
        if not self.capacity:
            return 0.0
        ck = (key, kind, op)
        if ck not in self._coefficients:
            self._coefficients[ck] = _coefficient(op, self._layout_groups(key)(kind), self.server_of)
        return self._coefficients[ck] * size / self.capacity

    def profile(self, spec, lay, *, gpu, top_k, capacity_factor, reduce_bytes, gather_bytes, degrees) -> CommProfile:
        """A :class:`CommProfile` of ``lay`` (a :class:`flowsolver.planning.Layout`) whose
        per-call times are the cut bounds; ``degrees`` is what compose reads of the layout."""
        key = (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.order)
        of = self._layout_groups(key)
        kinds = {"tp": "tp", "cp": "cp", "cp_step": "cp_step", "pp": "pp", "ep": "ep", "dp": "dp",
                 "dp_gather": "dp", "dp_reduce": "dp", "dp_experts": "dp_experts"}
        comms = {}
        for name, _, op, size, _ in _plan(spec, degrees, lay.micro_batch, lay.zero, lay.sequence_parallel, top_k,
                                          capacity_factor, reduce_bytes, gather_bytes, groups=lambda kind: kind):
            kind = kinds[name]
            per_call = self.seconds(op, size, key, kind)
            gather = 0.0
            if op == "reduce_scatter" and name != "dp_reduce":
                gather_size = size * (gather_bytes / reduce_bytes if name.startswith("dp") else 1.0)
                gather = self.seconds("all_gather", gather_size, key, kind)
            groups = of(kind)
            comms[name] = CommTiming(name=name, op=op, algorithm="bound", bytes=size, per_call=per_call,
                                     groups=len(groups), group_size=len(groups[0]), gather=gather)
        return CommProfile(model=spec, layout=degrees, micro_batch=lay.micro_batch, zero=lay.zero, gpu=gpu,
                           comms=comms, sequence_parallel=lay.sequence_parallel, top_k=top_k,
                           capacity_factor=capacity_factor, reduce_bytes=reduce_bytes, gather_bytes=gather_bytes)
