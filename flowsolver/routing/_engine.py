"""Shortest-path machinery on compact graphs: fluid ECMP and hashed path choice.

A compact graph has nodes ``0 .. nv-1`` and edges ``tail[e] -> head[e]`` (only usable
links) with integer ``weight[e]`` (parallel cables: an ECMP hash picks a cable, so a
next hop with ``c`` cables gets ``c`` shares). ``transit[v]`` says whether traffic may
pass through ``v`` (sources and destinations may always be used as endpoints).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._matrix import _ranges


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

    def distances_to(self, target: int) -> np.ndarray:
        """Hops from every node to ``target`` through transit nodes only (-1: unreachable)."""
        dist = np.full(self.nv, -1, dtype=np.int64)
        dist[target] = 0
        frontier = np.array([target])
        d = 0
        while frontier.size:
            edges = self.in_edges[_ranges(self.in_ptr[frontier], self.in_ptr[frontier + 1] - self.in_ptr[frontier])]
            preds = np.unique(self.tail[edges])
            preds = preds[dist[preds] < 0]
            d += 1
            dist[preds] = d
            frontier = preds[self.transit[preds]]
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


def ecmp_fluid(graph: CompactGraph, src, dst):
    """Fluid ECMP: each node splits what it forwards over its shortest-path next hops, in
    proportion to their cables.

    Returns ``(pair, link, frac)`` entries for the pairs ``(src[i], dst[i])`` (compact node
    ids, distinct) and ``unreachable``, the indices of pairs with no path.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    out_pair, out_link, out_frac, bad = [], [], [], []
    order = np.argsort(dst, kind="stable")
    bounds = np.flatnonzero(np.diff(dst[order])) + 1
    for group in np.split(order, bounds):
        if not group.size:
            continue
        target = int(dst[group[0]])
        dist, edges, split = graph.dag(target)
        sources = src[group]
        reach = dist[sources]
        if (reach < 0).any():
            bad.extend(group[reach < 0].tolist())
            keep = reach >= 0
            group, sources, reach = group[keep], sources[keep], reach[keep]
            if not group.size:
                continue
        nv = graph.nv
        step = sp.csr_matrix((split, (graph.tail[edges], graph.head[edges])), shape=(nv, nv))
        to_edge = sp.csr_matrix((split, (graph.tail[edges], np.arange(len(edges)))), shape=(nv, len(edges)))
        mass = sp.csr_matrix((np.ones(len(sources)), (np.arange(len(sources)), sources)),
                             shape=(len(sources), nv))
        total = mass
        for _ in range(int(reach.max()) - 1):
            mass = mass @ step
            total = total + mass
        frac = (total @ to_edge).tocoo()
        out_pair.append(group[frac.row])
        out_link.append(graph.link[edges[frac.col]])
        out_frac.append(frac.data)
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
    return cat(out_pair, np.int64), cat(out_link, np.int64), cat(out_frac, np.float64), np.array(bad, dtype=np.int64)


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


def ecmp_hashed(graph: CompactGraph, src, dst, key, seed: int):
    """One shortest path per walker, chosen hop by hop by a seeded hash of ``key``
    (e.g. flow and sub-flow ids) among the next hops, each weighted by its cables.

    Returns ``(edges, path_key, unreachable)``: ``edges`` is (walkers x max hops) global
    link ids, ``-1`` past the destination; ``path_key`` is an int64 that is equal for two
    walkers exactly when their paths are (None when it could overflow).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    targets, t_index = np.unique(dst, return_inverse=True)
    rows, edge_ids, weights, dists = [], [], [], np.empty((len(targets), graph.nv), dtype=np.int64)
    for i, target in enumerate(targets):
        dist, edges, _ = graph.dag(int(target))
        dists[i] = dist
        rows.append(i * graph.nv + graph.tail[edges])
        edge_ids.append(edges)
        weights.append(graph.weight[edges])
    rows = np.concatenate(rows)
    order = np.argsort(rows, kind="stable")
    rows, edge_ids, weights = rows[order], np.concatenate(edge_ids)[order], np.concatenate(weights)[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(targets) * graph.nv))])
    cum = np.cumsum(weights.astype(np.int64))
    hops = dists[t_index, src]
    unreachable = np.flatnonzero(hops < 0)
    n_hops = int(hops.max()) if len(hops) else 0
    path = np.full((len(src), max(n_hops, 1)), -1, dtype=np.int32)
    base = int(np.diff(ptr).max()) + 1 if len(ptr) > 1 else 1
    bits = 2 * np.log2(max(graph.nv, 2)) + n_hops * np.log2(base)
    path_key = (src * graph.nv + dst) if bits < 62 else None
    cur = src.copy()
    live = hops > 0
    for h in range(n_hops):
        active = live & (cur != dst)
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        row = t_index[idx] * graph.nv + cur[idx]
        lo, hi = ptr[row], ptr[row + 1]
        base_w = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0)
        total = cum[hi - 1] - base_w
        pick = (mix64(key[idx], h, seed) % total.astype(np.uint64)).astype(np.int64)
        chosen = np.searchsorted(cum, base_w + pick, side="right")
        e = edge_ids[chosen]
        path[idx, h] = graph.link[e]
        cur[idx] = graph.head[e]
        if path_key is not None:
            path_key[idx] = path_key[idx] * base + (chosen - lo + 1)
            path_key[live & ~active] *= base
    return path, path_key, unreachable
