"""The replay: a workload's DAGs run event by event on a cluster graph.

A node starts when its dependencies are done; GPU compute runs one node at a time per rank
(in node order among the ready ones), other timed nodes (CPU, memory) beside it; a
collective starts when every rank of its group has reached it (NCCL's rendezvous), a
send/recv pair when both sides have. A communication first pays its latency, then moves
its bytes as one fluid job, sharing the links max-min fairly with every other transfer
running at that moment (``_costs``); the rates are re-solved whenever a transfer starts or
ends. Events at one time (within 1e-12 relative) are taken together.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

import topologies as tp_

from .. import _checks
from ..routing import unchanged
# the rate of a compute node known only by its FLOPs: flowsolver.training's default fraction
# of peak while computing (sourced there), so a replayed and a composed step agree
from ..training import DEFAULT_COMPUTE_EFFICIENCY
from ._costs import CostModel
from ._result import ReplayResult
from ._workload import COMPUTE, DELAY, Workload, paused_gc

__all__ = ["replay", "DEFAULT_COMPUTE_EFFICIENCY"]

_END, _LATENCY = 0, 1


def _flops_rate(graph, workload, gpu, efficiency):
    """FLOP/s of a compute node given by FLOPs, or None when every node has a duration."""
    if not any(n.kind == COMPUTE and n.duration <= 0 and n.flops > 0 for t in workload.ranks for n in t.nodes):
        return None
    if gpu is None:
        types = {graph.nodes[v].get("gpu_type") for v in tp_.gpus(graph)}
        if None in types or len(types) != 1:
            raise ValueError(f"the trace has compute nodes given by FLOPs and the graph's GPUs have types "
                             f"{sorted(map(str, types))}: pass gpu= (one type)")
        gpu = types.pop()
    return tp_.get_gpu(gpu).peak_bf16_flops * efficiency


class _Engine:
    def __init__(self, workload: Workload, costs: CostModel, placement, rate):
        self.w, self.costs = workload, costs
        ranks = workload.ranks
        self.duration = [[(n.duration if n.duration > 0 or rate is None else n.flops / rate) for n in t.nodes]
                         for t in ranks]
        self.kind = [[n.kind for n in t.nodes] for t in ranks]
        self.children = [[[] for _ in t.nodes] for t in ranks]
        self.pending = [[len(n.deps) for n in t.nodes] for t in ranks]
        for r, t in enumerate(ranks):
            index = workload.index[r]
            for i, n in enumerate(t.nodes):
                for d in n.deps:
                    self.children[r][index[d]].append(i)
        self.start = [[math.nan] * len(t.nodes) for t in ranks]
        self.end = [[math.nan] * len(t.nodes) for t in ranks]
        self.enabler = [[None] * len(t.nodes) for t in ranks]
        self.ready_at = [[math.nan] * len(t.nodes) for t in ranks]
        self.busy = [False] * len(ranks)
        self.queue = [[] for _ in ranks]
        self.last_compute = [None] * len(ranks)
        comms = workload.comms
        self.comm_index = [[-1] * len(t.nodes) for t in ranks]
        for (r, i), c in workload.comm_of.items():
            self.comm_index[r][i] = c
        self.sig = [costs.signature(c.op, c.bytes, tuple(placement[r] for r in c.ranks)) for c in comms]
        self.waiting = [len(c.members) for c in comms]
        self.comm_enabler = [None] * len(comms)
        self.comm_start = [math.nan] * len(comms)
        self.comm_end = [math.nan] * len(comms)
        self.heap, self.seq = [], 0
        self.active, self.remaining, self.rate = [], {}, {}
        self.intervals = []                          # (t0, t1, active signature tuple, rates)
        self.clock = 0.0

    def push(self, t, what, a, b=0):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, what, a, b))

    def ready(self, r, i, t, by):
        kind = self.kind[r][i]
        self.ready_at[r][i] = t
        if kind == COMPUTE:
            heapq.heappush(self.queue[r], i)
            self.enabler[r][i] = by
            self.try_compute(r, t)
        elif kind == DELAY:
            self.start[r][i], self.enabler[r][i] = t, by
            self.push(t + self.duration[r][i], _END, r, i)
        else:
            c = self.comm_index[r][i]
            self.enabler[r][i] = by
            self.waiting[c] -= 1
            if self.waiting[c] == 0:
                self.comm_enabler[c] = (r, i)
                self.begin_comm(c, t)

    def try_compute(self, r, t):
        if self.busy[r] or not self.queue[r]:
            return
        i = heapq.heappop(self.queue[r])
        if self.ready_at[r][i] < t and self.last_compute[r] is not None:
            self.enabler[r][i] = (r, self.last_compute[r])      # held back by the GPU, not by a dependency
        self.busy[r], self.last_compute[r] = True, i
        self.start[r][i] = t
        self.push(t + self.duration[r][i], _END, r, i)

    def begin_comm(self, c, t):
        self.comm_start[c] = t
        for r, i in self.w.comms[c].members:
            self.start[r][i] = t
        cost = self.costs.costs[self.sig[c]]
        if cost.latency > 0:
            self.push(t + cost.latency, _LATENCY, c)
        else:
            self.begin_transfer(c, t)

    def begin_transfer(self, c, t):
        if self.costs.costs[self.sig[c]].transfer > 0:
            self.active.append(c)
            self.remaining[c] = 1.0
            self.changed = True
        else:
            self.finish_comm(c, t)

    def finish_comm(self, c, t):
        self.comm_end[c] = t
        for r, i in self.w.comms[c].members:
            self.complete(r, i, t)

    def complete(self, r, i, t):
        self.end[r][i] = t
        compute = self.kind[r][i] == COMPUTE
        if compute:
            self.busy[r] = False
        children = self.children[r][i]
        if children:
            pending, by = self.pending[r], (r, i)
            for child in children:
                left = pending[child] - 1
                pending[child] = left
                if not left:
                    self.ready(r, child, t, by)
        if compute:
            self.try_compute(r, t)

    def solve(self):
        order = sorted(self.active, key=self.sig.__getitem__)
        key = tuple(self.sig[c] for c in order)
        rates = self.costs.rates(key) if key else np.zeros(0)
        self.rate = dict(zip(order, rates.tolist()))
        self.key, self.key_rates = key, rates
        self.changed = False

    def run(self):
        for r, t in enumerate(self.w.ranks):
            for i in range(len(t.nodes)):
                if self.pending[r][i] == 0:
                    self.ready(r, i, 0.0, None)
        self.changed = True
        while self.heap or self.active:
            if self.changed:
                self.solve()
            t_next = self.heap[0][0] if self.heap else math.inf
            for c in self.active:
                x = self.rate[c]
                if x > 0:
                    t_next = min(t_next, self.clock + self.remaining[c] / x)
            if not math.isfinite(t_next):
                stuck = self.w.comms[self.active[0]]
                raise ValueError(f"{stuck.op} among ranks {list(stuck.ranks)[:16]} can make no progress (its "
                                 "links have no capacity)")
            self.advance(t_next)
        return self.check_all_ran()

    def advance(self, t):
        dt, eps = t - self.clock, 1e-12 * max(t, 1e-9)
        if self.active and dt > 0:
            self.intervals.append((self.clock, t, self.key, self.key_rates))
        done = []
        for c in self.active:
            self.remaining[c] -= self.rate[c] * dt
            if self.remaining[c] <= 1e-12 or (self.rate[c] > 0 and self.remaining[c] / self.rate[c] <= eps):
                done.append(c)
        self.clock = t
        if done:
            finished = set(done)
            self.active = [c for c in self.active if c not in finished]
            self.changed = True
            for c in done:
                del self.remaining[c]
                self.finish_comm(c, t)
        while self.heap and self.heap[0][0] <= t + eps:
            _, _, what, a, b = heapq.heappop(self.heap)
            if what == _END:
                self.complete(a, b, t)
            else:
                self.begin_transfer(a, t)

    def check_all_ran(self):
        for r, t in enumerate(self.w.ranks):
            for i, n in enumerate(t.nodes):
                if math.isnan(self.end[r][i]):
                    if n.kind in (COMPUTE, DELAY):
                        why = "its dependencies never finished"
                    else:
                        c = self.w.comm_of[(r, i)]
                        late = [rr for rr, ii in self.w.comms[c].members if math.isnan(self.ready_at[rr][ii])]
                        why = f"ranks {late[:8]} never reached it (a deadlock between the ranks' orders)"
                    raise ValueError(f"{t.source or f'rank {r}'}: node {n.id} ({n.name!r}) never ran: {why}")


#: the CollectiveOptions fields replay takes (not the host's: gpus_per_thread, host_overhead)
_REPLAY_OPTIONS = ("policy", "policy_options", "pxn", "protocol", "chunk", "efficiency", "step_latency",
                   "base_latency", "channels", "candidates", "model")


def replay(graph, workload: Workload, *, ranks=None, gpu=None, compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY,
           algorithms: dict | None = None, options=None, **collective_options) -> ReplayResult:
    """Replay a workload on a cluster graph, event by event.

    Parameters
    ----------
    graph : networkx.DiGraph
        The cluster (a ``topologies`` generator or hand-built).
    workload : Workload
        From :func:`read_chakra`, :func:`read_simai_workload` or :func:`workload_from_step`.
    ranks : sequence of int, optional
        GPU rank (``topologies.gpus`` order) of each trace rank; default trace rank ``i`` on GPU ``i``.
    gpu : str or GpuSpec, optional
        GPU type for compute nodes given by FLOPs only (default: the graph's one GPU type).
    compute_efficiency : float in (0, 1]
        Fraction of the GPU's dense bf16 peak such nodes reach (default
        ``DEFAULT_COMPUTE_EFFICIENCY``, 0.44: the flat model's GEMM efficiency; ``training_step``
        times kernels from its tables by default, and a trace written from a step carries
        their durations).
    algorithms : dict, optional
        Collective algorithm per op (``"all_reduce": "ring"``, ...), default ``"auto"``
        (the fastest alone).
    options : CollectiveOptions, optional
        The options of every collective (:class:`flowsolver.CollectiveOptions`), instead of
        the keywords below (not both).
    **collective_options
        Passed to :func:`flowsolver.collective` (``policy``, ``efficiency``, ``step_latency``, ...).

    Returns
    -------
    ReplayResult
        Iteration time (s), critical path, per-rank timelines (Chrome-trace JSON),
        per-link utilisation over time.

    Examples
    --------
    >>> import topologies as tp
    >>> from flowsolver.traces import RankTrace, TraceNode, build_workload
    >>> per_rank = [RankTrace(r, [TraceNode(0, "fwd", "compute", duration=1e-3 * (1 + r)),
    ...                           TraceNode(1, "grads", "collective", deps=(0,), op="all_reduce", bytes=2**26)])
    ...             for r in range(8)]
    >>> res = replay(tp.rail_optimized(1), build_workload(per_rank))
    >>> from flowsolver import collective
    >>> alone = collective(tp.rail_optimized(1), "all_reduce", 2**26).time    # the slowest rank sets the start
    >>> round(res.iteration_time - (8e-3 + alone), 12), [n.name for n in res.critical_path]
    (0.0, ['fwd', 'grads'])
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a flowsolver.traces.Workload, got {type(workload).__name__}")
    _checks.checked_graph(graph)
    n_gpus = len(tp_.gpus(graph))
    if ranks is None:
        if workload.n_ranks > n_gpus:
            raise ValueError(f"the trace has {workload.n_ranks} ranks but the graph {n_gpus} GPUs: pass a bigger "
                             "cluster (or ranks=)")
        placement = list(range(workload.n_ranks))
    else:
        placement = _checks.rank_indices(graph, ranks)
        if len(placement) != workload.n_ranks or len(set(placement)) != len(placement):
            raise ValueError(f"ranks must give {workload.n_ranks} distinct GPU ranks (one per trace rank), got "
                             f"{len(placement)}")
    compute_efficiency = _checks.fraction("compute_efficiency", compute_efficiency, zero_ok=False)
    rate = _flops_rate(graph, workload, gpu, compute_efficiency)
    if options is not None:
        from ..collectives import CollectiveOptions

        if not isinstance(options, CollectiveOptions):
            raise TypeError(f"options must be a flowsolver.CollectiveOptions, got {type(options).__name__}")
        if collective_options:
            raise ValueError("replay: pass the collective options either as options= or as keywords, not both (also "
                             f"got {', '.join(sorted(collective_options))})")
        collective_options = options.keywords("replay", _REPLAY_OPTIONS)
    host = sorted(set(collective_options) & {"gpus_per_thread", "host_overhead"})
    if host:
        raise ValueError(f"replay does not take {', '.join(host)}: a trace's ranks each issue their own calls, and "
                         "its timeline holds what the host does between them")
    costs = CostModel(graph, algorithms, collective_options)
    # every communication routed on one index of the graph, checked once (above)
    with unchanged(graph, checked=True), paused_gc():
        engine = _Engine(workload, costs, placement, rate)
        engine.run()
        return ReplayResult.of(engine, placement)
