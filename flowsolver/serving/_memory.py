"""The GPU memory a serving engine leaves its KV cache: what the engines take out before it.

Both engines profile before they size the KV cache, and both take out the same three terms from
a GPU's memory: the weights, the peak activation memory of a forward pass of the step's most
tokens (vLLM's ``max_num_batched_tokens``, TensorRT-LLM's ``max_num_tokens``; here
``token_budget``), and memory allocated outside the framework's tensors (CUDA context, library
workspaces, NCCL buffers). They differ in what their fraction is a fraction of:

* vLLM (``"vllm"``, the default): ``gpu_memory_utilization`` is a share of the GPU's TOTAL memory,
  and the three terms come out of that share. ``Worker.determine_available_memory``,
  vllm/v1/worker/gpu_worker.py (vllm-project/vllm at 0012cf691b7e69423244d2b1405f4b6832156e19)::

      available_kv_cache_memory = (
          total_gpu_memory * self.cache_config.gpu_memory_utilization -
          peak_memory)

  where ``peak_memory`` is torch's ``allocated_bytes.all.peak`` over the profile run (weights and
  activations) plus ``non_torch_allocations`` ("NCCL operations, for example, can use a few GB
  during a forward pass").
* TensorRT-LLM (``"trtllm"``): ``kv_cache_free_gpu_mem_fraction`` (default 0.9) is a share of the
  memory FREE after the weights, the activations and the runtime's buffers are allocated.
  PyTorch backend, ``KvCacheCreator._cal_max_tokens``, tensorrt_llm/_torch/pyexecutor/_util.py
  (NVIDIA/TensorRT-LLM at d8ae02caed59708512e5aa578a09bb09f365bfed)::

      available_kv_mem = (total_gpu_memory - peak_memory +
                          alloc_kv_tokens * kv_size_per_token) * fraction

  (``peak_memory = torch_peak_memory + extra_cost``, the extra "Memory used outside torch (e.g.,
  NCCL and CUDA graphs)"; the profiling run's own small KV cache is added back); the TensorRT
  engine runtime, ``BaseKVCacheManager::calculateFreeMemBytes``,
  cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp (at b35ac1b64368513d215c57d2ed01d62d910df8da)::

      auto const freePrimaryMemBytes = static_cast<uint64_t>(finalFreeMem * freeMemFraction);

  after the engine (weights) and its execution context (activations, "TensorRT pre-computes the
  activation tensors memory requirement at build time" for ``max_num_tokens``) are allocated:
  docs/source/reference/memory.md (at 7ff5302377eb3063d2c056746f686eebb23184bc), "KV cache will
  by default allocate 90% of the remaining free GPU memory". The same source refuses a fraction of
  1 or more: ``TLLM_CHECK_WITH_INFO(freeMemFraction < 1.0F, ...)``.

So with weights ``W``, activation ``A`` and runtime memory ``R`` on a GPU of ``M`` bytes and a
fraction ``u``: vLLM's KV cache is ``u M - W - A - R``, TensorRT-LLM's ``u (M - W - A - R)``.
"""

from __future__ import annotations

import math

from .. import _checks
from ._steps import EMBEDDING_BYTES, WEIGHT_BYTES

__all__ = ["kv_capacity", "ACCOUNTINGS", "ACTIVATION_BYTES", "RUNTIME_BYTES", "COMMUNICATOR_BYTES", "step_activation_bytes",
           "runtime_bytes", "kv_cache_bytes"]

#: the engines whose accounting :func:`kv_cache_bytes` knows
ACCOUNTINGS = ("vllm", "trtllm")

#: bytes of an activation element in a forward pass (bf16 / fp16 hidden states; FP8 GEMMs read
#: quantized copies of their inputs, not counted: TensorRT-LLM's memory.md, "Known Issues": "When
#: FP8 GEMM is used, the activation memory might be larger than the theoretical optimized memory size")
ACTIVATION_BYTES = 2.0

_GIB = 1024.0 ** 3

#: Memory a GPU's process holds outside the framework's tensors (CUDA context, library
#: workspaces), one GPU, no communicator. vLLM: "non_torch_memory 1.79GiB" profiling Llama 3 8B
#: on one H100 (vllm-project/vllm pull request #10511, comment of 2024-12-14, "vllm serve
#: meta-llama/Meta-Llama-3-8B": total 79.22 GiB, weights 14.96, non_torch 1.79, activation peak
#: 1.26, KV 53.29). TensorRT-LLM: its memory.md log (7ff5302, "Memory usage when calculating max
#: tokens in paged kv cache: total: 79.10 GiB, available: 70.48 GiB" after "Loaded engine size: 6695
#: MiB" and "Allocated 1134.01 MiB for execution context memory"): 79.10 - 70.48 - 6695 / 1024 -
#: 1134.01 / 1024 = 0.974 GiB held besides the engine and its activations (runtime buffers 43.29
#: MB and decoder 180.30 MB among them).
RUNTIME_BYTES = {"vllm": 1.79 * _GIB, "trtllm": (79.10 - 70.48 - 6695.0 / 1024.0 - 1134.01 / 1024.0) * _GIB}

#: What a GPU of a multi-GPU instance holds on top for its communicators (NCCL's buffers, the
#: custom all-reduce's): vLLM pull request #10511's same log at "-tp 2", "non_torch_memory
#: 3.58GiB", less the 1.79 of one GPU. The one published pair of figures: taken for any
#: instance of more than one GPU and for both engines (TensorRT-LLM's use NCCL and a custom
#: all-reduce too; its own figure is not published).
COMMUNICATOR_BYTES = (3.58 - 1.79) * _GIB


def step_activation_bytes(model, *, tokens: int, tp: int = 1, ep: int = 1) -> float:
    """Peak activation bytes on one GPU of a forward pass of ``tokens`` prompt tokens (a prefill
    step of ``token_budget``) with tensor parallelism ``tp`` and ``ep`` attention ranks sharing
    the step: one layer's working set, as inference keeps no activations for a backward pass
    and each layer's tensors are freed (TensorRT: reused) before the next layer's
    (TensorRT-LLM memory.md: "only 1 block's memory is needed"; the same with pipeline stages).
    Per token on the busiest rank (``ceil(tokens / ep)``), at 2 bytes an element: the residual
    stream and the norm's output (``2 h``, whole on every TP rank) beside the larger of the
    attention's tensors (Q, K, V, the attention output and the projection's output:
    ``(2 heads + 2 kv_heads) d / tp + h``, KV heads at least one a rank) and the MLP's (gated:
    the gate / up output and the activation's, ``3 ffn / tp``; plain ``2 ffn / tp``; a mixture of
    experts ``top_k`` routed copies of each, with the experts' outputs, ``top_k (3 ffn / tp + h)``).
    The logits of the step's sequences and sampling workspaces are not counted.

    >>> import flowsolver as fs
    >>> m = fs.MODELS["llama-3-8b"]      # 2 x 8,192 x (2 x 4,096 + 3 x 14,336) bytes
    >>> step_activation_bytes(m, tokens=8192) / 1e9
    0.8388608
    """
    tokens = _checks.integer("tokens", tokens)
    tp = _checks.integer("tp", tp)
    ep = _checks.integer("ep", ep)
    per_rank = -(-tokens // ep)
    d = model.hidden // model.heads
    h = model.hidden
    kv_local = max(1.0, model.kv_heads / tp)
    attention = (2.0 * model.heads / tp + 2.0 * kv_local) * d + h
    inner = (3.0 if model.gated_mlp else 2.0) * model.ffn / tp
    mlp = model.top_k * (inner + h) if model.experts > 1 else inner
    return ACTIVATION_BYTES * per_rank * (2.0 * h + max(attention, mlp))


def runtime_bytes(accounting: str, gpus: int) -> float:
    """Bytes a GPU holds outside the weights, the activations and the KV cache under an engine's
    ``accounting``: :data:`RUNTIME_BYTES` and, in an instance of more than one GPU,
    :data:`COMMUNICATOR_BYTES`.

    >>> runtime_bytes("vllm", 1) / 1024**3, round(runtime_bytes("vllm", 2) / 1024**3, 2)
    (1.79, 3.58)
    """
    return RUNTIME_BYTES[checked_accounting(accounting)] + (COMMUNICATOR_BYTES if gpus > 1 else 0.0)


def checked_accounting(accounting) -> str:
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"memory_accounting must be one of {', '.join(map(repr, ACCOUNTINGS))} (vLLM's "
                         f"gpu_memory_utilization of the total memory, or TensorRT-LLM's "
                         f"kv_cache_free_gpu_mem_fraction of the memory left free), got {accounting!r}")
    return accounting


def kv_cache_bytes(memory: float, fraction: float, weights: float, activation: float, runtime: float,
                   accounting: str = "vllm") -> float:
    """Bytes of KV cache a GPU of ``memory`` bytes keeps, its weights, peak activation and runtime
    memory taken out, under an engine's ``accounting``: ``"vllm"`` ``fraction x memory -
    weights - activation - runtime``; ``"trtllm"`` ``fraction x (memory - weights - activation -
    runtime)`` (``fraction`` below 1, as TensorRT-LLM requires). Negative where nothing is left.

    >>> kv_cache_bytes(100.0, 0.9, 50.0, 5.0, 5.0), kv_cache_bytes(100.0, 0.9, 50.0, 5.0, 5.0, "trtllm")
    (30.0, 36.0)
    """
    if checked_accounting(accounting) == "vllm":
        return fraction * memory - weights - activation - runtime
    if not fraction < 1.0:
        raise ValueError(f"memory_utilization is TensorRT-LLM's kv_cache_free_gpu_mem_fraction with "
                         f"memory_accounting='trtllm' and must be below 1 (its freeMemFraction < 1.0 check), "
                         f"got {fraction!r}")
    return fraction * (memory - weights - activation - runtime)


def kv_capacity(sm, memory_utilization: float, step_tokens: int = 8192,
                accounting: str = "vllm") -> float:
    """KV tokens one attention rank of a pipeline engine holds: the KV cache bytes a GPU keeps
    (:func:`flowsolver.serving._memory.kv_cache_bytes`: its memory, ``memory_utilization`` under
    the engine's ``accounting``, less its weights (all its experts), the peak activation of a
    prefill step of ``step_tokens`` tokens (``token_budget``, or the longest prompt where that is
    more; :func:`~flowsolver.serving._memory.step_activation_bytes`)
    and the runtime's memory outside tensors (:func:`~flowsolver.serving._memory.runtime_bytes`:
    CUDA context, libraries, NCCL buffers where the instance has more than one GPU)), over the KV
    bytes per token it keeps, shared by the ``pp`` engines a pipeline keeps in flight. A
    request's cache sits whole on one of the ``ep`` ranks: the ranks do not pool their caches.
    Not counted: CUDA graphs' memory (vLLM captures them after sizing the KV cache, from the
    share ``memory_utilization`` leaves), the logits and sampling workspaces, FP8 GEMMs' quantized
    input copies (docs/serving.md, "Limits")."""
    m, lay, gpu = sm.model, sm.layout, sm.gpu
    local_mlp = (m.experts / lay.ep if m.experts > 1 else 1) * m.mlp_params
    weights = (WEIGHT_BYTES[sm.precision] * m.layers * (m.attention_params + local_mlp)
               + EMBEDDING_BYTES * m.embedding_params) / (lay.tp * lay.pp)      # embedding, LM head bf16
    activation = step_activation_bytes(m, tokens=step_tokens, tp=lay.tp, ep=lay.ep)
    runtime = runtime_bytes(accounting, lay.size)
    free = kv_cache_bytes(gpu.memory, memory_utilization, weights, activation, runtime, accounting)
    if free <= 0:
        raise ValueError(f"{m.name} does not fit: {weights / 1e9:.1f} GB of weights, {activation / 1e9:.1f} GB of "
                         f"activations for a {step_tokens}-token step and {runtime / 1e9:.1f} GB of runtime memory "
                         f"per GPU with tp={lay.tp}, pp={lay.pp}, ep={lay.ep} on a {gpu.name} ({gpu.memory / 1e9:.1f} GB, "
                         f"memory_utilization {memory_utilization:g} under {accounting}'s accounting): raise tp, pp "
                         f"or ep, or lower token_budget (and the longest prompt, where it is longer)")
    per_token = sm.kv_bytes_per_token / (sm.kv_shards * lay.pp)
    return math.floor(free / per_token / lay.pp)
