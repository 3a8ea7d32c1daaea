"""nvl72_cluster's bisection formula against a hand count and the max flow on the same graph."""

import pytest

import topologies as tp

NDR = 50e9          # 400 Gb/s per direction: the nvl72 model's ConnectX-7, and an NDR cable
HDR = 25e9          # 200 Gb/s
NVLINK5 = 900e9     # NVLink 5, per GPU per direction (GB200)


@pytest.mark.parametrize("racks, link, expected", [
    (2, "ib_ndr", 1 * 72 * NDR),      # one rack's 72 NICs against the other's
    (2, "ib_xdr", 1 * 72 * NDR),      # an 800G cable still carries the 400G NIC: was 7,200 GB/s
    (3, "ib_ndr", 1 * 72 * NDR),      # whole racks: 1 against 2 (was 5,400 GB/s, half the NICs)
    (5, "ib_ndr", 2 * 72 * NDR),      # 2 against 3 (was 9,000)
    (7, "ib_hdr", 3 * 72 * HDR),      # the cable slower than the NIC
    (16, "ib_xdr", 8 * 72 * NDR),     # 2 units (was 57,600)
    (24, "ib_ndr", 12 * 72 * NDR),    # 3 units: the middle unit split (was None)
    (1, "ib_ndr", 36 * NVLINK5 + 36 * NDR),   # one rack: NVLink halves + half its NICs (was 1,800)
    (1, "ib_hdr", 36 * NVLINK5 + 36 * HDR),
])
def test_nvl72_cluster_bisection_is_whole_racks_at_the_nic_cable_rate(racks, link, expected):
    g = tp.nvl72_cluster(racks, link=link)
    formula = tp.describe(g)["bisection_bandwidth"]
    assert formula == pytest.approx(expected, rel=1e-12)
    # the same cut found by a max flow over the graph's edges (an independent computation)
    assert tp.describe(g, exact=True)["bisection_bandwidth"] == pytest.approx(expected, rel=1e-12)
    assert tp.bisection_max_flow(g) == pytest.approx(expected, rel=1e-12)


def test_nvl72_cluster_smaller_units_match_the_max_flow():
    for racks in (3, 4, 8, 12):
        g = tp.nvl72_cluster(racks, link="ib_xdr", racks_per_unit=4, radix=32)
        assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(racks // 2 * 72 * NDR, rel=1e-12)
        assert tp.bisection_max_flow(g) == pytest.approx(racks // 2 * 72 * NDR, rel=1e-12)


def test_one_rack_is_at_least_the_nvlink_domain_rail_optimized_reports():
    # rail_optimized(1, "nvl72") is the rack alone (no NIC fabric): its NVLink halves
    alone = tp.describe(tp.rail_optimized(1, server="nvl72"))["bisection_bandwidth"]
    assert alone == pytest.approx(36 * NVLINK5)
    assert tp.describe(tp.nvl72_cluster(1))["bisection_bandwidth"] == pytest.approx(alone + 36 * NDR)
