"""Exact derivatives of max-min fair rates with respect to link capacities and demand caps.

Within one bottleneck structure (:mod:`._structure`) every flow bottlenecked at link ``m``
runs at ``w_f t_m``, and each bottleneck link's level solves

    sum over its flows f of A[m, f] w_f t_m  =  c_m - (load of the flows it carries that froze
                                                       earlier, elsewhere or at their cap)

a triangular system in freeze order (``M t = c - A_cap d``, ``M[l, m]`` = sum over the
flows bottlenecked at ``m`` of ``A[l, f] w_f``). Its solution is linear in ``c`` and ``d``:
derivatives of every rate, and of any function of the rates by one adjoint solve. At a tie
the rates are still continuous and piecewise linear, but the derivative depends on the
sign of the change: the one-sided derivative along a direction is itself a max-min fair
problem on the tied flows (their level changes are filled, lowest first, into what the
change leaves each tied constraint), solved here in freeze order (:meth:`directional`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ._structure import Structure, _close, batches

#: what ``side`` may be: the derivative for an increase ("up") or a decrease ("down")
SIDES = ("up", "down")


class RateSensitivity:
    """Derivatives of one scenario's rates (see :func:`rate_sensitivity`)."""

    def __init__(self, structure: Structure):
        self.structure = s = structure
        self._batches = batches(s)
        self._tied_batch = [bool((s.n_constraints[f] >= 2).any()) for f in self._batches]
        k = s.bottleneck_links
        self._linear = k[~s.one_sided_link[k]]             # bottleneck links with two-sided derivatives
        self._m_linear = s.coupling[self._linear][:, self._linear].tocsc()

    # ------------------------------------------------------------------ masks
    @property
    def one_sided_links(self) -> np.ndarray:
        """Links whose capacity derivative depends on the sign of the change (a tie)."""
        return self.structure.one_sided_link

    @property
    def one_sided_caps(self) -> np.ndarray:
        """Flows whose demand-cap derivative depends on the sign of the change."""
        return self.structure.one_sided_cap

    def graph(self, groups=None, link_names=None):
        """The bottleneck structure as a networkx DiGraph (link -> flow where the flow is
        held, flow -> link where it only passes a saturated link); ``groups``: one label per
        flow to merge flows into one node each (see ``flowsolver.solver._graph``)."""
        from ._graph import bottleneck_graph

        return bottleneck_graph(self.structure, groups, link_names)

    # ------------------------------------------------------------------ directional
    def directional(self, d_capacity=None, d_demands=None) -> np.ndarray:
        """Exact one-sided derivative of every rate along ``(d_capacity, d_demands)``:
        ``lim_{e -> 0+} (rates(c + e dc, d + e dd) - rates(c, d)) / e``, per flow (rate per
        unit of the step). The derivative for a decrease is ``-directional(-dc, -dd)``."""
        s = self.structure
        dc = np.zeros(s.n_links) if d_capacity is None else np.asarray(d_capacity, dtype=np.float64)
        dd = np.zeros(s.n_flows) if d_demands is None else np.asarray(d_demands, dtype=np.float64)
        dx = np.zeros(s.n_flows)
        dload = np.zeros(s.n_links)
        i = 0
        while i < len(self._batches):
            j = i
            while j < len(self._batches) and not self._tied_batch[j]:
                j += 1
            if j > i:
                flows = np.concatenate(self._batches[i:j])
                self._linear_block(flows, dc, dd, dx, dload)
                i = j
                continue
            self._tied_block(self._batches[i], dc, dd, dx, dload)
            i += 1
        return dx

    def _linear_block(self, flows, dc, dd, dx, dload):
        """Flows without ties: their caps move them directly, the rest by the triangular system."""
        s = self.structure
        capped = flows[s.bottleneck[flows] < 0]
        dx[capped] = np.where(np.isfinite(dd[capped]), dd[capped], 0.0)
        dload += s.matrix[:, capped] @ dx[capped]
        moving = flows[s.bottleneck[flows] >= 0]
        if len(moving) == 0:
            return
        links = np.unique(s.bottleneck[moving])
        rhs = dc[links] - dload[links]
        m = s.coupling[links][:, links].tocsc()
        dt = np.atleast_1d(spla.spsolve(m, rhs)) if len(links) > 1 else rhs / m.toarray()[0, 0]
        pos = np.searchsorted(links, s.bottleneck[moving])
        dx[moving] = s.weights[moving] * dt[pos]
        dload += s.matrix[:, moving] @ dx[moving]

    def _tied_block(self, flows, dc, dd, dx, dload):
        """Flows at one level with ties: their level changes are max-min fair among the tied
        constraints, filled from the lowest (levels may fall: the change can be negative)."""
        s = self.structure
        sub = s.matrix[:, flows].tocoo()
        top = s.saturated[sub.row] & _close(s.level[flows[sub.col]], s.top[sub.row])
        rows, cols = sub.row[top], sub.col[top]
        links, link_of = np.unique(rows, return_inverse=True)
        aw = sp.csr_matrix((sub.data[top] * s.weights[flows[cols]], (link_of, cols)),
                           shape=(len(links), len(flows)))
        room = dc[links] - dload[links]
        cap_s = np.where(s.capped[flows], dd[flows] / s.weights[flows], np.inf)
        cap_s = np.where(np.isnan(cap_s), np.inf, cap_s)
        ds = _fill(aw, room, cap_s)
        dx[flows] = s.weights[flows] * ds
        dload += s.matrix[:, flows] @ dx[flows]

    # ------------------------------------------------------------------ gradients
    def gradient(self, g, side: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Derivatives of ``sum_f g_f rate_f`` with respect to every link capacity (links,)
        and every demand cap (flows,), dimensionless (bytes/s per bytes/s, times ``g``).

        ``side``: ``None`` requires two-sided derivatives (a ValueError names the one-sided
        links and caps); ``"up"`` or ``"down"`` gives each link's and cap's derivative for an
        increase or a decrease of that one link or cap alone."""
        s = self.structure
        g = np.asarray(g, dtype=np.float64)
        if g.shape != (s.n_flows,):
            raise ValueError(f"g must have shape ({s.n_flows},) - one weight per flow - got {g.shape}")
        self._check_side(side)
        gk = np.bincount(s.bottleneck[s.bottleneck >= 0], weights=(g * s.weights)[s.bottleneck >= 0],
                         minlength=s.n_links)
        y = np.zeros(s.n_links)
        if len(self._linear):
            y[self._linear] = np.atleast_1d(spla.spsolve(self._m_linear.T.tocsc(), gk[self._linear])) \
                if len(self._linear) > 1 else gk[self._linear] / self._m_linear.toarray()[0, 0]
        grad_d = np.where(s.capped & ~s.one_sided_cap, g - s.matrix.T @ y, 0.0)
        grad_c = y
        for l in np.flatnonzero(s.one_sided_link):
            grad_c[l] = g @ self._one_link(l, side)
        for f in np.flatnonzero(s.one_sided_cap):
            e = np.zeros(s.n_flows)
            e[f] = 1.0
            grad_d[f] = g @ self._side(None, e, side)
        return grad_c, grad_d

    def capacity_jacobian(self, side: str | None = None) -> sp.csc_matrix:
        """d rate_f / d c_l for every flow and link: sparse (flows x links), dimensionless.
        ``side`` as in :meth:`gradient`."""
        s = self.structure
        self._check_side(side)
        cols = [self._linear_columns()]
        for l in np.flatnonzero(s.one_sided_link):
            col = self._one_link(l, side)
            nz = np.flatnonzero(col)
            cols.append(sp.csc_matrix((col[nz], (nz, np.full(len(nz), l))), shape=(s.n_flows, s.n_links)))
        return sp.csc_matrix(sum(cols[1:], cols[0]))

    def demand_jacobian(self, side: str | None = None) -> sp.csc_matrix:
        """d rate_f / d cap_g for every pair of flows: sparse (flows x flows), dimensionless;
        nonzero only in the columns of flows running at their cap. ``side`` as in
        :meth:`gradient`."""
        s = self.structure
        self._check_side(side)
        n = s.n_flows
        lin = np.flatnonzero(s.capped & ~s.one_sided_cap)
        out = sp.csc_matrix((np.ones(len(lin)), (lin, lin)), shape=(n, n))
        if len(lin) and len(self._linear):
            cross = s.matrix[self._linear][:, lin]                   # (linear links x capped flows)
            moved = (self._linear_columns()[:, self._linear] @ cross).tocoo()
            out = out - sp.csc_matrix((moved.data, (moved.row, lin[moved.col])), shape=(n, n))
        for f in np.flatnonzero(s.one_sided_cap):
            e = np.zeros(n)
            e[f] = 1.0
            col = self._side(None, e, side)
            nz = np.flatnonzero(col)
            out = out + sp.csc_matrix((col[nz], (nz, np.full(len(nz), f))), shape=(n, n))
        return sp.csc_matrix(out)

    def _linear_columns(self) -> sp.csc_matrix:
        s = self.structure
        n, L = s.n_flows, s.n_links
        if not len(self._linear):
            return sp.csc_matrix((n, L))
        inv = spla.inv(self._m_linear) if len(self._linear) > 1 else sp.csc_matrix(1.0 / self._m_linear.toarray())
        pos = np.full(L, -1)
        pos[self._linear] = np.arange(len(self._linear))
        f = np.flatnonzero((s.bottleneck >= 0) & (pos[np.maximum(s.bottleneck, 0)] >= 0))
        pw = sp.csr_matrix((s.weights[f], (f, pos[s.bottleneck[f]])), shape=(n, len(self._linear)))
        out = (pw @ sp.csc_matrix(inv)).tocoo()
        return sp.csc_matrix((out.data, (out.row, self._linear[out.col])), shape=(n, L))

    # ------------------------------------------------------------------ one-sided pieces
    def _check_side(self, side):
        s = self.structure
        if side is None:
            n_l, n_c = int(s.one_sided_link.sum()), int(s.one_sided_cap.sum())
            if n_l or n_c:
                first = np.flatnonzero(s.one_sided_link)[:5].tolist()
                raise ValueError(f"side: {n_l} links (first {first}) and {n_c} demand caps sit at a tie, where the "
                                 "derivative depends on the sign of the change; pass side='up' (an increase) or "
                                 "side='down' (a decrease)")
        elif side not in SIDES:
            raise ValueError(f"side must be None, 'up' or 'down', got {side!r}")

    def _one_link(self, l, side):
        s = self.structure
        if side == "up" and not ((s.bottleneck == l) & (s.n_constraints == 1)).any():
            return np.zeros(s.n_flows)      # every flow it holds is held as tightly elsewhere
        e = np.zeros(s.n_links)
        e[l] = 1.0
        return self._side(e, None, side)

    def _side(self, dc, dd, side):
        if side == "up":
            return self.directional(dc, dd)
        return -self.directional(None if dc is None else -dc, None if dd is None else -dd)


def _fill(aw: sp.csr_matrix, room: np.ndarray, cap_level: np.ndarray) -> np.ndarray:
    """Weighted max-min fair levels ``s`` (any sign) of ``aw s <= room``, ``s <= cap_level``:
    rounds freeze every constraint that is the lowest for each of its unfrozen flows."""
    n = aw.shape[1]
    s = np.zeros(n)
    frozen = np.zeros(n, dtype=bool)
    csc = aw.tocsc()
    row_of = csc.indices
    col_of = np.repeat(np.arange(n), np.diff(csc.indptr))
    while not frozen.all():
        live = (~frozen).astype(np.float64)
        wsum = aw @ live
        left = room - aw @ np.where(frozen, s, 0.0)
        share = np.where(wsum > 0, left / np.where(wsum > 0, wsum, 1.0), np.inf)
        lowest = np.full(n, np.inf)
        np.minimum.at(lowest, col_of, share[row_of])
        value = np.where(frozen, np.inf, np.minimum(lowest, cap_level))
        link_low = np.full(aw.shape[0], np.inf)
        np.minimum.at(link_low, row_of, value[col_of])
        freeze_link = (wsum > 0) & (share <= link_low)
        hit = np.zeros(n, dtype=bool)
        hit[col_of[freeze_link[row_of]]] = True
        done = ~frozen & (hit | (cap_level <= lowest))
        if not done.any():                       # cannot happen: the lowest value always freezes
            raise RuntimeError("sensitivity filling made no progress")
        s = np.where(done, value, s)
        frozen |= done
    return s
