"""Hashed ECMP with the destinations' DAGs built in chunks (adv17d F2): every walker's path is
the one a plain walk picks (a breadth-first search to its destination, next hops by edge id,
a SplitMix64 hash of key, hop and seed modulo their cables), whatever the chunk size, and the
memory no longer grows with destinations x fabric."""

import tracemalloc

import numpy as np
import pytest

import topologies as tp
from flowsolver.routing import _shortest_paths as _engine
from flowsolver.routing._graph_index import GraphIndex
from flowsolver.routing._shortest_paths import CompactGraph, ecmp_hashed

from ..helpers import random_compact_graph

_MASK = (1 << 64) - 1


def _splitmix(*parts) -> int:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014) folded over ``parts``, in Python ints."""
    h = 0
    for p in parts:
        h = ((h ^ (int(p) & _MASK)) * 0x9E3779B97F4A7C15) & _MASK
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) & _MASK
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) & _MASK
        h ^= h >> 31
    return h


def _walk(graph: CompactGraph, s: int, d: int, key: int, seed: int):
    """The links of one walker's path, or None without one: plain Python on the edge lists."""
    tail, head = graph.tail.tolist(), graph.head.tolist()
    dist = {d: 0}
    frontier = [d]
    while frontier:                      # hops to d; only transit nodes (or d) pass traffic on
        nxt = []
        for v in frontier:
            for e in range(len(tail)):
                if head[e] == v and tail[e] not in dist:
                    dist[tail[e]] = dist[v] + 1
                    nxt.append(tail[e])
        frontier = [v for v in nxt if graph.transit[v]]
    if s == d or s not in dist:
        return [] if s == d else None
    links, cur = [], s
    for h in range(dist[s]):
        hops = [e for e in range(len(tail)) if tail[e] == cur and head[e] in dist
                and dist[head[e]] == dist[cur] - 1 and (graph.transit[head[e]] or head[e] == d)]
        w = [int(graph.weight[e]) for e in hops]
        pick = _splitmix(key, h, seed) % sum(w)
        for e, c in zip(hops, np.cumsum(w)):
            if pick < c:
                break
        links.append(int(graph.link[e]))
        cur = head[e]
    return links


def _random_graph(seed):
    return random_compact_graph(np.random.default_rng(seed), 30)


def _fabric(name):
    g = {"fat_tree(4)": lambda: tp.fat_tree(4), "dragonfly(2,4,2)": lambda: tp.dragonfly(2, 4, 2),
         "rail(64)": lambda: tp.rail_optimized(64),
         "fat_tree(4) failed": lambda: tp.fail_links(tp.fat_tree(4), 0.1, seed=2)}[name]()
    ix = GraphIndex.of(g)
    return ix.compact(np.flatnonzero(ix.is_switch))[0]


def _check(graph, src, dst, key, seed):
    paths, path_key, bad = ecmp_hashed(graph, src, dst, key, seed)
    want = [_walk(graph, int(s), int(d), int(k), seed) for s, d, k in zip(src, dst, key)]
    assert bad.tolist() == [i for i, w in enumerate(want) if w is None]
    width = max([len(w) for w in want if w is not None] + [1])
    assert paths.shape == (len(src), width)
    for i, w in enumerate(want):
        if w is not None:
            assert paths[i].tolist() == w + [-1] * (width - len(w))
    if path_key is not None:                 # equal keys exactly for equal (pair, path)
        ok = np.setdiff1d(np.arange(len(src)), bad)
        same_key = path_key[ok][:, None] == path_key[ok][None, :]
        same = ((src[ok][:, None] == src[ok][None, :]) & (dst[ok][:, None] == dst[ok][None, :])
                & (paths[ok][:, None, :] == paths[ok][None, :, :]).all(axis=2))
        assert np.array_equal(same_key, same)


@pytest.mark.parametrize("batch", [1 << 20, 1])      # 1: one destination a chunk
@pytest.mark.parametrize("seed", range(8))
def test_random_graphs_match_a_plain_walk(monkeypatch, seed, batch):
    monkeypatch.setattr(_engine, "HASH_BATCH", batch, raising=False)
    graph = _random_graph(seed)
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 50))
    src, dst = rng.integers(0, graph.nv, n), rng.integers(0, graph.nv, n)
    _check(graph, src, dst, rng.integers(0, 10**9, n), seed)


@pytest.mark.parametrize("batch", [1 << 20, 200])
@pytest.mark.parametrize("name", ["fat_tree(4)", "dragonfly(2,4,2)", "rail(64)", "fat_tree(4) failed"])
def test_fabrics_match_a_plain_walk(monkeypatch, name, batch):
    monkeypatch.setattr(_engine, "HASH_BATCH", batch, raising=False)
    graph = _fabric(name)
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, graph.nv, 60), rng.integers(0, graph.nv, 60)
    for seed in (0, 3):
        _check(graph, src, dst, np.arange(60) * 7 + 1, seed)


def test_memory_does_not_grow_with_destinations_times_fabric():
    # rail_optimized(2048): 1,280 switches, 40,960 usable links; 2,000 random switch pairs
    # reach 1,014 distinct destinations. Every DAG at once held 1,278 MiB (tracemalloc, the
    # code before chunking); in chunks of HASH_BATCH target-edge entries 33 MiB.
    g = tp.rail_optimized(2048)
    ix = GraphIndex.of(g)
    graph = ix.compact(np.flatnonzero(ix.is_switch))[0]
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, graph.nv, 2000), rng.integers(0, graph.nv, 2000)
    tracemalloc.start()
    try:
        paths, _, bad = ecmp_hashed(graph, src, dst, np.arange(2000), 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not len(bad) and paths.shape[0] == 2000
    assert peak < 150 * 2**20
