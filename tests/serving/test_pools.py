"""Each pool of a disaggregated run admits against its own KV cache and its own sequences; with
``ep`` attention ranks each request's KV cache sits whole on one rank; the decode pool's layout
defaults; the decode step table's size (the hand figures below, not the code's)."""

import dataclasses
import math

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving import simulate

# Llama 3 70B (paper, table 3): 80 layers, hidden 8192, FFN 28672, 64 heads, 8 KV heads of 128,
# vocabulary 128256; an H100 SXM as nvidia-smi reports it: 81,559 MiB; vLLM's 0.9 of it
L70, H70, F70, KVH70, D70, V70 = 80, 8192, 28672, 8, 128, 128256
H100_USABLE = 0.9 * 81559 * 2**20


def llama70_tokens_per_gpu(tp_degree, usable=H100_USABLE):
    """KV tokens one GPU of a TP group holds: the memory left after its share of the bf16 weights,
    one layer's activations for the default 8,192-token step (2 B x 8,192 x (2 x 8,192 + 3 x 28,672 / tp), the
    MLP's the larger at every TP to 8) and vLLM's logged runtime memory (1.79 GiB, 3.58 at TP > 1; fix22c)
    over its share of K and V per token (the KV heads split over min(tp, 8) GPUs)."""
    params = L70 * (2 * H70 * H70 + 2 * H70 * KVH70 * D70 + 3 * H70 * F70) + 2 * V70 * H70
    free = usable - 2 * params / tp_degree - 2 * 8192 * (2 * H70 + 3 * F70 / tp_degree)
    free -= (3.58 if tp_degree > 1 else 1.79) * 1024**3
    per_token = 2 * L70 * KVH70 * D70 * 2 / min(tp_degree, KVH70)
    return np.floor(free / per_token)


def test_each_disaggregated_pool_has_its_own_kv_capacity():
    # prefill 2 x TP4, decode 1 x TP8: the decode pool holds the TP8 instance's cache (1,343,799
    # tokens by hand, as a co-located TP8 run), not the TP4 prefill instance's smaller one
    g = tp.rail_optimized(nodes=2)
    r = fs.serve(g, "llama-3-70b", rate=2.0, duration=2.0, prompt=6000, output=16, tp=4, prefill_gpus=8,
                 decode=dict(tp=8))
    assert llama70_tokens_per_gpu(8) == 1343799
    assert r.kv_capacities == {"prefill": llama70_tokens_per_gpu(4), "decode": llama70_tokens_per_gpu(8)}
    assert r.kv_capacity == llama70_tokens_per_gpu(8)
    s = r.summary()
    assert (s["kv_capacity_tokens"], s["kv_capacity_prefill_tokens"]) == (llama70_tokens_per_gpu(8),
                                                                          llama70_tokens_per_gpu(4))


def test_event_loop_admits_each_pool_against_its_own_cache():
    # r0 (4 prompt + 3 output tokens) at 0, r1 and r2 (the same) at 0.5; the prefill pool holds 8
    # tokens (the prompts of its step, released at its end), the decode pool 14 (whole sequences).
    # r0 prefills 0 -> 1 and decodes 1 -> 1.5 -> 2; r1 and r2 (4 + 4 prompt tokens) prefill together
    # 1 -> 2; r1 decodes 2 -> 2.5 -> 3, r2 joins it at 2.5 (7 + 7 = 14 tokens) and ends at 3.5. With
    # the decode pool held to the prefill pool's 8 tokens r2 would wait for r1 and end at 4
    t = simulate([0.0, 0.5, 0.5], [4, 4, 4], [3, 3, 3], prefill_instances=1, decode_instances=1, max_seqs=4,
                 token_budget=8, kv_capacity=8, decode_kv_capacity=14, prefill_time=lambda lengths: (1.0, 0.0),
                 decode_time=lambda b, k: (0.5, 0.0), kv_seconds=lambda nbytes, n: 0.0)
    np.testing.assert_allclose(t.first_token, [1.0, 2.0, 2.0])
    np.testing.assert_allclose(t.finish, [2.0, 3.0, 3.5])
    t = simulate([0.0, 0.5, 0.5], [4, 4, 4], [3, 3, 3], prefill_instances=1, decode_instances=1, max_seqs=4,
                 token_budget=8, kv_capacity=8, decode_kv_capacity=8, prefill_time=lambda lengths: (1.0, 0.0),
                 decode_time=lambda b, k: (0.5, 0.0), kv_seconds=lambda nbytes, n: 0.0)
    np.testing.assert_allclose(t.finish, [2.0, 3.0, 4.0])


def test_prefill_steps_take_the_prefill_pools_sequences():
    # prefill Mixtral TP1 x EP8 with max_batch 2: 2 x 8 = 16 prompts a step, whatever the decode
    # pool (TP8 x EP1 runs 2 sequences); 64-token prompts, the token budget holds 128 of them
    g = tp.rail_optimized(nodes=2)
    r = fs.serve(g, "mixtral-8x7b", rate=4000.0, duration=0.05, prompt=64, output=4, tp=1, ep=8, prefill_gpus=8,
                 decode=dict(tp=8, ep=1), max_batch=2)
    _, per_step = np.unique(np.round(r.arrival + r.ttft, 12), return_counts=True)
    assert len(r.arrival) > 100 and per_step.max() == 2 * 8


# Mixtral 8x7B (paper): 32 layers, hidden 4096, FFN 14336 per expert, 8 experts, 32 heads, 8 KV
# heads of 128, vocabulary 32000 (the router's 32 x 4096 x 8 weights are not counted)
LM, HM, FM, EM, KVHM, DM, VM = 32, 4096, 14336, 8, 8, 128, 32000


def mixtral_rank_tokens(budget):
    """KV tokens one H100 of a TP1 x EP8 instance holds: its attention, its one expert of eight,
    the embedding and output projection in bf16, one layer's activations for its eighth of a
    ``budget``-token step (the residual stream and norm output, 2 x 4,096, beside the 2 routed copies'
    gate / up and activation outputs and expert outputs, 2 x (3 x 14,336 + 4,096), at 2 bytes) and
    vLLM's logged runtime memory of a multi-GPU instance, 3.58 GiB (fix22c), and all 8 KV heads of
    every layer per token."""
    weights = 2 * (LM * (2 * HM * HM + 2 * HM * KVHM * DM + EM / 8 * 3 * HM * FM) + 2 * VM * HM)
    activation = 2 * math.ceil(budget / 8) * (2 * HM + 2 * (3 * FM + HM))
    return np.floor((H100_USABLE - weights - activation - 3.58 * 1024**3) / (2 * LM * KVHM * DM * 2))


#: Mixtral's shape with no context limit (ModelSpec.context None): requests beyond its 32,768 tokens
UNBOUNDED_MIXTRAL = dataclasses.replace(fs.MODELS["mixtral-8x7b"], context=None)

@pytest.fixture(scope="module")
def mixtral_ep8():
    """100,000 + 1,000-token requests on Mixtral TP1 x EP8 (one DGX H100), 2 a second for 30 s (its
    shape without its 32,768-token context, so that KV caches, not the context, limit a rank)."""
    r = fs.serve(tp.rail_optimized(nodes=1), UNBOUNDED_MIXTRAL, rate=2.0, duration=30.0, prompt=100_000,
                 output=1_000, tp=1, ep=8, token_budget=100_000)
    return r


def test_ep_ranks_do_not_pool_their_kv_caches(mixtral_ep8):
    # one rank holds 427,870 tokens by hand (476,728 before fix22c's activation and runtime terms); the
    # instance's eight do not make one cache of 8 x that
    assert mixtral_rank_tokens(100_000) == 427870
    assert mixtral_ep8.kv_capacity == mixtral_rank_tokens(100_000) == mixtral_ep8.kv_capacities["colocated"]
    # whole requests a rank: floor(427,870 / 101,000) = 4, so 8 x 4 = 32 decode at once, not the
    # floor(8 x 427,870 / 101,000) = 33 of a pooled cache
    r = mixtral_ep8
    start = r.arrival + r.ttft
    end = start + r.tpot * (r.output - 1)
    running = max(int(np.sum((start <= x) & (end > x))) for x in start)
    assert r.completed == len(r.arrival) > 40
    assert running == 8 * (427870 // 101_000) == 32


def test_a_request_larger_than_one_ranks_cache_is_refused():
    prompt = int(1.5 * 476728)                     # fits the eight ranks together, not one
    held = mixtral_rank_tokens(prompt)             # 307,734: the step of that prompt's activations taken out
    assert prompt + 16 < 8 * held
    with pytest.raises(ValueError, match=rf"a request of {prompt + 16} tokens \(prompt \+ output\) exceeds the KV "
                                         rf"cache of one attention rank of an instance \({held:.0f} tokens"):
        fs.serve(tp.rail_optimized(nodes=1), UNBOUNDED_MIXTRAL, rate=0.2, duration=5.0, prompt=prompt, output=16, tp=1,
                 ep=8, token_budget=prompt)


def test_event_loop_packs_whole_requests_a_rank():
    # co-located, 2 attention ranks of 10 tokens each; requests of 4 + 2 = 6 tokens at 0, 0.5, 0.5.
    # r0 prefills 0 -> 1 (rank 0: 6); at 1 r1 takes rank 1 (6) and r2 fits neither (12 > 10), though
    # the ranks together have 8 left: r1 prefills 1 -> 2, r0 and r1 decode 2 -> 2.5 (both done), then
    # r2 prefills 2.5 -> 3.5 and decodes 3.5 -> 4. (A pooled cache of 20 runs all three by 2.5.)
    t = simulate([0.0, 0.5, 0.5], [4, 4, 4], [2, 2, 2], prefill_instances=1, decode_instances=0, max_seqs=8,
                 token_budget=16, kv_capacity=10, kv_ranks=2, prefill_time=lambda lengths: (1.0, 0.0),
                 decode_time=lambda b, k: (0.5, 0.0))
    np.testing.assert_allclose(t.first_token, [1.0, 2.0, 3.5])
    np.testing.assert_allclose(t.finish, [2.5, 2.5, 4.0])


def test_decode_degrees_left_out_are_the_prefill_pools_in_the_api_and_the_cli(capsys):
    # Mixtral prefill TP1 x EP8 on 8 GPUs, decode tp 2 on the other 16: ep 8 and pp 1 kept, so
    # 16 / (2 x 1 x 8) = 1 decode instance (not 8 of tp 2, ep 1)
    from flowsolver.cli import main

    r = fs.serve(tp.rail_optimized(nodes=3), "mixtral-8x7b", rate=2.0, duration=2.0, prompt=256, output=16, tp=1,
                 ep=8, prefill_gpus=8, decode=dict(tp=2))
    assert r.layouts["decode"] == dict(tp=2, pp=1, ep=8, instances=1)
    assert main(["serve", "--nodes", "3", "--model", "mixtral-8x7b", "--tp", "1", "--ep", "8", "--prefill-gpus", "8",
                 "--decode-tp", "2", "--rate", "2", "--duration", "2", "--prompt", "256", "--output", "16"]) == 0
    assert "decode 1 x (tp 2, pp 1, ep 8)" in capsys.readouterr().out.splitlines()[0]


def test_decode_table_is_built_for_what_can_run_at_once():
    # Llama 3 8B TP8 (one DGX H100), 272-token requests: the same run with max_batch 256 and 10^7;
    # the table grows on demand and never past the whole requests the cache holds: one GPU's free
    # memory over its 1/8 of K and V per token (fix22c: less one layer's activations for the 8,192-token
    # step, 2 B x 8,192 x (2 x 4,096 + 3 x 14,336 / 8), and vLLM's logged 3.58 GiB runtime memory at TP > 1)
    L, H, F, KVH, D, V = 32, 4096, 14336, 8, 128, 128256
    params = L * (2 * H * H + 2 * H * KVH * D + 3 * H * F) + 2 * V * H
    other = 2 * 8192 * (2 * H + 3 * F / 8) + 3.58 * 1024**3
    rank_tokens = np.floor((H100_USABLE - 2 * params / 8 - other) / (2 * L * KVH * D * 2 / 8))
    at_once = int(rank_tokens // 272)
    kw = dict(rate=2.0, duration=2.0, prompt=256, output=16, tp=8)
    g = tp.rail_optimized(nodes=1)
    normal = fs.serve(g, "llama-3-8b", max_batch=256, **kw)
    huge = fs.serve(g, "llama-3-8b", max_batch=10**7, **kw)
    assert huge.kv_capacity == rank_tokens
    # the service rate (rho) runs the batch the spec fills, whatever this stream drew (review16
    # finding 3): max_batch, or the whole requests the cache holds
    assert normal.step_tables["decode"].built() == 256 and len(normal.arrival) < 10
    assert huge.step_tables["decode"].built() == at_once
    for a, b in ((normal, huge), (normal.at_rate(200.0), huge.at_rate(200.0))):
        np.testing.assert_array_equal(a.ttft, b.ttft)
        np.testing.assert_array_equal(a.tpot, b.tpot)
        assert a.throughput == b.throughput
    assert huge.decode_step(at_once, 0.0) == huge.step_tables["decode"](at_once, 0.0)
    assert huge.step_tables["decode"].built() == at_once
    with pytest.raises(ValueError, match=rf"batch must be an integer in 1 \.\.\. {at_once}, got {at_once + 1}"):
        huge.decode_step(at_once + 1)


def test_h200_kv_capacity_from_the_driver_reported_memory():
    # an H200 SXM as nvidia-smi reports it, 143,771 MiB (topologies/gpu_types.py): Llama 3 70B TP8
    # holds 2,777,164 KV tokens (2,881,866 before fix22c's activation and runtime terms) a GPU by hand (the datasheet's 141e9 bytes gave 2,667,526)
    r = fs.serve(tp.rail_optimized(nodes=1), "llama-3-70b", rate=1.0, duration=2.0, prompt=1024, output=64, tp=8,
                 gpu="h200")
    assert r.kv_capacity == llama70_tokens_per_gpu(8, usable=0.9 * 143771 * 2**20) == 2777164


def test_one_output_token_names_no_decode_or_kv_bottleneck():
    """newuser25 #4: a disaggregated run whose requests each want one output token ends every
    request at the prefill pool (no decode step, no KV transfer: kv_transfer_p50_ms is NaN), yet
    its summary named decode.tp and kv bottleneck links. With two tokens they are there."""
    g = tp.rail_optimized(nodes=2)
    one = fs.serve(g, "llama-3-70b", rate=2.0, duration=2.0, prompt=512, output=1, tp=8, prefill_gpus=8).summary()
    assert math.isnan(one["kv_transfer_p50_ms"]) and math.isnan(one["tpot_p50_ms"])
    assert set(one["bottleneck"]) == {k for k in one["bottleneck"] if k.startswith("prefill.")} != set()
    two = fs.serve(g, "llama-3-70b", rate=2.0, duration=2.0, prompt=512, output=2, tp=8, prefill_gpus=8).summary()
    assert "kv" in two["bottleneck"] and any(k.startswith("decode.") for k in two["bottleneck"])
