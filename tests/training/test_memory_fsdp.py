"""FSDP (ZeRO 3) memory as the step's timing schedules it: under a pipeline the stage's
parameters stay gathered for the step and its gradients accumulate unsharded until the last
backward's reduce-scatter; without one, the layers in flight and the root unit are unsharded
beside the shards. Expected bytes from parameter counts."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, get_model, training_step
from flowsolver.planning import layout_space
from flowsolver.training import memory_breakdown, memory_per_gpu

# Llama 3 70B (paper, table 3): 80 layers, hidden 8192, FFN 28672, 64 heads, 8 KV heads of 128,
# vocabulary 128256, input embedding and output projection untied; 8192-token sequences
L, H, F, KVH, D, V, S = 80, 8192, 28672, 8, 128, 128256, 8192
LAYER = 2 * H * H + 2 * H * KVH * D + 3 * H * F        # Q, O; K, V; SwiGLU's three matrices
TABLE = V * H


def test_fsdp_under_a_pipeline_holds_the_stage_gathered():
    # TP 1 x PP 4 x DP 16 on 64 H100s, 64 sequences: 4 microbatches of 1 per replica, full recompute.
    # Stage 0: 20 layers and the embedding, 18.2 B parameters, whole on every GPU of the stage
    stage0 = 20 * LAYER + TABLE
    b = memory_breakdown("llama-3-70b", tp=1, pp=4, dp=16, zero=3, microbatches=4, recompute="full")[0]
    assert b["weights"] == pytest.approx(2 * stage0, rel=1e-12)             # bf16, its shard among them
    assert b["gradients"] == pytest.approx(2 * stage0, rel=1e-12)           # accumulated whole to the last backward
    assert b["optimizer"] == pytest.approx(12 * stage0 / 16, rel=1e-12)     # fp32 master and moments stay sharded
    # activations: 1F1B keeps 4 microbatches in flight on stage 0, each layer's input (2 s h bytes),
    # plus the working set of the layer being recomputed (33.5 s h: GQA, SwiGLU, flash attention)
    act = 4 * 20 * 2 * S * H + 33.5 * S * H
    want = 2 * stage0 + 2 * stage0 + 12 * stage0 / 16 + act                 # ~99.3 GB
    assert want / 1e9 == pytest.approx(99.3, abs=0.1)
    r = training_step(tp.rail_optimized(8), "llama-3-70b", Parallelism(tp=1, pp=4, dp=16, zero=3),
                      Schedule(global_batch=64, recompute="full"))
    # the timing it is consistent with: each of the stage's 20 layers gathered and reduced once a step, not
    # once a microbatch (and the root unit, both tables, as a quarter of its calls on each of the 4 stages)
    assert r.microbatches == 4
    assert r.phases["dp"].calls == pytest.approx(2 * (20 + 2 * TABLE / LAYER / 4), rel=1e-12)
    assert r.memory_per_gpu == pytest.approx(want, rel=1e-12) and not r.fits     # 85.5 GB on an H100
    # plan's enumeration prunes it on memory
    space = layout_space(get_model("llama-3-70b"), 64, 64, gpu_memory=r.gpu_memory, tp=1, cp=1, pp=4, vp=1,
                         micro_batch=1, recompute="full", zero=3, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert space.feasible == () and space.pruned["memory"] == 1


def test_fsdp_fp8_all_gather_holds_one_byte_weights():
    # the FP8 all-gather converts the blocks' linear weights (torchao's float8 converter turns
    # nn.Linear only; torchtitan's leaves the output projection out): the embedding stays bf16
    stage0 = 20 * LAYER + TABLE
    b = memory_breakdown("llama-3-70b", tp=1, pp=4, dp=16, zero=3, microbatches=4, recompute="full",
                         gather_bytes=1)[0]
    assert b["weights"] == pytest.approx(20 * LAYER + 2 * TABLE, rel=1e-12)
    assert b["gradients"] == pytest.approx(2 * stage0, rel=1e-12)
    # without a pipeline: the 2 / dp shards, two blocks in flight at one byte, both tables at two
    flat = memory_breakdown("llama-3-70b", tp=1, pp=1, dp=64, zero=3, gather_bytes=1)[0]
    assert flat["weights"] == pytest.approx(2 * (L * LAYER + 2 * TABLE) / 64 + 2 * LAYER + 2 * 2 * TABLE, rel=1e-12)
    # training_step's FP8 all-gather: one byte fewer per linear weight of stage 0 than the bf16 gather
    g, schedule = tp.rail_optimized(8), Schedule(global_batch=64, recompute="full", precision="fp8")
    fp8, bf16 = (training_step(g, "llama-3-70b", Parallelism(tp=1, pp=4, dp=16, zero=3, fp8_param_gather=f), schedule)
                 for f in (True, False))
    assert fp8.stage_memory[0] == pytest.approx(bf16.stage_memory[0] - 20 * LAYER, rel=1e-12)
    with pytest.raises(ValueError, match="gather_bytes must be 2 .* or 1"):
        memory_per_gpu("llama-3-70b", tp=1, pp=4, dp=16, zero=3, gather_bytes=4)


def test_fsdp_without_a_pipeline_counts_the_layers_in_flight():
    # TP 8 x DP 8: beside the 2 / dp weight and gradient shards, two layers unsharded (the one
    # computing, the next gathered beside it) and the root unit (both tables), weights and gradients
    b = memory_breakdown("llama-3-70b", tp=8, pp=1, dp=8, zero=3)[0]
    n = (L * LAYER + 2 * TABLE) / 8
    in_flight = (2 * LAYER + 2 * TABLE) / 8
    assert b["weights"] == pytest.approx(2 * n / 8 + 2 * in_flight, rel=1e-12)
    assert b["gradients"] == pytest.approx(2 * n / 8 + 2 * in_flight, rel=1e-12)
    # one rank per shard (dp = 1): nothing is gathered, ZeRO 3 is ZeRO 0's states
    assert memory_per_gpu("llama-3-8b", tp=8, pp=1, dp=1, zero=3) == memory_per_gpu("llama-3-8b", tp=8, pp=1, dp=1,
                                                                                        zero=0)


def test_fsdp_experts_gathered_only_where_sharded():
    # Mixtral 8x7B, TP 1 x PP 2 x DP 8: 16 layers a stage. EP 8: the experts' gradient group
    # (dp / ep) is one rank, so they are held whole as ever; EP 4: two ranks, held gathered
    m = get_model("mixtral-8x7b")
    attn, expert, table = m.attention_params, m.mlp_params, m.vocab * m.hidden
    dense0 = 16 * attn + table
    for ep, local in ((8, 1), (4, 2)):
        b = memory_breakdown(m, tp=1, pp=2, dp=8, ep=ep, zero=3, microbatches=8)[0]
        experts0 = 16 * local * expert
        assert b["weights"] == pytest.approx(2 * dense0 + 2 * experts0, rel=1e-12)
        assert b["gradients"] == pytest.approx(2 * dense0 + 2 * experts0, rel=1e-12)
