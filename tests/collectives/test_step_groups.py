"""Steps solved in groups of bounded size (collectives._step_solve): the same answers as all
steps in one call (the steps share no link and keep their own clocks), the kept events joined
for the derivatives, and a bound on what is kept."""

import numpy as np
import pytest

import topologies as tp
from flowsolver import collective, collective_variants
from flowsolver.collectives import _step_solve
from flowsolver.timing import _events

SIZE = 2**27


def _tree(graph, size=SIZE):
    # a pipelined tree all-reduce: dozens of distinct fill / drain steps of unequal sizes
    return collective(graph, "all_reduce", size, algorithm="tree", protocol="Simple")


def _same(a, b):
    assert a.time == pytest.approx(b.time, rel=1e-12)
    assert [(s.count, s.transfer, s.latency) for s in a.steps] == [(s.count, s.transfer, s.latency) for s in b.steps]
    np.testing.assert_allclose(a.link_utilization, b.link_utilization, rtol=1e-12, atol=1e-15)


@pytest.fixture
def calls(monkeypatch):
    """The flows of each call that solves a group of steps (every problem split, however small)."""
    monkeypatch.setattr(_step_solve, "SPLIT_FLOWS", 0)
    seen, real = [], _step_solve._solve_block
    monkeypatch.setattr(_step_solve, "_solve_block", lambda rm, *a: seen.append(rm.n_flows) or real(rm, *a))
    return seen


def test_steps_in_groups_time_as_all_in_one_call(monkeypatch, calls):
    g = tp.rail_optimized(nodes=4)
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 1 << 40)      # the reference: every step in one call
    one = _tree(g)
    total, = calls
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 100)
    calls.clear()
    grouped = _tree(g)
    assert sum(calls) == total and len(calls) > 5                   # every flow, in many calls
    _same(grouped, one)
    np.testing.assert_allclose(grouped.time_gradient(), one.time_gradient(), rtol=1e-9, atol=1e-30)


def test_kept_events_bounded_over_all_groups(monkeypatch, calls):
    """Each group keeps its events for the derivatives until all of them together pass the
    engine's own limit for one run; then none are kept and the derivatives re-run the steps,
    to the same answer."""
    g = tp.rail_optimized(nodes=4)
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 100)
    joined, real = [], _step_solve._JoinedRuns
    monkeypatch.setattr(_step_solve, "_JoinedRuns", lambda *a: joined.append(1) or real(*a))
    kept = _tree(g)
    assert joined == [1]                                             # the groups' events, joined
    monkeypatch.setattr(_events, "KEEP_PHASES_ENTRIES", 2_000)     # a few groups' worth: passed midway
    dropped = _tree(g, SIZE + 1)
    assert joined == [1] and len(calls) > 10                         # nothing kept the second time
    monkeypatch.setattr(_events, "KEEP_PHASES_ENTRIES", 1 << 24)
    _same(dropped, _tree(g, SIZE + 1))
    np.testing.assert_allclose(dropped.time_gradient(), kept.time_gradient(), rtol=1e-6, atol=1e-30)


def test_variants_batched_in_groups_time_as_in_one_call(monkeypatch, calls):
    g = tp.rail_optimized(nodes=4)
    slow = g.copy()
    for _, _, d in slow.edges(data=True):
        d["capacity"] = d["capacity"] / 3                           # every link a third as fast
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 1 << 40)
    one = collective_variants([g, slow], "all_reduce", SIZE, algorithm="tree", protocol="Simple")
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 100)
    calls.clear()
    grouped = collective_variants([g, slow], "all_reduce", SIZE, algorithm="tree", protocol="Simple")
    assert len(calls) > 5
    assert grouped[1].time > grouped[0].time * 1.5                   # the variant is solved on its own links
    for a, b in zip(grouped, one):
        _same(a, b)


def test_small_problems_solved_in_one_call(monkeypatch):
    """Below SPLIT_FLOWS the steps are solved in one call whatever CHUNK_FLOWS says (each
    group's shape would compile once a process: a loss for a problem this small)."""
    seen, real = [], _step_solve._solve_block
    monkeypatch.setattr(_step_solve, "_solve_block", lambda rm, *a: seen.append(rm.n_flows) or real(rm, *a))
    monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", 100)
    r = _tree(tp.rail_optimized(nodes=4))
    assert len(seen) == 1 and seen[0] < _step_solve.SPLIT_FLOWS and r.time > 0


def test_a_group_of_steps_without_flows_moves_nothing(monkeypatch, calls):
    """Steps with no flow (none of the library's schedules makes one) take 0 s, split or not."""
    from flowsolver.collectives._solve import route
    from flowsolver.traffic import Flows
    from flowsolver.collectives._step_solve import solve_steps

    g = tp.rail_optimized(nodes=2)
    gpus = tp.gpus(g)
    rm = route(g, Flows([gpus[0], gpus[1], gpus[2]], [gpus[8], gpus[9], gpus[10]], 1e6))
    group, sizes, cap = np.array([0, 0, 0]), np.full(3, 1e6), rm.capacity
    for chunk in (2, 1 << 40):          # the empty steps in a group of their own, then with the first
        monkeypatch.setattr(_step_solve, "CHUNK_FLOWS", chunk)
        out = solve_steps(rm, group, sizes, cap, 3)
        assert [s.transfer for s in out[1:]] == [0.0, 0.0] and out[0].transfer > 0
        assert not out[1].utilization.any() and out[1].bottleneck == ()
