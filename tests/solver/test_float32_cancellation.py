"""float32 dense solves where a link's residual cancels (adv18c finding 1): many flows frozen
at their own links share one link that leaves a small, known rate to one more flow. The
answer is known by construction (no solver output is used as the reference)."""

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs
from flowsolver.solver import _float32

LEFT = 2.5e6      # bytes/s link 0 leaves to the last flow, by construction


def crowded(M, seed=0, weights=False):
    """Flows 0..M-1: own link (capacity c_i < LEFT) and shared link 0; flow M: link 0 only.
    Link 0's capacity is sum(c_i) + LEFT, so flow M's max-min rate is LEFT exactly (every
    other flow is held by its own link below LEFT). With ``weights``, flow i's weight is in
    [1, 2) and flow M's 1: every level c_i / w_i < 2e6 stays below flow M's LEFT / 1, so the
    own links still freeze first and the answer is the same."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(1e6, 2e6, M)
    rows = np.r_[np.arange(1, M + 1), np.zeros(M + 1, int)]
    cols = np.r_[np.arange(M), np.arange(M + 1)]
    A = sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(M + 1, M + 1))
    cap = np.r_[c.sum() + LEFT, c]
    w = np.r_[rng.uniform(1.0, 2.0, M), 1.0] if weights else None
    return A, cap, c, w


# float32's promise (flowsolver.solver's docstring): within 1e-5 .. 1e-3 relative; held here
# to 1e-4, and every link within float32's rounding of its capacity
RATE_RTOL = 1e-4
LOAD_RTOL = 2.0 ** -23


def check(A, cap, c, a):
    rates = np.asarray(a.rates, dtype=np.float64)
    assert a.rates.dtype == np.float32
    assert abs(rates[-1] / LEFT - 1) <= RATE_RTOL
    assert np.all(np.abs(rates[:-1] / c - 1) <= RATE_RTOL)
    load = A @ rates
    assert np.all(load <= cap * (1 + LOAD_RTOL))


@pytest.mark.parametrize("M", [10_000, 100_000])
def test_float32_dense_crowded_link_exact(M):
    A, cap, c, _ = crowded(M)
    a = fs.max_min_fair(A, cap, dtype="float32", method="dense")
    assert a.status == fs.Status.OK
    check(A, cap, c, a)


def test_float32_auto_weighted_and_batched():
    A, cap, c, w = crowded(20_000, seed=1, weights=True)
    a = fs.max_min_fair(A, cap, weights=w, dtype="float32")      # auto: dense below 131 k flows
    check(A, cap, c, a)
    caps = np.stack([cap, cap, cap])
    caps[1, 0] += LEFT          # scenario 1 leaves 2 x LEFT to the last flow
    b = fs.max_min_fair(A, caps, dtype="float32")
    assert np.all(b.status == fs.Status.OK)
    assert np.allclose(np.asarray(b.rates[:, -1], dtype=np.float64), [LEFT, 2 * LEFT, LEFT], rtol=RATE_RTOL, atol=0)


def test_estimate_flags_only_cancelling_problems():
    # a link shared by equal flows (no cancellation) clears the estimate without a re-solve
    A = sp.csc_matrix(np.ones((1, 1000)))
    a = fs.max_min_fair(A, [1e9], dtype="float32", method="dense")
    rm = fs.RoutingMatrix.from_scipy(A)
    e = _float32.estimates(rm, np.array([1e9]), np.ones(1000), np.asarray(a.rates)[None], a.bottleneck[None],
                           np.array([True]))
    assert e[0] <= np.sqrt(1000) * 2.0 ** -24 * (1 + 1e-6)          # c / R = 1: sqrt(n) u
    A2, cap, c, _ = crowded(100_000)
    rm2 = fs.RoutingMatrix.from_scipy(A2)
    x = np.r_[c, LEFT][None]                                          # the exact answer
    b = np.r_[np.arange(1, 100_001), 0][None]
    e2 = _float32.estimates(rm2, cap, np.ones(100_001), x, b, np.array([True]))
    # c_0 / R_0 = cap[0] / LEFT, with sqrt(100,001) flows on link 0: by hand
    assert e2[0] == pytest.approx(2.0 ** -24 * cap[0] * np.sqrt(100_001) / LEFT, rel=1e-12)
    assert e2[0] > _float32.LIMIT
