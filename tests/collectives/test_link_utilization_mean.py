"""CollectiveResult.link_utilization is each link's mean over the transfer, as its docstring
says: the bytes the solved steps put on the link over its capacity x the transfer (fix20d
found each step's first allocation held for the whole step: a ring's NVLink hop, done early
while the NICs set the step, counted busy all along; the replay's sharing read it)."""
import warnings

import numpy as np

import flowsolver as fs
import topologies as tp
from flowsolver.routing import LinkTable


def test_utilization_times_capacity_and_time_is_the_bytes_moved():
    g = tp.rail_optimized(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fs.collective(g, "all_gather", 2**32, ranks=[0, 4, 8, 12], algorithm="ring", protocol="Simple")
    cap = LinkTable.from_graph(g).effective_capacity(None)
    moved = np.zeros(len(cap))              # bytes each link carries: the routed flows' sizes, every step
    for routing, sizes, count in r.solved_on.steps:
        moved += count * routing.link_loads(sizes)
    # 3 steps of 4 flows of 1 GiB: at least 12 GiB leave the GPUs, each over >= 2 links
    assert moved.sum() >= 2 * 12 * 2**30
    busy = sum(s.count * s.transfer for s in r.steps)
    util = np.asarray(r.link_utilization)
    assert util.max() <= 1.0 + 1e-9
    # the mean: capacity x time x utilization gives back the bytes (the first allocation held
    # all step gave 128.7 GB for these 38.7)
    assert (util * cap * busy).sum() == __import__("pytest").approx(moved.sum(), rel=0.03)
