"""Completion times past float64's range (adv18c finding 6): 1e10 and 2e10 bytes sharing a
link of 1e-300 bytes/s finish at 2e310 and 3e310 s by hand (5e-301 bytes/s each, then 1e-300
for the second), beyond float64's 1.8e308: reported inf with Status.OVERFLOW, not "max_rounds or
max_events reached" after running to max_events."""

import warnings

import numpy as np
import scipy.sparse as sp

import flowsolver as fs


def test_overflowing_times_say_so():
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no numpy overflow warning either
        c = fs.completion_times(sp.csc_matrix([[1.0, 1.0]]), sizes=[1e10, 2e10], capacity=[1e-300])
    assert c.status == fs.Status.OVERFLOW
    assert "float64's range" in fs.Status(c.status).message
    assert np.isinf(c.finish).all() and np.isinf(c.makespan)
    assert int(c.events) <= 2                      # not run to max_events


def test_overflow_is_per_scenario_and_finite_times_stay():
    # scenario 1: 1 and 2 bytes at 1e-300 bytes/s: 2e300 and 3e300 s (finite, by hand)
    sizes = np.array([[1e10, 2e10], [1.0, 2.0]])
    c = fs.completion_times(sp.csc_matrix([[1.0, 1.0]]), sizes=sizes, capacity=[1e-300])
    assert c.status.tolist() == [fs.Status.OVERFLOW, fs.Status.OK]
    assert np.allclose(c.finish[1], [2e300, 3e300], rtol=1e-12) and c.makespan[1] == c.finish[1, 1]
    # a finite flow beside an overflowing one on another link keeps its time (1 byte at 1 B/s)
    d = fs.completion_times(sp.csc_matrix([[1.0, 0.0], [0.0, 1.0]]), sizes=[1.0, 2e10], capacity=[1.0, 1e-300])
    assert d.status == fs.Status.OVERFLOW and d.finish[0] == 1.0 and np.isinf(d.finish[1])


def test_clock_overflow():
    # two flows at 0.5 B/s: the first (0.8e308 B) ends at 1.6e308 s, the second's rest (0.9e308 B
    # at 1 B/s) takes 0.9e308 s more, each finite: the clock passes 1.8e308 at 2.5e308
    c = fs.completion_times(sp.csc_matrix([[1.0, 1.0]]), sizes=[0.8e308, 1.7e308], capacity=[1.0])
    assert c.finish[0] == 1.6e308
    assert c.status == fs.Status.OVERFLOW and np.isinf(c.makespan)
