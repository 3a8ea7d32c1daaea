"""adv19b F1: ``reduce_dtype="fp32"`` makes the gradient buffers fp32 (Megatron-Core's
``grad_reduce_in_fp32``: ``grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype``,
megatron/core/distributed/param_and_grad_buffer.py), so the step's memory and the planner's
count them at 4 bytes, not 2 (ZeRO 0 to 2; FSDP2's gradients do not change with it)."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, training_step
from flowsolver.planning._space import layout_space
from flowsolver.training import get_model, memory_per_gpu

# Llama 3 70B by hand: hidden 8192, FFN 28672 (gated), 64 heads, 8 KV heads of 128, 80 layers,
# vocabulary 128256, untied embeddings; per TP-8 rank of one stage
H, FFN, KV, LAYERS, VOCAB = 8192, 28672, 8 * 128, 80, 128256
PER_GPU = (LAYERS * (2 * H * H + 2 * H * KV + 3 * H * FFN) + 2 * VOCAB * H) / 8      # 8.82e9 parameters


@pytest.fixture(scope="module")
def steps():
    g = tp.rail_optimized(8)                            # 64 H100: TP 8 x DP 8
    return {rd: training_step(g, "llama-3-70b", Parallelism(tp=8, zero=1, reduce_dtype=rd),
                              Schedule(global_batch=64)) for rd in ("bf16", "fp32")}


def test_fp32_reduce_counts_4_byte_gradient_buffers(steps):
    bf16, fp32 = steps["bf16"], steps["fp32"]
    # 2 extra bytes a parameter: the optimizer step's fp32 copy (4 / d) of bf16 gradients comes after
    # the activations are freed and is smaller than them, so it adds nothing in either case
    assert fp32.memory_per_gpu - bf16.memory_per_gpu == pytest.approx(2 * PER_GPU, rel=1e-9)
    hand = memory_per_gpu("llama-3-70b", tp=8, pp=1, dp=8, zero=1, microbatches=8, recompute="none",
                          attention="auto", grad_bytes=4)
    assert fp32.memory_per_gpu == pytest.approx(hand, rel=1e-12)
    # 71.5 GB fits an H100's 83.9 usable GB, 89.2 GB does not
    assert bf16.fits and not fp32.fits
    assert fp32.usable_memory < fp32.memory_per_gpu


def test_fsdp_memory_does_not_change_with_the_reduce_dtype():
    g = tp.rail_optimized(2)
    mem = [training_step(g, "llama-3-8b", Parallelism(tp=1, zero=3, reduce_dtype=rd),
                         Schedule(global_batch=16)).memory_per_gpu for rd in ("bf16", "fp32")]
    assert mem[0] == mem[1]


def test_plan_space_counts_fp32_gradient_buffers():
    spec = get_model("llama-3-70b")
    kw = dict(gpu_memory=141e9, tp=8, cp=1, pp=1, vp=1, micro_batch=1, recompute="none", zero=1,
              sequence_parallel=True, orders="tp-cp-dp-pp", attention="auto")
    bf16 = layout_space(spec, 64, 64, **kw)
    fp32 = layout_space(spec, 64, 64, reduce_bytes=4, **kw)
    assert fp32.memory[0] - bf16.memory[0] == pytest.approx(2 * PER_GPU, rel=1e-9)
    # on an H100 (80 GB) the fp32 buffers no longer fit: pruned for memory
    h100 = dict(kw, gpu_memory=80e9)
    assert len(layout_space(spec, 64, 64, **h100).feasible) == 1
    pruned = layout_space(spec, 64, 64, reduce_bytes=4, **h100)
    assert not pruned.feasible and pruned.pruned["memory"] == 1
