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

import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ._certificate import _segment_max

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
    routing : RoutingMatrix; ``matrix`` its expansion (scipy.sparse csc, links x flows, lazy)
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

    routing: object                  # the RoutingMatrix
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

    @cached_property
    def matrix(self) -> sp.csc_matrix:
        """The routing matrix expanded (links x flows), built on first use."""
        return self.routing.to_scipy("csc")

    @property
    def n_links(self) -> int:
        return self.routing.n_links

    @property
    def n_flows(self) -> int:
        return self.routing.n_flows

    @property
    def bottleneck_links(self) -> np.ndarray:
        """Links that are the bottleneck of at least one flow."""
        return np.flatnonzero(np.bincount(self.bottleneck[self.bottleneck >= 0], minlength=self.n_links) > 0)


_CROSSED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _crossed(rm, slot_ok) -> np.ndarray:
    """Links some flow puts a share on (structure only: kept per RoutingMatrix, immutable)."""
    if (known := _CROSSED.get(rm)) is not None:
        return known
    used_seg = np.zeros(rm.n_segments, dtype=bool)
    used_seg[rm.flow_seg[slot_ok]] = True
    crossed = np.zeros(rm.n_links, dtype=bool)
    crossed[rm.seg_link[(rm.seg_frac > 0) & used_seg[rm.entry_segment]]] = True
    _CROSSED[rm] = crossed
    return crossed


def build(rm, capacity, weights, demands, rates, bottleneck, load=None) -> Structure:
    """The :class:`Structure` of one scenario (host arrays, bytes/s) on RoutingMatrix ``rm``,
    read from its factored form (segments shared by flows) without expanding the matrix.
    ``load``: the rates' link loads when the caller has them in float64 (the solver's)."""
    L = rm.n_links
    cap, w, d, x = (np.asarray(a, dtype=np.float64) for a in (capacity, weights, demands, rates))
    b = np.asarray(bottleneck, dtype=np.int64)
    level = x / w
    seg_link, live = rm.seg_link, rm.seg_frac > 0
    slot_ok = (rm.flow_seg >= 0) if rm.flow_coef is None else (rm.flow_seg >= 0) & (rm.flow_coef > 0)
    load = rm.link_loads(x) if load is None else np.asarray(load, dtype=np.float64)
    saturated = _crossed(rm, slot_ok) & (load >= cap * (1 - TIE_RTOL))
    top = _segment_max(rm, level)
    # per segment: the lowest top level of its saturated links, and how many links share it
    t_entry = np.where(live & saturated[seg_link], top[seg_link], np.inf)
    seg_min = _segment_reduce(np.minimum, t_entry, rm.seg_ptr, np.inf)
    at_min = np.isfinite(t_entry) & (t_entry <= seg_min[rm.entry_segment] * (1 + TIE_RTOL))
    seg_count = np.bincount(rm.entry_segment[at_min], minlength=rm.n_segments)
    # per (flow, slot): its segment, -1 where unused (or of coefficient 0), so that arrays
    # over segments with one extra last entry read a neutral value there
    slot_seg = rm.flow_seg if rm.flow_coef is None else np.where(slot_ok, rm.flow_seg, -1)
    slot_min = np.append(seg_min, np.inf)[slot_seg]
    flow_min = slot_min.min(axis=1)
    slot_hit = np.isfinite(slot_min) & (slot_min <= flow_min[:, None] * (1 + TIE_RTOL))
    is_top = np.isfinite(flow_min) & (level >= flow_min * (1 - TIE_RTOL))
    capped = np.isfinite(d) & (x >= d * (1 - TIE_RTOL))
    n_con = np.where(is_top, np.where(slot_hit, np.append(seg_count, 0)[slot_seg], 0).sum(axis=1), 0) + capped
    tied_seg = np.zeros(rm.n_segments, dtype=bool)
    tied_seg[slot_seg[slot_hit & (is_top & (n_con >= 2))[:, None]]] = True
    tied_link = np.zeros(L, dtype=bool)
    tied_link[seg_link[at_min & tied_seg[rm.entry_segment]]] = True
    in_k = np.bincount(b[b >= 0], minlength=L) > 0
    tied_link |= saturated & ~in_k                       # saturated, bottleneck of none
    by_link = _segment_by_bottleneck(rm, slot_ok, b, w)  # (segments x links): sum of coef w per bottleneck
    incidence = sp.csr_matrix((np.where(live, rm.seg_frac, 0.0), (rm.entry_segment, seg_link)),
                              shape=(rm.n_segments, L))
    if in_k.any():                                       # rows: the links that hold flows
        rows = np.flatnonzero(in_k)
        coupling = _rows_to(incidence[:, rows].T @ by_link, rows, L)
    else:
        coupling = sp.csr_matrix((L, L))
    sat_idx = np.flatnonzero(saturated)
    on = live & saturated[seg_link]                      # (segments x saturated links) pattern
    sat_col = np.cumsum(saturated) - 1
    on_sat = sp.csr_matrix((np.ones(int(on.sum())), (rm.entry_segment[on], sat_col[seg_link[on]])),
                           shape=(rm.n_segments, len(sat_idx)))
    on_sat.data[:] = 1.0                                 # a link listed twice in a segment counts once
    reach = (by_link.T @ on_sat).tocoo()
    off = reach.row != sat_idx[reach.col]
    reach = sp.csr_matrix((np.ones(int(off.sum())), (reach.row[off], sat_idx[reach.col[off]])), shape=(L, L))
    one_sided = _spread_upstream(reach, tied_link)
    seg_one_sided = np.zeros(rm.n_segments, dtype=bool)
    seg_one_sided[rm.entry_segment[live & one_sided[seg_link] & saturated[seg_link]]] = True
    crosses_one_sided = np.append(seg_one_sided, False)[slot_seg].any(axis=1)
    one_sided_cap = capped & ((n_con >= 2) | crosses_one_sided)
    return Structure(rm, cap, w, d, x, level, b, saturated, top, capped, n_con, tied_link, one_sided, one_sided_cap,
                     coupling)


def _rows_to(m, rows, L):
    """``m`` (len(rows) x L) as an L x L matrix with its rows at ``rows``."""
    coo = m.tocoo()
    return sp.csr_matrix((coo.data, (rows[coo.row], coo.col)), shape=(L, L))


def _segment_reduce(ufunc, values, ptr, empty):
    """Per-segment ``ufunc.reduce`` of ``values`` (CSR layout ``ptr``); ``empty`` where none."""
    out = np.full(len(ptr) - 1, empty, dtype=np.float64)
    nonempty = np.flatnonzero(np.diff(ptr) > 0)
    if len(nonempty):
        out[nonempty] = ufunc.reduceat(values, ptr[nonempty])
    return out


def _segment_by_bottleneck(rm, slot_ok, b, w) -> sp.csr_matrix:
    """(segments x links): for each segment and bottleneck link m, the sum over the flows held
    at m of their weight times the segment's coefficient in them."""
    held = slot_ok & (b >= 0)[:, None]
    f, k = np.nonzero(held)
    coef = 1.0 if rm.flow_coef is None else rm.flow_coef[f, k]
    # (the conversion from coordinates sums duplicate entries)
    return sp.csr_matrix((w[f] * coef, (rm.flow_seg[f, k], b[f])), shape=(rm.n_segments, rm.n_links))


def _spread_upstream(reach, tied_link):
    """Links whose capacity change reaches a tied link: a link's bottlenecked flows cross
    the saturated links its change moves (``reach``); repeated until nothing new is reached."""
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
