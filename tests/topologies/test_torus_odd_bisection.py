"""torus bisection when the longest dimension is odd: a balanced cut by coordinates, checked
against a hand count of the cables crossing it and a max flow between its halves."""

import networkx as nx
import pytest

import topologies as tp

NDR = 50e9


def _halves(g, first):
    order = tp.gpus(g)
    a = [n for n in order if first(g.nodes[n]["coords"])]
    b = [n for n in order if not first(g.nodes[n]["coords"])]
    return a, b


def test_3x4x5_is_the_cut_across_the_even_dimension():
    # 60 chips: halving each of the 15 rings of length 4 crosses 2 x 60 / 4 = 30 cables; the
    # rank-order halves (across the 5) crossed 50 and were reported before (2,500 GB/s)
    g = tp.torus((3, 4, 5))
    a, b = _halves(g, lambda c: c[1] < 2)
    assert len(a) == len(b) == 30
    assert tp.bisection_max_flow(g, a, b) == pytest.approx(30 * NDR)
    d = tp.describe(g)
    assert d["bisection_bandwidth"] == pytest.approx(30 * NDR)
    assert tp.describe(g, exact=True)["bisection_bandwidth"] == pytest.approx(30 * NDR)
    # with a server at every router the cut is the same 30 cables (the NICs of 30 DGX carry more)
    s = tp.torus((3, 4, 5), server="dgx_h100")
    assert tp.describe(s)["bisection_bandwidth"] == pytest.approx(30 * NDR)
    assert tp.describe(s, exact=True)["bisection_bandwidth"] == pytest.approx(30 * NDR)
    m = tp.torus((3, 4, 5), wrap=False)                     # a mesh: each row cut once
    assert tp.describe(m)["bisection_bandwidth"] == pytest.approx(15 * NDR)


def test_an_odd_dimension_cut_with_its_middle_plane_bisected_can_be_cheaper():
    # torus (2, 9), 18 chips: across the 2 every cell's doubled cable crosses (18 cables);
    # across the 9: cells x < 4, plus one of the two cells of plane x = 4. Each of the 2
    # rings of 9 is cut twice (4 cables) and the plane's pair of doubled cables (2): 6.
    g = tp.torus((2, 9))
    a, b = _halves(g, lambda c: c[1] < 4 or (c[1] == 4 and c[0] == 0))
    assert len(a) == 9 and len(b) == 9
    crossing = sum(d["cables"] if "cables" in d else 1 for u, v, d in g.edges(data=True)
                   if (u in a and v in b))
    assert crossing == 6
    assert tp.bisection_max_flow(g, a, b) == pytest.approx(6 * NDR)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(6 * NDR)
    # Kernighan-Lin finds no cheaper balanced partition of the chips
    u = nx.Graph((x, y) for x, y in g.edges())
    for x, y, d in g.edges(data=True):
        u[x][y]["weight"] = d.get("cables", 1)
    for seed in range(10):
        p, q = nx.algorithms.community.kernighan_lin_bisection(u, weight="weight", seed=seed)
        assert sum(d["weight"] for x, y, d in u.edges(data=True) if (x in p) != (y in p)) >= 6


@pytest.mark.parametrize("dims, cables", [
    ((5, 4), 10), ((7, 4), 10), ((4, 9), 10), ((6, 9), 14), ((8, 3), 6), ((4, 4), 8),
])
def test_formula_is_the_max_flow_between_its_halves(dims, cables):
    # hand counts: (5, 4) and (7, 4) across the 4: 2 x N / 4; (4, 9): across the 4 2 x 36 / 4 = 18,
    # across the 9 2 x 36 / 9 = 8 + the 4-ring's 2 = 10; (6, 9): 12 + 2 = 14 (across the 6: 18)
    g = tp.torus(dims)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(cables * NDR)
    assert tp.describe(g, exact=True)["bisection_bandwidth"] == pytest.approx(cables * NDR)


def test_a_split_plane_with_servers_is_left_to_the_max_flow():
    # one-NIC hosts: the split plane's first-half router is cheaper on the far side: its 1
    # NIC and its 1 ring cable back cross instead of its 3 cables (ring + doubled pair), so
    # 6 - 3 + 2 = 5 x 50 GB/s, not the 6 cables of the chips' cut
    g = tp.torus((2, 9), server="host")
    assert g.graph["bisection_bandwidth"] is None
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(5 * NDR)
