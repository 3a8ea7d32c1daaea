"""ParallelLayout: Megatron-style rank groups, checked by their defining properties."""

import itertools

import pytest

import topologies as tp
from flowsolver.training import ParallelLayout


def _coords(lay):
    """Logical (t, d, q) of each GPU rank, from the definition i = t + tp (d + dp q)."""
    out = {}
    for q, d, t in itertools.product(range(lay.pp), range(lay.dp), range(lay.tp)):
        out[lay.placement[t + lay.tp * (d + lay.dp * q)]] = (t, d, q)
    return out


@pytest.mark.parametrize("tp_, pp, dp, ep", [(2, 2, 4, 2), (4, 1, 4, 4), (1, 4, 2, 1), (8, 2, 1, 1)])
def test_groups_partition_the_ranks_by_their_coordinates(tp_, pp, dp, ep):
    lay = ParallelLayout(tp=tp_, pp=pp, dp=dp, ep=ep, placement=tuple(reversed(range(tp_ * pp * dp))))
    c = _coords(lay)
    n = tp_ * pp * dp
    # tp, dp, dp_experts and ep groups each cover every GPU exactly once
    for kind in ("tp", "dp", "ep", "dp_experts"):
        members = sorted(r for g in lay.groups(kind) for r in g)
        assert members == list(range(n)), kind
    for g in lay.groups("tp"):          # same (d, q), every t
        assert len({c[r][1:] for r in g}) == 1 and sorted(c[r][0] for r in g) == list(range(tp_))
    for g in lay.groups("dp"):          # same (t, q), every d
        assert len({(c[r][0], c[r][2]) for r in g}) == 1 and sorted(c[r][1] for r in g) == list(range(dp))
    for g in lay.groups("ep"):          # ep consecutive DP indices, aligned
        d = sorted(c[r][1] for r in g)
        assert d == list(range(d[0], d[0] + ep)) and d[0] % ep == 0
    for g in lay.groups("dp_experts"):  # DP indices with the same residue mod ep
        assert len({c[r][1] % ep for r in g}) == 1 and len(g) == dp // ep
    pairs = lay.groups("pp")
    assert len(pairs) == (pp - 1) * dp * tp_
    for a, b in pairs:                  # same (t, d), consecutive stages
        assert c[a][:2] == c[b][:2] and c[b][2] == c[a][2] + 1


def test_tp_groups_sit_inside_a_server_and_dp_groups_on_one_rail():
    g = tp.rail_optimized(4)
    nodes = tp.gpus(g)
    lay = ParallelLayout(tp=8, pp=1, dp=4)
    for group in lay.groups("tp"):
        assert len({g.nodes[nodes[r]]["server"] for r in group}) == 1
    for group in lay.groups("dp"):
        assert len({g.nodes[nodes[r]]["rail"] for r in group}) == 1
        assert len({g.nodes[nodes[r]]["server"] for r in group}) == 4


def test_layout_checks():
    with pytest.raises(ValueError, match="ranks must be a permutation of the 4 GPU ranks"):
        ParallelLayout(tp=2, pp=1, dp=2, placement=(0, 1, 1, 2))
    with pytest.raises(ValueError, match=r"ep \(3\) must divide dp x cp \(4 x 1\)"):
        ParallelLayout(tp=1, pp=1, dp=4, ep=3)
    with pytest.raises(ValueError, match=r"ep \(16\) must divide dp x cp \(2 x 4\)"):
        ParallelLayout(tp=1, pp=1, dp=2, cp=4, ep=16)
    with pytest.raises(ValueError, match="tp must be an integer >= 1"):
        ParallelLayout(tp=0, pp=1, dp=1)
    with pytest.raises(ValueError, match="kind must be one of tp, cp, pp, ep, dp, dp_experts"):
        ParallelLayout(tp=1, pp=1, dp=1).groups("sp")


def test_groups_are_the_ranks_rank_gives_one_by_one():
    """groups() (every rank at once) against rank() called for each member, in the order each
    kind is documented: every order, with and without a placement."""
    import random

    from flowsolver.training._layout import GROUP_KINDS, ParallelLayout

    def one_by_one(lay, kind):
        tp, pp, dp, ep, cp, rank = lay.tp, lay.pp, lay.dp, lay.ep, lay.cp, lay.rank
        cp_first = lay.order.index("cp") < lay.order.index("dp")

        def folded(t, q, j):         # the j-th of a (stage, TP index)'s dp x cp ranks in rank order
            d, c = divmod(j, cp) if cp_first else (j % dp, j // dp)
            return rank(t, d, q, c)

        n = dp * cp
        loops = {
            "tp": lambda: [[rank(t, d, q, c) for t in range(tp)] for q in range(pp) for d in range(dp)
                           for c in range(cp)],
            "cp": lambda: [[rank(t, d, q, c) for c in range(cp)] for q in range(pp) for d in range(dp)
                           for t in range(tp)],
            "pp": lambda: [[rank(t, d, q, c), rank(t, d, q + 1, c)] for q in range(pp - 1) for d in range(dp)
                           for c in range(cp) for t in range(tp)],
            "ep": lambda: [[folded(t, q, j) for j in range(k * ep, (k + 1) * ep)] for q in range(pp)
                           for t in range(tp) for k in range(n // ep)],
            "dp": lambda: [[rank(t, d, q, c) for d in range(dp) for c in range(cp)] for q in range(pp)
                           for t in range(tp)],
            "dp_experts": lambda: [[folded(t, q, j) for j in range(e, n, ep)]
                                   for q in range(pp) for t in range(tp) for e in range(ep)]}
        return loops[kind]()

    rng = random.Random(3)
    for tp, pp, dp, cp, ep in ((2, 3, 4, 2, 2), (4, 2, 6, 1, 3), (1, 2, 2, 2, 1), (1, 2, 2, 4, 8), (2, 1, 3, 2, 6)):
        for order in itertools.permutations(["tp", "cp", "dp", "pp"]):
            placement = list(range(tp * pp * dp * cp))
            rng.shuffle(placement)
            for ranks in (None, tuple(placement)):
                lay = ParallelLayout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, order=order, placement=ranks)
                for kind in GROUP_KINDS:
                    assert lay.groups(kind) == one_by_one(lay, kind), (tp, pp, dp, cp, ep, order, kind)


def _megatron_groups(sizes: dict, order: list, token: str) -> list:
    """Megatron-Core's orthogonal rank groups by their definition (parallel_state.py,
    generate_masked_orthogonal_rank_groups): rank = sum of each axis' index x the product of the
    sizes before it in ``order`` (fastest first); a ``token`` group varies that axis' index
    with the others fixed. Sorted, for comparison."""
    groups = {}
    for idx in itertools.product(*(range(sizes[n]) for n in reversed(order))):
        index = dict(zip(reversed(order), idx))
        rank, stride = 0, 1
        for n in order:
            rank, stride = rank + index[n] * stride, stride * sizes[n]
        groups.setdefault(tuple(index[n] for n in order if n != token), []).append(rank)
    return sorted(sorted(g) for g in groups.values())


@pytest.mark.parametrize("tp_, cp, dp, pp, ep", [(1, 2, 8, 1, 8), (1, 2, 8, 1, 4), (2, 2, 2, 2, 4),
                                                  (1, 4, 2, 2, 8), (2, 4, 1, 1, 2), (1, 2, 4, 2, 2)])
def test_expert_groups_are_megatron_cores_folded_expert_grid(tp_, cp, dp, pp, ep):
    # Megatron-Core (parallel_state.py, initialize_model_parallel at NVIDIA/Megatron-LM d98e8a64):
    # attention ranks from RankGenerator(tp, ep=1, dp, pp, cp, "tp-cp-ep-dp-pp"), expert ranks from
    # a second one with cp=1 and expert DP = world / (tp ep pp): its "ep" groups are the EP groups,
    # its "dp" groups the expert data parallel ones; it needs tp ep pp to divide the world only
    world = tp_ * cp * dp * pp
    expert = dict(tp=tp_, ep=ep, dp=world // (tp_ * ep * pp), pp=pp)
    lay = ParallelLayout(tp=tp_, pp=pp, dp=dp, cp=cp, ep=ep)
    assert sorted(sorted(g) for g in lay.groups("ep")) == _megatron_groups(expert, ["tp", "ep", "dp", "pp"], "ep")
    assert sorted(sorted(g) for g in lay.groups("dp_experts")) == \
        _megatron_groups(expert, ["tp", "ep", "dp", "pp"], "dp")
    dense = dict(tp=tp_, cp=cp, dp=dp, pp=pp)           # the attention side is unchanged
    assert sorted(sorted(g) for g in lay.groups("cp")) == _megatron_groups(dense, ["tp", "cp", "dp", "pp"], "cp")


def test_pp_before_dp_with_ep_equal_to_cp_is_megatrons_placement():
    # order tp-cp-ep-pp-dp: Megatron accepts pp not last only when expert DP = DP, i.e. ep = cp;
    # its expert grid is then tp-ep-pp-dp
    lay = ParallelLayout(tp=2, pp=2, dp=2, cp=2, ep=2, order="tp-cp-pp-dp")
    expert = dict(tp=2, ep=2, pp=2, dp=2)
    assert sorted(sorted(g) for g in lay.groups("ep")) == _megatron_groups(expert, ["tp", "ep", "pp", "dp"], "ep")


def test_mixtral_expert_groups_stay_inside_nvlink_beside_context_parallelism():
    # Mixtral 8x7B, TP 1 x CP 2 x EP 8 on 2 DGX H100: Megatron's EP groups are GPUs 0-7 and 8-15
    # (one server each), so the step's all-to-all is one inside a server's NVSwitch
    import flowsolver as fs
    from flowsolver import Parallelism, Schedule

    lay = ParallelLayout(tp=1, pp=1, dp=8, cp=2, ep=8)
    assert lay.groups("ep") == [list(range(8)), list(range(8, 16))]
    g = tp.rail_optimized(2)
    r = fs.training_step(g, "mixtral-8x7b", Parallelism(tp=1, ep=8, cp=2, zero=1), Schedule(global_batch=64),
                         seq_len=4096)
    ep = r.phases["ep"]
    alone = fs.collective(g, op="all_to_all", size=ep.bytes, ranks=list(range(8))).time
    assert ep.per_call == pytest.approx(alone, rel=1e-6) and ep.bottleneck[0].tier == "nvlink"
    # ep 8 divides dp x cp = 4 x 4 but not dp = 4: Megatron takes it (tp ep pp divides the world)
    r4 = fs.training_step(g, "mixtral-8x7b", Parallelism(tp=1, ep=8, cp=4, zero=1), Schedule(global_batch=64),
                          seq_len=4096)
    assert r4.ep == 8 and r4.dp == 4 and r4.phases["ep"].groups == 2
