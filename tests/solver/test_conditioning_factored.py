"""The conditioning check without the expanded matrix (issue 34: a 131,072-GPU step's check
expanded 259 M entries, 14 GiB): ``factored_error_factor`` on a RoutingMatrix's segments must
give :func:`error_factor`'s figure on the whole expanded matrix, on random factored matrices
(shared segments, several slots, zero fractions and coefficients, a link repeated inside a
segment and across a flow's slots) and adversarial weights, and still catch the
ill-conditioned cases."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from flowsolver import RoutingMatrix, max_min_fair
from flowsolver.solver import _conditioning, _exact

from ..oracle import rational_filling
from .test_solver_precision import ISSUE_CASES, TWO_LINKS, assert_exact


def random_factored(rng, links, flows, segments, slots, repeats):
    """A RoutingMatrix of ``segments`` random segments, each flow summing ``slots`` of them
    (some slots empty, coefficients 0, 0.5 or 1), fractions from {0, 1/1024, 1/16, 1/2, 1};
    ``repeats``: links may repeat inside a segment."""
    ptr, link, frac = [0], [], []
    for _ in range(segments):
        n = int(rng.integers(1, 6))
        ls = rng.integers(0, links, n) if repeats else rng.choice(links, min(n, links), replace=False)
        link += ls.tolist()
        frac += rng.choice([0.0, 1 / 1024, 1 / 16, 0.5, 1.0], len(ls), p=[0.05, 0.2, 0.25, 0.25, 0.25]).tolist()
        ptr.append(len(link))
    seg = rng.integers(0, segments, (flows, slots))
    seg[rng.random((flows, slots)) < 0.2] = -1
    seg[:, 0] = np.maximum(seg[:, 0], 0)                  # every flow has a segment
    coef = rng.choice([0.0, 0.5, 1.0], (flows, slots), p=[0.1, 0.3, 0.6])
    coef[:, 0] = 1.0
    return RoutingMatrix(np.array(ptr), np.array(link), np.array(frac), seg.astype(np.int32), coef,
                         np.ones(links), np.ones(flows), np.full(flows, np.inf))


def both(rm, cap, w, rates, bottleneck):
    whole = _conditioning.error_factor(rm.to_scipy("csr"), cap, w, rates, bottleneck)
    factored = _conditioning.factored_error_factor(rm, cap, w, rates, bottleneck)
    return whole, factored


def assert_same(whole, factored):
    assert (math.isinf(whole) and math.isinf(factored)) or factored == pytest.approx(whole, rel=1e-12), \
        (whole, factored)


@pytest.mark.parametrize("seed", range(12))
def test_factored_check_equals_whole_matrix_on_solved_random_matrices(seed):
    rng = np.random.default_rng(seed)
    rm = random_factored(rng, links=12, flows=40, segments=15, slots=3, repeats=seed % 2 == 0)
    cap = rng.choice([1.0, 2.0, 3.0, 5.0], rm.n_links)
    # weights within a decade, or spread over 1e-9 .. 1e9 (where the check has work)
    w = 10.0 ** rng.uniform(-9, 9, rm.n_flows) if seed % 3 == 0 else rng.choice([1.0, 2.0, 4.0], rm.n_flows)
    a = max_min_fair(rm.to_scipy(), cap, weights=w, method="dense")
    # the raw float64 rates and bottlenecks, as settle sees them (exact re-solve aside)
    whole, factored = both(rm, cap, w, np.asarray(a.rates, dtype=np.float64), np.asarray(a.bottleneck))
    assert_same(whole, factored)


@pytest.mark.parametrize("seed", range(8))
def test_factored_check_equals_whole_matrix_on_arbitrary_rates(seed):
    # not a solution: ties, zero rates, saturated and idle links, bottlenecks a flow does not
    # cross, flows held by caps (-1); the two must still agree entry for entry
    rng = np.random.default_rng(100 + seed)
    rm = random_factored(rng, links=8, flows=30, segments=10, slots=4, repeats=True)
    x = rng.choice([0.0, 0.25, 0.5, 1.0, 1e-7], rm.n_flows)
    w = rng.choice([1.0, 1e-6, 1e6], rm.n_flows)
    load = np.asarray(rm.to_scipy() @ x)
    cap = np.where(rng.random(rm.n_links) < 0.6, load, load * 2 + 1)     # most links saturated
    b = rng.integers(-1, rm.n_links, rm.n_flows)
    assert_same(*both(rm, cap, w, x, b))


@pytest.mark.parametrize("weights", ISSUE_CASES)
def test_factored_check_still_catches_the_ill_conditioned_cases(weights):
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(TWO_LINKS))
    cap = np.array([3.0, 3.0])
    a = max_min_fair(rm.to_scipy(), cap, weights=weights, method="frontier")
    # what float64 progressive filling gives before any exact re-solve: link 1 first
    x = np.asarray(a.rates, dtype=np.float64)
    whole, factored = both(rm, cap, np.asarray(weights), x, np.asarray(a.bottleneck))
    assert_same(whole, factored)
    assert factored > _conditioning.LIMITS[np.dtype("float64")]


def test_factored_check_hand_computed_bound():
    # float64's answer to weights [1e-8, 1e8, 1e-6] on TWO_LINKS (capacity 3): link 1 first
    # (flows 1, 2), flow 0 the residual 3e-14 of link 0. Link 1: K = 3 / (3 + 3e-14), nothing
    # contested. Link 0: own load R = 3e-14; flow 1 is earlier (level 3e-8 < 3e-6) with load 3
    # and factor K_1: K_0 = (3 + 3 K_1) / 3e-14; flow 1 tops link 1, so on link 0 it is
    # contested: C / m = 3 / 3e-14. The bound: K_0 (1 + 1e14) ~ 2e28.
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(TWO_LINKS))
    cap, w = np.array([3.0, 3.0]), np.array([1e-8, 1e8, 1e-6])
    x, b = np.array([3e-14, 3.0, 3e-14]), np.array([0, 1, 1])
    k1 = 3.0 / (3.0 + 3e-14)
    expect = (3.0 + 3.0 * k1) / 3e-14 * (1 + 3.0 / 3e-14)
    whole, factored = both(rm, cap, w, x, b)
    assert factored == pytest.approx(expect, rel=1e-9) and whole == pytest.approx(expect, rel=1e-9)


def test_factored_check_in_blocks(monkeypatch):
    # bottleneck rows expanded a few entries at a time give the figure of one block
    rng = np.random.default_rng(7)
    rm = random_factored(rng, links=10, flows=60, segments=12, slots=3, repeats=True)
    w = 10.0 ** rng.uniform(-6, 6, rm.n_flows)
    a = max_min_fair(rm.to_scipy(), np.ones(rm.n_links), weights=w, method="dense")
    x, b = np.asarray(a.rates, dtype=np.float64), np.asarray(a.bottleneck)
    one = _conditioning.factored_error_factor(rm, np.ones(rm.n_links), w, x, b)
    monkeypatch.setattr(_conditioning, "BLOCK_ENTRIES", 3)
    assert len(list(_conditioning._bottleneck_blocks(rm, np.ones(rm.n_links, dtype=bool)))) > 10
    assert_same(one, _conditioning.factored_error_factor(rm, np.ones(rm.n_links), w, x, b))


def test_settle_never_expands_a_large_routing(monkeypatch):
    # a fluid-ECMP-like spread (1/1024 beside 1) makes settle check; the check must not use
    # the whole expanded matrix (only its bottleneck rows: sub-matrices of fewer entries)
    rng = np.random.default_rng(3)
    rm = random_factored(rng, links=20, flows=200, segments=30, slots=3, repeats=False)
    assert _conditioning.spread(rm, rm.weights) > _conditioning.SPREAD_TRUSTED
    checking, expanded, checked = [False], [], []
    to_scipy, check = RoutingMatrix.to_scipy, _conditioning.factored_error_factor

    def spy(self, format="csc"):
        if checking[0]:
            expanded.append(len(self.seg_link))
        return to_scipy(self, format)

    def watched(*args):
        checking[0] = True
        try:
            checked.append(check(*args))
            return checked[-1]
        finally:
            checking[0] = False

    def refuse(*args):
        raise AssertionError("settle expanded the whole matrix")

    monkeypatch.setattr(RoutingMatrix, "to_scipy", spy)
    monkeypatch.setattr(_conditioning, "factored_error_factor", watched)
    monkeypatch.setattr(_conditioning, "error_factor", refuse)
    a = max_min_fair(rm, np.full(rm.n_links, 2.0), method="dense")
    assert a.status.label == "ok" and checked and expanded
    assert max(expanded) < len(rm.seg_link)


# link 0 (capacity 2): flow 0 (weight 1) frozen earlier at link 1 (capacity 0.5), then flows
# 1 (weight 1) and 2 (weight 1e-7) share the 1.5 left
EARLY = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
EARLY_CAP, EARLY_W = np.array([2.0, 0.5]), np.array([1.0, 1.0, 1e-7])


def test_a_flow_frozen_well_before_a_link_fills_is_not_contested_there():
    # link 0 at flow 0's level 0.5 would carry 0.5 x (1 + 1 + 1e-7) ~ 1.0 of its 2: far from
    # full, so no rounding could have frozen flow 0 there. K_1 = 0.5 / 0.5 = 1; K_0 = (c + x_0 K_1)
    # / R_0 = (2 + 0.5) / 1.5; nothing is contested: the bound is 5 / 3 (before: flow 0 counted as
    # contested on link 0, C / m = 0.5 / 1.5e-7, a bound of 5.6e6 that refused the problem)
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(EARLY))
    x = np.array([0.5, 1.5 / (1 + 1e-7), 1.5e-7 / (1 + 1e-7)])
    whole, factored = both(rm, EARLY_CAP, EARLY_W, x, np.array([1, 0, 0]))
    assert whole == pytest.approx(5 / 3, rel=1e-12) and factored == pytest.approx(5 / 3, rel=1e-12)


def test_a_well_conditioned_weighted_problem_beyond_exact_is_answered(monkeypatch):
    # too large for method='exact' (2 pairs allowed here): before, refused as ill-conditioned
    monkeypatch.setattr(_exact, "EXACT_PAIRS", 2)
    a = max_min_fair(sp.csc_matrix(EARLY), EARLY_CAP, weights=EARLY_W, method="dense")
    assert_exact(a.rates, rational_filling(EARLY, EARLY_CAP, EARLY_W))


def test_the_tie_a_flow_frozen_elsewhere_makes_is_still_contested():
    # link 0 full at flow 1's level to 1e-18 (3 / (1e9 + 1e-9) against 3 / (1e9 + 2e-9)):
    # flow 1 (frozen at link 1) is contested on link 0, C / m = 3 / 3e-18
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(TWO_LINKS))
    x = np.array([3e-18, 3.0, 6e-18])
    whole, factored = both(rm, np.array([3.0, 3.0]), np.array([1e-9, 1e9, 2e-9]), x, np.array([0, 1, 1]))
    assert_same(whole, factored)
    assert factored > 3.0 / 3e-18


@pytest.mark.parametrize("A, cap, w, d", [
    # float64 ties link 0 and link 1 to an ulp and freezes flow 0 at link 0 first; flow 1 then
    # gets link 1's cancelled residual, above its cap, and was reported capped, 3e-5 off
    # (link 1 is no flow's bottleneck: the bound never read it)
    ([[1.0, 0.0], [1.0, 1.0]], [1.683267733452257, 1.6832677334550112], [0.7973360462592236, 1.3046679389195903e-12],
     [np.inf, 2.754386105983647e-12]),
    # flow 2's cap ties link 0's share: float64 froze it at link 0 beside flow 1, whose rate then
    # came from link 0's share where the exact answer has link 0's residual after the cap, 1.4e-8 off
    ([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1 / 3, 0.0, 0.0]], [7.500000000000001, 9.387728932070048e-08, 1.0],
     [0.0001226951273211481, 0.00012619217724159002, 19883.986981628175], [np.inf, np.inf, 7.499999952401834]),
])
@pytest.mark.parametrize("method", ["dense", "frontier"])
def test_ties_that_caps_hide_are_caught_and_solved_exactly(A, cap, w, d, method):
    # (adversarial draws, 2026-12-06: the bound said 1 and 3.06 with status ok)
    A = np.array(A)
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method)
    assert_exact(a.rates, rational_filling(A, cap, w, d))


def test_the_tie_test_sums_each_link_on_its_own():
    # one link's sums were a running sum over every earlier link less the row's start: beside a
    # link of 1e16 bytes/s a tie on a link of 4 vanished. The same problem with an unrelated
    # link and flow first must give the same bound
    A = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    cap, w = np.array([4.0, 3.0, 1.0]), np.array([1e9, 1e-9, 1e9, 2e-9])
    x, b = np.array([1.0, 3e-18, 3.0, 6e-18]), np.array([2, 0, 1, 1])
    alone = _conditioning.error_factor(sp.csr_matrix(A), cap, w, x, b)
    big = np.zeros((4, 5))
    big[0, 0], big[1:, 1:] = 1.0, A
    with_big = _conditioning.error_factor(sp.csr_matrix(big), np.r_[1e16, cap], np.r_[1.0, w], np.r_[1e16, x],
                                          np.r_[0, b + 1])
    assert with_big == pytest.approx(alone, rel=1e-12) and alone > 1e18


def expanded_rows(monkeypatch):
    """The links whose rows the check expands, gathered from its blocks."""
    rows, blocks = set(), _conditioning._bottleneck_blocks

    def spy(*args):
        for A, lo in blocks(*args):
            rows.update(np.repeat(np.arange(A.shape[0]), np.diff(A.indptr)).tolist())
            yield A, lo
    monkeypatch.setattr(_conditioning, "_bottleneck_blocks", spy)
    return rows


def test_a_saturated_link_of_one_level_is_bounded_without_its_row(monkeypatch):
    # flows 0 and 1 held by their caps at rate 1 (weight 1: level 1), both on link 0 of capacity
    # 2 (1 + 1e-10): full to within TIE, no flow's bottleneck. Its residual carries both flows'
    # load: the factor c / (t W) = 1 + 1e-10, and the bound is that (no bottleneck link)
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]])))
    cap, w, x, b = np.array([2.0 * (1 + 1e-10), 5.0]), np.ones(2), np.ones(2), np.array([-1, -1])
    rows = expanded_rows(monkeypatch)
    whole, factored = both(rm, cap, w, x, b)
    assert not rows                                        # link 0's row was never expanded
    assert factored - 1 == pytest.approx(1e-10, rel=1e-5) and whole - 1 == pytest.approx(1e-10, rel=1e-5)
    assert factored >= whole


@pytest.mark.parametrize("seed", range(8))
def test_saturated_links_of_one_level_give_the_whole_matrix_figure(seed, monkeypatch):
    # every flow at one level (as the 131,072-GPU pipeline call: ECMP, equal rates): the links
    # no flow is bottlenecked at are read from their sums; the figure is the whole matrix's, or
    # above it by rounding at most (never below)
    rng = np.random.default_rng(200 + seed)
    rm = random_factored(rng, links=12, flows=40, segments=15, slots=3, repeats=seed % 2 == 0)
    w = rng.choice([1.0, 1e-6, 1e6], rm.n_flows)
    x = 0.25 * w
    load = np.asarray(rm.to_scipy() @ x)
    cap = np.where(rng.random(rm.n_links) < 0.7, load * (1 + rng.uniform(-1e-10, 1e-10, rm.n_links)), load * 2 + 1)
    b = rng.choice(rm.n_links // 3, rm.n_flows)              # links 0-3 the only bottlenecks
    rows = expanded_rows(monkeypatch)
    whole, factored = both(rm, cap, w, x, b)
    assert_same(whole, factored)
    assert factored >= whole
    saturated = (load >= cap * (1 - _conditioning.TIE)) & (cap > 0)
    assert rows <= set(b.tolist()) and saturated[rm.n_links // 3:].any()
