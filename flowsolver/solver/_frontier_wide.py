"""Wide segments in the frontier kernel (:mod:`flowsolver.solver._frontier_kernel`).

Fluid ECMP over many spines gives paths of a hundred links and more (148 per flow on
fat_tree(16)), shared by every flow between the same two leaves. Copied per flow they
would make the path table and the per-link flow lists ~150 M entries, and every round
would read the spine links' lists of a million flows. Instead such *wide* segments stay
shared (:func:`flowsolver.solver._frontier_paths.split_paths`): the frontier's rounds read the
narrow links of each flow as before and, per wide slot, one number, the segment's lowest
share.

That number is a *lower bound*, refreshed only when it matters. Progressive filling never
lowers a link's fair share (a flow freezes at a level no larger than the share of any link
it crosses, so removing it leaves every share on its path as large or larger), so a share
computed earlier is a lower bound of today's. A round that tests a candidate against
lower bounds freezes only what the exact test would freeze: it stays exact, it may only
freeze less. The wide shares are recomputed exactly (a *refresh*: one pass over the flows'
wide slots and the wide segments' entries, as a dense round) when the lowest of them falls
below the lowest narrow share, the one case where the frontier could stall or a level round
could be wrong; right after a refresh, a wide link at the global minimum share freezes
every live flow crossing it in a level round. A wide link's weight and load are never kept
between refreshes: each refresh sums them afresh from the flows (no cancellation).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

f64 = jnp.float64
INT_MIN = int(jnp.iinfo(jnp.int32).min)


class Wide:
    """The wide parts of one problem while the kernel is traced (``S`` segments, the last
    one padding)."""

    def __init__(self, arrays, n_segments: int, n_links: int):
        self.seg, self.coef, self.entry_seg, self.entry_link, self.entry_frac = arrays
        self.S, self.n_links = n_segments, n_links
        # scatter targets: padding (slots and entries on segment S - 1, entries on the last
        # link) sent past the end, where mode="drop" scatters and segment reductions skip them
        # (on a GPU, every padding update of one address is serialised); gathers read the
        # tables as they are (the padding segment has no entries: share inf, no link)
        pad = self.entry_seg == n_segments - 1
        self.seg_at = jnp.where(self.seg == n_segments - 1, n_segments, self.seg)
        self.entry_seg_at = jnp.where(pad, n_segments, self.entry_seg)
        self.entry_link_at = jnp.where(pad, n_links, self.entry_link)

    def refresh(self, cap, w, claim, bneck, level, live0):
        """Exact shares of the wide links from the flows as they stand: ``(share, segment
        minimum, a link at each segment's minimum)``, and the wide links' loads."""
        frozen = (claim != INT_MIN) & live0
        rate = jnp.where(frozen, level[bneck] * w, 0.0)
        live_w = jnp.where(claim == INT_MIN, w, 0.0)
        coef = 1.0 if self.coef is None else self.coef
        seg_w = jnp.zeros(self.S, f64).at[self.seg_at].add(live_w[:, None] * coef, mode="drop")
        seg_r = jnp.zeros(self.S, f64).at[self.seg_at].add(rate[:, None] * coef, mode="drop")
        link_at = self.entry_link_at
        weight = jnp.zeros(self.n_links, f64).at[link_at].add(self.entry_frac * seg_w[self.entry_seg], mode="drop")
        load = jnp.zeros(self.n_links, f64).at[link_at].add(self.entry_frac * seg_r[self.entry_seg], mode="drop")
        share = jnp.where(weight > 0, jnp.maximum(cap - load, 0) / jnp.where(weight > 0, weight, 1.0), jnp.inf)
        on = jnp.where(self.entry_frac > 0, share[self.entry_link], jnp.inf)
        seg_min = jax.ops.segment_min(on, self.entry_seg_at, self.S)          # ids past S: dropped
        at_min = (on <= seg_min[self.entry_seg]) & (self.entry_frac > 0)
        seg_arg = jax.ops.segment_max(jnp.where(at_min, self.entry_link, -1), self.entry_seg_at, self.S)
        return (share, seg_min, seg_arg.astype(jnp.int32), jnp.bool_(True)), load

    def row_min(self, seg_min, f):
        """Lowest (lower-bound) share over the wide slots of flows ``f``."""
        return jnp.min(seg_min[self.seg[f]], axis=1)

    def level_hits(self, state, s_min):
        """Per flow, whether a wide link at share ``s_min`` holds it, and which link; only
        right after a refresh (stale shares are lower bounds: a hit could be wrong)."""
        _, seg_min, seg_arg, fresh = state
        hit = fresh & (seg_min[self.seg] <= s_min)
        first = jnp.take_along_axis(self.seg, jnp.argmax(hit, axis=1)[:, None], axis=1)[:, 0]
        return jnp.any(hit, axis=1), seg_arg[first]


def stale(state):
    """The wide state after a round has frozen flows: still lower bounds, no longer exact."""
    share, seg_min, seg_arg, _ = state
    return share, seg_min, seg_arg, jnp.bool_(False)
