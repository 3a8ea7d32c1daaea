"""topologies.bill: counts against hand counts on small fabrics and NVIDIA's published DGX
SuperPOD reference architectures; prices and power from the catalogue or the user's."""

import math
import re

import pytest

import topologies as tp
from topologies import Gbit, Part


def test_fat_tree_4_by_hand():
    # k=4: 16 hosts, 8 edge + 8 aggregation + 4 core switches. Host cables stay in the rack
    # (copper); edge-agg and agg-core are 16 optical cables each. Switch-side twin-port
    # modules, per switch and layer ceil(optical ports / 2): edge 2 up -> 1 (x8), aggregation
    # 2 down -> 1 and 2 up -> 1 (x8), core 4 -> 2 (x4): 8 + 16 + 8 = 32 = 32 links x 2 ends / 2.
    b = tp.bill(tp.fat_tree(4))
    assert b.count("quantum2_qm9700") == 20
    assert b.count("dac") == 16 and b.count("fiber_mpo") == 32
    assert b.count("osfp_800g_twin") == 32
    assert b.count("connectx7_400g") == 16
    assert b.links == {("access", "copper", 400): 16, ("edge-agg", "optical", 400): 16,
                       ("agg-core", "optical", 400): 16}


def test_rail_optimized_one_unit_by_hand():
    # 32 DGX H100: 256 NICs on 8 leaves (optical: a leaf serves a rail across racks), 4 spines.
    # DGX side: 8 NICs behind 4 twin-port cages -> 4 modules per server = 128.
    # Leaf side: 32 down -> 16 modules, 32 up -> 16; spine: 64 -> 32. 8*32 + 4*32 = 384.
    b = tp.bill(tp.rail_optimized(32))
    assert b.count("quantum2_qm9700") == 12
    assert b.count("connectx7_400g") == 256
    assert b.count("fiber_mpo") == 512 and b.count("dac") == 0
    assert b.count("osfp_800g_twin") == 128 + 8 * 32 + 4 * 32
    # a DGX H200 has the same four twin-port OSFP cages for its eight NICs (DGX BasePOD RA)
    assert tp.bill(tp.rail_optimized(32, server="dgx_h200")).count("osfp_800g_twin") == 128 + 8 * 32 + 4 * 32
    # totals are the sums of count x unit price, per GPU over 256 GPUs
    expect = sum(line.count * line.part.price for line in b.lines)
    assert b.price == pytest.approx(expect) and b.price_per_gpu == pytest.approx(expect / 256)
    assert sum(t["price"] for t in b.by_tier().values()) == pytest.approx(b.price)


@pytest.mark.parametrize("units,nodes,leaf,spine", [(1, 31, 8, 4), (2, 63, 16, 8), (4, 127, 32, 16)])
def test_dgx_superpod_h100_reference_architecture(units, nodes, leaf, spine):
    # NVIDIA DGX SuperPOD H100 RA (RA-11333-001), "Network Fabrics", Table 4 "Compute fabric
    # component count" (docs.nvidia.com/dgx-superpod/reference-architecture-scalable-
    # infrastructure-h100/latest/network-fabrics.html, read 2026-12-04): 1/2/4 SU hold
    # 31/63/127 DGX (one slot is the UFM appliance), leaf 8/16/32, spine 4/8/16 QM9700;
    # "compute and UFM" cables 252/508/1020 (= DGX x 8 + 4 UFM links, which the graph does
    # not model), spine-leaf cables 256/512/1024 (the fabric cabled for full SUs).
    b = tp.bill(tp.rail_optimized(nodes, full_units=True))
    assert b.count("quantum2_qm9700") == leaf + spine
    assert b.links[("access", "optical", 400)] + 4 == {1: 252, 2: 508, 4: 1020}[units]
    assert b.links[("leaf-spine", "optical", 400)] == 256 * units


@pytest.mark.parametrize("units,leaf,spine,core", [(2, 16, 8, 0), (4, 32, 16, 0), (8, 64, 32, 0),
                                                   (16, 128, 128, 64)])
def test_dgx_superpod_b200_reference_architecture(units, leaf, spine, core):
    # NVIDIA DGX SuperPOD B200 RA, "DGX SuperPOD Architecture", "Larger DGX SuperPOD
    # component counts" (docs.nvidia.com/dgx-superpod/reference-architecture-scalable-
    # infrastructure-b200, read 2026-12-04): SU 2/4/8/16 -> nodes 64/128/256/512, leaf/spine/
    # core as parametrised, node-leaf = leaf-spine (= spine-core where present) = GPU count.
    nodes = 32 * units
    b = tp.bill(tp.rail_optimized(nodes, server="dgx_b200"))
    assert b.count("quantum2_qm9700") == leaf + spine + core
    gpus = nodes * 8
    assert b.links[("access", "optical", 400)] == gpus
    assert b.links[("leaf-spine", "optical", 400)] == gpus
    assert b.links.get(("spine-core", "optical", 400), 0) == (gpus if core else 0)


def test_user_prices_power_reach_and_parts():
    g = tp.leaf_spine(2, 1, 4)
    base = tp.bill(g)
    mine = tp.bill(g, prices={"quantum2_qm9700": 1000.0}, power={"dac": 0.0})
    sw = base.count("quantum2_qm9700")
    delta = sw * (tp.get_part("quantum2_qm9700").price - 1000.0)
    assert base.price - mine.price == pytest.approx(delta)
    assert {l.part.price_source for l in mine.lines if l.part.name == "quantum2_qm9700"} == {"user"}
    optical = tp.bill(g, reach={"access": "optical"})
    assert optical.count("dac") == 0 and optical.count("fiber_mpo") == 16
    # one 400G module per host-side NIC port (single-port OSFP), twin-port at the leaves
    assert optical.count("osfp_400g") == 8
    with pytest.raises(ValueError, match="reach\\['access'\\] must be 'copper' or 'optical'"):
        tp.bill(g, reach={"access": "laser"})
    with pytest.raises(ValueError, match="unknown part 'nope'"):
        tp.bill(g, prices={"nope": 1.0})
    # a NIC billed as every switch (or a switch as every NIC), a tier spelled otherwise, a cable
    # count of -1: each priced silently before (78,256 / 403,856 USD for 133,456)
    ls = tp.leaf_spine(2, 1, 4)
    for kw, said in ((dict(switch_part="connectx7_400g"), "switch_part must be a switch part"),
                     (dict(nic_part="quantum2_qm9700"), "nic_part must be a nic part"),
                     (dict(reach={"leaf_spine": "copper"}), "'leaf_spine' is no cable tier"),
                     (dict(reach={"nvlink": "optical"}), "'nvlink' is inside a server")):
        with pytest.raises(ValueError, match=said):
            tp.bill(ls, **kw)
    for *_, d in ls.edges(data=True):
        if d.get("tier") == "leaf-spine":
            d["cables"] = -1
    with pytest.raises(ValueError, match="cables must be an integer >= 1"):
        tp.bill(ls)
    with pytest.raises(ValueError, match="price_source and power_source"):
        Part("x", "switch", 1.0, 1.0, "", "")
    small = tp.register_part(Part("test_sw16", "switch", 100.0, 10.0, "test quote", "test",
                                  ports=16, port_rate=400 * Gbit, family="test-only"), overwrite=True)
    b = tp.bill(tp.fat_tree(4), switch_part=small)
    assert b.count("test_sw16") == 20 and b.count("quantum2_qm9700") == 0


def test_every_builtin_part_names_its_sources():
    for name in tp.part_names():
        p = tp.get_part(name)
        assert p.price_source and p.power_source
        assert p.price_estimate == p.price_source.startswith("estimate")


def test_switch_model_by_ports_and_oversized_switches():
    # 70 hosts + 70 uplinks (140 ports) and a 70-port spine: more than a 64-port QM9700, within
    # the 144 ports of a Quantum-X800 Q3400 running NDR
    b = tp.bill(tp.leaf_spine(1, 1, 70))
    assert b.count("quantum_x800_q3400") == 2 and b.count("quantum2_qm9700") == 0 and not b.warnings
    # 100 + 100 ports: more than any catalogue box -> ceil(200 / 144) boxes and a warning
    b = tp.bill(tp.leaf_spine(1, 1, 100))
    assert b.count("quantum_x800_q3400") == math.ceil(200 / 144) + 1 == 3
    assert len(b.warnings) == 1 and "more than the 144 of a quantum_x800_q3400" in b.warnings[0]


def test_nvl72_trays_and_roce():
    b = tp.bill(tp.rail_optimized(2, server="nvl72"))
    assert b.count("nvlink_switch_tray") == 2 * 9     # GB200 NVL72: 9 switch trays per rack
    r = tp.bill(tp.rail_optimized(32, link="roce_400g"))
    # 8 leaves of 32 + 32 ports and 4 spines of 64: the 64 x 400GbE SN5400 holds them
    assert r.count("spectrum4_sn5400") == 12 and r.count("quantum2_qm9700") == 0
    assert math.isclose(r.price_per_gpu * r.gpus, r.price)


def test_published_prices_carry_address_date_and_figure():
    # a price that is not an estimate names its address, a date and the figure as published
    sourced = [n for n in tp.part_names() if not tp.get_part(n).price_estimate]
    assert {"quantum2_qm9700", "osfp_800g_twin", "osfp_800g_twin_dr", "osfp_400g"} <= set(sourced)
    for name in sourced:
        src = tp.get_part(name).price_source
        assert "http" in src and re.search(r"20\d\d", src) and '"' in src, name
    # the published figure is the one used: the QM9700 at the table's $36k; the DR8 at the
    # midpoint of $1,100-1,400; the twin-port multimode at 1.5e6 / 2,048 modules
    assert tp.get_part("quantum2_qm9700").price == 36000.0
    assert tp.get_part("osfp_800g_twin_dr").price == (1100 + 1400) / 2
    assert tp.get_part("osfp_800g_twin").price == math.floor(1.5e6 / 2048)
    assert tp.get_part("osfp_800g_twin").estimated is False


def test_estimates_are_marked_on_the_bill():
    b = tp.bill(tp.rail_optimized(32))
    est = sum(l.price for l in b.lines if l.part.price_estimate)
    assert b.estimated and b.estimated_share == pytest.approx(est / b.price)
    nic = next(r for r in b.to_rows() if r["part"] == "connectx7_400g")
    assert nic["price_estimated"] is True
    line = next(x for x in b.format().splitlines() if x.startswith("NIC connectx7_400g"))
    assert "*" in line                          # an estimated price is starred
    line = next(x for x in b.format().splitlines() if x.startswith("switch quantum2_qm9700"))
    assert line.split()[-2].endswith("0")       # the switch's published price is not


def test_a_leafs_slower_uplinks_take_their_own_rates_optics():
    # XDR leaves with NDR uplinks: the leaf end of each 400G uplink was billed an 800G module
    # (its fastest port's rate) where the spine end got half a 400G twin-port module
    b = tp.bill(tp.leaf_spine(2, 2, 4, link="ib_xdr", uplink="ib_ndr"))
    optics = {(line.part.name, line.tier): line.count for line in b.lines if "transceiver" in line.item}
    uplinks = tp.tier_cables(tp.leaf_spine(2, 2, 4, link="ib_xdr", uplink="ib_ndr"), "leaf-spine")
    cables = sum(tp.leaf_spine(2, 2, 4, link="ib_xdr", uplink="ib_ndr")[u][v].get("cables", 1) for u, v in uplinks)
    assert optics.get(("osfp_800g_twin", "leaf-spine")) == 2 * cables // 2      # both ends, two ports a module
    assert not any(tier == "leaf-spine" and name != "osfp_800g_twin" for name, tier in optics)


def test_unregister_part_gives_the_catalogue_back():
    # a cheaper 64 x 400G InfiniBand switch takes every later bill's choice (docs/design.md);
    # removed, the bill is the Quantum-2's again: 12 switches of a 32-DGX unit (by hand above)
    g = tp.rail_optimized(32)
    base = tp.bill(g)
    tp.register_part(Part("test_cheap_ib", "switch", 1000.0, 10.0, "test quote", "test", ports=64,
                          port_rate=400 * Gbit, family="infiniband"), overwrite=True)
    try:
        chosen = tp.bill(g)
        assert chosen.count("test_cheap_ib") == 12 and chosen.count("quantum2_qm9700") == 0
    finally:
        removed = tp.unregister_part("test_cheap_ib")
    assert removed.price == 1000.0 and "test_cheap_ib" not in tp.part_names()
    after = tp.bill(g)
    assert after.count("quantum2_qm9700") == 12 and after.price == pytest.approx(base.price)
    with pytest.raises(ValueError, match="part 'test_cheap_ib' is not registered"):
        tp.unregister_part("test_cheap_ib")
    with pytest.raises(ValueError, match="part 'dac' is built in"):
        tp.unregister_part("dac")
