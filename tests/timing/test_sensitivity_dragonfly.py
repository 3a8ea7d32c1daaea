"""Collective-time derivatives on DragonFly fabrics (flowsolver.collectives._sensitivity through
_completion_sensitivity): every per-link value, for an increase and for a decrease, equals the
one-sided difference of independent re-solves with that one link changed, links whose change
reorders the flows finishing at an event included; jax.grad gets each link's increase with a
warning."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flowsolver as fs
import topologies as tp


def _one_link(graph, link, added):
    """A copy of ``graph`` with ``added`` bytes/s on its ``link``-th edge (graph edge order)."""
    g = graph.copy()
    u, v = list(graph.edges)[link]
    g.edges[u, v]["capacity"] += added
    return g


def _one_sided_difference(graph, r, op, size, link, sign, options):
    """The one-sided derivative of the time in one link's raw capacity (s per byte/s) from
    re-solves at two steps, Richardson-extrapolated."""
    cap = list(graph.edges(data="capacity"))[link][2]
    fd = []
    for h in (sign * 1e-6 * cap, sign * 5e-7 * cap):
        again = fs.collective(_one_link(graph, link, h), op, size,
                              **{**options, "algorithm": r.algorithm, "protocol": r.protocol})
        fd.append((again.time - r.time) / h)
    return 2 * fd[1] - fd[0], cap


def _check(graph, op, size, links, sides=("up", "down"), **options):
    r = fs.collective(graph, op, size, **options)
    checked = 0
    for side, sign in (("up", 1.0), ("down", -1.0)):
        if side not in sides:
            continue
        grad = r.time_gradient(side)
        for l in links:
            if np.isnan(grad[l]):
                continue
            fd, cap = _one_sided_difference(graph, r, op, size, l, sign, options)
            assert grad[l] == pytest.approx(fd, rel=1e-5, abs=1e-7 * r.time / cap), (side, l)
            checked += 1
    return r, checked


def test_small_dragonfly_all_to_all_every_link_both_sides():
    g = tp.dragonfly(1, 2, 1)                           # 3 groups of 2 routers, one GPU each: 36 links
    r, checked = _check(g, "all_to_all", 2**22, range(g.number_of_edges()))
    assert checked == 2 * g.number_of_edges()           # no NaN here
    assert np.count_nonzero(r.time_gradient("down")) > 0


def test_dragonfly_ring_all_reduce_nonzero_and_zero_links():
    g = tp.dragonfly(2, 4, 2)                           # 72 GPUs, 468 links
    opts = dict(algorithm="ring", protocol="Simple")
    r = fs.collective(g, "all_reduce", 2**22, **opts)
    down = r.time_gradient("down")
    moving = np.flatnonzero(np.isfinite(down) & (down != 0))
    assert len(moving) > 0
    zero = np.flatnonzero(down == 0)[::40]
    _, checked = _check(g, "all_reduce", 2**22, np.concatenate([moving, zero]), sides=("down",), **opts)
    assert checked == len(moving) + len(zero)
    _, checked = _check(g, "all_reduce", 2**22, np.flatnonzero(np.isfinite(r.time_gradient("up")))[::40],
                           sides=("up",), **opts)
    assert checked > 5


def test_dragonfly_all_to_all_links_whose_flows_end_apart_match_both_sides():
    """dragonfly(2, 4, 2): flows finishing together at early events are moved apart by most
    one-link changes (a new event order): those links too get the one-sided difference of
    re-solves, for an increase and a decrease."""
    g = tp.dragonfly(2, 4, 2)
    r = fs.collective(g, "all_to_all", 2**22)
    up, down = r.time_gradient("up"), r.time_gradient("down")
    assert np.isfinite(up).all() and np.isfinite(down).all()
    apart = np.zeros(len(up), dtype=bool)                # links whose change moves apart flows that
    for cs, _ in fs.collectives._sensitivity._steps(r._derivation()):   # finish together at some event
        apart |= cs._spread_up
    apart = np.flatnonzero(apart)
    assert len(apart) >= 100
    assert fs.collectives._sensitivity.one_sided(r._derivation())[apart].all()
    differ = np.flatnonzero(~np.isclose(up, down, rtol=1e-6, atol=0))
    links = np.union1d(apart[::10], differ[::3])
    _, checked = _check(g, "all_to_all", 2**22, links)
    assert checked == 2 * len(links)
    # the tier rows (every link of a tier at once) against re-solves
    table = r.sensitivity().set_index(["group_by", "group"]).saved_s_per_GBps
    h = 1e6
    for tier in ("global", "local"):
        again = g.copy()
        for *_, d in again.edges(data=True):
            if d["tier"] == tier:
                d["capacity"] += h
        t = fs.collective(again, "all_to_all", 2**22, algorithm=r.algorithm).time
        assert table["tier", tier] == pytest.approx((r.time - t) / h * 1e9, rel=1e-4, abs=1e-12)


def test_jax_grad_on_a_dragonfly_all_to_all_is_each_links_increase_with_a_warning():
    g = tp.dragonfly(2, 4, 2)
    r = fs.collective(g, "all_to_all", 2**22)
    with jax.enable_x64(True):
        cap = jnp.asarray([d["capacity"] for *_, d in g.edges(data=True)])
        timed = lambda c: fs.collective_time(g, "all_to_all", 2**22, c)  # noqa: E731
        with pytest.warns(RuntimeWarning, match="one-sided"):
            grad = jax.grad(timed)(cap)
        tier = jnp.asarray([1.0 if d["tier"] == "global" else 0.0 for *_, d in g.edges(data=True)])
        _, dt = jax.jvp(timed, (cap,), (tier,))
    np.testing.assert_array_equal(np.asarray(grad), r.time_gradient("up"))
    assert np.isfinite(float(dt)) and float(dt) == pytest.approx(r.time_directional(np.asarray(tier)), rel=1e-12)
