"""Shortest-path machinery on compact graphs: fluid ECMP and hashed path choice.

A compact graph has nodes ``0 .. nv-1`` and edges ``tail[e] -> head[e]`` (only usable
links) with integer ``weight[e]`` (parallel cables: an ECMP hash picks a cable, so a
next hop with ``c`` cables gets ``c`` shares). ``transit[v]`` says whether traffic may
pass through ``v`` (sources and destinations may always be used as endpoints).
"""

from __future__ import annotations

import numpy as np

from ._keys import ranges


class CompactGraph:
    def __init__(self, nv: int, tail, head, weight, link, transit=None):
        self.nv = int(nv)
        self.tail = np.asarray(tail, dtype=np.int64)
        self.head = np.asarray(head, dtype=np.int64)
        self.weight = np.asarray(weight, dtype=np.float64)
        self.link = np.asarray(link, dtype=np.int64)   # global link id of each edge
        self.transit = np.ones(self.nv, dtype=bool) if transit is None else np.asarray(transit, bool)
        order = np.argsort(self.head, kind="stable")   # incoming-edge CSR for reverse BFS
        self.in_edges = order
        self.in_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.head, minlength=self.nv))])
        self.out_edges = np.argsort(self.tail, kind="stable")  # outgoing-edge CSR (ids ascending per node)
        self.out_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.tail, minlength=self.nv))])

    def distances_to(self, target: int) -> np.ndarray:
        """Hops from every node to ``target`` through transit nodes only (-1: unreachable)."""
        dist = np.full(self.nv, -1, dtype=np.int64)
        dist[target] = 0
        frontier = np.array([target])
        d = 0
        while frontier.size:
            edges = self.in_edges[ranges(self.in_ptr[frontier], self.in_ptr[frontier + 1] - self.in_ptr[frontier])]
            preds = np.unique(self.tail[edges])
            preds = preds[dist[preds] < 0]
            d += 1
            dist[preds] = d
            frontier = preds[self.transit[preds]]
        return dist

    def distances_to_all(self, targets) -> np.ndarray:
        """:meth:`distances_to` of every node of ``targets``, as rows of one (targets, nodes)
        array, worked out together a hop at a time."""
        targets = np.asarray(targets, dtype=np.int64)
        nv = self.nv
        dist = np.full((len(targets), nv), -1, dtype=np.int64)
        dist[np.arange(len(targets)), targets] = 0
        row, node = np.arange(len(targets)), targets
        d = 0
        while row.size:
            counts = self.in_ptr[node + 1] - self.in_ptr[node]
            preds = self.tail[self.in_edges[ranges(self.in_ptr[node], counts)]]
            found = np.unique(np.repeat(row, counts) * nv + preds)
            row, node = found // nv, found % nv
            new = dist[row, node] < 0
            row, node = row[new], node[new]
            d += 1
            dist[row, node] = d
            row, node = row[self.transit[node]], node[self.transit[node]]
        return dist

    def dag(self, target: int):
        """Shortest-path DAG towards ``target``: (dist, dag edge ids, split fraction of each)."""
        dist = self.distances_to(target)
        h, t = self.head, self.tail
        ok = (dist[h] >= 0) & (dist[t] == dist[h] + 1) & (self.transit[h] | (h == target))
        edges = np.flatnonzero(ok)
        out_w = np.bincount(t[edges], weights=self.weight[edges], minlength=self.nv)
        split = self.weight[edges] / out_w[t[edges]]
        return dist, edges, split


#: (targets x edges) entries a fluid-ECMP batch holds at once: targets are taken in chunks
#: of at most this many entries (each costs a few bytes of temporaries)
FLUID_BATCH = 1 << 22


def ecmp_fluid(graph: CompactGraph, src, dst):
    """Fluid ECMP: each node splits what it forwards over its shortest-path next hops, in
    proportion to their cables.

    Returns ``(pair, link, frac)`` entries for the pairs ``(src[i], dst[i])`` (compact node
    ids, distinct) and ``unreachable``, the indices of pairs with no path. Every target's
    shortest-path DAG and every pair's flow are worked out together, a level (hop) at a
    time, in a handful of array operations per level (targets in chunks of at most
    ``FLUID_BATCH`` target-edge entries).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    targets, t_of = np.unique(dst, return_inverse=True)
    parts = []
    by_pair = len(src) <= PAIR_MODE_RATIO * len(targets)     # few sources per target: each pair's own paths
    chunk = max(1, FLUID_BATCH // max(len(graph.tail), 1))
    scratch: list = []          # the pair searches' (pairs x nodes) arrays, kept at -1 between chunks
    for lo in range(0, len(targets), chunk):
        mine = np.flatnonzero((t_of >= lo) & (t_of < lo + chunk))
        if by_pair:
            pair, link, frac, bad = _fluid_pairs(graph, src[mine], dst[mine], scratch)
        else:
            pair, link, frac, bad = _fluid_chunk(graph, targets[lo:lo + chunk], src[mine], t_of[mine] - lo)
        parts.append((mine[pair], link, frac, mine[bad]))
    cat = lambda i, dt: np.concatenate([x[i] for x in parts]).astype(dt) if parts else np.empty(0, dt)  # noqa: E731
    return cat(0, np.int64), cat(1, np.int64), cat(2, np.float64), cat(3, np.int64)


def _fluid_chunk(graph: CompactGraph, targets, src, t_of):
    """:func:`ecmp_fluid` for pairs ``src[i] -> targets[t_of[i]]``."""
    nv, head, tail = graph.nv, graph.head, graph.tail
    dist = graph.distances_to_all(targets)                      # (T, nv)
    # each target's DAG: edges one hop closer, into transit nodes or the target
    into = graph.transit[head][None, :] | (head[None, :] == targets[:, None])
    d_head = dist[:, head]
    t_idx, edge = np.nonzero((d_head >= 0) & (dist[:, tail] == d_head + 1) & into)
    key = t_idx * nv + tail[edge]                               # (target, node) of each DAG edge
    out_w = np.bincount(key, weights=graph.weight[edge], minlength=len(targets) * nv)
    split = graph.weight[edge] / out_w[key]                     # np.nonzero's order: sorted by key's target
    order = np.argsort(key, kind="stable")
    edge, split = edge[order], split[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(targets) * nv))])
    reach = dist[t_of, src]
    bad = np.flatnonzero(reach < 0)
    pair, link, frac = _push_mass(graph, src, targets[t_of], t_of, reach >= 0, edge, split, ptr)
    return pair, link, frac, bad


def _push_mass(graph: CompactGraph, src, dst, row, live, edge, split, ptr, sparse=False):
    """The fluid mass of each live pair ``src[i] -> dst[i]`` at each node, hop by hop:
    ``(pair, link, frac)`` entries. The DAG edges out of node ``v`` for pair ``i`` are
    ``edge[ptr[k]:ptr[k + 1]]`` (split fractions ``split``) with ``k = row[i] * nv + v``;
    ``sparse``: ``ptr`` is ``(keys, starts, counts)`` for the keys used only (sorted), and
    the mass is summed per (pair, node) by a sort (no array over every key)."""
    nv, head = graph.nv, graph.head
    pair = np.flatnonzero(live)
    node, mass = src[pair], np.ones(len(pair))
    out_pair, out_link, out_frac = [], [], []
    while pair.size:
        k = row[pair] * nv + node
        if sparse:
            keys, first, count = ptr
            at = np.minimum(np.searchsorted(keys, k), max(len(keys) - 1, 0))
            hit = keys[at] == k if len(keys) else np.zeros(len(k), dtype=bool)
            starts = np.where(hit, first[at] if len(keys) else 0, 0)
            counts = np.where(hit, count[at] if len(keys) else 0, 0)
        else:
            starts, counts = ptr[k], ptr[k + 1] - ptr[k]
        idx = ranges(starts, counts)
        pair, mass, e = np.repeat(pair, counts), np.repeat(mass, counts) * split[idx], edge[idx]
        out_pair.append(pair)
        out_link.append(graph.link[e])
        out_frac.append(mass)
        nxt = head[e]
        on = nxt != dst[pair]
        key = pair[on] * nv + nxt[on]
        if not sparse and len(row) * nv <= FLUID_BATCH:       # (pair, node) keys summed in a dense array
            total = np.bincount(key, weights=mass[on], minlength=len(row) * nv)
            at = np.flatnonzero(np.bincount(key, minlength=len(row) * nv))
            mass = total[at]
        else:
            at, inverse = np.unique(key, return_inverse=True)
            mass = np.bincount(inverse, weights=mass[on], minlength=len(at))
        pair, node = at // nv, at % nv
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
    return cat(out_pair, np.int64), cat(out_link, np.int64), cat(out_frac, np.float64)


#: pairs per distinct target up to which :func:`ecmp_fluid` works out each pair's own
#: shortest paths (a search from both ends, a few hops deep) instead of every target's
#: DAG over the whole graph
PAIR_MODE_RATIO = 4


def _expand(graph: CompactGraph, ptr, ids, far, row, node):
    """Edges leaving (``far`` = head) or entering (``far`` = tail) each (row, node):
    (row, edge, node at the far end)."""
    counts = ptr[node + 1] - ptr[node]
    e = ids[ranges(ptr[node], counts)]
    return np.repeat(row, counts), e, far[e]


def _dag_edges(graph: CompactGraph, sp, r, u):
    """The edges ``(row, edge id)`` from a node on a shortest path (``sp[r, u]``, its position)
    to the next node on one, sorted by (row, tail node) and edge id. Per position ``s``, read
    from the side with fewer edges: out of the nodes at ``s``, or into those at ``s + 1`` (in a
    three-tier Clos the ~1,000 core switches of a leaf pair's paths have 128 ports each, of
    which one leads on: 134 k edges read a pair from the cores' side, ~2 k from the far
    spines')."""
    pos = sp[r, u]
    out_deg, in_deg = np.diff(graph.out_ptr), np.diff(graph.in_ptr)
    rows, edges = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for s in range(int(pos.max(initial=0))):
        a, b = pos == s, pos == s + 1
        if out_deg[u[a]].sum() <= in_deg[u[b]].sum():
            rr, e, far = _expand(graph, graph.out_ptr, graph.out_edges, graph.head, r[a], u[a])
            on = sp[rr, far] == s + 1
        else:
            rr, e, far = _expand(graph, graph.in_ptr, graph.in_edges, graph.tail, r[b], u[b])
            on = sp[rr, far] == s
        rows.append(rr[on])
        edges.append(e[on])
    r, e = np.concatenate(rows), np.concatenate(edges)
    order = np.lexsort((e, r * graph.nv + graph.tail[e]))
    return r[order], e[order]


def _fluid_pairs(graph: CompactGraph, src, dst, scratch=None):
    """:func:`_fluid_chunk` for pairs ``src[i] -> dst[i]``, each worked out on its own: a
    breadth-first search from both ends (through transit nodes) until they meet gives the
    hops ``D``; the nodes on a shortest path are those whose hops from the source and to the
    destination add up to ``D`` (walked back from where both are known); a pair's DAG is
    every edge between them one hop further along. That is exactly the part of the
    destination's whole-graph DAG the pair's mass reaches, with the same split fractions
    (each node on a shortest path keeps all its next hops), so the entries are identical."""
    nv, head, tail, transit = graph.nv, graph.head, graph.tail, graph.transit
    P = len(src)
    rows = np.arange(P)
    # (pairs x nodes) arrays at -1: kept in ``scratch`` by the caller across chunks, and
    # reset there entry by entry (only the explored entries were written)
    if scratch is None:
        scratch = []
    if not scratch or scratch[0].size < P * nv:
        scratch[:] = [np.full(P * nv, -1, dtype=np.int32) for _ in range(3)]
    # hops from the source, hops to the destination, position on a shortest path
    df, db, sp = (a[:P * nv].reshape(P, nv) for a in scratch)
    df[rows, src] = 0
    db[rows, dst] = 0
    hops = np.full(P, -1, dtype=np.int64)
    done = np.zeros(P, dtype=bool)
    fronts = [(rows, src), (rows, dst)]
    seen = ([(rows, src)], [(rows, dst)])          # per side, the (row, node) pairs found at each depth
    depth = [0, 0]
    sides = ((df, db, graph.out_ptr, graph.out_edges, head), (db, df, graph.in_ptr, graph.in_edges, tail))
    side = 0
    while not done.all():
        mine, other, ptr, ids, far = sides[side]
        r, n = fronts[side]
        keep = ~done[r]
        r, n = r[keep], n[keep]
        if not r.size:
            break
        depth[side] += 1
        r, _, v = _expand(graph, ptr, ids, far, r, n)
        new = mine[r, v] < 0
        found = np.unique(r[new] * nv + v[new])
        r, v = found // nv, found % nv
        mine[r, v] = depth[side]
        seen[side].append((r, v))
        meet = (other[r, v] >= 0) & (transit[v] | (v == src[r]) | (v == dst[r]))
        if meet.any():
            cand = np.full(P, np.iinfo(np.int64).max)
            np.minimum.at(cand, r[meet], depth[side] + other[r[meet], v[meet]])
            hit = cand < np.iinfo(np.int64).max
            hops[hit] = cand[hit]
            done |= hit
        pas = transit[v]
        fronts[side] = (r[pas], v[pas])
        # a side with nothing left to expand: its rows without a meeting have no path
        alive = np.zeros(P, dtype=bool)
        alive[fronts[side][0]] = True
        done |= ~alive
        side = 1 - side
    bad = np.flatnonzero(hops < 0)
    # position along a shortest path of every node on one (-1 elsewhere); the explored pairs
    # are read from ``seen`` (never a pass over the (pairs x nodes) arrays)
    r = np.concatenate([a for a, _ in seen[0]])
    v = np.concatenate([b for _, b in seen[0]])
    both = (db[r, v] >= 0) & ((df[r, v] + db[r, v]) == hops[r]) & (hops[r] > 0)
    r, v = r[both], v[both]
    ok = transit[v] | (v == src[r]) | (v == dst[r])
    sp[r[ok], v[ok]] = df[r[ok], v[ok]]
    on_path = [r[ok] * nv + v[ok]]

    def deepest(found):
        return max(i for i, (a, _) in enumerate(found) if len(a))

    for level in range(deepest(seen[0]) - 1, -1, -1):      # towards the source: a next hop on a path
        r, u = seen[0][level]
        free = sp[r, u] < 0
        r, u = r[free], u[free]
        ok = transit[u] | (u == src[r])
        r, e, v = _expand(graph, graph.out_ptr, graph.out_edges, head, r[ok], u[ok])
        hit = sp[r, v] == level + 1
        sp[r[hit], tail[e[hit]]] = level
        on_path.append(r[hit] * nv + tail[e[hit]])
    for level in range(deepest(seen[1]) - 1, -1, -1):      # towards the destination: a last hop on a path
        r, v = seen[1][level]
        free = sp[r, v] < 0
        r, v = r[free], v[free]
        ok = transit[v] | (v == dst[r])
        r, e, u = _expand(graph, graph.in_ptr, graph.in_edges, tail, r[ok], v[ok])
        hit = (sp[r, u] >= 0) & (sp[r, u] == hops[r] - level - 1)
        sp[r[hit], head[e[hit]]] = hops[r[hit]] - level
        on_path.append(r[hit] * nv + head[e[hit]])
    # each pair's DAG: edges from a node on a path (not its destination) to the next node on one
    at = np.unique(np.concatenate(on_path))                 # np.nonzero(sp >= 0)'s order
    r, edge = _dag_edges(graph, sp, at // nv, at % nv)
    key = r * nv + tail[edge]                   # sorted by (pair, node), edge ids ascending within
    for side in seen:                           # the scratch arrays back at -1 for the next chunk
        for a, b in side:
            df[a, b] = -1
            db[a, b] = -1
    sp.reshape(-1)[at] = -1
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.empty(0, dtype=np.int64)
    count = np.diff(np.r_[first, len(key)])
    w = graph.weight[edge]
    # a (pair, node)'s weights summed in order, as a bincount over the keys would
    out_w = np.add.reduceat(w, first) if len(key) else np.empty(0)
    split = w / np.repeat(out_w, count)
    live = hops > 0
    pair, link, frac = _push_mass(graph, src, dst, rows, live, edge, split, (key[first], first, count), sparse=True)
    return pair, link, frac, bad
_M1, _M2, _M3 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def mix64(*parts) -> np.ndarray:
    """SplitMix64-style hash of integer arrays (broadcast together) -> uint64."""
    with np.errstate(over="ignore"):
        h = np.zeros(np.broadcast(*parts).shape, dtype=np.uint64)
        for p in parts:
            h = (h ^ np.asarray(p).astype(np.uint64)) * _M3
            h ^= h >> np.uint64(30)
            h *= _M1
            h ^= h >> np.uint64(27)
            h *= _M2
            h ^= h >> np.uint64(31)
    return h


#: (targets x edges) entries a hashed-ECMP batch holds at once: destination switches are
#: taken in chunks of at most this many entries (as :data:`FLUID_BATCH`), so the memory no
#: longer grows with destinations x fabric (adv17d F2: 2,000 pairs on rail_optimized(2048)
#: held every destination's DAG at once, ~630 MiB)
HASH_BATCH = 1 << 20


def _dag_rows(graph: CompactGraph, targets):
    """The shortest-path DAG of each of ``targets`` (as :meth:`CompactGraph.dag`), worked out
    together: ``(dist, ptr, edges)``, ``dist`` (targets x nodes) hops, ``edges`` the DAG edge
    ids sorted by (target, tail node) then id; ``ptr`` their start per ``target * nv + node``."""
    nv, head, tail = graph.nv, graph.head, graph.tail
    dist = graph.distances_to_all(targets)
    into = graph.transit[head][None, :] | (head[None, :] == targets[:, None])
    d_head = dist[:, head]
    t_idx, edge = np.nonzero((d_head >= 0) & (dist[:, tail] == d_head + 1) & into)
    rows = t_idx * nv + tail[edge]               # np.nonzero's order: by target, then edge id
    order = np.argsort(rows, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(targets) * nv))])
    return dist, ptr, edge[order]


def _hash_walk(graph: CompactGraph, ptr, edges, row, src, dst, hops, key, seed):
    """Walk each walker ``src[i] -> dst[i]`` (DAG ``row[i]`` of ``ptr`` / ``edges``) hop by hop:
    ``(links, digits)``, (walkers x most hops) link ids (-1 past the end) and the 1-based
    position of each hop's edge among its node's next hops (0 past the end)."""
    cum = np.cumsum(graph.weight[edges].astype(np.int64))
    n_hops = int(hops.max()) if len(hops) else 0
    path = np.full((len(src), max(n_hops, 1)), -1, dtype=np.int32)
    digits = np.zeros(path.shape, dtype=np.int32)
    cur = src.copy()
    live = hops > 0
    for h in range(n_hops):
        idx = np.flatnonzero(live & (cur != dst))
        if not idx.size:
            break
        at = row[idx] * graph.nv + cur[idx]
        lo, hi = ptr[at], ptr[at + 1]
        base_w = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0)
        total = cum[hi - 1] - base_w
        pick = (mix64(key[idx], h, seed) % total.astype(np.uint64)).astype(np.int64)
        chosen = np.searchsorted(cum, base_w + pick, side="right")
        e = edges[chosen]
        path[idx, h] = graph.link[e]
        cur[idx] = graph.head[e]
        digits[idx, h] = chosen - lo + 1
    return path, digits


def ecmp_hashed(graph: CompactGraph, src, dst, key, seed: int):
    """One shortest path per walker, chosen hop by hop by a seeded hash of ``key``
    (e.g. flow and sub-flow ids) among the next hops, each weighted by its cables.

    Returns ``(edges, path_key, unreachable)``: ``edges`` is (walkers x max hops) global
    link ids, ``-1`` past the destination; ``path_key`` is an int64 that is equal for two
    walkers exactly when their paths are (None when it could overflow): the pair, then each
    hop's position among its node's next hops, digits in base (most next hops + 1). The
    destinations' DAGs are built in chunks of at most :data:`HASH_BATCH` target-edge entries.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    key = np.asarray(key)
    targets, t_of = np.unique(dst, return_inverse=True)
    hops = np.full(len(src), -1, dtype=np.int64)
    chunk = max(1, HASH_BATCH // max(len(graph.tail), 1))
    parts, widest = [], 0                       # widest: most next hops of a node in any DAG
    for lo in range(0, len(targets), chunk):
        mine = np.flatnonzero((t_of >= lo) & (t_of < lo + chunk))
        dist, ptr, edges = _dag_rows(graph, targets[lo:lo + chunk])
        row = t_of[mine] - lo
        hops[mine] = dist[row, src[mine]]
        widest = max(widest, int(np.diff(ptr).max()))
        parts.append((mine, *_hash_walk(graph, ptr, edges, row, src[mine], dst[mine], hops[mine],
                                        key[mine], seed)))
    unreachable = np.flatnonzero(hops < 0)
    n_hops = int(hops.max()) if len(hops) else 0
    path = np.full((len(src), max(n_hops, 1)), -1, dtype=np.int32)
    digits = np.zeros(path.shape, dtype=np.int32)
    for mine, p, d in parts:
        path[mine, :p.shape[1]] = p
        digits[mine, :d.shape[1]] = d
    base = widest + 1
    bits = 2 * np.log2(max(graph.nv, 2)) + n_hops * np.log2(base)
    path_key = None
    if bits < 62:
        path_key = src * graph.nv + dst
        live = hops > 0
        for h in range(n_hops):             # a finished walker's key still shifts (digit 0)
            path_key[live] = path_key[live] * base + digits[live, h]
    return path, path_key, unreachable
