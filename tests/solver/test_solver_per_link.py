"""``max_min_fair(..., per_link=False)``: a batch's rates and bottlenecks without its per-link
rows (issue 31: the host's copy of every scenario's loads and utilizations), and a float64
batch's capacity rows scanned for subnormal numbers on the device. The references are
progressive filling (tests/oracle.py) and rational filling, never the solver's own output."""

import numpy as np
import pytest
import scipy.sparse as sp

from flowsolver import Status, max_min_fair, rate_sensitivity
from flowsolver.solver import _batch

from ..oracle import assert_max_min_fair, progressive_filling, rational_filling
from .test_solver_batch import _network
from .test_solver_precision import ISSUE_CASES, TWO_LINKS


def test_rates_and_bottlenecks_without_the_per_link_rows():
    A, cap, rng = _network(3)
    caps = np.tile(cap, (5, 1)) * rng.uniform(0.5, 2.0, (5, 1))
    caps[1, 4] = 0.0                                          # a failed link
    w = rng.uniform(0.5, 2.0, A.shape[1])
    a = max_min_fair(A, caps, weights=w, per_link=False)
    assert a.link_load is None and a.utilization is None
    assert a.rates.shape == (5, A.shape[1]) and (a.status == Status.OK).all()
    for i in range(5):
        np.testing.assert_allclose(a.rates[i], progressive_filling(A, caps[i], w), rtol=1e-12, atol=1e-12)
        assert_max_min_fair(A, caps[i], w, np.full(A.shape[1], np.inf), a.rates[i], a.bottleneck[i])
    one = max_min_fair(A, cap, weights=w, per_link=False)     # a single scenario too
    assert one.link_load is None and one.utilization is None
    np.testing.assert_allclose(one.rates, progressive_filling(A, cap, w), rtol=1e-12, atol=1e-12)


def test_chunked_batch_without_per_link_rows(monkeypatch):
    A, cap, rng = _network(4)
    caps = np.tile(cap, (11, 1)) * rng.uniform(0.5, 2.0, (11, A.shape[0]))
    monkeypatch.setattr(_batch, "CALL_ELEMENTS", 1)           # one scenario (a device's share) a call
    a = max_min_fair(A, caps, per_link=False)
    assert a.link_load is None
    for i in range(11):
        np.testing.assert_allclose(a.rates[i], progressive_filling(A, caps[i], np.ones(A.shape[1])), rtol=1e-12)


def test_failed_and_ill_conditioned_scenarios_without_per_link_rows():
    # a scenario with a NaN capacity reports FAILED; ill-conditioned ones are re-solved exactly
    weights = np.array(ISSUE_CASES + [[1.0, 1.0, 1.0]])
    caps = np.full((len(weights), 2), 3.0)
    caps[-1, 0] = np.nan
    with pytest.warns(RuntimeWarning, match=f"scenario {len(weights) - 1} reports Status.FAILED"):
        a = max_min_fair(sp.csc_matrix(TWO_LINKS), caps, weights=weights, method="dense", per_link=False)
    assert a.link_load is None and a.utilization is None
    assert a.status.tolist() == [Status.OK] * (len(weights) - 1) + [Status.FAILED]
    assert np.isnan(a.rates[-1]).all()
    for i, w in enumerate(weights[:-1]):
        exact = np.array([float(x) for x in rational_filling(TWO_LINKS, [3.0, 3.0], w)])
        np.testing.assert_allclose(a.rates[i], exact, rtol=1e-9)


def test_sensitivity_of_an_allocation_without_per_link_rows():
    A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])      # flow 1 crosses both links
    a = max_min_fair(A, [3.0, 1.0], per_link=False)
    # link 1 holds flow 1 (d r1 / d c1 = 1); flow 0 takes what link 0 leaves (d r0 = d c0 - d c1)
    assert rate_sensitivity(A, a).capacity_jacobian().toarray().tolist() == [[1.0, -1.0], [0.0, 1.0]]


@pytest.mark.parametrize("per_link", [True, False])
def test_a_subnormal_capacity_in_a_batch_row_is_refused(per_link):
    # XLA flushes 1e-310 to 0 (rates 0, status ok, where the exact answer shares 1e-310): the
    # row's scan on the device finds it, and the error names its scenario and link
    A, cap, rng = _network(5)
    caps = np.tile(cap, (4, 1))
    caps[2, 6] = 1e-310
    caps[3, 1] = -0.0                                         # a zero with its sign bit: allowed
    with pytest.raises(ValueError, match=r"capacity\[scenario 2, 6\] must be 0 or at least 2.23e-308 bytes/s "
                                         r"with dtype='float64' .* got 1e-310"):
        max_min_fair(A, caps, per_link=per_link)
    caps[2, 6] = 2.3e-308                                     # the smallest normal numbers pass
    assert (max_min_fair(A, caps, per_link=per_link).status == Status.OK).all()


def test_per_link_must_be_a_bool():
    with pytest.raises(ValueError, match="per_link must be True or False, got 'no'"):
        max_min_fair(sp.csc_matrix([[1.0]]), [1.0], per_link="no")


def test_float32_batch_re_solved_in_float64_without_per_link_rows():
    # many flows held by their own links share link 0, which leaves LEFT to the last flow:
    # float32's residual cancels there and the scenario is re-solved in float64
    from .test_float32_cancellation import LEFT, RATE_RTOL, crowded

    A, cap, c, _ = crowded(20_000, seed=2)
    caps = np.stack([cap, cap])
    caps[1, 0] += LEFT                                        # scenario 1 leaves 2 x LEFT
    a = max_min_fair(A, caps, dtype="float32", per_link=False)
    assert a.link_load is None and (a.status == Status.OK).all()
    np.testing.assert_allclose(np.asarray(a.rates[:, -1], np.float64), [LEFT, 2 * LEFT], rtol=RATE_RTOL)
    np.testing.assert_allclose(np.asarray(a.rates[:, :-1], np.float64), np.stack([c, c]), rtol=RATE_RTOL)
