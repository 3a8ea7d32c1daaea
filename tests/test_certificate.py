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
