"""float32 dense solves held to float32's promise (1e-5 .. 1e-3 relative of float64): where a
link's residual ``c - F`` cancels, the scenario is re-solved in float64 and rounded.

Where float32 loses. The dense kernel in float32 computes a link's fair share as ``(c - F) /
W``, with ``c`` rounded to float32 and ``F``, the load of the flows frozen on the link
earlier, a float32 sum of up to ``n`` terms: its error is some ``sqrt(n)`` roundings of ``c``
(a random walk; ``n`` in the worst case), against what is left, the load ``R`` of the link's
own flows. Many flows frozen elsewhere that share one link with a later flow make ``c / R``
large whatever the weights: 100,000 unit-weight flows each held by its own link, all
crossing a link that leaves 2.5e6 bytes/s to one more flow, gave that flow 2.69e6 (7.5 %
off, the link 1.2e-6 over its capacity, status ok; adv18c, 2026-12-07). The spread test of
:mod:`~flowsolver.solver._conditioning` does not see it (unit weights), and its bound takes
one sparse product per distinct level (51 s on that problem).

The estimate. From the float32 solution, per bottleneck link ``b``: ``u c_b sqrt(n_b) / R_b``
(``u = 2**-24``, float32's rounding unit; ``n_b`` the flows on ``b``; ``R_b`` the load of the
flows whose bottleneck ``b`` is), the largest over the scenario's links. It needs each
flow's entry on its bottleneck link (a pass over the expanded matrix), so it is screened
first by an upper bound from per-flow and per-link figures alone: ``R_b >= t_b m_b a w``
(``t_b`` the level of ``b``'s flows, ``m_b`` their number, ``a w`` the smallest fraction x
coefficient x weight of the problem): the estimate itself where fractions and weights are 1
(fat_tree(8)'s ecmp_hash all-to-all and a 128-scenario failure batch of a ring all-reduce
clear it without expanding anything). Measured against float64
(2026-12-07): fat_tree(8) all-to-all with ecmp_hash, estimate 5.8e-5, error 7.0e-5; fat_tree(12)'s,
3.8e-4 and 2.0e-4; the
construction above at 1,000 / 10,000 / 100,000 flows, estimates 1.1e-3 / 3.6e-2 / 1.1,
errors 1.9e-4 / 1.2e-2 / 7.5e-2. Chains (a link's cancelled share feeding another's
residual) are not in it: it is an estimate, not a bound.

What happens (``_settle.settle``, for every float32 dense solve, whatever the weights'
spread). A scenario whose estimate exceeds :data:`LIMIT` is re-solved with the dense
method in float64 (then checked as any float64 solve is) and its results rounded to float32;
the others keep the float32 kernel's results (checked against float64 in
``tests/solver/test_float32_cancellation.py``).
"""

from __future__ import annotations

import weakref

import numpy as np

#: float32's rounding unit
U32 = 2.0 ** -24
#: the estimated relative error (see above) above which a float32 dense scenario is re-solved
#: in float64: the 1e-3 the docs promise at worst for float32. Measured (2026-12-07): the
#: estimate ran 0.83x the error on fat_tree(8)'s all-to-all (5.8e-5 / 7.0e-5), 1.9x on
#: fat_tree(12)'s (3.8e-4 / 2.0e-4: kept, 0.65 s as on main's 0.71; at a limit of 1e-4 it was re-solved: 1.48 s),
#: 5-15x on the cancelling construction
LIMIT = 1e-3

#: per RoutingMatrix (held weakly): the number of flows on each link
_COUNTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _flows_per_link(rm) -> np.ndarray:
    """The number of flows crossing each link (a flow crossing a link twice counts twice)."""
    if (known := _COUNTS.get(rm)) is None:
        per_seg = np.zeros(rm.n_segments)
        for k in range(rm.slots):
            segs = rm.flow_seg[:, k]
            per_seg += np.bincount(segs[segs >= 0], minlength=rm.n_segments)
        known = _COUNTS[rm] = np.bincount(rm.seg_link, weights=per_seg[rm.entry_segment], minlength=rm.n_links)
    return known


def estimates(rm, capacity, weights, rates, bottleneck, converged, frac_lo=None) -> np.ndarray:
    """Per scenario, the estimated relative error of float32 dense rates from cancelling
    residuals (see the module docstring); 0 where it clears the screen below :data:`LIMIT`
    (the screen's bound is then returned instead) and for a scenario that did not converge
    (it reports NOT_CONVERGED). ``capacity`` (links,) or (B, links), ``weights`` (flows,) or
    (B, flows), ``rates`` and ``bottleneck`` (B, flows), ``converged`` (B,); ``frac_lo`` the
    smallest fraction x coefficient of ``rm`` (worked out when not given).

    >>> import scipy.sparse as sp
    >>> from flowsolver import RoutingMatrix
    >>> rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 1.0]]))       # one link, two flows
    >>> e = estimates(rm, np.array([2.0]), np.ones(2), np.array([[1.0, 1.0]]), np.array([[0, 0]]), np.array([True]))
    >>> bool(abs(e[0] - 2 ** 0.5 * 2.0 ** -24) < 1e-20)     # c / R = 1, n = 2: sqrt(2) u
    True
    """
    L, N = rm.n_links, rm.n_flows
    x = np.asarray(rates, dtype=np.float64)
    b = np.asarray(bottleneck).astype(np.int64)
    B = x.shape[0]
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), (B, N))
    cap = np.broadcast_to(np.asarray(capacity, dtype=np.float64), (B, L))
    root_n = np.sqrt(_flows_per_link(rm))
    if frac_lo is None:
        frac = rm.seg_frac[rm.seg_frac > 0]
        coef = 1.0 if rm.flow_coef is None else rm.flow_coef[(rm.flow_seg >= 0) & (rm.flow_coef > 0)].min(initial=1.0)
        frac_lo = float(frac.min(initial=1.0) * coef)
    least = frac_lo * w.min(axis=1, initial=np.inf)
    # the screen, over the flows frozen at a link (a link's own flows share its level t_b):
    # u c_b sqrt(n_b) / (t_b m_b a w) with R_b >= t_b m_b a w
    s_of, f_of = np.nonzero(b >= 0)                     # scenario-major: s_of ascending
    link = b[s_of, f_of]
    flat = link + s_of * L
    count = np.bincount(flat, minlength=B * L)          # each link's own flows
    c = cap[s_of, link]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        val = U32 * c * root_n[link] * w[s_of, f_of] / (x[s_of, f_of] * least[s_of] * count[flat])
    val = np.where((c > 0) & np.isfinite(c), val, 0.0)
    out = np.zeros(B)
    if len(s_of):
        starts = np.flatnonzero(np.r_[True, s_of[1:] != s_of[:-1]])
        out[s_of[starts]] = np.maximum.reduceat(val, starts)
    out[~np.asarray(converged, dtype=bool).reshape(-1)] = 0.0
    look = np.flatnonzero(out > LIMIT)
    if not len(look):
        return out
    A = rm.to_scipy("csc")                      # columns: each flow's entries (duplicates summed)
    rows = A.indices.astype(np.int64)
    cols = np.repeat(np.arange(N), np.diff(A.indptr))
    for i in look:                             # the estimate itself, from each flow's own entry
        own = b[i, cols] == rows
        R = np.bincount(rows[own], weights=A.data[own] * x[i, cols[own]], minlength=L)
        live = np.zeros(L, dtype=bool)
        live[b[i][b[i] >= 0]] = True
        live &= (cap[i] > 0) & np.isfinite(cap[i])
        with np.errstate(divide="ignore", invalid="ignore"):
            e = np.where(live, U32 * cap[i] * root_n / R, 0.0)   # R = 0 under c > 0: inf
        out[i] = float(e.max(initial=0.0))
    return out
