"""CollectiveResult.link_utilization is each link's mean over the transfer the result reports
(``sum(step.count * step.transfer)``), as its docstring says: the bytes the solved steps put on
the link over its capacity x that transfer. fix20d found each step's first allocation held for
the whole step (a ring's NVLink hop, done early while the NICs set the step, counted busy all
along); adv20d found the tuned time's longer transfer left out (a 64 KiB ring LL all-gather's
NICs reported 0.986 busy for 0.006 of their bytes)."""
import warnings

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.routing import LinkTable

G = tp.rail_optimized(2)
CAP = LinkTable.from_graph(G).effective_capacity(None)


@pytest.mark.parametrize("op, size, kw", [
    ("all_gather", 2**32, dict(ranks=[0, 4, 8, 12], algorithm="ring", protocol="Simple")),   # flows end apart
    ("all_gather", 2**16, {}),                      # NCCL's ring LL: the tuned time far above the flows'
    ("all_gather", 2**24, {}),                      # ring LL128
    ("all_reduce", 2**20, {}),                      # tree LL128
    ("all_reduce", 2**28, dict(algorithm="ring", protocol="LL")),
    ("all_reduce", 2**28, dict(algorithm="ring", protocol="Simple", step_latency=0.0)),      # the flows' own time
])
def test_utilization_times_capacity_and_time_is_the_bytes_moved(op, size, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fs.collective(G, op, size, **kw)
    moved = np.zeros(len(CAP))              # bytes each link carries: the routed flows' sizes, every step
    for routing, sizes, count in r.solved_on.steps:
        moved += count * routing.link_loads(sizes)
    busy = sum(s.count * s.transfer for s in r.steps)
    util = np.asarray(r.link_utilization)
    assert util.max() <= 1.0 + 1e-9
    # per link: capacity x the reported transfer x utilization gives back its bytes (the first
    # allocation held all step gave 128.7 GB for the 4 GiB all-gather's 38.7)
    assert util * CAP * busy == pytest.approx(moved, rel=0.03, abs=1e-6 * moved.max())
