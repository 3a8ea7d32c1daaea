"""What the solver works out once per RoutingMatrix on the host and keeps (issue 31: host
set-up per call): kept per matrix object, never handed to another matrix."""

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from flowsolver import RoutingMatrix, max_min_fair
from flowsolver.solver import _conditioning


def test_the_fraction_range_is_kept_per_matrix_and_never_read_for_another():
    rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 0.5], [0.0, 0.25]]))
    w = np.array([1.0, 2.0])
    # largest fraction x weight over the smallest: 1 x 2 / (0.25 x 1)
    assert _conditioning.spread(rm, w) == 8.0
    even = replace(rm, seg_frac=np.ones_like(rm.seg_frac))      # another matrix object: fractions all 1
    assert _conditioning.spread(even, w) == 2.0
    assert _conditioning.spread(rm, w) == 8.0                     # the first matrix keeps its own
    assert _conditioning.spread(rm, np.array([1.0, 1.0])) == 4.0  # the weights are read on every call


def test_a_flow_whose_only_entry_has_fraction_zero_is_unbounded_after_a_bounded_solve_of_its_twin():
    """The flows that cross a finite link are kept per matrix: a copy of a matrix with one
    entry's fraction set to 0 (its flow then crosses nothing) must not reuse the original's."""
    rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, 3.0]))
    np.testing.assert_allclose(max_min_fair(rm).rates, [2.0, 3.0], rtol=1e-15)
    frac = rm.seg_frac.copy()
    frac[rm.seg_link == 1] = 0.0                                  # flow 1's only entry
    with pytest.raises(ValueError, match="flow 1 crosses no link of finite capacity"):
        max_min_fair(replace(rm, seg_frac=frac))
    # in a batch it is reported, not raised; the other flow keeps its link's capacity
    a = max_min_fair(replace(rm, seg_frac=frac), demands=[[np.inf, np.inf], [np.inf, 1.0]])
    assert list(np.asarray(a.status)) == [2, 0] and a.rates[1].tolist() == [2.0, 1.0]


def test_batched_float32_weights_are_checked_per_link_in_every_scenario():
    """The float32 check of each link's sum of weights, for weights with a scenario axis (one
    product over the scenarios): scenario 1's flows 1 and 2 put 2e37 each on link 1."""
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    w = np.array([[1.0, 1.0, 1.0], [1.0, 2e37, 2e37]])
    with pytest.raises(ValueError, match=r"weights: the flows on link 1 sum to 4e\+37, more than dtype='float32'"):
        max_min_fair(A, [1.0, 1.0], weights=w, dtype="float32")
    # within float32's range: each scenario as solved alone (link 1 shared by flows 1 and 2)
    w = np.array([[1.0, 1.0, 1.0], [1.0, 3.0, 1.0]])
    a = max_min_fair(A, [1.0, 1.0], weights=w, dtype="float32")
    np.testing.assert_allclose(a.rates[1], [0.25, 0.75, 0.25], rtol=1e-6)


def test_the_frontier_certificate_reads_each_layouts_own_caps():
    """The caps the device certificate reads are kept with the layout built from them: solving
    one matrix with caps, without, and with other caps passes the certificate every time
    (a stale copy would fail it: a warning, turned into an error here) with progressive
    filling's rates."""
    import warnings

    from ..oracle import progressive_filling

    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]]))
    rm = RoutingMatrix.from_scipy(A, np.array([4.0, 3.0, 5.0]))
    inf = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for d in ([inf, 0.5, inf, inf], [inf] * 4, [inf, inf, 0.25, 1.0], [inf, 0.5, inf, inf]):
            a = max_min_fair(rm, demands=d, method="frontier")
            np.testing.assert_allclose(a.rates, progressive_filling(A, rm.capacity, None, np.array(d)), rtol=1e-12)
