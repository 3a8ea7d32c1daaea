"""rail_optimized's two-tier spines: the fewest whose ports hold every leaf uplink, each leaf's
uplinks spread over them as evenly as the ports allow (adv17d F1: a prime uplink count once got
a spine per uplink, 31 DGX H100 31 spines of 8 ports used where 4 hold them). Expected counts
are worked by hand from the rule: a DGX H100 unit of n <= 32 servers has 8 leaves (one per
rail) of n uplinks each at 1:1, so ceil(8 n / 64) spines of 64 ports."""

import pytest

import topologies as tp


def _roles(g, role):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("role") == role]


# nodes, spines = ceil(8 n / 64), a leaf's n uplinks over them (sorted): n = q s + r gives r
# spines q + 1 cables and s - r spines q
@pytest.mark.parametrize("nodes, spines, spread", [
    (11, 2, [5, 6]),            # 88 uplinks / 64 -> 2;  11 = 2 x 5 + 1
    (22, 3, [7, 7, 8]),         # 176 / 64 -> 3;         22 = 3 x 7 + 1
    (23, 3, [7, 8, 8]),         # 184 / 64 -> 3;         23 = 3 x 7 + 2
    (26, 4, [6, 6, 7, 7]),      # 208 / 64 -> 4;         26 = 4 x 6 + 2
    (31, 4, [7, 8, 8, 8]),      # 248 / 64 -> 4;         31 = 4 x 7 + 3
])
def test_the_fewest_spines_hold_a_units_uplinks(nodes, spines, spread):
    g = tp.rail_optimized(nodes)
    leaves, spine_ids = _roles(g, "leaf"), _roles(g, "spine")
    assert (len(leaves), len(spine_ids)) == (8, spines)
    for leaf in leaves:
        # every leaf reaches every spine, its cables spread evenly
        assert sorted(g[leaf][s]["cables"] for s in spine_ids) == spread
    for s in spine_ids:
        assert sum(g[s][w]["cables"] for w in g.successors(s)) <= 64
    assert tp.describe(g)["cables_by_tier"]["leaf-spine"] == 8 * nodes


def test_a_server_more_never_makes_the_fabric_cheaper():
    # one unit: 8 leaves and ceil(8 n / 64) spines, a count that never falls as n grows, so
    # neither does the bill (31 DGX H100 cost 2.37 M USD against 1.42 M for 32 when 31 got a
    # spine per uplink)
    prices = [tp.bill(tp.rail_optimized(n)).price for n in range(2, 33)]
    assert all(b >= a for a, b in zip(prices, prices[1:]))


def test_multi_plane_planes_have_the_fewest_spines():
    # 31 DGX H100 on 2 planes: each plane a 31-server rail fabric, 8 leaves + ceil(248 / 64) = 4
    # spines
    g = tp.multi_plane(31, planes=2)
    assert (len(_roles(g, "leaf")), len(_roles(g, "spine"))) == (16, 8)


@pytest.mark.parametrize("nodes, ratio", [(64, 1.0), (64, 3.0), (128, 3.0), (192, 1.0), (22, 1.0)])
def test_recorded_bisection_is_the_max_flow(nodes, ratio):
    # 6 units (192) now get 48 x 32 / 64 = 24 spines, 2 or 1 cables a pair; at 3:1 a leaf's 11
    # uplinks spread over 3 (2 units) or 6 (4 units) spines: the recorded figure (a formula or,
    # for uneven spreads, a max flow) equals topologies' max flow between the server halves
    g = tp.rail_optimized(nodes, oversubscription=ratio)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(tp.bisection_max_flow(g), rel=1e-9)
