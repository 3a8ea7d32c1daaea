"""Training-step model against published model sizes and formulas derived by hand."""

import math

import pytest

import topologies as tp
from flowsolver import MODELS, concurrent, get_model, training_step
from flowsolver.study import cluster

H100 = 989e12           # dense bf16 peak, H100 SXM datasheet
NDR = 47e9              # measured per-NIC rate (catalogue)


@pytest.mark.parametrize("name,params,active", [
    ("llama-3-8b", 8.0e9, None), ("llama-3-70b", 70.6e9, None), ("llama-3-405b", 405e9, None),
    ("gpt-3-175b", 175e9, None), ("mixtral-8x7b", 46.7e9, 12.9e9)])
def test_presets_have_their_published_sizes(name, params, active):
    # Llama 3 paper, GPT-3 paper, Mixtral paper (total 46.7 B, 12.9 B active per token)
    m = get_model(name)
    assert m.params == pytest.approx(params, rel=0.01)
    if active:
        assert m.active_params == pytest.approx(active, rel=0.01)
    assert set(MODELS) >= {"llama-3-8b", "llama-3-70b", "llama-3-405b", "gpt-3-175b"}


def test_llama_70b_gradients_are_141_gb():
    assert get_model("llama-3-70b").params * 2 == pytest.approx(141e9, rel=0.01)


def test_ideal_network_gives_the_gpu_count_and_the_compute_formula():
    g = cluster("ideal", nodes=2)
    zero = dict(step_latency=0.0, base_latency=0.0)
    r = training_step(g, model="llama-3-8b", tp=8, global_batch=64, collective_options=zero)
    assert r.speedup == pytest.approx(16, rel=1e-6)
    # compute: tokens x (6 N + 12 L h s) / (GPUs x peak x MFU)
    m = get_model("llama-3-8b")
    flops = 6 * m.params + 12 * 32 * 4096 * 8192
    assert r.compute_time == pytest.approx(64 * 8192 * flops / (16 * H100 * 0.43), rel=1e-9)
    # a 1F1B pipeline of pp stages idles (pp - 1) of m + pp - 1 microbatch slots
    p2 = training_step(g, model="llama-3-8b", tp=8, pp=2, global_batch=64, collective_options=zero)
    micro = 64 // p2.dp
    assert p2.speedup == pytest.approx(16 * micro / (micro + 1), rel=1e-6)


def test_breakdown_adds_up_to_the_step():
    g = tp.rail_optimized(4)
    for kw in (dict(tp=8), dict(tp=4, pp=2), dict(tp=2, pp=2, zero=3), dict(tp=8, zero=0, dp_overlap=0.3), dict(tp=2, pp=4)):
        r = training_step(g, model="llama-3-8b", global_batch=64, **kw)
        assert sum(r.breakdown.values()) == pytest.approx(r.step_time, rel=1e-12)
        assert 0 <= r.comm_overhead < 1 and r.tokens_per_s == pytest.approx(r.tokens_per_step / r.step_time)
    moe = training_step(g, model="mixtral-8x7b", tp=4, ep=4, global_batch=64)
    assert moe.phases["ep"].op == "all_to_all" and moe.phases["ep"].group_size == 4
    assert sum(moe.breakdown.values()) == pytest.approx(moe.step_time, rel=1e-12)


def test_dp_all_reduce_on_a_non_blocking_fabric_matches_the_ring_formula():
    # 8 DP rings of 8 (one GPU per server, one rail each): 2 (p-1)/p x gradient bytes / NIC rate
    g = tp.rail_optimized(8)
    r = training_step(g, model="llama-3-70b", tp=8, zero=0, global_batch=64, algorithms=dict(dp="ring"),
                      collective_options=dict(step_latency=0.0, base_latency=0.0))
    grads = 70.6e9 / 8 * 2
    assert r.phases["dp"].per_call == pytest.approx(2 * 7 / 8 * grads / NDR, rel=0.01)
    assert r.phases["dp"].bottleneck_tier == "access"


def test_a_faster_network_never_makes_a_step_slower():
    kw = dict(model="llama-3-70b", tp=8, global_batch=8, dp_overlap=0.0)
    times = [training_step(tp.rail_optimized(8, link=link), **kw).step_time
             for link in ("eth_100g", "ib_hdr", "ib_ndr", "ib_xdr")]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert times[0] > 1.5 * times[-1]          # and the network matters at this setting


def test_recompose_equals_a_fresh_solve():
    g = tp.rail_optimized(2)
    a = training_step(g, model="llama-3-8b", tp=4, pp=2, global_batch=16).recompose(global_batch=64, dp_overlap=0.2)
    b = training_step(g, model="llama-3-8b", tp=4, pp=2, global_batch=64, dp_overlap=0.2)
    assert a.step_time == pytest.approx(b.step_time, rel=1e-12)
    assert a.breakdown == pytest.approx(b.breakdown, rel=1e-12)


def test_bad_settings_raise():
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=r"tp \* pp \* dp must equal the GPU count 16, got tp=8, pp=2, dp=2"):
        training_step(g, model="llama-3-8b", tp=8, pp=2, dp=2)
    with pytest.raises(ValueError, match="pp \\(3\\) must divide the model's 32 layers"):
        training_step(tp.rail_optimized(3), model="llama-3-8b", tp=8, pp=3)
    with pytest.raises(ValueError, match="ep \\(2\\) needs a mixture-of-experts model"):
        training_step(g, model="llama-3-8b", tp=8, ep=2)
    with pytest.raises(ValueError, match="global_batch must be a positive multiple of dp x micro_batch = 2"):
        training_step(g, model="llama-3-8b", tp=8, global_batch=3)
    with pytest.raises(ValueError, match="zero must be 0, 1, 2 or 3"):
        training_step(g, model="llama-3-8b", tp=8, zero=4)
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\]"):
        training_step(g, model="llama-3-8b", tp=8, mfu=0.0)
    with pytest.raises(ValueError, match="unknown model 'llama-2'; presets: llama-3-8b"):
        training_step(g, model="llama-2", tp=8)


def test_lockstep_groups_equal_the_event_driven_run():
    g = tp.rail_optimized(4)
    groups = [dict(op="all_reduce", size=2**28, ranks=[j + 8 * s for s in range(4)], algorithm="ring")
              for j in range(8)]
    events = concurrent(g, groups)
    lock = concurrent(g, groups, lockstep=True)
    assert lock.makespan == pytest.approx(events.makespan, rel=1e-6)
    assert lock.alone == pytest.approx(events.alone, rel=1e-9)
    with pytest.raises(ValueError, match="lockstep=True needs collectives with one op, size"):
        concurrent(g, [groups[0], dict(groups[1], size=2**20)], lockstep=True)
    assert math.isnan(concurrent(g, groups[:2], alone=False).alone[0])


def test_memory_estimate_follows_the_zero_and_activation_formulas():
    from flowsolver.training import memory_per_gpu

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
