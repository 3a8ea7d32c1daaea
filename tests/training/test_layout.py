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
    with pytest.raises(ValueError, match=r"ep \(3\) must divide dp \(4\)"):
        ParallelLayout(tp=1, pp=1, dp=4, ep=3)
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
        loops = {
            "tp": lambda: [[rank(t, d, q, c) for t in range(tp)] for q in range(pp) for d in range(dp)
                           for c in range(cp)],
            "cp": lambda: [[rank(t, d, q, c) for c in range(cp)] for q in range(pp) for d in range(dp)
                           for t in range(tp)],
            "pp": lambda: [[rank(t, d, q, c), rank(t, d, q + 1, c)] for q in range(pp - 1) for d in range(dp)
                           for c in range(cp) for t in range(tp)],
            "ep": lambda: [[rank(t, d, q, c) for d in range(e * ep, (e + 1) * ep)] for q in range(pp)
                           for c in range(cp) for t in range(tp) for e in range(dp // ep)],
            "dp": lambda: [[rank(t, d, q, c) for d in range(dp) for c in range(cp)] for q in range(pp)
                           for t in range(tp)],
            "dp_experts": lambda: [[rank(t, d, q, c) for d in range(r, dp, ep) for c in range(cp)]
                                   for q in range(pp) for t in range(tp) for r in range(ep)]}
        return loops[kind]()

    rng = random.Random(3)
    for tp, pp, dp, cp, ep in ((2, 3, 4, 2, 2), (4, 2, 6, 1, 3), (1, 2, 2, 2, 1)):
        for order in itertools.permutations(["tp", "cp", "dp", "pp"]):
            placement = list(range(tp * pp * dp * cp))
            rng.shuffle(placement)
            for ranks in (None, tuple(placement)):
                lay = ParallelLayout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, order=order, placement=ranks)
                for kind in GROUP_KINDS:
                    assert lay.groups(kind) == one_by_one(lay, kind), (tp, pp, dp, cp, ep, order, kind)
