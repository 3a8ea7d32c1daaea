"""adv19b F2: a capacity factor pads (above 1) or cuts (below 1) each expert's input, and the
grouped GEMM saves that padded input for its backward (Megatron-Core's
moe_pad_expert_input_to_capacity): the expert MLP's saved activations scale with it, as the
all-to-all bytes and the expert GEMMs already do."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, training_step
from flowsolver.planning import layout_space
from flowsolver.training import get_model, memory_per_gpu
from flowsolver.training._memory import activation_bytes_per_layer

# Mixtral 8x7B by hand: hidden 4096, FFN 14336 (gated), top 2 of 8 experts, 32 layers, 4096 tokens
H, FFN, TOP_K, LAYERS, SEQ = 4096, 14336, 2, 32, 4096
# per token: the FC1 inputs (top_k h) and the inner tensors (top_k x 3 ffn), 2 bytes each
EXPERT_MLP = (TOP_K * H + TOP_K * 3 * FFN) * 2 * SEQ * LAYERS         # 24.70 GB at capacity factor 1


def test_expert_activations_by_hand():
    spec = get_model("mixtral-8x7b")
    kw = dict(micro_batch=1, tp=1, cp=1, recompute="selective", sequence_parallel=True)
    one = activation_bytes_per_layer(spec, **kw)
    for cf in (0.5, 1.25, 2.0):
        assert activation_bytes_per_layer(spec, capacity_factor=cf, **kw) - one == \
            pytest.approx((cf - 1) * EXPERT_MLP / LAYERS, rel=1e-12)


@pytest.fixture(scope="module")
def steps():
    g = tp.rail_optimized(2)
    return {cf: training_step(g, "mixtral-8x7b", Parallelism(tp=1, ep=8, capacity_factor=cf),
                              Schedule(global_batch=32)) for cf in (0.5, 1.0, 2.0)}


def test_step_memory_follows_the_capacity_factor(steps):
    one = steps[1.0].memory_per_gpu
    # one microbatch in flight (pp 1): the expert MLP's saved tensors x (cf - 1)
    assert steps[2.0].memory_per_gpu - one == pytest.approx(EXPERT_MLP, rel=1e-9)     # 95.1 -> 119.8 GB
    assert steps[0.5].memory_per_gpu - one == pytest.approx(-0.5 * EXPERT_MLP, rel=1e-9)   # -> 82.8 GB
    # 82.8 GB fits an H100's 83.9 usable GB; 95.1 GB does not
    assert steps[0.5].fits and not steps[1.0].fits and not steps[2.0].fits
    assert steps[2.0].memory_per_gpu == pytest.approx(
        memory_per_gpu("mixtral-8x7b", tp=1, pp=1, dp=16, ep=8, microbatches=16, recompute="none", attention="auto",
                       capacity_factor=2.0), rel=1e-12)


def test_plan_space_counts_the_padding():
    spec = get_model("mixtral-8x7b")
    kw = dict(gpu_memory=1e15, tp=1, cp=1, pp=1, vp=1, ep=8, micro_batch=1, recompute="none", zero=1,
              sequence_parallel=True, orders="tp-cp-dp-pp", attention="auto")
    one, two = (layout_space(spec, 16, 32, capacity_factor=cf, **kw).memory[0] for cf in (1.0, 2.0))
    assert two - one == pytest.approx(EXPERT_MLP, rel=1e-9)


def test_capacity_factor_is_checked():
    with pytest.raises(ValueError, match="capacity_factor"):
        memory_per_gpu("mixtral-8x7b", tp=1, pp=1, dp=16, ep=8, capacity_factor=0)
    with pytest.raises(ValueError, match="capacity_factor needs a mixture-of-experts"):
        memory_per_gpu("llama-3-8b", tp=1, pp=1, dp=8, capacity_factor=2.0)
