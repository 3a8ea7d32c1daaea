"""What design() counts as the network (newuser27 #1, #3): the bill less what the servers come
with. A DGX's own ConnectX-7s were 40-56 % of the bill, so a budget that pays the switches,
optics and cables found nothing; an NVL72 rack's NVLink switch trays were billed as network and,
with the rack's price a GPU as gpu_price, paid twice."""

import pytest

import flowsolver as fs
import topologies as tp

_ONE = dict(families=("rail_optimized",), links=("ib_ndr",), oversubscriptions=(1.0,), optics=("multimode",))


def _parts(bill, category):
    return sum(line.price for line in bill.lines if line.part.category == category), \
        sum(line.power for line in bill.lines if line.part.category == category)


def test_a_budget_for_the_switches_optics_and_cables_is_enough():
    c = fs.design(64, lambda g: 1.0, **_ONE).candidates[0]
    nic_usd, nic_w = _parts(c.bill, "nic")
    # 64 ConnectX-7 on a DGX H100 fabric: the server's own NIC, each paid whole by the server
    assert nic_usd == pytest.approx(64 * tp.get_part("connectx7_400g").price)
    assert c.network_price == pytest.approx(c.bill.price - nic_usd)
    assert c.network_power == pytest.approx(c.bill.power - nic_w)
    budget = c.bill.price - nic_usd + 1.0                  # less than the bill, more than the network
    r = fs.design(64, lambda g: 1.0, budget=budget, **_ONE)
    assert [x.status for x in r.candidates] == ["ok"] and len(r.front) == 1
    # servers bought without NICs: the NICs are network spend, over that budget
    r = fs.design(64, lambda g: 1.0, budget=budget, gpu_price_includes_nics=False, **_ONE)
    assert [x.status for x in r.candidates] == ["over budget"]
    assert r.candidates[0].network_price == pytest.approx(r.candidates[0].bill.price)


def test_an_nvl72_racks_switch_trays_are_not_network_and_not_paid_twice():
    gpu = 3.0e6 / 72                                        # a rack's price a GPU, with its trays and NICs
    c = fs.design(144, lambda g: 1.0, server="nvl72", families=("leaf_spine",), links=("ib_ndr",),
                  oversubscriptions=(1.0,), optics=("multimode",), gpu_price=gpu).candidates[0]
    tray_usd, tray_w = _parts(c.bill, "nvswitch_tray")
    nic_usd, nic_w = _parts(c.bill, "nic")
    # 2 racks x 9 trays (NVIDIA GB200 NVL72 specification), the catalogue's price and power each
    tray = tp.get_part("nvlink_switch_tray")
    assert (tray_usd, tray_w) == (pytest.approx(18 * tray.price), pytest.approx(18 * tray.power))
    assert c.network_price == pytest.approx(c.bill.price - tray_usd - nic_usd)
    assert c.network_power == pytest.approx(c.bill.power - tray_w - nic_w)
    assert c.capex == pytest.approx(c.bill.price - tray_usd - nic_usd + 144 * gpu)
