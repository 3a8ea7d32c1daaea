"""upgrade_cost / upgrade_plan priced as the generators build the upgraded fabric (adv17a findings)."""

from __future__ import annotations

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.upgrade import Upgrade, upgrade_cost

# the catalogue's documented prices (topologies/parts.py, USD a unit): Quantum-2 QM9700 36,000
# (its published figure), twin-port 800G OSFP 732, MPO fibre 100 (estimate)
QM9700, TWIN, FIBRE = 36_000.0, 732.0, 100.0


def test_the_hand_bills_use_the_catalogues_prices():
    assert (tp.get_part("quantum2_qm9700").price, tp.get_part("osfp_800g_twin").price,
            tp.get_part("fiber_mpo").price) == (QM9700, TWIN, FIBRE)


def test_more_cables_on_a_full_spine_add_spines_of_the_same_model():
    # 8 leaves of 32 NDR host ports and 16 uplinks, 2 spines of 64 ports (each full): 2:1.
    # Doubling the leaf-spine cables is the SuperPOD's 1:1 answer, 4 QM9700 spines: 128 more
    # fibres, 16 more optical ports a leaf (8 twin modules each, 64) and 128 more spine ports
    # (64 twin modules), 2 more QM9700 -- not the 2 spines re-billed as 144-port XDR boxes.
    g = tp.leaf_spine(8, 2, 32, uplinks=16, server="dgx_h100")
    hand = 128 * FIBRE + (64 + 64) * TWIN + 2 * QM9700
    assert hand == 178_496
    up = Upgrade("leaf-spine", factor=2.0)
    assert upgrade_cost(g, up) == pytest.approx(hand)
    # the bill of the fabric the upgrade builds (the generator's 1:1 one) minus the old one
    built = tp.leaf_spine(8, 4, 32, uplinks=32, server="dgx_h100")
    assert tp.bill(built).price - tp.bill(g).price == pytest.approx(hand)
    # under a 250,000 USD budget the plan buys it (the NIC doubling, 531,200, does not fit)
    plan = fs.upgrade_plan(g, dict(op="all_to_all", size=2**28), budget=250_000,
                           upgrades={"leaf-spine": up, "access": Upgrade("access", factor=2.0)})
    assert plan["upgrade"].tolist() == ["leaf-spine"]
    assert plan["cost"].iloc[0] == pytest.approx(hand)


def test_a_rail_optimised_spine_doubled_is_a_second_qm9700():
    # rail_optimized(8): 8 rail leaves of 8 uplinks on one 64-port spine. Doubling: 64 more
    # fibres, 8 more ports a leaf (4 twin modules, 32) and 64 at the spines (32), one more QM9700
    g = tp.rail_optimized(8)
    hand = 64 * FIBRE + (32 + 32) * TWIN + QM9700
    assert upgrade_cost(g, Upgrade("leaf-spine", factor=2.0)) == pytest.approx(hand)
    # twice: the four spines' worth of ports (256) on QM9700s, 3 more after the first doubling
    from flowsolver.upgrade import _as_bought

    up = Upgrade("leaf-spine", factor=2.0)
    once = _as_bought(g, up)
    assert upgrade_cost(once, up) == pytest.approx(128 * FIBRE + (64 + 64) * TWIN + 2 * QM9700)
    assert tp.bill(_as_bought(once, up)).count("quantum2_qm9700") == 8 + 4


def test_a_repeated_plan_leaves_out_what_the_catalogue_cannot_price():
    # rail_optimized(8): the NICs doubled (400G -> 800G ConnectX-8) is the pick; doubled again
    # they would be 1600G NICs, which the catalogue has not: left out, the pick kept
    g = tp.rail_optimized(8)
    work = dict(op="all_to_all", size=2**24)
    plan = fs.upgrade_plan(g, work, budget=2e5, repeat=True)
    assert plan["upgrade"].tolist() == ["access"]
    assert set(plan.attrs["unpriced"]) == {"access"} and "1600" in plan.attrs["unpriced"]["access"]
    # upgrade_cost itself names the upgrade it cannot price
    from flowsolver.upgrade import UnpricedUpgrade, _as_bought

    with pytest.raises(UnpricedUpgrade, match=r"links='access'.*1600 Gb/s"):
        upgrade_cost(_as_bought(g, Upgrade("access", factor=2.0)), Upgrade("access", factor=2.0))


def test_a_plan_leaves_out_an_upgrade_it_cannot_price_from_the_start():
    # NICs that are 800G already (two cables each): doubling them (1600G) has no part; the other
    # tiers are still planned
    from flowsolver.upgrade import _as_bought

    g = _as_bought(tp.rail_optimized(8), Upgrade("access", factor=2.0))
    plan = fs.upgrade_plan(g, dict(op="all_to_all", size=2**24), budget=1e7)
    assert "access" in plan.attrs["unpriced"] and "access" not in plan["upgrade"].tolist()


def test_a_technology_upgrade_leaving_a_switch_two_families_is_refused():
    # RoCE 400G NIC links on the InfiniBand leaves of an NDR leaf-spine (their uplinks still
    # InfiniBand): no switch speaks both; it was priced 0 USD and timed
    g = tp.leaf_spine(8, 2, 32, uplinks=16, server="dgx_h100")
    for up in (Upgrade("access", tech="roce_400g"), Upgrade("leaf-spine", tech="eth_100g")):
        with pytest.raises(ValueError, match=rf"tech='{up.tech}'.*switch 'leaf0' would carry ethernet and "
                                             "infiniband links"):
            upgrade_cost(g, up)
        with pytest.raises(ValueError, match="would carry ethernet and infiniband"):
            up.apply(g)
    # the whole fabric made RoCE, or an InfiniBand tier made HDR, is one family a switch
    every = Upgrade(lambda u, v, d: d["tier"] in ("access", "leaf-spine"), tech="roce_400g")
    assert {d["tech"] for *_, d in every.apply(g).edges(data=True) if d["tier"] in ("access", "leaf-spine")} == \
        {"roce_400g"}
    Upgrade("leaf-spine", tech="ib_hdr").apply(g)


def test_cables_are_dealt_as_one_at_a_time_without_the_loop():
    """adv25 F4: a split switch's cables were dealt one at a time to the least loaded clone,
    O(cables x clones): factor 3,000 took 6.4 s, 1e5 ran past 100 s. The closed form must deal
    exactly as that loop (the reference below) for loads within one of each other."""
    import random

    from flowsolver.upgrade import _spread

    def one_at_a_time(load, n):
        share = [0] * len(load)
        for _ in range(n):
            i = min(range(len(load)), key=load.__getitem__)
            share[i] += 1
            load[i] += 1
        return share

    rng = random.Random(5)
    for _ in range(2000):
        base = rng.randint(0, 6)
        load = [base + rng.randint(0, 1) for _ in range(rng.randint(1, 9))]
        n = rng.randint(0, 50)
        a, b = list(load), list(load)
        assert _spread(a, n) == one_at_a_time(b, n) and a == b


def test_a_factor_no_fabric_of_boxes_can_hold_is_refused_by_name():
    from flowsolver.upgrade import MAX_BOUGHT_EDGES
    g = tp.rail_optimized(4)
    with pytest.raises(ValueError, match=rf"factor 1e\+09 .*MAX_BOUGHT_EDGES = {MAX_BOUGHT_EDGES:,}"):
        fs.upgrade_cost(g, Upgrade("leaf-spine", factor=1e9))
