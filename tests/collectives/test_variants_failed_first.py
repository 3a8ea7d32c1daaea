"""collective_variants with a graph that cannot be routed (every link of server 0 failed)
listed first (adv18c finding 3): the batch raised RoutingError for it, losing the healthy
variant's answer, though listed second it was one STALLED variant. Now both orders give the
same statuses and the healthy variant the same time as collective() on it."""

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp


def cut_off(g, server=0):
    h = g.copy()
    for u, v, d in h.edges(data=True):
        if str(u).startswith(f"s{server}/") or str(v).startswith(f"s{server}/"):
            d["capacity"] = 0.0
    return h


@pytest.mark.parametrize("op", ["all_to_all", "all_reduce"])
def test_failed_graph_first_or_second_gives_the_same_statuses(op):
    g = tp.rail_optimized(2)
    srv = cut_off(g)
    healthy = fs.collective(g, op, 2**26)
    ab = fs.collective_variants([g, srv], op, 2**26)
    ba = fs.collective_variants([srv, g], op, 2**26)
    assert [r.status for r in ab] == [fs.Status.OK, fs.Status.STALLED]
    assert [r.status for r in ba] == [fs.Status.STALLED, fs.Status.OK]
    # the healthy variant is routed on its own graph either way: collective()'s time
    assert ab[0].time == pytest.approx(healthy.time, rel=1e-12)
    assert ba[1].time == pytest.approx(healthy.time, rel=1e-12)
    assert np.isinf(ab[1].time) and np.isinf(ba[0].time)
    # the message says what is true: the route given by the graph that routed, not "every path"
    for r in (ab[1], ba[0]):
        assert "every path" not in r.message
        assert "graphs[" in r.message and "route" in r.message
    assert "graphs[1]" in ba[0].message and "graphs[0]" in ab[1].message


def test_no_graph_routes_still_raises():
    srv = cut_off(tp.rail_optimized(2))
    with pytest.raises(fs.RoutingError, match="no working path inside server 0"):
        fs.collective_variants([srv, srv], "all_to_all", 2**26)


def test_load_routed_policy_too():
    # ugal routes each variant on its own graph; the one that cannot be routed stalls on the
    # first routable graph's routes instead of failing the batch
    g = tp.dragonfly(2, 4, 2)
    srv = cut_off(g)
    healthy = fs.collective(g, "all_to_all", 2**24, policy="ugal")
    ab = fs.collective_variants([g, srv], "all_to_all", 2**24, policy="ugal")
    ba = fs.collective_variants([srv, g], "all_to_all", 2**24, policy="ugal")
    assert [r.status for r in ab] == [fs.Status.OK, fs.Status.STALLED]
    assert [r.status for r in ba] == [fs.Status.STALLED, fs.Status.OK]
    assert ab[0].time == pytest.approx(healthy.time, rel=1e-12) and ba[1].time == pytest.approx(healthy.time, rel=1e-12)
