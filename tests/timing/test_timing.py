"""Event-driven completion times against processor-sharing formulas derived by hand."""

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs
import topologies as tp
from flowsolver import Flows, completion_times, route
from flowsolver._status import Status


def test_one_link_processor_sharing():
    # sizes 1, 2, 3 on one link of 1 B/s: all at 1/3 until t = 3, then two at 1/2 for the
    # remaining 1 byte (t = 5), then one at 1 for its last byte (t = 6)
    c = completion_times(sp.csc_matrix(np.ones((1, 3))), sizes=[1.0, 2.0, 3.0], capacity=[1.0])
    np.testing.assert_allclose(c.finish, [3.0, 5.0, 6.0], rtol=1e-12)
    assert c.makespan == pytest.approx(6.0) and int(c.events) == 3


def test_weights_and_release():
    # weights 1 and 2 on a link of 3: rates 1 and 2; flow 1 (2 bytes) ends at 1, then flow 0
    # has 1 byte left at the full 3 B/s: 1 + 1/3
    c = completion_times(sp.csc_matrix(np.ones((1, 2))), sizes=[2.0, 2.0], capacity=[3.0], weights=[1, 2])
    np.testing.assert_allclose(c.finish, [1 + 1 / 3, 1.0], rtol=1e-12)


def test_parking_lot():
    A = sp.csc_matrix(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 0, 1.0]]))
    c = completion_times(A, sizes=np.ones(5), capacity=[1, 1, 1])
    # f1, f4 at 2/3 finish at 1.5; f0, f2, f3 keep 1/3 (l2 holds three) and finish at 3
    np.testing.assert_allclose(c.finish, [3.0, 1.5, 3.0, 3.0, 1.5], rtol=1e-12)


def test_zero_sizes_and_stalled_flows():
    A = sp.csc_matrix(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
    c = completion_times(A, sizes=[0.0, 5.0, 4.0], capacity=[2.0, 0.0])
    assert c.finish[0] == 0.0 and np.isinf(c.finish[1]) and c.finish[2] == pytest.approx(2.0)
    # a flow that never finishes: the whole never does (as step_times says), not done at 2 s with status ok
    assert list(c.stalled) == [False, True, False] and c.makespan == np.inf and c.status == Status.STALLED
    c = completion_times(A, sizes=[0.0, 5.0, 4.0], capacity=[2.0, 1.0])
    assert c.makespan == pytest.approx(5.0) and c.status == Status.OK


def test_batch_equals_one_by_one():
    A = sp.csc_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1.0]]))
    rng = np.random.default_rng(0)
    sizes = rng.uniform(0.5, 5, (4, 4))
    caps = rng.uniform(1, 3, (4, 3))
    batch = completion_times(A, sizes=sizes, capacity=caps)
    for b in range(4):
        one = completion_times(A, sizes=sizes[b], capacity=caps[b])
        np.testing.assert_allclose(batch.finish[b], one.finish, rtol=1e-12)


def test_a_batch_reports_the_scenario_its_solver_could_not_answer():
    # scenario 0: the flow's only link has no capacity limit (unbounded: one scenario alone is an
    # error); it finished at 0 with status ok. Scenario 1: 1 byte at 2 bytes/s
    c = completion_times(sp.csc_matrix([[1.0]]), sizes=[[1.0], [1.0]], capacity=[[np.inf], [2.0]])
    assert c.status.tolist() == [Status.UNBOUNDED, Status.OK]
    assert np.isnan(c.makespan[0]) and np.isnan(c.finish[0, 0]) and c.makespan[1] == 0.5


def test_permutation_on_a_fat_tree_takes_size_over_line_rate():
    g = tp.fat_tree(4)
    rm = route(g, Flows.permutation(16, 50e9, seed=3))
    c = completion_times(rm)                    # sizes from the flows: 50 GB at 50 GB/s
    np.testing.assert_allclose(c.finish, 1.0, rtol=1e-12)


def test_bad_sizes():
    with pytest.raises(ValueError, match=r"sizes\[1\] must be a finite number >= 0"):
        completion_times(sp.csc_matrix(np.ones((1, 2))), sizes=[1.0, -1.0], capacity=[1.0])
    with pytest.raises(ValueError, match="sizes must have shape"):
        completion_times(sp.csc_matrix(np.ones((1, 2))), sizes=[1.0], capacity=[1.0])


def test_independent_groups_solved_together_equal_separate_solves():
    rng = np.random.default_rng(3)
    parts, sizes, caps = [], [], []
    for _ in range(4):          # four random problems on their own links
        A = sp.random(5, 7, density=0.5, random_state=rng, format="csc") + sp.eye(5, 7, format="csc")
        parts.append(A)
        sizes.append(rng.uniform(0.5, 4.0, 7))
        caps.append(rng.uniform(1.0, 3.0, 5))
    alone = [completion_times(A, sizes=s, capacity=c).finish for A, s, c in zip(parts, sizes, caps)]
    block = sp.block_diag(parts, format="csc")
    together = completion_times(block, sizes=np.concatenate(sizes), capacity=np.concatenate(caps),
                                groups=np.repeat(np.arange(4), 7))
    np.testing.assert_allclose(together.finish, np.concatenate(alone), rtol=1e-9)
    # without groups the same block gives the same finish times, but one clock costs more events
    plain = completion_times(block, sizes=np.concatenate(sizes), capacity=np.concatenate(caps))
    np.testing.assert_allclose(plain.finish, together.finish, rtol=1e-9)
    assert together.events < plain.events


def test_groups_that_share_a_link_are_refused():
    A = sp.csc_matrix(np.ones((1, 2)))
    with pytest.raises(ValueError, match="groups must not share links"):
        completion_times(A, sizes=[1.0, 1.0], capacity=[1.0], groups=[0, 1])
    with pytest.raises(ValueError, match=r"groups must be an integer array of shape \(2,\)"):
        completion_times(A, sizes=[1.0, 1.0], capacity=[1.0], groups=[0.5, 1])


@pytest.mark.parametrize("unit", [1e-12, 1.0, 1e12])
def test_tolerances_are_relative_to_the_sizes(unit):
    # two flows on one link of 1 unit/s: both at 0.5 until the first (1 unit) is done at 2,
    # then the second (3 units) has 2 left at full rate: done at 4 (any unit of bytes)
    A = sp.csc_matrix([[1.0, 1.0]])
    c = completion_times(A, sizes=[1 * unit, 3 * unit], capacity=[1.0])
    np.testing.assert_allclose(c.finish, [2 * unit, 4 * unit], rtol=1e-12)
    assert int(c.status) == 0 and bool(c.ok)


def test_a_run_cut_short_by_max_events_says_so():
    A = sp.csc_matrix([[1.0, 1.0, 1.0]])
    c = completion_times(A, sizes=[1.0, 2.0, 3.0], capacity=[1.0], max_events=1)
    assert int(c.status) == 1 and not bool(c.ok)
    np.testing.assert_array_equal(c.unfinished, [False, True, True])
    np.testing.assert_array_equal(c.stalled, [False, False, False])
    assert c.finish[0] == pytest.approx(3.0) and np.isinf(c.finish[1:]).all()
    assert np.isnan(c.makespan)                # not the makespan of the finished flows only
    full = completion_times(A, sizes=[1.0, 2.0, 3.0], capacity=[1.0])
    assert int(full.status) == 0 and not full.unfinished.any() and full.makespan == pytest.approx(6.0)


# --------------------------------------------------------------------------- steps released by steps
def _on_one_link():
    """A RoutingMatrix of one flow on a single link of 1 B/s."""
    from flowsolver import RoutingMatrix

    return RoutingMatrix.from_scipy(sp.csc_matrix([[1.0]]), capacity=[1.0])


def test_steps_released_by_steps_share_the_link_by_hand():
    from flowsolver.timing import step_times

    one = _on_one_link()
    # A0 (1 B) and B0 (3 B) share the link at 1/2: A0 done at 2 (B0 has 2 left); A1 (2 B)
    # starts 1 s later, at 3, while B0 runs alone at 1 B/s (1 left at 3); then both at 1/2:
    # B0 done at 5, A1 has 1 left, alone: done at 6
    t = step_times([one, one, one], sizes=[[1.0], [2.0], [3.0]], after=[-1, 0, -1], delay=[0.0, 1.0, 0.0])
    np.testing.assert_allclose(t.finish, [2.0, 6.0, 5.0], rtol=1e-12)
    np.testing.assert_allclose(t.start, [0.0, 3.0, 0.0], rtol=1e-12)
    assert t.status == Status.OK and not t.stalled.any()
    # a first step's delay is its release time
    t = step_times([one, one], sizes=[[1.0], [1.0]], delay=[0.5, 0.0])
    np.testing.assert_allclose(t.finish, [2.0, 1.5], rtol=1e-12)      # B alone until 0.5, then both


def test_one_step_at_zero_is_completion_times():
    from flowsolver.timing import step_times

    A = sp.csc_matrix(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 0, 1.0]]))
    rm = fs.RoutingMatrix.from_scipy(A, capacity=[1.0, 1.0, 1.0])
    t = step_times([rm], sizes=[np.ones(5)])
    c = completion_times(rm, sizes=np.ones(5))
    np.testing.assert_array_equal(t.flow_finish, c.finish)
    assert t.finish[0] == c.makespan and t.events == int(c.events)


def test_a_stalled_step_blocks_its_successors_and_says_so():
    from flowsolver import RoutingMatrix
    from flowsolver.timing import step_times

    dead = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0]]), capacity=[0.0])
    t = step_times([dead, dead], sizes=[[1.0], [1.0]], after=[-1, 0])
    assert t.status == Status.STALLED and t.stalled.tolist() == [True, False]
    assert np.isinf(t.finish).all() and np.isinf(t.start[1])


def test_step_times_cut_short_by_max_events_says_so():
    from flowsolver.timing import step_times

    one = _on_one_link()
    t = step_times([one, one], sizes=[[1.0], [1.0]], after=[-1, 0], max_events=1)
    assert t.status == Status.NOT_CONVERGED and t.finish[0] == pytest.approx(1.0) and np.isinf(t.finish[1])
    with pytest.raises(ValueError, match=r"after must give, per step \(2\), an earlier step or -1"):
        step_times([one, one], sizes=[[1.0], [1.0]], after=[1, -1])
    with pytest.raises(ValueError, match=r"delay must give, per step \(2\), a finite number of seconds >= 0"):
        step_times([one, one], sizes=[[1.0], [1.0]], delay=[-1.0, 0.0])
    with pytest.raises(ValueError, match="sizes is required"):
        step_times([one])


def test_an_event_off_every_running_bottleneck_needs_no_solve():
    # link 0 (2 B/s): a (1 B) and b (3 B); link 1 (1 B/s): c (4 B) alone. By hand: a and b
    # at 1 B/s, a ends at 1 s; b alone at 2 B/s ends at 1 + 2/2 = 2 s; c ends at 4 s.
    # a's end frees load on b's bottleneck (a solve); b's end touches nothing c uses (none).
    A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    c = completion_times(A, sizes=[1.0, 3.0, 4.0], capacity=[2.0, 1.0])
    np.testing.assert_allclose(c.finish, [1.0, 2.0, 4.0], rtol=1e-12)
    assert (int(c.events), c.solves) == (3, 2)


def _every_event_solved(A, sizes, cap, weights):
    """Reference: the event loop written out, one max-min solve per event."""
    from flowsolver import max_min_fair
    left, clock = np.array(sizes, dtype=float), 0.0
    finish = np.full(len(left), np.inf)
    while (left > 0).any():
        running = left > 0
        r = np.asarray(max_min_fair(A, cap, weights=weights, demands=np.where(running, np.inf, 0.0)).rates)
        dt = np.min(np.where(running, left / np.where(running, r, 1.0), np.inf))
        clock += dt
        left = np.where(running, left - r * dt, 0.0)
        ends = running & (left <= 1e-9 * np.asarray(sizes))
        finish[ends] = clock
        left[ends] = 0.0
    return finish


@pytest.mark.parametrize("seed", range(6))
def test_skipped_solves_give_the_rates_of_a_solve_at_every_event(seed):
    rng = np.random.default_rng(seed)
    every_flow_on_a_link = sp.csc_matrix((np.ones(4), (np.arange(4) % 3, np.arange(4))), shape=(3, 4))
    blocks = [sp.random(3, 4, density=0.5, random_state=rng, format="csc") + every_flow_on_a_link
              for _ in range(3)]
    A = sp.hstack([sp.block_diag(blocks, format="csc"), sp.random(9, 3, density=0.3, random_state=rng,
                                                                    format="csc")], format="csc")
    A.data[:] = np.where(A.data > 0, np.round(A.data * 4) / 4 + 0.25, 0.0)
    sizes = rng.uniform(0.5, 4.0, A.shape[1])
    cap = rng.uniform(1.0, 3.0, A.shape[0])
    weights = rng.choice([1.0, 2.0, 0.5], A.shape[1])
    c = completion_times(A, sizes=sizes, capacity=cap, weights=weights)
    np.testing.assert_allclose(c.finish, _every_event_solved(A, sizes, cap, weights), rtol=1e-9)
    assert c.solves < c.events        # some events were taken without a solve (checked above)


def test_an_event_without_a_solve_keeps_the_allocation_a_solve_would_give():
    # the case above: after b ends at 2 s only c runs, at 1 B/s on link 1; a solve with a's
    # and b's demands at 0 reports them at 0, held by that cap (-1), and loads (0, 1)
    A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    c = completion_times(A, sizes=[1.0, 3.0, 4.0], capacity=[2.0, 1.0], keep_phases=True)
    assert c.solves == 2 and len(c.phases) == 3
    running, alloc, _, _ = c.phases[2]
    assert running.tolist() == [False, False, True]
    np.testing.assert_allclose(alloc.rates, [0.0, 0.0, 1.0], rtol=1e-12)
    assert alloc.bottleneck.tolist() == [-1, -1, 1]
    np.testing.assert_allclose(alloc.link_load, [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(alloc.utilization, [0.0, 1.0], atol=1e-12)


def test_kept_phases_of_independent_groups_are_the_solves_of_their_running_flows():
    # two groups on their own links, each with its own clock; every kept phase's allocation
    # (solved, or kept when the finished flows left the running bottlenecks alone) must be
    # the max-min allocation of exactly the flows running in it
    from flowsolver import max_min_fair

    A = sp.block_diag([sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]), sp.csc_matrix([[1.0, 1.0]])], format="csc")
    cap, sizes = [2.0, 1.0, 3.0], [1.0, 2.0, 3.0, 0.5, 0.5]      # group 1 is done at 1/3 s
    c = completion_times(A, sizes=sizes, capacity=cap, groups=[0, 0, 0, 1, 1], keep_phases=True)
    assert (len(c.phases), c.solves) == (3, 2)                  # group 1's end needed no solve
    for running, alloc, _, _ in c.phases:
        fresh = max_min_fair(A, cap, demands=np.where(running, np.inf, 0.0))
        np.testing.assert_allclose(alloc.rates, fresh.rates, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(alloc.link_load, fresh.link_load, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_events_kept_one_after_another_carry_the_loads_and_utilisation_of_a_solve(seed):
    # many small independent groups of flows of different sizes on private and shared
    # links: events follow one another without a solve (each updates only the links the
    # finished flows leave); every kept phase must still be the solve of its running flows
    from flowsolver import max_min_fair

    rng = np.random.default_rng(seed)
    blocks = [sp.csc_matrix(np.vstack([np.eye(4), np.ones((1, 4))])) for _ in range(6)]
    A = sp.block_diag(blocks, format="csc")
    # groups 0-4: the shared link (100) never binds; group 5: it binds (4 flows at 1 B/s) and
    # its small flows end together first, the later events are kept one after another
    cap = np.concatenate([np.r_[rng.uniform(1.0, 2.0, 4), 100.0] for _ in range(5)] + [np.r_[np.full(4, 10.0), 4.0]])
    sizes = np.r_[rng.uniform(0.5, 4.0, 20), np.full(4, 0.05)]
    c = completion_times(A, sizes=sizes, capacity=cap, groups=np.repeat(np.arange(6), 4), keep_phases=True)
    assert c.solves <= len(c.phases) - 2                       # two events or more kept (one after another)
    for running, alloc, _, _ in c.phases:
        fresh = max_min_fair(A, cap, demands=np.where(running, np.inf, 0.0))
        np.testing.assert_allclose(alloc.rates, fresh.rates, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(alloc.link_load, fresh.link_load, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(alloc.utilization, fresh.utilization, rtol=1e-12, atol=1e-12)


def test_a_merged_routing_is_refused_where_flows_finish_one_by_one():
    # a class's rate is its flows' total: completion_times raised a float() TypeError and
    # fair_makespan a scipy dtype error, neither naming the routing
    rm = route(tp.rail_optimized(4), Flows.ring(32, 1e6))
    merged = rm.merge_identical()
    with pytest.raises(TypeError, match="pass the MergedRouting's original RoutingMatrix"):
        completion_times(merged)
    with pytest.raises(TypeError, match="pass the MergedRouting's original RoutingMatrix"):
        fs.fair_makespan(merged, np.ones(merged.routing.n_flows), rm.capacity)
