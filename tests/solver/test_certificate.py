"""The max-min certificate (flowsolver.solver._certificate): it names what is wrong."""

import numpy as np
import scipy.sparse as sp

from flowsolver import RoutingMatrix
from flowsolver.solver._certificate import violation
from flowsolver.solver._frontier_paths import path_table

INF = np.inf


def test_certificate_names_what_is_wrong():
    A = sp.csc_matrix([[0.3, 0.01], [1.0, 0.0]])
    rm = RoutingMatrix.from_scipy(A)
    cap, w, d = np.array([1.0, 0.1]), np.array([1000.0, 1e-3]), np.full(2, INF)
    assert violation(rm, cap, w, d, [0.1, 97.0], [1, 0]) is None
    # today's wrong answer: flow 1 gets 0.00097 where link 0 still has 0.97 to give
    assert "not saturated" in violation(rm, cap, w, d, [0.1, 0.00097], [1, 0])
    assert "above its capacity" in violation(rm, cap, w, d, [0.1, 98.0], [1, 0])
    two = RoutingMatrix.from_scipy(sp.identity(2, format="csc"))
    assert "does not cross" in violation(two, [1.0, 1.0], [1.0, 1.0], d, [1.0, 1.0], [1, 0])
    assert "held by its cap" in violation(rm, cap, w, [INF, 200.0], [0.1, 97.0], [1, -1])


def test_the_path_table_membership_test_agrees():
    two = RoutingMatrix.from_scipy(sp.identity(2, format="csc"))
    ones, d = [1.0, 1.0], np.full(2, INF)
    assert violation(two, ones, ones, d, ones, [0, 1], paths=path_table(two)) is None
    assert "does not cross" in violation(two, ones, ones, d, ones, [1, 0], paths=path_table(two))


def test_the_device_check_agrees_with_the_host_certificate():
    """Each case of test_certificate_names_what_is_wrong, on the frontier's layout: the
    device check passes exactly the rates the host certificate passes."""
    from flowsolver.solver import _frontier

    A = sp.csc_matrix([[0.3, 0.01], [1.0, 0.0]])
    rm = RoutingMatrix.from_scipy(A)
    two = RoutingMatrix.from_scipy(sp.identity(2, format="csc"))
    cap, w = np.array([1.0, 0.1]), np.array([1000.0, 1e-3])
    none = np.full(2, INF)
    cases = [(rm, cap, w, none, [0.1, 97.0], [1, 0]), (rm, cap, w, none, [0.1, 0.00097], [1, 0]),
             (rm, cap, w, none, [0.1, 98.0], [1, 0]), (two, np.ones(2), np.ones(2), none, [1.0, 1.0], [1, 0]),
             (rm, cap, w, np.array([INF, 200.0]), [0.1, 97.0], [1, -1]),
             (rm, cap, w, np.array([INF, 97.0]), [0.1, 97.0], [1, -1]),          # held by its cap: right
             (rm, cap, w, none, [0.1, -1.0], [1, 0])]
    for m, c, ww, d, x, b in cases:
        paths = _frontier.split_paths(m)
        lay = _frontier.build(paths[0], paths[1], c, ww, d, np.zeros(2, bool), paths[2])
        Np = len(lay.weights)
        padded_x = np.zeros(Np)
        padded_x[:2] = x
        padded_b = np.full(Np, -1, np.int32)
        padded_b[:2] = b
        device = _frontier._certified_on_device(lay, lay.cap, padded_x, padded_b, d, np.zeros(2, bool))
        assert device == (violation(m, c, ww, d, x, b) is None), (x, b, d)
