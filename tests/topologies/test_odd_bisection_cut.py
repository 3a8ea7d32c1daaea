"""describe() re-checks the formula's recorded cut (``bisection_cut``) against the graph for an
odd server count too: floor(n/2) whole servers against the rest is a balanced cut (Dally &
Towles sec. 3.3), so its max flow bounds the bisection as the server halves' does."""

import pytest

import topologies as tp
from topologies.analysis import _balanced, bisection_max_flow

NDR = 50e9          # an NDR cable, bytes/s one direction (the torus's default link)


def _across_cut(g):
    order = tp.gpus(g)
    first = set(g.graph["bisection_cut"])
    return bisection_max_flow(g, [order[r] for r in sorted(first)], [n for r, n in enumerate(order) if r not in first])


# hand counts of the coordinate cut with wrap-around (each ring along a cut dimension cut twice):
# (3, 5): 7 of 15 cells, the 3 rings along the 5 cut twice (6) + the middle column's 3-ring split
# 1 | 2 (2) = 8 cables; (3, 5, 7): across the 7, 2 x 105 / 7 = 30 + its middle (3, 5) plane's 8 = 38
# (3, 7): 10 of 21 cells, 6 + 2 = 8 cables likewise. Rank-order halves, before: 600, 800, 500,
# 2,600 GB/s
@pytest.mark.parametrize("dims, server, cables", [((3, 5), "dgx_h100", 8), ((3, 7), "dgx_h100", 8),
                                                  ((3, 7), "host", 8), ((3, 5, 7), "host", 38)])
def test_servers_odd_torus_takes_the_coordinate_cut(dims, server, cables):
    g = tp.torus(dims, server=server)
    d = tp.describe(g)                  # a split middle plane: no formula, describe's max flow
    assert g.graph.get("bisection_bandwidth") is None
    per = 8 if server == "dgx_h100" else 1
    assert len(g.graph["bisection_cut"]) == len(tp.gpus(g)) // per // 2 * per   # floor(n/2) servers
    assert d["bisection_bandwidth"] <= cables * NDR
    assert d["bisection_bandwidth"] == pytest.approx(_across_cut(g))
    assert d["bisection_bandwidth"] < bisection_max_flow(g)     # the rank-order halves cost more
    assert "formula's halves" in d["bisection_method"]


def test_host_torus_3_5_7_router_nic_trade():
    """(3, 5, 7) of hosts, the 38-cable cut: the 45 cells with c2 < 3 and 7 of the middle
    plane c2 = 3 (its c1 < 2 and cell (0, 2)) on the first side, 52 = floor(105/2). Router
    (0, 2, 3) has 2 cables to its own side ((0, 1, 3), (0, 2, 2)) and 4 to the other ((1, 2, 3),
    (2, 2, 3), (0, 3, 3), (0, 2, 4)): with its router on the far side, the cut crosses its
    host's NIC (1) and those 2 instead of the 4, one cable less; no other router gains when
    moved alone (each of the other 104 has at most one cable more to the far side). So 37 x 50 GB/s
    = 1,850 (the rank-order halves gave 2,600)."""
    g = tp.torus((3, 5, 7), server="host")
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(37 * NDR)


@pytest.mark.parametrize("dims, wrap, cables", [((3, 5), True, 8), ((3, 5), False, 4), ((3, 5, 7), True, 38),
                                                ((3, 3, 5), True, 26), ((3, 7), False, 4)])
def test_exact_chip_torus_odd_count_keeps_the_formula(dims, wrap, cables):
    """A torus of chips, odd count: describe(exact=True) agrees with the formula (it took the
    rank-order halves' max flow: (3, 5, 7) 4,300 GB/s against the formula's 1,900)."""
    g = tp.torus(dims, wrap=wrap)
    assert g.graph["bisection_bandwidth"] == pytest.approx(cables * NDR)
    exact = tp.describe(g, exact=True)
    assert exact["bisection_bandwidth"] == pytest.approx(cables * NDR)
    assert _across_cut(g) == pytest.approx(cables * NDR)


def test_balanced_cut_rules():
    g = tp.rail_optimized(3)                                     # 3 DGX H100: 24 GPUs
    assert _balanced(g, tp.gpus(g), range(8))                    # 1 of 3 servers
    assert _balanced(g, tp.gpus(g), range(16))                   # 2 of 3
    assert not _balanced(g, tp.gpus(g), range(12))               # half of server 1
    assert not _balanced(g, tp.gpus(g), range(24))               # everything
    one = tp.rail_optimized(1)                                    # one server: GPU rank halves
    assert _balanced(one, tp.gpus(one), range(4)) and not _balanced(one, tp.gpus(one), range(3))
