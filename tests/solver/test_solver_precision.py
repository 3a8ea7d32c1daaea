"""Per-flow precision of max_min_fair against progressive filling in exact rational
arithmetic (tests/oracle.py's ``rational_filling``), where float64 cancels: flows that get a
tiny residual of a link, and links whose shares agree to 17 digits but differ exactly.

The contract: every flow's rate within 1e-9 relative of the exact one, for weights in
1e-9 .. 1e9, whatever the method; float32 within 1e-3 or a clear refusal; a problem that
cannot be answered to the contract is an error (single) or a status (batch), never a
silently wrong rate."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from flowsolver import Status, max_min_fair, rate_sensitivity
from flowsolver.solver import _conditioning, _exact

from ..oracle import rational_filling

TWO_LINKS = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])   # flow 1 crosses both links
#: the adversarial run's cases: (weights, what float64 gave before)
ISSUE_CASES = [
    [1e-8, 1e8, 1e-6],       # flow 0 got 3.0198e-14 for 3e-6 / (1e8 + 1e-6): 6.6e-3 off
    [1e-9, 1e9, 2e-9],       # both links' levels the same float64: flow 0 got half its rate
    [1.1e-8, 3.6e8, 7.4e-7],  # float32 dense 98.5 % off
]
METHODS = ["auto", "dense", "frontier", "exact"]


def assert_loads(a, A):
    """The allocation's link loads are A @ rates."""
    np.testing.assert_allclose(a.link_load, np.asarray(A) @ np.asarray(a.rates, dtype=np.float64), rtol=1e-12)


def assert_exact(rates, exact, rtol=1e-9):
    rates = np.asarray(rates, dtype=np.float64)
    ref = np.array([float(q) for q in exact])
    bad = np.abs(rates - ref) > rtol * np.abs(ref)
    assert not bad.any(), f"flows {np.flatnonzero(bad).tolist()}: {rates[bad].tolist()} vs exact {ref[bad].tolist()}"


@pytest.mark.parametrize("weights", ISSUE_CASES)
@pytest.mark.parametrize("method", METHODS)
def test_tiny_residuals_and_tied_levels_are_exact(weights, method):
    A = sp.csc_matrix(TWO_LINKS)
    a = max_min_fair(A, [3.0, 3.0], weights=weights, method=method)
    assert a.status == Status.OK
    assert_exact(a.rates, rational_filling(TWO_LINKS, [3.0, 3.0], weights))


def test_hand_computed_tiny_residual():
    # link 1 (flows 1, 2) has the smaller share 3 / (1e8 + 1e-6): flow 1 takes 3e8 / (1e8 + 1e-6)
    # of link 0, flow 0 the rest: 3 - 3e8 / (1e8 + 1e-6) = 3e-6 / (1e8 + 1e-6)
    a = max_min_fair(sp.csc_matrix(TWO_LINKS), [3.0, 3.0], weights=[1e-8, 1e8, 1e-6])
    assert float(a.rates[0]) == pytest.approx(3e-6 / (1e8 + 1e-6), rel=1e-12)


@pytest.mark.parametrize("weights", ISSUE_CASES)
def test_float32_within_its_promise(weights):
    a = max_min_fair(sp.csc_matrix(TWO_LINKS), [3.0, 3.0], weights=weights, method="dense", dtype="float32")
    assert a.rates.dtype == np.float32
    assert_exact(a.rates, rational_filling(TWO_LINKS, [3.0, 3.0], weights), rtol=1e-3)


def test_batch_mixes_ill_conditioned_and_plain_scenarios():
    weights = np.array(ISSUE_CASES + [[1.0, 1.0, 1.0]])
    a = max_min_fair(sp.csc_matrix(TWO_LINKS), [3.0, 3.0], weights=weights, method="dense")
    assert (a.status == Status.OK).all()
    for i, w in enumerate(weights):
        assert_exact(a.rates[i], rational_filling(TWO_LINKS, [3.0, 3.0], w))


def test_too_large_to_solve_exactly_is_an_error_or_a_status(monkeypatch):
    monkeypatch.setattr(_exact, "EXACT_PAIRS", 2)
    A = sp.csc_matrix(TWO_LINKS)
    with pytest.raises(ValueError, match="ill-conditioned"):
        max_min_fair(A, [3.0, 3.0], weights=ISSUE_CASES[1])
    a = max_min_fair(A, [3.0, 3.0], weights=np.array([ISSUE_CASES[1], [1e-9, 1e-9, 1e-9]]))
    assert a.status.tolist() == [Status.ILL_CONDITIONED, Status.OK]
    assert Status(int(a.status[0])).label == "ill_conditioned"


def test_library_routings_skip_the_check(monkeypatch):
    """Unit weights on the library's routings are within SPREAD_TRUSTED: no extra pass."""
    import topologies as tp
    from flowsolver import Flows, route

    def refuse(*args, **kwargs):
        raise AssertionError("error_factor ran on a well-spread problem")

    monkeypatch.setattr(_conditioning, "error_factor", refuse)
    g = tp.fat_tree(4)
    rm = route(g, Flows.all_to_all(len(tp.gpus(g)), size=1.0))
    assert _conditioning.spread(rm, rm.weights) <= _conditioning.SPREAD_TRUSTED
    assert max_min_fair(rm).status == Status.OK


def test_rate_sensitivity_uses_the_weights_the_allocation_was_solved_with():
    # one link of capacity c, weights 1 and 2: rates c/3 and 2c/3, so d rate / dc = 1/3, 2/3
    A = sp.csc_matrix([[1.0, 1.0]])
    a = max_min_fair(A, [3.0], weights=[1.0, 2.0])
    jac = rate_sensitivity(A, a).capacity_jacobian().toarray().ravel()
    assert jac == pytest.approx([1 / 3, 2 / 3], rel=1e-12)
    with pytest.raises(ValueError, match="weights: the allocation was solved with other weights"):
        rate_sensitivity(A, a, weights=[1.0, 1.0])


def test_rate_sensitivity_uses_the_caps_the_allocation_was_solved_with():
    # flow 0 capped at 1 on a link of 3: flow 1 takes 2, so d rate_1 / dc = 1, d rate_0 / dc = 0
    A = sp.csc_matrix([[1.0, 1.0]])
    a = max_min_fair(A, [3.0], demands=[1.0, np.inf])
    jac = rate_sensitivity(A, a).capacity_jacobian().toarray().ravel()
    assert jac.tolist() == [0.0, 1.0]


# ------------------------------------------------------------------ property tests
#: weights at the ends of the contract's range and between (a mantissa and an exponent)
log_weight = st.builds(lambda m, e: m * 10.0 ** e, st.sampled_from([1.0, 1.1, 2.0, 3.6, 7.4]),
                       st.sampled_from([-9, -8, -7, -6, -3, 0, 3, 6, 8, 9]))

light_weight = st.builds(lambda m, e: m * 10.0 ** e, st.sampled_from([1.0, 1.1, 2.0, 3.6, 7.4]),
                         st.sampled_from([-9, -8, -7, -6, 0]))


@st.composite
def problems(draw):
    n_links = draw(st.integers(1, 4))
    n_flows = draw(st.integers(1, 6))
    fracs = st.sampled_from([0.0, 0.0, 1.0, 1.0, 0.5, 0.25, 1 / 3])
    A = np.array([[draw(fracs) for _ in range(n_flows)] for _ in range(n_links)])
    for f in range(n_flows):                     # every flow crosses a link
        if not A[:, f].any():
            A[draw(st.integers(0, n_links - 1)), f] = 1.0
    cap = [draw(st.sampled_from([0.0, 1.0, 3.0, 3.0, 3.0, 7.5, 1e3])) for _ in range(n_links)]
    w = [draw(log_weight) for _ in range(n_flows)]
    if n_links > 1 and draw(st.booleans()):
        # a heavy flow 0 over links of equal capacity: it nearly fills them, and the light
        # flows beside it get what is left (where float64 cancels)
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=2, max_size=n_links, unique=True))
        A[:, 0] = 0.0
        A[links, 0] = 1.0
        for l in links:
            cap[l] = 3.0
        w[0] = draw(st.sampled_from([1e6, 1e8, 3.6e8, 1e9]))
        w[1:] = [draw(light_weight) for _ in w[1:]]
    d = [draw(st.sampled_from([np.inf, np.inf, np.inf, 1e-6, 0.5, 2.0])) for _ in range(n_flows)]
    return A, cap, w, d


@settings(deadline=None)
@given(problems(), st.sampled_from(["dense", "frontier", "auto"]))
def test_every_flow_within_1e9_of_exact_rational_filling(problem, method):
    A, cap, w, d = problem
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method)
    assert a.status == Status.OK
    assert_exact(a.rates, rational_filling(A, cap, w, d))
    assert_loads(a, A)


@st.composite
def near_ties(draw):
    """Links of equal capacity joined by one heavy flow, each with light flows of their
    own: the links' shares agree to many digits and the light flows take what is left."""
    n_links = draw(st.integers(2, 4))
    heavy = draw(st.floats(6, 9).map(lambda e: 10.0 ** e))
    light = [[draw(st.floats(-9, -6).map(lambda e: 10.0 ** e)) for _ in range(draw(st.integers(1, 2)))]
             for _ in range(n_links)]
    cols, w = [np.ones(n_links)], [heavy]
    for l, ws in enumerate(light):
        for x in ws:
            col = np.zeros(n_links)
            col[l] = 1.0
            cols.append(col)
            w.append(x)
    return np.column_stack(cols), [3.0] * n_links, w


@settings(deadline=None)
@given(near_ties(), st.sampled_from(["dense", "frontier"]))
def test_near_ties_with_extreme_weights(problem, method):
    A, cap, w = problem
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, method=method)
    assert_exact(a.rates, rational_filling(A, cap, w))
