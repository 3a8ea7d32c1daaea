"""NICs with several fabric uplinks (multi_plane's NIC of one port per plane): ECMP spreads a
NIC's traffic over all of its uplinks, ecmp_hash pins each (sub-)flow to one, and the rates
follow from the ports' rates by hand."""

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.traffic import Flows

GPUS_PER_UNIT = 32 * 8          # a scalable unit: 32 DGX H100 servers of 8 GPUs


def _unit_to_unit():
    """Every GPU of unit 0 to the GPU of the same server position and rail in unit 1."""
    src = np.arange(GPUS_PER_UNIT)
    return Flows(src, src + GPUS_PER_UNIT, 1.0)


def _plane_shares(g, rm, planes):
    """(flows, planes): the fraction of each flow on the NIC -> plane-p switch links."""
    A = rm.to_scipy("csr")
    shares = np.zeros((rm.n_flows, planes))
    for i in range(rm.n_links):
        u, v = rm.links.src[i], rm.links.dst[i]
        if g.nodes[u].get("kind") == "nic" and g.nodes[v].get("kind") == "switch":
            row = A.getrow(i)
            shares[row.indices, g.nodes[v]["plane"]] += row.data
    return shares


@pytest.mark.parametrize("planes", [2, 3])
def test_ecmp_uses_every_plane_of_a_nic(planes):
    # HDR ports (25 GB/s each): a GPU gets planes x 25 GB/s, or its PCIe 5 x16 link to the NIC
    # (63.0 GB/s) when that is less; one plane alone would give 25 GB/s
    g = tp.multi_plane(64, planes=planes, link="ib_hdr")
    rm = fs.routing.route(g, _unit_to_unit(), "ecmp")
    expected = min(planes * tp.get_link("ib_hdr").bandwidth, tp.get_link("pcie5").bandwidth)
    assert np.asarray(fs.max_min_fair(rm).rates) == pytest.approx(np.full(GPUS_PER_UNIT, expected), rel=1e-9)
    # an equal share of every flow on each plane's uplink
    assert _plane_shares(g, rm, planes) == pytest.approx(np.full((GPUS_PER_UNIT, planes), 1 / planes))


def test_ecmp_hash_pins_each_sub_flow_to_one_plane():
    g = tp.multi_plane(64, planes=2, link="ib_hdr")
    one = _plane_shares(g, fs.routing.route(g, _unit_to_unit(), "ecmp_hash"), 2)
    # a flow on exactly one plane, and both planes in use
    assert set(np.round(one, 12).ravel().tolist()) == {0.0, 1.0}
    assert one.sum(axis=1) == pytest.approx(np.ones(GPUS_PER_UNIT))
    assert 0 < one[:, 0].sum() < GPUS_PER_UNIT
    # 8 sub-flows: each on one plane, so a flow's share of a plane is a multiple of 1/8
    eight = _plane_shares(g, fs.routing.route(g, _unit_to_unit(), "ecmp_hash", subflows=8), 2)
    assert np.allclose(eight * 8, np.round(eight * 8)) and eight.sum(axis=1) == pytest.approx(np.ones(GPUS_PER_UNIT))
    assert ((eight > 0) & (eight < 1)).any()
    # a flow pinned to one 25 GB/s port is held at 25 GB/s or less
    rates = np.asarray(fs.max_min_fair(fs.routing.route(g, _unit_to_unit(), "ecmp_hash")).rates)
    assert rates.max() <= tp.get_link("ib_hdr").bandwidth * (1 + 1e-9)


def test_all_to_all_on_two_planes_is_held_by_pcie_not_by_one_port():
    # 4 servers of 8 GPUs, one unit. With PXN a flow crosses to the GPU of the destination's rail
    # first, so the PCIe link from GPU r to NIC r carries the flows of the server's 8 GPUs to the
    # rail-r GPUs of the 3 other servers: 24 flows. One plane: the NIC's 50 GB/s port holds them
    # (50 / 24 each); two planes: 100 GB/s of ports, and the 63.0 GB/s PCIe link holds them.
    n = 32
    src, dst = np.divmod(np.arange(n * n), n)
    keep = src != dst
    flows = Flows(src[keep], dst[keep], 2.0**25)
    crossing = (src[keep] // 8) != (dst[keep] // 8)
    for planes, held_by in ((1, tp.get_link("ib_ndr").bandwidth), (2, tp.get_link("pcie5").bandwidth)):
        rm = fs.routing.route(tp.multi_plane(4, planes=planes), flows, "ecmp", pxn=True)
        rates = np.asarray(fs.max_min_fair(rm).rates)[crossing]
        assert rates == pytest.approx(np.full(crossing.sum(), held_by / 24), rel=1e-9)
    one, two = (fs.collective(tp.multi_plane(4, planes=p), "all_to_all", 2**30).time for p in (1, 2))
    assert two < one


def test_a_single_plane_routes_as_the_rail_optimized_fabric():
    # multi_plane(planes=1) is rail_optimized with its switches renamed: the same rates
    flows = Flows(np.arange(64), (np.arange(64) * 37 + 5) % 512, 1.0)
    flows = Flows(flows.src[flows.src != flows.dst], flows.dst[flows.src != flows.dst], 1.0)
    a = fs.max_min_fair(fs.routing.route(tp.multi_plane(64, planes=1), flows, "ecmp"))
    b = fs.max_min_fair(fs.routing.route(tp.rail_optimized(64), flows, "ecmp"))
    assert np.asarray(a.rates) == pytest.approx(np.asarray(b.rates), rel=1e-12)


def test_a_failed_plane_leaves_the_nic_its_other_port():
    # plane 0's cable of s0/nic0 failed: the flow from s0/gpu0 takes plane 1 whole, one HDR port
    # (25 GB/s); its neighbour s1/gpu0 keeps both ports (2 x 25 GB/s under ecmp; ecmp_hash pins
    # its one sub-flow to one port, 25 GB/s)
    g = tp.multi_plane(64, planes=2, link="ib_hdr")
    for u, v in (("s0/nic0", "plane0/su0/leaf0"), ("plane0/su0/leaf0", "s0/nic0")):
        g[u][v]["capacity"] = 0.0
    port = tp.get_link("ib_hdr").bandwidth
    flows = Flows([0, 8], [GPUS_PER_UNIT, GPUS_PER_UNIT + 8], 1.0)
    for policy, second in (("ecmp", 2 * port), ("ecmp_hash", port)):
        rm = fs.routing.route(g, flows, policy)
        assert np.asarray(fs.max_min_fair(rm).rates) == pytest.approx([port, second], rel=1e-9)
        assert _plane_shares(g, rm, 2)[0] == pytest.approx([0.0, 1.0])
