"""describe() of a graph read from an ASTRA-sim or SimAI file: the bisection its shape allows
(adv21b F2: an ASTRA 4 x 3 torus took the max flow between the rank-order halves, 1,000 GB/s,
where the cut across its 4-rings holds 600; SimAI graphs name their max flow an upper bound)."""

import pytest

import topologies as tp

GB = 1e9


def _net(tmp_path, topology, npus, bandwidth):
    path = tmp_path / "net.yml"
    path.write_text(f"topology: [ {', '.join(topology)} ]\nnpus_count: {list(npus)}\n"
                    f"bandwidth: {list(bandwidth)}\nlatency: {[500] * len(npus)}\n")
    return tp.from_astra_network(path, gigabyte=GB)


def _halves_flow(g, first_of):
    """Max flow between the NPUs where ``first_of(coords)`` and the rest."""
    first = [n for n in tp.gpus(g) if first_of(g.nodes[n]["coords"])]
    return tp.bisection_max_flow(g, first, [n for n in tp.gpus(g) if n not in first])


@pytest.mark.parametrize("topology, npus, bandwidth, links", [
    # hand counts, 100 GB/s a link unless said. A C4 x C3 torus halves across its 4-rings:
    # 3 rings x 2 links (600 GB/s); the rank-order halves cut 10 links (1,000)
    (["Ring", "Ring"], [4, 3], [100, 100], 6),
    # C3 x C5 (odd both): across the 5-rings, 3 rings x 2 links plus the middle 3-ring plane's 2
    (["Ring", "Ring"], [3, 5], [100, 100], 8),
    # C3 x C4 in the other order: across the 4-rings (the outer dimension), 3 x 2 = 6
    (["Ring", "Ring"], [3, 4], [100, 100], 6),
    # 1-D rings: 2 links; a ring of 2 is one link (ASTRA's devices keep one link a neighbour)
    (["Ring"], [8], [100], 2),
    (["Ring"], [7], [100], 2),
    (["Ring"], [2], [100], 1),
    # FullyConnected 8: 4 x 4 pairs; Switch 8: the switch on one side, 4 NPUs' links cut
    (["FullyConnected"], [8], [100], 16),
    (["Switch"], [8], [100], 4),
    # Ring 4 (100 GB/s) x Switch 4 (25 GB/s): across the switches, 4 blocks x 2 links at 25
    (["Ring", "Switch"], [4, 4], [100, 25], 8 * 25 / 100),
    # Ring 2 x FullyConnected 3 x Switch 3, 18 NPUs at 100 / 50 / 25 GB/s: across the ring, 9
    # links at 100 = 900; across the FC 3, 6 blocks x 1 x 2 links at 50 = 600 plus its middle
    # plane (a 2 x 3 of ring and switch: across the ring 3 x 100 = 300, across the switch 2 x 25
    # plus a ring of 2's 100 = 150) = 750; across the Switch 3, 6 blocks x 1 link at 25 = 150
    # plus its middle plane (2 x 3 of ring and FC: across the ring 300; across the FC, 2 blocks
    # x 2 links x 50 plus a ring of 2's 100 = 300) = 450, the least
    (["Ring", "FullyConnected", "Switch"], [2, 3, 3], [100, 50, 25], 4.5),
])
def test_astra_bisection_is_the_hand_count(tmp_path, topology, npus, bandwidth, links):
    g = _net(tmp_path, topology, npus, bandwidth)
    d = tp.describe(g)
    assert d["bisection_bandwidth"] == pytest.approx(links * 100 * GB, rel=1e-12)
    assert d["bisection_method"].startswith("formula")
    # never above the max flow between the rank-order halves (what describe() took before)
    assert d["bisection_bandwidth"] <= tp.bisection_max_flow(g) * (1 + 1e-12)
    # the max flow between the formula's halves is the formula (whole edges cut, nothing cheaper)
    assert tp.describe(g, exact=True)["bisection_bandwidth"] == pytest.approx(links * 100 * GB, rel=1e-12)


def test_astra_4x3_torus_is_600_not_1000(tmp_path):
    g = _net(tmp_path, ["Ring", "Ring"], [4, 3], [100, 100])
    assert tp.bisection_max_flow(g) == pytest.approx(1000 * GB)        # the rank-order halves
    assert _halves_flow(g, lambda c: c[0] < 2) == pytest.approx(600 * GB)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(600 * GB)
    assert "upper bound" not in tp.describe(g)["bisection_method"]      # across an even dimension


def test_astra_odd_torus_names_its_figure_an_upper_bound(tmp_path):
    d = tp.describe(_net(tmp_path, ["Ring", "Ring"], [3, 5], [100, 100]))
    assert "upper bound" in d["bisection_method"]


def test_an_edited_astra_graph_takes_the_smaller_max_flow_of_both_cuts(tmp_path):
    """Edited, describe() takes the max flow; the formula's halves are recorded, so a 4 x 3
    torus still reads 600 (the rank-order halves alone gave 1,000)."""
    g = _net(tmp_path, ["Ring", "Ring"], [4, 3], [100, 100])
    g["npu0/router"]["npu1/router"]["latency"] = 1e-6          # an edit that moves no capacity
    d = tp.describe(g)
    assert "edited" in d["bisection_method"]
    assert d["bisection_bandwidth"] == pytest.approx(600 * GB)


def test_simai_graph_names_its_max_flow_an_upper_bound(tmp_path):
    path = tmp_path / "topo"
    links = ["0 4", "1 4", "2 5", "3 5", "4 6", "5 6"]
    path.write_text("7 1 0 3 6 H100\n4 5 6\n" + "".join(f"{ln} 400Gbps 0.0005ms 0\n" for ln in links))
    d = tp.describe(tp.from_simai(path))
    # two GPUs a leaf, one 400G uplink a leaf: the halves {0, 1} | {2, 3} cross one uplink, 50 GB/s
    assert d["bisection_bandwidth"] == pytest.approx(400e9 / 8)
    assert d["bisection_method"].startswith("max flow between the server halves")
    assert "upper bound" in d["bisection_method"]


def test_a_switch_beside_another_dimension_names_its_figure_an_upper_bound(tmp_path):
    # adv21c F3: Switch 4 x Switch 3 records 600 GB/s (across the 4-switches: 3 blocks x 2 links);
    # a staircase cut does better: one whole row of 4 plus two more NPUs of its first column
    # cuts 1 link at each of the other 2 row switches and 3 column switches: 500 GB/s
    g = _net(tmp_path, ["Switch", "Switch"], [4, 3], [100, 100])
    d = tp.describe(g)
    assert d["bisection_bandwidth"] == pytest.approx(600 * GB)
    stair = {(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (0, 2)}
    assert _halves_flow(g, lambda c: tuple(c) in stair) == pytest.approx(500 * GB)
    assert "upper bound" in d["bisection_method"] and "Switch" in d["bisection_method"]
    assert "upper bound" not in tp.describe(_net(tmp_path, ["Switch"], [8], [100]))["bisection_method"]
