"""Derivatives of collective times set by NCCL's cost model (collectives/_sensitivity on
_nccl_timing's formula, _dual): checked against central differences of independent re-solves
(every link of a tier scaled by 1 +- 1e-4, ``collective`` run again), exactly 0 where a
constant protocol cap binds, and both one-sided derivatives at a tie of the formula's min."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._dual import Dual
from flowsolver.collectives._options import Options
from flowsolver.collectives._nccl_timing import tuned_time
from flowsolver.collectives._nccl_model import Hardware

H = 1e-4          # relative change of the tier's capacities


def _scaled(graph, tier, factor):
    g = graph.copy()
    for *_, d in g.edges(data=True):
        if tier is None or d["tier"] == tier:
            d["capacity"] *= factor
    return g


def _central_difference(graph, tier, op, size, **kw):
    """d time / d (tier's capacities x (1 + e)) at e = 0, from two re-solves."""
    up = fs.collective(_scaled(graph, tier, 1 + H), op, size, **kw).time
    down = fs.collective(_scaled(graph, tier, 1 - H), op, size, **kw).time
    return (up - down) / (2 * H)


def _tier_direction(graph, tier):
    return np.array([d["capacity"] if tier is None or d["tier"] == tier else 0.0 for *_, d in graph.edges(data=True)])


CASES = [   # (graph, op, size, options, tier): NCCL's cost model sets each time
    ("rail2", "all_reduce", 2**28, dict(algorithm="ring", protocol="Simple"), "nvlink"),
    # steps above the floor (tree LL128 on two DGX H100 sits at NCCL's per-channel caps, its 8 graph
    # channels x 36.7 GB/s, which no capacity moves: a binding cap, as below)
    ("rail2", "all_reduce", 2**26, dict(algorithm="ring", protocol="Simple"), "nvlink"),
    ("rail4", "all_reduce", 2**28, dict(algorithm="nvls_tree"), "nvlink"),   # multi-node NVLSTree
    ("rail2", "all_reduce", 2**28, dict(algorithm="nvls_tree"), "nvlink"),
    ("fat4", "all_reduce", 4096, dict(), None),                              # small: tree / LL
    ("fat4", "all_gather", 4096, dict(), None),                              # small: PAT
]
GRAPHS = {"rail2": lambda: tp.rail_optimized(2), "rail4": lambda: tp.rail_optimized(4),
          "fat4": lambda: tp.fat_tree(4)}


@pytest.mark.parametrize("name,op,size,kw,tier", CASES)
def test_tuned_time_derivative_matches_central_differences_of_re_solves(name, op, size, kw, tier):
    g = GRAPHS[name]()
    r = fs.collective(g, op, size, **kw)
    kw = dict(kw, algorithm=r.algorithm, protocol=r.protocol)      # the same choice after the change
    fd = _central_difference(g, tier, op, size, **kw)
    assert fd < 0                                                  # the bandwidth term matters here
    exact = r.time_directional(_tier_direction(g, tier))
    assert exact == pytest.approx(fd, rel=1e-6)


def test_a_binding_protocol_cap_has_derivative_exactly_zero():
    g = tp.rail_optimized(2)
    r = fs.collective(g, "all_reduce", 2**16, algorithm="tree", protocol="LL")     # at NCCL's LL cap
    assert (r.time_gradient("up") == 0.0).all() and (r.time_gradient("down") == 0.0).all()
    for tier in ("nvlink", "access", None):
        assert _central_difference(g, tier, "all_reduce", 2**16, algorithm="tree", protocol="LL") == 0.0
        assert r.time_directional(_tier_direction(g, tier)) == 0.0
    table = r.sensitivity()
    assert (table.saved_s_per_GBps == 0.0).all()


def test_a_single_nvlink_moves_the_tuners_nvlink_bandwidth():
    # NVLSTree on two nodes is bound by the NVLink bandwidth NCCL reads off the first GPU
    g = tp.rail_optimized(2)
    r = fs.collective(g, "all_reduce", 2**28, algorithm="nvls_tree")
    grad = r.time_gradient()
    edges = list(g.edges)
    for i in (int(np.argmin(grad)), int(np.flatnonzero(grad == 0.0)[0])):
        c = g.edges[edges[i]]["capacity"]
        times = []
        for sign in (1, -1):
            h = g.copy()
            h.edges[edges[i]]["capacity"] = c * (1 + sign * H)
            times.append(fs.collective(h, "all_reduce", 2**28, algorithm="nvls_tree").time)
        assert grad[i] == pytest.approx((times[0] - times[1]) / (2 * H * c), rel=1e-6, abs=0.0)


def test_a_tie_in_the_formulas_min_gives_both_one_sided_derivatives():
    # tree LL on two nodes: bus = min(0.92 x NVLink / 3.8, the LL cap of 39 GB/s) (tuning.cc: the
    # tree's 0.92 first, then LL's 1 / 3.8; the per-channel tree cap, 16 x 41.4 GB/s, does not
    # bind); at NVLink = 3.8 x 39 / 0.92 GB/s they tie
    ll_cap, size = 39e9, 2**20
    hw = Hardware(ranks=16, nodes=2, generation="hopper", channels=16, nvls=True, nvlink_bw=3.8 * ll_cap / 0.92)
    nvlink = Dual(hw.nvlink_bw, np.array([1.0]))
    own = 1e-9                                                     # the tree's own solve: far faster
    t = tuned_time("tree", "LL", "all_reduce", size, 16, 1e-9, own, hw, Options(tuner=True), None)[0]
    dual = tuned_time("tree", "LL", "all_reduce", size, 16, 1e-9, own, replace(hw, nvlink_bw=nvlink),
                      Options(tuner=True), None)[0]
    algbw = ll_cap * 0.5                                           # tree: half the bus bandwidth
    assert dual.value == t
    assert dual.up.tolist() == [0.0]                               # more NVLink: the cap holds
    assert dual.down[0] == pytest.approx(-size / algbw**2 * 0.5 * 0.92 / 3.8, rel=1e-12)   # less: NVLink binds
    assert dual.flag.tolist() == [True]


def test_jax_grad_and_what_if_use_the_tuned_derivative():
    g = tp.rail_optimized(2)
    kw = dict(algorithm="tree", protocol="LL128")
    r = fs.collective(g, "all_reduce", 2**22, **kw)
    with jax.enable_x64(True):                     # float64 capacities: the graph's own
        cap = jnp.asarray([d["capacity"] for *_, d in g.edges(data=True)])
        grad = jax.grad(lambda c: fs.collective_time(g, "all_reduce", 2**22, c, **kw))(cap)
    np.testing.assert_allclose(grad, r.time_gradient("up"), rtol=1e-12, atol=0.0)
    table = fs.what_if(g, dict(op="all_reduce", size=2**22, **kw), {"nvlink +0.1%": fs.Upgrade("nvlink", factor=1.001)})
    row = table.iloc[0]
    assert np.isfinite(row.linear_s)
    assert row.linear_s - row.time_s == pytest.approx(row.exact_s - row.time_s, rel=1e-3)


def test_derivatives_from_the_forwards_kept_events_equal_a_re_run_of_each_step(monkeypatch):
    # a pipelined tree (many distinct steps, several events each) on the flow model
    g = fs.Upgrade("agg-core", factor=0.5).apply(tp.fat_tree(4))
    kw = dict(algorithm="tree", step_latency=1e-6)
    kept = fs.collective(g, "all_reduce", 2**24, **kw)
    assert kept._derivation().cache["runs"]                       # the forward's events were kept
    import flowsolver.timing._events as events

    monkeypatch.setattr(events, "KEEP_PHASES_ENTRIES", 0)          # too many to keep: each step re-run
    rerun = fs.collective(g, "all_reduce", 2**24, **kw)
    assert not rerun._derivation().cache["runs"]
    for side in ("up", "down"):
        np.testing.assert_allclose(kept.time_gradient(side), rerun.time_gradient(side), rtol=1e-9, atol=0.0)
    direction = _tier_direction(g, "agg-core")
    assert kept.time_directional(direction) == pytest.approx(rerun.time_directional(direction), rel=1e-9)
    fd = _central_difference(g, "agg-core", "all_reduce", 2**24, **kw)
    assert kept.time_directional(direction) == pytest.approx(fd, rel=1e-6)


def test_a_tie_between_nccls_choices_is_refused_with_its_reason(monkeypatch):
    from dataclasses import replace

    from flowsolver.collectives import _collective

    real = _collective._pick

    def tied(*args, **kwargs):                     # another (algorithm, protocol) NCCL estimates the same
        pick = real(*args, **kwargs)
        return replace(pick, rivals=pick.rivals + ["rival/Simple"])

    monkeypatch.setattr(_collective, "_pick", tied)
    r = fs.collective(tp.rail_optimized(2), "all_reduce", 2**22, algorithm="tree", protocol="LL128")
    with pytest.raises(ValueError, match="rival/Simple alike"):
        r.sensitivity()
