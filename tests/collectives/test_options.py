"""Options of the collective, training and timing entry points: every value outside what an
option allows is a ValueError naming the option and its range, raised before any work (no
routing, no solve); never a negative time or a message about something else."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import topologies as tp
from flowsolver import (RoutingMatrix, collective, collective_variants, completion_times, concurrent,
                        training_step)
from flowsolver.timing import step_times
from flowsolver.collectives import CollectiveOptions, concurrent_kinds


@pytest.fixture(scope="module")
def two_servers():
    return tp.rail_optimized(nodes=2)


@pytest.fixture
def no_work(monkeypatch):
    """Planning a collective (laying out ranks, building steps) fails the test: the checks
    must come first."""
    from flowsolver.collectives import _collective

    def planned(*args, **kwargs):
        raise AssertionError("a collective was planned before its options were checked")

    monkeypatch.setattr(_collective, "_plans", planned)


LATENCY = r"{name} must be None or a finite number of seconds >= 0, got {value}"
BAD_SECONDS = [(-1e-6, r"-1e-06"), (math.nan, "nan"), (math.inf, "inf"), ("1us", "'1us'"), (True, "True")]


def _entry_points(g, **options):
    """Each public way an option reaches a collective, as a call."""
    one = dict(op="all_reduce", size=2**20, ranks=range(8), algorithm="ring")
    return {
        "collective": lambda: collective(g, "all_reduce", 2**20, **options),
        "collective_variants": lambda: collective_variants([g, g], "all_reduce", 2**20, **options),
        "concurrent": lambda: concurrent(g, [one, dict(one, ranks=range(8, 16))], **options),
        "concurrent/lockstep": lambda: concurrent(g, [one, dict(one, ranks=range(8, 16))], lockstep=True, **options),
        "concurrent_kinds": lambda: concurrent_kinds(g, [[one]], **options),
        "training_step": lambda: training_step(g, model="llama-3-8b", tp=8, collective_options=options),
    }


@pytest.mark.parametrize("name", ["step_latency", "base_latency"])
@pytest.mark.parametrize("value,shown", BAD_SECONDS, ids=[s for _, s in BAD_SECONDS])
def test_latency_overrides_are_seconds_at_least_zero(two_servers, no_work, name, value, shown):
    for entry, call in _entry_points(two_servers, **{name: value}).items():
        with pytest.raises(ValueError, match=LATENCY.format(name=name, value=shown)):
            call()


def test_zero_latency_overrides_are_allowed_and_exact(two_servers):
    """0 is a pure bandwidth model: a ring all-reduce on one server is then exactly its
    steps' transfers (2 (p - 1) of them)."""
    r = collective(two_servers, "all_reduce", 2**24, ranks=range(8), algorithm="ring", step_latency=0.0,
                   base_latency=0.0)
    assert r.time == pytest.approx(sum(s.count * s.transfer for s in r.steps), rel=1e-12)
    assert sum(s.count for s in r.steps) == 2 * 7


BAD_EFFICIENCY = [0, 0.0, -0.5, 2.0, 1.0000001, math.nan, math.inf, True]


@pytest.mark.parametrize("value", BAD_EFFICIENCY, ids=map(repr, BAD_EFFICIENCY))
def test_efficiency_is_a_fraction_of_the_link_rate(two_servers, no_work, value):
    for entry, call in _entry_points(two_servers, efficiency=value).items():
        with pytest.raises(ValueError, match=r"efficiency.* must be in \(0, 1\], got|efficiency must be None, a "
                                             r"fraction in \(0, 1\]"):
            call()


def test_efficiency_by_technology_is_a_fraction_too(two_servers, no_work):
    for entry, call in _entry_points(two_servers, efficiency={"ib_ndr": 1.5}).items():
        with pytest.raises(ValueError, match=r"efficiency\['ib_ndr'\] must be in \(0, 1\], got 1.5"):
            call()
    with pytest.raises(ValueError, match="efficiency must be None, a fraction"):
        collective(two_servers, "all_reduce", 2**20, efficiency="0.9")


def test_a_mistyped_technology_is_an_error_listing_the_known_ones(two_servers):
    for entry, call in _entry_points(two_servers, efficiency={"ib_ndrr": 0.9}).items():
        with pytest.raises(ValueError, match=r"efficiency names unknown link technology 'ib_ndrr': the graph's links "
                                             r"are ib_ndr, nvlink4, pcie5; the catalogue's are .*ib_hdr, ib_ndr"):
            call()


def test_a_catalogue_technology_the_graph_lacks_is_allowed(two_servers):
    """One dict for an NDR and an HDR variant: each graph uses its own entry."""
    hdr = tp.rail_optimized(2, link="ib_hdr")
    both = {"ib_ndr": 0.5, "ib_hdr": 0.5}
    ndr_r, hdr_r = collective_variants([two_servers, hdr], "all_to_all", 2**26, efficiency=both)
    ndr_alone = collective(two_servers, "all_to_all", 2**26, efficiency={"ib_ndr": 0.5})
    assert ndr_r.time == pytest.approx(ndr_alone.time, rel=1e-12)
    assert hdr_r.time > ndr_r.time


@pytest.mark.parametrize("options,match", [
    (dict(channels=0), r"channels must be an integer in 1 ... 64, got 0"),
    (dict(channels=65), r"channels must be an integer in 1 ... 64, got 65"),
    (dict(channels=2.5), r"channels must be an integer in 1 ... 64, got 2.5"),
    (dict(pxn="yes"), r"pxn must be True or False, got 'yes'"),
    (dict(policy="ecmpp"), r"policy must be one of ecmp, ecmp_hash"),
    (dict(policy_options=dict(subflow=4)), r"policy_options must be a dict with keys among subflows, seed, pxn"),
    (dict(policy_options=dict(subflows=0)), r"policy_options\['subflows'\] must be an integer >= 1, got 0"),
    (dict(protocol="ll"), r"protocol must be 'auto' or one of LL, LL128, Simple, got 'll'"),
    (dict(chunk=-1), r"chunk must be a finite number of bytes > 0, got -1"),
    (dict(candidates="every"), r"candidates must be 'nccl' or 'all', got 'every'"),
])
def test_other_collective_options_are_checked_first(two_servers, no_work, options, match):
    with pytest.raises(ValueError, match=match):
        collective(two_servers, "all_reduce", 2**20, **options)


def test_training_collective_options_keys_are_checked(two_servers):
    with pytest.raises(ValueError, match=r"collective_options keys must be among policy, .*model, got "
                                         r"\['step_latencyy'\]"):
        training_step(two_servers, model="llama-3-8b", tp=8, collective_options=dict(step_latencyy=1e-6))


def test_concurrent_checks_an_explicit_algorithms_size(two_servers):
    with pytest.raises(ValueError, match=r"size must be a finite number of bytes > 0, got -1"):
        concurrent(two_servers, [dict(op="all_reduce", size=-1, algorithm="ring")])


# --------------------------------------------------------------------------- timing
ONE_LINK = sp.csc_matrix([[1.0, 1.0]])        # two flows on one link


@pytest.mark.parametrize("rtol", [math.nan, -1, 0, 1, 0.5, math.inf, "1e-9", True])
def test_rtol_is_a_small_positive_tolerance(rtol):
    with pytest.raises(ValueError, match=r"rtol must be a number in \(0, 0.01\)"):
        completion_times(ONE_LINK, sizes=[1.0, 3.0], capacity=[2.0], rtol=rtol)
    one = RoutingMatrix.from_scipy([[1.0]], capacity=[1.0])
    with pytest.raises(ValueError, match=r"rtol must be a number in \(0, 0.01\)"):
        step_times([one], sizes=[[1.0]], rtol=rtol)


@pytest.mark.parametrize("max_events", [-1, 0, 1.5, math.nan, "3", True])
def test_max_events_is_a_positive_integer_or_none(max_events):
    with pytest.raises(ValueError, match=r"max_events must be an integer >= 1, got"):
        completion_times(ONE_LINK, sizes=[1.0, 3.0], capacity=[2.0], max_events=max_events)
    one = RoutingMatrix.from_scipy([[1.0]], capacity=[1.0])
    with pytest.raises(ValueError, match=r"max_events must be an integer >= 1, got"):
        step_times([one], sizes=[[1.0]], max_events=max_events)


def test_the_allowed_tolerances_give_the_hand_computed_times():
    """Flows of 1 and 3 bytes on a link of 2 B/s: both at 1 B/s until t = 1, then the second
    alone at 2 B/s for its 2 bytes left: t = 2. A tolerance merges nothing here."""
    for rtol in (1e-15, 1e-9, 0.009):
        c = completion_times(ONE_LINK, sizes=[1.0, 3.0], capacity=[2.0], rtol=rtol, max_events=np.int64(5))
        np.testing.assert_allclose(c.finish, [1.0, 2.0], rtol=1e-12)


@pytest.mark.parametrize("name,value", [("gpus_per_thread", 2), ("host_overhead", 25e-6)])
def test_concurrent_refuses_the_host_options_by_name(two_servers, name, value):
    # they time one call as its host issues it; concurrent collectives are timed without a host
    one = dict(op="all_reduce", size=2**20, ranks=range(8), algorithm="ring")
    with pytest.raises(TypeError, match=rf"concurrent_kinds\(\) got unexpected keyword\(s\) {name}; it takes policy"):
        concurrent_kinds(two_servers, [[one]], **{name: value})
    with pytest.raises(ValueError, match=name):
        concurrent_kinds(two_servers, [[one]], options=CollectiveOptions(**{name: value}))


def test_a_chunk_below_nccls_smallest_is_refused():
    """adv24 F3: the pipeline pays its depth in latencies, not one per chunk, so chunks toward 1 byte
    ran a 64 MiB ring broadcast faster than NCCL's 512 KiB; NCCL pipelines nothing below NVLS's
    16 KiB (v2.19.3-1 enqueue.cc calcCollChunking), the least chunk= takes."""
    import topologies as tp
    from flowsolver import collective
    from flowsolver.collectives._options import MIN_CHUNK

    g = tp.rail_optimized(1)
    assert MIN_CHUNK == 16 * 1024
    with pytest.raises(ValueError, match=r"chunk must be at least 16384 bytes .* got 16383"):
        collective(g, "broadcast", 2**26, chunk=16383)
    assert collective(g, "broadcast", 2**26, chunk=16384).time > 0
