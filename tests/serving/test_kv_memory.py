"""fix22c: the KV cache is what the engines leave it, weights, the activation of a token_budget
step and the runtime's memory taken out, under vLLM's or TensorRT-LLM's accounting."""

import dataclasses

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving._memory import RUNTIME_BYTES, kv_cache_bytes

GIB = 1024.0 ** 3
# Llama 3 8B (config.json): layers, hidden, KV heads, head dim, MLP width, vocabulary
L, H, KVH, D, F, V = 32, 4096, 8, 128, 14336, 128256
PARAMS = L * (2 * H * H + 2 * H * KVH * D + 3 * H * F) + 2 * V * H      # 8,029,995,008 with embedding and head
KV_PER_TOKEN = 2 * L * KVH * D * 2                                       # K and V, bf16: 131,072 B


@pytest.fixture(scope="module")
def one_server():
    return tp.rail_optimized(nodes=1)


def _serve(graph, **kw):
    args = dict(rate=1.0, duration=2.0, prompt=16, output=4, tp=1) | kw
    return fs.serve(graph, "llama-3-8b", **args)


def test_kv_capacity_by_hand_vllm_accounting(one_server):
    # one H100 (81,559 MiB as nvidia-smi reports it), bf16, vLLM's 0.9 of the total, token_budget 8,192:
    # weights 2 x 8,029,995,008 B; one layer's working set for 8,192 tokens 2 B x 8,192 x (2 x 4,096 (residual
    # and norm output) + 3 x 14,336 (gate / up output and the activation's)) = 838,860,800 B; runtime 1.79 GiB
    # (vLLM's logged non_torch_memory on one H100)
    free = 0.9 * 81559 * 2**20 - 2 * PARAMS - 2 * 8192 * (2 * H + 3 * F) - 1.79 * GIB
    assert free == pytest.approx(58_147_880_304.64, abs=1.0)
    r = _serve(one_server)
    assert r.kv_capacity == np.floor(free / KV_PER_TOKEN)                   # 443,633 (was 464,696)


def test_kv_bytes_match_vllms_logged_profile_of_llama3_8b():
    # vllm-project/vllm PR #10511 (2024-12-14), "vllm serve meta-llama/Meta-Llama-3-8B" on an H100:
    # total_gpu_memory 79.22GiB, gpu_memory_utilization 0.90, model weights 14.96GiB, non_torch_memory 1.79GiB,
    # PyTorch activation peak memory 1.26GiB, available_kv_cache_memory 53.29GiB. The model, on a GPU of the
    # logged 79.22 GiB: within 1 % of 53.29 GiB (its activation, one layer's 0.78 GiB, is below the logged
    # 1.26, which holds the sampler's too); the weights alone taken out gave 56.34 GiB, 5.7 % high
    gpu = dataclasses.replace(tp.get_gpu("h100_sxm"), memory=79.22 * GIB)
    g = tp.rail_optimized(nodes=1)
    r = fs.serve(g, "llama-3-8b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, ranks=[0], gpu=gpu)
    kv = r.kv_capacity * KV_PER_TOKEN / GIB
    assert kv == pytest.approx(53.29, rel=0.01)


def test_trtllm_accounting_is_the_fraction_of_what_is_left(one_server):
    # TensorRT-LLM: fraction x (total - weights - activation - runtime), its runtime 0.974 GiB (memory.md's log)
    left = 81559 * 2**20 - 2 * PARAMS - 2 * 8192 * (2 * H + 3 * F) - (79.10 - 70.48 - 6695 / 1024 - 1134.01 / 1024) * GIB
    r = _serve(one_server, memory_accounting="trtllm")
    assert r.kv_capacity == np.floor(0.9 * left / KV_PER_TOKEN)
    # the same fraction is more KV cache under TensorRT-LLM's accounting: 0.9 of what is left, not of the total
    assert r.kv_capacity > _serve(one_server).kv_capacity


def test_trtllm_formula_gives_its_docs_logged_kv_cache():
    # docs/source/reference/memory.md (NVIDIA/TensorRT-LLM 7ff5302): "total: 79.10 GiB, available: 70.48 GiB",
    # engine 6695 MiB, execution context 1134.01 MiB, then "Allocated 63.44 GiB for max tokens in paged KV cache"
    kv = kv_cache_bytes(79.10 * GIB, 0.9, 6695 * 2**20, 1134.01 * 2**20, RUNTIME_BYTES["trtllm"], "trtllm")
    assert kv / GIB == pytest.approx(63.44, abs=0.01)


def test_a_longer_token_budget_leaves_less_kv_cache(one_server):
    # 131,072 - 8,192 more tokens a step: 2 B x 122,880 x 51,200 / 131,072 B a token = 96,000 KV tokens fewer
    short, long_ = (_serve(one_server, token_budget=t).kv_capacity for t in (8192, 131072))
    assert short - long_ in (96000, 96001)                                  # each floored once


def test_multi_gpu_instances_hold_communicator_buffers(one_server):
    # TP 2: half the weights and the MLP's inner tensors, and 3.58 GiB of runtime memory (vLLM's log at -tp 2)
    free = 0.9 * 81559 * 2**20 - PARAMS - 2 * 8192 * (2 * H + 3 * F / 2) - 3.58 * GIB
    assert _serve(one_server, tp=2).kv_capacity == np.floor(free / (KV_PER_TOKEN / 2))


def test_bad_memory_accounting_refused(one_server):
    with pytest.raises(ValueError, match="memory_accounting must be one of 'vllm', 'trtllm'"):
        _serve(one_server, memory_accounting="sglang")
    with pytest.raises(ValueError, match="must be below 1"):
        _serve(one_server, memory_accounting="trtllm", memory_utilization=1.0)
    with pytest.raises(ValueError, match="lower token_budget"):
        fs.serve(one_server, "llama-3-70b", rate=1.0, duration=2.0, prompt=16, output=4, tp=1, ranks=[0])
