"""The pipeline's idle time when the microbatches cannot fill it (units: seconds)."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, plan, training_step
from flowsolver.training._pipeline import bubble_slots


@pytest.mark.parametrize("pp, vp, m", [(4, 1, 1), (4, 8, 1), (4, 2, 3), (8, 4, 8), (8, 4, 16)])
def test_bubble_slots_follow_the_schedule_by_hand(pp, vp, m):
    # each microbatch passes pp stages of vp chunks in turn; the next starts one chunk (1 / vp of a
    # slot) behind: the last finishes after pp + (m - 1) / vp slots when m < pp, and the filled
    # interleaved schedule idles (pp - 1) / vp slots (Narayanan et al. 2021, section 2.2)
    by_hand = pp + (m - 1) / vp - m if m < pp else (pp - 1) / vp
    assert bubble_slots(pp, vp, m) == pytest.approx(by_hand)


def test_interleaving_one_microbatch_gains_nothing():
    # one microbatch through 4 stages: at least 4 stages' compute (it was 2.9x faster at vp 8 than
    # that bound); interleaving it is refused (Megatron-Core's interleaved schedule needs the
    # microbatches to be a multiple of pp, at least pp)
    g = tp.rail_optimized(2)
    r = training_step(g, "llama-3-8b", Parallelism(tp=2, pp=4, vp=1, micro_batch=8), Schedule(global_batch=16))
    assert r.microbatches == 1
    assert r.step_time >= 4 * r.compute_time / r.microbatches
    with pytest.raises(ValueError, match=r"vp \(8\)"):
        training_step(g, "llama-3-8b", Parallelism(tp=2, pp=4, vp=8, micro_batch=8), Schedule(global_batch=16))


def test_plan_s_best_layout_is_possible():
    # a global batch of one sequence: no layout's step beats one sequence through its stages
    p = plan(tp.rail_optimized(2), model="llama-3-8b", global_batch=1, top=5)
    for row in p.rows:
        r = row.result
        assert r.step_time >= row.layout.pp * r.compute_time / r.microbatches * (1 - 1e-9)
