"""The result type of :func:`~flowsolver.max_min_fair` and its assembly from a method's raw
output (rates, loads, bottlenecks, rounds, convergence)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import numpy as np

from .._status import Status
from ..routing import MergedRouting
from ._problem import Problem, _link_sums


class Raw(NamedTuple):
    """What a method's ``solve`` returns: host arrays in the problem's dtype, with a leading
    scenario axis for a batch."""

    rates: np.ndarray           # (flows,) bytes/s; unbounded flows of a batch 0
    load: np.ndarray            # (links,) bytes/s
    bottleneck: np.ndarray      # (flows,) int: link, or -1 (held by its cap)
    rounds: np.ndarray          # int
    converged: np.ndarray       # bool
    utilization: np.ndarray | None = None   # load / capacity where the method computed it


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Allocation:
    """Result of :func:`max_min_fair` (an immutable JAX pytree of host NumPy arrays, so
    that float64 results stay float64 whatever JAX's 64-bit mode).

    With a batch, every field has a leading scenario axis.

    Attributes
    ----------
    rates : array (flows,)
        Rate of each flow, bytes/s (``inf`` for an unbounded flow of a batched scenario).
    link_load : array (links,) or None
        ``A @ rates``, bytes/s (None where :func:`max_min_fair` ran with ``per_link=False``).
    utilization : array (links,) or None
        ``link_load / capacity`` (0 on an unused zero-capacity link; None as ``link_load``).
    bottleneck : int array (flows,)
        A saturated link on which the flow has the largest ``rate / weight``, or -1 where
        the flow is held by its demand cap (or, in a batch's ``UNBOUNDED`` scenario, has no
        bound: its rate ``inf``).
    rounds : int
        Rounds taken.
    converged : bool
        All flows frozen within ``max_rounds``.
    status : Status or int array
        :class:`~flowsolver.Status` ``OK``, ``NOT_CONVERGED``, ``UNBOUNDED`` or
        ``ILL_CONDITIONED`` (a batch: an int array of Status values, one per scenario; a
        scenario of a batch whose own row holds a bad capacity, weight or cap, which a single
        solve refuses with ``ValueError``, reports ``FAILED`` with NaN rates and loads, and a
        ``RuntimeWarning`` names its entry).
    capacity, weights, demands : array or None
        What the rates were solved with (bytes/s; per link, per flow, per flow; with a
        leading scenario axis where the input had one), so that
        :func:`~flowsolver.rate_sensitivity` needs no repetition and cannot disagree. None
        on allocations assembled by hand.
    """

    rates: np.ndarray
    link_load: np.ndarray
    utilization: np.ndarray
    bottleneck: np.ndarray
    rounds: np.ndarray
    converged: np.ndarray
    status: Status | np.ndarray
    capacity: np.ndarray | None = None
    weights: np.ndarray | None = None
    demands: np.ndarray | None = None

    @property
    def ok(self):
        """True where the scenario solved cleanly."""
        return self.status == Status.OK


def utilization(load, cap):
    """``load / cap`` per link (float64 from float64 inputs), 0 on an unused zero-capacity
    link, inf on a loaded one.

    >>> utilization(np.array([1.0, 0.0, 2.0]), np.array([2.0, 0.0, 0.0])).tolist()
    [0.5, 0.0, inf]
    """
    load, cap = np.asarray(load), np.asarray(cap)
    shape = np.broadcast_shapes(load.shape, cap.shape)
    live = cap > 0
    out = np.divide(load, cap, out=np.zeros(shape, np.result_type(load.dtype, np.float32)), where=live)
    out[~live & (load > 0)] = np.inf                  # one pass each: batches of millions of links
    return out


def allocation(problem: Problem, raw: Raw, ill=None) -> Allocation:
    """The Allocation of ``raw``: utilizations, ``inf`` rates for unbounded flows, statuses
    (``ill``: scenarios of a batch reported ``ILL_CONDITIONED``)."""
    rates, load, bneck, rounds, conv = raw[:5]
    if not problem.per_link:            # (a single solve's method may have computed them)
        load = util = None
    elif raw.utilization is not None:
        util = raw.utilization
    else:
        capb = problem.capacity if problem.batch is None else np.broadcast_to(
            problem.capacity, (problem.batch, problem.routing.n_links))
        util = utilization(load, capb).astype(rates.dtype, copy=False)
    ubr = np.broadcast_to(problem.unbounded, rates.shape)
    if ubr.any():                       # (a batch's rates can be millions: no copy otherwise)
        rates = np.where(ubr, np.inf, rates).astype(rates.dtype)
        if load is not None:            # A @ rates: inf on the (infinite) links an unbounded flow crosses
            crossed = _link_sums(problem.routing, np.atleast_2d(ubr).astype(np.float64)).reshape(load.shape) > 0
            load = np.where(crossed, np.inf, load).astype(load.dtype)
    status = np.where(np.any(ubr, axis=-1), Status.UNBOUNDED,
                      np.where(conv, Status.OK, Status.NOT_CONVERGED)).astype(np.int32)
    if ill is not None:
        status = np.where(ill, np.int32(Status.ILL_CONDITIONED), status).astype(np.int32)
    cap, w, d = problem.capacity, problem.weights, problem.demands
    if problem.invalid:                 # a batch's scenarios with a bad entry: FAILED, NaN figures
        bad = np.zeros(problem.batch, dtype=bool)
        bad[list(problem.invalid)] = True
        status = np.where(bad, np.int32(Status.FAILED), status).astype(np.int32)
        rates, load, util = (None if a is None else np.where(bad[:, None], np.nan, a).astype(a.dtype)
                             for a in (rates, load, util))
        cap, w, d = problem.given        # what was passed (the solve ran on harmless stand-ins)
    if problem.batch is None:
        status = Status(int(status))
    return Allocation(rates=rates, link_load=load, utilization=util, bottleneck=bneck, rounds=rounds,
                      converged=conv, status=status, capacity=cap, weights=w, demands=d)


def expand(out: Allocation, merged: MergedRouting) -> Allocation:
    """The allocation of the flows before merging: each merged flow's rate split evenly (and
    its weight and cap: a class of ``m`` flows was one flow of weight ``m w``, cap ``m d``)."""
    inv = merged.inverse
    counts = merged.counts.astype(out.rates.dtype)
    per_flow = lambda a: None if a is None else a[..., inv] / merged.counts[inv]  # noqa: E731
    return Allocation(rates=out.rates[..., inv] / counts[inv], link_load=out.link_load,
                      utilization=out.utilization, bottleneck=out.bottleneck[..., inv],
                      rounds=out.rounds, converged=out.converged, status=out.status, capacity=out.capacity,
                      weights=per_flow(out.weights), demands=per_flow(out.demands))
