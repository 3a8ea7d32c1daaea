"""How far rounding can move a float64 (or float32) max-min fair solution, and what
:func:`~flowsolver.max_min_fair` does when it can move it too far.

Where rounding hurts. A link's fair share is ``(c - F) / W``: capacity minus the load of
the flows frozen on it earlier, over the unfrozen weight. When the flows still unfrozen
carry a tiny part of the link (their weight x fraction is tiny beside the frozen ones'),
``c - F`` cancels: one ulp of ``c`` is a large part of what is left, and their rates come
out wrong (``weights=[1e-8, 1e8, 1e-6]`` on two links of capacity 3: 0.66 % off). Where two
neighbouring links' shares agree to 17 digits but differ exactly, they freeze together
though one should freeze first, and a flow of tiny weight on the later one gets a share
computed before the other flows left it (``weights=[1e-9, 1e9, 2e-9]``: half its rate).

The bound. Every input is exact; a rate is off by what the residuals it was computed from
are off by. For a bottleneck link ``b`` with own load ``R_b`` (the load of the flows
frozen at ``b``), the residual's error is at most a few ulps of ``c_b`` plus the errors of
the loads frozen on it earlier, each a flow's load times the error factor of that flow's
own bottleneck. So, in freeze order,

    K_b = (c_b + sum over flows g on b frozen earlier of A[b, g] x_g K_{b(g)}) / R_b

bounds the relative error of ``b``'s level in units of the rounding unit (``K = 1`` for a
flow held by its cap: the cap is exact). A flow on ``b`` frozen at another link at level
``t`` is *contested* where ``b`` was full at ``t`` too, to within :data:`TIE`: with every flow
on ``b`` held at ``t``, ``V_b(t) = sum of min(x_f, t w_f)`` reaches ``c_b`` (less TIE x what the
flows at ``t`` and above carry). Either link could then have frozen it, and if float64 picked
the wrong one, ``b``'s own flows got a share computed with or without it; so is a flow of
``b``'s own that tops another saturated link. A flow frozen at a level where ``b`` still had
room is not: no rounding could have frozen it at ``b`` (its load's error is ``K``'s). What a
contested flow can cost the lightest of ``b``'s own is the contested load beside its own:
``C_b / m_b`` (``C_b`` the contested flows' load on ``b``, ``m_b`` the smallest load of a flow
frozen at ``b``); a flow frozen at ``b`` whose rate is also its cap ties its cap with ``b``
and counts as contested too. Two more terms read every saturated link ``a``, bottleneck of a
flow or not (a tie there can hide under a flow held by its cap): where a flow frozen elsewhere
at level ``t`` ties ``a``, the flow may have taken ``a``'s residual at ``t``, whose error factor
is ``(c_a + below) / (t x above)`` (``below`` the load of ``a``'s flows under ``t``, ``above``
the weight at ``t`` and over); and a flow on ``a`` above ``t`` carries what is left of ``a`` to
rounding, its load against the tied load as ``C / m``. A scenario is *well-conditioned* when
the largest of these, ``K_b (1 + C_b / m_b)`` and the saturated links' terms, stays below
:data:`LIMITS` for its dtype (1e6 for float64: every rate within ~1e-10 relative). (Until
2026-12-05 every flow on ``b`` that topped another link counted as contested, however early
it froze: log-normal weights on a fat-tree were refused though float64 had them to 1e-13.)

When the check runs. Cancellation needs weight x fraction products that differ on one
link, and it compounds along a chain of links each of whose residual cancels: each one can
multiply the error passed to it by up to the spread, so ``k`` such links in a row lose about
``spread^k`` ulps. The library's own routings (a RoutingMatrix routed over a graph, whose
``policy`` is not ``"matrix"``) with unit weights up to ECMP fractions of 1/512 do not chain
so (a 16,384-server rail fabric's reach 1/1024 and are checked): with their products within
:data:`SPREAD_TRUSTED` of each other the float64 methods are exact to ~1e-12 and nothing is
checked (no cost on the hot path; :func:`trusted`). A matrix given by hand (scipy, or
``RoutingMatrix.from_scipy``) is always checked: a chain of seven links with fractions 1/384
and 1 put its last flow 6 % off, of 1/999 at 4x its rate, with status ok (adv27; the check
costs ~2-3x a small problem's solve). The gate is the routing's provenance, not a proof: a
policy a user registers, or capacities a user passes with a library routing, that make such a
chain inside the spread are not checked (review27 M2; not seen on the library's fabrics).
Otherwise the bound is
computed from the solution without expanding the matrix (:func:`factored_error_factor`:
loads and largest levels per link from the segments, the links each flow tops by a sorted
search per segment; a saturated link that is no flow's bottleneck and carries one level only
adds at most its residual's factor ``c / (t W)`` (below ``1 + TIE`` where tied), taken from its
factored sums; only the other rows read, the bottleneck links' and saturated links' of several
levels, are expanded, in blocks; then one sparse product per distinct level).

What happens. An ill-conditioned scenario is re-solved in rational arithmetic
(:mod:`flowsolver.solver._exact`) when it has at most ``EXACT_PAIRS`` (link, flow) pairs,
and the result is exact (rounded once to the dtype). A larger one cannot be answered to
the contract: a single scenario raises ``ValueError`` (saying why and what to change), a
batch reports :attr:`~flowsolver.Status.ILL_CONDITIONED` for it.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np
from scipy.sparse import csr_matrix

from .._tolerance import RTOL
from ._ties import DENSE_KEYS
from ._ties import summed as _summed
from ._ties import summed_dense as _summed_dense
from ._ties import tied_pairs as _tied_pairs
from ._conditioning_links import one_level_ties as _one_level_ties
from ._conditioning_links import per_link as _per_link
from ._conditioning_links import tops as _tops

#: weight x fraction products within this factor of each other (over the whole problem) of
#: a routing the library built cannot lose more than ~1e-12 to cancellation in float64: no
#: check (:func:`trusted`)
SPREAD_TRUSTED = 1e3
#: the error factor K (1 + T) a scenario may reach, per dtype the kernel computes in:
#: float64 rounding unit 1.1e-16 x 1e6 x a few ulps of summation ~ 1e-9 (the contract);
#: float32 (dense kernel) 6e-8 x 1e3 ~ 1e-4 (the 1e-5 .. 1e-3 the docs promise)
LIMITS = {np.dtype("float64"): 1e6, np.dtype("float32"): 1e3}
#: levels (and loads against capacities) within this relative distance count as tied
#: (saturated): well above float64's errors where the bound holds (1e6 x 1.1e-16)
TIE = RTOL      # a tie of levels: the project's one tolerance (flowsolver._tolerance)


def spread(rm, weights: np.ndarray) -> float:
    """An upper bound on ``max / min`` of ``A[l, f] * w_f`` over the (link, flow) pairs of
    one link, from the factored matrix alone: the largest fraction x coefficient x weight
    over the smallest (all scenarios' weights together).

    >>> import scipy.sparse as sp
    >>> from flowsolver import RoutingMatrix
    >>> rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 0.5], [0.0, 0.25]]))
    >>> spread(rm, np.array([1.0, 2.0]))
    8.0
    """
    frac_hi, frac_lo = _fraction_range(rm)
    w = np.asarray(weights, dtype=np.float64)
    return float(frac_hi * w.max(initial=1.0) / (frac_lo * w.min(initial=1.0)))


def trusted(rm, weights: np.ndarray) -> bool:
    """Whether a solve of ``rm`` with ``weights`` skips the check: a routing the library built
    over a graph (its ``policy`` is not ``"matrix"``, the policy of a matrix given by hand, nor
    a stack holding one: ``"ecmp+matrix"``) whose products stay within :data:`SPREAD_TRUSTED`
    (:func:`spread`).

    >>> import scipy.sparse as sp
    >>> from flowsolver import RoutingMatrix
    >>> trusted(RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 1.0]])), np.ones(2))
    False
    """
    return "matrix" not in str(rm.policy).split("+") and spread(rm, weights) <= SPREAD_TRUSTED


#: per RoutingMatrix (immutable; held weakly), its largest and smallest fraction x coefficient
_FRACTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _fraction_range(rm) -> tuple[float, float]:
    """The largest and smallest fraction x coefficient of ``rm``'s entries (1 where it has
    none), worked out once per matrix: a pass over its entries and slots (~15 ms a call on a
    1 M-flow all-to-all, every solve paid it)."""
    if (known := _FRACTIONS.get(rm)) is not None:
        return known
    frac = rm.seg_frac[rm.seg_frac > 0]
    if rm.flow_coef is not None:
        coef = rm.flow_coef[(rm.flow_seg >= 0) & (rm.flow_coef > 0)]
        known = (float(frac.max(initial=1.0) * coef.max(initial=1.0)),
                 float(frac.min(initial=1.0) * coef.min(initial=1.0)))
    else:
        known = (float(frac.max(initial=1.0)), float(frac.min(initial=1.0)))
    _FRACTIONS[rm] = known
    return known


def error_factor(A_csr, capacity, weights, rates, bottleneck, demands=None) -> float:
    """The largest ``K_b (1 + C_b / m_b)`` over the bottleneck links of one solved scenario (see
    the module docstring; ``inf`` where a bottleneck's own flows got nothing from a link of
    positive capacity). ``A_csr`` is the expanded matrix (links x flows, scipy CSR): the
    reference for :func:`factored_error_factor`, which gives the same figure without it.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    >>> # link 1: K = 3 / 1.5 (its own flow 2 carries half); flow 1 also tops saturated link 0: C / m = 1
    >>> float(error_factor(A, np.array([3.0, 3.0]), np.ones(3), np.array([1.5, 1.5, 1.5]), np.array([0, 0, 1])))
    4.0
    >>> error_factor(A, np.array([3.0, 3.0]), np.array([1e-8, 1e8, 1e-6]),
    ...              np.array([3e-14, 3.0, 3e-14]), np.array([0, 1, 1])) > 1e13
    True
    """
    L = A_csr.shape[0]
    x = np.asarray(rates, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = x / np.asarray(weights, dtype=np.float64)
    rows = np.repeat(np.arange(L), np.diff(A_csr.indptr))
    cols = A_csr.indices
    link_load = np.bincount(rows, weights=A_csr.data * x[cols], minlength=L)
    top = np.full(L, -np.inf)
    np.maximum.at(top, rows, level[cols])
    is_max = _is_max(link_load[rows], cap[rows], top[rows], level[cols])
    tops = np.bincount(cols[is_max], minlength=len(x)) + _at_cap(x, demands, bottleneck)
    return _bound([A_csr], cap, _per_flow(weights, x), level, x, bottleneck, link_load, top, tops)


def _per_flow(values, x) -> np.ndarray:
    """``values`` (weights, caps: one or one per flow) as a float64 array of ``x``'s shape."""
    return np.broadcast_to(np.asarray(values, dtype=np.float64), x.shape)


def _at_cap(x, demands, bottleneck) -> np.ndarray:
    """1 for a flow frozen at a link whose rate is also its cap to within :data:`TIE` (its cap
    ties the link: either could have held it, and the link's other flows get a residual with or
    without its load), else 0 (``demands`` None: no caps)."""
    if demands is None:
        return np.zeros(len(x), dtype=np.int64)
    d = _per_flow(demands, x)
    return (np.isfinite(d) & (x >= d * (1 - TIE)) & (np.asarray(bottleneck) >= 0)).astype(np.int64)


def _is_max(load, cap, top, level):
    """Whether a flow at ``level`` is among the largest levels (``top``, within :data:`TIE`)
    of a saturated link (``load`` against ``cap``); flows at level 0 are exact (a zero-capacity
    link's share is max(0 - F, 0) / W = 0)."""
    return (load >= cap * (1 - TIE)) & (level >= top * (1 - TIE)) & (level > 0)


def _bound(parts, cap, weights, level, x, bottleneck, link_load, top, tops, floor=1.0) -> float:
    """:func:`error_factor` from ``parts``, column blocks (``(csr, first column)`` pairs, or a
    single CSR matrix for all columns) holding at least every entry on the rows
    :func:`_examined` marks, the per-link loads and largest levels, and ``tops``, per flow the
    number of saturated links where it is among the largest levels (the contested test needs
    only whether it is 0, 1 or more). Three passes over the blocks: own flows and each link's
    loads by level; the loads of earlier, contested and tied flows; the flows above a tie.
    ``floor``: a figure for the examined rows the blocks leave out (:func:`_one_level_ties`)."""
    b = np.asarray(bottleneck, dtype=np.int64)
    L = len(cap)
    links = np.unique(b[b >= 0])
    is_r = _examined(b, link_load, cap)
    if not is_r.any():
        return 1.0
    blocks = [(p, 0) if not isinstance(p, tuple) else p for p in parts]

    def entries(A, lo):
        rows = np.repeat(np.arange(L), np.diff(A.indptr))
        cols = A.indices.astype(np.int64) + lo
        return rows, cols, A.data * x[cols]

    is_b = np.zeros(L, dtype=bool)
    is_b[links] = True
    rank = np.unique(level, return_inverse=True)[1].astype(np.int64).reshape(-1)
    G = int(rank.max(initial=-1)) + 1
    R, m, t_link = np.zeros(L), np.full(L, np.inf), np.full(L, np.inf)
    pairs = []                            # per (bottleneck row, level): the load and weight there
    dense = L * G <= DENSE_KEYS            # key space small enough for a table (a few levels)
    sat_row = link_load >= cap * (1 - TIE)  # _is_max's per-link parts, once per link
    thr_row = top * (1 - TIE)
    for A, lo in blocks:                  # own flows: their load, smallest load and level per link
        rows, cols, load = entries(A, lo)
        own = b[cols] == rows
        R += np.bincount(rows[own], weights=load[own], minlength=L)
        np.minimum.at(t_link, rows[own], level[cols[own]])
        np.minimum.at(m, rows[own], load[own])
        on = is_r[rows]
        if on.all():                     # the factored blocks hold examined rows only: no copies
            keys, lo_on, w_on = rows * G + rank[cols], load, A.data * weights[cols]
        else:
            keys, lo_on, w_on = rows[on] * G + rank[cols[on]], load[on], A.data[on] * weights[cols[on]]
        pairs.append(_summed_dense(keys, L * G, lo_on, w_on) if dense else _summed(keys, lo_on, w_on))
    tied, tie_k = _tied_pairs(pairs, G, cap, level, rank)
    if dense:                            # each key's index in tied, -1 where absent: a table
        where = np.full(L * G, -1, dtype=np.int64)
        where[tied] = np.arange(len(tied))
    worst_tie = max(1.0, floor)         # a flow frozen elsewhere, tied here: this link's residual
    # on any saturated link: the lowest level a flow frozen elsewhere ties it at, their load there
    t_tie, C_tie = np.full(L, np.inf), np.zeros(L)
    C, base = np.zeros(L), cap.copy()
    M = csr_matrix((L, L))
    for A, lo in blocks:
        rows, cols, load = entries(A, lo)
        on_b = is_b[rows] & (b[cols] != rows)
        earlier = on_b & (level[cols] < t_link[rows] * (1 - TIE))
        # contested flows: frozen at another link while this one was full to within TIE at their
        # level (either link could have frozen them), or own flows topping another saturated link
        own = b[cols] == rows
        at = where[rows * G + rank[cols]] if dense else _found(tied, rows * G + rank[cols])
        at_tie = is_r[rows] & ~own & (level[cols] > 0) & (at >= 0)
        if at_tie.any():                # the float may have frozen it here, by this residual
            worst_tie = max(worst_tie, float(np.max(tie_k[at[at_tie]])))
        r_t = rows[at_tie]               # rows ascending (CSR): a min per run of equal rows
        if len(r_t):
            first = np.flatnonzero(np.r_[True, r_t[1:] != r_t[:-1]])
            u = r_t[first]
            t_tie[u] = np.minimum(t_tie[u], np.minimum.reduceat(level[cols[at_tie]], first))
        C_tie += np.bincount(rows[at_tie], weights=load[at_tie], minlength=L)
        contested = is_b[rows] & at_tie
        oi = np.flatnonzero(own)
        r_o, c_o = rows[oi], cols[oi]
        is_max = sat_row[r_o] & (level[c_o] >= thr_row[r_o]) & (level[c_o] > 0)
        contested[oi] |= tops[c_o] - is_max > 0
        C += np.bincount(rows[contested], weights=load[contested], minlength=L)
        # flows held by their caps carry a factor 1 (one rounding of d / w x w)
        capped = earlier & (b[cols] < 0)
        base += np.bincount(rows[capped], weights=load[capped], minlength=L)
        chain = earlier & (b[cols] >= 0)
        # entries (row b, earlier flow's bottleneck b(g)) with weight A x: one product per level
        M = M + csr_matrix((load[chain], (rows[chain], b[cols[chain]])), shape=(L, L))
    # a flow above such a tie on a saturated link (capped, or frozen at a link of its own later)
    # carries what is left of the link once the tied load is in, to rounding: its rate is the
    # cancelled residual (a capped flow reported at its cap, 3e-5 off, on no bottleneck row)
    m_tie = np.full(L, np.inf)
    for A, lo in blocks:
        rows, cols, load = entries(A, lo)
        above = np.isfinite(t_tie[rows]) & (level[cols] > t_tie[rows] * (1 + TIE))
        np.minimum.at(m_tie, rows[above], load[above])
    with np.errstate(invalid="ignore", divide="ignore"):
        tie_rel = np.where(m_tie > 0, C_tie / m_tie, np.where(np.isfinite(m_tie), np.inf, 0.0))
    tie_factor = max(1 + float(np.max(tie_rel, initial=0.0)), worst_tie)
    if not len(links):
        return tie_factor
    K = np.ones(L)
    order = links[np.argsort(t_link[links], kind="stable")]
    levels = t_link[order]
    starts = np.flatnonzero(np.r_[True, levels[1:] != levels[:-1]])   # a group: one exact level
    M = M.tocsr()
    for lo, hi in zip(starts, np.r_[starts[1:], len(order)]):
        group = order[lo:hi]
        num = base[group] + M[group] @ K
        with np.errstate(divide="ignore", invalid="ignore"):
            K[group] = np.where(R[group] > 0, num / R[group], np.where(cap[group] > 0, np.inf, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        C_rel = np.where(m[links] > 0, C[links] / m[links], np.where(C[links] > 0, np.inf, 0.0))
    return max(float(np.max(K[links] * (1 + C_rel))), tie_factor)


def _found(sorted_keys, keys) -> np.ndarray:
    """Each of ``keys``' index in ``sorted_keys`` (distinct, ascending), -1 where absent.

    >>> _found(np.array([2, 5, 9]), np.array([5, 3, 9, 10])).tolist()
    [1, -1, 2, -1]
    """
    at = np.searchsorted(sorted_keys, keys)
    ok = at < len(sorted_keys)
    ok[ok] = sorted_keys[at[ok]] == keys[ok]
    return np.where(ok, at, -1)


def _examined(b, link_load, cap) -> np.ndarray:
    """The links the bound reads: the bottleneck links and every saturated link (where a tie
    can hide under a flow held by its cap)."""
    rows = (link_load >= cap * (1 - TIE)) & (cap > 0)
    rows[b[b >= 0]] = True
    return rows


#: expanded entries (link, flow) per block of :func:`factored_error_factor`'s bottleneck rows
BLOCK_ENTRIES = 1 << 23


def factored_error_factor(rm, capacity, weights, rates, bottleneck, demands=None) -> float:
    """:func:`error_factor` of the routing matrix ``rm`` (a RoutingMatrix) without expanding
    it: per-link loads and largest levels from its segments; per flow, how many saturated
    links it tops, from the two smallest thresholds of each segment; the saturated links that
    are no flow's bottleneck and carry flows of one level only from their factored sums
    (:func:`_one_level_ties`); and only the other examined rows (the bottleneck links, and
    saturated links of several levels) expanded, in blocks of at most :data:`BLOCK_ENTRIES`
    entries of the examined rows. The same figure as :func:`error_factor` on ``rm.to_scipy()``
    (up to the order of floating-point sums), or no smaller where a one-level link's term
    decides it (above by at most ~4 n x 2^-53 relative, ``n`` the roundings of its sums).

    >>> from flowsolver import RoutingMatrix
    >>> rm = RoutingMatrix.from_scipy(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    >>> x, b = np.array([1.5, 1.5, 1.5]), np.array([0, 0, 1])
    >>> float(factored_error_factor(rm, np.array([3.0, 3.0]), np.ones(3), x, b))
    4.0
    """
    x = np.asarray(rates, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    b = np.asarray(bottleneck, dtype=np.int64)
    w = _per_flow(weights, x)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = x / w
    link_load = rm.link_loads(x)
    top = _per_link(rm, level, np.maximum, -np.inf)      # largest level per link (explicit zeros too)
    saturated_top = np.where(link_load >= cap * (1 - TIE), top * (1 - TIE), np.inf)
    tops = _tops(rm, level, saturated_top) + _at_cap(x, demands, b)
    examined = _examined(b, link_load, cap)
    expand = examined.copy()
    one, floor = _one_level_ties(rm, cap, w, b, examined, top, _per_link(rm, level, np.minimum, np.inf))
    expand[one] = False
    blocks = list(_bottleneck_blocks(rm, examined, expand))
    return _bound(blocks, cap, w, level, x, b, link_load, top, tops, floor)


def _bottleneck_blocks(rm, rows, expand=None):
    """``(csr, first column)`` blocks of ``rm``'s expanded matrix restricted to the links in
    the mask ``rows`` (duplicates summed), at most :data:`BLOCK_ENTRIES` entries each; with
    ``expand`` (a subset of ``rows``), the same blocks (the same flows each: a row's sums per
    block, and so the bound's, are those of ``rows``' blocks) holding ``expand``'s rows only."""
    lengths = np.bincount(rm.entry_segment[rows[rm.seg_link]], minlength=rm.n_segments)
    keep = (rows if expand is None else expand)[rm.seg_link]
    sub = replace(rm, seg_ptr=np.concatenate([[0], np.cumsum(np.bincount(rm.entry_segment[keep],
                                                                         minlength=rm.n_segments))]),
                  seg_link=rm.seg_link[keep], seg_frac=rm.seg_frac[keep])
    per_flow = np.zeros(rm.n_flows, dtype=np.int64)
    for k in range(rm.slots):
        segs = rm.flow_seg[:, k]
        per_flow += np.where(segs >= 0, lengths[np.maximum(segs, 0)], 0)
    ends = np.cumsum(per_flow)
    lo = 0
    while lo < rm.n_flows:
        hi = max(int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + BLOCK_ENTRIES, side="right")), lo + 1)
        part = replace(sub, flow_seg=sub.flow_seg[lo:hi],
                       flow_coef=None if sub.flow_coef is None else sub.flow_coef[lo:hi])
        yield part.to_scipy("csr"), lo
        lo = hi
