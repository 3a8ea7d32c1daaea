"""The memory estimate against the ZeRO and activation formulas."""

import pytest

import topologies as tp
from flowsolver import get_model, training_step
from flowsolver.training import memory_per_gpu


def test_memory_estimate_follows_the_zero_and_activation_formulas():
    m = get_model("llama-3-70b")
    n = m.params
    act = 34 * 8192 * 8192 / 8 * 80               # 34 s b h / tp per layer, 80 layers, b = 1
    assert memory_per_gpu(m, tp=8, pp=1, dp=8, zero=1) == pytest.approx(4 * n / 8 + 12 * n / 64 + act, rel=1e-12)
    assert memory_per_gpu(m, tp=8, pp=1, dp=8, zero=3) == pytest.approx(16 * n / 64 + act, rel=1e-12)
    # 1F1B keeps pp microbatches of a stage's layers in flight on the first stage
    assert memory_per_gpu(m, tp=8, pp=4, dp=2, zero=1, microbatches=16) == pytest.approx(
        4 * n / 32 + 12 * n / 64 + act / 4 * 4, rel=1e-12)
    g = tp.rail_optimized(8)
    assert training_step(g, model=m, tp=8, global_batch=8).fits                    # ~71 of 80 GB
    assert not training_step(g, model=m, tp=1, global_batch=64, zero=1).fits       # 4 bytes x 70.6 B per GPU


def test_memory_estimate_shards_experts_over_ep_and_checks_its_arguments():
    m = get_model("mixtral-8x7b")
    dense, experts = m.params - m.expert_params, m.expert_params
    act = 34 * 4096 * 4096 / 2 * 32
    # ZeRO 0: 16 bytes per parameter held, the experts split over ep as well
    assert memory_per_gpu(m, tp=2, pp=1, dp=4, ep=4, zero=0) == pytest.approx(
        16 * (dense / 2 + experts / 8) + act, rel=1e-12)
    with pytest.raises(ValueError, match="zero must be 0, 1, 2 or 3, got 4"):
        memory_per_gpu(m, tp=1, pp=1, dp=1, zero=4)
    with pytest.raises(ValueError, match="tp must be an integer >= 1, got 0"):
        memory_per_gpu(m, tp=0, pp=1, dp=1)
