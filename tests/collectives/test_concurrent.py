"""Collectives run together on one fabric: event by event and in lockstep."""

import math

import pytest

import topologies as tp
from flowsolver import collective, concurrent
from flowsolver._status import Status

from .test_collectives import ALPHA, formula, single_switch

B = 50e9        # link bandwidth of the hand-built switch, bytes/s


def test_concurrent_collectives_share_the_fabric():
    g = single_switch(8)
    n = 2**30
    ar = lambda ranks: dict(op="all_reduce", size=n, ranks=ranks, algorithm="ring")  # noqa: E731
    kw = dict(step_latency=ALPHA, base_latency=0.0)
    # disjoint GPUs on a non-blocking switch: neither slows the other
    apart = concurrent(g, [ar(range(4)), ar(range(4, 8))], **kw)
    assert apart.slowdown == pytest.approx((1.0, 1.0), rel=1e-9)
    assert apart.alone[0] == pytest.approx(formula("all_reduce", "ring", 4, n), rel=1e-9)
    # the same GPUs twice: every link is shared by two equal flows, transfers take twice as
    # long, latencies overlap: 2(p-1) alpha + 2 x 2(p-1)/p n beta
    same = concurrent(g, [ar(range(8)), ar(range(8))], **kw)
    expect = 2 * 7 * ALPHA + 2 * (2 * 7 / 8 * n / B)
    assert same.together[0] == pytest.approx(expect, rel=1e-9)
    assert same.slowdown[0] == pytest.approx(expect / formula("all_reduce", "ring", 8, n), rel=1e-9)
    with pytest.raises(ValueError, match="each collective needs 'op' and 'size'"):
        concurrent(g, [dict(op="all_reduce")])
    # a tuple or a string was handed to dict(): "dictionary update sequence element #0 ..."
    with pytest.raises(ValueError, match=r"list of dicts with 'op' and 'size' .* got an item \('all_reduce', 1024\)"):
        concurrent(g, [("all_reduce", 1024)])
    for bad in ("all_reduce", dict(op="all_reduce", size=1024), []):
        with pytest.raises(ValueError, match="collectives must be a non-empty list of dicts, got"):
            concurrent(g, bad)


def test_lockstep_groups_equal_their_event_driven_run_on_disjoint_servers():
    # one ring per server: in lockstep or event by event the groups never meet, so both
    # equal the collective alone; the bottleneck is the slowest step's, an NVLink
    g = tp.rail_optimized(nodes=2)
    groups = [dict(op="all_reduce", size=2**26, ranks=range(8), algorithm="ring"),
              dict(op="all_reduce", size=2**26, ranks=range(8, 16), algorithm="ring")]
    # lockstep groups are one collective of the merged steps, timed by NCCL's cost model as
    # collective() is; the event engine prices steps with per-step latencies, so the two
    # schedules are compared under one fixed step latency (NCCL's model off)
    alone = collective(g, "all_reduce", 2**26, ranks=range(8), algorithm="ring").time
    lock = concurrent(g, groups, lockstep=True)
    assert lock.together == pytest.approx((alone, alone), rel=1e-9) and lock.alone[0] == pytest.approx(alone)
    fixed = dict(step_latency=5e-6)
    alone = collective(g, "all_reduce", 2**26, ranks=range(8), algorithm="ring", **fixed).time
    free = concurrent(g, groups, **fixed)
    assert concurrent(g, groups, lockstep=True, **fixed).together == pytest.approx((alone, alone), rel=1e-9)
    assert free.together == pytest.approx((alone, alone), rel=1e-9)
    assert lock.status == free.status == Status.OK
    assert lock.bottleneck_tier == free.bottleneck_tier == "nvlink"
    assert all(b.tier == "nvlink" and 0 < b.utilization <= 1 + 1e-9 for b in free.bottleneck)


def test_concurrent_collectives_on_a_failed_link_cannot_progress(monkeypatch):
    # routing never uses a failed link (and efficiency 0 is refused), so fail them all at
    # timing: every link's effective capacity 0
    from flowsolver.routing import LinkTable

    monkeypatch.setattr(LinkTable, "effective_capacity", lambda self, efficiency=None: self.capacity * 0.0)
    with pytest.raises(ValueError, match="can make no progress"):
        concurrent(single_switch(4), [dict(op="all_reduce", size=2**20, ranks=range(4), algorithm="ring")],
                   alone=False)


def test_lockstep_groups_equal_the_event_driven_run():
    g = tp.rail_optimized(4)
    groups = [dict(op="all_reduce", size=2**28, ranks=[j + 8 * s for s in range(4)], algorithm="ring")
              for j in range(8)]
    events = concurrent(g, groups, step_latency=5e-6)          # one cost model for both schedules
    lock = concurrent(g, groups, lockstep=True, step_latency=5e-6)
    assert lock.makespan == pytest.approx(events.makespan, rel=1e-6)
    assert lock.alone == pytest.approx(events.alone, rel=1e-9)
    with pytest.raises(ValueError, match="lockstep=True needs collectives with one op, size"):
        concurrent(g, [groups[0], dict(groups[1], size=2**20)], lockstep=True)
    assert math.isnan(concurrent(g, groups[:2], alone=False).alone[0])


def test_kinds_solved_together_equal_each_kind_solved_alone():
    """concurrent_kinds: several kinds of lockstep groups, their steps solved in one call,
    give each kind's concurrent(..., lockstep=True) result (time, algorithm, bottleneck)."""
    from flowsolver.collectives import concurrent_kinds

    g = tp.rail_optimized(nodes=4)
    kinds = [[dict(op="reduce_scatter", size=2**22, ranks=range(s * 8, s * 8 + 8)) for s in range(4)],
             [dict(op="all_reduce", size=2**26, ranks=range(r, 32, 8), algorithm="ring") for r in range(8)],
             [dict(op="send_recv", size=2**20, ranks=(r, r + 16)) for r in range(16)]]
    together = concurrent_kinds(g, kinds)
    for kind, res in zip(kinds, together):
        alone = concurrent(g, kind, lockstep=True, alone=False)
        assert res.makespan == pytest.approx(alone.makespan, rel=1e-12)
        assert res.algorithms == alone.algorithms
        assert [b.index for b in res.bottleneck] == [b.index for b in alone.bottleneck]
    with pytest.raises(ValueError, match="kinds must be a non-empty list"):
        concurrent_kinds(g, [])


def test_a_training_step_solves_its_collectives_in_two_batched_calls(monkeypatch):
    """Every parallelism's collective in one call, the all-gathers after the
    reduce-scatters in a second (their algorithm is the reduce-scatter's choice)."""
    import flowsolver.collectives._collective as coll

    calls = []
    real = coll.time_many
    monkeypatch.setattr(coll, "time_many", lambda graph, jobs, *a: calls.append(len(jobs)) or real(graph, jobs, *a))
    from flowsolver import training_step

    r = training_step(tp.rail_optimized(nodes=4), model="llama-3-8b", tp=8, pp=2, dp=2)
    assert set(r.phases) == {"tp", "pp", "dp"}
    assert calls == [3, 2]          # tp, pp, dp together; then tp's and dp's all-gathers


def test_auto_is_nccl_s_choice_as_collective_makes_it():
    # NCCL runs no halving-doubling: one reduce-scatter alone picks what collective() picks
    g = tp.rail_optimized(nodes=4)
    job = dict(op="reduce_scatter", size=2**28, ranks=[1, 21, 22, 23])
    assert concurrent(g, [job]).algorithms == (collective(g, **job).algorithm,) == ("ring",)


def test_auto_may_pick_an_algorithm_timed_from_the_ring_s_flows():
    # NVLSTree has no steps of its own (NCCL's cost model times it): the event engine runs the ring's
    r = concurrent(tp.rail_optimized(nodes=2), [dict(op="all_reduce", size=2**26)])
    assert r.algorithms == ("nvls_tree",) and 0 < r.together[0] < 1e-2


def test_a_sends_floor_keeps_the_times_numbers():
    # the send's P2P floor added a one-element array to alone, together and makespan (review)
    g = tp.rail_optimized(2)
    r = concurrent(g, [dict(op="send_recv", size=2**30, ranks=[0, 8]), dict(op="all_reduce", size=2**20,
                                                                           ranks=list(range(1, 8)))])
    assert all(type(t) is float for t in (*r.alone, *r.together, r.makespan))


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_lockstep_chains_pay_each_groups_own_channel(op):
    # group A on one server, B over two: lockstep(A, B) kept A's latency flows only (28 us)
    # where B alone takes 39 us (one channel); either order now takes B's
    g = tp.rail_optimized(3)
    A, B = list(range(8)), [8, 9, 10, 11, 16, 17, 18, 19]
    spec = lambda r: dict(op=op, size=8, ranks=r, algorithm="ring", channels=1)  # noqa: E731
    alone_b = concurrent(g, [spec(B)], base_latency=0.0).together[0]
    for order in ((A, B), (B, A)):
        r = concurrent(g, [spec(x) for x in order], lockstep=True, base_latency=0.0)
        assert max(r.together) == pytest.approx(alone_b, rel=1e-9)


@pytest.mark.parametrize("size", [2 ** 10, 2 ** 20, 2 ** 28])
def test_lockstep_groups_nccl_sees_unlike_take_the_slowest_groups_time(size):
    # 2 x 4 GPUs (servers 0 and 1) beside 1 x 8 (server 2): no link shared, so in lockstep the
    # step waits for the slower group, each timed with NCCL's view of its own ranks (nodes,
    # GPUs a node): the slower of the two alone, whichever group comes first (before: the
    # first group's view timed both, 2 x 4 second at 1 KiB got the 1 x 8's time)
    # (at 256 MiB the slower group's steps set the merged solve's transfer, which the faster
    # group's view then prices with its own constants: 4 % above, said in concurrent's docstring)
    g = tp.rail_optimized(3)
    a, b = [*range(0, 4), *range(8, 12)], list(range(16, 24))
    alone = max(collective(g, "all_reduce", size, ranks=r, algorithm="ring", protocol="Simple").time for r in (a, b))
    times = [concurrent(g, [dict(op="all_reduce", size=size, ranks=x, algorithm="ring") for x in groups],
                        lockstep=True, protocol="Simple").together[0] for groups in ((a, b), (b, a))]
    assert times[0] == times[1] and times[0] >= alone * (1 - 1e-9)
    if size <= 2 ** 20:
        assert times[0] == pytest.approx(alone, rel=1e-9)


def test_lockstep_auto_picks_only_what_every_group_runs():
    # NVLSTree runs on the 2 x 4 group only (1 x 8 is one node): auto in lockstep picked it from
    # the first group's view and then failed timing the 1 x 8 group alone
    g = tp.rail_optimized(3)
    a, b = [*range(0, 4), *range(8, 12)], list(range(16, 24))
    r = concurrent(g, [dict(op="all_reduce", size=2 ** 28, ranks=x) for x in (a, b)], lockstep=True)
    assert r.lockstep.algorithm not in ("nvls", "nvls_tree") and r.together[0] > 0


def test_lockstep_refuses_schedules_that_do_not_align_and_auto_skips_them():
    # a tree over 2 x 4 GPUs has 15 steps, over 1 x 8 11: merged step for step, the longer
    # group's last 4 steps were dropped and the first group's repetition counts used for both
    # (4,526 against 8,274 us by the order of the groups, at 256 MiB)
    g = tp.rail_optimized(3)
    a, b = [*range(0, 4), *range(8, 12)], list(range(16, 24))
    with pytest.raises(ValueError, match="algorithm 'tree' runs a different schedule on groups laid out unlike"):
        concurrent(g, [dict(op="all_reduce", size=2 ** 28, ranks=r, algorithm="tree") for r in (a, b)],
                   lockstep=True)
    for size in (2 ** 22, 2 ** 24):
        one, other = (concurrent(g, [dict(op="all_reduce", size=size, ranks=r) for r in groups], lockstep=True,
                                 alone=False) for groups in ((a, b), (b, a)))
        assert one.makespan == other.makespan and one.lockstep.algorithm != "tree"


def test_a_protocol_broadcast_does_not_model_is_refused_under_auto_too():
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match="protocol for broadcast must be 'auto' or 'Simple', got 'LL'"):
        concurrent(g, [dict(op="broadcast", size=2 ** 30)], protocol="LL")


@pytest.mark.parametrize("size, protocols", [(2 ** 20, ["LL", "Simple"]), (2 ** 24, ["LL", "LL128"])])
def test_auto_chooses_among_the_protocols_a_list_allows(size, protocols):
    # NCCL_PROTO=LL,Simple (or LL,LL128): NCCL chooses among those protocols only. Across two
    # DGX H100 its free pick is tree/LL128 at 1 MiB and NVLSTree/Simple at 16 MiB; NVLS and
    # NVLSTree run Simple only (NCCL's tuning.cc), so LL,LL128 rules NVLSTree out and
    # LL,Simple rules tree/LL128 out: the allowed list moves the pick, which must then be
    # collective()'s with the same list (the choice concurrent's "auto" is documented to make)
    g = tp.rail_optimized(2)
    free = collective(g, "all_reduce", size)
    limited = collective(g, "all_reduce", size, protocol=protocols)
    assert free.protocol not in protocols and limited.algorithm != free.algorithm
    if "Simple" not in protocols:
        assert not limited.algorithm.startswith("nvls")
    r = concurrent(g, [dict(op="all_reduce", size=size)], protocol=protocols, alone=False)
    assert r.algorithms == (limited.algorithm,)
    # one name keeps the engine's constants and NCCL's free choice (concurrent's default Simple)
    assert concurrent(g, [dict(op="all_reduce", size=size)], alone=False).algorithms == (free.algorithm,)


def test_a_jobs_protocol_leaves_its_sends_to_simple_as_nccl_does():
    """NCCL_PROTO governs the collectives, not the sends (src/enqueue.cc addP2pToPlan: Simple,
    LL only for small parts inside a node): a job run with LL (a training step's
    collective_options) times its pipeline sends and expert all-to-alls as with Simple,
    where a single collective() call asking LL of a send is refused."""
    g = tp.rail_optimized(2)
    for op in ("send_recv", "all_to_all"):
        spec = [dict(op=op, size=2 ** 26, ranks=[0, 8])]
        ll, simple = concurrent(g, spec, protocol="LL"), concurrent(g, spec, protocol="Simple")
        assert ll.makespan == simple.makespan, op
        with pytest.raises(ValueError, match=f"protocol for {op} must be"):
            collective(g, op, 2 ** 26, ranks=[0, 8], protocol="LL")
    # a training step with LL for its collectives runs (its PP sends as Simple)
    from flowsolver import Parallelism, Schedule, training_step
    r = training_step(g, "llama-3-8b", Parallelism(tp=8, pp=2), Schedule(global_batch=16),
                      collective_options={"protocol": "LL"})
    assert math.isfinite(r.step_time)


def test_an_all_to_alls_channels_bound_it_in_concurrent_as_in_collective():
    """One P2P channel (channels=1) on 2 x 8 H100: the all-to-all's channels bind, in
    concurrent() alone as in collective() (concurrent gave the flow solve's 11.5 ms against
    collective()'s 60.6 ms: it put no channel floor on an all-to-all)."""
    g = tp.rail_optimized(2)
    one = collective(g, "all_to_all", 2 ** 30, channels=1)
    alone = concurrent(g, [dict(op="all_to_all", size=2 ** 30, channels=1)])
    assert alone.alone[0] == pytest.approx(one.time, rel=0.02)
