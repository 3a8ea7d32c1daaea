"""Each pool of a disaggregated run admits against its own KV cache and its own sequences; with
``ep`` attention ranks each request's KV cache sits whole on one rank; the decode pool's layout
defaults; the decode step table's size (the hand figures below, not the code's)."""

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
    """KV tokens one GPU of a TP group holds: the memory left after its share of the bf16 weights
    over its share of K and V per token (the KV heads split over min(tp, 8) GPUs)."""
    params = L70 * (2 * H70 * H70 + 2 * H70 * KVH70 * D70 + 3 * H70 * F70) + 2 * V70 * H70
    free = usable - 2 * params / tp_degree
    per_token = 2 * L70 * KVH70 * D70 * 2 / min(tp_degree, KVH70)
    return np.floor(free / per_token)


def test_each_disaggregated_pool_has_its_own_kv_capacity():
    # prefill 2 x TP4, decode 1 x TP8: the decode pool holds the TP8 instance's cache (1,448,501
    # tokens by hand, as a co-located TP8 run), not the TP4 prefill instance's smaller one
    g = tp.rail_optimized(nodes=2)
    r = fs.serve(g, "llama-3-70b", rate=2.0, duration=2.0, prompt=6000, output=16, tp=4, prefill_gpus=8,
                 decode=dict(tp=8))
    assert llama70_tokens_per_gpu(8) == 1448501
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
