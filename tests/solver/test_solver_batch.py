"""Batched solves: scenarios as one problem of disjoint copies, links no flow crosses left out,
batches in chunks that fit, memory per scenario (issue 31)."""

import numpy as np
import pytest
import scipy.sparse as sp

import jax
import jax.numpy as jnp

from flowsolver import Status, max_min_fair
from flowsolver.solver import _batch
from flowsolver.solver._problem import CompactRouting

from ..oracle import assert_max_min_fair, progressive_filling


def _network(seed, links=14, flows=20, unused=(3, 9)):
    """Random paths of 1-3 links over ``links`` links, none of which crosses ``unused``."""
    rng = np.random.default_rng(seed)
    allowed = np.setdiff1d(np.arange(links), unused)
    A = np.zeros((links, flows))
    for f in range(flows):
        A[rng.choice(allowed, rng.integers(1, 4), replace=False), f] = rng.choice([1.0, 0.5, 0.25])
    cap = rng.uniform(1.0, 10.0, links)
    return sp.csc_matrix(A), cap, rng


def test_a_batch_with_unused_and_failed_links_matches_progressive_filling_per_scenario():
    A, cap, rng = _network(0)
    caps = np.tile(cap, (6, 1)) * rng.uniform(0.5, 2.0, (6, 1))
    caps[1, 4] = 0.0                                      # a failed link
    caps[2, [3, 9]] = 0.0                                 # unused links failed: changes nothing
    w = rng.uniform(0.5, 2.0, A.shape[1])
    a = max_min_fair(A, caps, weights=w)
    assert a.rates.shape == (6, A.shape[1]) and a.link_load.shape == (6, A.shape[0])
    for i in range(6):
        np.testing.assert_allclose(a.rates[i], progressive_filling(A, caps[i], w), rtol=1e-12, atol=1e-12)
        # bottlenecks are links of the whole network (not of the kernel's used-links numbering)
        assert_max_min_fair(A, caps[i], w, np.full(A.shape[1], np.inf), a.rates[i], a.bottleneck[i])
        np.testing.assert_allclose(a.link_load[i], A @ a.rates[i], rtol=1e-12, atol=1e-12)
    assert (a.link_load[:, [3, 9]] == 0).all() and a.utilization[2, 3] == 0.0
    # the utilizations laid out on the device are the host's load / capacity, bit for bit
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(caps > 0, a.link_load / np.where(caps > 0, caps, 1.0), 0.0)
    np.testing.assert_array_equal(a.utilization, want)


def test_chunked_batches_equal_one_call(monkeypatch):
    A, cap, rng = _network(1)
    caps = np.tile(cap, (13, 1)) * rng.uniform(0.5, 2.0, (13, A.shape[0]))
    d = np.where(rng.random((13, A.shape[1])) < 0.2, rng.uniform(0.1, 1.0, (13, A.shape[1])), np.inf)
    whole = max_min_fair(A, caps, demands=d)
    structure = CompactRouting.of(max_min_fair.__globals__["_as_routing"](A)[0])
    per = _batch.scenario_elements((16, 32, 32, 64, structure.flow_seg.shape[1], A.shape[0]))
    monkeypatch.setattr(_batch, "CALL_ELEMENTS", per * 4)     # 4 scenarios a call (4 test devices: 1 each)
    calls = []
    real = _batch._batch_sharded if len(jax.devices()) > 1 else None
    if real is not None:
        def counting(*args):
            fn, *shardings = real(*args)
            return (lambda *a: (calls.append(a[5].shape[0]), fn(*a))[1]), *shardings
        monkeypatch.setattr(_batch, "_batch_sharded", counting)
    chunked = max_min_fair(A, caps, demands=d)
    for field in ("rates", "link_load", "bottleneck", "rounds", "status"):
        np.testing.assert_array_equal(getattr(chunked, field), getattr(whole, field))
        assert getattr(whole, field).flags.writeable        # the caller may change what it got
    if real is not None:
        assert len(calls) >= 3 and len(set(calls)) == 1      # several calls of one compiled shape


def test_shared_and_per_scenario_weights_agree():
    A, cap, rng = _network(2)
    caps = np.tile(cap, (5, 1)) * rng.uniform(0.5, 2.0, (5, 1))
    w = rng.uniform(0.5, 2.0, A.shape[1])
    shared = max_min_fair(A, caps, weights=w)
    each = max_min_fair(A, caps, weights=np.tile(w, (5, 1)))
    np.testing.assert_array_equal(shared.rates, each.rates)
    np.testing.assert_array_equal(shared.bottleneck, each.bottleneck)


def test_shared_weights_with_per_scenario_caps_equal_each_scenario_solved_alone():
    # shared, non-unit weights with caps per scenario: a cap's level is d / w exactly (a division by
    # the shared row broadcast was compiled as a product by its reciprocal: rates a rounding above
    # their cap and a tie's bottleneck flipped). Flow 0's cap is its fair share on the one link
    # (a tie; the link is its bottleneck, solved alone); flow 2 crosses no link and is held by
    # its cap, which it must not exceed. 9 scenarios: more than one a device on conftest's 4.
    A = sp.csc_matrix([[1.0, 1.0, 0.0]])
    c, w = 9.826634798211147, np.array([1.625547008945079, 0.9206131369790599, 1.405804486611129])
    d = np.array([c / (w[0] + w[1]) * w[0], np.inf, 0.7])
    caps = np.tile(d, (9, 1))
    caps[1::2, 0] *= 1.5                                  # odd scenarios: flow 0 not capped at its share
    batch = max_min_fair(A, [c], weights=w, demands=caps, method="dense")
    for b in range(9):
        alone = max_min_fair(A, [c], weights=w, demands=caps[b], method="dense")
        np.testing.assert_array_equal(batch.rates[b], alone.rates)
        np.testing.assert_array_equal(batch.bottleneck[b], alone.bottleneck)
    assert (batch.rates[:, 2] == 0.7).all()               # held by its cap, not a rounding above it
    assert (batch.rates[::2, 0] <= d[0]).all()


def test_a_batch_of_no_scenarios_is_an_error_naming_the_parameter():
    A = sp.csc_matrix([[1.0, 1.0]])
    with pytest.raises(ValueError, match=r"capacity: a batch needs at least one scenario.*\(0, 1\)"):
        max_min_fair(A, np.ones((0, 1)), method="dense")
    with pytest.raises(ValueError, match=r"demands: a batch needs at least one scenario"):
        max_min_fair(A, [1.0], demands=np.ones((0, 2)))


def test_a_scenario_whose_only_link_is_infinite_is_unbounded_alone():
    A = sp.csc_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))
    caps = np.array([[2.0, 3.0], [2.0, np.inf]])          # scenario 1: flow 1 crosses no finite link
    a = max_min_fair(A, caps)
    assert list(a.status) == [Status.OK, Status.UNBOUNDED]
    assert a.rates[0].tolist() == [2.0, 3.0] and a.rates[1, 0] == 2.0 and np.isinf(a.rates[1, 1])


def test_a_scenario_larger_than_the_free_memory_is_an_error_naming_the_sizes():
    sizes = (1024, 1536, 2048, 4096, 4)
    with pytest.raises(ValueError, match=r"capacity: one scenario of this batch needs about .* MiB .*1,536 flows"):
        _batch.chunk_size(10, sizes, 1, free=_batch.bytes_per_scenario(sizes) // 2)
    # room for 3 scenarios in half the free memory: chunks of 2 (a power of two)
    assert _batch.chunk_size(10, sizes, 1, free=6 * _batch.bytes_per_scenario(sizes) + 1) == 2
    assert _batch.chunk_size(3, sizes, 2, free=None) == 4        # a multiple of the device count


@pytest.mark.parametrize("shape", [(64, 96, 128, 256, 3, 100), (1024, 1536, 2048, 6144, 6, 4000),
                                   (3072, 1536, 1536, 3072, 3, 7168)])
def test_bytes_per_scenario_bounds_the_compiled_programs_memory(shape):
    """The estimate is at least what XLA's memory analysis of a batched call's three programs
    (the gathers and padding, the kernel, the loads and utilizations on every link) compiled
    for the CPU says they hold per scenario together, and not wildly above it. The last shape
    is a 1024-GPU ring's (7,168 links): the first H200 run's peak was 0.52 MB a scenario. (On
    the H200, 2026-12-04, the small kernel alone held more than the estimate at 32 scenarios:
    the GPU's own figure is what benchmarks/gpu.py reports.)"""
    Lp, Np, Sp, Ep, K, L = shape
    B, N = 32, Np - 1
    i32, f64, b1 = jnp.int32, jnp.float64, jnp.bool_
    on_cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])

    def held(fn, shapes, **static):
        args = [jax.ShapeDtypeStruct(s, d, sharding=on_cpu) for s, d in shapes]
        mem = fn.lower(*args, **static).compile().memory_analysis()
        return mem.temp_size_in_bytes + mem.output_size_in_bytes + mem.argument_size_in_bytes

    with jax.enable_x64(True):
        total = held(_batch._prepare, [((B, L), f64), ((1, N), f64), ((1, N), f64), ((1, N), b1), ((Lp,), i32)],
                     n_links=Lp, n_flows=Np, dtype="float64")
        total += held(_batch._JITTED, [((Ep,), i32), ((Ep,), i32), ((Ep,), f64), ((Np, K), i32), ((1, 1), f64),
                                       ((B, Lp), f64), ((1, Np), f64), ((1, Np), f64), ((B, Np), b1), ((), i32),
                                       ((), i32)], n_links=Lp, n_segs=Sp, inner=1, unit_coef=True)
        total += held(_batch._layout, [((B, Lp), f64), ((B, Lp), f64), ((B, Np), i32), ((B, Np), b1), ((Lp,), i32),
                                       ((L,), i32)], with_util=True)
    per = total / B
    estimate = _batch.bytes_per_scenario(shape)
    assert per <= estimate <= 8 * per, (per, estimate)


def test_the_frontier_reuses_a_matrix_layout_only_for_the_same_weights_and_caps():
    """Solving one RoutingMatrix again with other capacities (the layout kept) and with other
    caps (a new layout) gives progressive filling's rates each time."""
    from flowsolver import RoutingMatrix
    from flowsolver.solver import _frontier

    A, cap, rng = _network(4, links=30, flows=60, unused=())
    rm = RoutingMatrix.from_scipy(A, cap)
    d = np.full(A.shape[1], np.inf)
    for i, (c, dem) in enumerate([(cap, d), (cap * rng.uniform(0.5, 2.0, len(cap)), d),
                                  (cap, np.where(np.arange(len(d)) % 7 == 0, 0.3, np.inf))]):
        a = max_min_fair(rm, c, demands=dem, method="frontier")
        np.testing.assert_allclose(a.rates, progressive_filling(A, c, None, dem), rtol=1e-12, atol=1e-12)
        assert _frontier._LAST.slot[0]() is rm


def test_shared_capacity_with_per_scenario_weights_and_caps_matches_progressive_filling():
    """One capacity row for every scenario (sent once, spread over the devices on the device)
    beside weights and caps that differ per scenario; 7 scenarios: not a multiple of the
    test's 4 devices, so the last call repeats a scenario."""
    A, cap, rng = _network(5)
    w = rng.uniform(0.5, 2.0, (7, A.shape[1]))
    d = np.where(rng.random((7, A.shape[1])) < 0.3, rng.uniform(0.1, 2.0, (7, A.shape[1])), np.inf)
    a = max_min_fair(A, cap, weights=w, demands=d)
    assert a.rates.shape == (7, A.shape[1]) and a.link_load.shape == (7, A.shape[0])
    for i in range(7):
        np.testing.assert_allclose(a.rates[i], progressive_filling(A, cap, w[i], d[i]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.link_load[i], A @ a.rates[i], rtol=1e-12, atol=1e-12)
    assert (a.link_load[:, [3, 9]] == 0).all() and (a.utilization[:, [3, 9]] == 0).all()
    assert a.rates.flags.writeable and a.link_load.flags.writeable     # the caller's own arrays


def test_batches_of_two_routings_in_the_same_buckets_share_the_compiled_kernel():
    """The gathers around the kernel take each routing's own shapes; the kernel takes the
    padded ones, so a batch on another routing of the same buckets does not trace it again."""
    from flowsolver import RoutingMatrix
    from flowsolver.solver import trace_count

    A1 = sp.random(20, 30, density=0.2, random_state=1, format="csc") + sp.eye(20, 30, format="csc")
    A2 = sp.random(21, 29, density=0.2, random_state=2, format="csc") + sp.eye(21, 29, format="csc")
    buckets = [_batch._kernel_links(RoutingMatrix.from_scipy(A))[1].buckets(len(_batch._kernel_links(
        RoutingMatrix.from_scipy(A))[0])) for A in (A1, A2)]
    assert buckets[0] == buckets[1]
    rng = np.random.default_rng(7)
    first = max_min_fair(A1, rng.uniform(1.0, 2.0, (4, 20)))
    before = trace_count()
    caps = rng.uniform(1.0, 2.0, (4, 21))
    second = max_min_fair(A2, caps)
    assert trace_count() == before
    assert first.rates.shape == (4, 30) and second.rates.shape == (4, 29)
    for i in range(4):
        np.testing.assert_allclose(second.rates[i], progressive_filling(A2, caps[i]), rtol=1e-12, atol=1e-12)


def test_a_batch_of_a_small_problem_keeps_the_fine_buckets_and_its_own_slot_width(monkeypatch):
    # a batch's work is its padded size times its scenarios: it is padded on bucket_size's ladder
    # (20 links + 1 -> 24, 30 flows + 1 -> 32), not a single solve's coarse one (128), and its
    # flows keep their one slot (a single solve gives small problems 4)
    from flowsolver.solver import bucket_size

    seen = []
    real = _batch.chunk_size
    monkeypatch.setattr(_batch, "chunk_size", lambda B, sizes, *a: seen.append(sizes) or real(B, sizes, *a))
    A = sp.random(20, 30, density=0.1, random_state=3, format="csc") + sp.csc_matrix(np.eye(20, 30) +
                                                                                      np.eye(20, 30, 10))
    caps = np.random.default_rng(3).uniform(1.0, 2.0, (6, 20))
    batch = max_min_fair(A, caps)
    Lp, Np, Sp, Ep, K, L = seen[0]
    assert (Lp, Np, K, L) == (bucket_size(21), bucket_size(31), 1, 20)
    dense = A.toarray()
    for b in range(6):
        np.testing.assert_allclose(np.asarray(batch.rates[b]), progressive_filling(dense, caps[b]), rtol=1e-12)


def test_a_batch_of_no_flows_is_no_rates_per_scenario():
    # the one-call path read a width of 0 as "do not slice": the padded rows came back, a broadcast error
    a = max_min_fair(sp.csc_matrix((3, 0)), np.ones((2, 3)), method="dense")
    assert a.rates.shape == (2, 0) and a.link_load.shape == (2, 3) and not a.link_load.any()


def test_a_batch_over_no_links_is_each_flow_at_its_cap():
    # an IndexError (a take from an empty axis) where one scenario gives the caps (review)
    a = max_min_fair(sp.csc_matrix((0, 4)), np.ones((2, 0)), demands=np.arange(1.0, 5.0))
    np.testing.assert_array_equal(a.rates, np.tile(np.arange(1.0, 5.0), (2, 1)))
    assert a.status.tolist() == [Status.OK, Status.OK]


@pytest.mark.parametrize("method", ["dense", "frontier", "exact"])
def test_an_unbounded_flows_links_carry_inf(method):
    # scenario 1: flow 2 crosses only link 2, of infinite capacity, and has no cap: UNBOUNDED;
    # link_load is A @ rates there too (inf on link 2); by hand, link 1 (capacity 10) holds flows
    # 0 and 1 at 5 each. Scenario 0: link 0 holds flow 0 at 4, flow 1 takes link 1's other 6
    A = sp.csc_matrix(np.array([[1.0, 0, 0], [1, 1, 0], [0, 0, 1]]))
    o = max_min_fair(A, np.array([[4.0, 10, 3], [np.inf, 10, np.inf]]), method=method)
    assert o.status.tolist() == [Status.OK, Status.UNBOUNDED]
    assert o.rates[1].tolist() == [5.0, 5.0, np.inf]
    assert o.link_load[1].tolist() == [5.0, 10.0, np.inf]
    assert o.link_load[0].tolist() == [4.0, 10.0, 3.0]
