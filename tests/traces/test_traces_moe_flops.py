"""A step's trace annotates its compute with the FLOPs the step computes: a mixture of experts
whose capacity factor drops tokens computes less than its model FLOPs (ModelSpec.trained_flops_per_token)."""

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.traces import workload_from_step


def test_a_dropping_capacity_factor_never_annotates_more_than_the_gpus_peak():
    # Mixtral 8x7B at capacity factor 0.1 drops 90 % of its routed tokens' expert GEMMs; a compute
    # node's FLOPs over its duration cannot exceed the H100's dense bf16 peak, 989.4 TFLOP/s
    # (NVIDIA H100 SXM datasheet); counting the dropped tokens annotated ~1,990 TFLOP/s
    step = training_step(tp.rail_optimized(2), "mixtral-8x7b", Parallelism(ep=8, capacity_factor=0.1),
                         Schedule(global_batch=16))
    nodes = workload_from_step(step).ranks[0].nodes
    rates = [n.flops / n.duration for n in nodes if n.flops > 0 and n.duration > 0]
    assert rates and max(rates) <= 989.4e12
