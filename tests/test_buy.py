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
