"""Fluid ECMP worked out pair by pair (a search from both ends) gives entries identical, bit
for bit and in the same order, to the whole-graph DAG of each destination (the reference)."""

import numpy as np
import pytest

import topologies as tp
from flowsolver.routing import _shortest_paths as _engine
from flowsolver.routing._shortest_paths import CompactGraph, ecmp_fluid

from ..helpers import random_compact_graph


def _both(monkeypatch, graph, src, dst):
    monkeypatch.setattr(_engine, "PAIR_MODE_RATIO", 0)        # every destination's DAG
    ref = ecmp_fluid(graph, src, dst)
    monkeypatch.setattr(_engine, "PAIR_MODE_RATIO", 10**9)    # each pair on its own
    new = ecmp_fluid(graph, src, dst)
    return ref, new


def _assert_identical(ref, new):
    for a, b in zip(ref, new):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)


@pytest.mark.parametrize("batch", [_engine.FLUID_BATCH, 300])     # 300: many small chunks, grouped
@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_with_non_transit_nodes_cables_and_cuts(monkeypatch, seed, batch):
    monkeypatch.setattr(_engine, "FLUID_BATCH", batch)
    rng = np.random.default_rng(seed)
    graph = random_compact_graph(rng, 40)
    nv = graph.nv
    n = int(rng.integers(1, 60))
    src, dst = rng.integers(0, nv, n), rng.integers(0, nv, n)
    ok = src != dst
    ref, new = _both(monkeypatch, graph, src[ok], dst[ok])
    _assert_identical(ref, new)


def test_fat_tree_fabric_with_failed_links(monkeypatch):
    g = tp.fat_tree(8)
    nodes = sorted(g.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    edges = [(index[u], index[v]) for u, v in g.edges]
    rng = np.random.default_rng(3)
    alive = rng.random(len(edges)) > 0.1                       # a tenth of the links failed
    tail = np.array([u for (u, _), a in zip(edges, alive) if a])
    head = np.array([v for (_, v), a in zip(edges, alive) if a])
    transit = np.array([g.nodes[v].get("kind") != "gpu" for v in nodes])
    graph = CompactGraph(len(nodes), tail, head, np.ones(len(tail)), np.arange(len(tail)), transit)
    gpus = np.flatnonzero(~transit)
    src = rng.choice(gpus, 200)
    dst = rng.choice(gpus, 200)
    ok = src != dst
    ref, new = _both(monkeypatch, graph, src[ok], dst[ok])
    assert len(ref[0]) > 0
    _assert_identical(ref, new)


def test_a_pair_reads_the_few_edges_into_its_destination_not_every_port_of_the_middle(monkeypatch):
    # src -> 4 middle switches -> dst, each middle also cabled to 50 dead-end nodes (a core
    # switch's ports to other pods): the pair's DAG is its 8 edges. Read out of the middles,
    # that is 4 x 51 edges; into dst, 4. The search from both ends reads 4 + 4, the walks back
    # from both 4 + 4, the DAG 4 + 4: 6 x 4 edges in all, never the 200 dead ends
    m, dead = 4, 50
    tail = [0] * m + [1 + i for i in range(m)] + [1 + i for i in range(m) for _ in range(dead)]
    head = [1 + i for i in range(m)] + [m + 1] * m + list(range(m + 2, m + 2 + m * dead))
    graph = CompactGraph(m + 2 + m * dead, tail, head, np.ones(len(tail)), np.arange(len(tail)))
    read, expand = [], _engine._expand

    def counted(*args):
        out = expand(*args)
        read.append(len(out[1]))
        return out
    monkeypatch.setattr(_engine, "_expand", counted)
    ref, new = _both(monkeypatch, graph, np.array([0]), np.array([m + 1]))
    _assert_identical(ref, new)
    assert sorted(new[1].tolist()) == list(range(2 * m)) and np.allclose(new[2], 1 / m)
    read.clear()
    ecmp_fluid(graph, np.array([0]), np.array([m + 1]))
    assert sum(read) == 6 * m
