"""Design.best's ties (flowsolver/_design.py): among equal times (or tokens/s) the cheaper,
among equal prices the faster, then the lower power; the pick is on the front. It broke ties by
grid order, giving the dearest of six equally fast fabrics (adv19a F2)."""

import math

import pytest

from flowsolver import design
from flowsolver._design import Candidate, Design


def _design(*candidates):
    return Design(candidates=list(candidates), front=[], dominated=0, timed=len(candidates), seconds=0.0)


def _candidate(family, price, time, power=1000.0, tokens=math.nan, gpu_price=0.0, lifetime=math.nan):
    return Candidate(family=family, link="ib_ndr", oversubscription=1.0, radix=64, nics=8, optics="multimode",
                     price=price, power=power, time=time, gpus=64, tokens=tokens, gpu_price=gpu_price,
                     lifetime=lifetime)


def test_the_tester_s_six_equally_fast_fabrics_give_the_cheapest():
    # a TP all-reduce inside one server: the network is off its path, so every fabric times the
    # same; best("time") was rail_optimized ib_ndr (the grid's first, 571,296 USD), 3.2x the
    # cheapest, fat_tree roce_400g (the front's only member)
    r = design(64, [("all_reduce", 2 ** 30, range(8))], links=("ib_ndr", "roce_400g"), oversubscriptions=(1.0,),
               optics=("multimode",))
    assert len(r.candidates) == 6 and len({c.time for c in r.candidates}) == 1
    best = r.best("time")
    assert (best.family, best.link) == ("fat_tree", "roce_400g")
    assert all(best.price < c.price for c in r.candidates if c is not best)
    assert [(c.family, c.link) for c in r.front] == [("fat_tree", "roce_400g")]
    assert r.best("capex_time") is best and r.best("price") is best


def test_equal_times_go_to_the_cheaper_then_the_lower_power():
    # grid order: the dearest first, as the tester's rail-optimized bill came first
    dear, cheap, cheap_hot = (_candidate("dear", 300.0, 1.0, tokens=8.0), _candidate("cheap", 100.0, 1.0, tokens=8.0),
                              _candidate("cheap, hotter", 100.0, 1.0, power=2000.0, tokens=8.0))
    for order in ((dear, cheap_hot, cheap), (cheap, dear, cheap_hot), (cheap_hot, cheap, dear)):
        r = _design(*order)
        assert r.best("time") is cheap and r.best("tokens_per_s") is cheap


def test_equal_prices_go_to_the_faster():
    slow, fast = _candidate("slow", 100.0, 2.0), _candidate("fast", 100.0, 1.0)
    assert _design(slow, fast).best("price") is fast and _design(fast, slow).best("price") is fast
    assert _design(slow, fast).best("capex") is fast


def test_equal_per_usd_figures_go_to_the_faster():
    # capex x time 200 USD s both, tokens/s per USD 8 / 200 both: the faster one (then the cheaper)
    slow, fast = _candidate("slow", 100.0, 2.0, tokens=8.0), _candidate("fast", 200.0, 1.0, tokens=8.0)
    assert slow.capex_time == fast.capex_time and slow.throughput_per_usd == fast.throughput_per_usd
    for key in ("capex_time", "throughput_per_usd", None):
        assert _design(slow, fast).best(key) is fast and _design(fast, slow).best(key) is fast, key


def test_a_strictly_better_key_still_wins_over_its_ties():
    cheap_slow, dear_fast = _candidate("cheap", 100.0, 2.0), _candidate("dear", 300.0, 1.0)
    r = _design(cheap_slow, dear_fast)
    assert r.best("time") is dear_fast and r.best("price") is cheap_slow


@pytest.mark.parametrize("key", ["time", "price"])
def test_one_fabric_s_optics_variants_give_the_cheaper_bill(key):
    # one fabric in multimode and singlemode optics times the same; best("time") gave the
    # singlemode bill (first in the grid here); best("price") the cheaper anyway
    r = design(16, [("all_reduce", 2 ** 20, range(8))], families=("rail_optimized",), links=("ib_ndr",),
               oversubscriptions=(1.0,), optics=("singlemode", "multimode"))
    single, multi = r.candidates
    assert (single.optics, multi.optics) == ("singlemode", "multimode")
    assert single.time == multi.time and multi.price < single.price
    assert r.best(key) is multi
