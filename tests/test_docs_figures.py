"""Figures that docs/collective-timing.md and docs/concepts.md print,
against the code (adv20c findings 1, 5, 7, 8 and 10: each page's figure had drifted from what
the code gives). Where a figure follows from a formula the test derives it; else it reads the
page's figure and checks it against the code's, rounded as the page rounds it."""

from pathlib import Path

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives import TORCH_CALL_OVERHEAD

DOCS = Path(__file__).resolve().parent.parent / "docs"
KiB, MiB, GiB = 2**10, 2**20, 2**30


def _text(name):
    return " ".join((DOCS / name).read_text().split())


def _us(r):
    return r.time * 1e6


# --- finding 1: "NCCL chooses by its estimate, so a faster fabric can be slower" -------------

def test_a_faster_fabric_is_slower_on_the_fat_tree_at_120_kib():
    g = tp.fat_tree(4)
    slow = fs.collective(g, "all_reduce", 120 * KiB, efficiency={"ib_ndr": 0.8})
    fast = fs.collective(g, "all_reduce", 120 * KiB, efficiency={"ib_ndr": 1.0})
    assert (slow.algorithm, slow.protocol) == ("tree", "LL128")
    assert (fast.algorithm, fast.protocol) == ("tree", "LL")
    # NCCL's pick: LL's estimate is the lesser at 1.0, LL128's at 0.8
    assert fast.estimates["tree/LL"] < fast.estimates["tree/LL128"]
    assert slow.estimates["tree/LL128"] < slow.estimates["tree/LL"]
    assert _us(fast) > 2 * _us(slow)                       # the claim: the faster links are slower
    said = (f"a 120 KiB all-reduce on a 4-ary fat tree takes {_us(slow):.0f} us with tree / LL128 "
            f"with its NDR links at an efficiency of 0.8 (`efficiency={{\"ib_ndr\": 0.8}}`) and "
            f"{_us(fast):.0f} us with tree / LL at 1.0 (LL's estimate is "
            f"{fast.estimates['tree/LL'] * 1e6:.0f} us against LL128's {fast.estimates['tree/LL128'] * 1e6:.0f};")
    assert said in _text("collective-timing.md"), said


def test_a_faster_fabric_is_slower_on_two_dgx_at_3_mib():
    slow = fs.collective(tp.rail_optimized(2, link="eth_100g"), "all_reduce", 3 * MiB)
    fast = fs.collective(tp.rail_optimized(2, link="eth_200g"), "all_reduce", 3 * MiB)
    assert (slow.algorithm, slow.protocol) == ("tree", "LL128")
    assert (fast.algorithm, fast.protocol) == ("nvls_tree", "Simple")
    assert fast.estimates["nvls_tree/Simple"] < fast.estimates["tree/LL128"]
    assert _us(fast) > _us(slow)
    said = (f"a 3 MiB all-reduce on two DGX H100 moves from tree / LL128 ({_us(slow):.0f} us) on 100 GbE to "
            f"NVLSTree ({_us(fast):.0f} us; its estimate {fast.estimates['nvls_tree/Simple'] * 1e6:.1f} us "
            f"against tree / LL128's {fast.estimates['tree/LL128'] * 1e6:.1f}) on 200 GbE")
    assert said in _text("collective-timing.md"), said
    # `flowsolver upgrade`: the access tier doubled (100 GbE -> 2 x 100) is the 200 GbE case
    from flowsolver.upgrade import Upgrade, what_if
    pytest.importorskip("pandas")
    df = what_if(tp.rail_optimized(2, link="eth_100g"), dict(op="all_reduce", size=3 * MiB),
                 {"access": Upgrade("access", factor=2.0)})
    saved = float(df["saved_percent"].iloc[0])
    assert saved < 0
    assert f"shows a negative saving ({saved:.0f} % for the access tier doubled)" in _text("collective-timing.md")


# --- findings 7, 8, 10: the page's other figures ------------------------------------------

def test_tree_ll128_estimate_on_two_dgx_at_256_kib():
    r = fs.collective(tp.rail_optimized(2), "all_reduce", 256 * KiB)
    e = {k: v * 1e6 for k, v in r.estimates.items()}
    assert min(e, key=e.get) == "tree/LL128"              # NCCL's pick, with the tree correction
    said = (f"it makes tree LL128 NCCL's pick, {e['tree/LL128']:.1f} us against ring LL's {e['ring/LL']:.1f} "
            f"and tree LL's {e['tree/LL']:.1f}")
    assert said in _text("collective-timing.md"), said


def test_ring_bus_bandwidth_with_nccl_s_channels_on_one_dgx():
    r = fs.collective(tp.rail_optimized(nodes=1), "all_reduce", GiB, algorithm="ring")
    assert r.channels == 24
    busbw = 2 * 7 / 8 * GiB / r.time / 1e9                  # nccl-tests' busbw, 8 ranks
    said = f"at 1 GiB where NCCL's 24 move {busbw:.0f}"
    assert said in _text("collective-timing.md"), said


def test_host_floor_comments():
    text = (DOCS / "collective-timing.md").read_text()
    g = tp.rail_optimized(nodes=1)
    one, eight = (fs.collective(g, "all_reduce", 4096, gpus_per_thread=n) for n in (1, 8))
    assert (one.algorithm, one.protocol) == ("ring", "LL")
    assert f"# {_us(one):.1f} us, then {_us(eight):.1f} us" in text
    torch = fs.collective(g, "all_reduce", 4096, host_overhead=TORCH_CALL_OVERHEAD)
    assert torch.time == pytest.approx(one.time + 25e-6)   # time = max(GPU time, floor) + 25 us
    assert f"# {_us(torch):.1f} us: {_us(one):.1f} us + 25 us" in text


# --- finding 5: concepts.md, PXN relays in lockstep ---------------------------------------

def test_lockstep_relays_take_twice_the_sends_apart():
    g = tp.rail_optimized(3)
    groups = [dict(op="send_recv", size=GiB, ranks=[0, 9]), dict(op="send_recv", size=GiB, ranks=[1, 17])]
    lock, apart, no_pxn = (fs.concurrent(g, groups, **kw).makespan
                           for kw in (dict(lockstep=True), dict(lockstep=False), dict(lockstep=True, pxn=False)))
    alone = GiB / (0.94 * 50e9)                                # 1 GiB on one NDR NIC at its efficiency
    assert apart == pytest.approx(alone, rel=2e-3)
    assert no_pxn == pytest.approx(alone, rel=2e-3)
    assert lock == pytest.approx(2 * alone, rel=2e-3)          # two sends share one relay GPU's NIC
    said = f"take {lock * 1e3:.1f} ms in lockstep against {apart * 1e3:.1f} ms apart or with `pxn=False`"
    assert said in _text("concepts.md"), said
