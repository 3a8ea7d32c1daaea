"""Context parallelism's ring-attention sends are NCCL send / receive kernels beside the
attention kernels (Transformer Engine's ``cp_comm_type="p2p"``: ``batch_isend_irecv``): their
CTAs hold SMs the attention then lacks, as DP's hidden traffic (fix21c's ``overlap_cost``), so
a hidden ring step still costs ``channels / SMs x`` its time (fix21c's note, fix22b)."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import ModelSpec, cp_ring_sm_share, layer_compute
from flowsolver.training._exposed import cp_ring_exposed

TINY = ModelSpec("tiny-8", 8, 4096, 14336, 32, 8, 256)
H100_SMS = 132          # H100 SXM5: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper)


def test_a_hidden_step_exposes_its_sm_share_of_the_transfer():
    # cp 4, steps of 0.1 s beside 0.5 s (forward) / 1 s (backward) blocks: all hidden; 3 steps
    # each way, the backward moving KV and KV gradients (2 x): 3 x 0.25 x (0.1 + 0.2)
    assert cp_ring_exposed(0.1, 4, 2.0, 4.0, sm_share=0.25) == pytest.approx(3 * 0.25 * 0.3)
    # a step that outlasts its block exposes the excess, which is more than the share
    assert cp_ring_exposed(1.0, 4, 2.0, 4.0, sm_share=0.25) == pytest.approx(3 * 0.5 + 3 * 1.0)
    assert cp_ring_exposed(0.1, 4, 2.0, 4.0) == 0.0


def test_a_cp_step_charges_every_hidden_ring_step_its_ctas():
    # 32K tokens: the attention (s^2) outlasts the KV chunk's transfer (s)
    r = training_step(tp.rail_optimized(2), TINY, Parallelism(tp=8, cp=2),
                      Schedule(global_batch=8, compute_efficiency=0.46, recompute="selective"), seq_len=32768)
    step = r.profile.comms["cp_step"]
    share = step.result.channels_run / H100_SMS
    assert cp_ring_sm_share(r.profile) == pytest.approx(share) and 0 < share < 0.1
    parts = layer_compute(r.profile, r.schedule)
    cp = 2
    assert 2 * step.per_call < parts["attention_fwd"] / cp     # every step hidden, forward and backward
    # per layer and microbatch: the forward ring, the backward's (KV and KV gradients: 2 x) and,
    # with selective recompute, the forward ring again in the backward: (cp - 1) x (1 + 2 + 1) steps' worth
    per_layer = (cp - 1) * share * step.per_call * (1 + 2 + 1)
    assert r.phases["cp"].exposed == pytest.approx(r.microbatches * TINY.layers * per_layer, rel=1e-9)
