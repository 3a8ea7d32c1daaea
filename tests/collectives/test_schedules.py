"""Schedules: the registry, NCCL's trees and the pipeline, checked against hand counts."""

import pytest

from flowsolver import ALGORITHMS
from flowsolver.collectives._layout import RankLayout
from flowsolver.collectives._algorithms import algorithm_of
from flowsolver.collectives._schedules import schedule
from flowsolver.collectives._trees import Step, btree, double_btree, pipeline


def test_every_algorithm_has_one_schedule():
    # NVLSTree, PAT and NVLS all-gather / reduce-scatter are timed by NCCL's cost model on
    # the ring's flow solve (registered with no schedule of their own)
    pairs = {(op, a) for op, algs in ALGORITHMS.items() for a in algs}
    derived = {(op, a) for op, a in pairs if algorithm_of(a).derived(op)}
    assert derived == {("all_reduce", "nvls_tree"), ("all_gather", "nvls"), ("reduce_scatter", "nvls"),
                       ("all_gather", "pat"), ("reduce_scatter", "pat")}
    assert all(callable(algorithm_of(a).schedules[op]) for op, a in pairs - derived)


def test_steps_are_values():
    ring = RankLayout(groups=((0, 1, 2, 3),), rings=((0, 1, 2, 3),), channels=1)
    a = schedule("all_reduce", "halving_doubling", 4, 8.0, ring, 1.0)
    b = schedule("all_reduce", "halving_doubling", 4, 8.0, ring, 1.0)
    assert a == b and hash(a) == hash(b)
    # Rabenseifner on 4 ranks: halving with partners 2 then 1 (4 then 2 bytes), doubling with
    # partners 1 then 2 (2 then 4 bytes): halving step 0 and doubling step 1 are one value
    assert [(s.flows[0][1], s.flows[0][2]) for s in a] == [(2, 4.0), (1, 2.0), (1, 2.0), (2, 4.0)]
    assert a[0] == a[3] and a[1] == a[2] and len({st.flows for st in a}) == 2


def test_ring_and_binomial_by_hand():
    lay = RankLayout(groups=((0, 1, 2),), rings=((0, 2, 1),), channels=1)
    (ar,) = schedule("all_reduce", "ring", 3, 6.0, lay, 1.0)
    assert ar == Step(4, ((0, 2, 2.0), (2, 1, 2.0), (1, 0, 2.0)), 4)
    bc = schedule("broadcast", "binomial", 3, 5.0, lay, 1.0)
    assert [s.flows for s in bc] == [((0, 1, 5.0),), ((0, 2, 5.0),)]       # rank 1 has no 1 + 2
    rd = schedule("reduce", "binomial", 3, 5.0, lay, 1.0)
    assert [s.flows for s in rd] == [((2, 0, 5.0),), ((1, 0, 5.0),)]


def test_pipeline_counts_by_hand():
    # 3 chunks through 2 stages: stage 0 alone, then both stages twice, then stage 1 alone;
    # the depth (2) is paid in latency once, on the widest step
    steps = pipeline([[(0, 1)], [(1, 2)]], 3, 1.0)
    assert [(s.count, s.flows, s.latency_count) for s in steps] == [
        (1, ((0, 1, 1.0),), 0), (2, ((0, 1, 1.0), (1, 2, 1.0)), 2), (1, ((1, 2, 1.0),), 0)]
    assert sum(s.count for s in steps) == 3 + 2 - 1


def test_pipeline_sends_whole_chunks_and_the_remainder_last_by_hand():
    # 2 chunks of 4 and a remainder of 1 through 3 stages (NCCL's realChunkSize): the
    # remainder enters stage 0 at step 2 and leaves stage 2 alone at step 4; 3 + 3 - 1 steps
    steps = pipeline([[(0, 1)], [(1, 2)], [(2, 3)]], 3, 4.0, 1.0)
    assert [(s.count, s.flows.nbytes.tolist()) for s in steps] == [
        (1, [4.0]), (1, [4.0, 4.0]), (1, [1.0, 4.0, 4.0]), (1, [1.0, 4.0]), (1, [1.0])]
    # more chunks than stages: the full steps are counted together, the remainder's on its own
    steps = pipeline([[(0, 1)], [(1, 2)]], 4, 4.0, 1.0)
    assert [(s.count, s.flows.nbytes.tolist()) for s in steps] == [
        (1, [4.0]), (2, [4.0, 4.0]), (1, [1.0, 4.0]), (1, [1.0])]


def test_broadcast_and_reduce_never_finish_sooner_for_a_larger_message():
    # 4 MiB over 8 rings is one 512 KiB chunk a ring; one byte more was cut into two chunks of
    # 256 KiB that pipelined, 19 % faster (NCCL sends a whole chunk and a remainder of 1 byte)
    import topologies as tp
    from flowsolver import collective

    g = tp.rail_optimized(nodes=2)
    sizes = [2**21, 3 * 2**20, 2**22 - 1, 2**22, 2**22 + 1, 5 * 2**20, 2**23, 2**23 + 1]
    for op in ("broadcast", "reduce"):
        times = [collective(g, op, s).time for s in sizes]
        assert all(b >= a for a, b in zip(times, times[1:])), (op, times)


def test_binary_tree_by_hand():
    assert btree(1) == [-1]
    # 1 -> 2 (clear bit 0, set bit 1), 2 -> 4, 3 -> 2, 4 -> 0 (8 is out of range), 5 -> 6, 6 -> 4, 7 -> 6
    assert btree(8) == [-1, 2, 4, 2, 0, 6, 4, 6]
    # mirrored for an even count: the second tree's parent of x is 7 - parent(7 - x)
    assert double_btree(8)[1] == [1, 3, 1, 7, 5, 3, 5, -1]


@pytest.mark.parametrize("u", [2, 3, 4, 7, 8, 16, 33, 64])
def test_double_binary_tree_shape(u):
    trees = double_btree(u)
    inner = []
    for parent in trees:
        assert parent.count(-1) == 1                    # one root, every node reaches it
        for x in range(u):
            seen, y = set(), x
            while parent[y] >= 0:
                assert y not in seen
                seen.add(y)
                y = parent[y]
        children = [parent.count(x) for x in range(u)]
        assert max(children) <= 2
        inner.append({x for x in range(u) if children[x] > 0})
    # a rank is inner in at most one tree (odd u: the shift leaves one rank inner in both)
    assert len(inner[0] & inner[1]) <= u % 2
