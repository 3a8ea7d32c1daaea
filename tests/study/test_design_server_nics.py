"""design() with servers that are not 8-NIC DGXs (adv21a F1): NICs per server default to the
server's own (an NVL72 rack was billed 8 NICs for 72 GPUs, a 4-GPU Polaris node refused every
candidate: "nics (8) must divide the server's GPUs (4)"), and a server with more NICs than a
leaf's host ports spreads them over leaves (an NVL72 rack's 72 NICs failed leaf_spine and
fat_tree, leaving only an 82-switch rail-optimised fabric at 2.9x the price)."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver._design_fabrics import hosts_per_leaf

_ONE = dict(links=("ib_ndr",), oversubscriptions=(1.0,), optics=("multimode",))


def test_two_nvl72_racks_on_nine_switches():
    r = fs.design(144, [("all_reduce", 2**28)], server="nvl72", families=("leaf_spine", "fat_tree"), **_ONE)
    assert {c.nics for c in r.candidates} == {72}                   # tp.get_server("nvl72").nics
    # by hand: 144 NICs on leaves of 32 host ports, a divisor of a rack's 72 NICs: 24 a leaf,
    # 6 leaves; 6 x 24 uplinks over 64-port spines: 3 spines; the fat-tree candidate is the
    # same two-tier fabric (it fits two tiers)
    hand = tp.leaf_spine(6, 3, 24, uplinks=24, link="ib_ndr", server="nvl72")
    bill = tp.bill(hand, optics="multimode")
    for c in r.candidates:
        assert c.status == "ok", c.message
        assert c.switches == 9 and c.price == pytest.approx(bill.price)
        assert c.time == pytest.approx(fs.collective(hand, "all_reduce", 2**28).time, rel=1e-9)


def test_a_four_gpu_two_nic_server_is_designed_not_refused():
    r = fs.design(16, [("all_reduce", 2**26)], server="polaris_a100", families=("leaf_spine",), **_ONE)
    (c,) = r.candidates
    assert c.status == "ok" and c.nics == tp.get_server("polaris_a100").nics == 2
    assert c.bill.count("connectx7_400g") == 8                      # 4 servers x 2 NICs


def test_hosts_per_leaf():
    assert hosts_per_leaf(8, 32) == 32 and hosts_per_leaf(8, 30) == 24      # whole DGXs
    assert hosts_per_leaf(72, 32) == 24 and hosts_per_leaf(72, 16) == 12    # a share of a rack, a divisor of 72
    assert hosts_per_leaf(7, 4) == 1
