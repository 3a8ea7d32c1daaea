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

import functools
import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .._tolerance import RTOL       # two levels closer than this (relative) are a tie
from ._certificate import _segment_max


def _close(a, b, rtol=RTOL):
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
    holds : (links,) bool, the bottleneck of at least one flow
    by_free : (segments x links) csr or None: for each segment and untied bottleneck link
        ``m`` (not in ``tied_link``), the sum over the flows held at ``m`` of their weight
        times the segment's coefficient in them (None: every bottleneck is tied)
    coupling : (links x links) csr, built on first use: ``M[l, m]`` = sum over the flows
        bottlenecked at ``m`` of ``A[l, f] w_f``
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
    holds: np.ndarray
    by_free: sp.csr_matrix | None

    @cached_property
    def coupling(self) -> sp.csr_matrix:
        """``M`` (links x links, see the class docstring), from the flows of untied
        bottlenecks (``by_free``) and, built now, those of tied ones."""
        rm, b, L = self.routing, self.bottleneck, self.n_links
        held_tied = (b >= 0) & self.tied_link[np.maximum(b, 0)]
        by_link = self.by_free
        if held_tied.any():
            more = _segment_by_bottleneck(rm, _slot_segments(rm), b, self.weights, held_tied)
            by_link = more if by_link is None else by_link + more
        if by_link is None:
            return sp.csr_matrix((L, L))
        rows = np.flatnonzero(self.holds)                # rows: the links that hold flows
        incidence = sp.csr_matrix((np.where(rm.seg_frac > 0, rm.seg_frac, 0.0), (rm.entry_segment, rm.seg_link)),
                                  shape=(rm.n_segments, L))
        return _rows_to(incidence[:, rows].T @ by_link, rows, L)

    @cached_property
    def matrix(self) -> sp.csc_matrix:
        """The routing matrix expanded (links x flows), built on first use (once per
        RoutingMatrix: the events of one run share it)."""
        if (known := _EXPANDED.get(self.routing)) is None:
            known = _EXPANDED[self.routing] = self.routing.to_scipy("csc")
        return known

    @property
    def n_links(self) -> int:
        return self.routing.n_links

    @property
    def n_flows(self) -> int:
        return self.routing.n_flows

    @property
    def bottleneck_links(self) -> np.ndarray:
        """Links that are the bottleneck of at least one flow."""
        return np.flatnonzero(self.holds)


_CROSSED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_EXPANDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _crossed(rm, slots) -> np.ndarray:
    """Links some flow puts a share on (structure only: kept per RoutingMatrix, immutable)."""
    if (known := _CROSSED.get(rm)) is not None:
        return known
    used_seg = np.zeros(rm.n_segments + 1, dtype=bool)
    for s in slots:
        used_seg[s] = True                               # an unused slot (-1) marks the extra last entry
    crossed = np.zeros(rm.n_links, dtype=bool)
    crossed[rm.seg_link[(rm.seg_frac > 0) & used_seg[:-1][rm.entry_segment]]] = True
    _CROSSED[rm] = crossed
    return crossed


def _slot_segments(rm) -> list[np.ndarray]:
    """Each slot's segment per flow (one contiguous array per slot), -1 where the slot is
    unused or its coefficient is 0."""
    out = []
    for k in range(rm.slots):
        seg = np.ascontiguousarray(rm.flow_seg[:, k])
        out.append(seg if rm.flow_coef is None else np.where(rm.flow_coef[:, k] > 0, seg, -1))
    return out


def build(rm, capacity, weights, demands, rates, bottleneck, load=None) -> Structure:
    """The :class:`Structure` of one scenario (host arrays, bytes/s) on RoutingMatrix ``rm``,
    read from its factored form (segments shared by flows) without expanding the matrix.
    ``load``: the rates' link loads when the caller has them in float64 (the solver's).

    Per-flow work is one pass per slot (no (flows, slots) temporaries); what only untied
    bottlenecks need (which saturated links their flows cross, the coupling matrix) is built
    from their flows alone, so a structure where every flow is held by a tie (each NIC of an
    evenly split all-to-all) costs the tie detection only."""
    L, S = rm.n_links, rm.n_segments
    cap, w, d, x = (np.asarray(a, dtype=np.float64) for a in (capacity, weights, demands, rates))
    b = np.asarray(bottleneck, dtype=np.int64)
    level = x / w
    seg_link, live = rm.seg_link, rm.seg_frac > 0
    slots = _slot_segments(rm)
    load = rm.link_loads(x) if load is None else np.asarray(load, dtype=np.float64)
    saturated = _crossed(rm, slots) & (load >= cap * (1 - RTOL))
    top = _segment_max(rm, level)
    # per segment: the lowest top level of its saturated links, and how many links share it
    t_entry = np.where(live & saturated[seg_link], top[seg_link], np.inf)
    seg_min = _segment_reduce(np.minimum, t_entry, rm.seg_ptr, np.inf)
    at_min = np.isfinite(t_entry) & (t_entry <= seg_min[rm.entry_segment] * (1 + RTOL))
    # arrays over segments get a neutral last entry, read by the unused slots (-1)
    seg_min_x = np.append(seg_min, np.inf)
    count_x = np.append(np.bincount(rm.entry_segment[at_min], minlength=S), 0)
    slot_min = [seg_min_x[s] for s in slots]
    flow_min = functools.reduce(np.minimum, slot_min)
    is_top = np.isfinite(flow_min) & (level >= flow_min * (1 - RTOL))
    hit_level = flow_min * (1 + RTOL)
    slot_hit = [m <= hit_level for m in slot_min]       # read where is_top only (flow_min finite)
    # held by its cap: the solver says so (bottleneck -1), or its rate reaches the cap (a float32
    # allocation's rates are rounded to 6e-8: the test alone missed its caps)
    capped = np.isfinite(d) & ((x >= d * (1 - RTOL)) | (b < 0))
    n_top = functools.reduce(np.add, [np.where(h, count_x[s], 0) for h, s in zip(slot_hit, slots)])
    n_con = np.where(is_top, n_top, 0) + capped
    tied_flow = is_top & (n_con >= 2)
    tied_seg = functools.reduce(np.add, [np.bincount(s + 1, weights=tied_flow & h, minlength=S + 1)
                                         for h, s in zip(slot_hit, slots)])[1:] > 0
    tied_link = np.zeros(L, dtype=bool)
    tied_link[seg_link[at_min & tied_seg[rm.entry_segment]]] = True
    in_k = np.bincount(b[b >= 0], minlength=L) > 0
    tied_link |= saturated & ~in_k                       # saturated, bottleneck of none
    # a capacity change at a link whose flows cross a one-sided link is one-sided too; only
    # the flows of untied bottlenecks can spread it
    free = (b >= 0) & ~tied_link[np.maximum(b, 0)]
    by_free = _segment_by_bottleneck(rm, slots, b, w, free) if free.any() else None
    one_sided = tied_link.copy() if by_free is None else _spread_upstream(_reach(rm, by_free, saturated), tied_link)
    one_sided_cap = capped & (n_con >= 2)
    if capped.any():
        seg_one_sided = np.zeros(S + 1, dtype=bool)
        seg_one_sided[rm.entry_segment[live & one_sided[seg_link] & saturated[seg_link]]] = True
        c = np.flatnonzero(capped)
        one_sided_cap[c] |= functools.reduce(np.logical_or, [seg_one_sided[s[c]] for s in slots])
    return Structure(rm, cap, w, d, x, level, b, saturated, top, capped, n_con, tied_link, one_sided, one_sided_cap,
                     in_k, by_free)


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


def _segment_by_bottleneck(rm, slots, b, w, flows) -> sp.csr_matrix:
    """(segments x links): for each segment and bottleneck link m, the sum over the flows
    held at m (of the boolean mask ``flows``) of their weight times the segment's
    coefficient in them (``slots``: :func:`_slot_segments`)."""
    rows, cols, vals = [], [], []
    for k, s in enumerate(slots):
        f = np.flatnonzero(flows & (s >= 0))
        rows.append(s[f])
        cols.append(b[f])
        vals.append(w[f] if rm.flow_coef is None else w[f] * rm.flow_coef[f, k])
    # (the conversion from coordinates sums duplicate entries)
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(rm.n_segments, rm.n_links))


def _reach(rm, by_link, saturated) -> sp.csr_matrix:
    """(links x links) pattern: ``[m, l]`` where a flow held at ``m`` (a column of
    ``by_link``) crosses the saturated link ``l != m``."""
    L = rm.n_links
    sat_idx = np.flatnonzero(saturated)
    on = (rm.seg_frac > 0) & saturated[rm.seg_link]     # (segments x saturated links) pattern
    sat_col = np.cumsum(saturated) - 1
    on_sat = sp.csr_matrix((np.ones(int(on.sum())), (rm.entry_segment[on], sat_col[rm.seg_link[on]])),
                           shape=(rm.n_segments, len(sat_idx)))
    on_sat.data[:] = 1.0                                 # a link listed twice in a segment counts once
    reach = (by_link.T @ on_sat).tocoo()
    off = reach.row != sat_idx[reach.col]
    return sp.csr_matrix((np.ones(int(off.sum())), (reach.row[off], sat_idx[reach.col[off]])), shape=(L, L))


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
    """The flows grouped by level (ascending), consecutive levels within ``RTOL`` together."""
    order = np.argsort(s.level, kind="stable")
    lv = s.level[order]
    if len(lv) == 0:
        return []
    cut = np.flatnonzero(~_close(lv[1:], lv[:-1])) + 1
    return np.split(order, cut)
