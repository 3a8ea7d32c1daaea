"""The makespan's one-sided derivative through an event whose finishing flows a change
splits apart (a new event order).

At first order (a change of size ``h``) each flow ``f`` finishing at an event ends at
``D + h tau_f`` at its phase's rates. The flows with the smallest ``tau`` end first; the
other finishing flows, and the flows that run on past the event (the *survivors*), then
share the links without them. That short stretch lasts a time of order ``h`` and is an
event-driven run of its own at the zero-order capacities (a first-order change of its rates
moves bytes by ``h^2``): the finishing flows start it with ``r_f (tau_f - min tau) h`` bytes
left, the survivors with so many that none ends in it. Completion times scale with the
sizes, so per unit of ``h`` it gives, exactly, when the last finishing flow ends (the
event's first-order offset: the next phase starts that much later) and how many more bytes
each survivor moved in it than at its phase's rate (it starts the next phase with that
many fewer). At the last event there are no survivors and the offset is the makespan's.

The run is skipped, exactly, for the directions where every flow keeps its rate until the
last finishing flow ends: a flow keeps it while one of its constraints (a saturated link
where it is a top flow, or its cap) is crossed by no finishing flow that has ended, since
then every flow's constraint stays saturated with the flow on top and the old rates are
still the max-min certificate (:mod:`flowsolver.solver._certificate`; the allocation is
unique). Otherwise each of its steps is one max-min solve on the flows still running, the
ended ones capped at 0; the directions of one event step together, one batched solve for
the sets of ended flows not met before.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# flows ending together inside the split, a survivor's rate there counting as its phase's rate
# (solves agree to ~1e-12), a tie of levels: all within the one tolerance, flowsolver._tolerance
from .._tolerance import RTOL

#: scenarios per batched solve of the split's steps (each a (flows,) demand row), at most
SPLIT_BATCH = 64

#: the split's work arrays (event flows or constraint entries x directions) and its kept
#: solutions (sets of ended flows x event flows) stay under this many entries (~8 bytes each)
SPLIT_ENTRIES = 1 << 22


class EventSplit:
    """The flows of one event (indices in the event's bottleneck
    :class:`~flowsolver.solver._structure.Structure` ``structure``): ``finishing`` (rates
    ``finishing_rates``, bytes/s) and ``survivors`` (the flows that run on), prepared for
    :meth:`run` along many directions of change."""

    def __init__(self, structure, finishing, finishing_rates, survivors=()):
        s = structure
        self.s = s
        self.fin = np.asarray(finishing, dtype=np.int64)
        self.surv = np.asarray(survivors, dtype=np.int64)
        self.r_fin = np.asarray(finishing_rates, dtype=np.float64)
        self.flows = np.concatenate([self.fin, self.surv])      # the event's flows: finishing first
        n_fin = len(self.fin)
        # which finishing flow crosses which link, by link: the earliest end on a link
        cross = sp.csc_matrix(s.matrix[:, self.fin]).tocsr()
        cross.eliminate_zeros()
        crossed = np.flatnonzero(np.diff(cross.indptr))
        self.cross_starts = cross.indptr[crossed]
        self.cross_flow = cross.indices
        row_of = np.full(s.n_links, -1)
        row_of[crossed] = np.arange(len(crossed))
        # each flow's constraints (saturated links where it is a top flow); a flow with its cap or
        # a constraint no finishing flow crosses keeps its rate whatever ends
        con = sp.csc_matrix(s.matrix[:, self.flows])
        con.eliminate_zeros()
        link = con.indices
        flow = np.repeat(np.arange(len(self.flows)), np.diff(con.indptr))
        is_con = s.saturated[link] & (s.level[self.flows[flow]] >= s.top[link] * (1 - RTOL))
        link, flow = link[is_con], flow[is_con]
        self.always = s.capped[self.flows].copy()
        self.always[flow[row_of[link] < 0]] = True
        watched = (row_of[link] >= 0) & ~self.always[flow]
        self.con_row, self.con_flow = row_of[link[watched]], flow[watched]     # by flow (csc order)
        self.n_fin = n_fin
        self._sub = None
        self._known = {}

    @property
    def chunk(self) -> int:
        """Directions per :meth:`run` call that keep its work arrays (event flows or
        constraint entries x directions) under ``SPLIT_ENTRIES`` entries."""
        return max(1, SPLIT_ENTRIES // max(len(self.flows), len(self.con_flow) + len(self.cross_flow), 1))

    def run(self, tau: np.ndarray, tol: np.ndarray):
        """First-order ends along ``J`` directions: ``tau`` (finishing flows, J), each
        finishing flow's end offset at its phase's rates (s per unit of the change, in the
        change's own sign), ``tol`` (J,) offsets closer than this end together. Returns
        ``end`` (J,), when the last finishing flow ends, and ``excess`` (survivors x J,
        sparse coo), the bytes each survivor moved beyond its phase's rate until then (per
        unit of the change). Pass at most :attr:`chunk` directions for bounded memory."""
        tau = np.asarray(tau, dtype=np.float64).reshape(self.n_fin, -1)
        tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), (tau.shape[1],))
        end = tau.max(axis=0)
        moving = np.flatnonzero(~self._steady(tau, tol))
        rows = cols = vals = np.zeros(0)
        if len(moving):
            end[moving], moved = self._split(tau[:, moving], tol[moving])
            rows, c = np.nonzero(moved)
            cols, vals = moving[c], moved[rows, c]
        return end, sp.coo_matrix((vals, (rows, cols)), shape=(len(self.surv), tau.shape[1]))

    def _steady(self, tau, tol) -> np.ndarray:
        """Per direction: whether every flow keeps its rate until the last finishing flow
        ends (see the module docstring)."""
        lo, hi = tau.min(axis=0), tau.max(axis=0)
        split = (hi - lo) > tol
        kept = np.repeat(self.always[:, None], tau.shape[1], axis=1)
        if split.any() and len(self.con_row):
            first = np.minimum.reduceat(tau[self.cross_flow], self.cross_starts, axis=0)  # (crossed links, J)
            own = np.concatenate([tau, np.broadcast_to(hi, (len(self.surv), len(hi)))])  # survivors: to the end
            np.logical_or.at(kept, self.con_flow, first[self.con_row] >= own[self.con_flow] - tol)
        return ~split | (kept | ~self._left(tau, lo, tol)).all(axis=0)

    def _left(self, tau, lo, tol):
        """(event flows, J): flows running after the first finishing ones end."""
        return np.concatenate([tau > lo + tol, np.ones((len(self.surv), tau.shape[1]), dtype=bool)])

    def _split(self, tau, tol):
        """The split's run for directions that move some rate: each step solves the flows
        still running (finishing flows ended: cap 0) and runs them to the next end."""
        lo = tau.min(axis=0)
        n_fin, m = self.n_fin, tau.shape[1]
        left = self.r_fin[:, None] * (tau - lo)              # bytes left per unit of the change
        ended = tau <= lo + tol
        clock, moved = np.zeros(m), np.zeros((len(self.surv), m))
        base = self._rates(np.zeros((n_fin, 1), dtype=bool))[n_fin:, 0]     # (the first solve is kept)
        while not ended.all():
            go = np.flatnonzero(~ended.all(axis=0))
            rates = self._rates(ended[:, go])
            rf, rs = rates[:n_fin], rates[n_fin:]
            on = ~ended[:, go]
            if (on & (rf <= 0)).any():
                raise ValueError("a finishing flow gets no bandwidth once others end (a failed link): the makespan "
                                 "has no derivative there")
            to_end = np.where(on, left[:, go] / np.where(on, rf, 1.0), np.inf)
            step = to_end.min(axis=0)
            ends_now = on & (to_end <= step * (1 + RTOL))
            left[:, go] = np.where(on & ~ends_now, left[:, go] - rf * step, 0.0)
            ended[:, go] |= ends_now
            clock[go] += step
            gain = rs - base[:, None]
            gain[np.abs(gain) <= RTOL * np.abs(base)[:, None]] = 0.0
            moved[:, go] += gain * step
        return lo + clock, moved

    def _rates(self, ended: np.ndarray) -> np.ndarray:
        """Zero-order rates (event flows, K) of the event's flows with the finishing flows
        ``ended`` (finishing flows, K) capped at 0; each set of ended flows solved once."""
        from ..solver import max_min_fair

        keys = [col.tobytes() for col in np.packbits(ended, axis=0).T]
        if len(self._known) > 1 and (len(self._known) + len(keys)) * len(self.flows) > SPLIT_ENTRIES:
            self._known = dict([next(iter(self._known.items()))])    # bounded: keep the first (nothing ended)
        new = list(dict.fromkeys(k for k in keys if k not in self._known))
        if new:
            if self._sub is None:
                s = self.s
                self._sub = (s.matrix[:, self.flows], s.weights[self.flows], s.demands[self.flows])
            sub, w, d = self._sub
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            batch = max(1, min(SPLIT_BATCH, SPLIT_ENTRIES // max(sub.nnz, 1)))
            for i in range(0, len(new), batch):
                part = new[i:i + batch]
                caps = np.repeat(d[None, :], len(part), axis=0)
                caps[:, :self.n_fin] = np.where(ended[:, [first[k] for k in part]].T, 0.0, caps[:, :self.n_fin])
                alloc = max_min_fair(sub, self.s.capacity, weights=w, demands=caps, dtype="float64")
                if not np.all(alloc.converged):
                    raise RuntimeError("an event split's solve did not converge")
                for k, row in zip(part, np.asarray(alloc.rates, dtype=np.float64).reshape(len(part), -1)):
                    self._known[k] = row
        return np.stack([self._known[k] for k in keys], axis=1)
