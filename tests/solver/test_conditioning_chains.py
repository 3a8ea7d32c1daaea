"""A chain of links each of whose residual cancels (adv27 F1): flow i has fraction ``b`` on
link i, where it freezes, and fraction 1 on link i + 1, whose capacity leaves exactly ``b t_i``
beside flow i-1's load ``t_{i-1}``. With exact capacities every flow's rate is ``t_i``; the
reference is progressive filling in rationals on the float capacities as given. In float64
each link multiplies the error passed to it by ~1 / b, so the last flow drifted 6 %
(b = 1/384, 7 links) and 4x (1/999) with status ok while the products stayed within
SPREAD_TRUSTED. A matrix given by hand is now always checked (and re-solved exactly)."""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from flowsolver import RoutingMatrix, Status, max_min_fair
from flowsolver.solver import _conditioning


def chain(K, b):
    """(matrix, capacities, the exact rates t_i) of a chain of K + 1 links and flows."""
    n = K + 1
    t = [Fraction(1, 3) + Fraction(i, 10) for i in range(n)]
    A = np.zeros((n, n))
    for i in range(n):
        A[i, i] = b
        if i + 1 < n:
            A[i + 1, i] = 1.0
    bf = Fraction(b)                              # the float's exact value: capacities as floats
    cap = [bf * t[0]] + [bf * t[i] + t[i - 1] for i in range(1, n)]
    return sp.csc_matrix(A), np.array([float(c) for c in cap]), t


def exact_rates(A, cap):
    """Progressive filling in rationals on the float inputs as given (the rates the contract
    promises to 1e-9)."""
    A = A.toarray()
    L, N = A.shape
    fr = [[Fraction(float(x)) for x in row] for row in A]
    capf = [Fraction(float(c)) for c in cap]
    rate, frozen = [Fraction(0)] * N, [False] * N
    while not all(frozen):
        best, link = None, None
        for l in range(L):
            live = sum(fr[l][f] for f in range(N) if not frozen[f])
            if live == 0:
                continue
            share = (capf[l] - sum(fr[l][f] * rate[f] for f in range(N) if frozen[f])) / live
            if best is None or share < best:
                best, link = share, l
        for f in range(N):
            if not frozen[f] and fr[link][f] > 0:
                rate[f], frozen[f] = best, True
    return np.array([float(r) for r in rate])


@pytest.mark.parametrize("K, b", [(6, 1 / 384), (5, 1 / 999), (6, 1 / 999)])
@pytest.mark.parametrize("method", ["auto", "dense", "frontier"])
def test_a_cancelling_chain_within_the_trusted_spread_is_exact(K, b, method):
    A, cap, t = chain(K, b)
    assert _conditioning.spread(RoutingMatrix.from_scipy(A), np.ones(K + 1)) <= _conditioning.SPREAD_TRUSTED
    want = exact_rates(A, cap)      # (the float capacities' rounding moves it from t by ~spread^K ulps)
    assert abs(want[0] / float(t[0]) - 1) < 1e-12
    a = max_min_fair(A, cap, method=method)
    assert a.status == Status.OK
    np.testing.assert_allclose(a.rates, want, rtol=1e-9)


def test_a_cancelling_chain_in_float32_keeps_its_promise():
    # fractions 1 / 1000 and 1 on a 4-link chain: float32 dense was 13.6 % off, status ok
    A, cap, _ = chain(3, 1 / 1000)
    a = max_min_fair(A, cap, dtype="float32", method="dense")
    np.testing.assert_allclose(np.asarray(a.rates, np.float64), exact_rates(A, cap), rtol=1e-3)


def test_only_routings_built_over_a_graph_are_trusted():
    import flowsolver as fs
    import topologies as tp

    g = tp.rail_optimized(2)
    rm = fs.route(g, fs.Flows.ring(len(tp.gpus(g)), 1e9))
    assert rm.policy != "matrix" and _conditioning.trusted(rm, rm.weights)
    by_hand = RoutingMatrix.from_scipy(rm.to_scipy(), capacity=rm.capacity)
    assert not _conditioning.trusted(by_hand, by_hand.weights)


def test_a_stack_of_routings_is_trusted_where_every_part_is():
    # review27 M1: RoutingMatrix.stack dropped the policy, so the collectives' stacked routings
    # were checked on every solve (0.007 -> 0.166 s of a 16,384-GPU step's first call)
    import flowsolver as fs
    import topologies as tp

    g = tp.rail_optimized(2)
    ring = fs.route(g, fs.Flows.ring(len(tp.gpus(g)), 1e9))
    assert _conditioning.trusted(RoutingMatrix.stack([ring, ring]), np.ones(2 * ring.n_flows))
    by_hand = RoutingMatrix.from_scipy(ring.to_scipy(), capacity=ring.capacity)
    mixed = RoutingMatrix.stack([ring, by_hand])
    assert "matrix" in mixed.policy and not _conditioning.trusted(mixed, np.ones(mixed.n_flows))
