"""flowsolver.design (flowsolver/_design.py): the Pareto front against brute force, budgets, per-candidate status."""

import math

import numpy as np
import pytest

import topologies as tp
from flowsolver import collective, design, pareto_front
import flowsolver as fs


def _brute_front(points):
    """Indexes of points no other point dominates (<= everywhere, < somewhere): all pairs."""
    out = []
    for i, p in enumerate(points):
        if not any(all(a <= b for a, b in zip(q, p)) and any(a < b for a, b in zip(q, p))
                   for j, q in enumerate(points) if j != i):
            out.append(i)
    return out


def test_pareto_front_matches_brute_force_on_random_points():
    rng = np.random.default_rng(7)
    for trial in range(30):
        pts = [tuple(x) for x in rng.integers(0, 6, size=(int(rng.integers(1, 40)), 3))]
        assert pareto_front(pts) == _brute_front(pts)


WORK = [("all_reduce", 2**26, None)]


@pytest.fixture(scope="module")
def small():
    return design(64, WORK, families=("rail_optimized", "leaf_spine"), links=("ib_ndr", "ib_hdr"),
                  oversubscriptions=(1.0, 2.0), optics=("multimode", "singlemode"))


def test_design_front_is_the_brute_force_front(small):
    assert len(small.candidates) == 2 * 2 * 2 * 2
    ok = [c for c in small.candidates if c.status == "ok"]
    pts = [(c.price, c.power, c.time) for c in ok]
    assert {id(ok[i]) for i in _brute_front(pts)} == {id(c) for c in small.front}
    assert small.dominated == len(ok) - len(small.front)
    assert all(c.pareto == (c in small.front) for c in ok)


def test_design_times_each_fabric_once_and_as_collective_does(small):
    fabrics = {c.fabric for c in small.candidates if c.status == "ok"}
    assert small.timed == len(fabrics)
    by_fabric = {}
    for c in small.candidates:
        by_fabric.setdefault(c.fabric, set()).add(c.time)
    assert all(len(t) == 1 for t in by_fabric.values())      # optics change the bill only
    g = tp.rail_optimized(8, server=tp.get_server("dgx_h100").with_(name="x", nic=None), link="ib_hdr")
    want = collective(g, "all_reduce", 2**26).time
    got = next(c.time for c in small.candidates if c.fabric == ("rail_optimized", "ib_hdr", 1.0, 64, 8))
    assert got == pytest.approx(want, rel=1e-9)
    # single-mode optics cost more than multimode for the same fabric, by the bill's difference
    mm = next(c for c in small.candidates if c.fabric[:2] == ("rail_optimized", "ib_ndr") and c.optics == "multimode")
    sm = next(c for c in small.candidates if c.fabric == mm.fabric and c.optics == "singlemode")
    assert sm.price > mm.price and sm.time == mm.time
    # the DGX keeps its twin-port NIC cages (8 NICs, 4 modules per server) in the search's bills
    assert mm.bill.count("osfp_400g") == 0
    assert mm.bill.count("osfp_800g_twin") == mm.bill.count("fiber_mpo")   # 2 ends per link, 2 links per module


def test_budget_and_power_limits_skip_timing():
    full = design(64, WORK, families=("rail_optimized",), links=("ib_ndr", "ib_hdr"), oversubscriptions=(1.0,),
                  optics=("multimode",))
    prices = sorted(c.price for c in full.candidates)
    r = design(64, WORK, families=("rail_optimized",), links=("ib_ndr", "ib_hdr"), oversubscriptions=(1.0,),
               optics=("multimode",), budget=prices[0] + 1.0)
    over = [c for c in r.candidates if c.status == "over budget"]
    assert len(over) == 1 and math.isnan(over[0].time) and r.timed == 1
    r = design(64, WORK, families=("rail_optimized",), links=("ib_ndr",), oversubscriptions=(1.0,),
               optics=("multimode",), power=1.0)
    assert [c.status for c in r.candidates] == ["over power"] and r.front == []


def test_bad_input_and_failed_candidates():
    with pytest.raises(ValueError, match="multiple of the server's 8 GPUs"):
        design(60, WORK)
    with pytest.raises(ValueError, match="workload must be"):
        design(64, 3.0)
    r = design(64, lambda g: 1.0, families=("fat_tree",), links=("ib_ndr",), oversubscriptions=(2.0,),
               optics=("multimode",))
    assert r.candidates[0].status == "failed" and "non-blocking only" in r.candidates[0].message
    grid = dict(families=("leaf_spine",), links=("ib_ndr",), optics=("multimode",))
    # a negative ratio built a 32:1 fabric labelled -2; 0 divided by zero
    for bad in (-2.0, 0.0, 0.5, math.nan, True):
        with pytest.raises(ValueError, match="oversubscriptions"):
            design(64, lambda g: 1.0, oversubscriptions=(bad,), **grid)
    for key, bad in (("radixes", (7.5,)), ("nics", (0,)), ("budget", True)):
        with pytest.raises(ValueError, match=key):
            design(64, lambda g: 1.0, oversubscriptions=(1.0,), **grid, **{key: bad})
    # a workload that returns no time (or a negative one) fails its candidates, it does not win
    for out in (-1.0, 0.0, (0.0, 1e6), (1.0, -5.0), (1.0, math.inf)):
        r = design(64, lambda g, out=out: out, oversubscriptions=(1.0,), **grid)
        assert [c.status for c in r.candidates] == ["failed"] and "seconds > 0" in r.candidates[0].message
        assert r.front == []


def test_cli_design(capsys):
    import json

    from flowsolver.cli import main

    assert main(["design", "--gpus", "64", "--size", "64M", "--families", "rail_optimized", "--links", "ib_ndr",
                 "ib_hdr", "--oversubscriptions", "1", "--optics", "multimode", "--all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 and {r["link"] for r in rows} == {"ib_ndr", "ib_hdr"}
    assert all(r["status"] == "ok" and r["price"] > 0 for r in rows)
    assert main(["design", "--gpus", "60"]) == 2
    assert "multiple of the server's 8 GPUs" in capsys.readouterr().err


def test_tokens_per_dollar_against_a_hand_computation():
    # 8 DGX H100 on NDR: 9 QM9700 (8 rail leaves, 1 spine), 64 ConnectX-7, 128 fibres and
    # 128 twin-port modules (32 per layer end: leaf access, servers, leaf up, spine down)
    p = {n: tp.get_part(n).price for n in ("quantum2_qm9700", "connectx7_400g", "fiber_mpo", "osfp_800g_twin")}
    network = 9 * p["quantum2_qm9700"] + 64 * p["connectx7_400g"] + 128 * p["fiber_mpo"] + 128 * p["osfp_800g_twin"]
    gpu_price = tp.get_part("hgx_h100_server").price / 8
    month = 30 * 86400.0
    r = fs.design(64, lambda g: (2.0, 1e6), families=("rail_optimized",), links=("ib_ndr",),
                  oversubscriptions=(1.0,), optics=("multimode",), gpu_price=gpu_price, lifetime=month)
    c = r.candidates[0]
    assert c.price == pytest.approx(network)
    # the server's 310,000 USD "includes the infiniband cards": its 8 ConnectX-7 are not
    # bought again with the network
    capex = network - 64 * p["connectx7_400g"] + 64 * 310000.0 / 8
    assert c.nic_price == pytest.approx(64 * 2200.0)
    assert c.capex == pytest.approx(capex)
    assert c.tokens_per_s == pytest.approx(5e5)
    assert c.tokens_per_usd == pytest.approx(5e5 * month / capex)
    assert c.as_dict()["tokens_per_usd"] == c.tokens_per_usd and r.best() is c
    # without a lifetime or a GPU price: throughput per USD of the network alone, no tokens/USD;
    # the network leaves out the NICs the DGXs come with (newuser27 #1)
    r = fs.design(64, lambda g: (2.0, 1e6), families=("rail_optimized",), links=("ib_ndr",),
                  oversubscriptions=(1.0,), optics=("multimode",))
    c = r.candidates[0]
    assert c.network_price == pytest.approx(network - 64 * p["connectx7_400g"])
    assert c.throughput_per_usd == pytest.approx(5e5 / (network - 64 * p["connectx7_400g"]))
    assert math.isnan(c.tokens_per_usd)
    # a GPU price without the NICs: the bill's NICs are added
    bare = fs.design(64, lambda g: (2.0, 1e6), families=("rail_optimized",), links=("ib_ndr",),
                     oversubscriptions=(1.0,), optics=("multimode",), gpu_price=30000.0, lifetime=month,
                     gpu_price_includes_nics=False).candidates[0]
    assert bare.capex == pytest.approx(network + 64 * 30000.0)
    with pytest.raises(ValueError, match="gpu_price"):
        fs.design(64, lambda g: 1.0, gpu_price=-1.0)
    with pytest.raises(ValueError, match="gpu_price_includes_nics"):
        fs.design(64, lambda g: 1.0, gpu_price=1.0, gpu_price_includes_nics="no")
    with pytest.raises(ValueError, match="key must be one of"):
        r.best("speed")


def test_a_training_workload_gives_its_tokens_per_step():
    r = fs.design(16, dict(model="llama-3-8b", tp=8), families=("rail_optimized",), links=("ib_ndr",),
                  oversubscriptions=(1.0,), optics=("multimode",))
    step = fs.training_step(tp.rail_optimized(2), model="llama-3-8b", tp=8)
    c = r.candidates[0]
    assert c.tokens == step.tokens_per_step == 4 * 1024 * 1024      # 4 M tokens (512 x 8192)
    assert c.tokens_per_s == pytest.approx(step.tokens_per_step / step.step_time)
    assert "tokens/s" in r.format()


def test_a_single_grid_value_is_one_candidate_and_numpy_counts_are_counts():
    # families="rail_optimized" made 14 candidates, one per character ("family must be one of
    # ..., got 'r'"), and a scalar oversubscription a bare TypeError; np.int64(64) GPUs was refused
    kw = dict(oversubscriptions=1.0, optics="multimode", radixes=np.int64(64))
    one = design(np.int64(64), [("all_reduce", 2**20)], families="rail_optimized", links="ib_ndr", **kw)
    ref = design(64, [("all_reduce", 2**20)], families=("rail_optimized",), links=("ib_ndr",),
                 oversubscriptions=(1.0,), optics=("multimode",))
    assert len(one.candidates) == 1 and one.timed == 1
    assert one.candidates[0].time == ref.candidates[0].time and one.candidates[0].price == ref.candidates[0].price
    with pytest.raises(ValueError, match="radixes must be one value or a sequence"):
        design(64, [("all_reduce", 2**20)], radixes=object())


def test_pareto_front_refuses_what_it_cannot_compare():
    with pytest.raises(ValueError, match="points must be finite: point 0"):
        pareto_front([(math.nan, 0), (1, 2), (2, 1)])
    with pytest.raises(ValueError, match="same number of coordinates"):
        pareto_front([(1, 2), (1,), (0, 5, 1)])


def test_best_of_a_collective_mix_is_the_least_capex_times_time():
    # best() defaulted to tokens_per_usd, NaN for a collective mix: it returned None with both
    # candidates timed. The mix's measure of work per USD is the least capex x time, each
    # factor found here without design(): the bill of the graph and collective() on it.
    r = design(64, WORK, families=("rail_optimized",), links=("ib_ndr", "ib_hdr"), oversubscriptions=(1.0,),
               optics=("multimode",))
    server = tp.get_server("dgx_h100").with_(nic=None)      # NICs at the fabric's rate, its twin-port cages
    cost = {}
    for link in ("ib_ndr", "ib_hdr"):
        g = tp.rail_optimized(8, server=server, link=link)
        bill = tp.bill(g, optics="multimode")
        # the network less the NICs the DGX H100s come with (a ConnectX-7 each, 2,200 USD): the
        # bill's NICs are paid up to that each
        own = sum(line.count * min(line.part.price, tp.get_part("connectx7_400g").price) for line in bill.lines
                  if line.part.category == "nic")
        cost[link] = (bill.price - own) * collective(g, "all_reduce", 2**26).time
    assert r.timed == 2 and r.best().link == min(cost, key=cost.get)
    assert r.best().capex_time == pytest.approx(min(cost.values()), rel=1e-9)
    for key in ("tokens_per_usd", "throughput_per_usd", "tokens_per_s"):
        with pytest.raises(ValueError, match=f"no timed candidate has {key}.*this design has time, price, capex, "
                                             "capex_time$"):
            r.best(key)
    # nothing timed: None, as the docstring says
    assert design(64, WORK, families=("rail_optimized",), links=("ib_ndr",), oversubscriptions=(1.0,),
                  optics=("multimode",), power=1.0).best() is None


def test_best_with_tokens_and_no_lifetime_is_the_most_throughput_per_usd():
    # tokens per step but no lifetime: tokens_per_usd is NaN and best() was None. The same
    # tokens on both fabrics: tokens/s per USD = tokens / (time x price), the least capex x time.
    picked = set()
    for times in ({"ib_ndr": 1.0, "ib_hdr": 3.0}, {"ib_ndr": 1.0, "ib_hdr": 1.05}):
        r = fs.design(64, lambda g: (times[g.graph["params"]["link"]], 1e6), families=("rail_optimized",),
                      links=("ib_ndr", "ib_hdr"), oversubscriptions=(1.0,), optics=("multimode",))
        # the network by hand: the bill less the DGX's own ConnectX-7s (each NIC paid up to 2,200 USD)
        cx7 = tp.get_part("connectx7_400g").price
        price = {c.link: c.bill.price - sum(line.count * min(line.part.price, cx7) for line in c.bill.lines
                                            if line.part.category == "nic") for c in r.candidates}
        want = max(times, key=lambda k: 1e6 / times[k] / price[k])
        assert r.best().link == want == r.best("capex_time").link
        assert r.best().throughput_per_usd == pytest.approx(1e6 / times[want] / price[want])
        picked.add(want)
    assert picked == {"ib_ndr", "ib_hdr"}       # 3x slower loses; 5 % slower and cheaper wins


def test_capex_credits_only_the_nics_the_server_price_includes():
    # hgx_h100_server's price (310,000 USD / 8 GPUs) "includes the infiniband cards": a DGX
    # H100's 8 ConnectX-7 400G, 2,200 USD each in the catalogue. An XDR fabric bills ConnectX-8
    # (800G, 3,000 USD): the server price pays 2,200 of each, the other 800 is bought. NDR and
    # HDR NICs (ConnectX-7 2,200; ConnectX-6 1,500) are paid whole by it.
    gpu = 310_000.0 / 8
    r = fs.design(64, lambda g: 1.0, families=("rail_optimized",), links=("ib_xdr", "ib_ndr", "ib_hdr"),
                  oversubscriptions=(1.0,), optics=("multimode",), gpu_price=gpu)
    by = {c.link: c for c in r.candidates}
    for link, nic, credit in (("ib_xdr", 3000.0, 2200.0), ("ib_ndr", 2200.0, 2200.0), ("ib_hdr", 1500.0, 1500.0)):
        c = by[link]
        assert c.nic_price == pytest.approx(64 * nic)
        assert c.capex == pytest.approx(c.price + 64 * gpu - 64 * credit)
    # fewer NICs than the server carries: no refund, each paid whole by the server's price
    four = fs.design(64, lambda g: 1.0, families=("rail_optimized",), links=("ib_xdr",), nics=(4,),
                     oversubscriptions=(1.0,), optics=("multimode",), gpu_price=gpu).candidates[0]
    assert four.capex == pytest.approx(four.price + 64 * gpu - 32 * 2200.0)


def test_a_one_leaf_leaf_spine_candidate_is_one_switch():
    # 8 GPUs (one DGX, 8 NICs) fit one leaf: no spine and no uplinks at any ratio. By hand
    # (catalogue USD): a QM9700 36,000, 8 copper DACs at 150, 8 ConnectX-7 at 2,200 = 54,800
    # (an idle spine and 32 uplinks billed 117,424).
    r = fs.design(8, lambda g: 1.0, families=("leaf_spine",), links=("ib_ndr",), oversubscriptions=(1.0, 2.0),
                  optics=("multimode",))
    for c in r.candidates:
        assert c.status == "ok" and c.switches == 1
        assert c.price == pytest.approx(36_000 + 8 * 150 + 8 * 2_200)


def test_a_radix_above_the_largest_catalogue_box_is_refused():
    """adv25 F1: a leaf of 1,024 ports for 128 DGX H100 on NDR was timed as one crossbar and billed
    as 8 unconnected 144-port Quantum-X800 boxes (3.37 M USD against the radix-64 Clos's 4.99 M).
    The catalogue's largest box for a link (parts.py: InfiniBand's Q3400, 144 ports; Ethernet's
    SN5600, 128) bounds the radix: a radix no link of the grid takes is refused by name, one
    another link takes fails for this link alone (review25 F2), every radix up to it is built."""
    ib, eth = tp.get_part("quantum_x800_q3400"), tp.get_part("spectrum4_sn5600")
    assert tp.largest_switch("infiniband", tp.get_link("ib_ndr").bandwidth) is ib
    assert tp.largest_switch("roce", tp.get_link("roce_400g").bandwidth) is eth and eth.ports < ib.ports
    with pytest.raises(ValueError, match=r"radixes must be at most .* got 2048: radix 2048 is more than the 144 ports"):
        design(1024, WORK, radixes=(64, 2048), links=("ib_ndr",), families=("leaf_spine",),
               oversubscriptions=(1.0,), optics=("multimode",))
    d = design(64, WORK, radixes=(ib.ports,), links=("ib_ndr", "roce_400g"), families=("leaf_spine",),
               oversubscriptions=(1.0,), optics=("multimode",))
    status = {(c.link, c.radix): c.status for c in d.candidates}
    assert status == {("ib_ndr", ib.ports): "ok", ("roce_400g", ib.ports): "failed"}


def test_a_radix_below_the_box_bought_says_so():
    """newuser25 #2: the catalogue's one XDR switch is the 144-port Quantum-X800, so XDR at the
    default radix 64 bills 144-port boxes run at 64 ports (30 % dearer a GPU than radix 144) with
    no word; the row now says so, and a radix the builders refuse (< 4) is refused up front."""
    box = tp.get_part("quantum_x800_q3400")
    d = design(64, WORK, radixes=(64, box.ports), links=("ib_xdr",), families=("leaf_spine",),
               oversubscriptions=(2.0,), optics=("multimode",))
    notes = {c.radix: c.message for c in d.candidates}
    assert f"radix 64 on quantum_x800_q3400 boxes of {box.ports} ports" in notes[64]
    assert "boxes of" not in notes[box.ports]
    with pytest.raises(ValueError, match="radixes must be an integer >= 4, got 3"):
        design(64, WORK, radixes=(3,), links=("ib_ndr",))


def test_an_empty_front_says_why():
    """newuser25: --budget 1000 printed "front 0" and an empty table; the reasons were only under
    --all. The table now counts the statuses and names the cheapest fabric's price."""
    d = design(64, WORK, links=("ib_ndr",), families=("leaf_spine",), oversubscriptions=(1.0,),
               optics=("multimode",), budget=1000.0)
    text = d.format()
    cheapest = min(c.network_price for c in d.candidates)
    assert not d.front and "front empty: 1 over budget" in text and f"{cheapest:,.0f} USD" in text


def test_optics_that_bill_the_same_parts_are_said():
    """newuser25 #2: the catalogue has one 800G optic, so XDR's multimode and singlemode rows
    are the same bill and both sat on the front with nothing said; NDR's two optics differ
    (732 and 1,250 USD a module) and say nothing."""
    r = design(64, [("all_reduce", 2**24)], families=("rail_optimized",), links=("ib_xdr", "ib_ndr"),
               oversubscriptions=(1.0,), radixes=(144,), optics=("multimode", "singlemode"))
    by = {(c.link, c.optics): c for c in r.candidates}
    assert by["ib_xdr", "multimode"].price == by["ib_xdr", "singlemode"].price
    assert "optics singlemode bills the same parts as multimode" in by["ib_xdr", "singlemode"].message
    assert "bills the same" not in by["ib_xdr", "multimode"].message
    assert by["ib_ndr", "multimode"].price != by["ib_ndr", "singlemode"].price
    assert not any("bills the same" in by["ib_ndr", o].message for o in ("multimode", "singlemode"))
    table = r.format()
    assert "ib_xdr os 1 radix 144 singlemode: " in table and "bills the same parts as multimode" in table


def test_a_cloud_or_hpc_network_billed_as_generic_parts_says_so():
    """newuser26 #2: Slingshot, TCPXO and EFA fabrics were billed as Spectrum-4 switches and
    ConnectX cards without a word; the bill and the design row now say they are generic parts
    (the catalogue has none of their own), and InfiniBand's own parts say nothing."""
    for link, transport in (("slingshot_200g", "alps_ofi_cxi"), ("tcpxo_200g", "gcp_tcpxo"),
                            ("efa_400g", "aws_ofi_p5en")):
        said = [w for w in tp.bill(tp.rail_optimized(4, link=link)).warnings if "no parts of its own" in w]
        assert said and said[0].startswith(f"{link}: ") and transport in said[0]
    assert not any("no parts of its own" in w for w in tp.bill(tp.rail_optimized(4)).warnings)
    r = design(64, [("all_reduce", 2**24)], families=("rail_optimized",), links=("ib_ndr", "slingshot_200g"),
               oversubscriptions=(1.0,), optics=("multimode",))
    by = {c.link: c for c in r.candidates}
    assert "billed as generic ethernet parts at 200G" in by["slingshot_200g"].message
    assert "generic" not in by["ib_ndr"].message
