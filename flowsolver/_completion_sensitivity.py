"""Exact derivatives of a makespan (:func:`~flowsolver.completion_times`, all flows from 0)
with respect to link capacities, through the event-driven solve.

Between events the rates are one max-min solve (phase ``k``: active flows, rates ``r``,
duration ``D_k``); the flows ``F_k`` finishing at its end satisfy ``R_f = r_f D_k`` with
``R_f`` their bytes left. Differentiating, ``dD_k = (dR_f - D_k dr_f) / r_f`` and the
survivors carry ``dR = dR - D_k dr - r dD_k`` into the next phase; ``dr`` is the phase's rate
derivative (:func:`~flowsolver.solver.rate_sensitivity`). The makespan's derivative is the
sum of the ``dD_k``, the last phase's being the largest over its finishing flows for an
increase (the smallest for a decrease): the derivative of a maximum is one-sided. Flows that
finish together before the last phase but would drift apart under the change make the
derivative depend on the new event order; those entries are NaN (flagged, never guessed).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .routing import RoutingMatrix
from ._status import Status
from .solver import Allocation, max_min_fair, rate_sensitivity
from .solver._jax import host_scalar
from .timing import _routing_and_sizes

__all__ = ["completion_sensitivity", "CompletionSensitivity", "fair_makespan", "KeptRun"]

#: relative tolerance for flows finishing at one event (the one of ``completion_times``)
EVENT_RTOL = 1e-9


class CompletionSensitivity:
    """The phases of an event-driven run and the derivatives of its makespan (see
    :func:`completion_sensitivity`)."""

    def __init__(self, matrix, capacity, weights, demands, phases, makespan):
        self.matrix, self.capacity, self.weights, self.demands = matrix, capacity, weights, demands
        self.shape = matrix.shape if hasattr(matrix, "shape") else (matrix.n_links, matrix.n_flows)
        self.phases = phases            # [(active flows, rates, duration, finishing flows, RateSensitivity)]
        self.makespan = makespan

    def gradient(self, side: str = "up") -> np.ndarray:
        """d makespan / d capacity of each link alone (links,), seconds per byte/s:
        ``side="up"`` for an increase, ``"down"`` for a decrease. NaN where the change would
        reorder flows that finish together before the last event."""
        n_links = self.shape[0]
        tangents = [ph[4].capacity_jacobian(side) for ph in self.phases]
        return self._chain(tangents, n_links, side)

    def one_sided(self) -> np.ndarray:
        """Links (after :meth:`gradient`) whose makespan derivative may depend on the sign of
        the change: one-sided in some phase, or moving the flows that finish last unequally."""
        if not hasattr(self, "_last_spread"):
            self.gradient("up")
        flagged = self._last_spread.copy()
        for ph in self.phases:
            flagged |= ph[4].one_sided_links
        return flagged

    def directional(self, d_capacity, side: str = "up") -> float:
        """The one-sided derivative of the makespan along ``d_capacity`` (links,), seconds per
        unit of the step (``side="down"``: for the step ``-d_capacity``, sign as for "up")."""
        dc = np.asarray(d_capacity, dtype=np.float64)
        tangents = []
        for active, _, _, _, sens in self.phases:
            col = sens.directional(dc) if side == "up" else -sens.directional(-dc)
            tangents.append(sp.csc_matrix(col[:, None]))
        return float(self._chain(tangents, 1, side)[0])

    def _chain(self, tangents, n_dir: int, side: str) -> np.ndarray:
        n = self.shape[1]
        d_left = sp.csr_matrix((n, n_dir))
        total = np.zeros(n_dir)
        unknown = np.zeros(n_dir, dtype=bool)
        for k, ((active, rates, duration, finishing, _), dr_active) in enumerate(zip(self.phases, tangents)):
            embed = sp.csr_matrix((np.ones(len(active)), (active, np.arange(len(active)))), shape=(n, len(active)))
            dr = embed @ sp.csr_matrix(dr_active)
            r = np.zeros(n)
            r[active] = rates
            inv = sp.diags(1.0 / r[finishing])
            d_end = (inv @ (d_left[finishing] - duration * dr[finishing])).tocsc()
            hi = np.asarray(d_end.max(axis=0).todense()).ravel()
            lo = np.asarray(d_end.min(axis=0).todense()).ravel()
            if k == len(self.phases) - 1:
                total += hi if side == "up" else lo
                self._last_spread = np.abs(hi - lo) > 1e-9 * np.maximum(np.abs(hi), np.abs(lo))
                break
            unknown |= np.abs(hi - lo) > 1e-9 * np.maximum(np.abs(hi), np.abs(lo)) + 1e-300
            total += hi
            survivors = np.setdiff1d(active, finishing)
            in_s = np.isin(np.arange(n), survivors).astype(np.float64)
            shift = sp.csr_matrix((r * in_s)[:, None]) @ sp.csr_matrix(hi[None, :])
            d_left = sp.diags(in_s) @ (d_left - duration * dr) - shift
        return np.where(unknown, np.nan, total)


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
        done = to_go <= duration * (1 + EVENT_RTOL)
        phases.append((active, rates, duration, active[done], rate_sensitivity(sub, alloc, cap, weights=w[active],
                                                                               demands=d[active])))
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
        self.index = {}                 # id of a group's routing (as the caller keeps it) -> group

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
            mine = Allocation(rates=rates, link_load=None, utilization=None, bottleneck=held, rounds=alloc.rounds,
                              converged=alloc.converged, status=Status.OK)
            demands = np.where(running, base, 0.0)
            sens = rate_sensitivity(routing, mine, capacity, weights=w, demands=demands)
            rows = np.flatnonzero(running)
            phases.append((rows, rates[rows], float(step[g]), np.flatnonzero(finished[a:b]), _Rows(sens, rows)))
            clock += float(step[g])
        return CompletionSensitivity(routing, capacity, w, base, phases, clock)


class _Rows:
    """The running flows' rows of an event's RateSensitivity (built on every flow of the
    group, the others capped at 0): what a phase of :class:`CompletionSensitivity` needs."""

    def __init__(self, sens, rows):
        self.sens, self.rows = sens, rows

    def capacity_jacobian(self, side):
        return self.sens.capacity_jacobian(side).tocsr()[self.rows]

    def directional(self, dc):
        return self.sens.directional(dc)[self.rows]

    @property
    def one_sided_links(self):
        return self.sens.one_sided_links


def fair_makespan(routing, sizes=None, capacity=None, *, weights=None, demands=None):
    """The makespan of :func:`~flowsolver.completion_times` (s) as a JAX scalar with a custom
    JVP in ``capacity`` (links,): ``jax.grad``, ``jax.jvp`` and ``jax.jacfwd`` through every
    event of the run are exact. Where the derivative is one-sided (flows finishing last
    together, a tie) ``jax.grad`` gets each link's increase alone (``side="up"``) and a
    RuntimeWarning; an eager ``jax.jvp`` gets the exact one-sided derivative along its tangent.
    Call it outside ``jax.jit``; enable 64-bit JAX for float64 derivatives.

    >>> import jax, scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0]])                   # T = (1 + 3) / c
    >>> with jax.enable_x64(True):
    ...     g = jax.grad(lambda c: fair_makespan(A, [1.0, 3.0], c))(jax.numpy.array([2.0]))
    >>> g.tolist()
    [-1.0]
    """
    import jax.numpy as jnp

    rm = routing if isinstance(routing, RoutingMatrix) else RoutingMatrix.from_scipy(sp.csc_matrix(routing))
    makespan = host_scalar(
        "fair_makespan", lambda cap: completion_sensitivity(rm, sizes, cap, weights=weights, demands=demands),
        lambda cs: cs.makespan, lambda cs, dc: cs.directional(dc), lambda cs: cs.gradient("up"),
        lambda cs: cs.one_sided(),
        "flows finishing together before the last event would drift apart: the derivative depends on the new "
        "event order (NaN in gradient())")
    return makespan(jnp.asarray(rm.capacity if capacity is None else capacity))
