"""What each communication of a replay costs on the fabric, and how concurrent ones share it.

Every distinct communication (op, bytes, GPU ranks) is timed once alone by
:func:`flowsolver.collective` (NCCL's algorithms, routing, latencies): its latency part
``latency`` (seconds no bandwidth can shorten) and its transfer part ``transfer``, and the
bytes it puts on every link (the collective's time-weighted link utilisation x capacity x
transfer time). While several run at once, each is one fluid job that progresses at a rate
(collectives per second) given by max-min fair sharing of the links among them, every job
loading each link in proportion to its bytes there; alone a job progresses at
``1 / transfer``, so a communication that meets no other takes exactly its
:func:`flowsolver.collective` time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..collectives import collective
from ..solver import max_min_fair

__all__ = ["CommCost", "CostModel"]


@dataclass(frozen=True)
class CommCost:
    """One communication alone: ``latency`` and ``transfer`` seconds (``time`` their sum),
    the ``algorithm``, and its load column: ``links`` (graph edge indexes) and ``load`` (bytes
    per completed communication on each, scaled so that alone it progresses at 1 / transfer)."""

    op: str
    bytes: float
    ranks: tuple
    algorithm: str
    latency: float
    transfer: float
    links: np.ndarray
    load: np.ndarray

    @property
    def time(self) -> float:
        """Seconds alone."""
        return self.latency + self.transfer


class CostModel:
    """Per-signature :class:`CommCost` (timed once) and the rates of any set of them running
    together (solved once per distinct set)."""

    def __init__(self, graph, algorithms: dict | None, options: dict):
        self.graph, self.algorithms, self.options = graph, dict(algorithms or {}), dict(options)
        self.costs, self.index, self._rates = [], {}, {}
        self.capacity = None
        self.link_table = None

    def signature(self, op: str, size: float, ranks: tuple) -> int:
        """Index of the :class:`CommCost` of ``op`` on ``size`` bytes among GPU ``ranks``."""
        key = (op, float(size), tuple(ranks))
        if key not in self.index:
            self.index[key] = len(self.costs)
            self.costs.append(self._cost(*key))
        return self.index[key]

    def _cost(self, op, size, ranks) -> CommCost:
        empty = np.zeros(0, dtype=np.int64)
        if op == "barrier" or size == 0 or len(ranks) < 2:
            return CommCost(op, size, ranks, "", 0.0, 0.0, empty, np.zeros(0))
        try:
            r = collective(self.graph, op, size, ranks=list(ranks), algorithm=self.algorithms.get(op, "auto"),
                           **self.options)
        except ValueError as err:
            raise ValueError(f"{op} of {size:g} B among GPU ranks {list(ranks)[:16]}: {err}") from None
        if self.capacity is None:
            self.link_table = r.links
            self.capacity = np.asarray(r.links.effective_capacity(self.options.get("efficiency")), dtype=np.float64)
        transfer = float(sum(st.count * st.transfer for st in r.steps))
        util = np.asarray(r.link_utilization, dtype=np.float64)
        used = np.flatnonzero(util > 0)
        if transfer <= 0 or not len(used):
            return CommCost(op, size, ranks, r.algorithm, float(r.time), 0.0, empty, np.zeros(0))
        load = util[used] * self.capacity[used] * transfer / util[used].max()
        return CommCost(op, size, ranks, r.algorithm, float(r.time) - transfer, transfer, used, load)

    def rates(self, active: tuple) -> np.ndarray:
        """Progress rates (1/s) of the running transfers ``active`` (signature indexes,
        sorted, repeats allowed) sharing the links max-min fairly."""
        if active not in self._rates:
            self._rates[active] = self._solve(active)
        return self._rates[active]

    def _solve(self, active):
        costs = [self.costs[s] for s in active]
        if len(costs) == 1:
            return np.array([1.0 / costs[0].transfer])
        links = np.concatenate([c.links for c in costs])
        uniq, rows = np.unique(links, return_inverse=True)
        cols = np.repeat(np.arange(len(costs)), [len(c.links) for c in costs])
        matrix = sp.csc_matrix((np.concatenate([c.load for c in costs]), (rows, cols)), shape=(len(uniq), len(costs)))
        # a job alone on its links needs no solve: only jobs that share a link are solved
        shared = np.bincount(rows, minlength=len(uniq)) > 1
        if not shared.any():
            return np.array([1.0 / c.transfer for c in costs])
        alloc = max_min_fair(matrix, self.capacity[uniq])
        return np.asarray(alloc.rates, dtype=np.float64)

    def utilization(self, active: tuple, rates: np.ndarray) -> tuple:
        """(links, utilisation) of a set of running transfers at ``rates``."""
        costs = [self.costs[s] for s in active]
        links = np.concatenate([c.links for c in costs])
        load = np.concatenate([c.load * x for c, x in zip(costs, rates)])
        uniq, rows = np.unique(links, return_inverse=True)
        return uniq, np.bincount(rows, weights=load, minlength=len(uniq)) / self.capacity[uniq]
