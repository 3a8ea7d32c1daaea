"""A float method's result settled (:func:`settle`): a float32 dense scenario whose residuals
cancel re-solved in float64 (:mod:`._float32`), and every ill-conditioned scenario
(:func:`~._conditioning.factored_error_factor` above :data:`~._conditioning.LIMITS`) re-solved
exactly, or reported."""

from __future__ import annotations

from dataclasses import replace

import jax
import numpy as np

from . import _conditioning, _dense, _exact, _float32
from ._allocation import Raw

__all__ = ["settle"]


def settle(problem, raw, method: str):
    """``raw`` (a float method's result) with every ill-conditioned scenario re-solved
    exactly, and the mask of the scenarios of a batch that could not be (too large). A
    single ill-conditioned scenario too large to solve exactly raises ``ValueError``.
    ``method``: the method that ran (``"dense"`` in float32 is held to float32's limit, and
    first re-solved in float64 where its residuals cancel: :mod:`~flowsolver.solver._float32`,
    whatever the spread)."""
    rm = problem.routing
    redone = ill32 = None
    if method == "dense" and np.dtype(problem.dtype) == np.float32:
        raw, ill32, redone = _recheck_float32(problem, raw)
    if method == "exact" or _conditioning.trusted(rm, problem.weights):
        return raw, ill32
    raw, ill = _settle_spread(problem, raw, method, redone)
    if ill32 is None or ill is None:
        return raw, ill if ill32 is None else ill32
    return raw, ill | ill32


def _settle_spread(problem, raw, method: str, redone=None):
    """:func:`settle` past the spread test (``redone``: scenarios already re-solved and checked
    in float64, skipped)."""
    rm = problem.routing
    limit = _conditioning.LIMITS[np.dtype(problem.dtype) if method == "dense" else np.dtype("float64")]
    single = problem.batch is None
    # problem arrays may be shared by every scenario (1-D); a batch's results never are
    pick = (lambda a, i: a) if single else (lambda a, i: a if a.ndim == 1 else a[i])  # noqa: E731
    mine = (lambda a, i: a) if single else (lambda a, i: a[i])  # noqa: E731
    bad = []
    for i in range(1 if single else problem.batch):
        if not bool(mine(raw.converged, i)) or (redone is not None and redone[i]):
            continue
        factor = _conditioning.factored_error_factor(rm, pick(problem.capacity, i), pick(problem.weights, i),
                                       np.asarray(mine(raw.rates, i), dtype=np.float64), mine(raw.bottleneck, i),
                                       pick(problem.demands, i))
        if not factor <= limit:
            bad.append(i)
    if not bad:
        return raw, None
    if not _exact.fits(rm):
        if single:
            wide = _conditioning.spread(rm, problem.weights) > _conditioning.SPREAD_TRUSTED
            raise ValueError(
                f"weights: the rates of this problem are ill-conditioned in {problem.dtype}: "
                + ("flows that get a tiny part of a link beside flows of much larger weight x fraction" if wide else
                   "a chain of links whose residuals (capacity less the load frozen on them earlier) cancel, each "
                   "multiplying the rounding error passed to it")
                + f" (error factor > {limit:.0e}) cannot be computed to 1e-9 by subtracting loads, and the problem "
                f"({rm.expanded_nnz:,} link-flow pairs) is beyond method='exact' ({_exact.EXACT_PAIRS:,}); "
                + (f"bring the weights (and fractions) on shared links within {_conditioning.SPREAD_TRUSTED:.0e} of "
                   "each other" if wide else "solve a smaller part of it with method='exact'"))
        ill = np.zeros(problem.batch, dtype=bool)
        ill[bad] = True
        return raw, ill
    fields = [_copy(a) for a in raw[:5]]        # utilizations recomputed from the loads
    A_csc = rm.to_scipy("csc")                          # small: it fits method='exact'
    for i in bad:
        one = _exact.solve_one(A_csc, pick(problem.capacity, i), pick(problem.weights, i), pick(problem.demands, i),
                               pick(problem.unbounded, i), problem.max_rounds)
        if single:
            fields = [_like(v, f) for v, f in zip(one, fields)]
        else:
            for f, v in zip(fields, one):
                if f is not None:       # (no loads without per_link)
                    f[i] = v
    return Raw(*fields), None


def _recheck_float32(problem, raw):
    """``raw`` (a float32 dense result) with every scenario whose
    :func:`~flowsolver.solver._float32.estimates` exceeds :data:`~flowsolver.solver._float32.LIMIT`
    re-solved in float64 (dense method, then the float64 check of :func:`settle`) and rounded
    to float32. Returns the raw result, the ILL_CONDITIONED mask of a batch from those
    re-solves (or None), and the re-solved scenarios (a boolean mask; a single scenario: shape (1,))."""
    single = problem.batch is None
    as2 = (lambda a: np.asarray(a)[None]) if single else np.asarray      # noqa: E731
    est = _float32.estimates(problem.routing, problem.capacity, problem.weights, as2(raw.rates), as2(raw.bottleneck),
                             as2(raw.converged).reshape(-1), _conditioning._fraction_range(problem.routing)[1])
    redo = est > _float32.LIMIT
    if not redo.any():
        return raw, None, redo
    bad = np.flatnonzero(redo)
    pick = (lambda a: a) if single else (lambda a: a if a.ndim == 1 else a[bad])   # noqa: E731
    sub = replace(problem, capacity=pick(problem.capacity), weights=pick(problem.weights),
                  demands=pick(problem.demands), unbounded=pick(problem.unbounded),
                  batch=None if single else len(bad), dtype=np.dtype("float64"), invalid=None, given=None)
    with jax.enable_x64(True):
        raw64 = _dense.solve(sub)
    raw64, ill64 = settle(sub, raw64, "dense")
    if single:
        return Raw(*(_like(v, f) for v, f in zip(raw64[:5], raw[:5]))), None, redo
    fields = [_copy(f) for f in raw[:5]]        # utilizations recomputed from the loads
    for f, v in zip(fields, raw64[:5]):
        if f is not None:
            f[bad] = np.asarray(v).astype(f.dtype)
    ill = None
    if ill64 is not None:
        ill = np.zeros(problem.batch, dtype=bool)
        ill[bad] = ill64
    return Raw(*fields), ill, redo


def _copy(a):
    """A writable copy of a result field (None: a field not computed, the loads without ``per_link``)."""
    return None if a is None else np.array(a, copy=True)


def _like(value, field):
    """``value`` in ``field``'s dtype (None where the field was not computed)."""
    return None if field is None else np.asarray(value).astype(np.asarray(field).dtype)
