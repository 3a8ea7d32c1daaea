"""The max-min solver (flowsolver.solver: the entry point, argument checks, the dense
method, the result) against REFERENCE.md's exact cases, a NumPy oracle and properties;
the frontier method is tested in test_frontier.py."""

import re

import jax
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import flowsolver as fs
import topologies as tp
from flowsolver import Flows, RoutingMatrix, Status, max_min_fair, route
from flowsolver.solver import _dense, bucket_size, trace_count

from ..oracle import assert_max_min_fair, progressive_filling

INF = np.inf


def rates(a):
    return np.asarray(a.rates, dtype=np.float64)


# ------------------------------------------------------------------ exact cases
def test_reference_cases():
    # one link of 3, weights 1 and 0.5 (SimGrid penalties 1 and 2): 2 and 1
    a = max_min_fair(sp.csc_matrix([[1.0, 1.0]]), [3.0], weights=[1.0, 0.5])
    np.testing.assert_allclose(rates(a), [2, 1], rtol=1e-12)
    # coefficients: link 1 (20) f1 x1 + f2 x2, link 2 (60) f1 x2 + f3 x1, weights (1, .5, 1)
    A = sp.csc_matrix([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0]])
    np.testing.assert_allclose(rates(max_min_fair(A, [20, 60], weights=[1, 0.5, 1])), [10, 5, 40], rtol=1e-12)
    # parking lot
    A = sp.csc_matrix(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 0, 1.0]]))
    np.testing.assert_allclose(rates(max_min_fair(A, [1, 1, 1])), [1 / 3, 2 / 3, 1 / 3, 1 / 3, 2 / 3], rtol=1e-12)
    # one link of 10, weights (1, 2, 1), cap 1 on the third: 3, 6, 1
    a = max_min_fair(sp.csc_matrix([[1.0, 1.0, 1.0]]), [10.0], weights=[1, 2, 1], demands=[INF, INF, 1])
    np.testing.assert_allclose(rates(a), [3, 6, 1], rtol=1e-12)
    assert list(np.asarray(a.bottleneck)) == [0, 0, -1]


def test_zero_capacity_links_give_zero_not_nan():
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    a = max_min_fair(A, [0.0, 4.0])
    np.testing.assert_array_equal(rates(a), [0.0, 0.0, 4.0])
    assert np.isfinite(np.asarray(a.utilization)).all()


def test_unbounded_flow_raises_naming_it_and_batches_report_it():
    A = sp.csc_matrix(np.array([[1.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="flow 1 crosses no link of finite capacity and has no demand cap"):
        max_min_fair(A, [3.0])
    with pytest.raises(ValueError, match="flow 0 crosses no link of finite capacity"):
        max_min_fair(sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]])), [np.inf, 2.0])
    a = max_min_fair(sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]])), [[np.inf, 2.0], [4.0, 2.0]])
    assert list(a.status) == [2, 0]
    np.testing.assert_allclose(rates(a)[1], [2.0, 2.0])
    a = max_min_fair(A, [3.0], demands=[[INF, 2.0, INF], [INF, INF, INF]])
    assert list(np.asarray(a.status)) == [0, 2]
    np.testing.assert_allclose(rates(a)[0], [1.5, 2.0, 1.5])
    assert np.isinf(rates(a)[1, 1]) and not np.asarray(a.ok)[1]


def test_status_holds_status_values():
    a = max_min_fair(sp.csc_matrix([[1.0, 1.0]]), [3.0])
    assert a.status is Status.OK and a.status.label == "ok" and bool(a.ok)
    b = max_min_fair(sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]])), [[np.inf, 2.0], [4.0, 2.0]])
    assert [Status(int(s)) for s in b.status] == [Status.UNBOUNDED, Status.OK]
    assert (b.status == Status.UNBOUNDED).tolist() == [True, False] and b.ok.tolist() == [False, True]


@pytest.mark.parametrize("kwargs,match", [
    (dict(capacity=[-1.0, 1.0]), r"capacity\[0\] must be a number >= 0"),
    (dict(capacity=[1.0, np.nan]), r"capacity\[1\] must be"),
    # a bad entry of one scenario's own row fails that scenario alone (Status.FAILED, adv18c finding 4:
    # tests/solver/test_batch_invalid.py); one in a row every scenario shares still raises
    (dict(capacity=[1.0, -2.0], weights=np.ones((2, 3))), r"capacity\[1\] must be a number >= 0"),
    (dict(capacity=[1.0, 1.0, 1.0]), r"capacity must have shape \(2,\) or \(batch, 2\)"),
    (dict(weights=[1.0, 0.0, 1.0]), r"weights\[1\] must be a finite number > 0"),
    (dict(weights=[1.0, -1.0, 1.0]), r"weights\[1\]"),
    (dict(weights=[1.0, 1.0]), r"weights must have shape \(3,\)"),
    (dict(demands=[1.0, np.nan, 1.0]), r"demands\[1\] must be a number >= 0"),
    (dict(capacity=np.ones((2, 2)), weights=np.ones((3, 3))), r"disagree on the batch size"),
    (dict(dtype="float16"), r"dtype must be 'float32' or 'float64'"),
    (dict(max_rounds=0), r"max_rounds must be an integer in 1 \.\.\. 2147483647, got 0"),
    (dict(max_rounds=2**31), r"max_rounds must be an integer in 1 \.\.\. 2147483647, got 2147483648"),
    (dict(method="simplex"), r"method must be 'auto', 'frontier', 'dense', 'exact'; got 'simplex'"),
    (dict(capacity=[1.0 + 1j, 1.0]), r"capacity must be real numbers, got complex"),
    (dict(weights=["a", 1.0, 1.0]), r"weights must be real numbers"),
    (dict(capacity=[1e39, 1.0], dtype="float32"), r"capacity\[0\] must be at most .* with dtype='float32'"),
    (dict(demands=[1.0, 1e39, INF], dtype="float32"), r"demands\[1\] must be at most .* dtype='float32'"),
    (dict(weights=[1e-40, 1.0, 1.0], dtype="float32"), r"weights\[0\] must be in .* dtype='float32'"),
    (dict(weights=[1e39, 1.0, 1.0], dtype="float32"), r"weights\[0\] must be in .* dtype='float32'"),
    (dict(weights=[1.0, 2e37, 2e37], dtype="float32"), r"weights: the flows on link 1 sum to 4e\+37, more than dtype=.float32."),
    (dict(capacity=[1e30, 1.0], weights=[1e-10, 1.0, 1.0], dtype="float32"),
     r"dtype='float32' cannot hold the levels .* use dtype='float64'"),
    # subnormal capacities and caps: XLA flushes them to zero (rates 0, status ok, where the exact
    # answer is 5e-311 and 5e-311 for capacity 1e-310 shared by two flows)
    (dict(capacity=[1e-310, 1.0]), r"capacity\[0\] must be 0 or at least 2.23e-308 bytes/s with dtype='float64'"),
    (dict(demands=[1.0, 1e-320, INF]), r"demands\[1\] must be 0 or at least"),
    (dict(capacity=[1e-44, 1.0], dtype="float32"), r"capacity\[0\] must be 0 or at least 1.18e-38"),
    # subnormal weights: flushed to zero, a level divided by 0 (NaN rates, status ok; the answer
    # is scale-free: 1e-310 and 3e-310 share a link as 1 and 3 do)
    (dict(weights=[1e-310, 3e-310, 1.0]), r"weights\[0\] must be in 2.23e-308 \.\.\. 1.12e\+307"),
    (dict(weights=[1.0, 1e308, 1.0]), r"weights\[1\] must be in 2.23e-308"),
])
def test_bad_input_raises_before_tracing(kwargs, match):
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    kwargs.setdefault("capacity", [1.0, 1.0])
    before = trace_count()
    with pytest.raises(ValueError, match=match):
        max_min_fair(A, **kwargs)
    assert trace_count() == before


def test_bad_matrices():
    with pytest.raises(ValueError, match="fractions must be finite numbers >= 0 .the matrix has negative entries"):
        max_min_fair(sp.csc_matrix(np.array([[1.0, -0.5]])), [1.0])
    with pytest.raises(ValueError, match="NaN or inf"):
        max_min_fair(sp.csc_matrix(np.array([[1.0, np.nan]])), [1.0])
    with pytest.raises(ValueError, match="routing fractions must be real numbers"):
        max_min_fair(sp.csc_matrix(np.array([[1.0 + 1j, 1.0]])), [1.0])
    with pytest.raises(ValueError, match="routing must be a RoutingMatrix or a scipy.sparse"):
        max_min_fair(np.ones((2, 2)), [1.0, 1.0])


# ------------------------------------------------------------------ random instances
def instance(seed, max_links=6, max_flows=9):
    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, max_links + 1))
    N = int(rng.integers(1, max_flows + 1))
    mask = rng.random((L, N)) < 0.5
    fracs = rng.choice([0.25, 0.5, 1.0, 1.0, 2.0], size=(L, N)) * rng.uniform(0.5, 1.0, (L, N)) ** rng.integers(0, 2, (L, N))
    A = np.where(mask, fracs, 0.0)
    cap = rng.uniform(0.5, 100.0, L)
    cap[rng.random(L) < 0.15] = 0.0
    w = rng.uniform(0.1, 10.0, N)
    d = np.where(rng.random(N) < 0.3, rng.uniform(0.1, 50.0, N), INF)
    empty = ~(A > 0).any(axis=0)
    d[empty & np.isinf(d)] = rng.uniform(0.1, 50.0, int((empty & np.isinf(d)).sum()))
    return A, cap, w, d


seeds = st.integers(0, 2**32 - 1)
prop = settings(deadline=None)          # examples: the hypothesis profile (conftest.py)


methods = pytest.mark.parametrize("method", ["dense", "frontier"])


@methods
@prop
@given(seed=seeds)
def test_agrees_with_progressive_filling(seed, method):
    A, cap, w, d = instance(seed)
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method)
    assert bool(a.converged)
    np.testing.assert_allclose(rates(a), progressive_filling(A, cap, w, d), rtol=1e-9, atol=1e-9)


@methods
@prop
@given(seed=seeds)
def test_feasible_and_bottleneck_characterisation(seed, method):
    A, cap, w, d = instance(seed)
    a = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method)
    x = rates(a)
    np.testing.assert_allclose(np.asarray(a.link_load), A @ x, rtol=1e-9, atol=1e-12)
    assert_max_min_fair(A, cap, w, d, x, a.bottleneck)


@methods
@prop
@given(seed=seeds)
def test_permuting_flows_and_links_permutes_rates(seed, method):
    A, cap, w, d = instance(seed)
    rng = np.random.default_rng(seed + 1)
    pf, pl = rng.permutation(A.shape[1]), rng.permutation(A.shape[0])
    base = rates(max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method))
    perm = rates(max_min_fair(sp.csc_matrix(A[pl][:, pf]), cap[pl], weights=w[pf], demands=d[pf], method=method))
    np.testing.assert_allclose(perm, base[pf], rtol=1e-9, atol=1e-12)


@methods
@prop
@given(seed=seeds, s=st.sampled_from([1e-3, 0.5, 7.0, 4e10]))
def test_scaling_capacities_and_caps_scales_rates(seed, s, method):
    A, cap, w, d = instance(seed)
    base = rates(max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method))
    scaled = rates(max_min_fair(sp.csc_matrix(A), cap * s, weights=w, demands=d * s, method=method))
    np.testing.assert_allclose(scaled, base * s, rtol=1e-9, atol=1e-12 * s)


@prop
@given(seeds)
def test_merging_identical_flows_leaves_rates_unchanged(seed):
    A, cap, w, d = instance(seed)
    rng = np.random.default_rng(seed + 2)
    dup = rng.integers(0, A.shape[1], 4)
    A2 = np.concatenate([A, A[:, dup]], axis=1)
    w2, d2 = np.concatenate([w, w[dup]]), np.concatenate([d, d[dup]])
    rm = fs.RoutingMatrix.from_scipy(sp.csc_matrix(A2), cap, weights=w2, demands=d2)
    plain = rates(max_min_fair(rm))
    m = rm.merge_identical()
    assert m.routing.n_flows <= A.shape[1]          # the duplicates really were merged
    merged = rates(max_min_fair(m))
    np.testing.assert_allclose(merged, plain, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(plain[A.shape[1]:], plain[dup], rtol=1e-12)
    np.testing.assert_allclose(plain, progressive_filling(A2, cap, w2, d2), rtol=1e-9, atol=1e-9)


@methods
@prop
@given(seed=seeds)
def test_float32_agrees_with_float64(seed, method):
    A, cap, w, d = instance(seed)
    r64 = rates(max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method))
    a32 = max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, dtype="float32", method=method)
    assert a32.rates.dtype == np.float32
    np.testing.assert_allclose(rates(a32), r64, rtol=1e-4, atol=1e-6 * max(1.0, r64.max()))


@methods
def test_max_rounds_is_never_overshot(method):
    # link i carries flows i .. L-1 with capacity (L - i) 2^(L-i): the last link freezes
    # first, and each freeze makes the next link the only local minimum (L rounds)
    L = 12
    A = np.triu(np.ones((L, L)))
    cap = (L - np.arange(L)) * 2.0 ** (L - np.arange(L))
    full = max_min_fair(sp.csc_matrix(A), cap, method=method)
    assert int(full.rounds) == L and int(full.status) == 0
    a = max_min_fair(sp.csc_matrix(A), cap, method=method, max_rounds=5, inner_rounds=4)
    assert int(a.rounds) == 5 and int(a.status) == 1 and not bool(a.converged)


# ------------------------------------------------------------------ routing matrices, batches
def test_solves_a_routed_cluster_like_the_oracle():
    g = tp.leaf_spine(4, 2, 4, oversubscription=2)
    flows = Flows.random_pairs(16, 60, 1.0, seed=3, )
    rm = route(g, flows, policy="ecmp_hash", subflows=2)
    a = max_min_fair(rm)
    np.testing.assert_allclose(rates(a), progressive_filling(rm.to_scipy(), rm.capacity), rtol=1e-9)
    assert np.asarray(a.utilization).max() == pytest.approx(1.0)


def test_permutation_on_a_nonblocking_fat_tree_runs_at_line_rate():
    g = tp.fat_tree(4)
    a = max_min_fair(route(g, Flows.permutation(16, seed=1)))
    np.testing.assert_allclose(rates(a), 50e9, rtol=1e-12)    # every NIC link of NDR


def test_batch_equals_one_by_one_and_is_sharded_over_devices(monkeypatch):
    from flowsolver.solver import _batch

    sharded = []                 # the device tuples a batch was split over (none with one device)
    real = _batch._batch_sharded
    monkeypatch.setattr(_batch, "_batch_sharded", lambda devices, *a: sharded.append(devices) or real(devices, *a))
    g = tp.fat_tree(4)
    rm = route(g, Flows.all_to_all(16, 1.0), policy="ecmp_hash", seed=2)
    rng = np.random.default_rng(0)
    B = 6
    caps = np.tile(rm.capacity, (B, 1))
    for b in range(1, B):
        caps[b, rng.choice(rm.n_links, 3, replace=False)] = 0.0    # failures
    demands = np.full((B, rm.n_flows), np.inf)
    demands[2, :10] = 1e9
    batch = max_min_fair(rm, caps, demands=demands)
    assert batch.rates.shape == (B, rm.n_flows) and list(np.asarray(batch.status)) == [0] * B
    for b in range(B):
        one = max_min_fair(rm, caps[b], demands=demands[b])
        np.testing.assert_allclose(np.asarray(batch.rates[b]), rates(one), rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(batch.bottleneck[b]), np.asarray(one.bottleneck))
    assert all(len(devices) > 1 for devices in sharded)
    if jax.default_backend() == "cpu":     # conftest: four fake CPU devices, so the batch was split
        assert sharded and len(sharded[0]) == len(jax.devices()) == 4


def test_same_bucket_does_not_recompile_and_another_bucket_does():
    A1 = sp.random(20, 30, density=0.2, random_state=1, format="csc") + sp.eye(20, 30, format="csc")
    A2 = sp.random(21, 29, density=0.2, random_state=2, format="csc") + sp.eye(21, 29, format="csc")
    sizes = lambda A: [bucket_size(n + 1) for n in (*A.shape, A.shape[1], A.nnz)]  # noqa: E731
    assert sizes(A1) == sizes(A2)
    max_min_fair(A1, np.ones(20))
    before = trace_count()
    max_min_fair(A2, np.full(21, 3.0), weights=np.linspace(1, 2, 29))
    assert trace_count() == before
    A3 = sp.random(200, 300, density=0.05, random_state=3, format="csc") + sp.eye(200, 300, format="csc")
    max_min_fair(A3, np.ones(200))
    assert trace_count() == before + 1


def test_bucket_sizes_follow_the_ladder_and_refuse_what_is_not_a_count():
    # 2^k or 1.5 x 2^k from the minimum below 4096, then 5/8 .. 8/8 of 2^k (by hand)
    assert [bucket_size(n) for n in (0, 16, 17, 33, 49, 4096, 4097, 6000)] == [16, 16, 24, 48, 64, 4096, 5120, 6144]
    assert bucket_size(np.int64(100), minimum=np.int32(200)) == 256
    for bad in (float("nan"), -1, 2.5, 3.0, True, "8"):
        with pytest.raises(ValueError, match="n must be an integer >= 0"):
            bucket_size(bad)
    with pytest.raises(ValueError, match="minimum must be an integer >= 1"):
        bucket_size(8, minimum=0)


def test_small_problems_of_different_sizes_and_path_lengths_share_one_compiled_kernel():
    # every size below 128 items pads to 128 and every flow to 4 segment slots (kernel_bucket):
    # links, flows, segments and entries of 5-120, paths of 1-3 links, one compile
    max_min_fair(sp.identity(5, format="csc"), np.ones(5))
    before = trace_count()
    rng = np.random.default_rng(7)
    for n, hops in ((12, 1), (60, 2), (40, 3)):            # at most 120 entries
        A = np.zeros((n, n))
        for f in range(n):
            A[rng.choice(n, hops, replace=False), f] = 1.0
        cap = rng.uniform(1.0, 3.0, n)
        a = max_min_fair(sp.csc_matrix(A), cap)
        np.testing.assert_allclose(rates(a), progressive_filling(A, cap), rtol=1e-12)
    assert trace_count() == before


def test_merged_routing_input_expands_rates():
    g = tp.rail_optimized(4)
    rm = route(g, Flows.concat([Flows.ring(32, 1e6)] * 3))
    np.testing.assert_allclose(rates(max_min_fair(rm.merge_identical())), rates(max_min_fair(rm)), rtol=1e-12)


def test_host_compaction_gives_the_same_allocation(monkeypatch):
    g = tp.rail_optimized(8)
    rm = route(g, Flows.all_to_all(64, 1.0), policy="ecmp_hash", subflows=2)
    plain = max_min_fair(rm, compact=False)
    monkeypatch.setattr(_dense, "COMPACT_FLOWS", 64)     # compact this small problem too
    compacted = max_min_fair(rm, compact=True)
    np.testing.assert_allclose(rates(compacted), rates(plain), rtol=1e-12)
    np.testing.assert_allclose(compacted.link_load, plain.link_load, rtol=1e-12)
    np.testing.assert_array_equal(compacted.bottleneck, plain.bottleneck)
    assert int(compacted.rounds) == int(plain.rounds) and bool(compacted.converged)
    np.testing.assert_allclose(rates(plain), progressive_filling(rm.to_scipy(), rm.capacity), rtol=1e-9)


def test_one_problem_split_over_devices_gives_the_same_allocation(monkeypatch):
    g = tp.rail_optimized(8)
    rm = route(g, Flows.all_to_all(64, 1.0), policy="ecmp_hash")
    one = max_min_fair(rm, compact=False)            # below SHARD_FLOWS: one device
    monkeypatch.setattr(_dense, "SHARD_FLOWS", 100)   # now split over the 4 test devices
    monkeypatch.setattr(_dense, "COMPACT_FLOWS", 500)
    split = max_min_fair(rm)
    np.testing.assert_allclose(rates(split), rates(one), rtol=1e-12)
    np.testing.assert_allclose(split.link_load, one.link_load, rtol=1e-12)
    np.testing.assert_array_equal(split.bottleneck, one.bottleneck)
    assert int(split.rounds) == int(one.rounds) and bool(split.converged)


def test_padding_is_spread_over_the_padding_links_and_segments():
    # every padding entry used to point to one link and every padding slot to one segment:
    # on fat_tree(8) 2,782 entries onto one link, each an update of one address in every
    # scatter of a round (serialised on a GPU). Spread evenly, no padding link holds more
    # than ceil(padding entries / padding links), no padding segment more than its share of
    # the padding slots and entries, and the rates stay progressive filling's
    from flowsolver.solver._problem import CompactRouting
    rm = route(tp.fat_tree(8), Flows.all_to_all(128, 1.0), policy="ecmp_hash")
    seg = CompactRouting.of(rm)
    Lp, Np, Sp, Ep = sizes = seg.buckets(rm.n_links)
    link, entry_seg, frac, slot_seg, _ = seg.padded(sizes, rm.n_links)
    real_entries = int(np.count_nonzero(rm.seg_frac > 0))
    n_segs = len(rm.seg_ptr) - 1
    pad_entries, pad_links, pad_segs = Ep - real_entries, Lp - rm.n_links, Sp - n_segs
    assert pad_entries > 1000 and np.all(frac[real_entries:] == 0)
    per_link = np.bincount(link[real_entries:], minlength=Lp)
    assert per_link[:rm.n_links].sum() == 0 and per_link.max() == -(-pad_entries // pad_links)
    assert np.all(np.diff(entry_seg) >= 0)                  # entries stay sorted by segment
    assert entry_seg[real_entries:].min() >= n_segs
    slots = slot_seg.ravel()
    pad_slots = slots[slots >= n_segs]
    assert len(pad_slots) == slot_seg.size - int(np.count_nonzero(rm.flow_seg >= 0))
    assert np.bincount(pad_slots).max() == -(-len(pad_slots) // pad_segs)
    np.testing.assert_allclose(rates(max_min_fair(rm, method="dense")), progressive_filling(rm.to_scipy(), rm.capacity),
                               rtol=1e-9)


def _by_hand(**changes):
    base = dict(seg_ptr=np.array([0, 1, 2]), seg_link=np.array([0, 1], np.int32), seg_frac=np.array([1.0, 1.0]),
                flow_seg=np.array([[0], [1]], np.int32), flow_coef=None, capacity=np.array([1.0, 1.0]),
                weights=np.ones(2), demands=np.full(2, np.inf))
    return RoutingMatrix(**{**base, **changes})


@pytest.mark.parametrize("changes, says", [
    (dict(seg_link=np.array([0, 7], np.int32)), "seg_link must be link indices in 0 ... 1"),
    (dict(flow_seg=np.array([[0], [5]], np.int32)), "flow_seg must be segment indices in -1 ... 1"),
    (dict(seg_ptr=np.array([0, 2, 1])), "seg_ptr must rise from 0"),
    (dict(flow_coef=np.array([[1.0], [-1.0]])), "flow_coef must be None or finite coefficients >= 0"),
    (dict(seg_frac=np.array([1.0, np.nan])), "seg_frac must be finite fractions >= 0"),
    (dict(seg_link=np.array([1.7, 1.0])), "seg_link must be an integer array, got dtype float64"),
    (dict(flow_seg=np.array([[0.0], [1.0]])), "flow_seg must be an integer array"),
])
@pytest.mark.parametrize("method", ["dense", "frontier", "auto"])
def test_a_routing_matrix_built_by_hand_is_checked(changes, says, method):
    # a link index past the capacities came back as an infinite rate with status ok (dense),
    # an AssertionError (frontier); a negative coefficient counted as 0
    assert max_min_fair(_by_hand(), method=method).rates.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=f"routing: .*{re.escape(says)}"):
        max_min_fair(_by_hand(**changes), method=method)


def test_bad_capacity_shapes_and_dtypes_name_the_parameter():
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    with pytest.raises(ValueError, match="capacity must be a rectangular array"):
        max_min_fair(A, [[1.0, 1.0], [1.0]])
    with pytest.raises(ValueError, match="dtype must be 'float32' or 'float64', got 'foo'"):
        max_min_fair(A, [1.0, 1.0], dtype="foo")
    from flowsolver.solver import fair_rates
    with pytest.raises(ValueError, match=r"capacity: fair_rates solves one scenario \(shape \(2,\)"):
        fair_rates(A, np.array([[3.0, 1.0], [1.0, 3.0]]))
