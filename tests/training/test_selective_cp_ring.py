"""Selective recompute under context parallelism: the checkpointed core attention's forward runs
again in every layer's backward (Megatron-Core's _checkpointed_attention_forward re-runs
_run_core_attention, Transformer Engine's context-parallel attention, whose forward passes the KV
chunks around the CP ring), so each layer runs the forward ring twice (fix19a's note: it was
counted once, as without recompute).

Hand count, flat model: Llama 3 8B (h 4096, s 8192, 8 KV heads of 128), TP 8 x CP 2 on 2 DGX H100
(the CP pairs cross the servers). One ring step sends a KV chunk, 2 (s / cp) x 1 head x 128 x 2 B;
it hides behind 1 / cp of the pass's attention, the forward's 2 s^2 h / (tp cp) FLOPs at 0.62 x
989 TFLOP/s (the backward twice that, with the chunk and its gradient)."""

import pytest

import topologies as tp
from flowsolver import training_step
from flowsolver.traces import replay, workload_from_step

H, S, L, TP, CP = 4096, 8192, 32, 8, 2


def _step(recompute):
    return training_step(tp.rail_optimized(2), model="llama-3-8b", tp=TP, cp=CP, global_batch=8,
                         recompute=recompute, compute_efficiency=0.44)


def _hand(step, rings_forward):
    """Exposed CP seconds of the step: every layer's forward ring ``rings_forward`` times and
    its backward ring once, ``cp - 1`` steps each."""
    kv = 2 * (S / CP) * 1 * 128 * 2
    assert step.profile.comms["cp_step"].bytes == kv == 2_097_152
    t = step.profile.comms["cp_step"].per_call           # one ring step, every pair at once (solved)
    fwd = 2.0 * S * S * H / (TP * CP) / (0.62 * 989e12)
    per_layer = (CP - 1) * (rings_forward * max(0.0, t - fwd / CP) + max(0.0, 2 * t - 2 * fwd / CP))
    assert t - fwd / CP > 0                               # the ring step outlasts its block here
    return step.microbatches * L * per_layer


def test_selective_runs_every_layer_s_forward_ring_again():
    none, selective, full = _step("none"), _step("selective"), _step("full")
    m = none.microbatches
    assert none.phases["cp"].calls == 3 * L * m
    assert none.phases["cp"].exposed == pytest.approx(_hand(none, 1), rel=1e-9)
    # selective: forward ring, the checkpointed forward's ring again, backward ring
    assert selective.phases["cp"].calls == 4 * L * m
    assert selective.phases["cp"].exposed == pytest.approx(_hand(selective, 2), rel=1e-9)
    # the same ring traffic as full recompute of every layer
    assert selective.phases["cp"].exposed == pytest.approx(full.phases["cp"].exposed, rel=1e-12)


def test_a_selective_trace_carries_the_second_ring_and_replays_to_the_step():
    g = tp.rail_optimized(2)
    step = _step("selective")
    w = workload_from_step(step)
    rank = w.ranks[0]
    sends = [n for n in rank.nodes if n.kind == "send" and ".cp." in n.name]
    # per layer and microbatch: 1 forward step, 1 again in the backward, 2 backward (KV and dKV)
    assert len(sends) == step.microbatches * L * (CP - 1) * (1 + 1 + 2)
    assert replay(g, w).iteration_time == pytest.approx(step.step_time, rel=0.01)
