"""Traffic patterns: each generator against the pattern's definition, and every bad input
named."""

import itertools

import numpy as np
import pytest

import topologies as tp
from flowsolver import Flows


def pairs(f):
    return list(zip(f.src.tolist(), f.dst.tolist()))


def test_all_to_all_is_every_ordered_pair_of_distinct_ranks_once():
    assert sorted(pairs(Flows.all_to_all(5))) == sorted(itertools.permutations(range(5), 2))
    picked = Flows.all_to_all(ranks=[3, 5, 7], size=2.0)
    assert sorted(pairs(picked)) == sorted(itertools.permutations([3, 5, 7], 2))
    assert picked.sizes.tolist() == [2.0] * 6


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_a_permutation_is_one_cycle_through_every_rank(seed):
    f = Flows.permutation(9, seed=seed)
    nxt = dict(pairs(f))
    assert sorted(nxt) == list(range(9)) and sorted(nxt.values()) == list(range(9))
    seen, v = [], 0
    while v not in seen:
        seen.append(v)
        v = nxt[v]
    assert len(seen) == 9 and v == 0          # back to the start only after all nine
    assert pairs(Flows.permutation(9, seed=seed)) == pairs(f)      # the seed fixes it


def test_rings_one_and_two_directions():
    assert pairs(Flows.ring(4)) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    both = set(pairs(Flows.ring(4, bidirectional=True)))
    assert both == {(0, 1), (1, 2), (2, 3), (3, 0), (1, 0), (2, 1), (3, 2), (0, 3)}
    assert pairs(Flows.ring(2, bidirectional=True)) == [(0, 1), (1, 0)]   # two ranks: one flow each way


def test_random_pairs_are_distinct_endpoints_among_the_ranks():
    f = Flows.random_pairs(ranks=[2, 4, 6, 8], count=500, seed=3)
    assert len(f) == 500 and (f.src != f.dst).all()
    assert set(f.src.tolist()) | set(f.dst.tolist()) == {2, 4, 6, 8}    # 500 draws reach all four


def test_incast_and_outcast():
    assert pairs(Flows.incast(4, dst=2)) == [(0, 2), (1, 2), (3, 2)]
    assert pairs(Flows.outcast(4, src=1)) == [(1, 0), (1, 2), (1, 3)]


def test_weights_and_demands_default_and_survive_subset_and_concat():
    a = Flows([0, 1], [1, 0], [1.0, 2.0], weights=[2.0, 3.0])
    b = Flows([2], [3], 4.0, demands=5e9)
    assert a.demands.tolist() == [np.inf, np.inf] and b.weights.tolist() == [1.0]
    both = Flows.concat([a, b])
    assert both.weights.tolist() == [2.0, 3.0, 1.0] and both.demands.tolist() == [np.inf, np.inf, 5e9]
    assert both.subset([2, 0]).sizes.tolist() == [4.0, 1.0]
    mixed = Flows.concat([Flows([0], ["storage0"], 1.0), Flows([1], [2], 1.0)])
    assert mixed.dst.tolist() == ["storage0", 2]


def test_ranks_beside_node_ids_stay_ranks_and_no_flows_are_flows():
    # numpy made [0, "s1/gpu0"] strings: rank 0 became the node id '0'
    f = Flows([0, "s1/gpu0"], ["s0/gpu1", 3], 1.0)
    assert f.src[0] == 0 and isinstance(f.src[0], int) and f.dst[1] == 3
    assert len(Flows([], [], [])) == 0


def test_numpy_integers_are_counts():
    assert len(Flows.all_to_all(np.int32(4))) == 12
    assert len(Flows.random_pairs(np.int64(4), count=np.int64(3))) == 3


@pytest.mark.parametrize("make, match", [
    (lambda: Flows([0, 1], [1], 1.0), "src and dst must have the same length"),
    (lambda: Flows([0], [1], -1.0), r"sizes\[0\] must be a finite number >= 0"),
    (lambda: Flows([0, 1], [1, 0], [1.0, np.nan]), r"sizes\[1\]"),
    (lambda: Flows([0], [1], [1.0, 2.0]), r"sizes must be a scalar or have one entry per flow \(1\)"),
    (lambda: Flows([0], [1], 1.0, weights=0.0), r"weights\[0\] must be a finite number > 0"),
    (lambda: Flows([0], [1], 1.0, demands=np.nan), r"demands\[0\] must be a number > 0 \(inf for no cap\)"),
    (lambda: Flows([0, 1, 3], [1, 2, 3], 1.0), "flow 2 has src == dst"),
    (lambda: Flows([0.5], [1], 1.0), "src must hold GPU ranks"),
    (lambda: Flows([True], [1], 1.0), "src must hold GPU ranks"),
    (lambda: Flows([3], [3], 1.0), "flow 0 has src == dst"),
    (lambda: Flows.all_to_all(1), "n must be an integer >= 2, got 1"),
    (lambda: Flows.all_to_all(True), "n must be an integer >= 2, got True"),
    (lambda: Flows.ring(ranks=[1, 1, 2]), "ranks must be a sequence of distinct GPU ranks"),
    # adv18c finding 5: float ranks were truncated (0.5, 1.7, 2.9 -> 0, 1, 2), n beside ranks
    # ignored, node ids a bare numpy error
    (lambda: Flows.all_to_all(ranks=[0.5, 1.7, 2.9]), r"ranks must hold GPU ranks \(integers >= 0\), got 0.5"),
    (lambda: Flows.ring(ranks=[1.0, 2.0]), r"ranks must hold GPU ranks \(integers >= 0\), got 1.0"),
    (lambda: Flows.all_to_all(4, ranks=[0, 1]), r"n \(4\) and ranks \(2 of them\) disagree"),
    (lambda: Flows.all_to_all(ranks=["s0/gpu0", "s0/gpu1"]), r"ranks must hold GPU ranks .*'s0/gpu0'.*node ids"),
    (lambda: Flows.incast(ranks=[0, "storage0"]), r"ranks must hold GPU ranks .*'storage0'"),
    (lambda: Flows.permutation(ranks=[True, False]), "ranks must hold GPU ranks"),
    (lambda: Flows.random_pairs(ranks=[0, -1]), r"ranks must hold GPU ranks \(integers >= 0\), got -1"),
    (lambda: Flows.random_pairs(4, count=0), "count must be an integer >= 1, got 0"),
    (lambda: Flows.incast(4, dst=9), "dst 9 is not one of the ranks"),
    (lambda: Flows.storage(tp.fat_tree(4)), "no storage nodes"),
    (lambda: Flows.storage(tp.fat_tree(4), direction="up"), "direction must be 'read' or 'write'"),
])
def test_bad_traffic_names_the_parameter(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_n_beside_ranks_must_agree():
    # n equal to len(ranks) is the same pattern as ranks alone: 3 x 2 flows over ranks 3, 5, 7
    both, alone = Flows.all_to_all(3, ranks=[3, 5, 7]), Flows.all_to_all(ranks=[3, 5, 7])
    assert both.src.tolist() == alone.src.tolist() == [3, 3, 5, 5, 7, 7]
    assert both.dst.tolist() == alone.dst.tolist() == [5, 7, 3, 7, 3, 5]
    assert Flows.ring(ranks=np.array([2, 4], dtype=np.int32)).dst.tolist() == [4, 2]


def test_demand_inf_means_no_cap():
    assert Flows([0], [1], 1.0, demands=np.inf).demands.tolist() == [np.inf]


def test_bad_flows_name_what_is_wrong():
    # adv20b F3: numpy's own words before ("index 7 is out of bounds", "setting an array
    # element with a sequence", "could not convert string to float")
    from flowsolver import Flows
    with pytest.raises(IndexError, match=r"^index: .*these Flows hold 4 flows"):
        Flows.ring(4).subset([7])
    with pytest.raises(ValueError, match=r"src must be a flat sequence .* src\[0\] = \[0, 1\] \(a list\)"):
        Flows([[0, 1]], [[1, 0]], 1.0)
    with pytest.raises(ValueError, match=r"src must be a flat sequence .* src\[1\] = \[1, 2\] \(a list\)"):
        Flows([0, [1, 2]], [1, 0], 1.0)                       # ragged (adv20d F4)
    with pytest.raises(ValueError, match=r"index must select flows .* for one flow pass \[0\]"):
        Flows([0, 1], [1, 0], 1.0).subset(0)
    assert len(Flows([0, 1], [1, 0], 1.0).subset([0])) == 1
    with pytest.raises(ValueError, match=r"sizes must be numbers of bytes .* got '1M'"):
        Flows([0], [1], "1M")
    # node ids that are tuples stay one endpoint each
    f = Flows([("s", 0)], [("s", 1)], 1.0)
    assert f.src[0] == ("s", 0) and len(f) == 1


def test_pattern_builders_refuse_more_flows_than_max_before_allocating():
    import tracemalloc

    from flowsolver import traffic
    tracemalloc.start()
    with pytest.raises(ValueError, match=r"all_to_all over 200000 ranks makes 39,999,800,000 flows, more than "
                                         r"flowsolver.traffic.MAX_FLOWS"):
        traffic.Flows.all_to_all(200_000, 1.0)
    with pytest.raises(ValueError, match=r"random_pairs with count=100000000000 makes"):
        traffic.Flows.random_pairs(16, 10**11)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6                      # refused before the 298 GiB numpy asked for
    assert len(traffic.Flows.all_to_all(64)) == 64 * 63          # below the limit: as before
