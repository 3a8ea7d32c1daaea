"""flowsolver.serve: step times against hand computation, KV transfers against a concurrent run
of the same transfers, the event loop against hand-simulated traces, bad input."""

import dataclasses
from itertools import combinations, product

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving import InstanceLayout, kv_transfer, request_stream, simulate
from flowsolver.serving._kv import kv_flows, wave_finish
from flowsolver.serving._steps import expected_active_experts

# Llama 3 8B (paper, table 3): 32 layers, hidden 4096, FFN 14336, 32 heads, 8 KV heads of 128,
# vocabulary 128256; H100 SXM: 3.35 TB/s datasheet, BabelStream Triad 2.97 TB/s (Azure)
L, H, F, KVH, D, V = 32, 4096, 14336, 8, 128, 128256
PARAMS = L * (2 * H * H + 2 * H * KVH * D + 3 * H * F) + V * H      # read per decode step (embedding lookup aside)
KV_PER_TOKEN = 2 * L * KVH * D * 2                                  # K and V, bf16
HBM = 2.97e12
# the tests of the flat model pass compute_efficiency=0.46 (the kernel tables' steps: test_kernel_steps.py)


@pytest.fixture(scope="module")
def one_server():
    return tp.rail_optimized(nodes=1)


def test_decode_step_is_bytes_over_hbm_bandwidth(one_server):
    r = fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, compute_efficiency=0.46)
    seconds, comm = r.decode_step(4, 4000)
    assert comm == 0.0                                   # one GPU per instance: no communication
    assert seconds == pytest.approx((2 * PARAMS + 4000 * KV_PER_TOKEN) / HBM, rel=1e-12)


def test_decode_step_adds_two_tp_all_reduces_per_layer(one_server):
    r = fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=2, compute_efficiency=0.46)
    seconds, comm = r.decode_step(2, 0)                  # 2 tokens x 4096 x 2 bytes = 16 KiB, on the grid
    # the 4 TP pairs of the server meet on no NVLink port: each all-reduce as alone
    alone = fs.collective(one_server, "all_reduce", 2 * H * 2, ranks=[0, 1]).time
    assert comm == pytest.approx(2 * L * alone, rel=1e-9)
    # per GPU half the weights; the step is memory-bound
    assert seconds == pytest.approx(2 * PARAMS / 2 / HBM + comm, rel=1e-12)


def test_decode_tables_reach_the_largest_batch(one_server):
    # a decode batch of 256 sequences under a token budget of 64: its all-reduces (256 x 4096 x 2
    # bytes = 2 MiB) were read off a table that stopped at 64 tokens' 512 KiB and held its last value
    r = fs.serve(one_server, "llama-3-8b", rate=0.5, duration=10, prompt=32, output=64, tp=8, max_batch=256,
                 token_budget=64)
    _, comm = r.decode_step(256, 0)
    alone = fs.collective(one_server, "all_reduce", 256 * H * 2, protocol="auto").time
    assert comm == pytest.approx(2 * L * alone, rel=1e-9)
    with pytest.raises(ValueError, match="tokens 32768: .* beyond the step tables"):
        r.prefill_step(32768)                          # beyond what the run timed: refused, not held


def test_prefill_step_is_flops_at_the_rate(one_server):
    r = fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, compute_efficiency=0.46)
    seconds, comm = r.prefill_step(4096, sequences=1)
    linear = 2 * 4096 * L * (2 * H * H + 2 * H * KVH * D + 3 * H * F)
    attention = 2 * H * L * 4096 ** 2                   # causal: half of 4 h s^2 per layer
    logits = 2 * V * H                                  # the last token's
    want = linear / (989e12 * 0.46) + attention / (989e12 * 0.62) + logits / (989e12 * 0.46)
    assert comm == 0.0 and seconds == pytest.approx(want, rel=1e-12)


def test_expected_active_experts_against_enumeration():
    experts, top_k, tokens = 4, 2, 3
    subsets = list(combinations(range(experts), top_k))
    active = [len(set().union(*choice)) / experts for choice in product(subsets, repeat=tokens)]
    assert expected_active_experts(experts, top_k, tokens) == pytest.approx(np.mean(active), rel=1e-12)


def test_busiest_rank_experts_against_enumeration():
    # 4 experts on 2 ranks, top-2: every routing of 1 and 2 tokens, the busiest rank's count
    from flowsolver.serving._steps import ROUTING_DRAWS, busiest_rank_experts

    subsets = list(combinations(range(4), 2))
    for tokens in (1, 2):
        busiest = [max(len({e for c in choice for e in c if e // 2 == r}) for r in range(2))
                   for choice in product(subsets, repeat=tokens)]
        # the simulation's mean within 4 standard errors (the count spreads by at most 1)
        assert busiest_rank_experts(4, 2, 2, tokens) == pytest.approx(np.mean(busiest), abs=4 * 0.5 / ROUTING_DRAWS ** 0.5)
    assert busiest_rank_experts(4, 2, 1, 3) == pytest.approx(4 * expected_active_experts(4, 2, 3), rel=1e-12)


def test_moe_decode_waits_for_the_busiest_rank():
    # mixtral on 8 GPUs, ep 8: one sequence's top-2 puts a whole expert on two ranks, and its
    # attention and KV cache on one: that rank reads L (attention + one expert) + the output
    # projection, where the average rank was charged a quarter of an expert and 1/8 of the rest
    m, gpu = fs.get_model("mixtral-8x7b"), tp.get_gpu("h100_sxm")
    r = fs.serve(tp.rail_optimized(1), "mixtral-8x7b", rate=1, duration=2, prompt=128, output=4, tp=1, ep=8,
                 compute_efficiency=0.46,
                 max_batch=8, hbm_efficiency=0.9)
    seconds, comm = r.decode_step(1, 1000)
    d = m.hidden // m.heads
    weights = 2 * (m.layers * (m.attention_params + m.mlp_params) + m.vocab * m.hidden)
    kv = 1000 * 2 * m.layers * m.kv_heads * d * 2
    assert seconds - comm == pytest.approx((weights + kv) / (0.9 * gpu.hbm_bandwidth), rel=1e-12)


def test_kv_transfer_flows_equal_a_concurrent_run():
    g = tp.rail_optimized(nodes=2)
    prefill = InstanceLayout(tp=4, pp=1, ep=1, ranks=tuple(range(8)))
    decode = InstanceLayout(tp=1, pp=1, ep=1, ranks=tuple(range(8, 16)))
    src, dst, owner = kv_flows(prefill, decode, 8, [(0, 0), (1, 1)])
    assert src.tolist() == list(range(8)) and dst.tolist() == [8] * 4 + [9] * 4
    sizes = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=float) * 2 ** 20
    finish, neck = wave_finish(g, src, dst, sizes)
    ran = fs.concurrent(g, [dict(op="send_recv", size=s, ranks=(int(a), int(b))) for a, b, s in zip(src, dst, sizes)],
                        step_latency=0.0, base_latency=0.0, alone=False)
    np.testing.assert_allclose(finish, ran.together, rtol=1e-9)
    assert neck and all(b.utilization > 0.99 for b in neck)
    # the table: a request's bytes split over its 4 shards, the 2-transfer wave's slowest sender
    kv = kv_transfer(g, prefill, decode, 8)
    equal = fs.concurrent(g, [dict(op="send_recv", size=2 ** 20, ranks=(int(a), int(b))) for a, b in zip(src, dst)],
                          step_latency=0.0, base_latency=0.0, alone=False)
    assert kv.shards == 4
    assert kv.seconds(4 * 2 ** 20, 2) == pytest.approx(max(equal.together), rel=1e-9)


def test_event_loop_colocated_hand_trace():
    # 1 instance, 2 sequences at most; prefill steps 1 s, decode steps 0.5 s (0.1 s of it communication)
    # t=0 prefill r0 -> 1; t=1 prefill r1 (r2 would make 3 sequences) -> 2; t=2 decode (r0, r1) -> 2.5,
    # r1 done; t=2.5 prefill r2 -> 3.5; t=3.5 decode (r0, r2) -> 4, both done
    t = simulate([0.0, 0.2, 0.3], [4, 4, 4], [3, 2, 2], prefill_instances=1, decode_instances=0, max_seqs=2,
                 token_budget=10, kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.25),
                 decode_time=lambda b, k: (0.5, 0.1))
    np.testing.assert_allclose(t.first_token, [1.0, 2.0, 3.5])
    np.testing.assert_allclose(t.finish, [4.0, 2.5, 4.0])
    np.testing.assert_allclose(t.decode_network, [0.2, 0.1, 0.1])
    np.testing.assert_allclose(t.ttft_network, [0.25, 0.25, 0.25])


def test_event_loop_disaggregated_hand_trace():
    # prefill r0 0 -> 1, KV 1 -> 1.25, decode 1.25 -> 1.75 -> 2.25 (r0 done); prefill r1 1 -> 2, KV -> 2.25,
    # decode 2.25 -> 2.75 (r1 done)
    t = simulate([0.0, 0.5], [4, 4], [3, 2], prefill_instances=1, decode_instances=1, max_seqs=4, token_budget=4,
                 kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0), decode_time=lambda b, k: (0.5, 0.0),
                 kv_seconds=lambda nbytes, n: nbytes * 0.0625, kv_bytes_per_token=1.0)   # 4 bytes: 0.25 s
    np.testing.assert_allclose(t.first_token, [1.0, 2.0])
    np.testing.assert_allclose(t.finish, [2.25, 2.75])
    np.testing.assert_allclose(t.kv_seconds, [0.25, 0.25])


def test_event_loop_token_budget_and_kv_capacity():
    # budget 6: r0 (4) and r1 (4) do not fit one step; capacity 9 tokens: r1 (4 + 2) waits for r0's release
    t = simulate([0.0, 0.0], [4, 4], [2, 2], prefill_instances=1, decode_instances=0, max_seqs=8, token_budget=6,
                 kv_capacity=9, prefill_time=lambda lengths: (1.0, 0.0), decode_time=lambda b, k: (0.5, 0.0))
    np.testing.assert_allclose(t.first_token, [1.0, 2.5])      # r1 prefills after r0's decode step
    np.testing.assert_allclose(t.finish, [1.5, 3.0])


def test_request_stream_is_reproducible_and_poisson():
    a1, p1, o1 = request_stream(50.0, 100.0, prompt=[10, 20, 30], output=(1, 5), seed=3)
    a2, _, _ = request_stream(50.0, 100.0, prompt=[10, 20, 30], output=(1, 5), seed=3)
    np.testing.assert_array_equal(a1, a2)
    assert abs(len(a1) - 5000) < 5 * np.sqrt(5000)            # Poisson count, 5 sigma
    gaps = np.diff(a1)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.05)   # exponential gaps of mean 1 / rate
    assert set(p1.tolist()) <= {10, 20, 30} and o1.min() >= 1 and o1.max() <= 5


def test_serve_reports_latencies_and_shares():
    g = tp.rail_optimized(nodes=2)
    r = fs.serve(g, "llama-3-70b", rate=10.0, duration=3.0, prompt=256, output=16, tp=4, prefill_gpus=8,
                 ttft_target=10.0, tpot_target=1.0)
    assert r.mode == "disaggregated" and r.completed == len(r.arrival) > 0
    assert r.ttft_p50 <= r.ttft_p99 and 0 < r.network_share_tpot < 1 and 0 < r.network_share_ttft < 1
    assert r.goodput == pytest.approx(len(r.arrival) / 3.0 / 16)   # every request within generous targets
    assert np.all(r.kv_seconds > 0) and "kv" in r.bottleneck
    # the TTFT is at least one prefill step of the prompt
    assert np.nanmin(r.ttft) >= r.prefill_step(256)[0] * (1 - 1e-9)


@pytest.mark.parametrize("kwargs, match, error", [
    (dict(rate=-1.0), "rate", ValueError),
    (dict(rate=1.0, tp=3), "tp \\* pp \\* ep", ValueError),
    # llama-3-8b: 32 query heads, 8 KV heads; 6 GPUs of a tp-6 instance would hold 5 1/3 query heads each
    (dict(rate=1.0, tp=6, ranks=range(6)), "32 attention heads", ValueError),
    (dict(rate=1.0, ep=2), "ep", ValueError),
    (dict(rate=1.0, prompt="long"), "prompt", TypeError),
    (dict(rate=1.0, output=(5, 2)), "output", ValueError),
    (dict(rate=1.0, precision="int4"), "precision", ValueError),
    (dict(rate=1.0, decode=dict(tp=2)), "prefill_gpus", ValueError),
    (dict(rate=1.0, prefill_gpus=8, decode=dict(tq=2)), "decode", ValueError),
    (dict(rate=1.0, hbm_efficiency=1.5), "hbm_efficiency", ValueError),
    (dict(rate=1.0, model="llama-3-405b", tp=1), "does not fit", ValueError),
    (dict(rate=1.0, model=dataclasses.replace(fs.MODELS["llama-3-70b"], context=None), prompt=450000, output=100000,
          tp=4), "KV cache", ValueError),
    (dict(rate=1.0, model="llama-3-70b", prompt=450000, output=100000, tp=4), "context of 8192", ValueError),
])
def test_bad_input_names_the_parameter(kwargs, match, error):
    g = tp.rail_optimized(nodes=2)
    kwargs = {"model": "llama-3-8b", "tp": 2, "duration": 1.0} | kwargs
    with pytest.raises(error, match=match):
        fs.serve(g, **kwargs)


def test_fp8_needs_fp8_gpu():
    g = tp.rail_optimized(nodes=1, server="dgx_a100")
    with pytest.raises(ValueError, match="fp8"):
        fs.serve(g, "llama-3-8b", rate=1.0, duration=1.0, precision="fp8", tp=1)


def test_cli_serve(capsys):
    from flowsolver.cli import main

    assert main(["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "1", "--rate", "5", "--duration", "2",
                 "--prompt", "64:128", "--output", "8", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"mode": "colocated"' in out and '"gpus": 8' in out
    assert main(["serve", "--nodes", "1", "--rate", "5", "--prompt", "x"]) == 2
    assert "--prompt" in capsys.readouterr().err


def test_background_flows_carry_the_offered_load(one_server):
    # a pool at load u < 1 sends u x (bytes of a full step) per step time: per TP ring flow
    # rate x tokens per request x 2 layers x (2 (tp-1)/tp = 1) x h x 2 bytes / instances, whatever the step time
    from flowsolver.serving._serve import _pool, _step_functions, background_flows
    from flowsolver.serving._steps import StepModel

    spec = fs.get_model("llama-3-8b")
    pools = {"prefill": _pool("layout", dict(tp=2), list(range(4)), spec),
             "decode": _pool("decode", dict(tp=2), list(range(4, 8)), spec)}
    models = {k: StepModel(spec, tp.get_gpu("h100_sxm"), lay, "bf16", 2.0, 0.46, 0.62, HBM) for k, lay in pools.items()}
    tables = {k: _step_functions(one_server, sm, 64, 2048, 2.0, {"protocol": "auto"})[:2] for k, sm in models.items()}
    src, dst, rate = background_flows(pools, models, tables, rate=1.0, prompt=100.0, output=10.0, token_budget=2048,
                                      max_batch=64, capacity=1e6, a2a_bytes=2.0)
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)]
    want = {a: 1.0 * tokens * 2 * L * H * 2 / 2 for a, tokens in zip(range(8), [100.0] * 4 + [10.0] * 4)}
    np.testing.assert_allclose(rate, [want[a] for a in src], rtol=1e-9)


def test_moe_decode_step_reads_the_routed_experts_and_runs_two_all_to_alls_per_layer(one_server):
    # Mixtral 8x7B (paper, table 1): 32 layers, hidden 4096, FFN 14336, 8 KV heads, vocab 32000, 8 experts, top 2;
    # EP 8 over one server: one expert per GPU, 8 sequences (one per attention rank) route 8 x 2 choices;
    # the average GPU's expert gets a token with probability 1 - (3/4)^8, the busiest GPU's always
    r = fs.serve(one_server, "mixtral-8x7b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, ep=8,
                 compute_efficiency=0.46)
    seconds, comm = r.decode_step(8, 0)
    active = 1.0       # the busiest GPU's one expert gets a token (some expert always does; the step waits for it)
    attention, expert = 2 * H * H + 2 * H * KVH * D, 3 * H * F
    weights = 2 * (L * (attention + active * expert) + 32000 * H)
    a2a = fs.collective(one_server, "all_to_all", 1 * 2 * H * 2, ranks=range(8)).time   # 1 token x top 2 x h x 2 B
    assert comm == pytest.approx(2 * L * a2a, rel=1e-9)
    assert seconds == pytest.approx(weights / HBM + comm, rel=1e-12)


def test_pipeline_decode_step_adds_its_sends(one_server):
    r = fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, pp=2)
    _, comm = r.decode_step(2, 0)                        # 2 tokens x 4096 x 2 bytes: one send between the stages
    assert comm == pytest.approx(fs.collective(one_server, "send_recv", 2 * H * 2, ranks=[0, 1]).time, rel=1e-9)


def test_gpu_without_bandwidth_figures_needs_hbm_efficiency():
    g = tp.rail_optimized(nodes=1)
    bare = tp.GpuSpec("bare", 989e12, 80e9, hbm_bandwidth=3.35e12)          # no kernel family
    with pytest.raises(ValueError, match="hbm_efficiency"):
        fs.serve(g, "llama-3-8b", rate=1.0, duration=1.0, tp=1, gpu=bare)
    with pytest.raises(ValueError, match="hbm_bandwidth"):
        fs.serve(g, "llama-3-8b", rate=1.0, duration=1.0, tp=1, gpu=tp.GpuSpec("nohbm", 989e12, 80e9))
    with pytest.raises(ValueError, match="rate x duration"):
        fs.serve(g, "llama-3-8b", rate=1e-9, duration=1.0, tp=1)


def test_rate_at_targets_meets_them_and_a_faster_rate_does_not(one_server, monkeypatch):
    r = fs.serve(one_server, "llama-3-8b", rate=5.0, duration=4.0, prompt=512, output=64, tp=8)
    best, at = r.rate_at_targets(ttft_target=0.1, tpot_target=0.004, attainment=0.9, tolerance=0.02)
    def attained(result):
        return np.mean((result.ttft <= 0.1) & (result.tpot <= 0.004))
    assert attained(at) >= 0.9 and len(at.arrival) / at.duration == pytest.approx(best, rel=0.5)
    assert attained(r.at_rate(best * 1.1)) < 0.9
    with pytest.raises(ValueError, match="ttft_target or tpot_target"):
        r.rate_at_targets()
    # too few rounds to bracket or to narrow the rate: an error, not the last rate tried
    with pytest.raises(ValueError, match="max_rounds .1. doublings"):
        r.rate_at_targets(ttft_target=0.1, tpot_target=0.004, max_rounds=1)
    with pytest.raises(ValueError, match="max_rounds .6. bisections"):
        r.rate_at_targets(ttft_target=0.1, tpot_target=0.004, max_rounds=6, tolerance=1e-9)
    import sys
    monkeypatch.setattr(sys.modules["flowsolver.serving._result"], "MAX_REQUESTS", 200)   # 4 s: 50 requests/s at most
    with pytest.raises(ValueError, match="rate_at_targets: 50 requests/s still meets the targets, and a run of 4 s"):
        r.rate_at_targets(ttft_target=10.0, tpot_target=1.0)
    # a duration whose cap rounds one ulp over the request limit (200 / 4.8 x 4.8 > 200) is tried, not refused
    monkeypatch.setattr(sys.modules["flowsolver.serving._result"], "MAX_REQUESTS", 200)
    with pytest.raises(ValueError, match="rate_at_targets: .* still meets the targets, and a run of 4.8 s"):
        r.at_rate(5.0, duration=4.8).rate_at_targets(ttft_target=10.0, tpot_target=1.0)
    # an answer under the cap is still found: the doubling tries the cap itself, then bisects
    monkeypatch.setattr(sys.modules["flowsolver.serving._result"], "MAX_REQUESTS", int(4 * 1.1 * best))
    capped, _ = r.rate_at_targets(ttft_target=0.1, tpot_target=0.004, attainment=0.9, tolerance=0.02)
    assert capped == pytest.approx(best, rel=0.05)
    for bad in (dict(max_rounds=0), dict(max_rounds=2.5), dict(tolerance=-1.0), dict(tolerance=float("nan"))):
        with pytest.raises(ValueError, match=next(iter(bad))):
            r.rate_at_targets(ttft_target=0.1, **bad)


def test_comm_overlap_hides_communication_up_to_the_compute(one_server):
    kwargs = dict(rate=1.0, duration=2.0, prompt=16, output=4, tp=2)
    plain = fs.serve(one_server, "llama-3-8b", **kwargs).decode_step(2, 0)
    half = fs.serve(one_server, "llama-3-8b", comm_overlap=0.5, **kwargs).decode_step(2, 0)
    full = fs.serve(one_server, "llama-3-8b", comm_overlap=1.0, **kwargs).decode_step(2, 0)
    compute = plain[0] - plain[1]                        # the memory-bound step, ~2.5 ms, longer than its ~1 ms comm
    assert half == pytest.approx((compute + plain[1] / 2, plain[1] / 2), rel=1e-12)
    assert full == pytest.approx((compute, 0.0), abs=1e-15)
    with pytest.raises(ValueError, match="comm_overlap"):
        fs.serve(one_server, "llama-3-8b", comm_overlap=1.5, **kwargs)


def test_kv_capacity_by_hand_and_shared_by_the_pipeline_engines(one_server):
    r = fs.serve(one_server, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, pp=2)
    params = L * (2 * H * H + 2 * H * KVH * D + 3 * H * F) + 2 * V * H      # embedding and output projection
    free = 81559 * 2**20 * 0.9 - 2 * params / 2     # per GPU (an H100 as nvidia-smi reports it): half the layers, bf16
    # fix22c: less one whole layer's activations for the 8,192-token step (a stage runs full-size tensors),
    # 2 B x 8,192 x (2 x 4,096 + 3 x 14,336), and vLLM's logged runtime memory of a multi-GPU instance, 3.58 GiB
    free -= 2 * 8192 * (2 * H + 3 * F) + 3.58 * 1024**3
    per_token = KV_PER_TOKEN / 2                                            # half the layers' K and V
    assert r.kv_capacity == np.floor(free / per_token / 2)                  # two engines in flight


def test_event_loop_sends_one_prefill_step_as_one_transfer():
    # rA (1 output token: no transfer) prefills 0 -> 1; r0 (4 tokens) and r1 (6), arrived at 0.5, prefill
    # together 1 -> 2; their KV leaves as one transfer, one after the other, at 0.01 s per byte (1 byte per
    # token): r0 arrives at 2.04, r1 at 2.10. r0 decodes 2.04 -> 2.54 (done); r1 joins at 2.54 -> 3.04
    waves = []

    def kv_seconds(nbytes, in_flight):
        waves.append(in_flight)
        return nbytes * 0.01 * in_flight

    t = simulate([0.0, 0.5, 0.5], [2, 4, 6], [1, 2, 2], prefill_instances=1, decode_instances=1, max_seqs=4,
                 token_budget=16, kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0),
                 decode_time=lambda b, k: (0.5, 0.0), kv_seconds=kv_seconds, kv_bytes_per_token=1.0)
    np.testing.assert_allclose(t.kv_seconds, [0.0, 0.04, 0.10])
    np.testing.assert_allclose(t.finish, [1.0, 2.54, 3.04])
    assert waves == [1]                      # one prefill instance sending, once


def test_kv_transfers_leave_every_attention_rank_in_parallel():
    # an EP 4 prefill instance of 4 GPUs (one server) and a decode instance on the other server: the 4
    # attention ranks send at once, each on its own rail, so 4 requests take as long as 1 (by rank)
    g = tp.rail_optimized(nodes=2)
    prefill = InstanceLayout(tp=1, pp=1, ep=4, ranks=(0, 1, 2, 3))
    decode = InstanceLayout(tp=1, pp=1, ep=4, ranks=(8, 9, 10, 11))
    src, dst, _ = kv_flows(prefill, decode, 8, [(0, 0)])
    assert src.tolist() == [0, 1, 2, 3] and dst.tolist() == [8, 9, 10, 11]
    kv = kv_transfer(g, prefill, decode, 8)
    one, _ = wave_finish(g, [0], [8], [2.0 ** 20])
    assert kv.ranks == 4 and kv.seconds(2.0 ** 20, 1) == pytest.approx(one[0], rel=1e-9)


def test_event_loop_deals_a_prefill_step_to_the_attention_ranks():
    # 3 requests of 4, 6 and 8 tokens prefilled together on a 2-rank instance, dealt longest first to the rank
    # with the fewest tokens: r2 (8) on rank 0, r1 (6) then r0 (4) on rank 1, which sends r0 then r1 (arrival
    # order); 0.01 s per byte, 1 byte per token
    t = simulate([0.0, 0.0, 0.0, 0.0], [2, 4, 6, 8], [1, 2, 2, 2], prefill_instances=1, decode_instances=1,
                 max_seqs=8, token_budget=64, kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0),
                 decode_time=lambda b, k: (0.5, 0.0), kv_seconds=lambda nbytes, n: nbytes * 0.01,
                 kv_bytes_per_token=1.0, kv_ranks=2)
    # rA prefills alone 0 -> 1 (first arrival); r0, r1, r2 together 1 -> 2
    np.testing.assert_allclose(t.kv_seconds, [0.0, 0.04, 0.04 + 0.06, 0.08])


def test_the_step_tables_refuse_a_batch_context_or_prompt_they_do_not_hold():
    # a batch of -1 read the table from its end (batch 256's time), 257 raised IndexError, a
    # negative context or prompt gave a step shorter than its own communication
    r = fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=5.0, duration=2.0, prompt=256, output=16, tp=8,
                 max_batch=64)
    for batch in (0, -1, 65, 2.5):
        with pytest.raises(ValueError, match="batch must be an integer in 1 ... 64"):
            r.decode_step(batch, 512)
    with pytest.raises(ValueError, match="context must be a finite number of tokens >= 0"):
        r.decode_step(8, -1e6)
    with pytest.raises(ValueError, match="tokens must be an integer >= 1"):
        r.prefill_step(-100)
    with pytest.raises(ValueError, match="sequences must be an integer in 1 ... 10"):
        r.prefill_step(10, sequences=11)
    seconds, comm = r.decode_step(64, 512)
    assert seconds >= comm > 0
