"""Exact derivatives of a makespan (:func:`~flowsolver.completion_times`, all flows from 0)
with respect to link capacities, through the event-driven solve.

Between events the rates are one max-min solve (phase ``k``: active flows, rates ``r``,
duration ``D_k``); the flows ``F_k`` finishing at its end satisfy ``R_f = r_f D_k`` with
``R_f`` their bytes left. Differentiating, ``dD_k = (dR_f - D_k dr_f) / r_f`` and the
survivors carry ``dR = dR - D_k dr - r dD_k`` into the next phase; ``dr`` is the phase's rate
derivative (:func:`~flowsolver.solver.rate_sensitivity`). The makespan's derivative is the
sum of the ``dD_k``, the last phase's being the largest over its finishing flows for an
increase (the smallest for a decrease): the derivative of a maximum is one-sided. Flows that
finish together at one event but would end apart under the change make it depend on the new
event order: the flows that end first leave their links to the others, and to the flows
that run on, for a stretch of first order; :mod:`flowsolver.timing._event_split` follows that
stretch exactly (one-sided, flagged in :meth:`CompletionSensitivity.one_sided`).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .._status import Status
from .._tolerance import RTOL
from ..routing import MergedRouting, RoutingMatrix
from ..solver import Allocation, host_scalar, max_min_fair, rate_sensitivity
from ._completion import _routing_and_sizes
from ._event_split import EventSplit

__all__ = ["completion_sensitivity", "CompletionSensitivity", "fair_makespan", "KeptRun", "kept_run"]

#: the rank-one terms of the finishing flows' end changes go through one matrix product from
#: this many multiply-adds, a loop of numpy updates below (tiny BLAS calls stalled on a 2-core
#: machine with one core busy; on dragonfly(3, 6, 3)'s all-to-all, 60 events, the loop took
#: 28 s of a 163 s gradient under cProfile and the product dropped out of its top entries)
BLAS_WORK = 1 << 20


class CompletionSensitivity:
    """The phases of an event-driven run and the derivatives of its makespan (see
    :func:`completion_sensitivity`)."""

    def __init__(self, matrix, capacity, weights, demands, phases, makespan):
        self.matrix, self.capacity, self.weights, self.demands = matrix, capacity, weights, demands
        self.shape = matrix.shape if hasattr(matrix, "shape") else (matrix.n_links, matrix.n_flows)
        self.phases = phases            # [(active flows, rates, duration, finishing flows, RateSensitivity)]
        self.makespan = makespan
        self._splits = {}               # phase -> (EventSplit, flows running on), built on first use
        self._cache = {}                # ("elasticity", side) -> its array

    @cached_property
    def _scale(self) -> np.ndarray:
        """Per link, the unit each derivative is taken in: its capacity (1 where that is 0).
        Along ``dc_l = c_l`` every quantity of the chain is of the order of the makespan and
        the bytes, whatever the capacities: a link of 1e-300 B/s has a derivative of ~1e600
        s per B/s, past float64, that the chain in B/s would carry as inf and meet as inf -
        inf (NaN). Only the final division by the capacity overflows, to the right signed
        infinity."""
        cap = np.asarray(self.capacity, dtype=np.float64)
        return np.where((cap > 0) & np.isfinite(cap), cap, 1.0)

    def elasticity(self, side: str = "up") -> np.ndarray:
        """``c_l x`` d makespan / d capacity of each link alone (links,), seconds: the
        makespan's change per unit of relative change of the link's capacity (0 on links of
        capacity 0), finite wherever the makespan is. ``side`` as for :meth:`gradient`.

        >>> cs = completion_sensitivity(sp.csc_matrix([[1.0, 1.0]]), sizes=[1.0, 3.0], capacity=[1e-300])
        >>> [float(f"{x:.6g}") for x in cs.elasticity()], cs.gradient().tolist()   # T = 4 / c: c dT/dc = -T
        ([-4e+300], [-inf])
        """
        if side not in ("up", "down"):
            raise ValueError(f"side must be 'up' or 'down', got {side!r}")
        key = ("elasticity", side)
        if key in self._cache:
            return self._cache[key]
        scale = sp.diags(self._scale)

        def tangent(k):
            sens = self.phases[k][4]
            if side == "up":               # an increase moves rates only from links that hold a flow
                if not len(sens.held):
                    return None            # (the phase's structure is not even built)
                return sp.csr_matrix(sens.capacity_jacobian(side, links=sens.held)) @ scale
            return sp.csr_matrix(sens.capacity_jacobian(side)) @ scale

        out, spread = self._chain(tangent, self.shape[0], side)
        if side == "up":
            self._spread_up = spread
        out = np.where(np.asarray(self.capacity) > 0, out, 0.0)
        self._cache[key] = out
        return out

    def gradient(self, side: str = "up") -> np.ndarray:
        """d makespan / d capacity of each link alone (links,), seconds per byte/s:
        ``side="up"`` for an increase, ``"down"`` for a decrease (one-sided where a tie or
        a new event order makes the two differ: :meth:`one_sided`). A derivative past
        float64 (a link of ~1e-300 B/s: ~ -T / c) is -inf (or +inf), the correctly rounded
        value, never NaN."""
        elastic = self.elasticity(side)
        with np.errstate(over="ignore"):
            return elastic / self._scale

    def one_sided(self) -> np.ndarray:
        """Links (after :meth:`gradient`) whose makespan derivative may depend on the sign of
        the change: one-sided in some phase, or moving flows that finish together apart
        (a new event order)."""
        if not hasattr(self, "_spread_up"):
            self.gradient("up")
        flagged = self._spread_up.copy()
        for ph in self.phases:
            flagged |= ph[4].one_sided_links
        return flagged

    def any_one_sided(self) -> bool:
        """``one_sided().any()``, building the events' structures only up to the first tie."""
        if not hasattr(self, "_spread_up"):
            self.gradient("up")
        return bool(self._spread_up.any()) or any(ph[4].one_sided_links.any() for ph in self.phases)

    def directional(self, d_capacity, side: str = "up") -> float:
        """The one-sided derivative of the makespan along ``d_capacity`` (links,), seconds per
        unit of the step (``side="down"``: for the step ``-d_capacity``, sign as for "up").
        The chain runs along the direction scaled to at most each link's capacity (the
        derivative is positively homogeneous in it), so only the final rescaling can
        overflow: to the right signed infinity, never NaN."""
        dc = np.asarray(d_capacity, dtype=np.float64)
        if dc.shape != (self.shape[0],) or not np.isfinite(dc).all():
            raise ValueError(f"d_capacity must be ({self.shape[0]},) finite numbers (bytes/s per link), got "
                             f"shape {dc.shape}" + ("" if dc.shape != (self.shape[0],) else " with a non-finite entry"))
        reach = float(np.max(np.abs(dc) / self._scale, initial=0.0))
        if reach == 0.0:
            return 0.0
        dc = dc / reach

        def tangent(k):
            sens = self.phases[k][4]
            return sp.csc_matrix((sens.directional(dc) if side == "up" else -sens.directional(-dc))[:, None])

        with np.errstate(over="ignore"):
            return float(self._chain(tangent, 1, side)[0][0] * reach)

    def _chain(self, tangent, n_dir: int, side: str):
        """The makespan's derivative along ``n_dir`` directions, from each phase's rate
        tangents ``tangent(k)`` (phase ``k``'s, rows its active flows; None: all 0), and the
        directions where flows finishing together end apart. The bytes a flow has left
        change by ``-sum_i (D_i dr_i + r_i dD_i + x_i)`` over the phases before (``x_i``: the
        bytes it moved beyond its rate while the flows finishing at phase ``i`` ended apart,
        :class:`~flowsolver.timing._event_split.EventSplit`); only finishing flows read it, so it is
        kept as a sparse sum of ``D_i dr_i + x_i`` (``moved``) and the rank-one terms
        ``r_i dD_i`` (``shifts``), evaluated at each phase's finishing flows alone. Two
        finishing flows' end changes differ when they differ by more than ``RTOL`` of
        the largest term seen in that direction so far (rounding of sums that cancel is not
        a difference)."""
        n = self.shape[1]
        sign = 1.0 if side == "up" else -1.0
        moved = None                    # (n x n_dir) csr: sum over the phases so far of D_i dr_i + x_i
        shifts = []                     # (r_i over all flows, dD_i) of the phases so far where dD_i != 0
        total = np.zeros(n_dir)
        scale = np.zeros(n_dir)         # per direction: the largest term so far
        spread_any = np.zeros(n_dir, dtype=bool)
        for k, (active, rates, duration, finishing, _) in enumerate(self.phases):
            dr_active = tangent(k)
            dr_active = sp.csr_matrix((len(active), n_dir)) if dr_active is None else sp.csr_matrix(dr_active)
            at = np.searchsorted(active, finishing)              # finishing flows among the active (both sorted)
            part = dr_active[at] * duration if dr_active.nnz else sp.csr_matrix((len(finishing), n_dir))
            if moved is not None:
                part = part + moved[finishing]
            hi, lo, size, ends = _end_range(part, shifts, finishing, rates[at])
            scale = np.maximum(scale, size)
            spread = np.abs(hi - lo) > RTOL * scale
            spread_any |= spread
            step = (hi if side == "up" else lo).copy()           # the phase's dD (equal where not spread)
            todo = np.flatnonzero(spread)
            excess = []
            if len(todo):                                        # flows finishing here end apart
                split, running_on = self._split(k, at)
                for i in range(0, len(todo), split.chunk):
                    part = todo[i:i + split.chunk]
                    end, more = split.run(sign * ends(part), RTOL * scale[part])
                    step[part] = sign * end
                    excess.append(sp.coo_matrix((sign * more.data, (running_on[more.row], part[more.col])),
                                                shape=(n, n_dir)))
            total += step
            if k == len(self.phases) - 1:
                break
            if dr_active.nnz:
                coo = dr_active.tocoo()
                add = sp.csr_matrix((coo.data * duration, (active[coo.row], coo.col)), shape=(n, n_dir))
                moved = add if moved is None else moved + add
            for add in excess:
                if add.nnz:
                    moved = add.tocsr() if moved is None else moved + add.tocsr()
            if step.any():
                r = np.zeros(n)
                r[active] = rates
                shifts.append((r, step))
        return total, spread_any

    def _split(self, k, at):
        """Phase ``k``'s EventSplit and the flows that run on past its event (``at``: its
        finishing flows' positions among the active)."""
        if k not in self._splits:
            active, rates, _, _, sens = self.phases[k]
            survive = np.ones(len(active), dtype=bool)
            survive[at] = False
            pos = np.flatnonzero(survive)
            fin, run_on = (at, pos) if sens.rows is None else (sens.rows[at], sens.rows[pos])
            self._splits[k] = EventSplit(sens.sens.structure, fin, rates[at], run_on), active[pos]
        return self._splits[k]


def _end_range(part, shifts, finishing, r_fin):
    """Largest and smallest over the finishing flows of the change of their phase's end,
    ``-(part + sum r_i dD_i) / r`` per direction (``part``: sparse, rows the finishing flows;
    implicit entries are 0), the largest magnitude of its terms, and a function giving some
    directions' changes (dense, finishing flows x those directions)."""
    part = sp.csr_matrix(part)
    sparse = sp.csr_matrix((part.data * np.repeat(-1.0 / r_fin, np.diff(part.indptr)), part.indices, part.indptr),
                           shape=part.shape).tocsc()      # each finishing flow's row over its rate
    if shifts:
        ratio = np.stack([r[finishing] for r, _ in shifts], axis=1) / r_fin[:, None]    # (finishing, shifts)
        dd = np.stack([d for _, d in shifts])                                           # (shifts, directions)

    def ends(cols):
        block = sparse[:, cols].toarray()
        if shifts and block.size * len(shifts) >= BLAS_WORK:
            block -= ratio @ dd[:, cols]
        else:                           # (tiny BLAS calls stall on a busy machine)
            for i in range(len(shifts)):
                block -= ratio[:, i, None] * dd[i, cols]
        return block

    hi, lo = _column_range(sparse)
    size = np.maximum(hi, -lo)
    if shifts:                          # the directions the rank-one terms touch, dense
        cols = np.flatnonzero(dd.any(axis=0))
        block = ends(cols)
        size[cols] = np.maximum(size[cols], (np.abs(ratio).max(axis=0)[:, None] * np.abs(dd[:, cols])).max(axis=0))
        hi[cols], lo[cols] = block.max(axis=0), block.min(axis=0)
    return hi, lo, size, ends


def _column_range(m: sp.csc_matrix):
    """Largest and smallest entry of each column of ``m``, implicit zeros included."""
    hi, lo = np.zeros(m.shape[1]), np.zeros(m.shape[1])
    counts = np.diff(m.indptr)
    has = np.flatnonzero(counts)
    if len(has):
        starts = m.indptr[has]
        full = counts[has] == m.shape[0]                # no implicit zero in the column
        top, bottom = np.maximum.reduceat(m.data, starts), np.minimum.reduceat(m.data, starts)
        hi[has] = np.where(full, top, np.maximum(top, 0.0))
        lo[has] = np.where(full, bottom, np.minimum(bottom, 0.0))
    return hi, lo


def completion_sensitivity(routing, sizes=None, capacity=None, *, weights=None, demands=None) -> CompletionSensitivity:
    """Re-run :func:`~flowsolver.completion_times`' events (every flow from 0) keeping each
    phase's bottleneck structure, for exact makespan derivatives.

    Returns a :class:`CompletionSensitivity`: ``makespan`` (s), ``gradient(side)`` (links,)
    d makespan / d capacity in s per byte/s, ``directional(dc, side)``.

    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0]])                  # two flows on one link of 2 bytes/s
    >>> cs = completion_sensitivity(A, sizes=[1.0, 3.0], capacity=[2.0])
    >>> cs.makespan, cs.gradient().tolist()             # T = (1 + 3) / c: dT/dc = -4 / c^2
    (2.0, [-1.0])
    """
    rm, sizes = _routing_and_sizes(routing, sizes)
    if sizes.ndim != 1:
        raise ValueError("sizes: completion_sensitivity takes one scenario (shape (flows,))")
    cap = rm.capacity if capacity is None else np.asarray(capacity, dtype=np.float64)
    w = rm.weights if weights is None else np.asarray(weights, dtype=np.float64)
    d = rm.demands if demands is None else np.asarray(demands, dtype=np.float64)
    if cap.ndim != 1 or w.ndim != 1 or d.ndim != 1:
        raise ValueError("capacity, weights, demands: completion_sensitivity takes one scenario (1-D arrays)")
    matrix = rm.to_scipy("csc")
    left = sizes.astype(np.float64).copy()
    active = np.flatnonzero(left > 0)
    phases, clock = [], 0.0
    while len(active):
        sub = matrix[:, active]
        alloc = max_min_fair(sub, cap, weights=w[active], demands=d[active])
        rates = np.asarray(alloc.rates, dtype=np.float64)
        if (rates <= 0).any():
            raise ValueError(f"flow {int(active[np.argmin(rates)])} gets no bandwidth (a failed link): the makespan "
                             "is infinite and has no derivative")
        to_go = left[active] / rates
        duration = float(to_go.min())
        done = to_go <= duration * (1 + RTOL)
        build = (lambda sub=sub, alloc=alloc, active=active:
                 rate_sensitivity(sub, alloc, cap, weights=w[active], demands=d[active]))
        phases.append((active, rates, duration, active[done], _PhaseSens(build, None, alloc.bottleneck)))
        left[active] -= rates * duration
        clock += duration
        active = active[~done]
    return CompletionSensitivity(matrix, cap, w, d, phases, clock)


class KeptRun:
    """A forward run of :func:`~flowsolver.completion_times` kept for its derivatives
    (``keep_phases=True``) on a block of independent groups (contiguous flows ``group``,
    each on its own links: ``used[g]`` their original indices, block links in that order).
    :meth:`lookup` gives a group's :class:`CompletionSensitivity` on the original links from
    the forward's own events: each event's allocation, time step and finishing flows are
    reused (no re-solve; the same events as the forward); only the bottleneck structure of
    each of the group's events is built, on the group's own routing."""

    def __init__(self, sizes, group, used, phases):
        self.sizes, self.used, self.phases = np.asarray(sizes, dtype=np.float64), used, phases
        self.starts = np.searchsorted(np.asarray(group), np.arange(len(used) + 1))
        self.to_original = np.concatenate(used) if len(used) else np.zeros(0, dtype=np.int64)
        self.link_starts = np.cumsum([0] + [len(u) for u in used])     # each group's block links
        self.index = {}                 # id of a group's routing (as the caller keeps it) -> group

    def add(self, routing, group: int) -> None:
        """Remember that group ``group``'s flows are ``routing`` (on the original links,
        the object the caller will pass to :meth:`lookup`)."""
        self.index[id(routing)] = int(group)

    def lookup(self, routing, capacity):
        """The CompletionSensitivity of the group whose routing (original links) is
        ``routing``, on effective capacities ``capacity`` (the forward's), or None."""
        g = self.index.get(id(routing))
        if g is None:
            return None
        a, b = self.starts[g], self.starts[g + 1]
        base, w = routing.demands, routing.weights
        phases, clock = [], 0.0
        for active, alloc, step, finished in self.phases:
            running = active[a:b]
            if not running.any():
                continue
            bott = alloc.bottleneck[a:b]
            held = np.where(bott >= 0, self.to_original[np.maximum(bott, 0)], -1)
            rates = np.asarray(alloc.rates[a:b], dtype=np.float64)
            load = np.zeros(routing.n_links, dtype=np.asarray(alloc.link_load).dtype)   # the solver's, on the
            load[self.used[g]] = alloc.link_load[self.link_starts[g]:self.link_starts[g + 1]]   # group's links
            mine = Allocation(rates=rates, link_load=load, utilization=None, bottleneck=held, rounds=alloc.rounds,
                              converged=alloc.converged, status=Status.OK)
            build = (lambda mine=mine, demands=np.where(running, base, 0.0):
                     rate_sensitivity(routing, mine, capacity, weights=w, demands=demands))
            rows = np.flatnonzero(running)
            phases.append((rows, rates[rows], float(step[g]), np.flatnonzero(finished[a:b]),
                           _PhaseSens(build, rows, held)))
            clock += float(step[g])
        return CompletionSensitivity(routing, capacity, w, base, phases, clock)


def kept_run(completion, sizes, used, groups=None):
    """The :class:`KeptRun` of a forward ``completion`` (a :class:`~flowsolver.Completion`
    of :func:`~flowsolver.completion_times` with ``keep_phases=True``, one scenario) on a
    block of independent groups: ``sizes`` (flows,) bytes, ``used`` per group the original
    indices of its block links (in block order), ``groups`` the group of each flow
    (contiguous; None: one group). None where the forward kept no phases (too many events:
    the derivatives re-run each group). Register each group's routing with
    :meth:`KeptRun.add` before :meth:`KeptRun.lookup`.

    >>> import numpy as np, scipy.sparse as sp
    >>> from flowsolver.timing import completion_times
    >>> A = sp.csc_matrix([[1.0, 1.0]])                  # two flows on one link of 2 bytes/s
    >>> done = completion_times(A, sizes=[1.0, 3.0], capacity=[2.0], keep_phases=True)
    >>> run = kept_run(done, [1.0, 3.0], [np.arange(1)])
    >>> from flowsolver import RoutingMatrix
    >>> rm = RoutingMatrix.from_scipy(A, capacity=[2.0]); run.add(rm, 0)
    >>> cs = run.lookup(rm, np.array([2.0]))
    >>> cs.makespan, cs.gradient().tolist()             # T = (1 + 3) / c: dT/dc = -4 / c^2
    (2.0, [-1.0])
    """
    if completion.phases is None:
        return None
    sizes = np.asarray(sizes, dtype=np.float64)
    group = np.zeros(len(sizes), dtype=np.int64) if groups is None else np.asarray(groups)
    return KeptRun(sizes, group, list(used), completion.phases)


class _PhaseSens:
    """One event's RateSensitivity, built on first use (an event where no link that a
    change reaches holds a flow needs none): ``rows`` the running flows' rows of one built on
    every flow of the group, the others capped at 0 (None: built on the running flows);
    ``held`` the links that hold some flow there (the solver's bottlenecks), the only ones
    whose increase can move a rate."""

    def __init__(self, build, rows, bottleneck):
        b = np.asarray(bottleneck)
        self._build, self.rows, self.held = build, rows, np.unique(b[b >= 0])

    @cached_property
    def sens(self):
        return self._build()

    def capacity_jacobian(self, side, links=None):
        out = self.sens.capacity_jacobian(side, links)
        if self.rows is None:
            return out
        pos = np.full(out.shape[0], -1)
        pos[self.rows] = np.arange(len(self.rows))
        coo = out.tocoo()
        on = pos[coo.row] >= 0
        return sp.csr_matrix((coo.data[on], (pos[coo.row[on]], coo.col[on])), shape=(len(self.rows), out.shape[1]))

    def directional(self, dc):
        out = self.sens.directional(dc)
        return out if self.rows is None else out[self.rows]

    @property
    def one_sided_links(self):
        return self.sens.one_sided_links


def fair_makespan(routing, sizes=None, capacity=None, *, weights=None, demands=None):
    """The makespan of :func:`~flowsolver.completion_times` (s) as a JAX scalar with a custom
    JVP in ``capacity`` (links,): ``jax.grad``, ``jax.jvp`` and ``jax.jacfwd`` through every
    event of the run are exact. Where the derivative is one-sided (a tie, or flows finishing
    together that the change moves apart) ``jax.grad`` gets each link's increase alone
    (``side="up"``) and a RuntimeWarning; an eager ``jax.jvp`` gets the exact one-sided
    derivative along its tangent. Call it outside ``jax.jit``; enable 64-bit JAX for float64
    derivatives.

    >>> import jax, scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0]])                   # T = (1 + 3) / c
    >>> with jax.enable_x64(True):
    ...     g = jax.grad(lambda c: fair_makespan(A, [1.0, 3.0], c))(jax.numpy.array([2.0]))
    >>> g.tolist()
    [-1.0]
    """
    import jax.numpy as jnp

    if isinstance(routing, MergedRouting):
        raise TypeError("routing: a makespan needs one column per flow; pass the MergedRouting's original "
                        "RoutingMatrix, not the merged one")
    rm = routing if isinstance(routing, RoutingMatrix) else RoutingMatrix.from_scipy(routing)
    makespan = host_scalar(
        "fair_makespan", lambda cap: completion_sensitivity(rm, sizes, cap, weights=weights, demands=demands),
        lambda cs: cs.makespan, lambda cs, dc: cs.directional(dc), lambda cs: cs.gradient("up"),
        lambda cs: cs.any_one_sided())
    return makespan(jnp.asarray(rm.capacity if capacity is None else capacity))
