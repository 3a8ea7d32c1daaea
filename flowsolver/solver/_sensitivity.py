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

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ._blocks import LinearBlock, TiedBlock, solve_lower
from ._structure import Structure, batches

#: what ``side`` may be: the derivative for an increase ("up") or a decrease ("down")
SIDES = ("up", "down")

#: one-link (or one-cap) derivatives are carried through the structure together, as many at
#: once as keep the (flows x directions) work arrays under this many entries (~8 bytes each)
BATCH_ENTRIES = 1 << 22


class RateSensitivity:
    """Derivatives of one scenario's rates (see :func:`rate_sensitivity`)."""

    def __init__(self, structure: Structure):
        self.structure = s = structure
        k = s.bottleneck_links
        k = k[~s.one_sided_link[k]]                         # bottleneck links with two-sided derivatives
        self._linear = k[np.argsort(s.top[k], kind="stable")]   # in freeze order: M is lower triangular

    @cached_property
    def _m_linear(self):
        """The coupling among the two-sided bottleneck links, in freeze order (built when a
        gradient first needs it; directional derivatives do not)."""
        if not len(self._linear):      # every bottleneck tied (each NIC of an evenly split all-to-all)
            return sp.csc_matrix((0, 0))
        return self.structure.coupling[self._linear][:, self._linear].tocsc()

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
        return self._many(dc[:, None], dd[:, None])[:, 0]

    def _many(self, dc, dd=None) -> np.ndarray:
        """:meth:`directional` along each column of ``dc`` (links, K) and ``dd`` (flows, K;
        None: no cap changes), carried through the blocks together: (flows, K)."""
        s = self.structure
        k = dc.shape[1]
        if dd is None:
            dd = np.zeros((s.n_flows, k))
        else:
            dd = np.where(s.capped[:, None] & np.isfinite(dd), dd, 0.0)    # only caps that hold a flow count
        plan, link_block, flow_block = self._plan()
        first = np.concatenate([link_block[np.flatnonzero(dc.any(axis=1))], flow_block[np.flatnonzero(dd.any(axis=1))]])
        first = first[first >= 0]
        dx = np.zeros((s.n_flows, k))
        if not len(first):
            return dx                         # only unsaturated links: nothing moves
        dload = np.zeros((s.n_links, k))
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
            block = LinearBlock(s, flows) if j > i else TiedBlock(s, flows)
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
            y[self._linear] = solve_lower(self._m_linear, gk[self._linear], transpose=True)
        grad_d = np.where(s.capped & ~s.one_sided_cap, g - _transpose_times(s.routing, y), 0.0) if s.capped.any() \
            else np.zeros(s.n_flows)
        grad_c = y
        grad_c[np.flatnonzero(s.one_sided_link)] = 0.0
        for links, cols in self._one_sided(side, links=True):
            grad_c[links] = g @ cols
        for flows, cols in self._one_sided(side, links=False):
            grad_d[flows] = g @ cols
        return grad_c, grad_d

    def capacity_jacobian(self, side: str | None = None, links=None) -> sp.csc_matrix:
        """d rate_f / d c_l for every flow and link: sparse (flows x links), dimensionless.
        ``side`` as in :meth:`gradient`; ``links`` (optional, link indices): only these
        columns of one-sided links are computed (the others are left 0)."""
        s = self.structure
        self._check_side(side)
        linear = self._linear_columns().tocoo()
        rows, cols, vals = [linear.row], [linear.col], [linear.data]
        for links, block in self._one_sided(side, links=True, only=links):
            r, c = _nonzero(block)
            rows.append(r)
            cols.append(links[c])
            vals.append(block[r, c])
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
        for flows, block in self._one_sided(side, links=False):
            r, c = _nonzero(block)
            out = out + sp.csc_matrix((block[r, c], (r, flows[c])), shape=(n, n))
        return sp.csc_matrix(out)

    def _linear_columns(self) -> sp.csc_matrix:
        s = self.structure
        n, L = s.n_flows, s.n_links
        if not len(self._linear):
            return sp.csc_matrix((n, L))
        inv = solve_lower(self._m_linear, np.eye(len(self._linear)))
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

    def _one_sided(self, side, links: bool, only=None):
        """The one-sided derivatives of every rate for each one-sided link (``links``) or
        cap alone (of ``only`` when given), for ``side``: ``(indices, (flows, len(indices))
        columns)`` a batch at a time (the links whose increase moves nothing, every flow they
        hold being held as tightly elsewhere, are left out: their columns are 0)."""
        s = self.structure
        which = np.flatnonzero(s.one_sided_link if links else s.one_sided_cap)
        if only is not None:
            which = np.intersect1d(which, only)
        if links and side == "up" and len(which):
            alone = (s.n_constraints == 1) & (s.bottleneck >= 0)    # flows a link alone holds
            which = which[np.bincount(s.bottleneck[alone], minlength=s.n_links)[which] > 0]
        step = max(1, BATCH_ENTRIES // max(s.n_flows + s.n_links, 1))
        sign = 1.0 if side == "up" else -1.0
        for i in range(0, len(which), step):
            part = which[i:i + step]
            unit = np.zeros((s.n_links if links else s.n_flows, len(part)))
            unit[part, np.arange(len(part))] = sign
            cols = self._many(unit) if links else self._many(np.zeros((s.n_links, len(part))), unit)
            yield part, sign * cols


def _nonzero(block):
    """Row and column indices of the nonzero entries of a 2-D array."""
    return np.divmod(np.flatnonzero(block), block.shape[1])


def _transpose_times(rm, y) -> np.ndarray:
    """``A^T y`` per flow from the factored routing (no expansion)."""
    seg_val = np.bincount(rm.entry_segment, weights=rm.seg_frac * y[rm.seg_link], minlength=rm.n_segments)
    ok = rm.flow_seg >= 0
    coef = np.where(ok, 1.0 if rm.flow_coef is None else rm.flow_coef, 0.0)
    return (coef * seg_val[np.maximum(rm.flow_seg, 0)]).sum(axis=1)
