"""The routing policy registry: a toy load-dependent policy registered as a user would
(the root conftest.py restores the registry after every test). A collective must route each
of its steps as that step's own call, so a step's transfer time equals its flows routed and
solved alone, by hand."""

import networkx as nx
import numpy as np
import pytest

import topologies as tp
import flowsolver as fs
from flowsolver import Flows, completion_times, route


def bulk_spray(call):
    """Flows as large as the largest of their call are sprayed over every shortest fabric
    path; the smaller ones take one path (networkx's shortest), so under contention a
    small flow's time depends on the sizes routed with it."""
    seg = call.ecmp(call.src, call.dst)
    small = np.flatnonzero(call.sizes < call.sizes.max(initial=0.0))
    if len(small):
        names = call.index.nodes
        seg[small] = call.node_paths([nx.shortest_path(call.graph, names[a], names[b])
                                      for a, b in zip(call.src[small], call.dst[small])])
    return [(seg, 1.0)]


def _halving_doubling_steps(p, size):
    """Rabenseifner's steps on ranks 0 ... p-1 by hand: (partner of rank i, bytes) per step."""
    k = p.bit_length() - 1
    halving = [(lambda i, s=s: i ^ (p >> (s + 1)), size / 2 ** (s + 1)) for s in range(k)]
    doubling = [(lambda i, s=s: i ^ (1 << s), size / p * 2 ** s) for s in range(k)]
    return halving + doubling


def _by_hand(g, p, size, policy):
    """Each step's flows routed in a call of their own and solved alone: its transfer (s)."""
    out = []
    for partner, nbytes in _halving_doubling_steps(p, size):
        src = np.arange(p)
        rm = route(g, Flows(src, [partner(i) for i in src], nbytes), policy=policy)
        out.append(float(completion_times(rm, np.full(p, nbytes), rm.capacity).finish.max()))
    return out


def _collective_steps(g, p, size, policy):
    r = fs.collective(g, "all_reduce", size, ranks=list(range(p)), algorithm="halving_doubling", policy=policy,
                      efficiency=1.0, step_latency=0.0, base_latency=0.0)
    return [st.transfer for st in r.steps], r.time


def test_a_load_dependent_policy_groups_a_collectives_steps_by_its_declaration():
    g, p, size = tp.fat_tree(4), 8, 2.0**20
    fs.register_policy("bulk_spray", bulk_spray, depends_on_load=True)
    assert "bulk_spray" in fs.POLICIES
    hand = _by_hand(g, p, size, "bulk_spray")
    steps, total = _collective_steps(g, p, size, "bulk_spray")
    assert steps == pytest.approx(hand, rel=1e-9)
    assert total == pytest.approx(sum(hand), rel=1e-9)
    # the step of 256 KiB flows between the two edge switches of a pod: sprayed alone over
    # both aggregation switches at the NIC rate; routed with the 512 KiB flows it would be
    # "small" and share one path (half the rate): the declaration is what keeps it apart
    nic = 2.0**19 / hand[0]
    assert hand[1] == pytest.approx(2.0**18 / nic, rel=1e-9)


def test_the_same_policy_undeclared_is_routed_with_the_other_steps_and_differs():
    g, p, size = tp.fat_tree(4), 8, 2.0**20
    fs.register_policy("bulk_spray", bulk_spray)                  # load dependence not declared
    steps, _ = _collective_steps(g, p, size, "bulk_spray")
    hand = _by_hand(g, p, size, "bulk_spray")
    assert steps[1] == pytest.approx(2 * hand[1], rel=1e-9)       # two 256 KiB flows on one link


def test_route_splits_groups_for_a_policy_that_does_not_handle_them():
    g = tp.fat_tree(4)
    fs.register_policy("bulk_spray", bulk_spray, depends_on_load=True)
    a, b = Flows([0, 1], [2, 3], 2.0), Flows([0, 1, 4], [2, 3, 8], [1.0, 1.0, 4.0])
    both = Flows(np.r_[a.src, b.src], np.r_[a.dst, b.dst], np.r_[a.sizes, b.sizes])
    together = route(g, both, policy="bulk_spray", groups=[0, 0, 1, 1, 1]).to_scipy().toarray()
    apart = np.hstack([route(g, f, policy="bulk_spray").to_scipy().toarray() for f in (a, b)])
    np.testing.assert_array_equal(together, apart)


def test_policy_registry_checks_and_views():
    with pytest.raises(ValueError, match="policy must be one of ecmp, ecmp_hash, dor, minimal, valiant, ugal, "
                                         "shortest, got 'nope'"):
        route(tp.fat_tree(4), Flows([0], [1], 1.0), policy="nope")
    with pytest.raises(ValueError, match="depends_on_load must be True or False"):
        fs.register_policy("x", bulk_spray, depends_on_load="yes")
    with pytest.raises(TypeError, match="function must be callable"):
        fs.register_policy("x", 3)
    assert fs.POLICIES == ("ecmp", "ecmp_hash", "dor", "minimal", "valiant", "ugal", "shortest")
    fs.register_policy("wrong", lambda call: [(np.zeros(1, dtype=np.int64), 1.0)])
    with pytest.raises(ValueError, match="policy 'wrong' returned a column of 1 segment ids .* for 2 flows"):
        route(tp.fat_tree(4), Flows([0, 1], [8, 9], 1.0), policy="wrong")
    with pytest.raises(ValueError, match="subflows applies to policy 'ecmp_hash' only"):
        route(tp.fat_tree(4), Flows([0], [8], 1.0), policy="ecmp", subflows=2)


def test_the_built_in_declarations_are_what_their_rules_depend_on():
    from flowsolver.routing import policy_of
    per_call = [p for p in fs.POLICIES if policy_of(p).per_call]
    assert per_call == ["ecmp_hash", "valiant", "ugal"]           # hashes a flow's index; draws per call
    assert [p for p in fs.POLICIES if policy_of(p).depends_on_load] == ["ugal"]      # load / capacity
    assert [p for p in fs.POLICIES if policy_of(p).collective_pxn] == ["ecmp", "ecmp_hash"]
    assert [p for p in fs.POLICIES if policy_of(p).whole_path] == ["shortest"]


@pytest.mark.parametrize("columns, match", [
    (lambda call: [(call.ecmp(call.src, call.dst), -1.0)], "not a finite number > 0"),
    (lambda call: [(call.ecmp(call.src, call.dst), float("nan"))], "not a finite number > 0"),
    (lambda call: [(np.full(len(call.src), 10**6), 1.0)], "segment ids outside -1"),
    # half of each flow through the fabric, or none: the solver rated the whole flow (5e10 B/s)
    (lambda call: [(call.ecmp(call.src, call.dst), 0.5)], r"flow 0 \(s0/gpu0 -> s15/gpu0\) is not conserved at "
                                                          r"pod0/edge0 \(in - out = 0.5\)"),
    (lambda call: [], r"not conserved at pod0/edge0 \(in - out = 1\)"),
])
def test_a_registered_policys_columns_must_route_each_flow_whole(columns, match):
    fs.register_policy("mine", columns)
    with pytest.raises(ValueError, match=match):
        route(tp.fat_tree(4), Flows([0, 1], [15, 14], 1e6), "mine")
    fs.register_policy("whole", lambda call: [(call.ecmp(call.src, call.dst), 1.0)])
    mine = route(tp.fat_tree(4), Flows([0, 1], [15, 14], 1e6), "whole")
    ref = route(tp.fat_tree(4), Flows([0, 1], [15, 14], 1e6), "ecmp")
    assert (mine.to_scipy() != ref.to_scipy()).nnz == 0


def test_a_matrix_of_nan_inf_or_complex_fractions_is_refused_everywhere():
    import scipy.sparse as sp

    for bad, match in ((np.nan, "NaN or inf"), (np.inf, "NaN or inf"), (1 + 1j, "real numbers")):
        A = sp.csc_matrix(np.array([[bad, 1.0], [1.0, 0.0]]))
        for call in (lambda: completion_times(A, sizes=[1, 1], capacity=[1, 1]),      # rated as 1 before
                     lambda: fs.fair_makespan(A, [1.0, 1.0], [1.0, 1.0]),
                     lambda: fs.max_min_fair(A, [1.0, 1.0])):
            with pytest.raises(ValueError, match=match):
                call()
