"""flowsolver.reliability: a job's traffic on degraded cables, kept on its routes or routed
around them, against hand computation on a two-path network; the Monte Carlo's table of
distinct states against numpy's own row-wise unique."""

import networkx as nx
import numpy as np
import pytest

from flowsolver.reliability import Component, JobResponse, goodput, state_step_times
from flowsolver.reliability._montecarlo import unique_rows

C = 10e9          # bytes/s of one fabric cable
N = 1e9           # bytes sent


def _two_paths():
    """gpu0 - leaf0 = {spA, spB} = leaf1 - gpu1: two equal paths of C bytes/s each, the GPU
    cables 2C (never the bottleneck). The cable leaf0-spA alone is tier "a"."""
    g = nx.DiGraph()
    g.add_node("gpu0", kind="gpu", rank=0)
    g.add_node("gpu1", kind="gpu", rank=1)
    for s in ("leaf0", "leaf1", "spA", "spB"):
        g.add_node(s, kind="switch")

    def cable(u, v, cap, tier):
        g.add_edge(u, v, capacity=cap, latency=0.0, tier=tier)
        g.add_edge(v, u, capacity=cap, latency=0.0, tier=tier)

    cable("gpu0", "leaf0", 2 * C, "access")
    cable("gpu1", "leaf1", 2 * C, "access")
    cable("leaf0", "spA", C, "a")
    cable("spA", "leaf1", C, "fabric")
    cable("leaf0", "spB", C, "fabric")
    cable("spB", "leaf1", C, "fabric")
    return g


WL = dict(op="send_recv", size=N, policy="shortest")


@pytest.mark.parametrize("reroute, rate", [
    # stay: the fluid split keeps half the flow on path A, whose cable runs at C/4, so
    # r/2 = C/4, r = C/2; around: path A drained, all of it on path B, r = C.
    # Healthy: both paths, r = 2C. The step's latency cancels in the difference.
    ("stay", C / 2), ("around", C)])
def test_degraded_path_stay_or_route_around_by_hand(reroute, rate):
    st = state_step_times(_two_paths(), WL, [("a", 0.25)], [], [[0], [1]], compute_time=0.0, reroute=reroute)
    assert st.status == ["ok", "ok"]
    assert st.step_time[1] - st.step_time[0] == pytest.approx(N / rate - N / (2 * C), rel=1e-9)
    assert st.rerouted == (1 if reroute == "around" else 0)


def test_route_around_above_the_threshold_or_without_a_path_stays():
    g = _two_paths()
    stay = state_step_times(g, WL, [("a", 0.25)], [], [[1]], compute_time=0.0).step_time
    # a cable at 1/4 is not below a threshold of 1/4: it stays in routing
    kept = state_step_times(g, WL, [("a", 0.25)], [], [[1]], compute_time=0.0, reroute="around",
                            reroute_below=0.25)
    np.testing.assert_allclose(kept.step_time, stay, rtol=1e-12)
    assert kept.rerouted == 0
    # a GPU's only cable cannot be routed around: the traffic stays on it, at 2C / 4 = C / 2
    lone = state_step_times(g, WL, [("access", 0.25)], [], [[0], [2]], compute_time=0.0, reroute="around")
    assert lone.status == ["ok", "ok"] and lone.rerouted == 0
    assert lone.step_time[1] - lone.step_time[0] == pytest.approx(N / (C / 2) - N / (2 * C), rel=1e-9)


def test_goodput_routes_around_and_rejects_bad_input():
    g = _two_paths()
    day = 86400.0
    comps = {"optic": Component("optic", "degrade", rate=0.5 / day, unit="link", duration=day, factor=0.25,
                                links="a")}
    wl = dict(WL, compute=0.0, tokens=1.0)
    resp = JobResponse(checkpoint_cost=10.0, restart_time=60.0, checkpoint_interval=3600.0)
    stay = goodput(g, wl, resp, components=comps, days=10, trajectories=50, seed=3)
    around = goodput(g, wl, resp, components=comps, days=10, trajectories=50, seed=3, reroute="around")
    # same trajectories; the degraded state runs at healthy / step time of each policy
    healthy = stay.healthy_step_time
    for r, rate in ((stay, C / 2), (around, C)):
        slow = r.states.step_time[r.states.states[:, 0] > 0]
        np.testing.assert_allclose(slow - healthy, N / rate - N / (2 * C), rtol=1e-9)
    assert around.useful_fraction.mean() > stay.useful_fraction.mean()
    assert around.summary()["fabrics_rerouted"] == 1
    with pytest.raises(ValueError, match="reroute must be one of stay, around"):
        goodput(g, wl, resp, components=comps, days=1, trajectories=2, reroute="adaptive")
    with pytest.raises(ValueError, match="reroute_below must be in"):
        state_step_times(g, WL, [("a", 0.25)], [], [[1]], compute_time=0.0, reroute="around", reroute_below=0)


def test_table_unique_rows_equal_numpy_unique():
    rng = np.random.default_rng(0)
    for shape, high in (((5000, 3), 6), ((300, 4), 2), ((1000, 1), 40)):
        rows = rng.integers(0, high, size=shape)
        states, inverse = unique_rows(rows)
        ref, ref_inv = np.unique(rows, axis=0, return_inverse=True)
        np.testing.assert_array_equal(states, ref)
        np.testing.assert_array_equal(inverse, np.asarray(ref_inv).reshape(-1))
        np.testing.assert_array_equal(states[inverse], rows)


@pytest.mark.parametrize("factor, solves", [(0.9, 0), (0.5, 0), (0.25, 2)])
def test_cables_with_slack_are_not_solved_and_time_as_solved_alone(factor, solves):
    import topologies as tp
    from flowsolver import collective
    from flowsolver.reliability import state_graphs

    # a ring all-reduce on a small DragonFly loads its NIC cables ("access") to at most half
    # their rate, its global cables fully. A NIC cable cut to 0.9 or 0.5 of its rate still
    # carries all the healthy run put on it: the step is unchanged and nothing is solved;
    # cut to 0.25 it binds (1 and 3 such cables: two fabrics solved).
    g = tp.dragonfly(2, 4, 2, g=3, server="dgx_h100")
    wl = dict(op="all_reduce", size=2**28, algorithm="ring")
    healthy = collective(g, **wl)
    access = [i for i, (*_, d) in enumerate(g.edges(data=True)) if d["tier"] == "access"]
    # the most its flows put on a NIC cable at any event, a share of its rate (link_utilization is
    # the mean over NCCL's longer tuned transfer: 0.48)
    from flowsolver.reliability._views import _peak_loads
    eff = np.asarray(healthy.solved_on.effective, dtype=np.float64)
    assert (_peak_loads(healthy)[access] / eff[access]).max() == pytest.approx(0.5, rel=1e-9)
    st = state_step_times(g, wl, [("access", factor)], [], [[1], [3]], compute_time=0.0)
    assert st.solved == solves
    pinned = dict(wl, protocol=healthy.protocol)
    alone = [collective(view, **pinned).time for view in state_graphs(g, [("access", factor)], [[1], [3]])]
    np.testing.assert_allclose(st.step_time, alone, rtol=1e-12)
    if solves:
        assert st.step_time.min() > healthy.time * 1.5


def test_routed_around_in_batches_equals_each_fabric_routed_alone():
    import topologies as tp
    from flowsolver import collective
    from flowsolver.reliability import state_graphs

    # every degraded cable here binds (global cables run full, NIC cables half full, and
    # both are cut to a quarter), so all are drained: each fabric is the graph with its
    # degraded cables at capacity 0, routed and solved alone with the healthy choices
    g = tp.dragonfly(2, 4, 2, g=3, server="dgx_h100")
    wl = dict(op="all_reduce", size=2**28, algorithm="ring")
    degrades = [("global", 0.25), ("access", 0.25)]
    states = [[1, 0], [2, 0], [1, 1], [0, 1]]
    st = state_step_times(g, wl, degrades, [], states, compute_time=0.0, reroute="around", batch=2)
    healthy = collective(g, **wl)
    pinned = dict(wl, protocol=healthy.protocol, channels=healthy.channels)
    for view, t in zip(state_graphs(g, degrades, states), st.step_time):
        h = g.copy()
        for u, v in view.graph["degraded"]:
            h[u][v]["capacity"] = h[v][u]["capacity"] = 0.0
        assert t == pytest.approx(collective(h, **pinned).time, rel=1e-12)
    assert st.rerouted == 4


@pytest.mark.parametrize("access", [0.6, 0.3])
def test_routed_around_with_cables_left_in_place_equals_each_fabric_alone(access):
    import topologies as tp
    from flowsolver import collective
    from flowsolver.reliability import state_graphs

    # global cables at 0.2 (below the threshold of 0.25, and binding: drained); NIC cables
    # at 0.6 or 0.3 (above it: left in place, degraded); each fabric routed and solved alone
    g = tp.dragonfly(2, 4, 2, g=3, server="dgx_h100")
    wl = dict(op="all_reduce", size=2**28, algorithm="ring")
    degrades = [("global", 0.2), ("access", access)]
    states = [[1, 1], [1, 2], [2, 1], [1, 0]]
    st = state_step_times(g, wl, degrades, [], states, compute_time=0.0, reroute="around", reroute_below=0.25)
    healthy = collective(g, **wl)
    pinned = dict(wl, protocol=healthy.protocol, channels=healthy.channels)
    for view, t in zip(state_graphs(g, degrades, states), st.step_time):
        h = g.copy()
        for u, v in view.graph["degraded"]:
            f = 0.0 if g[u][v]["tier"] == "global" else access
            h[u][v]["capacity"] *= f
            h[v][u]["capacity"] *= f
        assert t == pytest.approx(collective(h, **pinned).time, rel=1e-12)


def test_binding_cables_only_an_all_to_all_against_one_by_one_solves():
    import topologies as tp
    from flowsolver import collective
    from flowsolver.reliability import state_graphs

    # an all-to-all on a small DragonFly: several cables of three tiers at once, some with
    # slack, some binding; each fabric's time against the same fabric solved alone
    g = tp.dragonfly(2, 4, 2, g=3, server="dgx_h100")
    wl = dict(op="all_to_all", size=2**26)
    degrades = [("global", 0.7), ("local", 0.6), ("access", 0.8)]
    states = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [2, 1, 1], [0, 2, 3]]
    st = state_step_times(g, wl, degrades, [], states, compute_time=0.0)
    healthy = collective(g, **wl)
    pinned = dict(wl, algorithm=healthy.algorithm, protocol=healthy.protocol)
    alone = [collective(view, **pinned).time for view in state_graphs(g, degrades, states)]
    np.testing.assert_allclose(st.step_time, alone, rtol=1e-12)
    assert st.solved < st.fabrics                              # some fabrics were not solved
    assert max(alone) > healthy.time * 1.1                     # and some are slower
