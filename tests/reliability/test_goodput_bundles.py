"""Degraded cables are physical cables: an edge bundling n parallel cables counts n of them in
a tier's rate, and one degraded cable takes 1/n of the bundle's capacity x (1 - factor)."""

import networkx as nx
import numpy as np
import pytest

import topologies as tp
from flowsolver.reliability import degradation_impact, job_units, state_graphs, state_step_times

# bytes/s of one fabric cable: slow enough that the cables, not a send's P2P channels (NCCL's 14 GB/s a
# channel across the network, collectives._p2p.NET_CHANNEL_RATE), set the sends' times here
C = 2e9


def _bundled(n=4):
    """Two GPUs on two leaves joined by one edge of n parallel cables (capacity n C)."""
    g = nx.DiGraph()
    g.add_node("gpu0", kind="gpu", rank=0)
    g.add_node("gpu1", kind="gpu", rank=1)
    g.add_node("leaf0", kind="switch")
    g.add_node("leaf1", kind="switch")
    for u, v, cap, tier, cables in [("gpu0", "leaf0", 8 * C, "access", 1), ("gpu1", "leaf1", 8 * C, "access", 1),
                                    ("leaf0", "leaf1", n * C, "fabric", n)]:
        for a, b in ((u, v), (v, u)):
            g.add_edge(a, b, capacity=cap, latency=0.0, tier=tier, cables=cables)
    return g


def test_a_tier_counts_its_physical_cables_as_the_bill_does():
    g = tp.rail_optimized(64)                         # leaf-spine edges bundle 4 cables each
    bill = tp.bill(g).links[("leaf-spine", "optical", 400)]
    assert job_units(g)["link"]["leaf-spine"] == bill == 4 * len(tp.tier_cables(g, "leaf-spine"))


def test_one_degraded_cable_of_a_bundle_takes_its_share():
    g = _bundled(4)
    # one of 4 cables at half rate: 4C - C/2 = 3.5C; two of them: 3C; all four: 2C
    for count, left in ((1, 3.5), (2, 3.0), (4, 2.0)):
        (h,) = state_graphs(g, [("fabric", 0.5)], [[count]])
        assert h.edges["leaf0", "leaf1"]["capacity"] == pytest.approx(left * C, rel=1e-12)
        assert h.edges["leaf1", "leaf0"]["capacity"] == pytest.approx(left * C, rel=1e-12)
    # the step: a 1 GB send across the bundle moves at its capacity, 1e9 / 4C -> 1e9 / 3.5C
    step = dict(op="send_recv", size=1e9, policy="shortest")
    st = state_step_times(g, step, [("fabric", 0.5)], [], [[0], [1]], compute_time=0.0)
    assert st.step_time[1] - st.step_time[0] == pytest.approx(1e9 / (3.5 * C) - 1e9 / (4 * C), rel=1e-9)
    (row,) = degradation_impact(g, step, 0.5, tiers=["fabric"])
    assert row["cables"] == 4
    assert row["exact_s"] - row["healthy_s"] == pytest.approx(1e9 / (3.5 * C) - 1e9 / (4 * C), rel=1e-9)


def test_routing_around_drains_a_bundle_only_when_every_cable_is_slow():
    # two paths, each edge a bundle of 2 cables (2C); path A's first bundle degraded at 1/4
    # a cable: one of its cables, A = 2C (1 - 0.75 / 2) = 1.25C, stays in routing (its other
    # cable at full rate); both, A = C / 2, drained: the flow on B alone at 2C
    g = nx.DiGraph()
    g.add_node("gpu0", kind="gpu", rank=0)
    g.add_node("gpu1", kind="gpu", rank=1)
    for s in ("leaf0", "leaf1", "spA", "spB"):
        g.add_node(s, kind="switch")
    for u, v, cap, tier, n in [("gpu0", "leaf0", 8 * C, "access", 1), ("gpu1", "leaf1", 8 * C, "access", 1),
                               ("leaf0", "spA", 2 * C, "a", 2), ("spA", "leaf1", 2 * C, "fabric", 2),
                               ("leaf0", "spB", 2 * C, "fabric", 2), ("spB", "leaf1", 2 * C, "fabric", 2)]:
        for a, b in ((u, v), (v, u)):
            g.add_edge(a, b, capacity=cap, latency=0.0, tier=tier, cables=n)
    step = dict(op="send_recv", size=1e9, policy="shortest")
    t = state_step_times(g, step, [("a", 0.25)], [], [[0], [1], [2]], compute_time=0.0, reroute="around").step_time
    base = t[0] - 1e9 / (4 * C)                       # healthy: half the flow on each path, 4C in all
    rate = 1e9 / (t - base)
    # one cable slow, not drained: half the flow on A at 1.25C -> the flow at 2.5C
    assert rate[1] == pytest.approx(2.5 * C, rel=1e-9)
    # both slow, drained: the flow on B alone at 2C
    assert rate[2] == pytest.approx(2.0 * C, rel=1e-9)
    assert np.all(np.isfinite(t))
