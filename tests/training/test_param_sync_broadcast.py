"""ZeRO 1 as InternLM's HybridZeroOptimizer runs it (``Parallelism.param_sync="broadcast"``):
gradients all-reduced in buckets beside the last backward, then every shard's owner
broadcasts its updated parameters to the DP group, one broadcast after the other, exposed
(InternLM 20fe5ac, internlm/solver/optimizer/hybrid_zero_optim.py: ``reduce_tensor(...,
dst_rank=None)`` is an all-reduce; ``broadcast_params`` loops ``dist.broadcast`` over the
ZeRO group's ranks, "TODO: support broadcast overlap")."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, collective, training_step
from flowsolver.training import ModelSpec, dp_overlap_costs, layer_compute

# Llama-3-8B's layer, 4 layers, small vocabulary: a step that solves in seconds
TINY = ModelSpec("tiny-4", 4, 4096, 14336, 32, 8, 256)


def _step(param_sync, graph=None):
    graph = graph or tp.rail_optimized(2)
    return graph, training_step(graph, TINY, Parallelism(tp=2, zero=1, param_sync=param_sync),
                                Schedule(global_batch=16, compute_efficiency=0.46, recompute="selective"))


def test_the_owners_broadcast_their_shards_one_after_the_other_after_the_step():
    g, r = _step("broadcast")
    dp = 8                                           # 16 GPUs / tp 2
    ranks = r.profile.layout.groups("dp")[0]
    # one owner's shard: the dense parameters over tp, bf16, split over the dp owners
    shard = TINY.params / 2 * 2 / dp
    b = r.profile.comms["dp_broadcast"]
    assert (b.op, b.group_size, b.bytes) == ("broadcast", dp, pytest.approx(shard))
    alone = collective(g, "broadcast", shard, ranks=list(ranks)).time
    # every DP group broadcasts at once: at least one group's time on its own
    assert b.per_call >= alone * (1 - 1e-9)
    # the gradients: an all-reduce of the whole dense gradient (not a reduce-scatter)
    assert r.profile.comms["dp"].op == "all_reduce" and r.profile.comms["dp"].gather == 0.0
    phase = r.phases["dp"]
    assert phase.op == "all_reduce+broadcast" and phase.calls == 1 + dp
    # exposed: the all-reduce's last bucket (one of the 4 layers' buckets, the rest hidden in
    # the last backward: 2/3 of the microbatch's compute, far longer here) plus dp broadcasts
    ar = r.profile.comms["dp"].per_call
    t_mb = r.compute_time / r.microbatches
    assert 2.0 / 3.0 * t_mb > ar
    # and the 3 hidden buckets' NCCL kernels' cost to the backward beside them (overlap_cost)
    cost = dp_overlap_costs(r.profile, layer_compute(r.profile, r.schedule))["dp"][0]
    assert 0 < cost < ar
    assert phase.exposed == pytest.approx(ar / 4 + 3 / 4 * cost + dp * b.per_call, rel=1e-9)


def test_the_default_all_gather_is_unchanged_and_broadcast_costs_the_serial_broadcasts():
    _, a = _step("all_gather")
    _, b = _step("broadcast")
    assert "dp_broadcast" not in a.profile.comms and a.profile.comms["dp"].op == "reduce_scatter"
    # the same compute; the step longer by the exposed broadcasts less what the all-gather exposed
    assert a.compute_time == b.compute_time
    assert b.step_time - a.step_time == pytest.approx(b.phases["dp"].exposed - a.phases["dp"].exposed, rel=1e-9)
    assert b.step_time > a.step_time


def test_param_sync_is_checked():
    with pytest.raises(ValueError, match="param_sync must be one of all_gather, broadcast"):
        Parallelism(zero=1, param_sync="scatter")
    with pytest.raises(ValueError, match="needs zero 1 or 2"):
        Parallelism(zero=3, param_sync="broadcast")
    with pytest.raises(ValueError, match="needs zero 1 or 2"):
        training_step(tp.rail_optimized(1), TINY, tp=2, zero=0, param_sync="broadcast", global_batch=8)


def test_the_trace_writer_refuses_the_broadcasts():
    from flowsolver.traces import workload_from_step

    _, r = _step("broadcast")
    with pytest.raises(ValueError, match="param_sync='broadcast'"):
        workload_from_step(r)
