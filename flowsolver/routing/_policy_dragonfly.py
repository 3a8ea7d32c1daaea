"""DragonFly policies: ``minimal`` (one global hop, fluid over the working global cables
between the two groups), ``valiant`` (to the router of a random third group where a random
global cable from the source's group lands, over the cables of the source's group that land
on it, then minimal to the destination: local, global, local, global, local, at most 3 local
hops and no router twice, Kim et al. 2008's VAL) and ``ugal`` (per flow, minimal or Valiant
by the UGAL-G rule in the fluid limit, :func:`ugal_choice`).

Failed cables: ``minimal`` uses the working global cables between two groups only, but none
of the three routes around a failure otherwise: a flow whose minimal route needs a failed
local cable, or two groups with no working global cable, raise a ``RoutingError`` naming
policy ``'shortest'`` (``valiant`` and ``ugal`` work out every flow's minimal route too, so
they refuse even a flow whose Valiant path would avoid the failure); ``ecmp`` and ``shortest``
route around failures."""

from __future__ import annotations

import numpy as np

from ._fabric import DragonflyTables, SizedDraws
from ._keys import GroupCopies, positions
from ._policies import register_policy


def _tables(call):
    return call.memo("dragonfly", lambda: DragonflyTables(call.index))


def _minimal(call, df, a, b):
    return call.paths(a, b, df.minimal, "minimal")


def minimal(call):
    """One column: the minimal path's segment of each pair of routers."""
    return [(_minimal(call, _tables(call), call.src, call.dst), 1.0)]


def _valiant_parts(call):
    """The minimal segments, and the two halves of the Valiant paths (the second -1 where
    a flow has no intermediate router: its first half is then its minimal path), with each
    flow's position in its group (None without groups)."""
    df, a, b = _tables(call), call.src, call.dst
    seg_min = _minimal(call, df, a, b)
    within = None if call.groups is None else positions(call.groups)
    mid = df.intermediate(a, b, call.seed, within)
    has = mid >= 0
    s1 = seg_min.copy()
    s2 = np.full(len(a), -1, dtype=np.int64)
    if has.any():
        s1[has] = call.paths(a[has], mid[has], df.to_router, "valiant-first")
        s2[has] = _minimal(call, df, mid[has], b[has])
    return seg_min, s1, s2, within


def valiant(call):
    """Two columns: to the intermediate router over the cables landing on it
    (:meth:`~._fabric.DragonflyTables.to_router`), minimal on to the destination."""
    _, s1, s2, _ = _valiant_parts(call)
    return [(s1, 1.0), (s2, 1.0)]


def ugal(call):
    """Two columns: each flow's minimal path (the second column -1) or its Valiant path,
    by :func:`ugal_choice`."""
    seg_min, s1, s2, within = _valiant_parts(call)
    use_min = ugal_choice(call.index, call.store, call.sizes, seg_min, s1, s2, call.seed, groups=call.groups,
                          within=within)
    return [(np.where(use_min, seg_min, s1), 1.0), (np.where(use_min, -1, s2), 1.0)]


def ugal_choice(ix, store, sizes, seg_min, s1, s2, seed=0, rounds=12, groups=None, within=None):
    """UGAL-G in the fluid limit: True where minimal wins.

    Starting from all-minimal, each round every flow compares, on the current loads (link
    load / capacity as the queue), (max load / capacity over its minimal path) x (its hops)
    with the same for its Valiant path; each flow that would gain by switching switches
    with probability 1/2 (damped best response, seeded), for ``rounds`` rounds. ``groups``:
    each flow's group, played as its own call (its own loads, its own draws, its own last
    round); the loads are kept per group on each group's copy of the links it uses
    (``within``: its :func:`~._keys.positions`, when known).
    """
    n = len(seg_min)
    groups = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    draws = SizedDraws(seed, *(positions(groups) if within is None else within))
    ptr, link, frac = store.finish()
    S = len(ptr) - 1
    lists = (seg_min, s1, s2)
    used = np.concatenate([groups[c >= 0] * S + c[c >= 0] for c in lists])
    copies = GroupCopies(ptr, link, used, int(groups.max(initial=-1)) + 1, S, len(ix.capacity))
    ends = np.cumsum([0] + [int((c >= 0).sum()) for c in lists])
    copy_of = []
    for k, c in enumerate(lists):        # each flow's copy of each of its segments, -1 where none
        col = np.full(n, -1, dtype=np.int64)
        col[c >= 0] = copies.key_segment[ends[k]:ends[k + 1]]
        copy_of.append(col)
    seg_min, s1, s2 = copy_of
    n_seg, owner = len(copies.segment), np.repeat(np.arange(len(copies.segment)), np.diff(copies.seg_ptr))
    link, frac = copies.seg_link, frac[copies.entries]
    cap = np.where(ix.capacity > 0, ix.capacity, np.inf)[copies.link]
    amount = np.where(sizes > 0, sizes, 1.0)         # all 1 in a group whose sizes are all 0
    seg_hops = np.bincount(owner, weights=frac, minlength=n_seg)
    has_val = s2 >= 0
    use_min = np.ones(n, dtype=bool)

    def cost(segs_list, q):
        seg_q = np.zeros(n_seg)
        np.maximum.at(seg_q, owner, q[link])
        worst = np.zeros(n)
        hops = np.zeros(n)
        for segs in segs_list:
            ok = segs >= 0
            worst[ok] = np.maximum(worst[ok], seg_q[segs[ok]])
            hops[ok] += seg_hops[segs[ok]]
        return worst * hops

    for _ in range(rounds):
        seg_amount = np.zeros(n_seg)
        for segs, on in ((seg_min, use_min), (s1, ~use_min), (s2, ~use_min)):
            ok = (segs >= 0) & on
            seg_amount += np.bincount(segs[ok], weights=amount[ok], minlength=n_seg)
        q = np.bincount(link, weights=frac * seg_amount[owner], minlength=len(cap)) / cap
        c_min, c_val = cost([seg_min], q), cost([s1, s2], q)
        want = has_val & np.where(use_min, c_val < c_min, c_min < c_val)
        if not want.any():       # a group none of whose flows would switch has played its last round
            break
        flip = want & (draws.take(lambda rng, m: rng.random(m)) < 0.5)
        use_min ^= flip
    return use_min | ~has_val


register_policy("minimal", minimal)
# the intermediate router drawn per call (a collective's step's)
register_policy("valiant", valiant, per_step_draw=True, handles_groups=True)
# load / capacity on the step's own links, draws per step
register_policy("ugal", ugal, depends_on_load=True, per_step_draw=True, handles_groups=True)
