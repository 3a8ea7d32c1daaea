"""Threads of one process share a graph's cached routes and the solver's kept device
structure (a sweep run through a ThreadPoolExecutor): every answer must equal the one a
single thread gets. Before the caches were made thread-safe, concurrent routes on one graph
read a path memo half-way through an update (wrong columns, or "negative dimensions")."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

import topologies as tp
from flowsolver import Flows, collective, route


def _patterns(n_gpus, count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a = rng.integers(0, n_gpus, 256)
        out.append(Flows(a, (a + rng.integers(1, n_gpus, 256)) % n_gpus, 1.0))
    return out


def _columns(rm):
    return rm.seg_ptr.tobytes(), rm.seg_link.tobytes(), rm.seg_frac.tobytes(), rm.flow_seg.tobytes()


def test_routes_computed_by_threads_on_one_graph_equal_those_of_one_thread():
    patterns = _patterns(128, 24, seed=7)
    # reference: one thread, on a graph of its own (a route does not depend on what was routed before)
    alone = [_columns(route(tp.fat_tree(8), f)) for f in patterns]
    shared = tp.fat_tree(8)
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda f: _columns(route(shared, f)), patterns))
    assert [a == b for a, b in zip(together, alone)] == [True] * len(patterns)


def test_collectives_timed_by_threads_on_shared_graphs_equal_one_thread():
    graphs = [tp.rail_optimized(2, link=link) for link in ("ib_ndr", "ib_hdr")]
    jobs = [(g, size) for g in graphs for size in (2**20, 2**24)] * 4
    alone = [collective(tp.rail_optimized(2, link=link), "all_reduce", size, algorithm="ring").time
             for link in ("ib_ndr", "ib_hdr") for size in (2**20, 2**24)] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda j: collective(j[0], "all_reduce", j[1], algorithm="ring").time, jobs))
    assert together == alone
