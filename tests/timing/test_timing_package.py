"""flowsolver.timing as a package: its public surface (what collectives use), the one event
tolerance, and the old public names still in place."""

import inspect

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs
from flowsolver import RoutingMatrix, timing


def test_the_old_public_names_are_the_packages():
    for name in ("completion_times", "Completion", "completion_sensitivity", "CompletionSensitivity",
                 "fair_makespan"):
        assert getattr(fs, name) is getattr(timing, name), name
    from flowsolver.timing import step_times, StepTimes      # noqa: F401  (collectives' concurrent runs on it)


def test_one_tolerance_is_the_default_of_every_event_test():
    from flowsolver import _tolerance
    from flowsolver.solver import _certificate
    from flowsolver.timing import _completion_sensitivity, _event_split

    assert timing.RTOL is _tolerance.RTOL == 1e-9
    for fn in (timing.completion_times, timing.step_times, _certificate.violation):
        assert inspect.signature(fn).parameters["rtol"].default is _tolerance.RTOL, fn.__name__
    for module in (_completion_sensitivity, _event_split):
        assert module.RTOL is _tolerance.RTOL
        assert not {"EVENT_RTOL", "SPLIT_RTOL", "TIE_RTOL"} & set(vars(module)), module.__name__


def test_a_kept_run_gives_each_groups_derivatives_from_the_forwards_events():
    # two independent groups in one block: group 0 two flows (1 and 3 bytes) on a 2 B/s link,
    # group 1 one flow of 4 bytes on a 4 B/s link. Group 0 ends at T = (1 + 3) / c = 2 s,
    # dT/dc = -4 / c^2 = -1 s per B/s; group 1 at T = 4 / c = 1 s, dT/dc = -4 / 16.
    block = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    sizes = np.array([1.0, 3.0, 4.0])
    done = timing.completion_times(block, sizes=sizes, capacity=[2.0, 4.0], groups=[0, 0, 1],
                                   keep_phases=True)
    run = timing.kept_run(done, sizes, [np.array([0]), np.array([0])], groups=np.array([0, 0, 1]))
    first = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 1.0]]), capacity=[2.0])
    second = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0]]), capacity=[4.0])
    run.add(first, 0)
    run.add(second, 1)
    a, b = run.lookup(first, np.array([2.0])), run.lookup(second, np.array([4.0]))
    assert (a.makespan, b.makespan) == (2.0, 1.0)
    assert a.gradient().tolist() == [-1.0] and b.gradient().tolist() == [-0.25]
    assert run.lookup(RoutingMatrix.from_scipy(sp.csc_matrix([[1.0]]), capacity=[4.0]), np.array([4.0])) is None


def test_no_kept_run_where_the_forward_had_too_many_events_to_keep(monkeypatch):
    from flowsolver.timing import _events

    monkeypatch.setattr(_events, "KEEP_PHASES_ENTRIES", 0)
    done = timing.completion_times(sp.csc_matrix([[1.0, 1.0]]), sizes=[1.0, 3.0], capacity=[2.0], keep_phases=True)
    assert done.phases is None and done.makespan == 2.0
    assert timing.kept_run(done, [1.0, 3.0], [np.array([0])]) is None
