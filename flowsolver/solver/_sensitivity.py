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

from ._structure import TIE_RTOL, Structure, batches

#: what ``side`` may be: the derivative for an increase ("up") or a decrease ("down")
SIDES = ("up", "down")


class RateSensitivity:
    """Derivatives of one scenario's rates (see :func:`rate_sensitivity`)."""

    def __init__(self, structure: Structure):
        self.structure = s = structure
        k = s.bottleneck_links
        k = k[~s.one_sided_link[k]]                         # bottleneck links with two-sided derivatives
        self._linear = k[np.argsort(s.top[k], kind="stable")]   # in freeze order: M is lower triangular
        # (every bottleneck tied, as each NIC of an evenly split all-to-all: no coupling to build)
        self._m_linear = s.coupling[self._linear][:, self._linear].tocsc() if len(k) else sp.csc_matrix((0, 0))

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
        if dc.shape != (s.n_links,) or dd.shape != (s.n_flows,):
            raise ValueError(f"d_capacity must have shape ({s.n_links},) and d_demands ({s.n_flows},), got "
                             f"{dc.shape} and {dd.shape}")
        dd = np.where(s.capped & np.isfinite(dd), dd, 0.0)      # only caps that hold a flow count
        plan, link_block, flow_block = self._plan()
        first = [link_block[np.flatnonzero(dc)], flow_block[np.flatnonzero(dd)]]
        first = np.concatenate(first)
        first = first[first >= 0]
        dx = np.zeros(s.n_flows)
        if not len(first):
            return dx                         # only unsaturated links: nothing moves
        dload = np.zeros(s.n_links)
        for block in plan[int(first.min()):]:
            block(dc, dd, dx, dload)
        return dx

    def _plan(self):
        """The freeze-order blocks (consecutive untied levels together; each tied level
        alone), prepared once; the block of each constraint link and capped flow (-1: none)."""
        if "_blocks" in self.__dict__:
            return self._blocks
        s = self.structure
        plan, link_block, flow_block = [], np.full(s.n_links, -1), np.full(s.n_flows, -1)
        levels = batches(s)
        tied = [bool((s.n_constraints[f] >= 2).any()) for f in levels]
        i = 0
        while i < len(levels):
            j = i
            while j < len(levels) and not tied[j]:
                j += 1
            flows = np.concatenate(levels[i:j]) if j > i else levels[i]
            block = _LinearBlock(s, flows) if j > i else _TiedBlock(s, flows)
            link_block[block.links] = len(plan)
            flow_block[flows[s.capped[flows]]] = len(plan)
            plan.append(block)
            i = j if j > i else i + 1
        self._blocks = plan, link_block, flow_block
        return self._blocks

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
            y[self._linear] = _solve_lower(self._m_linear, gk[self._linear], transpose=True)
        grad_d = np.where(s.capped & ~s.one_sided_cap, g - _transpose_times(s.routing, y), 0.0) if s.capped.any() \
            else np.zeros(s.n_flows)
        grad_c = y
        for l in np.flatnonzero(s.one_sided_link):
            col = self._one_link(l, side)
            grad_c[l] = 0.0 if col is None else float(np.sum(g * col))
        for f in np.flatnonzero(s.one_sided_cap):
            e = np.zeros(s.n_flows)
            e[f] = 1.0
            grad_d[f] = float(np.sum(g * self._side(None, e, side)))
        return grad_c, grad_d

    def capacity_jacobian(self, side: str | None = None) -> sp.csc_matrix:
        """d rate_f / d c_l for every flow and link: sparse (flows x links), dimensionless.
        ``side`` as in :meth:`gradient`."""
        s = self.structure
        self._check_side(side)
        linear = self._linear_columns().tocoo()
        rows, cols, vals = [linear.row], [linear.col], [linear.data]
        for l in np.flatnonzero(s.one_sided_link):
            col = self._one_link(l, side)
            if col is None:
                continue
            nz = np.flatnonzero(col)
            rows.append(nz)
            cols.append(np.full(len(nz), l))
            vals.append(col[nz])
        return sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(s.n_flows, s.n_links))

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
        inv = _solve_lower(self._m_linear, np.eye(len(self._linear)))
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
        if "exclusive" not in self.__dict__:      # per link: flows it alone holds
            only = (s.n_constraints == 1) & (s.bottleneck >= 0)
            self.exclusive = np.bincount(s.bottleneck[only], minlength=s.n_links)
        if side == "up" and self.exclusive[l] == 0:
            return None                     # zero: every flow it holds is held as tightly elsewhere
        e = np.zeros(s.n_links)
        e[l] = 1.0
        return self._side(e, None, side)

    def _side(self, dc, dd, side):
        if side == "up":
            return self.directional(dc, dd)
        return -self.directional(None if dc is None else -dc, None if dd is None else -dd)


def _transpose_times(rm, y) -> np.ndarray:
    """``A^T y`` per flow from the factored routing (no expansion)."""
    seg_val = np.bincount(rm.entry_segment, weights=rm.seg_frac * y[rm.seg_link], minlength=rm.n_segments)
    ok = rm.flow_seg >= 0
    coef = np.where(ok, 1.0 if rm.flow_coef is None else rm.flow_coef, 0.0)
    return (coef * seg_val[np.maximum(rm.flow_seg, 0)]).sum(axis=1)


#: triangular systems up to this size are solved dense (a 3,000-link fabric: 0.05 s)
DENSE_SOLVE = 8192


def _solve_lower(m: sp.csc_matrix, rhs, transpose: bool = False, dense=None):
    """``m x = rhs`` (or ``m^T x = rhs``) for ``m`` lower triangular in freeze order
    (``dense``: ``m`` as a dense array, when the caller keeps one)."""
    import scipy.linalg as la

    if m.shape[0] <= DENSE_SOLVE:
        if dense is not None:
            return la.solve_triangular(dense, rhs, lower=True, trans=1 if transpose else 0)
        dense = m.toarray()
        if np.triu(dense, 1).any():             # not triangular: cannot happen away from ties
            raise RuntimeError("sensitivity: the bottleneck system is not triangular in freeze order")
        return la.solve_triangular(dense, rhs, lower=True, trans=1 if transpose else 0)
    mat = sp.csr_matrix(m.T if transpose else m)
    return spla.spsolve_triangular(mat, rhs, lower=not transpose)


class _LinearBlock:
    """Untied flows in freeze order: caps move their flows directly, the rest follow the
    triangular system of their bottleneck links."""

    def __init__(self, s: Structure, flows):
        self.capped = flows[s.bottleneck[flows] < 0]
        self.a_capped = s.matrix[:, self.capped]
        moving = flows[s.bottleneck[flows] >= 0]
        links = np.unique(s.bottleneck[moving])
        self.links = links[np.argsort(s.top[links], kind="stable")]
        self.m = s.coupling[self.links][:, self.links].tocsc()
        order = np.argsort(self.links)
        self.pos = order[np.searchsorted(self.links[order], s.bottleneck[moving])] if len(moving) else moving
        self.moving, self.w = moving, s.weights[moving]
        self.a_moving = s.matrix[:, moving]
        self._dense = None

    def __call__(self, dc, dd, dx, dload):
        if len(self.capped) and dd[self.capped].any():
            dx[self.capped] = dd[self.capped]
            dload += self.a_capped @ dx[self.capped]
        if not len(self.moving):
            return
        rhs = dc[self.links] - dload[self.links]
        if not rhs.any():
            return
        if self._dense is None and self.m.shape[0] <= DENSE_SOLVE:
            self._dense = self.m.toarray()
        dt = _solve_lower(self.m, rhs, dense=self._dense)
        dx[self.moving] = self.w * dt[self.pos]
        dload += self.a_moving @ dx[self.moving]


class _TiedBlock:
    """Flows at one level with ties: their level changes are max-min fair among the tied
    constraints, filled from the lowest (levels may fall: the change can be negative)."""

    def __init__(self, s: Structure, flows):
        sub = s.matrix[:, flows].tocoo()
        top = s.saturated[sub.row] & (s.level[flows[sub.col]] >= s.top[sub.row] * (1 - TIE_RTOL))
        rows, cols = sub.row[top], sub.col[top]
        self.links, link_of = np.unique(rows, return_inverse=True)
        self.aw = (link_of, cols, sub.data[top] * s.weights[flows[cols]], len(self.links), len(flows))
        self.flows, self.w, self.capped = flows, s.weights[flows], s.capped[flows]
        self.a_flows = s.matrix[:, flows]

    def __call__(self, dc, dd, dx, dload):
        room = dc[self.links] - dload[self.links]
        cap_s = np.where(self.capped, dd[self.flows] / self.w, np.inf)
        if not room.any() and not (self.capped & (cap_s != 0)).any():
            return                                  # every constraint unchanged: nothing moves
        dx[self.flows] = self.w * _fill(self.aw, room, cap_s)
        dload += self.a_flows @ dx[self.flows]


def _fill(aw, room: np.ndarray, cap_level: np.ndarray) -> np.ndarray:
    """Weighted max-min fair levels ``s`` (any sign) of ``aw s <= room``, ``s <= cap_level``
    (``aw`` as COO arrays ``(row, col, value, rows, cols)``): rounds freeze every constraint
    that is the lowest for each of its unfrozen flows."""
    row_of, col_of, val, m, n = aw
    s = np.zeros(n)
    frozen = np.zeros(n, dtype=bool)
    while not frozen.all():
        wsum = np.bincount(row_of, weights=np.where(frozen[col_of], 0.0, val), minlength=m)
        left = room - np.bincount(row_of, weights=np.where(frozen[col_of], val * s[col_of], 0.0), minlength=m)
        share = np.where(wsum > 0, left / np.where(wsum > 0, wsum, 1.0), np.inf)
        lowest = np.full(n, np.inf)
        np.minimum.at(lowest, col_of, share[row_of])
        value = np.where(frozen, np.inf, np.minimum(lowest, cap_level))
        link_low = np.full(m, np.inf)
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
