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

from ._structure import TIE_RTOL, Structure

#: triangular systems up to this size are solved dense (a 3,000-link fabric: 0.05 s)
DENSE_SOLVE = 8192


def solve_lower(m: sp.csc_matrix, rhs, transpose: bool = False, dense=None):
    """``m x = rhs`` (or ``m^T x = rhs``) for ``m`` lower triangular in freeze order
    (``dense``: ``m`` as a dense array, when the caller keeps one); ``rhs`` a vector or
    one column per right-hand side."""
    if m.shape[0] <= DENSE_SOLVE:
        if dense is None:
            dense = m.toarray()
            if np.triu(dense, 1).any():             # not triangular: cannot happen away from ties
                raise RuntimeError("sensitivity: the bottleneck system is not triangular in freeze order")
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
        top = s.saturated[row] & (s.level[flows[col]] >= s.top[row] * (1 - TIE_RTOL))
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
        self.aw = sp.csr_matrix((val, (row_of, col_of)), shape=(m, n))
        self.at = sp.csr_matrix((np.ones(len(val)), (col_of, row_of)), shape=(n, m))   # pattern, by flow
        # the entries grouped by constraint (aw) and by flow (at), for segment minima
        self.row_has = np.diff(self.aw.indptr) > 0
        self.row_starts, self.row_col = self.aw.indptr[:-1][self.row_has], self.aw.indices
        self.col_has = np.diff(self.at.indptr) > 0
        self.col_starts, self.col_row = self.at.indptr[:-1][self.col_has], self.at.indices

    def _per_flow_min(self, per_row):
        """(flows, K): the smallest value over each flow's constraints (inf where none)."""
        out = np.full((self.n, per_row.shape[1]), np.inf)
        if len(self.col_row):
            out[self.col_has] = np.minimum.reduceat(per_row[self.col_row], self.col_starts, axis=0)
        return out

    def _per_row_min(self, per_flow):
        """(constraints, K): the smallest value over each constraint's flows (inf where none)."""
        out = np.full((self.m, per_flow.shape[1]), np.inf)
        if len(self.row_col):
            out[self.row_has] = np.minimum.reduceat(per_flow[self.row_col], self.row_starts, axis=0)
        return out

    def __call__(self, room: np.ndarray, cap_level: np.ndarray) -> np.ndarray:
        s = np.zeros(cap_level.shape)
        frozen = np.zeros(cap_level.shape, dtype=bool)
        while not frozen.all():
            wsum = self.aw @ (~frozen).astype(np.float64)
            left = room - self.aw @ np.where(frozen, s, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(wsum > 0, left / np.where(wsum > 0, wsum, 1.0), np.inf)
            lowest = self._per_flow_min(share)
            value = np.where(frozen, np.inf, np.minimum(lowest, cap_level))
            freeze_link = (wsum > 0) & (share <= self._per_row_min(value))
            hit = (self.at @ freeze_link.astype(np.float64)) > 0
            done = ~frozen & (hit | (cap_level <= lowest))
            if not done.any():                       # cannot happen: the lowest value always freezes
                raise RuntimeError("sensitivity filling made no progress")
            s = np.where(done, value, s)
            frozen |= done
        return s
