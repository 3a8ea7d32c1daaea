"""Which network to buy: upgrades priced from the bill, the presets of published clusters
(Meta's 24K-GPU RoCE cluster, GB200 NVL72 racks scaled out) counted against their published
shapes, and the article's cost column."""

import math

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.upgrade import Upgrade, tier_upgrades, upgrade_cost


def test_upgrade_plan_prices_upgrades_from_the_bill():
    g = tp.rail_optimized(8)
    work = dict(op="all_to_all", size=2**24)
    ups = tier_upgrades(g)
    # inside the servers nothing is billed: NVLink and PCIe cost 0 and are left out of the plan
    assert upgrade_cost(g, ups["nvlink"]) == 0.0 and upgrade_cost(g, ups["pcie"]) == 0.0
    access = upgrade_cost(g, ups["access"])
    plan = fs.upgrade_plan(g, work, budget=access)       # the budget buys exactly one: access
    assert plan["upgrade"].tolist() == ["access"] and plan["cost"].iloc[0] == access
    before = fs.collective(g, "all_to_all", 2**24).time
    after = fs.collective(ups["access"].apply(g), "all_to_all", 2**24).time
    assert plan["saved_s"].iloc[0] == pytest.approx(before - after)
    assert plan["saved_per_cost"].iloc[0] == pytest.approx((before - after) / access)
    # a new technology re-chooses the parts: NDR -> XDR on the spine layer needs 800G switches
    xdr = upgrade_cost(g, Upgrade("leaf-spine", tech="ib_xdr"))
    assert xdr > upgrade_cost(g, ups["leaf-spine"]) > 0
    with pytest.raises(ValueError, match="cost must be 'bill'"):
        fs.upgrade_plan(g, work, budget=1.0, cost="quote")


def _switches(g, role):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("role") == role]


def _fabric_cables(g, tier):
    return sum(d.get("cables", 1) for u, v, d in g.edges(data=True) if d["tier"] == tier) // 2


def test_meta_24k_has_the_llama3_papers_shape():
    g = tp.meta_24k()
    b = tp.bill(g)
    # Llama 3 paper 3.3.1: 16 GPUs per ToR, 192 racks per 3,072-GPU pod, 8 pods = 24K GPUs
    assert b.gpus == 24576 == 16 * 192 * 8
    assert len(_switches(g, "leaf")) == 192 * 8 and len(_switches(g, "spine")) == 16 * 8
    assert len(_switches(g, "core")) == 16
    # full bisection inside a pod: a ToR has as many uplinks as GPUs; 1:7 above the pods
    assert _fabric_cables(g, "access") == 24576 and _fabric_cables(g, "leaf-spine") == 1536 * 16
    up = math.ceil(192 / 7)                                          # 28 uplinks per cluster switch
    assert _fabric_cables(g, "spine-core") == 128 * up == 3584
    assert 6.5 < g.graph["params"]["aggregation_oversubscription"] == 192 / 28 <= 7
    # the two servers of a rack sit under one ToR; the ToR cables stay in the rack (copper)
    tor = {v for n, d in g.nodes(data=True) if d["kind"] == "nic" and d.get("server") in (0, 1) for v in g[n]
           if g.nodes[v]["kind"] == "switch"}
    assert tor == {"u0/leaf0"}
    assert b.links[("access", "copper", 400)] == 24576 and b.count("dac") == 24576
    assert any("128 switches" in w for w in b.warnings)              # cluster switches are chassis
    # ToRs (32 ports) on the 64-port SN5400; cluster (220) and aggregation (224) switches as
    # two 128-port SN5600 each
    assert b.count("spectrum4_sn5400") == 1536 and b.count("spectrum4_sn5600") == 2 * 128 + 2 * 16


def test_meta_small_validates_and_rejects_bad_sizes():
    g = tp.meta_24k(pods=2, racks_per_pod=4)
    tp.validate(g)
    assert g.graph["bisection_bandwidth"] == 1 * 16 * math.ceil(4 * 16 / 16 / 7) * tp.get_link("roce_400g").bandwidth
    with pytest.raises(ValueError, match="cluster_switches"):
        tp.meta_24k(cluster_switches=32)
    with pytest.raises(ValueError, match="pods"):
        tp.meta_24k(pods=0)


def test_nvl72_cluster_counts():
    g = tp.nvl72_cluster(16)                                         # 2 scalable units of 8 racks
    tp.validate(g)
    b = tp.bill(g)
    assert b.gpus == 16 * 72
    assert len(_switches(g, "leaf")) == 2 * 18 and len(_switches(g, "spine")) == 2 * 18
    assert len(_switches(g, "core")) == 18 * math.ceil(2 * 32 / 64)
    assert b.count("nvlink_switch_tray") == 16 * 9                   # GB200 NVL72: 9 trays per rack
    for tier in ("access", "leaf-spine", "spine-core"):
        assert _fabric_cables(g, tier) == 16 * 72
    # leaf j of a unit serves compute tray j (4 NICs) of each of its 8 racks: 32 ports down
    leaf = "u1/leaf5"
    down = [n for n in g.predecessors(leaf) if g.nodes[n]["kind"] == "nic"]
    assert len(down) == 32 and {g.nodes[n]["server"] for n in down} == set(range(8, 16))
    # optics: NICs leave the rack, twin-port modules on the leaves, one 400G module per NIC
    assert b.count("osfp_400g") == 16 * 72 and b.count("fiber_mpo") == 3 * 16 * 72
    # the largest published size: 128 racks, 9,216 GPUs
    assert tp.nvl72_cluster(128).graph["params"]["gpus"] == 9216
    with pytest.raises(ValueError, match="multiple"):
        tp.nvl72_cluster(12)


def test_the_articles_cost_column_from_the_bill():
    from flowsolver.study import cost_study, format_costs, network_study

    rows = network_study(global_batch=64, networks=("ideal", "ib_ndr", "eth_100g"))
    gpu = tp.get_part("hgx_h100_server").price / 8
    ndr, eth = cost_study(rows, gpu_price=gpu)                       # the ideal network is not billed
    # hand counts for 8 DGX H100 (64 NICs), 8 rail leaves + 1 spine, 64 + 64 cables:
    # NDR: 9 QM9700, 64 ConnectX-7, 128 fibres, 128 twin-port modules
    price = {n: tp.get_part(n).price for n in tp.part_names()}
    assert ndr.bill.price == 9 * price["quantum2_qm9700"] + 64 * price["connectx7_400g"] \
        + 128 * price["fiber_mpo"] + 128 * price["osfp_800g_twin"]
    # Ethernet 100G: 9 SN4600C, 64 100G NICs, 128 fibres, one 100G module per cable end (256)
    assert eth.bill.price == 9 * price["spectrum3_sn4600c"] + 64 * price["nic_100g"] \
        + 128 * price["fiber_mpo"] + 256 * price["optics_100g"]
    step = rows[1].step
    # the server price holds its InfiniBand cards ("includes the infiniband cards"): capex counts
    # the bill without its 64 ConnectX-7 (Ethernet: without its 64 100G NICs)
    assert ndr.tokens_per_s_per_musd == pytest.approx(
        step.tokens_per_s / (ndr.bill.price - 64 * price["connectx7_400g"] + 64 * gpu) * 1e6)
    assert eth.capex == pytest.approx(eth.bill.price - 64 * price["nic_100g"] + 64 * gpu)
    alone = cost_study(rows, gpu_price=gpu, gpu_price_includes_nics=False)[0]
    assert alone.capex == pytest.approx(ndr.bill.price + 64 * gpu)
    assert cost_study(rows)[0].capex == ndr.bill.price                 # the network alone keeps its NICs
    assert ndr.article_tokens_per_s == 3800.0 and eth.article_tokens_per_s == 1800.0
    assert "Ethernet 100G" in format_costs([ndr, eth])
    with pytest.raises(ValueError, match="gpu_price"):
        cost_study(rows, gpu_price=-1.0)


def test_cli_design_with_a_gpu_price(capsys):
    import json

    from flowsolver.cli import main

    assert main(["design", "--gpus", "64", "--size", "64M", "--families", "rail_optimized", "--links", "ib_ndr",
                 "--oversubscriptions", "1", "--optics", "multimode", "--gpu-price", "1000", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    # the GPU price includes the servers' NICs (as the catalogue's does): 64 ConnectX-7 at
    # 2,200 USD not bought twice
    assert row["capex"] == pytest.approx(row["price"] - 64 * 2200.0 + 64 * 1000.0)
    assert row["tokens_per_s"] is None or math.isnan(row["tokens_per_s"])    # a collective has no tokens


def test_design_sizes_a_dragonfly_plus():
    from flowsolver._design import _build, _server

    dgx = _server(tp.get_server("dgx_h100"), 8, "ib_ndr")
    g = _build("dragonfly_plus", 512, dgx, "ib_ndr", 1.0, 64)          # 4,096 NICs, 64-port switches
    p = g.graph["params"]
    # 32 host ports per leaf (4 DGX), one uplink per spine (32), the fewest groups whose leaves
    # fit a spine's 32 down ports and whose global ports divide among the others: 8 groups of
    # 16 leaves, 21 global links per spine (32 x 21 = 672 = 7 x 96)
    assert (p["groups"], p["leaves"], p["spines"], p["hosts_per_leaf"], p["global_per_spine"]) == (8, 16, 32, 32, 21)
    assert p["groups"] * p["leaves"] * p["hosts_per_leaf"] == 4096
    switches = [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == 8 * (16 + 32)
    assert sum(d.get("cables", 1) for *_, d in g.edges(data=True) if d["tier"] == "global") // 2 == 8 * 32 * 21 // 2
    # radix 8: a DGX's 8 NICs over two leaves of 4 host ports (refused until adv21a F1, a server
    # had to fit one leaf); 16 NICs: 4 leaves of 4 uplinks, 2 groups of 2 leaves, 2 spines a group
    # (each leaf 2 cables to each: 4 + 2 x 2 = 8 ports), a spine's 4 down ports and 4 global
    p = _build("dragonfly_plus", 2, dgx, "ib_ndr", 1.0, 8).graph["params"]
    assert (p["groups"], p["leaves"], p["spines"], p["hosts_per_leaf"], p["global_per_spine"]) == (2, 2, 2, 4, 4)
    assert p["leaf_radix"] == p["spine_radix"] == 8 and p["switches"] == 8


def test_design_places_the_job_on_the_first_host_ports_of_a_larger_fabric():
    # A fat-tree (k^3/4 host ports) or a leaf-spine (whole leaves) that its generator filled
    # with more servers than asked was failed ("the fabric holds 128 GPUs, not the 64 asked"):
    # a fat-tree was a candidate only at k^3/4 NICs. The job's servers now take the first host
    # ports, every switch and switch cable is billed, NICs and host cables only for the job.
    price = {n: tp.get_part(n).price for n in ("quantum2_qm9700", "connectx7_400g", "dac", "fiber_mpo",
                                               "osfp_800g_twin")}
    dgx = tp.get_server("dgx_h100").with_(nic=None)
    dgx4 = tp.get_server("dgx_h100").with_(name="dgx_h100_4nic", nics=4, nic=None)
    cases = [
        # 80 GPUs of 4-NIC DGX on 8-port switches: 40 NICs, more than two tiers hold (8 leaves of
        # 4 ports: 32), so a k = 8 fat-tree of ceil(40 / 16) = 3 pods (12 servers' ports, 10 placed):
        # 12 edge + 12 aggregation + 4 core groups of ceil(3 x 4 / 8) = 2 = 32 switches; 3 x 16
        # edge-agg and 3 x 16 agg-core fibres, each with half a twin-port module at each end
        (80, "fat_tree", 8, 4, tp.fat_tree(8, pods=3, server=dgx4), 32, 48 + 48),
        # 72 NICs, 32 host ports a leaf: 3 leaves (12 DGX) of 32 uplinks, ceil(3 x 32 / 64) = 2 spines
        (72, "leaf_spine", 64, 8, tp.leaf_spine(3, 2, 32, uplinks=32, server=dgx), 5, 3 * 32),
    ]
    for gpus, family, radix, nics, full, switches, fibres in cases:
        r = fs.design(gpus, [("all_reduce", 2**26)], families=(family,), links=("ib_ndr",), oversubscriptions=(1.0,),
                      radixes=(radix,), nics=(nics,), optics=("multimode",))
        c = r.candidates[0]
        assert (c.status, c.gpus, c.switches, r.timed) == ("ok", gpus, switches, 1), c.message
        assert c.price == pytest.approx(switches * price["quantum2_qm9700"] + gpus * nics // 8 * (price["connectx7_400g"]
                                        + price["dac"]) + fibres * (price["fiber_mpo"] + price["osfp_800g_twin"]))
        assert "room to grow" in c.message and f"{gpus // 8} placed" in c.message
        # the empty ports carry nothing: the job times as on the full fabric with the other servers idle
        assert c.time == pytest.approx(fs.collective(full, "all_reduce", 2**26, ranks=range(gpus)).time, rel=1e-9)


@pytest.mark.parametrize("old, new", [("efa_400g", "ib_ndr"), ("efa_100g", "eth_100g"), ("ib_ndr", "efa_400g")])
def test_a_technology_upgrade_times_as_a_fabric_built_with_it(old, new):
    # the old technology's transport (EFA's plugin latency) and efficiency go with it: the
    # upgraded fabric is timed as one generated with the new technology
    from flowsolver.upgrade import what_if

    for size in (2**16, 2**26):
        row = what_if(tp.rail_optimized(2, link=old), dict(op="all_reduce", size=size),
                      {"up": Upgrade(old, tech=new)}).iloc[0]
        built = fs.collective(tp.rail_optimized(2, link=new), "all_reduce", size).time
        assert row["exact_s"] == pytest.approx(built, rel=1e-12)
    up = Upgrade(old, tech=new).apply(tp.rail_optimized(2, link=old))
    ref = tp.rail_optimized(2, link=new)
    assert {(d.get("transport"), d.get("efficiency")) for *_, d in up.edges(data=True) if d["tech"] == new} == \
        {(d.get("transport"), d.get("efficiency")) for *_, d in ref.edges(data=True) if d["tech"] == new}


def test_a_repeated_doubling_is_billed_for_the_cables_it_buys():
    # doubling leaf-spine links of c cables buys c more, the second doubling 2c more: it costs what
    # billing the twice-bought graph says beyond the once-bought one (it was charged as the first)
    from flowsolver.upgrade import _as_bought

    g = tp.leaf_spine(4, 1, 8, uplinks=2)
    up = Upgrade("leaf-spine", factor=2.0)
    once, twice = _as_bought(g, up), _as_bought(_as_bought(g, up), up)
    cables = {d.get("cables", 1) for *_, d in g.edges(data=True) if d["tier"] == "leaf-spine"}
    assert {d["cables"] for *_, d in twice.edges(data=True) if d["tier"] == "leaf-spine"} == {4 * c for c in cables}
    first, second = tp.bill(once).price - tp.bill(g).price, tp.bill(twice).price - tp.bill(once).price
    assert second > first > 0
    plan = fs.upgrade_plan(g, dict(op="all_to_all", size=2**28), budget=1e9, upgrades={"ls": up}, repeat=True)
    assert plan["cost"].tolist()[:2] == pytest.approx([first, second])
    assert plan["spent"].iloc[1] == pytest.approx(first + second)


def test_a_technology_after_a_factor_keeps_the_factor():
    # 100 GB/s NDR links doubled, then made XDR (100 -> 200 GB/s a cable): 400 GB/s, in either order
    g = tp.leaf_spine(4, 1, 8)
    double, xdr = Upgrade("leaf-spine", factor=2.0), Upgrade("leaf-spine", tech="ib_xdr")
    ndr, new = tp.get_link("ib_ndr").bandwidth, tp.get_link("ib_xdr").bandwidth
    for a, b in ((double, xdr), (xdr, double)):
        caps = {d["capacity"] for *_, d in b.apply(a.apply(g)).edges(data=True) if d["tier"] == "leaf-spine"}
        base = {d["capacity"] for *_, d in g.edges(data=True) if d["tier"] == "leaf-spine"}
        assert caps == {c * 2 * new / ndr for c in base}


@pytest.mark.parametrize("racks", [1, 2])
def test_fewer_racks_than_a_unit_have_spines_every_leaf_reaches(racks):
    # 18 spines for a rack's 4 uplinks a leaf: 36 of 153 leaf pairs of 2 racks shared no spine,
    # and describe's diameter of 4 hops was 6 by a search (10 for one rack)
    from topologies.analysis import _bfs_diameter, _endpoints_and_fabric
    g = tp.nvl72_cluster(racks)
    spines = _switches(g, "spine")
    assert len(spines) == 4 * racks
    for leaf in _switches(g, "leaf"):
        assert set(g.successors(leaf)) >= set(spines)
    ends, fabric = _endpoints_and_fabric(g)
    assert _bfs_diameter(fabric, ends) == tp.describe(g)["network_diameter"] == 4


def test_a_budget_that_is_no_number_is_named_before_anything_is_timed():
    # budget=None or "1e6" reached np.isfinite: "ufunc 'isfinite' not supported for the input
    # types", naming nothing, after the bill and the first timing had run
    import re

    import numpy as np

    g = tp.fat_tree(4)
    calls = []

    def work(graph):
        calls.append(1)
        return fs.collective(graph, "all_to_all", 2**20)

    for bad in (None, "1e6", [1e6], np.array([1.0, 2.0]), math.nan, math.inf, -1.0, True):
        want = f"budget must be a finite number >= 0 (in the unit of cost: USD with cost='bill'), got {bad!r}"
        with pytest.raises(ValueError, match=f"^{re.escape(want)}$"):
            fs.upgrade_plan(g, work, budget=bad)
    assert calls == []
    # a NumPy number is a number: one upgrade at 1 per upgrade, as with the float
    plan = fs.upgrade_plan(g, dict(op="all_to_all", size=2**24), budget=np.float64(1.0), cost=lambda *_: 1.0)
    assert len(plan) == 1
    # design's lifetime: an infinite one gave every candidate infinite tokens per USD
    with pytest.raises(ValueError, match=r"^lifetime must be a finite number > 0 \(s\) or None, got inf$"):
        fs.design(64, lambda g: (1.0, 1e6), lifetime=math.inf)


def test_a_design_leaf_spine_gets_the_fewest_uplinks_its_ratio_allows():
    # 42 host ports a leaf (radix 84) at 1.4:1 need 42 / 1.4 = 30 uplinks exactly; in floats
    # 42 / 1.4 = 30.000000000000004, whose ceil gave the design 31 (leaf_spine itself: 30)
    from flowsolver._design_fabrics import build, server_with

    # (22 servers of 2 NICs: two leaves; the 4 servers this had fit one leaf, now one switch)
    g = build("leaf_spine", 22, server_with("dgx_h100", 2, "ib_ndr"), "ib_ndr", 1.4, 84)
    assert g.graph["params"]["uplinks"] == 30 and g.graph["params"]["oversubscription"] == pytest.approx(1.4)


def test_a_design_fat_tree_has_the_fewest_tiers_of_its_radix():
    # 64 GPUs at radix 64 built a k = 8 fat-tree (80 switches of 8 ports used) billed as 80
    # 64-port QM9700: 3.24 M USD, 50,678 USD/GPU, where one 64-port switch holds the 64 NICs
    price = {n: tp.get_part(n).price for n in ("quantum2_qm9700", "connectx7_400g", "dac")}
    r = fs.design(64, lambda g: 1.0, families=("fat_tree", "leaf_spine"), links=("ib_ndr",), oversubscriptions=(1.0,),
                  optics=("multimode",))
    fat, leaf = r.candidates
    assert (fat.status, fat.switches) == ("ok", 1)
    assert fat.price == pytest.approx(price["quantum2_qm9700"] + 64 * (price["connectx7_400g"] + price["dac"]))
    assert leaf.switches == 3              # the leaf-spine candidate: 2 leaves of 32 host ports, 1 spine
    # 256 NICs: two tiers, the leaf-spine candidate's own 1:1 fabric (8 leaves of 32 + 32 uplinks,
    # 8 x 32 / 64 = 4 spines), one graph timed once
    r = fs.design(256, lambda g: 1.0, families=("fat_tree", "leaf_spine"), links=("ib_ndr",), oversubscriptions=(1.0,),
                  optics=("multimode",))
    assert [c.switches for c in r.candidates] == [12, 12] and r.timed == 1
    # 4,096 NICs: more than 64 leaves of 32: the k = 64 fat-tree's 4,096 / 32^2 = 4 pods (32 edge +
    # 32 aggregation each) and 32 core groups of ceil(4 x 32 / 64) = 2: 320 switches (a k = 26
    # tree's 845 before, each a 64-port box)
    r = fs.design(4096, lambda g: 1.0, families=("fat_tree",), links=("ib_ndr",), oversubscriptions=(1.0,),
                  optics=("multimode",), budget=1.0)
    c = r.candidates[0]
    assert (c.status, c.switches, c.gpus) == ("over budget", 320, 4096)
    with pytest.raises(ValueError, match=r"hold at most 16 NICs; 24 asked"):
        from flowsolver._design_fabrics import build, server_with
        build("fat_tree", 3, server_with("dgx_h100", 8, "ib_ndr"), "ib_ndr", 1.0, 4)


@pytest.mark.parametrize("gpus, leaves, spines, per_pair", [(64, 1, 1, 32), (256, 4, 4, 8), (1024, 16, 16, 2)])
def test_a_design_dragonfly_plus_has_the_spines_its_leaves_fill(gpus, leaves, spines, per_pair):
    # 64-port NDR switches, 1:1, DGX H100: a leaf has 32 host ports and 32 uplinks; 2 groups
    # (the fewest) of gpus / 64 leaves; spines = leaves x 32 uplinks / 32 down ports, each leaf
    # 32 / spines parallel cables to every spine, a spine's other 32 ports global (all 64 used).
    # One cable per pair gave 32 spines a group: 64 GPUs were 66 switches where 4 hold them.
    from flowsolver._design import _build, _server

    dgx = _server(tp.get_server("dgx_h100"), 8, "ib_ndr")
    g = _build("dragonfly_plus", gpus // 8, dgx, "ib_ndr", 1.0, 64)
    p = g.graph["params"]
    assert (p["groups"], p["leaves"], p["spines"], p["global_per_spine"]) == (2, leaves, spines, 32)
    assert {d["cables"] for *_, d in g.edges(data=True) if d["tier"] == "local"} == {per_pair}
    assert p["leaf_radix"] == p["spine_radix"] == 64
    assert sum(d["kind"] == "switch" for _, d in g.nodes(data=True)) == 2 * (leaves + spines)
    # the recorded bisection (between the 2 groups: 32 global cables a spine, 50 GB/s) is the max flow
    assert g.graph["bisection_bandwidth"] == pytest.approx(spines * 32 * 50e9)
    assert tp.bisection_max_flow(g) == pytest.approx(spines * 32 * 50e9)
    if gpus == 64:
        # the bill by hand (catalogue prices, USD): 4 QM9700 at 36,000; 64 NIC DACs and 64 local
        # DACs (copper in a group) at 150; 32 global fibres at 100 with a twin-port 800G module
        # (732) per 2 ports at each end (16 a spine); 64 ConnectX-7 at 2,200
        hand = 4 * 36_000 + 128 * 150 + 32 * 100 + 32 * 732 + 64 * 2_200
        assert tp.bill(g).price == pytest.approx(hand)
