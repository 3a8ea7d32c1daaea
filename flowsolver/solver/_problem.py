"""The checked input of :func:`~flowsolver.max_min_fair`, as both methods take it, and the
shape helpers they share: size buckets, padding, the trace counter.

Every argument is checked here, before anything is traced: a bad value raises a
``ValueError`` naming the parameter (and, for arrays, the first bad entry) and what is
allowed. Shapes are padded to size buckets (:func:`bucket_size`) so that solving another
instance of the same bucket reuses the compiled code.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import _checks
from ._input_checks import bad_entries, first_bad, has_subnormal, lowest, per_item, subnormal_rule
from ..routing import MergedRouting, RoutingMatrix, checked_fractions, checked_matrix, ranges

_TRACES = {"count": 0}


def trace_count() -> int:
    """How many times a solver kernel was traced (compiled) in this process.

    >>> isinstance(trace_count(), int)
    True
    """
    return _TRACES["count"]


def count_trace() -> None:
    """Called by each kernel when JAX traces it."""
    _TRACES["count"] += 1


def bucket_size(n: int, minimum: int = 16) -> int:
    """Padded size for ``n`` items, at least ``minimum``: the next of 2^k or 1.5 x 2^k below
    4096; from 4096 on the next of 5/8, 6/8, 7/8 or 8/8 of a power of two, so large
    problems carry at most 14 % padding (on a 1 M-flow all-to-all this makes the solver
    ~10 % faster than the coarser ladder) while small ones share few compiled shapes.

    Examples
    --------
    >>> [bucket_size(n) for n in (1, 17, 25, 100, 1000, 5000, 2_500_000)]
    [16, 24, 32, 128, 1024, 5120, 2621440]
    >>> bucket_size(2.5)
    Traceback (most recent call last):
    ...
    ValueError: n must be an integer >= 0, got 2.5
    """
    n = max(_checks.integer("n", n, minimum=0), _checks.integer("minimum", minimum))
    p = 1 << (n - 1).bit_length()
    if n < 4096:
        return p * 3 // 4 if p * 3 // 4 >= n and p >= 4 else p
    return next(p * j // 8 for j in (5, 6, 7, 8) if p * j // 8 >= n)


#: sizes below which a single solve's dense kernel pads to powers of two from
#: :data:`SMALL_BUCKET` and gives flows at least :data:`SMALL_SLOTS` segment slots: one small
#: problem's round costs its fixed overhead whatever its padding, and each distinct set of
#: sizes is a compile (0.3-0.6 s on 2 cores). With the ladder of :func:`bucket_size` from 16 the
#: collectives' tests compiled 89 dense kernels (56 s of their 88 s); with these 42 (54 s in
#: all). Batches keep :func:`bucket_size`: their work is the padded size times the scenarios
#: (8,192 scenarios of a 20 x 30 problem ran 6x slower padded so)
COARSE_BELOW = 4096
SMALL_BUCKET = 128
SMALL_SLOTS = 4


def kernel_bucket(n: int) -> int:
    """The dense kernel's padded size for ``n`` items: the next power of two from
    :data:`SMALL_BUCKET` below :data:`COARSE_BELOW`, :func:`bucket_size` from there.

    >>> [kernel_bucket(n) for n in (1, 129, 1500, 5000)]
    [128, 256, 2048, 5120]
    """
    n = max(int(n), SMALL_BUCKET)
    return 1 << (n - 1).bit_length() if n < COARSE_BELOW else bucket_size(n)


def spread(count: int, first: int, stop: int, ordered: bool) -> np.ndarray:
    """``count`` padding ids spread evenly over ``first .. stop - 1`` (``ordered``: in
    ascending runs, else in turn). Padding that all pointed to one segment or link made
    that one id the target of every padding item's update in each of the dense round's
    scatters (104,920 entries onto one link on fat_tree(16)): on a GPU, updates of one
    address are serialised.

    >>> spread(5, 2, 4, ordered=True).tolist(), spread(5, 2, 4, ordered=False).tolist()
    ([2, 2, 2, 3, 3], [2, 3, 2, 3, 2])
    """
    if count and stop <= first:
        raise ValueError(f"no padding ids between {first} and {stop} for {count} padding items")
    i = np.arange(count, dtype=np.int64)
    return first + (i * (stop - first) // max(count, 1) if ordered else i % max(stop - first, 1))


def pad(a, shape, fill, dtype=None) -> np.ndarray:
    """``a`` in the corner of a ``shape`` array filled with ``fill`` (``dtype`` default: a's).
    The one padding of the solver: a trailing ``int`` pads the last axis only.

    >>> pad(np.array([[1, 2]]), (1, 4), 0).tolist()
    [[1, 2, 0, 0]]
    >>> pad(np.array([1.0, 2.0]), 3, np.inf).tolist()
    [1.0, 2.0, inf]
    """
    a = np.asarray(a)
    if isinstance(shape, (int, np.integer)):
        shape = a.shape[:-1] + (int(shape),)
    out = np.full(shape, fill, dtype=a.dtype if dtype is None else dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


@dataclass(frozen=True)
class Problem:
    """A checked max-min fair problem (host arrays, float64): what each method's
    ``eligible`` and ``solve`` take. Arrays have a leading scenario axis when ``batch``."""

    routing: RoutingMatrix
    capacity: np.ndarray          # (links,) or (batch, links), bytes/s
    weights: np.ndarray           # (flows,) or (batch, flows)
    demands: np.ndarray           # (flows,) or (batch, flows), bytes/s, inf = no cap
    unbounded: np.ndarray         # (flows,) or (batch, flows): no finite link and no cap
    batch: int | None
    dtype: np.dtype               # float32 or float64
    max_rounds: int | None        # None: the method's own bound
    inner: int                    # rounds per convergence check
    compact: bool                 # dense method: compact on the host as flows freeze
    # a batch's scenarios whose own rows hold a bad entry: {scenario: the ValueError a single
    # solve of it raises}; their bad entries are replaced by harmless values (capacity or cap
    # 0, weight 1) so that the batch runs, and they report Status.FAILED
    invalid: dict | None = None
    given: tuple | None = None    # (capacity, weights, demands) as given, where ``invalid``
    per_link: bool = True         # False: no link loads or utilizations computed or returned

    def check_range(self, *, dense: bool, capacity_rows: bool = True) -> None:
        """The numbers the dtype holds (``capacity_rows`` False: a batch's capacity rows are
        scanned for subnormals elsewhere, on the device: ``_batch.solve_batch``). float32 rates must hold every capacity and cap; the dense kernel, which runs in
        float32, also every weight, every link's sum of weights and every level (rate /
        weight) it forms (the frontier computes in float64 and only rounds its rates). An
        overflow would return ``inf``, NaN or 0 rates with status ok. In either dtype a positive
        capacity or cap must be a normal number: XLA on the CPU flushes subnormals to zero, so
        1e-310 bytes/s came back as rates of 0 with status ok."""
        cap, w, d = self.capacity, self.weights, self.demands
        least = float(np.finfo(self.dtype).tiny)
        for name, arr in (("capacity", cap), ("demands", d)):
            if name == "capacity" and arr.ndim == 2 and not capacity_rows:
                continue
            if lowest(arr) < least and has_subnormal(arr, least):
                first_bad((arr > 0) & (arr < least), name, subnormal_rule(self.dtype), arr)
        # weights too: a subnormal weight flushed to zero divided a level by 0 (NaN rates, status ok)
        tiny64, big64 = float(np.finfo(np.float64).tiny), float(np.finfo(np.float64).max) / 16
        if lowest(w) < tiny64 or np.max(w, initial=0.0) > big64:
            first_bad((w < tiny64) | (w > big64), "weights", f"in {tiny64:.3g} ... {big64:.3g} (a subnormal "
                       "weight is flushed to zero; a larger one overflows the links' sums)", w)
        if self.dtype != np.float32:
            return
        big = float(np.finfo(np.float32).max) / 16          # headroom for sums of a few terms
        tiny = float(np.finfo(np.float32).tiny)
        for name, arr in (("capacity", cap), ("demands", d)):
            if (bad := np.isfinite(arr) & (arr > big)).any():
                first_bad(bad, name, f"at most {big:.3g} bytes/s with dtype='float32' (use dtype='float64')", arr)
        if not dense:
            return
        if (bad := (w < tiny) | (w > big)).any():
            first_bad(bad, "weights", f"in {tiny:.3g} ... {big:.3g} with dtype='float32' (use dtype='float64')", w)
        sums = self.routing.link_loads(w) if w.ndim == 1 else _link_sums(self.routing, w)
        if (sums > big).any():
            link = int(np.argwhere(sums > big)[0][-1])
            raise ValueError(f"weights: the flows on link {link} sum to {sums.max():.3g}, more than dtype='float32' "
                             f"holds ({big:.3g}); use dtype='float64'")
        finite = np.concatenate([cap[np.isfinite(cap)].ravel(), d[np.isfinite(d)].ravel()])
        top = float(finite.max(initial=0.0))
        if top / float(w.min()) > big:
            raise ValueError(f"dtype='float32' cannot hold the levels (rate / weight) of this problem: largest "
                             f"capacity or cap {top:.3g} over smallest weight {float(w.min()):.3g} exceeds "
                             f"{big:.3g}; use dtype='float64'")


def _link_sums(rm: RoutingMatrix, rows: np.ndarray) -> np.ndarray:
    """``A @ row`` for every row of ``rows`` (scenarios, flows) -> (scenarios, links), through
    the factored form: flows to segments, segments to links (two sparse products, no loop
    over the scenarios; duplicate entries add, as in ``RoutingMatrix.link_loads``)."""
    n, k = rm.flow_seg.shape
    used = rm.flow_seg >= 0
    coef = np.ones(int(used.sum())) if rm.flow_coef is None else rm.flow_coef[used]
    flow_to_seg = sp.csr_matrix((coef, (np.broadcast_to(np.arange(n)[:, None], (n, k))[used], rm.flow_seg[used])),
                                shape=(n, rm.n_segments))
    seg_to_link = sp.csr_matrix((rm.seg_frac, (rm.entry_segment, rm.seg_link)), shape=(rm.n_segments, rm.n_links))
    return np.asarray(seg_to_link.T @ (flow_to_seg.T @ np.asarray(rows, dtype=np.float64).T)).T


@dataclass
class CompactRouting:
    """The factored routing structure of the flows still being solved (host arrays): a
    RoutingMatrix's segments, or the part of them that a compacted problem still uses.
    (Not ``routing._graph_index.Segments``, which builds a RoutingMatrix's segments: docs/glossary.md.)"""

    seg_ptr: np.ndarray
    seg_link: np.ndarray
    seg_frac: np.ndarray
    entry_seg: np.ndarray             # the segment of each entry of seg_link / seg_frac
    flow_seg: np.ndarray
    flow_coef: np.ndarray | None
    flows: np.ndarray                 # global flow ids

    @classmethod
    def of(cls, rm: RoutingMatrix) -> "CompactRouting":
        return cls(rm.seg_ptr, rm.seg_link, rm.seg_frac, rm.entry_segment, rm.flow_seg, rm.flow_coef,
                   np.arange(rm.n_flows))

    def restrict(self, keep: np.ndarray) -> "CompactRouting":
        """The sub-problem of the flows ``keep`` (local indices) and the segments they use."""
        flow_seg = self.flow_seg[keep]
        used = np.unique(flow_seg[flow_seg >= 0])
        remap = np.full(len(self.seg_ptr) - 1, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        lengths = np.diff(self.seg_ptr)[used]
        idx = ranges(self.seg_ptr[used], lengths)
        return CompactRouting(np.concatenate([[0], np.cumsum(lengths)]), self.seg_link[idx], self.seg_frac[idx],
                              remap[self.entry_seg[idx]],
                              np.where(flow_seg >= 0, remap[np.maximum(flow_seg, 0)], -1).astype(np.int32),
                              None if self.flow_coef is None else self.flow_coef[keep], self.flows[keep])

    def on_links(self, used: np.ndarray) -> "CompactRouting":
        """The same structure on the links ``used`` alone (sorted ids; every link of an entry
        of fraction > 0 must be among them), renumbered 0 .. len(used) - 1."""
        link = np.searchsorted(used, self.seg_link).clip(max=max(len(used) - 1, 0))
        return CompactRouting(self.seg_ptr, link.astype(self.seg_link.dtype), self.seg_frac, self.entry_seg,
                              self.flow_seg, self.flow_coef, self.flows)

    @property
    def unit_coef(self) -> bool:
        return self.flow_coef is None or bool(np.all(self.flow_coef[self.flow_seg >= 0] == 1.0))

    def buckets(self, n_links: int, coarse: bool = True) -> tuple[int, int, int, int]:
        """Padded sizes (links, flows, segments, entries), each with room for one padding item:
        :func:`kernel_bucket` for a single solve, :func:`bucket_size` (``coarse=False``) for a
        batch, whose work grows with the padded size times the scenarios."""
        entries = int(np.count_nonzero(self.seg_frac > 0))
        size = kernel_bucket if coarse else bucket_size
        return size(n_links + 1), size(len(self.flows) + 1), size(len(self.seg_ptr)), size(entries + 1)

    def padded(self, sizes: tuple[int, int, int, int], n_links: int, unit: bool | None = None,
               coarse: bool = True):
        """Device-ready arrays padded to ``sizes`` (:meth:`buckets` of ``n_links``): padding
        flows ``N..Np-1``, segments past the real ones and links ``n_links..Lp-1`` carry
        nothing (padding slots and entries are spread over them, :func:`spread`). Entries of fraction 0 are
        dropped (the dense kernel relies on real entries being > 0). With unit
        coefficients (``unit``, default :attr:`unit_coef`) the kernel does not read them: a
        (1, 1) placeholder stands in for the (flows, K) table. ``coarse`` (a single solve): a
        small problem's flows get at least :data:`SMALL_SLOTS` slots."""
        Lp, Np, Sp, Ep = sizes
        keep = self.seg_frac > 0
        n, k = self.flow_seg.shape
        n_segs = len(self.seg_ptr) - 1
        kp = max(k, SMALL_SLOTS) if coarse and Np < COARSE_BELOW else k      # small single solves: one width
        slot_seg = np.full((Np, kp), -1, dtype=np.int32)
        np.copyto(slot_seg[:n, :k], self.flow_seg, casting="unsafe")
        empty = slot_seg < 0
        slot_seg[empty] = spread(int(np.count_nonzero(empty)), n_segs, Sp, ordered=False)
        link, seg = self.seg_link[keep], self.entry_seg[keep]
        # links from n_links on are padding on every device (a share of the flows leaves some
        # real links without entries: on another device they are real, and their minima meet)
        link = np.concatenate([link, spread(Ep - len(link), n_links, Lp, ordered=False)])
        seg = np.concatenate([seg, spread(Ep - len(seg), n_segs, Sp, ordered=True)])
        if self.unit_coef if unit is None else unit:
            coef = np.zeros((1, 1))
        else:
            coef = np.zeros((Np, kp))
            np.copyto(coef[:n, :k], self.flow_coef, where=self.flow_seg >= 0)
        frac = pad(self.seg_frac[keep], Ep, 0.0, np.float64)
        return link.astype(np.int32), seg.astype(np.int32), frac, slot_seg, coef


def problem(routing, capacity, weights, demands, dtype, max_rounds, inner_rounds,
            compact, per_link=True) -> tuple[Problem, MergedRouting | None]:
    """Check :func:`~flowsolver.max_min_fair`'s arguments (see there); returns the problem
    and the MergedRouting whose rates are to be expanded (or None)."""
    rm, merged = _as_routing(routing)
    try:
        dtype = np.dtype("float64" if dtype is None else dtype)
    except TypeError:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}") from None
    if dtype not in (np.dtype("float32"), np.dtype("float64")):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype}")
    cap = per_item("capacity", capacity, rm.n_links, rm.capacity, what="link")
    w = per_item("weights", weights, rm.n_flows, rm.weights, what="flow")
    d = per_item("demands", demands, rm.n_flows, rm.demands, what="flow")
    batched = [a.shape[0] for a in (cap, w, d) if a.ndim == 2]
    if batched and len(set(batched)) > 1:
        raise ValueError(f"batched inputs disagree on the batch size: {sorted(set(batched))}")
    if batched and batched[0] == 0:
        name, arr = next((n, a) for n, a in (("capacity", cap), ("weights", w), ("demands", d)) if a.ndim == 2)
        raise ValueError(f"{name}: a batch needs at least one scenario (a row each), got shape {arr.shape}")
    # one reduction each (a batch's capacities can be millions): NaN fails every comparison.
    # A bad entry of a scenario's own row (a batch) fails that scenario alone (Status.FAILED,
    # its message the single solve's error); one of a row shared by every scenario raises
    invalid, given = {}, (cap, w, d)
    if not lowest(cap) >= 0:
        cap = bad_entries(~(cap >= 0), "capacity", "a number >= 0 bytes/s (0 = failed link)", cap, 0.0, invalid)
    if not (lowest(w) > 0 and np.max(w, initial=1.0) < np.inf):
        w = bad_entries(~(w > 0) | ~np.isfinite(w), "weights", "a finite number > 0", w, 1.0, invalid)
    if not lowest(d) >= 0:
        d = bad_entries(~(d >= 0), "demands", "a number >= 0 bytes/s (inf = no cap)", d, 0.0, invalid)
    if max_rounds is not None:          # the kernels count rounds in int32
        _checks.integer("max_rounds", max_rounds, maximum=2**31 - 1)
    inner = _checks.integer("inner_rounds", inner_rounds)
    batch = batched[0] if batched else None
    unbounded = ~_crossing(rm, cap) & np.isinf(d)     # (N,) or (B, N)
    if batch is None and unbounded.any():
        f = int(np.flatnonzero(unbounded)[0])
        raise ValueError(f"flow {f} crosses no link of finite capacity and has no demand cap: its "
                         "max-min rate is unbounded; give it a demand or route it over a link")
    if compact is not None and not isinstance(compact, (bool, np.bool_)):
        raise ValueError(f"compact must be True, False or None (the default), got {compact!r}")
    compact = (batch is None) if compact is None else bool(compact)
    if not isinstance(per_link, (bool, np.bool_)):
        raise ValueError(f"per_link must be True or False, got {per_link!r}")
    if invalid:
        warnings.warn("max_min_fair: " + "; ".join(f"scenario {i} reports Status.FAILED: {invalid[i]}"
                                                   for i in sorted(invalid)), RuntimeWarning, stacklevel=3)
    return Problem(rm, cap, w, d, unbounded, batch, dtype, None if max_rounds is None else int(max_rounds),
                   inner, compact, invalid or None, given if invalid else None, bool(per_link)), merged


def _as_routing(routing) -> tuple[RoutingMatrix, MergedRouting | None]:
    if isinstance(routing, MergedRouting):
        return routing.routing, routing
    if isinstance(routing, RoutingMatrix):
        return checked_matrix(routing), None
    if sp.issparse(routing):
        m = checked_fractions(routing)
        m.eliminate_zeros()
        return RoutingMatrix.from_scipy(m), None
    raise ValueError(f"routing must be a RoutingMatrix or a scipy.sparse matrix (links x flows), "
                     f"got {type(routing).__name__}")


#: per RoutingMatrix, the flows that cross a link of positive fraction (every link finite)
_ALL_FINITE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _crossing(rm: RoutingMatrix, cap: np.ndarray) -> np.ndarray:
    """Flows that cross at least one link of finite capacity: (flows,), or (batch, flows)
    where scenarios differ in which links are infinite."""

    def per_flow(has):          # has: (segments + 1,) or (B, segments + 1) -> per flow, by slot
        if has.ndim == 1:       # one gather of the (flows, slots) table, then its columns or-ed
            hit = has[rm.flow_seg]
            if rm.flow_coef is not None:
                hit &= rm.flow_coef > 0
            out = np.zeros(rm.n_flows, dtype=bool)
            for k in range(rm.slots):
                out |= hit[:, k]
            return out
        out = np.zeros(has.shape[:-1] + (rm.n_flows,), dtype=bool)
        for k in range(rm.slots):
            col = has[..., rm.flow_seg[:, k]]
            out |= col if rm.flow_coef is None else col & (rm.flow_coef[:, k] > 0)
        return out

    def segments_with(finite):  # (links,) -> per segment (an extra False last, read by unused slots -1)
        hit = (rm.seg_frac > 0) & finite[rm.seg_link]
        return np.append(np.bincount(rm.entry_segment[hit], minlength=rm.n_segments) > 0, False)

    # the usual case, the same for every solve of the matrix: kept (cap >= 0: its largest
    # entry is finite exactly when all are; one reduction, no mask over a batch's links)
    if np.max(cap, initial=0.0) < np.inf:
        if (known := _ALL_FINITE.get(rm)) is None:
            live = rm.seg_frac > 0
            if live.all():      # every segment with an entry has a live one: no pass over the entries
                has = np.append(rm.seg_ptr[1:] > rm.seg_ptr[:-1], False)
            else:
                has = segments_with(np.ones(rm.n_links, bool))
            known = _ALL_FINITE[rm] = per_flow(has)
        return known
    finite = np.isfinite(cap)
    if finite.ndim == 1:
        return per_flow(segments_with(finite))
    # scenarios with infinite links: per segment, the finite links it holds (a sparse product)
    live = rm.seg_frac > 0
    incidence = sp.csr_matrix((np.ones(int(live.sum())), (rm.seg_link[live], rm.entry_segment[live])),
                              shape=(rm.n_links, rm.n_segments))
    has = np.asarray((sp.csr_matrix(finite.astype(np.float64)) @ incidence).todense()) > 0
    return per_flow(np.concatenate([has, np.zeros((len(has), 1), bool)], axis=1))
