"""The kernel of the dense method (:mod:`flowsolver.solver._dense`, where the algorithm
is described): local-minimum rounds over every link, for ``B`` scenarios at once as one
problem of disjoint copies, and the device arrays of a problem's structure."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._problem import count_trace


class _Net:
    """The padded structure of one kernel call and the reductions over it (used while
    tracing), for ``B`` scenarios at once: every per-flow, per-segment and per-link array
    has a leading scenario axis. ``slot_seg`` / ``slot_coef`` are (flows, K); ``unit_coef``
    says every used slot has coefficient 1 (then ``slot_coef`` is not read). No mask is
    needed anywhere: padding slots point to the padding segment, whose entries (fraction 0)
    point to the padding link (infinite capacity, no weight), and real entries have
    fractions > 0.

    The scenarios are one problem of ``B`` disjoint copies: scenario ``b``'s segment ``s``
    is ``b x n_segs + s`` and its link ``l`` is ``b x n_links + l``, so every reduction is
    one plain segment reduction over all scenarios (a scatter with batch dimensions, what
    ``vmap`` makes of one, ran ~100x slower than the bytes it moves on both CPU and GPU).
    With ``axis`` (inside ``shard_map``, ``B`` = 1) each device holds a share of the flows
    with the segments they use; per-link sums and minima are combined over the devices, so
    every device sees the same fair shares."""

    def __init__(self, entry_link, entry_seg, entry_frac, slot_seg, slot_coef, dtype, *, batch, n_links, n_segs,
                 unit_coef, axis):
        self.entry_link, self.entry_seg, self.entry_frac = entry_link, entry_seg, entry_frac
        self.n_links, self.n_segs, self.unit_coef, self.axis, self.batch = n_links, n_segs, unit_coef, axis, batch
        self.inf = jnp.asarray(jnp.inf, dtype)
        self.n_flows, self.k = slot_seg.shape
        self.flat_seg = slot_seg.reshape(-1)
        self.flat_coef = slot_coef.reshape(-1)
        scenario = jnp.arange(batch, dtype=jnp.int32)[:, None]
        # global ids of each (scenario, slot)'s segment, (scenario, entry)'s segment and link
        self.slot_ids = (self.flat_seg[None, :] + scenario * n_segs).reshape(-1)
        self.entry_seg_ids = (entry_seg[None, :] + scenario * n_segs).reshape(-1)
        self.entry_link_ids = (entry_link[None, :] + scenario * n_links).reshape(-1)

    def total(self, x):
        return x if self.axis is None else jax.lax.psum(x, self.axis)

    def lowest(self, x):
        return x if self.axis is None else jax.lax.pmin(x, self.axis)

    def _per_seg(self, op, x, ids, sorted_ids=False):      # (B, n, ...) values on (B x n) ids -> (B, n_segs, ...)
        tail = x.shape[2:]
        return op(x.reshape((-1,) + tail), ids, self.batch * self.n_segs,
                  indices_are_sorted=sorted_ids).reshape((self.batch, self.n_segs) + tail)

    def _per_link(self, op, x):                            # (B, entries, ...) -> (B, n_links, ...)
        tail = x.shape[2:]
        return op(x.reshape((-1,) + tail), self.entry_link_ids,
                  self.batch * self.n_links).reshape((self.batch, self.n_links) + tail)

    def slots(self, x):                # per-flow values (B, flows) -> per-slot (B, flows * K)
        return jnp.repeat(x, self.k, axis=1)

    def slot_to_seg(self, op, x):      # per-slot values (B, flows * K) -> per-segment
        return self._per_seg(op, x, self.slot_ids)

    def entry_to_seg(self, op, x):     # per-entry values (B, entries) -> per-segment (entries sorted by segment)
        return self._per_seg(op, x, self.entry_seg_ids, sorted_ids=True)

    def per_flow(self, x, reduce):     # per-slot values (B, flows * K) -> reduced over each flow's K
        return reduce(x.reshape(self.batch, self.n_flows, self.k), axis=2)

    def at_slots(self, seg_values):    # per-segment (B, n_segs) -> per-slot (B, flows * K)
        return jnp.take(seg_values, self.flat_seg, axis=1)

    def at_entries(self, values, index):   # (B, n) -> (B, entries) through an entry index
        return jnp.take(values, index, axis=1)

    def link_sum(self, x):             # per-flow values (B, flows, ...) -> per-link sums over all devices
        rep = self.slots(x)
        coef, frac = (self.flat_coef, self.entry_frac) if x.ndim == 2 else (self.flat_coef[:, None],
                                                                            self.entry_frac[:, None])
        seg = self.slot_to_seg(jax.ops.segment_sum, rep if self.unit_coef else rep * coef)
        return self.total(self._per_link(jax.ops.segment_sum, frac * self.at_entries(seg, self.entry_seg)))


def _round(net: _Net, cap, w, cap_level, max_rounds, state):
    """One round of the local-minimum freezing (see the module docstring), in every
    scenario: arrays (B, flows) and (B, links), ``rounds`` (B,)."""
    t, frozen, bneck, rounds = state
    inf = net.inf
    # a scenario runs a round only while it has flows left and max_rounds is not reached
    # (the inner loop would otherwise overshoot it by up to ``inner - 1`` rounds)
    busy = (net.total(jnp.sum(~frozen, axis=1, dtype=jnp.int32)) > 0) & (rounds < max_rounds)     # (B,)
    # the live weight and the frozen flows' load on each link: one pair of reductions for both
    WF = net.link_sum(jnp.stack([jnp.where(frozen, 0, w), jnp.where(frozen, t * w, 0)], axis=-1))
    W, F = WF[..., 0], WF[..., 1]
    share = jnp.where(W > 0, jnp.maximum(cap - F, 0) / jnp.where(W > 0, W, 1), inf)
    s_min = net.entry_to_seg(jax.ops.segment_min, net.at_entries(share, net.entry_link))
    m = net.per_flow(net.at_slots(s_min), jnp.min)
    val = jnp.where(frozen, inf, jnp.minimum(m, cap_level))
    s_val = net.slot_to_seg(jax.ops.segment_min, net.slots(val))
    near = net.lowest(net._per_link(jax.ops.segment_min, net.at_entries(s_val, net.entry_seg)))
    freeze_link = (W > 0) & (share <= near)
    s_link = net.entry_to_seg(jax.ops.segment_max, jnp.where(net.at_entries(freeze_link, net.entry_link),
                                                              net.entry_link, -1))
    f_link = net.per_flow(net.at_slots(s_link), jnp.max)
    live = busy[:, None] & ~frozen
    by_link = live & (f_link >= 0)
    by_cap = live & ~by_link & (cap_level <= m)
    t = jnp.where(by_link, m, jnp.where(by_cap, cap_level, t))
    bneck = jnp.where(by_link, f_link, jnp.where(by_cap, -1, bneck))
    return t, frozen | by_link | by_cap, bneck, rounds + busy.astype(jnp.int32)


def _kernel(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap, w, d, frozen0, max_rounds,
            stop_below, *, n_links, n_segs, inner, unit_coef=False, axis=None):
    """Rounds of the local-minimum freezing, for ``B`` scenarios (``cap`` (B, links),
    ``frozen0`` (B, flows); ``w`` and ``d`` (B, flows) or (1, flows), shared), until every
    flow is frozen, ``max_rounds`` is reached or at most ``stop_below`` flows are left
    unfrozen (``stop_below`` > 0, with B = 1, lets the host compact the problem). Returns
    rates, the load of the frozen flows, bottlenecks, rounds (B,) and the frozen mask. The
    structure's arrays are described by :class:`_Net`."""
    count_trace()
    batch = cap.shape[0]
    net = _Net(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap.dtype, batch=batch, n_links=n_links,
               n_segs=n_segs, unit_coef=unit_coef, axis=axis)
    # a division by a row broadcast over the scenarios compiles to a product by its reciprocal,
    # a rounding apart from d / w (a flow then rated above its cap, a tie's bottleneck flipped):
    # shared weights are materialised per scenario before dividing
    w_rows = w
    if w.shape != d.shape:
        w_rows = jax.lax.optimization_barrier(jnp.broadcast_to(w, jnp.broadcast_shapes(w.shape, d.shape)))
    cap_level = jnp.where(jnp.isinf(d), net.inf, d / w_rows)
    one_round = functools.partial(_round, net, cap, w, cap_level, max_rounds)

    def cond(state):
        left = net.total(jnp.sum(~state[1], axis=1, dtype=jnp.int32))
        return jnp.any((left > 0) & (left > stop_below) & (state[3] < max_rounds))

    def body(state):
        return jax.lax.fori_loop(0, inner, lambda _, s: one_round(s), state)

    state = (jnp.zeros(frozen0.shape, cap.dtype), frozen0, jnp.full(frozen0.shape, -1, jnp.int32),
             jnp.zeros(batch, jnp.int32))
    t, frozen, bneck, rounds = jax.lax.while_loop(cond, body, state)
    rates = jnp.where(frozen, t * w, 0)
    return rates, net.link_sum(rates), bneck, rounds, frozen


_STATIC = ("n_links", "n_segs", "inner", "unit_coef")
_JITTED = jax.jit(_kernel, static_argnames=_STATIC)


def device_structure(arrays, jdt):
    """The padded structure arrays (``CompactRouting.padded``) on the default device, fractions
    and coefficients in ``jdt``."""
    link, seg, frac, slot_seg, slot_coef = arrays
    return [jnp.asarray(link), jnp.asarray(seg), jnp.asarray(frac, jdt), jnp.asarray(slot_seg),
            jnp.asarray(slot_coef, jdt)]
