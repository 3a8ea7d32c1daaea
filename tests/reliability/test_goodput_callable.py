"""goodput() with a callable workload: a straggler slows the step's compute, which the callable
gives by a ``compute_time`` attribute; without one, straggler components are refused (they
used to cost nothing: compute taken as 0)."""

import math

import numpy as np
import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.reliability import Component, JobResponse, goodput

DAY = 86400.0
SIZE = 2**28


def _setup():
    g = tp.rail_optimized(2)                                   # 16 GPUs
    coll = collective(g, "all_reduce", SIZE, algorithm="ring").time
    # each GPU straggles once a day, at half speed for 6 h: the job's straggling GPUs are
    # Poisson of mean 16 x 6 / 24 = 4 at any moment
    comps = {"strag": Component("strag", "straggler", rate=1.0 / DAY, unit="gpu", duration=6 * 3600.0, factor=0.5)}
    resp = JobResponse(checkpoint_cost=0.0, restart_time=60.0, checkpoint_interval=3600.0)
    return g, coll, comps, resp


def test_callable_without_compute_time_refuses_stragglers():
    g, coll, comps, resp = _setup()
    step = lambda graph: 1.0 + collective(graph, "all_reduce", SIZE, algorithm="ring").time   # noqa: E731
    with pytest.raises(ValueError, match="compute_time.*strag|strag.*compute_time"):
        goodput(g, step, resp, components=comps, days=1, trajectories=5)
    # no stragglers (or none that ever straggle): nothing to slow, the callable runs as before
    r = goodput(g, step, resp, components={"strag": comps["strag"].with_rate(0.0)}, days=1, trajectories=5)
    assert r.useful_fraction == pytest.approx(1.0)
    step.compute_time = 5.0                                    # more than the whole step
    with pytest.raises(ValueError, match="compute_time"):
        goodput(g, step, resp, components=comps, days=1, trajectories=5)


def test_callable_compute_time_is_what_a_straggler_slows():
    g, coll, comps, resp = _setup()
    step = lambda graph: 1.0 + collective(graph, "all_reduce", SIZE, algorithm="ring").time   # noqa: E731
    step.compute_time = 1.0
    r = goodput(g, step, resp, components=comps, days=10, trajectories=100, seed=3)
    # the step with k >= 1 stragglers at half speed: 1 s of compute takes 2 s; P(k = 0) = e^-4
    t0 = 1.0 + coll
    p0 = math.exp(-4.0)
    expect = p0 + (1 - p0) * t0 / (t0 + 1.0)
    f = r.useful_fraction
    assert f.mean() == pytest.approx(expect, abs=4 * f.std() / math.sqrt(len(f)) + 1e-3)
    assert r.lost_fraction()["strag"] == pytest.approx(1 - f.mean(), rel=1e-9)
    # the same step given as a dict with its compute: the same trajectories, the same answer
    d = goodput(g, dict(op="all_reduce", size=SIZE, algorithm="ring", compute=1.0), resp, components=comps,
                days=10, trajectories=100, seed=3)
    assert np.allclose(d.run.useful, r.run.useful, rtol=1e-9)
