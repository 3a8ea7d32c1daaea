"""topologies.multi_plane: planes copies of one rail-optimised plane, each NIC port on its own."""

import pytest

import topologies as tp


@pytest.mark.parametrize("nodes,planes", [(32, 2), (64, 4), (40, 3)])
def test_counts(nodes, planes):
    one = tp.describe(tp.rail_optimized(nodes))
    g = tp.multi_plane(nodes, planes=planes)
    d = tp.describe(g)
    for role, n in one["switches_by_role"].items():
        assert d["switches_by_role"][role] == planes * n
    nics = nodes * 8
    assert d["cables_by_tier"]["access"] == planes * nics
    assert d["cables_by_tier"]["leaf-spine"] == planes * one["cables_by_tier"]["leaf-spine"]
    for s in (0, nodes - 1):
        for j in (0, 7):
            nic = f"s{s}/nic{j}"
            ups = [v for v in g[nic] if g.nodes[v]["kind"] == "switch"]
            assert sorted(g.nodes[v]["plane"] for v in ups) == list(range(planes))
            assert all(g.nodes[v]["rail"] == j for v in ups)
    assert tp.validate(g) is g


def test_bill_counts_a_faster_nic_per_plane_pair():
    b = tp.bill(tp.multi_plane(32, planes=2))
    assert b.count("connectx8_800g") == 256 and b.count("connectx7_400g") == 0
    assert b.count("quantum2_qm9700") == 2 * 12
