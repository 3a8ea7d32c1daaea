"""adv19b F3: an interleaved pipeline (vp > 1) needs its microbatches per step to be at least pp
and a multiple of it. Megatron-Core's forward_backward_pipelining_with_interleaving
(megatron/core/pipeline_parallel/schedules.py) groups them by microbatch_group_size_per_vp_stage
(default pp) and raises a ValueError when the group outnumbers the microbatches and a
RuntimeError when 0 < M % PP < PP. training_step refuses such a layout, vp="auto" never picks
one and plan never lists one."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, training_step
from flowsolver.planning import layout_space
from flowsolver.training import get_model

G = tp.rail_optimized(1)                # 8 H100: TP 2 x PP 4, DP 1: microbatches = global batch


@pytest.mark.parametrize("batch", [2, 6, 10])       # fewer than pp = 4; 6 % 4 = 2; 10 % 4 = 2
def test_interleaved_refuses_microbatches_not_a_multiple_of_pp(batch):
    with pytest.raises(ValueError, match=r"vp \(2\).*microbatches.*= %d\).*pp \(4\)" % batch):
        training_step(G, "llama-3-8b", Parallelism(tp=2, pp=4, vp=2), Schedule(global_batch=batch))


def test_interleaved_runs_a_multiple_of_pp_and_vp1_any_count():
    r = training_step(G, "llama-3-8b", Parallelism(tp=2, pp=4, vp=2), Schedule(global_batch=8))
    assert (r.vp, r.microbatches) == (2, 8)
    # the plain 1F1B schedule takes any count (Megatron-Core's non-interleaved schedule has no such check)
    assert training_step(G, "llama-3-8b", Parallelism(tp=2, pp=4), Schedule(global_batch=6)).microbatches == 6
    with pytest.raises(ValueError, match=r"vp \(2\)"):
        r.recompose(global_batch=10)
    assert r.recompose(global_batch=16).microbatches == 16


def test_vp_auto_excludes_unrunnable_interleaving():
    r = training_step(G, "llama-3-8b", Parallelism(tp=2, pp=4, vp=(1, 2, 4)), Schedule(global_batch=6))
    assert r.vp == 1
    assert {e.vp for e in r.chosen.excluded} == {2, 4}
    assert all("multiple of it" in e.reason for e in r.chosen.excluded)
    assert {c.vp for c in r.chosen.timed} == {1}


def test_plan_space_never_lists_unrunnable_interleaving():
    spec = get_model("llama-3-8b")
    kw = dict(gpu_memory=80e9, tp=2, cp=1, pp=4, vp=(1, 2, 4), micro_batch=(1, 2), recompute="selective",
              zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    for batch in (2, 6, 8, 12):
        space = layout_space(spec, 8, batch, **kw)
        for lay in space.feasible:
            m = batch // (lay.dp * lay.micro_batch)
            assert lay.vp == 1 or (m >= lay.pp and m % lay.pp == 0), (batch, lay.label)
    # 8 sequences: mb 1 (8 microbatches) interleaves, mb 2 (4) too; 6: neither
    assert {(lay.vp, lay.micro_batch) for lay in layout_space(spec, 8, 8, **kw).feasible} >= {(2, 1), (2, 2)}
    assert {lay.vp for lay in layout_space(spec, 8, 6, **kw).feasible} == {1}
