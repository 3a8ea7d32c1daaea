"""The frontier method (flowsolver.solver._frontier): against the dense method and the
oracle on routed clusters, wide weight ranges, level rounds, the reproducers of its wrong
answers, the dense fallback when its certificate fails, and when auto picks it."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies as tp
from flowsolver import Flows, RoutingMatrix, max_min_fair, route
from flowsolver.solver import _frontier as frontier
from flowsolver.solver import trace_count
from flowsolver.solver._certificate import violation

from ..oracle import assert_max_min_fair, progressive_filling, rational_filling

INF = np.inf


def rates(a):
    return np.asarray(a.rates, dtype=np.float64)


@pytest.fixture(autouse=True)
def certificate_failures_are_errors():
    """A failed certificate would be caught and re-solved; here it must never happen."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*failed its max-min certificate.*")
        yield


# ------------------------------------------------------------------ routed clusters
@pytest.mark.parametrize("subflows,weighted,capped,failed", [
    (1, False, False, 0.0), (2, False, False, 0.0), (1, True, True, 0.0), (2, True, False, 0.05)])
def test_frontier_matches_dense_and_oracle_on_a_routed_fat_tree(subflows, weighted, capped, failed):
    g = tp.fat_tree(4)
    if failed:
        g = tp.fail_links(g, failed, seed=3)
    rm = route(g, Flows.all_to_all(16, 1.0), policy="ecmp_hash", subflows=subflows)
    rng = np.random.default_rng(subflows)
    w = rng.uniform(0.5, 3.0, rm.n_flows) if weighted else None
    d = np.where(rng.random(rm.n_flows) < 0.2, rng.uniform(1e9, 2e10, rm.n_flows), INF) if capped else None
    A = rm.to_scipy()
    front = max_min_fair(rm, weights=w, demands=d, method="frontier")
    dense = max_min_fair(rm, weights=w, demands=d, method="dense")
    assert bool(front.converged) and int(front.status) == 0
    np.testing.assert_allclose(rates(front), rates(dense), rtol=1e-12)
    np.testing.assert_allclose(front.link_load, dense.link_load, rtol=1e-9, atol=1e-3)
    ww = np.ones(rm.n_flows) if w is None else w
    dd = np.full(rm.n_flows, INF) if d is None else d
    np.testing.assert_allclose(rates(front), progressive_filling(A, rm.capacity, ww, dd), rtol=1e-9)
    assert_max_min_fair(A, rm.capacity, ww, dd, rates(front), front.bottleneck, atol=0)


def test_frontier_with_a_small_pair_buffer_is_still_exact(monkeypatch):
    g = tp.rail_optimized(4)
    rm = route(g, Flows.all_to_all(32, 1.0), policy="ecmp_hash", subflows=2)
    w = np.random.default_rng(5).uniform(0.5, 2.0, rm.n_flows)     # distinct levels: no level rounds
    full = max_min_fair(rm, weights=w, method="frontier")
    monkeypatch.setattr(frontier, "PAIRS_PER_ROUND", 16)    # one link's flows per round at most
    small = max_min_fair(rm, weights=w, method="frontier")
    np.testing.assert_allclose(rates(small), rates(full), rtol=1e-12)
    assert int(small.rounds) >= int(full.rounds) and bool(small.converged)
    ref = progressive_filling(rm.to_scipy(), rm.capacity, w, np.full(rm.n_flows, INF))
    np.testing.assert_allclose(rates(small), ref, rtol=1e-9)


def test_auto_uses_the_frontier_for_large_single_solves_only(monkeypatch):
    calls = []
    real = frontier.solve
    monkeypatch.setattr(frontier, "solve", lambda *a, **k: calls.append(1) or real(*a, **k))
    rm = route(tp.fat_tree(4), Flows.all_to_all(16, 1.0), policy="ecmp_hash")
    w = np.random.default_rng(0).uniform(0.5, 2.0, rm.n_flows)     # many distinct levels
    max_min_fair(rm, weights=w)
    assert calls == []                                     # below FRONTIER_FLOWS: dense
    monkeypatch.setattr(frontier, "FRONTIER_FLOWS", 100)
    monkeypatch.setattr(frontier, "NARROW_WARMUP_PROGRESS", 2.0)     # no dense warm-up (test_frontier_wide)
    auto = max_min_fair(rm, weights=w)
    assert calls == [1] and bool(auto.converged)
    max_min_fair(rm, np.tile(rm.capacity, (2, 1)), weights=w)   # batches: dense, one vmapped call
    assert calls == [1]
    dense = max_min_fair(rm, weights=w, method="dense")
    np.testing.assert_allclose(rates(auto), rates(dense), rtol=1e-12)
    np.testing.assert_allclose(auto.link_load, dense.link_load, rtol=1e-9)
    assert_max_min_fair(rm.to_scipy(), rm.capacity, w, np.full(rm.n_flows, INF), rates(auto), auto.bottleneck,
                        atol=0)


def test_frontier_batch_reports_per_scenario_status():
    A = sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]]))
    caps = [[np.inf, 2.0], [4.0, 2.0], [0.0, 2.0]]
    front = max_min_fair(A, caps, method="frontier")
    dense = max_min_fair(A, caps, method="dense")
    assert list(front.status) == [2, 0, 0]
    np.testing.assert_allclose(rates(front)[1:], rates(dense)[1:], rtol=1e-12)
    np.testing.assert_allclose(rates(front)[1:], [[2.0, 2.0], [0.0, 0.0]])


def test_frontier_same_bucket_does_not_recompile():
    A1 = sp.random(40, 60, density=0.1, random_state=1, format="csc") + sp.eye(40, 60, format="csc")
    A2 = sp.random(41, 59, density=0.1, random_state=2, format="csc") + sp.eye(41, 59, format="csc")
    max_min_fair(A1, np.full(40, 2.0), method="frontier")
    before = trace_count()
    max_min_fair(A1, np.full(40, 5.0), method="frontier")
    max_min_fair(A2, np.full(41, 3.0), method="frontier")
    assert trace_count() == before


def test_small_problems_of_any_path_width_up_to_8_share_one_compiled_frontier():
    def chain(width):            # one flow over `width` links, another over the first: same buckets
        A = np.zeros((8, 2))
        A[:width, 0] = 1.0
        A[0, 1] = 1.0
        return sp.csc_matrix(A)
    max_min_fair(chain(8), np.full(8, 2.0), method="frontier")
    before = trace_count()
    for width in range(1, 8):
        a = max_min_fair(chain(width), np.full(8, 2.0), method="frontier")
        np.testing.assert_allclose(rates(a), [1.0, 1.0])          # both share link 0's 2.0
    assert trace_count() == before


# ------------------------------------------------------------------ the reproducers
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_weights_reproducers_are_exact(dtype):
    # link 1 (0.1) holds flow 0 (level 1e-4, rate 0.1); link 0 then has 1 - 0.03 = 0.97
    # left for flow 1 at fraction 0.01: rate 97 (progressive filling by hand)
    A = sp.csc_matrix([[0.3, 0.01], [1.0, 0.0]])
    a = max_min_fair(A, [1.0, 0.1], weights=[1000.0, 1e-3], dtype=dtype, method="frontier")
    np.testing.assert_allclose(rates(a), [0.1, 97.0], rtol=1e-6 if dtype == "float32" else 1e-12)
    # same with fraction 1 and weights 1e9 / 1e-9: 0.97 for flow 1
    A = sp.csc_matrix([[0.3, 1.0], [1.0, 0.0]])
    a = max_min_fair(A, [1.0, 0.1], weights=[1e9, 1e-9], dtype=dtype, method="frontier")
    np.testing.assert_allclose(rates(a), [0.1, 0.97], rtol=1e-6 if dtype == "float32" else 1e-12)
    assert int(a.status) == 0


# ------------------------------------------------------------------ wide random instances
def wide_instance(seed, max_links=8, max_flows=12):
    """Weights 1e-6 .. 1e6, fractions 1e-9 .. 1, capacities 1e-3 .. 1e3, some failed links
    and caps (log-uniform)."""
    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, max_links + 1))
    N = int(rng.integers(1, max_flows + 1))
    A = np.where(rng.random((L, N)) < 0.5, 10 ** rng.uniform(-9, 0, (L, N)), 0.0)
    cap = 10 ** rng.uniform(-3, 3, L)
    cap[rng.random(L) < 0.1] = 0.0
    w = 10 ** rng.uniform(-6, 6, N)
    d = np.where(rng.random(N) < 0.3, 10 ** rng.uniform(-3, 3, N), INF)
    d[~(A > 0).any(axis=0) & np.isinf(d)] = 1.0          # no unbounded flow
    return A, cap, w, d


wide = settings(deadline=None)          # examples: the hypothesis profile (conftest.py)


@pytest.mark.parametrize("method", ["dense", "frontier"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@wide
@given(seed=st.integers(0, 2**32 - 1))
def test_wide_ranges_match_the_oracle_and_the_certificate(seed, method, dtype):
    A, cap, w, d = wide_instance(seed)
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method, dtype=dtype)
    assert int(a.status) == 0
    ref = progressive_filling(A, cap, w, d)
    x = rates(a)
    # float64: both methods agree with progressive filling to ~1e-13 per rate (measured);
    # float32: the frontier solves in float64 and rounds (6e-8), dense sums in float32
    rtol = {"float64": 1e-9, "float32": 1e-6 if method == "frontier" else 1e-3}[dtype]
    np.testing.assert_allclose(x, ref, rtol=rtol, atol=0)
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(A))
    assert violation(rm, cap, w, d, x, a.bottleneck, rtol=1e-9 if dtype == "float64" else 1e-3) is None


def test_routed_fat_tree_with_failures_and_wide_weights_is_exact():
    g = tp.fail_links(tp.fat_tree(4), 0.05, seed=1)
    rm = route(g, Flows.all_to_all(16, 1.0), policy="ecmp_hash", subflows=2)
    w = 10 ** np.random.default_rng(0).uniform(-6, 6, rm.n_flows)
    front = max_min_fair(rm, weights=w, method="frontier")
    dense = max_min_fair(rm, weights=w, method="dense")
    ref = progressive_filling(rm.to_scipy(), rm.capacity, w, np.full(rm.n_flows, INF))
    np.testing.assert_allclose(rates(front), ref, rtol=1e-9)
    np.testing.assert_allclose(rates(dense), ref, rtol=1e-9)
    assert violation(rm, rm.capacity, w, rm.demands, rates(front), front.bottleneck) is None


# ------------------------------------------------------------------ level rounds
def test_independent_equal_bottlenecks_take_one_level_round():
    n = 20_000
    a = max_min_fair(sp.identity(n, format="csc"), np.full(n, 3.0), method="frontier")
    assert int(a.rounds) == 1 and bool(a.converged)
    np.testing.assert_array_equal(rates(a), 3.0)
    np.testing.assert_array_equal(a.bottleneck, np.arange(n))


@pytest.fixture
def level_rounds_only(monkeypatch):
    """Every round with a tie of one link is a level round: plain progressive filling (the
    patch holds for the whole test, every generated input included)."""
    real = frontier.build

    def build(*args):
        lay = real(*args)
        lay.level_ties = 1
        return lay

    monkeypatch.setattr(frontier, "build", build)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_level_rounds_alone_are_progressive_filling(level_rounds_only, seed):
    A, cap, w, d = wide_instance(seed)
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method="frontier")
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap, w, d), rtol=1e-9, atol=0)


def test_shares_beyond_the_float32_range_are_still_ordered():
    # capacities ~1e39 (above float32's 3.4e38): each link is its own bottleneck
    n = 3000
    cap = np.geomspace(1e39, 1e42, n)
    a = max_min_fair(sp.identity(n, format="csc"), cap, method="frontier")
    np.testing.assert_allclose(rates(a), cap, rtol=1e-15)
    assert int(a.rounds) <= -(-n // 32) + 1        # K >= 32 links a round, never one


def test_paths_wider_than_32_links():
    rng = np.random.default_rng(4)
    A = (rng.random((120, 50)) < 0.5) * rng.uniform(0.1, 1.0, (120, 50))
    A[:, (A > 0).sum(axis=0) < 40] = 0.0
    A[:40, :] = np.maximum(A[:40, :], 0.3)          # every flow crosses at least 40 links
    cap = rng.uniform(1.0, 5.0, 120)
    a = max_min_fair(sp.csc_matrix(A), cap, method="frontier")
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap), rtol=1e-9)


# ------------------------------------------------------------------ the certificate check
def test_a_failed_certificate_re_solves_with_the_dense_method(monkeypatch):
    real = frontier._run

    def corrupted(*args):                # the kernel's rates halved, on the device
        cap, (r, *rest) = real(*args)
        return cap, (r * 0.5, *rest)

    monkeypatch.setattr(frontier, "_run", corrupted)
    A, cap, w, d = wide_instance(7)
    with pytest.warns(RuntimeWarning, match="failed its max-min certificate .*re-solved with the dense method"):
        a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method="frontier")
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap, w, d), rtol=1e-9)


# ------------------------------------------------------------------ auto
def test_auto_switches_to_the_frontier_at_the_threshold(monkeypatch):
    calls = []                       # the frontier's entry for auto (its dense round ends these)
    real = frontier.solve_auto
    monkeypatch.setattr(frontier, "solve_auto", lambda *a, **k: calls.append(1) or real(*a, **k))
    n = frontier.FRONTIER_FLOWS
    for flows, used in ((n - 1, []), (n, [1])):
        calls.clear()
        a = max_min_fair(sp.identity(flows, format="csc"), np.full(flows, 2.0))
        assert calls == used and bool(a.converged)
        np.testing.assert_array_equal(rates(a), 2.0)


def test_a_problem_that_cancels_in_float64_re_solves_without_a_warning():
    # a heavy flow (5.7e8) over three links of capacity 3 beside light ones (1e-9 .. 1e-7): the
    # light flows get what float64 cannot subtract (an adversarial draw, 2026-12-05); the
    # frontier's certificate fails there as the conditioning check expects, and the problem is
    # solved exactly without the warning kept for a fault in a well-conditioned one
    A = np.array([[1.0, 0.25, 1.0], [1 / 3, 1 / 3, 1.0], [0.0, 0.5, 1.0]])
    cap, w = [3.0, 3.0, 3.0], [2.1106297233178543e-09, 1.6093734364725925e-07, 572681103.8753347]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        a = max_min_fair(sp.csc_matrix(A), cap, weights=w, method="frontier")
    exact = np.array([float(q) for q in rational_filling(A, cap, w)])
    np.testing.assert_allclose(rates(a), exact, rtol=1e-9)
