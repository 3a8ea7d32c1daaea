"""The conditioning check's per-link figures from a RoutingMatrix's segments, without expanding
it (:func:`flowsolver.solver._conditioning.factored_error_factor`): the largest and smallest
level on each link, how many saturated links each flow tops, and the saturated links of one
level only, whose rows the bound need not read."""

from __future__ import annotations

import numpy as np

from .._tolerance import RTOL as TIE      # the conditioning check's tie (its TIE)


def per_link(rm, level, ufunc, empty) -> np.ndarray:
    """``ufunc`` (np.maximum, np.minimum) of the levels of the flows on each link (entries of
    coefficient or fraction 0 too), ``empty`` where none."""
    seg = np.full(rm.n_segments, empty)
    for k in range(rm.slots):
        segs = rm.flow_seg[:, k]
        ok = segs >= 0
        ufunc.at(seg, segs[ok], level[ok])
    out = np.full(rm.n_links, empty)
    ufunc.at(out, rm.seg_link, seg[rm.entry_segment])
    return out


def one_level_ties(rm, cap, weights, b, examined, top, bottom) -> tuple:
    """The examined links the bound (:func:`~flowsolver.solver._conditioning._bound`) need not
    read, as a mask, and a figure no smaller than what their rows would add to it. Such a link
    ``a`` is saturated, no flow's bottleneck, and carries flows of one level ``t`` (finite) only;
    on it the bound reads one (link, level) pair: the load below ``t`` is 0 and the weight at
    ``t`` and above is ``W = sum of A[a, f] w_f``. If the pair is tied, ``c_a - t W <= TIE t W +
    16 eps (c_a + t W)``, each flow there (all frozen elsewhere) adds the residual's factor
    ``c_a / (t W)`` (at most ``(1 + TIE) / (1 - 16 eps)``: a tied link's residual is all of it)
    and nothing else (no flow above the tie, no own flow, none earlier); untied, or at ``t = 0``,
    nothing. ``W`` is summed here from the segments, in another order than the expanded row:
    with every term >= 0 and at most ``n`` roundings on any term's way (``n`` = 2 x flows +
    slots + segment entries + 4, either way), each sum is within ``g = n u / (1 - n u)`` of the
    exact one, so ``W`` is taken ``4 g`` high in the tie test (a tie the row shows is never
    missed) and ``4 g`` low in the factor (never below the row's). At 131,072 GPUs: 491,520 of
    the pipeline call's 614,400 examined rows, 255.7 M of its 255.8 M entries."""
    L = rm.n_links
    n = 2 * rm.n_flows + rm.slots + len(rm.seg_link) + 4
    g = n * 2.0 ** -53 / (1 - n * 2.0 ** -53)
    signed = rm.seg_frac.min(initial=0.0) < 0 or (rm.flow_coef is not None and rm.flow_coef.min(initial=0.0) < 0)
    if signed or not 4 * g < 1e-3 or not np.all(np.asarray(weights) >= 0):
        return np.zeros(L, dtype=bool), 1.0
    is_b = np.zeros(L, dtype=bool)
    is_b[b[b >= 0]] = True
    one = examined & ~is_b & (top == bottom) & np.isfinite(top) & (top >= 0)
    if not one.any():
        return one, 1.0
    W = rm.link_loads(weights)[one]
    t, c = top[one], cap[one]
    hi, lo = W * (1 + 4 * g), W * (1 - 4 * g)
    tied = (c - t * hi <= TIE * t * hi + 16 * np.finfo(np.float64).eps * (c + t * hi)) & (t > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(t * lo > 0, c / (t * lo), np.inf)
    return one, float(np.max(factor[tied], initial=1.0))


def tops(rm, level, threshold) -> np.ndarray:
    """Per flow: the number of distinct links where its level (if positive) reaches
    ``threshold``, exactly when it is 0 or 1, else 2 (2 or more). Per segment, the smallest
    threshold, its link, and the smallest threshold of the segment's other links say, for any
    level, whether it tops none, one (which) or more of the segment's links."""
    S = rm.n_segments
    thr = threshold[rm.seg_link]
    lengths = np.diff(rm.seg_ptr)
    starts = rm.seg_ptr[:-1][lengths > 0]

    def smallest(values):
        out = np.full(S, np.inf)
        if len(starts):
            out[lengths > 0] = np.minimum.reduceat(values, starts)
        return out

    low = smallest(thr)
    at = np.flatnonzero(thr == low[rm.entry_segment])[::-1]       # the first one wins (written last)
    low_link = np.full(S + 1, -1, dtype=np.int64)                 # slot -1 reads the extra -1
    low_link[rm.entry_segment[at]] = rm.seg_link[at]
    second = np.r_[smallest(np.where(rm.seg_link == low_link[rm.entry_segment], np.inf, thr)), np.inf]
    low = np.r_[low, np.inf]
    positive = level > 0
    many = np.zeros(len(level), dtype=bool)
    one = np.full(rm.flow_seg.shape, -1, dtype=np.int64)
    for k in range(rm.slots):
        segs = rm.flow_seg[:, k]            # -1 (no segment) reads the extra entries: inf, -1
        many |= positive & (second[segs] <= level)
        one[:, k] = np.where(positive & (low[segs] <= level), low_link[segs], -1)
    one.sort(axis=1)
    distinct = ((one >= 0) & np.c_[np.ones(len(one), dtype=bool), one[:, 1:] != one[:, :-1]]).sum(axis=1)
    return np.where(many, 2, distinct)
