"""design() with servers that are not 8-NIC DGXs (adv21a F1, adv21c F2): NICs per server default
to the server's own (an NVL72 rack was billed 8 NICs for 72 GPUs, a 4-GPU Polaris node refused
every candidate: "nics (8) must divide the server's GPUs (4)"), and a server with more NICs than
a leaf's host ports spreads them over consecutive leaves, every port used (an NVL72 rack's 72
NICs failed leaf_spine and fat_tree, leaving only an 82-switch rail-optimised fabric at 2.9x the
price; a 7-NIC server at radix 8 got one NIC a leaf and a false capacity error)."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver._design_fabrics import hosts_per_leaf
from topologies.servers import ServerModel

_ONE = dict(links=("ib_ndr",), oversubscriptions=(1.0,), optics=("multimode",))


def _same_as_by_hand(r, hand):
    bill = tp.bill(hand, optics="multimode")
    switches = sum(line.count for line in bill.lines if line.part.category == "switch")
    for c in r.candidates:
        assert c.status == "ok", c.message
        assert c.switches == switches and c.price == pytest.approx(bill.price)
        assert c.time == pytest.approx(fs.collective(hand, "all_reduce", 2**24).time, rel=1e-9)
    return switches


def test_two_nvl72_racks_on_eight_switches():
    r = fs.design(144, [("all_reduce", 2**24)], server="nvl72", families=("leaf_spine", "fat_tree"), **_ONE)
    assert {c.nics for c in r.candidates} == {72}                   # tp.get_server("nvl72").nics
    # by hand: 144 NICs on leaves of 32 host ports: 5 leaves (the last 16 ports empty); 5 x 32
    # uplinks over 64-port spines: 3 spines; the fat-tree candidate is the same two tiers
    assert _same_as_by_hand(r, tp.leaf_spine(5, 3, 32, uplinks=32, link="ib_ndr", server="nvl72")) == 8


def test_a_seven_nic_server_at_radix_8():
    # adv21c F2: 28 NICs on leaves of 4 host ports: 7 leaves, 4 uplinks each, 7 x 4 / 8: 4 spines
    s = ServerModel("p7", gpus=7, layout="nvswitch", nvlink="nvlink4", nics=7)
    r = fs.design(28, [("all_reduce", 2**24)], server=s, families=("leaf_spine", "fat_tree"), radixes=(8,), **_ONE)
    assert _same_as_by_hand(r, tp.leaf_spine(7, 4, 4, uplinks=4, link="ib_ndr", server=s)) == 11


def test_a_four_gpu_two_nic_server_is_designed_not_refused():
    r = fs.design(16, [("all_reduce", 2**26)], server="polaris_a100", families=("leaf_spine",), **_ONE)
    (c,) = r.candidates
    assert c.status == "ok" and c.nics == tp.get_server("polaris_a100").nics == 2
    assert c.bill.count("connectx7_400g") == 8                      # 4 servers x 2 NICs


def test_hosts_per_leaf():
    assert hosts_per_leaf(8, 32) == 32 and hosts_per_leaf(8, 30) == 24      # whole DGXs
    assert hosts_per_leaf(72, 32) == 32 and hosts_per_leaf(7, 4) == 4       # a server over leaves
    assert hosts_per_leaf(72, 32, exact=True) == 24 and hosts_per_leaf(7, 4, exact=True) == 1   # DragonFly+
