"""adv19b F5: a mixture of experts trained with tp > 1 needs sequence parallelism. Megatron-Core's
MoELayer.forward (megatron/core/transformer/moe/moe_layer.py) raises "During training, performance
may degrade if MoE and tensor parallelism are enabled without also enabling sequence parallelism."
(until May 2024 megatron/training/arguments.py asserted "When using MoE and tensor parallelism,
sequence parallelism must be used."). training_step refuses it; plan never lists it."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, plan, training_step
from flowsolver.planning import layout_space
from flowsolver.training import get_model


def test_training_step_refuses_moe_tp_without_sequence_parallelism():
    with pytest.raises(ValueError, match=r"sequence_parallel must be True.*mixtral-8x7b.*tp=2"):
        training_step(tp.rail_optimized(2), "mixtral-8x7b", Parallelism(tp=2, ep=8, sequence_parallel=False),
                      Schedule(global_batch=16))


def test_what_megatron_runs_is_still_accepted():
    g = tp.rail_optimized(2)
    # tp 1 without sequence parallelism (nothing to shard), and tp 2 with it
    assert training_step(g, "mixtral-8x7b", Parallelism(tp=1, ep=8, sequence_parallel=False),
                         Schedule(global_batch=16)).tp == 1
    assert training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8), Schedule(global_batch=16)).tp == 2
    # a dense model at tp 2 without it: Megatron runs it
    assert not training_step(g, "llama-3-8b", Parallelism(tp=2, sequence_parallel=False),
                             Schedule(global_batch=16)).profile.sequence_parallel


def test_plan_space_has_no_moe_tp_without_sequence_parallelism():
    spec = get_model("mixtral-8x7b")
    kw = dict(gpu_memory=1e15, tp=(1, 2, 4), cp=1, pp=1, vp=1, ep=4, micro_batch=1, recompute="full", zero=3,
              orders="tp-cp-dp-pp")
    both = layout_space(spec, 16, 32, **kw)
    assert both.feasible
    assert all(lay.sequence_parallel or lay.tp == 1 for lay in both.feasible)
    # tp 2 and 4 without SP: 2 pruned (sequence), tp 1 without SP the same job as with it
    assert both.pruned["sequence"] == 2
    assert {lay.tp for lay in both.feasible} == {1, 2, 4}
    off = layout_space(spec, 16, 32, sequence_parallel=False, **kw)
    assert [lay.tp for lay in off.feasible] == [1] and off.pruned["sequence"] == 2


def test_plan_refuses_to_list_it():
    p = plan(tp.rail_optimized(2), model="mixtral-8x7b", global_batch=16, top=3, tp=2, ep=8, pp=1, cp=1,
             sequence_parallel=False, zero=1, recompute="full", micro_batch=1, vp=1)
    assert not p.rows and p.pruned["sequence"] > 0
