"""The makespan's one-sided derivative when the flows that finish together at the last event
would drift apart under the change.

At first order (a change of size ``h``) each finishing flow ``f`` of the last phase ends at
``T + h key_f``, at the phase's rates. The flows with the smallest ``key`` end first; if
that frees bandwidth another finishing flow then runs on, that flow speeds up (or, max-min
fairness not being monotone, slows down) for the rest of its bytes, and the makespan is not
simply ``T + h max(key)``. The rest is an event-driven run of its own: the flows left, with
``r_f (key_f - min key) h`` bytes each, at the zero-order capacities; its makespan is ``h``
times the makespan of the same run with ``r_f (key_f - min key)`` bytes (completion times
scale with the sizes). So the derivative is ``min key + makespan(those sizes)``, exactly.

The re-run is skipped, exactly, where every flow left keeps its rate throughout: a flow
keeps it while one of its constraints (a saturated link where it is a top flow, or its
cap) is crossed by no flow that ends before it, since then that link stays saturated with
the flow on top (the max-min certificate of :mod:`flowsolver.solver._certificate`; the
allocation is unique).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .solver._structure import TIE_RTOL


class LastEvent:
    """The finishing flows of a run's last phase (``flows``: their indices in the phase's
    bottleneck :class:`~flowsolver.solver._structure.Structure` ``structure``; ``rates``
    their rates, bytes/s), prepared for :meth:`offset`."""

    def __init__(self, structure, flows, rates):
        s = structure
        self.s, self.flows, self.rates = s, np.asarray(flows), np.asarray(rates, dtype=np.float64)
        cross = sp.csr_matrix(s.matrix[:, self.flows])       # links x finishing flows, by link
        cross.data = (cross.data > 0).astype(np.float64)
        cross.eliminate_zeros()
        coo = cross.tocoo()
        link, flow = coo.row, coo.col                        # entries in link order
        con = s.saturated[link] & (s.level[self.flows[flow]] >= s.top[link] * (1 - TIE_RTOL))
        self.con_link, self.con_flow = link[con], flow[con]
        # only the links that constrain some flow need their earliest end: their entries
        keep = np.zeros(s.n_links, dtype=bool)
        keep[self.con_link] = True
        self.entry_flow = flow[keep[link]]
        links, starts = np.unique(link[keep[link]], return_index=True)
        self.starts, self.first_of = starts, np.full(s.n_links, np.inf)
        self.links = links
        self.capped = s.capped[self.flows]

    def offset(self, key: np.ndarray, tol: float) -> float:
        """The makespan's first-order offset (``T + h offset``) from each finishing flow's
        offset ``key`` at the phase's rates (s per unit of the change); ``tol``: offsets
        closer than this end together."""
        kmin = float(key.min())
        left = key > kmin + tol
        if not left.any() or self._steady(key, left, tol):
            return float(key.max())
        return kmin + self._rerun(np.flatnonzero(left), key - kmin)

    def _steady(self, key, left, tol) -> bool:
        """Whether every flow left keeps its rate until it ends (see the module docstring)."""
        first = self.first_of.copy()
        if len(self.links):
            first[self.links] = np.minimum.reduceat(key[self.entry_flow], self.starts)
        holds = first[self.con_link] >= key[self.con_flow] - tol
        kept = self.capped.copy()
        kept[self.con_flow[holds]] = True
        return not (left & ~kept).any()

    def _rerun(self, idx, bytes_per_rate) -> float:
        """Makespan (s per unit of the change) of the flows ``idx`` run from their bytes
        left, ``rate x bytes_per_rate``, at the zero-order capacities."""
        from .timing import completion_times

        s, f = self.s, self.flows[idx]
        done = completion_times(s.matrix[:, f], self.rates[idx] * bytes_per_rate[idx], s.capacity,
                                weights=s.weights[f], demands=s.demands[f], dtype=np.float64)
        return float(done.makespan)
