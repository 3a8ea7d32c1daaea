"""What a replay returns: iteration time, critical path, per-rank timelines (Chrome-trace
JSON for Perfetto) and per-link utilisation over time."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ._workload import COMPUTE, DELAY

__all__ = ["ReplayResult", "PathNode"]

#: Chrome-trace thread of each kind of node (thread ids are integers in the format)
_THREADS = {"compute": 0, "comm": 1, "other": 2}


class PathNode(NamedTuple):
    """A node of the critical path: trace ``rank``, node ``id``, ``name``, ``kind``, and its
    ``start`` / ``end`` seconds in the replay."""

    rank: int
    id: int
    name: str
    kind: str
    start: float
    end: float


@dataclass(frozen=True)
class ReplayResult:
    """Result of :func:`flowsolver.traces.replay`; times in seconds.

    ``iteration_time`` is when the last node ended; ``critical_path`` the chain of nodes
    that set it (each started when the one before it ended: a dependency, the GPU being
    busy, or the last rank reaching a collective), first to last. ``exposed_communication``
    is the seconds of that path spent communicating while the path's rank computes nothing
    (a call beside compute counts only for what outlasts it, as ``training_step`` exposes
    it); ``path_compute`` the seconds of the path its rank spends computing (its compute
    nodes and the compute beside its communication). Both add up to ``iteration_time`` but
    for CPU-side (``delay``) nodes.
    ``start[r]`` / ``end[r]`` are rank ``r``'s node times in node order (NaN for nodes that
    take no time and never ran). ``placement[r]`` the GPU rank of trace rank ``r``.
    ``links`` the cluster's :class:`~flowsolver.routing.LinkTable` (graph edge order; None
    without communication). ``comm_start`` / ``comm_end`` per matched communication
    (``workload.comms`` order), ``algorithms`` the algorithm each one ran.
    """

    iteration_time: float
    critical_path: tuple = field(repr=False)
    exposed_communication: float
    path_compute: float
    start: list = field(repr=False)
    end: list = field(repr=False)
    comm_start: np.ndarray = field(repr=False)
    comm_end: np.ndarray = field(repr=False)
    algorithms: tuple = field(repr=False)
    placement: tuple = field(repr=False)
    workload: object = field(repr=False)
    links: object = field(repr=False, default=None)
    _intervals: list = field(repr=False, default_factory=list)
    _costs: object = field(repr=False, default=None)

    @classmethod
    def of(cls, engine, placement) -> "ReplayResult":
        """The result of a finished :class:`_Engine` run."""
        starts = [np.array(s, dtype=np.float64) for s in engine.start]
        ends = [np.array(e, dtype=np.float64) for e in engine.end]
        finite = [e[np.isfinite(e)] for e in ends]
        last = max(((float(e.max()), r) for r, e in enumerate(finite) if len(e)), default=(0.0, -1))
        path = []
        if last[1] >= 0:
            r = last[1]
            cur = (r, int(np.nanargmax(ends[r])))
            while cur is not None:
                r, i = cur
                node = engine.w.ranks[r].nodes[i]
                path.append(PathNode(r, node.id, node.name, node.kind, float(starts[r][i]), float(ends[r][i])))
                if node.kind in (COMPUTE, DELAY):
                    cur = engine.enabler[r][i]
                else:
                    who = engine.comm_enabler[engine.w.comm_of[(r, i)]]
                    cur = engine.enabler[who[0]][who[1]]
        path.reverse()
        busy = _Busy(engine, starts, ends)
        comm = [(p.end - p.start, busy.within(p.rank, p.start, p.end)) for p in path if p.kind not in (COMPUTE, DELAY)]
        exposed = sum(t - hidden for t, hidden in comm)
        compute = sum(p.end - p.start for p in path if p.kind == COMPUTE) + sum(hidden for _, hidden in comm)
        algorithms = tuple(engine.costs.costs[s].algorithm for s in engine.sig)
        return cls(iteration_time=last[0], critical_path=tuple(path), exposed_communication=exposed,
                   path_compute=compute, start=starts, end=ends, comm_start=np.array(engine.comm_start),
                   comm_end=np.array(engine.comm_end), algorithms=algorithms, placement=tuple(placement),
                   workload=engine.w, links=engine.costs.link_table, _intervals=engine.intervals,
                   _costs=engine.costs)

    def link_utilization(self):
        """Per-link utilisation over time, piecewise constant: ``(times, links, util)`` with
        ``times`` (k + 1,) the interval bounds (s), ``links`` the graph edge indexes that
        carried traffic, and ``util`` (k, len(links)) the fraction of each link's capacity
        in use in each interval (0 between communications).

        The time-weighted mean of a link over the iteration is
        ``(util * np.diff(times)[:, None]).sum(0) / iteration_time``.
        """
        if not self._intervals:
            return np.array([0.0, self.iteration_time]), np.zeros(0, dtype=np.int64), np.zeros((1, 0))
        per_key = {}
        for _, _, key, rates in self._intervals:
            if key not in per_key:
                per_key[key] = self._costs.utilization(key, rates)
        links = np.unique(np.concatenate([lk for lk, _ in per_key.values()]))
        times, rows = [0.0], []
        for t0, t1, key, _ in self._intervals:
            if t0 > times[-1]:
                times.append(t0)
                rows.append(np.zeros(len(links)))
            row = np.zeros(len(links))
            lk, u = per_key[key]
            row[np.searchsorted(links, lk)] = u
            times.append(t1)
            rows.append(row)
        if times[-1] < self.iteration_time:
            times.append(self.iteration_time)
            rows.append(np.zeros(len(links)))
        return np.array(times), links, np.array(rows)

    def busiest_links(self, n: int = 5) -> list:
        """The ``n`` links with the highest time-weighted mean utilisation over the
        iteration: ``(src, dst, mean utilisation)``, highest first."""
        times, links, util = self.link_utilization()
        if not len(links) or self.iteration_time <= 0:
            return []
        mean = (util * np.diff(times)[:, None]).sum(axis=0) / self.iteration_time
        order = np.argsort(-mean, kind="stable")[:n]
        return [(self.links.src[links[k]], self.links.dst[links[k]], float(mean[k])) for k in order]

    def chrome_trace(self, path=None, *, ranks=None) -> dict:
        """Per-rank timelines as Chrome-trace JSON (open it in Perfetto / chrome://tracing):
        one process per rank, a ``compute`` thread (one kernel at a time) and as many
        ``comm`` and ``other`` (CPU, memory) threads as that rank has such nodes running at
        once, so that no two events of one thread overlap; times in microseconds.
        Written to ``path`` when given; ``ranks`` limits the ranks (default all)."""
        events = []
        for r in (range(len(self.start)) if ranks is None else ranks):
            events.append(dict(name="process_name", ph="M", pid=r, args=dict(name=f"rank {r} (GPU {self.placement[r]})")))
            lanes = {name: [] for name in _THREADS}          # per thread kind: each lane's last end
            spans = []
            for i, node in enumerate(self.workload.ranks[r].nodes):
                s, e = self.start[r][i], self.end[r][i]
                if not (math.isfinite(s) and math.isfinite(e)) or (e <= s and node.kind == DELAY):
                    continue
                spans.append((s, e, i, node))
            spans.sort(key=lambda x: (x[0], x[1]))
            for s, e, i, node in spans:
                kind = "compute" if node.kind == COMPUTE else "other" if node.kind == DELAY else "comm"
                ends = lanes[kind]
                lane = next((k for k, last in enumerate(ends) if last <= s), len(ends))
                if lane == len(ends):
                    ends.append(e)
                else:
                    ends[lane] = e
                args = dict(id=node.id, kind=node.kind)
                if node.op:
                    args.update(op=node.op, bytes=node.bytes)
                events.append(dict(name=node.name or node.kind, ph="X", pid=r, tid=_tid(kind, lane), ts=s * 1e6,
                                   dur=(e - s) * 1e6, args=args))
            events += [dict(name="thread_name", ph="M", pid=r, tid=_tid(kind, lane),
                            args=dict(name=kind if lane == 0 else f"{kind} {lane + 1}"))
                       for kind, ends in lanes.items() for lane in range(max(1, len(ends)))]
        trace = dict(traceEvents=events, displayTimeUnit="ms")
        if path is not None:
            with open(path, "w") as fh:
                json.dump(trace, fh)
        return trace


def _tid(kind: str, lane: int) -> int:
    """Thread id of lane ``lane`` of a kind of node: 0 compute, 1 comm, 2 other, then
    further lanes of each kind in steps of 3."""
    return _THREADS[kind] + 3 * lane


class _Busy:
    """Per rank, the seconds its GPU computes before any time (compute nodes run one at a
    time, so their intervals are disjoint): the compute inside an interval is a difference."""

    def __init__(self, engine, starts, ends):
        self.engine, self.starts, self.ends, self.ranks = engine, starts, ends, {}

    def _of(self, r):
        if r not in self.ranks:
            kinds = self.engine.kind[r]
            s, e = self.starts[r], self.ends[r]
            mask = np.array([k == COMPUTE for k in kinds], dtype=bool) & np.isfinite(s) & np.isfinite(e)
            order = np.argsort(s[mask], kind="stable")
            s, e = s[mask][order], e[mask][order]
            self.ranks[r] = (s, e - s, np.concatenate([[0.0], np.cumsum(e - s)]))
        return self.ranks[r]

    def before(self, r, t) -> float:
        """Seconds rank ``r`` computed before time ``t``."""
        s, d, cum = self._of(r)
        k = int(np.searchsorted(s, t, side="right"))
        return 0.0 if k == 0 else float(cum[k - 1] + min(t - s[k - 1], d[k - 1]))

    def within(self, r, t0, t1) -> float:
        """Seconds rank ``r`` computed between ``t0`` and ``t1``."""
        return self.before(r, t1) - self.before(r, t0)
