"""The flat compute model's attention blocks, what CP's ring steps hide behind, are one pass's:
the plain layer's attention (a third forward, two thirds backward), whatever the recompute; the
recomputed forward runs its own ring. Before (fix19a's note), full recompute gave each block 4/9
of the layer's attention where one pass has 1/3: a third more than the blocks allow."""

import pytest

import topologies as tp
from flowsolver import training_step
from flowsolver.training import get_model
from flowsolver.training._compose import layer_compute


@pytest.mark.parametrize("recompute", ["none", "full", "selective"])
def test_flat_attention_blocks_are_one_pass(recompute):
    m = get_model("llama-3-8b")
    g = tp.rail_optimized(2)
    step = training_step(g, model=m, tp=8, cp=2, global_batch=8, recompute=recompute, compute_efficiency=0.44)
    parts = layer_compute(step.profile, step.schedule)
    tokens = step.profile.micro_batch * m.seq_len
    # one layer's attention FLOPs a token (forward and backward, no recompute), over tp x cp GPUs,
    # at DEFAULT_ATTENTION_EFFICIENCY (0.62) of the H100's bf16 dense peak (989 TFLOP/s)
    seconds = tokens * m.layer_attention_flops() / (8 * 2 * 0.62 * 989e12)
    assert parts["attention_fwd"] == pytest.approx(seconds / 3, rel=1e-12)
    assert parts["attention_bwd"] == pytest.approx(2 * seconds / 3, rel=1e-12)
