"""Fabric-level paths of the structured policies: torus DOR and DragonFly minimal."""

from __future__ import annotations

import numpy as np

from ._graph_index import GraphIndex, RoutingError


def dor_paths(ix: GraphIndex, a, b):
    """Dimension-order routing between torus nodes ``a[i] -> b[i]`` (global indices of
    chips or routers carrying ``coords``).

    Dimensions are corrected in order 0, 1, ..., n-1. With wrap-around each dimension goes
    the shorter way; at a tie (distance exactly k/2) it goes in the + direction. Returns
    ``(pair, link, frac)`` entries (one path, fractions 1).
    """
    g = ix.graph
    params = g.graph.get("params", {})
    if g.graph.get("generator") != "torus":
        raise RoutingError("policy 'dor' needs a torus from topologies.torus (use 'shortest' or "
                           "'ecmp' on other graphs)")
    dims, wrap = ix.memo(("torus-shape", repr(params)), lambda: _torus_shape(g, params))
    coords = np.full((ix.nv, len(dims)), -1, dtype=np.int64)
    grid = np.full(int(np.prod(dims)), -1, dtype=np.int64)
    for n, d in g.nodes(data=True):
        if "coords" in d:
            i = ix.idx[n]
            coords[i] = d["coords"]
            grid[np.ravel_multi_index(tuple(d["coords"]), dims)] = i
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    cur = coords[a].copy()
    target = coords[b]
    pairs, links = [], []
    for d, k in enumerate(dims):
        if wrap:
            fwd = (target[:, d] - cur[:, d]) % k
            step = np.where(fwd <= k - fwd, 1, -1)
            count = np.minimum(fwd, k - fwd)
        else:
            delta = target[:, d] - cur[:, d]
            step, count = np.sign(delta), np.abs(delta)
        for s in range(int(count.max()) if len(count) else 0):
            act = np.flatnonzero(count > s)
            nxt = cur[act].copy()
            nxt[:, d] = (nxt[:, d] + step[act]) % k
            u = grid[np.ravel_multi_index(cur[act].T, dims)]
            v = grid[np.ravel_multi_index(nxt.T, dims)]
            lid = ix.working_link_ids(
                u, v, lambda j: f"dimension-order route from {ix.name(a[act[j]])} to {ix.name(b[act[j]])}")
            pairs.append(act)
            links.append(lid)
            cur[act] = nxt
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0, dtype=np.int64)  # noqa: E731
    pairs, links = cat(pairs), cat(links)
    return pairs, links, np.ones(len(pairs))


def _torus_shape(g, params) -> tuple:
    """``(dims, wrap)`` of a torus graph's ``params``, checked against its nodes' ``coords`` and
    its cables (a file's params are text: they must describe the graph they travel with)."""
    where = {n: d["coords"] for n, d in g.nodes(data=True) if "coords" in d}
    placed = [tuple(c) for c in where.values()]
    try:
        dims = [int(k) for k in params["dims"]]
    except (KeyError, TypeError, ValueError):
        raise RoutingError(f"the torus's graph params have no dims (got {params.get('dims')!r})") from None
    if not dims or min(dims) < 1 or len(set(placed)) != len(placed) or len(placed) != int(np.prod(dims, dtype=object)) \
            or any(len(c) != len(dims) or not all(0 <= x < k for x, k in zip(c, dims)) for c in placed):
        raise RoutingError(f"the torus's graph params dims {dims} do not match its {len(placed)} nodes' coords")
    wrap = params.get("wrap", True)
    if not isinstance(wrap, bool):
        raise RoutingError(f"the torus's graph params wrap must be true or false, got {wrap!r}")
    around = any(u in where and v in where and any(k > 2 and abs(x - y) == k - 1 for x, y, k in
                                                   zip(where[u], where[v], dims)) for u, v in g.edges())
    if around != wrap and max(dims) > 2:
        raise RoutingError(f"the torus's graph params say wrap={wrap}, but its cables "
                           f"{'do' if around else 'do not'} wrap around")
    return np.asarray(dims, dtype=np.int64), wrap


class DragonflyTables:
    """Groups, routers and working global cables of a DragonFly graph."""

    def __init__(self, ix: GraphIndex):
        g = ix.graph
        if g.graph.get("generator") != "dragonfly":
            raise RoutingError("policies 'minimal', 'valiant' and 'ugal' need a DragonFly from "
                               "topologies.dragonfly")
        self.ix = ix
        self.group = np.full(ix.nv, -1, dtype=np.int64)
        for n, d in g.nodes(data=True):
            if d.get("kind") == "switch" and "group" in d:
                self.group[ix.idx[n]] = d["group"]
        self.groups = int(self.group.max()) + 1
        routers = np.flatnonzero(self.group >= 0)
        self.routers_of = [routers[self.group[routers] == k] for k in range(self.groups)]
        tiers = np.array([d.get("tier", "") for *_, d in g.edges(data=True)], dtype=object)
        glob = np.flatnonzero((tiers == "global") & ix.usable)
        gu, gv = self.group[ix.tail[glob]], self.group[ix.head[glob]]
        order = np.lexsort((gv, gu))
        self.glob, self.gkey = glob[order], (gu * self.groups + gv)[order]
        # the working global cables' running count in that order: the cable-weighted draw's scale
        self.gcum = np.concatenate([[0.0], np.cumsum(ix.cables[self.glob].astype(np.float64))])
        # the same cables by (tail's group, head router): those from a group landing on a router
        self.lkey = gu * ix.nv + ix.head[glob]
        by_head = np.argsort(self.lkey, kind="stable")
        self.lglob, self.lkey = glob[by_head], self.lkey[by_head]

    def minimal(self, a, b):
        """Minimal routes router ``a[i] -> b[i]``: one global hop, fluid over the working
        global cables between the two groups (local hops before and after as needed)."""
        ix = self.ix
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        ga, gb = self.group[a], self.group[b]
        out = _Entries(ix, a, b, "minimal route")
        same = np.flatnonzero((ga == gb) & (a != b))
        if same.size:
            out.add(same, out.local(a[same], b[same], same), np.ones(len(same)))
        cross = np.flatnonzero(ga != gb)
        for rows in _runs(cross, ga[cross] * self.groups + gb[cross]):
            k = ga[rows[0]] * self.groups + gb[rows[0]]
            lo, hi = np.searchsorted(self.gkey, [k, k + 1])
            if lo == hi:
                raise RoutingError(f"no working global cable between groups {ga[rows[0]]} and {gb[rows[0]]} "
                                   f"(route {ix.name(a[rows[0]])} -> {ix.name(b[rows[0]])}); use 'shortest'")
            out.over_cables(rows, self.glob[lo:hi])
        return out.entries()

    def to_router(self, a, m):
        """Valiant's first half, router ``a[i]`` to the intermediate router ``m[i]`` of
        another group: local to a global cable of ``a[i]``'s group that lands on ``m[i]``
        and over it, fluid over those cables (in proportion to their cables); no local hop
        in ``m[i]``'s group, so the second half (minimal from ``m[i]``) passes no router
        twice. Where ``m[i]`` has no working cable from ``a[i]``'s group, raises the
        RoutingError :meth:`minimal` raises for the two groups."""
        ix = self.ix
        a, m = np.asarray(a, dtype=np.int64), np.asarray(m, dtype=np.int64)
        out = _Entries(ix, a, m, "Valiant route")
        for rows in _runs(np.arange(len(a)), self.group[a] * ix.nv + m):
            k = self.group[a[rows[0]]] * ix.nv + m[rows[0]]
            lo, hi = np.searchsorted(self.lkey, [k, k + 1])
            if lo == hi:
                self.minimal(a[rows[:1]], m[rows[:1]])       # no working cable between the groups: its error
                raise RoutingError(f"no working global cable from group {self.group[a[rows[0]]]} lands on "
                                   f"{ix.name(m[rows[0]])} (route {ix.name(a[rows[0]])} -> "
                                   f"{ix.name(m[rows[0]])}); use 'shortest'")
            out.over_cables(rows, self.lglob[lo:hi])
        return out.entries()

    def intermediate(self, a, b, seed: int, within=None):
        """The intermediate router of Valiant routing (Kim et al., ISCA 2008, "VAL": through
        a random intermediate *group*): a random group other than those of ``a[i]`` and
        ``b[i]``, and in it the router where a random working global cable from ``a[i]``'s
        group lands (drawn in proportion to the cables); -1 where both are in one group or
        fewer than 3 groups exist.

        The route goes to that router over the cables of ``a[i]``'s group that land on it
        (:meth:`to_router`) and minimal on: local, global, local, global, local, at most 3
        local hops and no router twice. A random router of the group instead (booksim's
        choice) made 9.8 % of dragonfly(2, 4, 2)'s routes enter and leave the group through
        one router with a detour between (4 local hops, a router twice); a first half minimal
        over all the cables between the two groups made 428 of dragonfly(2, 4, 2, g=5)'s
        1,560 routes do so where several cables join two groups (a share landing on another
        router of the group crossed to this one and back).

        The i-th pair takes the i-th of ``n = len(a)`` draws of a generator seeded
        ``seed``. ``within``: (position of each pair among the pairs of its group, size of
        its group) when pairs of several groups are drawn together as each group would be
        drawn alone."""
        ix = self.ix
        ga, gb = self.group[np.asarray(a)], self.group[np.asarray(b)]
        n = len(ga)
        draws = SizedDraws(seed, *((np.arange(n), np.full(n, n)) if within is None else within))
        pick_g = draws.take(lambda rng, m: rng.integers(0, max(self.groups - 2, 1), m), np.int64)
        unit = draws.take(lambda rng, m: rng.random(m))
        lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
        gc = pick_g + (pick_g >= lo)
        gc = np.minimum(gc + (gc >= hi), self.groups - 1)
        # the global cable ga -> gc: cable-weighted, by the flow's uniform draw
        cum = self.gcum
        key = ga * self.groups + gc
        first, last = np.searchsorted(self.gkey, key, "left"), np.searchsorted(self.gkey, key, "right")
        target = cum[first] + unit * (cum[last] - cum[first])
        j = np.clip(np.searchsorted(cum, target, "right") - 1, first, np.maximum(last - 1, first))
        has = last > first
        out = np.full(n, -1, dtype=np.int64)
        out[has] = ix.head[self.glob[j[has]]]
        # no working cable from ga to gc: a router of gc, whose minimal route then names the groups
        out[~has] = np.array([self.routers_of[k][0] for k in gc[~has]], dtype=np.int64)
        out[(ga == gb) | (self.groups < 3)] = -1
        return out


def _runs(rows, key):
    """``rows`` split into runs of equal ``key`` (one per distinct key)."""
    order = np.argsort(key, kind="stable")
    rows, key = rows[order], key[order]
    return [r for r in np.split(rows, np.flatnonzero(np.diff(key)) + 1) if r.size]


class _Entries:
    """(pair, link, frac) entries of routes router ``a[i] -> b[i]`` built piece by piece."""

    def __init__(self, ix, a, b, what):
        self.ix, self.a, self.b, self.what = ix, a, b, what
        self.pairs, self.links, self.fracs = [], [], []

    def local(self, u, v, rows):
        ix, a, b = self.ix, self.a, self.b
        return ix.working_link_ids(u, v, lambda j: f"{self.what} from {ix.name(a[rows[j]])} to {ix.name(b[rows[j]])}")

    def add(self, rows, links, fracs):
        self.pairs.append(rows)
        self.links.append(links)
        self.fracs.append(fracs)

    def over_cables(self, rows, cab):
        """Each pair of ``rows`` fluid over the global cables ``cab`` (in proportion to their
        cables): local to a cable's tail where it is not the start, the cable, local from its
        head where that is not the end."""
        ix = self.ix
        w = ix.cables[cab] / ix.cables[cab].sum()
        u, v = ix.tail[cab], ix.head[cab]
        R, C = len(rows), len(cab)
        pr = np.repeat(rows, C)
        uu, vv, ww, ll = np.tile(u, R), np.tile(v, R), np.tile(w, R), np.tile(cab, R)
        xa, yb = self.a[pr], self.b[pr]
        first, last = xa != uu, vv != yb
        self.add(pr[first], self.local(xa[first], uu[first], pr[first]), ww[first])
        self.add(pr, ll, ww)
        self.add(pr[last], self.local(vv[last], yb[last], pr[last]), ww[last])

    def entries(self):
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
        return cat(self.pairs, np.int64), cat(self.links, np.int64), cat(self.fracs, np.float64)


class SizedDraws:
    """Random draws for elements of several groups, each group's as its own call would make
    them: one generator seeded ``seed`` per group size, an element taking the draw at its
    position in its group (``pos``; ``size``: its group's size). Successive :meth:`take`
    calls continue each generator, as successive draws of one call would.

    >>> d = SizedDraws(7, np.array([0, 1, 0]), np.array([2, 2, 1]))
    >>> alone = np.random.default_rng(7).random(2)
    >>> bool(np.array_equal(d.take(lambda rng, m: rng.random(m))[:2], alone))
    True
    """

    def __init__(self, seed: int, pos, size):
        self.pos = np.asarray(pos)
        self.parts = [(np.flatnonzero(size == m), int(m), np.random.default_rng(seed)) for m in np.unique(size)]

    def take(self, draw, dtype=np.float64) -> np.ndarray:
        """``draw(generator, m)`` (m values) per group size, read back per element."""
        out = np.empty(len(self.pos), dtype=dtype)
        for sel, m, rng in self.parts:
            out[sel] = draw(rng, m)[self.pos[sel]]
        return out
