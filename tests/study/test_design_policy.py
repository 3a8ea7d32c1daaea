"""design(policy=): each link technology's fabrics timed with the routing policy named for it
(newuser21: every fabric was timed with ecmp, all equal-cost paths used fluidly as adaptive
routing spreads traffic, so RoCE with static hashing could not be told from InfiniBand with
adaptive routing). The reference: the same collective timed on the same fabric by hand."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver._design import _build, _server

_RING = {"op": "all_gather", "size": 2**28, "algorithm": "ring"}


def _by_hand(link, policy):
    g = _build("fat_tree", 16, _server(tp.get_server("dgx_h100"), 8, link), link, 1.0, 16)
    return fs.collective(g, "all_gather", 2**28, algorithm="ring", policy=policy).time


def test_a_links_policy_times_its_fabrics_and_only_those():
    r = fs.design(128, [_RING], families=("fat_tree",), links=("ib_ndr", "roce_400g"), radixes=(16,),
                  oversubscriptions=(1.0,), optics=("multimode",), policy={"roce_400g": "ecmp_hash"})
    got = {c.link: c for c in r.candidates}
    assert got["roce_400g"].policy == "ecmp_hash" and got["ib_ndr"].policy == "ecmp"
    hashed, adaptive = _by_hand("roce_400g", "ecmp_hash"), _by_hand("roce_400g", "ecmp")
    assert got["roce_400g"].time == pytest.approx(hashed, rel=1e-12)
    assert got["ib_ndr"].time == pytest.approx(_by_hand("ib_ndr", "ecmp"), rel=1e-12)
    # hashing puts the 128 ring flows on one path each of the radix-16 fat-tree: colliding ones
    # share a cable, where ecmp spreads every flow over all of them
    assert hashed > 1.5 * adaptive
    assert round(hashed / adaptive, 1) == 3.5            # the figure docs/design.md quotes
    assert "policy" in r.format() and "ecmp_hash" in r.format()
    assert {row["link"]: row["policy"] for row in r.to_rows()} == {"ib_ndr": "ecmp", "roce_400g": "ecmp_hash"}


def test_policy_is_checked():
    kw = dict(families=("rail_optimized",), links=("ib_ndr",), oversubscriptions=(1.0,), optics=("multimode",))
    with pytest.raises(ValueError, match="policy names links the grid does not search: 'roce_400g'"):
        fs.design(16, [("all_reduce", 2**20)], policy={"roce_400g": "ecmp_hash"}, **kw)
    with pytest.raises(ValueError, match="policy for 'ib_ndr' must be one of .*ecmp.*, got 'adaptive'"):
        fs.design(16, [("all_reduce", 2**20)], policy="adaptive", **kw)
    with pytest.raises(ValueError, match="a function workload chooses its own routing"):
        fs.design(16, lambda g: 1.0, policy="ecmp_hash", **kw)
    with pytest.raises(ValueError, match=r"the workload's own policy \(ecmp: .*design's policy 'ecmp_hash' disagree"):
        fs.design(16, {"model": "llama-3-8b", "tp": 8, "collective_options": {"policy": "ecmp"}},
                  policy="ecmp_hash", **kw)
    # adv21c: a collective item's own policy won over design's, and the candidate still read "ecmp"
    with pytest.raises(ValueError, match=r"the workload's own policy \(ecmp_hash: .*design's policy 'ecmp' disagree"):
        fs.design(16, [{"op": "all_reduce", "size": 2**20, "policy": "ecmp_hash"}], policy="ecmp", **kw)
    with pytest.raises(ValueError, match=r"workload item must be a dict .* or \(op, size\[, ranks\]\)"):
        fs.design(16, [("all_reduce", 2**20, range(8), "ring")], **kw)      # the 'ring' was dropped unseen


def test_an_items_own_policy_is_what_the_candidate_says():
    kw = dict(families=("fat_tree",), links=("roce_400g",), radixes=(16,), oversubscriptions=(1.0,),
              optics=("multimode",))
    (c,) = fs.design(128, [dict(_RING, policy="ecmp_hash")], **kw).candidates
    assert c.policy == "ecmp_hash" and c.time == pytest.approx(_by_hand("roce_400g", "ecmp_hash"), rel=1e-12)


@pytest.mark.parametrize("size", [0, -1, float("nan"), "1G", True])
def test_a_collective_size_is_refused_once_not_as_every_candidates_failure(size):
    # adv21a: each of these failed every candidate ("failed" rows, best() None) instead
    with pytest.raises(ValueError, match="size must be a finite number of bytes > 0"):
        fs.design(16, [("all_reduce", size)], families=("rail_optimized",), links=("ib_ndr",))


@pytest.mark.parametrize("name", ["dor", "minimal", "valiant", "ugal"])
def test_a_policy_of_a_fabric_design_never_builds_is_refused_once(name):
    # adv21c: these failed every candidate one by one; routing refuses them on any Clos or
    # DragonFly+ graph (the refusal below), so design refuses them before building anything
    g = _build("leaf_spine", 2, _server(tp.get_server("dgx_h100"), 8, "ib_ndr"), "ib_ndr", 1.0, 16)
    with pytest.raises(fs.routing.RoutingError):
        fs.collective(g, "all_reduce", 2**20, policy=name)
    kw = dict(families=("leaf_spine", "dragonfly_plus"), links=("ib_ndr",), oversubscriptions=(1.0,),
              optics=("multimode",))
    with pytest.raises(ValueError, match=rf"policy '{name}' routes a (torus|DragonFly) .*design builds none"):
        fs.design(16, [("all_reduce", 2**20)], policy=name, **kw)
    with pytest.raises(ValueError, match=rf"policy '{name}' routes"):
        fs.design(16, [{"op": "all_reduce", "size": 2**20, "policy": name}], **kw)
    (c,) = fs.design(16, [("all_reduce", 2**20)], policy="shortest", **dict(kw, families=("leaf_spine",))).candidates
    assert c.status == "ok" and c.policy == "shortest"
