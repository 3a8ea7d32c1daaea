"""The freeze-order blocks that carry a change of capacities and caps through a bottleneck
structure (:meth:`~flowsolver.solver._sensitivity.RateSensitivity.directional`), for many
directions at once: each array has one column per direction (``dc`` (links, K), ``dd``
(flows, K), the rate changes ``dx`` (flows, K) and the load changes ``dload`` (links, K)).

A block works only on the directions that reach it (a nonzero right-hand side), so a
batch of one-link changes costs about what the links it reaches cost.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._tolerance import RTOL
from ._structure import Structure

#: triangular systems up to this size are solved dense (a 3,000-link fabric: 0.05 s)
DENSE_SOLVE = 8192

#: ... and up to this size by substitution in numpy: a BLAS triangular solve of a dozen links
#: took 4-7 ms on a 2-core machine with one core busy (its threads wait for each other)
SUBSTITUTE = 32


def solve_lower(m: sp.csc_matrix, rhs, transpose: bool = False, dense=None):
    """``m x = rhs`` (or ``m^T x = rhs``) for ``m`` lower triangular in freeze order
    (``dense``: ``m`` as a dense array, when the caller keeps one); ``rhs`` a vector or
    one column per right-hand side."""
    if m.shape[0] <= DENSE_SOLVE:
        if dense is None:
            dense = m.toarray()
            if np.triu(dense, 1).any():             # not triangular: cannot happen away from ties
                raise RuntimeError("sensitivity: the bottleneck system is not triangular in freeze order")
        if m.shape[0] <= SUBSTITUTE:
            return _substitute(dense.T if transpose else dense, np.asarray(rhs, dtype=np.float64), not transpose)
        return la.solve_triangular(dense, rhs, lower=True, trans=1 if transpose else 0)
    mat = sp.csr_matrix(m.T if transpose else m)
    return spla.spsolve_triangular(mat, rhs, lower=not transpose)


def columns(a: sp.csc_matrix, cols):
    """The entries of the columns ``cols`` of ``a``, column by column: their rows, the
    position in ``cols`` of their column, their values, and ``a[:, cols]`` (csc)."""
    start, n = a.indptr[cols], np.diff(a.indptr)[cols]
    ptr = np.concatenate([[0], np.cumsum(n)])
    idx = np.repeat(start - ptr[:-1], n) + np.arange(ptr[-1])
    rows, vals = a.indices[idx], a.data[idx]
    return rows, np.repeat(np.arange(len(cols)), n), vals, sp.csc_matrix((vals, rows, ptr), shape=(a.shape[0],
                                                                                                 len(cols)))


def _substitute(t, rhs, lower: bool):
    """``t x = rhs`` for a small dense triangular ``t`` (lower or upper), row by row."""
    x = np.zeros(rhs.shape)
    n = t.shape[0]
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        known = slice(0, i) if lower else slice(i + 1, n)
        x[i] = (rhs[i] - (t[i, known, None] * x[known]).sum(axis=0) if rhs.ndim == 2 else
                rhs[i] - (t[i, known] * x[known]).sum()) / t[i, i]
    return x


class LinearBlock:
    """Untied flows in freeze order: caps move their flows directly, the rest follow the
    triangular system of their bottleneck links."""

    def __init__(self, s: Structure, flows):
        self.capped = flows[s.bottleneck[flows] < 0]
        self.a_capped = columns(s.matrix, self.capped)[3]
        moving = flows[s.bottleneck[flows] >= 0]
        links = np.unique(s.bottleneck[moving])
        self.links = links[np.argsort(s.top[links], kind="stable")]
        pos = np.full(s.n_links, -1)
        pos[self.links] = np.arange(len(self.links))
        self.pos = pos[s.bottleneck[moving]]
        self.moving, self.w = moving, s.weights[moving]
        rows, col, vals, self.a_moving = columns(s.matrix, moving)
        # M[l, m]: the flows held at m (all of them are here: they share its level) on l
        on = pos[rows] >= 0
        self.m = sp.csc_matrix((vals[on] * self.w[col[on]], (pos[rows[on]], self.pos[col[on]])),
                               shape=(len(self.links),) * 2)
        self._dense = None

    def __call__(self, dc, dd, dx, dload):
        if len(self.capped):
            cols = np.flatnonzero(dd[self.capped].any(axis=0))
            if len(cols):
                dx[np.ix_(self.capped, cols)] = dd[np.ix_(self.capped, cols)]
                dload[:, cols] += self.a_capped @ dx[np.ix_(self.capped, cols)]
        if not len(self.moving):
            return
        rhs = dc[self.links] - dload[self.links]
        cols = np.flatnonzero(rhs.any(axis=0))
        if not len(cols):
            return
        if self._dense is None and self.m.shape[0] <= DENSE_SOLVE:
            self._dense = self.m.toarray()
        every = len(cols) == dx.shape[1]
        dt = solve_lower(self.m, rhs if every else rhs[:, cols], dense=self._dense)
        _put(dx, dload, self.moving, cols, every, self.w[:, None] * dt[self.pos], self.a_moving)


class TiedBlock:
    """Flows at one level with ties: their level changes are max-min fair among the tied
    constraints, filled from the lowest (levels may fall: the change can be negative)."""

    def __init__(self, s: Structure, flows):
        row, col, val, self.a_flows = columns(s.matrix, flows)
        top = s.saturated[row] & (s.level[flows[col]] >= s.top[row] * (1 - RTOL))
        rows, cols = row[top], col[top]
        self.links, link_of = np.unique(rows, return_inverse=True)
        self.fill = Filling(link_of, cols, val[top] * s.weights[flows[cols]], len(self.links), len(flows))
        self.flows, self.w, self.capped = flows, s.weights[flows], s.capped[flows]

    def __call__(self, dc, dd, dx, dload):
        room = dc[self.links] - dload[self.links]
        moves = room.any(axis=0)
        cap_s = None
        if self.capped.any():                       # caps that change move their flows too
            with np.errstate(divide="ignore", invalid="ignore"):
                cap_s = np.where(self.capped[:, None], dd[self.flows] / self.w[:, None], np.inf)
            moves |= (self.capped[:, None] & (cap_s != 0)).any(axis=0)
        cols = np.flatnonzero(moves)
        if not len(cols):
            return                                  # every constraint unchanged: nothing moves
        every = len(cols) == dx.shape[1]
        if cap_s is None:
            cap_s = np.full((len(self.flows), len(cols)), np.inf)
        elif not every:
            cap_s = cap_s[:, cols]
        moved = self.w[:, None] * self.fill(room if every else room[:, cols], cap_s)
        _put(dx, dload, self.flows, cols, every, moved, self.a_flows)


def _put(dx, dload, flows, cols, every, moved, a):
    """``dx[flows, cols] = moved`` and the load it adds, ``a @ moved``, into ``dload``."""
    if every:
        dx[flows] = moved
        dload += a @ moved
    else:
        dx[np.ix_(flows, cols)] = moved
        dload[:, cols] += a @ moved


class Filling:
    """Weighted max-min fair levels ``s`` (any sign) of ``aw s <= room``, ``s <= cap_level``
    for one column of ``room`` (constraints, K) and ``cap_level`` (flows, K) per direction;
    ``aw`` from COO arrays (constraint, flow, value). Rounds freeze every constraint that is
    the lowest for each of its unfrozen flows."""

    def __init__(self, row_of, col_of, val, m, n):
        self.m, self.n = m, n
        # the entries grouped by constraint and by flow, for segment sums and minima
        by_row, by_col = np.lexsort((col_of, row_of)), np.lexsort((row_of, col_of))
        self.row_col, self.row_val = col_of[by_row], val[by_row]
        self.row_has, self.row_starts = _groups(row_of, m)
        self.col_row = row_of[by_col]
        self.col_has, self.col_starts = _groups(col_of, n)

    def _per_flow(self, ufunc, per_row, empty):
        """(flows, K): ``ufunc`` over each flow's constraints of ``per_row`` (``empty`` where none)."""
        out = np.full((self.n, per_row.shape[1]), empty)
        if len(self.col_row):
            out[self.col_has] = ufunc.reduceat(per_row[self.col_row], self.col_starts, axis=0)
        return out

    def _per_row(self, ufunc, per_flow, empty):
        """(constraints, K): ``ufunc`` over each constraint's flows of ``per_flow`` (``empty`` where none)."""
        out = np.full((self.m, per_flow.shape[1]), empty)
        if len(self.row_col):
            out[self.row_has] = ufunc.reduceat(per_flow[self.row_col], self.row_starts, axis=0)
        return out

    def _aw(self, per_flow):
        """``aw @ per_flow`` (constraints, K)."""
        out = np.zeros((self.m, per_flow.shape[1]))
        if len(self.row_col):
            out[self.row_has] = np.add.reduceat(self.row_val[:, None] * per_flow[self.row_col], self.row_starts, axis=0)
        return out

    def __call__(self, room: np.ndarray, cap_level: np.ndarray) -> np.ndarray:
        s = np.zeros(cap_level.shape)
        frozen = np.zeros(cap_level.shape, dtype=bool)
        while not frozen.all():
            wsum = self._aw(~frozen)
            left = room - self._aw(np.where(frozen, s, 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(wsum > 0, left / np.where(wsum > 0, wsum, 1.0), np.inf)
            lowest = self._per_flow(np.minimum, share, np.inf)
            value = np.where(frozen, np.inf, np.minimum(lowest, cap_level))
            freeze_link = (wsum > 0) & (share <= self._per_row(np.minimum, value, np.inf))
            hit = self._per_flow(np.logical_or, freeze_link, False)
            done = ~frozen & (hit | (cap_level <= lowest))
            if not done.any():                       # cannot happen: the lowest value always freezes
                raise RuntimeError("sensitivity filling made no progress")
            s = np.where(done, value, s)
            frozen |= done
        return s


def _groups(index, n):
    """For entries sorted by ``index`` (values in [0, n)): which of the n groups have
    entries, and where each of those starts."""
    counts = np.bincount(index, minlength=n)
    return counts > 0, (np.cumsum(counts) - counts)[counts > 0]
