"""The frontier method with wide segments kept apart (flowsolver.solver._frontier_wide):
paths wider than MAX_PATH links (fluid ECMP over many spines) keep their wide segments
shared, tested through per-segment lower bounds of the fair shares and refreshed when the
narrow minimum passes them. Against the oracle (progressive filling), the dense method and
the max-min certificate, on random factored instances and routed fabrics, with the split
forced on small problems."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies as tp
from flowsolver import Flows, RoutingMatrix, Upgrade, max_min_fair, route
from flowsolver.solver import _frontier as frontier
from flowsolver.solver import _frontier_paths as frontier_paths
from flowsolver.solver._certificate import violation

from ..oracle import assert_max_min_fair, progressive_filling
from .test_frontier import level_rounds_only  # noqa: F401 (a fixture)

INF = np.inf


@pytest.fixture(autouse=True)
def certificate_failures_are_errors():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*failed its max-min certificate.*")
        yield


@pytest.fixture
def split_everything(monkeypatch):
    """Every path is 'too wide' and every segment of more than two links is wide."""
    monkeypatch.setattr(frontier_paths, "MAX_PATH", 0)
    monkeypatch.setattr(frontier_paths, "WIDE_SEGMENT", 2)


def rates(a):
    return np.asarray(a.rates, dtype=np.float64)


def _matrix(segments, flow_seg, flow_coef, cap, rng):
    seg_link = np.concatenate(segments)
    seg_ptr = np.concatenate([[0], np.cumsum([len(x) for x in segments])]).astype(np.int64)
    seg_frac = np.where(rng.random(len(seg_link)) < 0.5, 1.0, 10 ** rng.uniform(-3, 0, len(seg_link)))
    N = len(flow_seg)
    return RoutingMatrix(seg_ptr, seg_link.astype(np.int64), seg_frac, flow_seg.astype(np.int64), flow_coef, cap,
                         np.ones(N), np.full(N, INF))


def _scenario(rng, L, N):
    """Capacities 1e-2 .. 1e2 (some failed), weights 1e-3 .. 1e3, some caps."""
    cap = 10 ** rng.uniform(-2, 2, L)
    cap[rng.random(L) < 0.1] = 0.0
    w = 10 ** rng.uniform(-3, 3, N)
    d = np.where(rng.random(N) < 0.3, 10 ** rng.uniform(-2, 2, N), INF)
    d[0] = 10 ** rng.uniform(-2, 2)
    return cap, w, d


def factored_instance(seed):
    """One shape, random contents (a handful of compiled kernels for any number of
    examples): 16 links, 4 narrow segments of 1-2 links on links 0-7 and 4 wide ones of
    3-8 links on links 8-15 (fractions 1e-3 .. 1), 32 flows each summing a narrow segment,
    a wide one and maybe a second narrow one, with coefficients 0.2 .. 1."""
    rng = np.random.default_rng(seed)
    narrow = [rng.choice(8, size=int(rng.integers(1, 3)), replace=False) for _ in range(4)]
    wide = [8 + rng.choice(8, size=int(rng.integers(3, 9)), replace=False) for _ in range(4)]
    N = 32
    flow_seg = np.stack([rng.integers(0, 4, N), rng.integers(4, 8, N),
                         np.where(rng.random(N) < 0.5, rng.integers(0, 4, N), -1)], axis=1)
    flow_coef = np.where(flow_seg >= 0, rng.uniform(0.2, 1.0, (N, 3)), 0.0)
    cap, w, d = _scenario(rng, 16, N)
    return _matrix(narrow + wide, flow_seg, flow_coef, cap, rng), cap, w, d


def mixed_instance(seed):
    """Segments of 1 to 8 links drawn from all links (so the wide ones pull narrow ones
    that share a link into the wide set), flows summing up to three, no coefficients."""
    rng = np.random.default_rng(seed)
    L, S, N, K = int(rng.integers(3, 24)), int(rng.integers(2, 12)), int(rng.integers(1, 40)), 3
    segments = [rng.choice(L, size=min(int(n), L), replace=False) for n in rng.integers(1, 9, S)]
    flow_seg = np.where(rng.random((N, K)) < 0.6, rng.integers(0, S, (N, K)), -1)
    flow_seg[:, 0] = rng.integers(0, S, N)                  # every flow crosses a link
    cap, w, d = _scenario(rng, L, N)
    return _matrix(segments, flow_seg, None, cap, rng), cap, w, d


def assert_exact(rm, cap, w, d):
    a = max_min_fair(rm, cap, weights=w, demands=d, method="frontier")
    assert int(a.status) == 0
    A = rm.to_scipy().toarray()
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap, w, d), rtol=1e-9, atol=0)
    assert violation(rm, cap, w, d, rates(a), a.bottleneck) is None
    np.testing.assert_allclose(a.link_load, A @ rates(a), rtol=1e-9, atol=1e-12)


@settings(deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_split_frontier_matches_the_oracle_on_random_factored_instances(split_everything, seed):
    assert_exact(*factored_instance(seed))


@pytest.mark.parametrize("seed", range(6))
def test_split_frontier_with_wide_sets_grown_over_shared_links(split_everything, seed):
    rm, cap, w, d = mixed_instance(seed)
    wide = frontier_paths.wide_segments(rm)
    assert wide is not None
    assert_exact(rm, cap, w, d)


def test_split_paths_rebuild_the_matrix(split_everything):
    """Narrow links per flow plus wide segments per slot are the matrix, entry for entry."""
    rm, *_ = factored_instance(11)
    path, frac, wide = frontier_paths.split_paths(rm)
    assert wide is not None and wide.n_segments > 0
    N, L = rm.n_flows, rm.n_links
    rebuilt = np.zeros((L, N))
    for f in range(N):
        for j in np.flatnonzero(path[f] >= 0):
            rebuilt[path[f, j], f] += 1.0 if frac is None else frac[f, j]
        for k in np.flatnonzero(wide.seg[f] >= 0):
            on = wide.entry_seg == wide.seg[f, k]
            c = 1.0 if wide.coef is None else wide.coef[f, k]
            np.add.at(rebuilt[:, f], wide.entry_link[on], c * wide.entry_frac[on])
    np.testing.assert_allclose(rebuilt, rm.to_scipy().toarray(), rtol=1e-15, atol=0)
    # a link's sums are kept one way: no narrow path entry is a link of a wide segment
    assert not wide.links[path[path >= 0]].any()


@pytest.mark.parametrize("weighted,capped,failed", [(False, False, 0.0), (True, False, 0.0), (True, True, 0.0),
                                                    (True, False, 0.05)])
def test_fat_tree_ecmp_with_wide_paths_is_exact(weighted, capped, failed):
    """fat_tree(6) with fluid ECMP: 28-link paths; with MAX_PATH below that the frontier
    keeps the leaf-pair segments apart (no monkeypatching of WIDE_SEGMENT)."""
    g = tp.fat_tree(6)
    if failed:
        g = tp.fail_links(g, failed, seed=2)
    rm = route(g, Flows.all_to_all(54, 1.0))
    rng = np.random.default_rng(3)
    w = rng.lognormal(0.0, 1.0, rm.n_flows) if weighted else None
    d = np.where(rng.random(rm.n_flows) < 0.2, rng.uniform(1e9, 2e10, rm.n_flows), INF) if capped else None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frontier_paths, "MAX_PATH", 16)
        assert frontier_paths.split_paths(rm)[2] is not None
        front = max_min_fair(rm, weights=w, demands=d, method="frontier")
    dense = max_min_fair(rm, weights=w, demands=d, method="dense")
    ww = np.ones(rm.n_flows) if w is None else w
    dd = np.full(rm.n_flows, INF) if d is None else d
    np.testing.assert_allclose(rates(front), rates(dense), rtol=1e-12)
    np.testing.assert_allclose(front.link_load, dense.link_load, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(rates(front), progressive_filling(rm.to_scipy(), rm.capacity, ww, dd), rtol=1e-9)
    assert_max_min_fair(rm.to_scipy(), rm.capacity, ww, dd, rates(front), front.bottleneck, atol=0)


def test_an_oversubscribed_core_freezes_flows_at_wide_links(split_everything):
    """A 4:1 core: most flows are held by wide (core) links, which only level rounds right
    after a refresh may freeze; the bottlenecks reported are core links."""
    g = Upgrade("agg-core", factor=0.25).apply(tp.fat_tree(4))
    rm = route(g, Flows.all_to_all(16, 1.0))
    w = np.random.default_rng(4).uniform(0.5, 2.0, rm.n_flows)
    a = max_min_fair(rm, weights=w, method="frontier")
    ref = progressive_filling(rm.to_scipy(), rm.capacity, w)
    np.testing.assert_allclose(rates(a), ref, rtol=1e-9)
    wide = frontier_paths.split_paths(rm)[2]
    held = a.bottleneck[a.bottleneck >= 0]
    assert wide.links[held].mean() > 0.5
    assert violation(rm, rm.capacity, w, rm.demands, rates(a), a.bottleneck) is None


def test_level_rounds_alone_with_wide_segments(split_everything, level_rounds_only):
    for seed in range(10):
        assert_exact(*factored_instance(seed))


def test_scipy_columns_wider_than_max_path_split_into_one_wide_segment_each():
    rng = np.random.default_rng(4)
    A = (rng.random((120, 50)) < 0.5) * rng.uniform(0.1, 1.0, (120, 50))
    A[:40, :] = np.maximum(A[:40, :], 0.3)          # every flow crosses at least 40 links
    cap = rng.uniform(1.0, 5.0, 120)
    rm = RoutingMatrix.from_scipy(sp.csc_matrix(A), capacity=cap)
    assert frontier_paths.path_width(rm) > frontier_paths.MAX_PATH and frontier_paths.split_width(rm) == 1
    a = max_min_fair(rm, method="frontier")
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap), rtol=1e-9)


def _hand_over_or_not(monkeypatch, calls, rm, w, constant):
    """auto with the warm-up's ``constant`` at 1 (the frontier takes over after the first
    block of dense rounds) and at 0 (dense to the end): the oracle's rates, the max-min
    certificate and the loads either way (``calls``: the flows the frontier was given)."""
    ref = progressive_filling(rm.to_scipy(), rm.capacity, w)
    for progress, handed_over in ((1.0, True), (0.0, False)):
        monkeypatch.setattr(frontier, constant, progress)
        calls.clear()
        a = max_min_fair(rm, weights=w)
        assert (len(calls) == 1 and 0 < calls[0] < rm.n_flows) if handed_over else calls == []
        np.testing.assert_allclose(rates(a), ref, rtol=1e-9)
        assert violation(rm, rm.capacity, w, rm.demands, rates(a), a.bottleneck) is None
        np.testing.assert_allclose(a.link_load, rm.link_loads(rates(a)), rtol=1e-9)


def test_auto_on_narrow_paths_warms_up_with_one_dense_round(monkeypatch):
    """auto on paths within MAX_PATH: one dense round, more while they freeze at least
    NARROW_WARMUP_PROGRESS of the flows left per round, then the frontier on the rest;
    the oracle's rates whichever way it goes."""
    monkeypatch.setattr(frontier, "FRONTIER_FLOWS", 100)
    calls = []
    real = frontier.solve
    monkeypatch.setattr(frontier, "solve", lambda p: calls.append(p.routing.n_flows) or real(p))
    rm = route(tp.fat_tree(4), Flows.all_to_all(16, 1.0), policy="ecmp_hash")
    assert frontier_paths.path_width(rm) <= frontier_paths.MAX_PATH
    w = np.random.default_rng(3).uniform(0.5, 2.0, rm.n_flows)      # many distinct levels
    _hand_over_or_not(monkeypatch, calls, rm, w, "NARROW_WARMUP_PROGRESS")
    monkeypatch.setattr(frontier, "NARROW_WARMUP_PROGRESS", 0.05)
    calls.clear()
    few = max_min_fair(rm)                      # unweighted: few levels, each round freezes many
    assert calls == []
    np.testing.assert_allclose(rates(few), progressive_filling(rm.to_scipy(), rm.capacity), rtol=1e-12)
    with pytest.raises(ValueError, match="capacity"):      # float32 range checked before the dense round
        max_min_fair(rm, np.full(rm.n_links, 1e39), dtype=np.float32)


def test_auto_warms_up_with_dense_rounds_then_continues_with_the_frontier(monkeypatch):
    """auto on wide paths: dense rounds while they freeze enough flows, then the frontier on
    the flows they left, on the residual capacities; the same rates as the oracle either
    way. A symmetric all-to-all ends in the warm-up."""
    monkeypatch.setattr(frontier, "FRONTIER_FLOWS", 100)
    monkeypatch.setattr(frontier_paths, "MAX_PATH", 16)
    calls = []
    real = frontier.solve
    monkeypatch.setattr(frontier, "solve", lambda p: calls.append(p.routing.n_flows) or real(p))
    rm = route(tp.fat_tree(6), Flows.all_to_all(54, 1.0))
    w = np.random.default_rng(6).lognormal(0.0, 1.0, rm.n_flows)
    _hand_over_or_not(monkeypatch, calls, rm, w, "WARMUP_PROGRESS")
    monkeypatch.setattr(frontier, "WARMUP_PROGRESS", 1.0)
    calls.clear()
    even = max_min_fair(rm)
    assert calls == [] and int(even.rounds) == 1
    np.testing.assert_allclose(rates(even), progressive_filling(rm.to_scipy(), rm.capacity), rtol=1e-12)


def test_the_wide_tables_padding_updates_no_address(monkeypatch):
    # the wide tables pad slots and entries onto one padding segment and link: every refresh's
    # scatters and segment reductions updated those addresses once per padding item (on a GPU,
    # serialised). The kernel's scatter targets send them past the end (dropped): no padding
    # item may land on a segment or link index in range, and every real one where it was
    import jax.numpy as jnp
    from flowsolver.solver._frontier_wide import Wide
    monkeypatch.setattr(frontier_paths, "MAX_PATH", 16)
    rm = route(tp.fat_tree(6), Flows.all_to_all(54, 1.0))
    wide = frontier_paths.split_paths(rm)[2]
    Np, Lp = rm.n_flows + 300, rm.n_links + 20          # padding: flows and links of a bucket
    t = frontier._wide_tables(wide, Np, Lp)
    w = Wide(tuple(None if a is None else jnp.asarray(a) for a in (t.seg, t.coef, t.entry_seg, t.entry_link, t.entry_frac)), t.n_segments, Lp)
    S, E = t.n_segments, len(wide.entry_seg)
    real_slots = np.zeros(t.seg.shape, bool)
    real_slots[:len(wide.seg)] = wide.seg >= 0
    assert (~real_slots).sum() > 300 and len(t.entry_seg) > E
    seg_at, entry_seg_at, link_at = (np.asarray(a) for a in (w.seg_at, w.entry_seg_at, w.entry_link_at))
    assert np.all(seg_at[~real_slots] >= S) and np.array_equal(seg_at[real_slots], wide.seg[wide.seg >= 0])
    assert np.all(entry_seg_at[E:] >= S) and np.all(link_at[E:] >= Lp)
    assert np.array_equal(entry_seg_at[:E], wide.entry_seg) and np.array_equal(link_at[:E], wide.entry_link)
