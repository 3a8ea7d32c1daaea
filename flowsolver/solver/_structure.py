"""The bottleneck structure of a max-min fair allocation, read back from its rates (host side).

Every flow runs at a *level* ``rate / weight``. A link is *saturated* when its load reaches
its capacity; its *top flows* are the flows on it at the largest level there (the
certificate of :mod:`._certificate` says each flow's reported bottleneck is such a link). A
flow's *constraints* are the saturated links where it is a top flow, plus its demand cap
when it runs at the cap. Within one bottleneck structure the rates are a linear function of
the capacities and caps; the structure changes (the derivative is one-sided) exactly where a
flow has two or more constraints: a *tie* (two links freezing it at the same level, or its
cap equal to a link's level).

:class:`Structure` holds these facts for one scenario; ``_sensitivity`` differentiates
through them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

#: two levels closer than this (relative) are a tie; float64 solves agree with progressive
#: filling to ~1e-12 (``_certificate.RTOL`` is 1e-9), so a looser value would hide real ties
TIE_RTOL = 1e-9


def _close(a, b, rtol=TIE_RTOL):
    return np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b))


@dataclass(frozen=True)
class Structure:
    """The bottleneck structure of one solved scenario (see the module docstring).

    Attributes
    ----------
    matrix : scipy.sparse.csc_matrix (links x flows)
    capacity : (links,) bytes/s; weights, demands, rates : (flows,)
    level : (flows,) ``rate / weight``
    bottleneck : (flows,) int, the solver's bottleneck link, -1 for a flow held by its cap
    saturated : (links,) bool, loaded to capacity and crossed by at least one flow
    top : (links,) the largest level of a flow on each link (-inf where none)
    capped : (flows,) bool, running at its demand cap
    n_constraints : (flows,) int, saturated links where the flow is a top flow, plus its cap
    tied_link : (links,) bool, saturated with a tied top flow
    one_sided_link : (links,) bool, a change of its capacity reaches a tie (the derivative
        depends on the sign of the change)
    one_sided_cap : (flows,) bool, likewise for a flow's demand cap
    """

    matrix: sp.csc_matrix
    capacity: np.ndarray
    weights: np.ndarray
    demands: np.ndarray
    rates: np.ndarray
    level: np.ndarray
    bottleneck: np.ndarray
    saturated: np.ndarray
    top: np.ndarray
    capped: np.ndarray
    n_constraints: np.ndarray
    tied_link: np.ndarray
    one_sided_link: np.ndarray
    one_sided_cap: np.ndarray
    coupling: sp.csr_matrix          # (links x links): M[l, m] = sum over flows bottlenecked at m of A[l, f] w_f

    @property
    def n_links(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_flows(self) -> int:
        return self.matrix.shape[1]

    @property
    def bottleneck_links(self) -> np.ndarray:
        """Links that are the bottleneck of at least one flow."""
        return np.flatnonzero(np.bincount(self.bottleneck[self.bottleneck >= 0], minlength=self.n_links) > 0)


def build(matrix: sp.csc_matrix, capacity, weights, demands, rates, bottleneck) -> Structure:
    """The :class:`Structure` of one scenario (host arrays, bytes/s)."""
    A = matrix
    L, N = A.shape
    cap, w, d, x = (np.asarray(a, dtype=np.float64) for a in (capacity, weights, demands, rates))
    b = np.asarray(bottleneck, dtype=np.int64)
    coo = A.tocoo()
    rows, cols, vals = coo.row, coo.col, coo.data
    level = x / w
    load = A @ x
    crossed = np.bincount(rows, minlength=L) > 0
    saturated = crossed & (load >= cap * (1 - TIE_RTOL))
    top = np.full(L, -np.inf)
    np.maximum.at(top, rows, level[cols])
    is_top = saturated[rows] & (level[cols] >= top[rows] * (1 - TIE_RTOL))     # levels <= top, >= 0
    capped = np.isfinite(d) & (x >= d * (1 - TIE_RTOL))
    n_con = np.bincount(cols[is_top], minlength=N) + capped
    tied_flow = n_con >= 2
    tied_link = np.bincount(rows[is_top & tied_flow[cols]], minlength=L) > 0
    tied_link |= saturated & ~(np.bincount(b[b >= 0], minlength=L) > 0)  # saturated, bottleneck of none
    in_k = np.bincount(b[b >= 0], minlength=L) > 0
    keep = (b[cols] >= 0) & in_k[rows]
    coupling = sp.csr_matrix((vals[keep] * w[cols[keep]], (rows[keep], b[cols[keep]])), shape=(L, L))
    one_sided = _spread_upstream(rows, cols, b, saturated, tied_link, L)
    crosses_one_sided = np.bincount(cols[one_sided[rows] & saturated[rows]], minlength=N) > 0
    one_sided_cap = capped & (tied_flow | crosses_one_sided)
    return Structure(A, cap, w, d, x, level, b, saturated, top, capped, n_con, tied_link, one_sided, one_sided_cap,
                     coupling)


def _spread_upstream(rows, cols, b, saturated, tied_link, L):
    """Links whose capacity change reaches a tied link: a link's bottlenecked flows cross
    the saturated links its change moves; repeated until nothing new is reached."""
    keep = (b[cols] >= 0) & saturated[rows] & (b[cols] != rows)
    reach = sp.csr_matrix((np.ones(int(keep.sum())), (b[cols[keep]], rows[keep])), shape=(L, L))
    reach.sum_duplicates()
    flagged = tied_link.copy()
    while True:
        new = flagged | ((reach @ flagged.astype(np.float64)) > 0)
        if (new == flagged).all():
            return flagged
        flagged = new


def batches(s: Structure) -> list[np.ndarray]:
    """The flows grouped by level (ascending), consecutive levels within ``TIE_RTOL`` together."""
    order = np.argsort(s.level, kind="stable")
    lv = s.level[order]
    if len(lv) == 0:
        return []
    cut = np.flatnonzero(~_close(lv[1:], lv[:-1])) + 1
    return np.split(order, cut)
