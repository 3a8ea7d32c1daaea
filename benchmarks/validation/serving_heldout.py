"""Held-out LLM-inference measurements (added 2026-12, model unchanged) and flowsolver.serve's
predictions of them: sources the serving model was never compared with before.

Every figure is copied from the source named beside it (``verbatim`` is the printed line, ``url``
pinned to a commit or, for a page with no repository, its address and the date it was read);
nothing was fitted to them. The lmdeploy and gpt-fast lines were checked to occur in the file at
the cited commit; TensorRT-LLM's were copied from the indexed file at its commit (the repository
is too large to clone here), as were TensorRT-LLM v0.9.0's (250d9c2) and gpt-fast's Mixtral line (4f98fe0),
three of those checked again by exact search of the stored files; NIM's and the vLLM build's from the pages as stored. Each row is run the way its benchmark ran it, with the library's
defaults (the kernel tables, BabelStream's HBM fraction, NCCL's protocol choice; ``--compute
flat``: the training model's flat compute / attention efficiencies, the default when the rows
were added): ``batch`` requests of ``prompt`` tokens arrive together and are run to
their ``output``-th token (the first comes from the prefill), through :func:`flowsolver.serve`'s
step tables and :func:`flowsolver.serving.simulate`. Metrics:

* ``out_tok_s``: ``batch x output`` over the time the last request finishes (static-batch
  throughput: lmdeploy's ``profile_generation``, TensorRT-LLM's ``gptSessionBenchmark``,
  gpt-fast's ``tokens_generated / t`` with the prefill inside ``t``; and trtllm-bench's "Total Output
  Throughput" of ``batch`` requests at once under in-flight batching, the row's ``max_seqs`` and
  ``token_budget`` the engine's max batch size and max num tokens);
* ``out_tok_s_gpu``: the same over the TP degree (TensorRT-LLM v0.9.0's "out tok/s/GPU");
* ``ttft_ms``: the first token of one request (the prefill step), ``batch = 1``;
* ``itl_ms``: one request's decode steps, ``(finish - first token) / (output - 1)``;
* ``latency_ms``: the time the last of ``batch`` requests finishes (vLLM's benchmark_latency).

Not modelled (reason): lmdeploy's internlm-20b rows and TensorRT-LLM's GPT-J / Falcon rows (shapes
not in the catalogue: GPT-J's parallel attention + MLP block, Falcon's multi-query parallel block);
TensorRT-LLM's TP > 1 peak-throughput rows (the A100 table's header says "out tok/s" while the
H100 one says "out tok/s/GPU": which one the TP 2 / 4 rows are is not certain); int8 / int4
rows of gpt-fast (weight-only quantisation is not a precision of the model); NIM's concurrency > 1
rows (a closed loop of N clients, each sending its next request when the last ends: the simulator
takes open arrivals) and NIM's Llama 3.1 8B tables (the stored page does not show their GPU, TP
or lengths); lmdeploy's rows with prompt >= 128 and batch > 1 (prefills queued behind decodes
by its own scheduler, FTL up to 100 s: the static batch is not what ran); vLLM build 9515's
serving tests (the stored page stops before their table); TensorRT-LLM v0.9.0's GPT-J / Falcon rows (as
above) and its L40S tables (no L40S in the catalogue).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import topologies as tp

import flowsolver as fs
from flowsolver.serving import simulate

# Llama 2 shapes (Touvron et al. 2023, and the models' config.json on Hugging Face): layers,
# hidden, intermediate, heads, KV heads, vocabulary 32,000, context 4,096
LLAMA2 = {
    "llama-2-7b": fs.ModelSpec("llama-2-7b", 32, 4096, 11008, 32, 32, 32000, seq_len=4096),
    "llama-2-13b": fs.ModelSpec("llama-2-13b", 40, 5120, 13824, 40, 40, 32000, seq_len=4096),
    "llama-2-70b": fs.ModelSpec("llama-2-70b", 80, 8192, 28672, 64, 8, 32000, seq_len=4096),
}
# Mistral 7B (Jiang et al. 2023, arXiv 2310.06825, table 1: dim 4096, 32 layers, head_dim 128, hidden_dim
# 14336, 32 heads, 8 KV heads, window 4096, context 8192, vocabulary 32,000; from memory of the paper, not re-read
# here: the same dimensions as the library's Mixtral 8x7B preset, which the Mixtral paper builds on Mistral 7B
# with 8 experts). Its 4096-token sliding window is not modelled: the rows' longest sequence is 2048 + 2048.
SHAPES = {**LLAMA2, "mistral-7b": fs.ModelSpec("mistral-7b", 32, 4096, 14336, 32, 8, 32000, seq_len=8192,
                                               context=8192)}

LMDEPLOY = ("https://github.com/InternLM/lmdeploy/blob/3e391df4673326f79363eebe030876861a9b7090/"
            "docs/en/benchmark/a100_fp16.md")
TRTLLM = ("https://github.com/NVIDIA/TensorRT-LLM/blob/138f96d45f90b9667426f7c47297d8c06bafac73/"
          "docs/source/performance.md")
GPTFAST = "https://github.com/pytorch-labs/gpt-fast/blob/32971d3129541c5bfb4f715abc33d1c5f408d204/README.md"
NIM = ("https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md (NVIDIA NIM benchmarking, "
       "LLM 1.0.0 'Performance' page, read 2026-12-06 as stored by the search corpus)")
BUILDKITE_H200 = "https://buildkite.com/vllm/performance-benchmark/builds/9515 (read 2026-12-06)"
GPTFAST_MOE = ("https://github.com/pytorch-labs/gpt-fast/blob/4f98fe01976600edec013e9ae7e799744f971d9f/"
               "mixtral-moe/README.md")
TRTLLM090 = ("https://github.com/NVIDIA/TensorRT-LLM/blob/250d9c293d5edbc2a45c20775b3150b1eb68b364/"
             "docs/source/performance.md")
TRTLLM_BENCH = ("https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/"
                "docs/source/performance/perf-overview.md")


def _row(source, url, model, gpu, tp_, batch, prompt, output, metric, value, verbatim, **extra):
    return dict(source=source, url=url, model=model, gpu=gpu, tp=tp_, batch=batch, prompt=prompt,
                output=output, metric=metric, value=value, verbatim=verbatim, **extra)


# lmdeploy v0.1.0a1 (TurboMind), "Static Inference Benchmark", A100-80G, CUDA 11.8, FP16 weights and
# KV cache; ``batch`` concurrent sessions. Prompt 1 rows: decode throughput (out tok/s); batch 1
# rows: FTL(ave) (s, recorded here in ms), the first token's latency. Which model a line belongs to
# is its section heading (### llama2-7b / llama2-13b / llama2-70b). Caveats: FTL with a 1-token
# prompt is 0.011 s for 7B, one decode step, so FTL may hold the prefill and one decode step (the
# model's first token is the prefill's); the batch 16-64 rows' throughput includes the sessions'
# start (FTL(max) up to 1.26 s), and 7B at batch 32 (2136.73) is below the line through 16 and 64.
_LM = [
    ("llama-2-7b", 1, 1, 128, "out_tok_s", 100.02,
     "| 1     | 1   | 1             | 128           | 100.02                | 76.55   | 0.011       | 0.01        | 0.011       | 0.009  | 0.009  | 0.01   | 0.011  |"),
    ("llama-2-7b", 1, 16, 128, "out_tok_s", 1504.72,
     "| 16    | 1   | 1             | 128           | 1504.72               | 76.59   | 0.021       | 0.011       | 0.031       | 0.01   | 0.011  | 0.011  | 0.013  |"),
    ("llama-2-7b", 1, 32, 128, "out_tok_s", 2136.73,
     "| 32    | 1   | 1             | 128           | 2136.73               | 76.62   | 0.079       | 0.014       | 0.725       | 0.011  | 0.012  | 0.013  | 0.021  |"),
    ("llama-2-7b", 1, 64, 128, "out_tok_s", 4154.81,
     "| 64    | 1   | 1             | 128           | 4154.81               | 76.71   | 0.042       | 0.013       | 0.21        | 0.012  | 0.018  | 0.028  | 0.041  |"),
    ("llama-2-13b", 1, 1, 128, "out_tok_s", 57.49,
     "| 1     | 1   | 1             | 128           | 57.49                 | 74.84   | 0.018       | 0.018       | 0.019       | 0.017  | 0.017  | 0.017  | 0.017  |"),
    ("llama-2-13b", 1, 16, 128, "out_tok_s", 869.45,
     "| 16    | 1   | 1             | 128           | 869.45                | 74.87   | 0.036       | 0.019       | 0.053       | 0.018  | 0.019  | 0.019  | 0.02   |"),
    ("llama-2-13b", 1, 32, 128, "out_tok_s", 1667.5,
     "| 32    | 1   | 1             | 128           | 1667.5                | 74.9    | 0.034       | 0.021       | 0.057       | 0.019  | 0.02   | 0.021  | 0.023  |"),
    ("llama-2-13b", 1, 64, 128, "out_tok_s", 3049.16,
     "| 64    | 1   | 1             | 128           | 3049.16               | 74.96   | 0.044       | 0.025       | 0.073       | 0.02   | 0.022  | 0.026  | 0.029  |"),
    ("llama-2-70b", 4, 1, 128, "out_tok_s", 33.94,
     "| 1     | 4   | 1             | 128           | 33.94                 | 73.72   | 0.031       | 0.03        | 0.031       | 0.029  | 0.029  | 0.029  | 0.03   |"),
    ("llama-2-70b", 4, 16, 128, "out_tok_s", 468.52,
     "| 16    | 4   | 1             | 128           | 468.52                | 73.72   | 0.071       | 0.034       | 0.939       | 0.03   | 0.031  | 0.032  | 0.251  |"),
    ("llama-2-70b", 4, 32, 128, "out_tok_s", 906.03,
     "| 32    | 4   | 1             | 128           | 906.03                | 73.75   | 0.098       | 0.043       | 0.253       | 0.032  | 0.033  | 0.035  | 0.178  |"),
    ("llama-2-70b", 4, 64, 128, "out_tok_s", 1425.79,
     "| 64    | 4   | 1             | 128           | 1425.79               | 73.81   | 0.213       | 0.046       | 1.264       | 0.037  | 0.039  | 0.044  | 0.329  |"),
    ("llama-2-7b", 1, 128, 128, "ttft_ms", 22.0,
     "| 1     | 1   | 128           | 128           | 102.21                | 76.59   | 0.022       | 0.022       | 0.022       | 0.01   | 0.01   | 0.01   | 0.01   |"),
    ("llama-2-7b", 1, 2048, 128, "ttft_ms", 139.0,
     "| 1     | 1   | 2048          | 128           | 86.1                  | 76.77   | 0.139       | 0.139       | 0.14        | 0.01   | 0.01   | 0.01   | 0.011  |"),
    ("llama-2-13b", 1, 128, 128, "ttft_ms", 40.0,
     "| 1     | 1   | 128           | 128           | 56.58                 | 74.84   | 0.04        | 0.039       | 0.04        | 0.017  | 0.017  | 0.017  | 0.018  |"),
    ("llama-2-13b", 1, 2048, 128, "ttft_ms", 242.0,
     "| 1     | 1   | 2048          | 128           | 48.99                 | 75.09   | 0.242       | 0.242       | 0.243       | 0.019  | 0.019  | 0.019  | 0.019  |"),
    ("llama-2-70b", 4, 128, 128, "ttft_ms", 74.0,
     "| 1     | 4   | 128           | 128           | 33.63                 | 73.72   | 0.074       | 0.073       | 0.074       | 0.029  | 0.029  | 0.029  | 0.03   |"),
    ("llama-2-70b", 4, 2048, 128, "ttft_ms", 402.0,
     "| 1     | 4   | 2048          | 128           | 28.32                 | 73.78   | 0.402       | 0.401       | 0.403       | 0.031  | 0.031  | 0.031  | 0.051  |"),
]
LMDEPLOY_ROWS = tuple(
    _row("lmdeploy-a100-fp16", LMDEPLOY, m, "a100_sxm", t, 1 if metric == "ttft_ms" else b,
         b if metric == "ttft_ms" else 1, out, metric, v, line)
    for m, t, b, out, metric, v, line in _LM)

# TensorRT-LLM performance.md: "Low Latency" (v0.5 data, batch 1, first-token latency, ms; the
# engine run with one output token) on H100 FP8 (--enable_fp8 --fp8_kv_cache) and A100 FP16, and
# the "Peak Throughput" tables (v0.6.1, static batch, gptSessionBenchmark) for LLaMA 7B at TP 1.
# "LLaMA 7B / 70B" are Llama 2 (the page's build commands: "Llama2-7b, and Llama2-70b").
_TRT = [
    ("llama-2-7b", "h100_sxm", 1, 1, 128, 1, "ttft_ms", 7.0,
     "| LLaMA 7B                     | 1          | 1         | 128          |                      7 |"),
    ("llama-2-7b", "h100_sxm", 1, 1, 2048, 1, "ttft_ms", 36.0,
     "| LLaMA 7B                     | 1          | 1         | 2048         |                     36 |"),
    ("llama-2-70b", "h100_sxm", 4, 1, 128, 1, "ttft_ms", 26.0,
     "| LLaMA 70B                    | 1          | 4         | 128          |                     26 |"),
    ("llama-2-70b", "h100_sxm", 4, 1, 2048, 1, "ttft_ms", 109.0,
     "| LLaMA 70B                    | 1          | 4         | 2048         |                    109 |"),
    ("llama-2-7b", "a100_sxm", 1, 1, 128, 1, "ttft_ms", 16.0,
     "| LLaMA 7B                     | 1          | 1         | 128          |                     16 |"),
    ("llama-2-7b", "a100_sxm", 1, 1, 2048, 1, "ttft_ms", 133.0,
     "| LLaMA 7B                     | 1          | 1         | 2048         |                    133 |"),
    ("llama-2-70b", "a100_sxm", 4, 1, 128, 1, "ttft_ms", 47.0,
     "| LLaMA 70B                    | 1          | 4         | 128          |                     47 |"),
    ("llama-2-70b", "a100_sxm", 4, 1, 2048, 1, "ttft_ms", 377.0,
     "| LLaMA 70B                    | 1          | 4         | 2048         |                    377 |"),
    ("llama-2-7b", "h100_sxm", 1, 768, 128, 128, "out_tok_s", 19694.0,
     "| LLaMA 7B                     | 768        | 1         | 128          | 128           |                     19,694 |"),
    ("llama-2-7b", "h100_sxm", 1, 112, 128, 2048, "out_tok_s", 6818.0,
     "| LLaMA 7B                     | 112        | 1         | 128          | 2048          |                      6,818 |"),
    ("llama-2-7b", "h100_sxm", 1, 80, 2048, 128, "out_tok_s", 2244.0,
     "| LLaMA 7B                     | 80         | 1         | 2048         | 128           |                      2,244 |"),
    ("llama-2-7b", "h100_sxm", 1, 48, 2048, 2048, "out_tok_s", 2740.0,
     "| LLaMA 7B                     | 48         | 1         | 2048         | 2048          |                      2,740 |"),
    ("llama-2-7b", "a100_sxm", 1, 384, 128, 128, "out_tok_s", 5586.0,
     "| LLaMA 7B                     | 384        | 1         | 128          | 128           |                  5,586 |"),
    ("llama-2-7b", "a100_sxm", 1, 60, 128, 2048, "out_tok_s", 1928.0,
     "| LLaMA 7B                     | 60         | 1         | 128          | 2048          |                  1,928 |"),
    ("llama-2-7b", "a100_sxm", 1, 52, 2048, 128, "out_tok_s", 591.0,
     "| LLaMA 7B                     | 52         | 1         | 2048         | 128           |                    591 |"),
]


def _trtllm_rows(source, url, table):
    """TensorRT-LLM's table rows: the static session allocates the whole batch's KV cache up
    front (no 0.9 share: memory 1.0); its Hopper rows run FP8 with an FP8 KV cache."""
    return tuple(_row(source, url, m, g, t, b, p, o, metric, v, line, memory_utilization=1.0,
                      **(dict(precision="fp8", kv_bytes=1.0) if g != "a100_sxm" else {}))
                 for m, g, t, b, p, o, metric, v, line in table)


TRTLLM_ROWS = _trtllm_rows("trtllm-perf-v0.5-v0.6.1", TRTLLM, _TRT)

# gpt-fast README: batch 1, 5-token prompt, 200 new tokens (generate.py's default), bf16,
# torch.compile mode="reduce-overhead" (CUDA graphs) for the decode step; "8xA100-80GB, power
# limited to 330W with a hybrid cube mesh topology" (no NVSwitch: modelled as DGX A100's NVSwitch).
# Lines under "Tensor Parallelism" name the model only on its first row.
_GF = [
    ("llama-2-7b", 1, 104.9, "| Llama-2-7B  | 1    |  104.9  | 1397.31 |"),
    ("llama-2-7b", 2, 168.84, "|           | 2   | 168.84   | 1181.99 |"),
    ("llama-2-7b", 4, 254.02, "|           | 4   | 254.02   | 955.83 |"),
    ("llama-2-7b", 8, 328.43, "|           | 8   | 328.43   | 704.10 |"),
    ("llama-2-70b", 2, 21.32, "|           | 2   | 21.32   | 1481.87 |"),
    ("llama-2-70b", 4, 38.01, "|           | 4   | 38.01   | 1340.76 |"),
    ("llama-2-70b", 8, 62.50, "|           | 8   | 62.50   | 1135.29 |"),
]
GPTFAST_ROWS = tuple(_row("gpt-fast-readme", GPTFAST, m, "a100_sxm", t, 1, 5, 200, "out_tok_s", v, line)
                     for m, t, v, line in _GF)

# gpt-fast's Mixtral 8x7B (mixtral-moe/README.md, added 2026-12-07 by corpus21, held out): "Benchmarks run on an
# 8xA100-80GB, power limited to 330W with a hybrid cube mesh topology", "batch size=1", "a very small prompt length
# (just 5 tokens)"; the bf16 line (1 GPU: OOM); 200 new tokens (mixtral-moe/generate.py's --max_new_tokens default,
# read at 171a7f3); tokens/s = tokens_generated / t with the prefill inside t, as the dense rows above. Experts
# TP-sharded (gpt-fast's TP splits every expert's FFN): ep 1. The int8 line is weight-only int8: not modelled.
_GFM = [
    ("mixtral-8x7b", 2, 96.67), ("mixtral-8x7b", 4, 155.35), ("mixtral-8x7b", 8, 227.82),
]
GPTFAST_MOE_ROWS = tuple(
    _row("gpt-fast-mixtral-readme", GPTFAST_MOE, m, "a100_sxm", t, 1, 5, 200, "out_tok_s", v,
         "|baseline(bfloat16)|    OOM  |    96.67  | 155.35 |  227.82    |")
    for m, t, v in _GFM)

# NVIDIA NIM 1.8.0, Llama-3.3-70b-instruct (the Llama 3 70B shape), "2 x H100 80G", "fp8 TP2"
# (KV cache precision not stated: the default 2 bytes), concurrency 1 (one request at a time).
NIM_ROWS = (
    _row("nim-benchmarking-1.0.0", NIM, "llama-3-70b", "h100_sxm", 2, 1, 5000, 500, "ttft_ms", 406.77,
         "| 1           | 406.77    | 18.58    | 51.67                |", precision="fp8"),
    _row("nim-benchmarking-1.0.0", NIM, "llama-3-70b", "h100_sxm", 2, 1, 5000, 500, "itl_ms", 18.58,
         "| 1           | 406.77    | 18.58    | 51.67                |", precision="fp8"),
    _row("nim-benchmarking-1.0.0", NIM, "llama-3-70b", "h100_sxm", 2, 1, 500, 2000, "ttft_ms", 47.77,
         "| 1 | 47.77 | 18.91 | 52.85 |", precision="fp8"),
    _row("nim-benchmarking-1.0.0", NIM, "llama-3-70b", "h100_sxm", 2, 1, 500, 2000, "itl_ms", 18.91,
         "| 1 | 47.77 | 18.91 | 52.85 |", precision="fp8"),
)

# vLLM's nightly latency test (the one of serving.py's LATENCY_ROWS) on H200: batch 8, 32 in,
# 128 out, end-to-end latency of the batch. "llama-3.1 8B" has the Llama 3 8B shape.
VLLM_H200_ROWS = (
    _row("vllm-buildkite-9515", BUILDKITE_H200, "llama-3-70b", "h200", 4, 8, 32, 128, "latency_ms", 2077.53,
         "latency_llama70B_tp4 | H200 | 2077.53 | 2077.56 | 2079.95 |"),
    _row("vllm-buildkite-9515", BUILDKITE_H200, "llama-3-8b", "h200", 1, 8, 32, 128, "latency_ms", 833.421,
         "latency_llama8B_tp1 | H200 | 833.421 | 833.53 | 834.167 |"),
    _row("vllm-buildkite-9515", BUILDKITE_H200, "mixtral-8x7b", "h200", 2, 8, 32, 128, "latency_ms", 1917.44,
         "latency_mixtral8x7B_tp2 | H200 | 1917.44 | 1916.58 | 1929 |"),
)

# TensorRT-LLM v0.9.0 performance.md (added 2026-12-07 by corpus21, the model as it stood on main 37c89f7, held
# out): "All data was generated using version 0.9.0", the same two kinds of table as v0.5 / v0.6.1 above (static
# batches through gptSessionBenchmark "--batch_size $batch_size --duration 0 --num_runs 5"; first-token latency
# with one output token, batch 1), now on H200 as well. Every peak-throughput table's header reads "Throughput
# (out tok/s/GPU)" (the A100 one included, whose v0.6.1 header read "out tok/s"): the rows are compared per GPU,
# the batch's output tokens over its time and over the TP degree (metric out_tok_s_gpu). H200 / H100 tables are
# "(FP8)" (the page's configs: quant_algo FP8, kv_cache_quant_algo FP8), A100 "(FP16)" (run as bf16: the same
# tensor-core rate). "LLaMA 7B / 70B" are Llama 2 (the page's configs: Llama2-7b 32 layers, 4096, 11008, 32 / 32
# heads; Llama2-70b 80 layers, 8192, 28672, 64 / 8 heads, vocabulary 32,000); "Mistral 7B" is SHAPES' mistral-7b
# and "Mixtral 8x7B" the library's preset, its experts TP-sharded (ep 1: the page prints TP only). The engines
# run with paged KV off (--paged_kv_cache disable), the whole batch's cache allocated up front (memory 1.0, as
# the v0.6.1 rows); the page's build commands print --max_batch_size 64 while its tables run batches up to 1,024
# (as in v0.6.1: the tables are taken as printed). H200: the catalogue's "h200" on the DGX H100 server.
# Not modelled: GPT-J 6B and Falcon 180B (shapes not in the catalogue, as above), and the L40S tables (no L40S
# in the catalogue).
_TRT090 = [
    ("mistral-7b", "h200", 1, 896, 128, 128, "out_tok_s_gpu", 20460.0,
     "| Mistral 7B                   | 896        | 1         | 128          | 128           |                     20,460 |"),
    ("mistral-7b", "h200", 1, 120, 128, 2048, "out_tok_s_gpu", 8950.0,
     "| Mistral 7B                   | 120        | 1         | 128          | 2048          |                      8,950 |"),
    ("mistral-7b", "h200", 1, 64, 2048, 128, "out_tok_s_gpu", 2423.0,
     "| Mistral 7B                   | 64         | 1         | 2048         | 128           |                      2,423 |"),
    ("mistral-7b", "h200", 1, 56, 2048, 2048, "out_tok_s_gpu", 3867.0,
     "| Mistral 7B                   | 56         | 1         | 2048         | 2048          |                      3,867 |"),
    ("mixtral-8x7b", "h200", 2, 1024, 128, 128, "out_tok_s_gpu", 5444.0,
     "| Mixtral 8x7B                 | 1024       | 2         | 128          | 128           |                      5,444 |"),
    ("mixtral-8x7b", "h200", 2, 256, 128, 2048, "out_tok_s_gpu", 4973.0,
     "| Mixtral 8x7B                 | 256        | 2         | 128          | 2048          |                      4,973 |"),
    ("mixtral-8x7b", "h200", 2, 64, 2048, 128, "out_tok_s_gpu", 605.0,
     "| Mixtral 8x7B                 | 64         | 2         | 2048         | 128           |                        605 |"),
    ("mixtral-8x7b", "h200", 2, 64, 2048, 2048, "out_tok_s_gpu", 1821.0,
     "| Mixtral 8x7B                 | 64         | 2         | 2048         | 2048          |                      1,821 |"),
    ("llama-2-7b", "h200", 1, 896, 128, 128, "out_tok_s_gpu", 20618.0,
     "| LLaMA 7B                     | 896        | 1         | 128          | 128           |                     20,618 |"),
    ("llama-2-7b", "h200", 1, 120, 128, 2048, "out_tok_s_gpu", 8348.0,
     "| LLaMA 7B                     | 120        | 1         | 128          | 2048          |                      8,348 |"),
    ("llama-2-7b", "h200", 1, 64, 2048, 128, "out_tok_s_gpu", 2391.0,
     "| LLaMA 7B                     | 64         | 1         | 2048         | 128           |                      2,391 |"),
    ("llama-2-7b", "h200", 1, 56, 2048, 2048, "out_tok_s_gpu", 3522.0,
     "| LLaMA 7B                     | 56         | 1         | 2048         | 2048          |                      3,522 |"),
    ("llama-2-70b", "h200", 1, 1024, 128, 128, "out_tok_s_gpu", 3989.0,
     "| LLaMA 70B                    | 1024       | 1         | 128          | 128           |                      3,989 |"),
    ("llama-2-70b", "h200", 2, 512, 128, 2048, "out_tok_s_gpu", 3963.0,
     "| LLaMA 70B                    | 512        | 2         | 128          | 2048          |                      3,963 |"),
    ("llama-2-70b", "h200", 1, 64, 2048, 128, "out_tok_s_gpu", 418.0,
     "| LLaMA 70B                    | 64         | 1         | 2048         | 128           |                        418 |"),
    ("llama-2-70b", "h200", 1, 64, 2048, 2048, "out_tok_s_gpu", 1458.0,
     "| LLaMA 70B                    | 64         | 1         | 2048         | 2048          |                      1,458 |"),
    ("mistral-7b", "h100_sxm", 1, 896, 128, 128, "out_tok_s_gpu", 20404.0,
     "| Mistral 7B                   | 896        | 1         | 128          | 128           |                     20,404 |"),
    ("mistral-7b", "h100_sxm", 1, 120, 128, 2048, "out_tok_s_gpu", 8623.0,
     "| Mistral 7B                   | 120        | 1         | 128          | 2048          |                      8,623 |"),
    ("mistral-7b", "h100_sxm", 1, 84, 2048, 128, "out_tok_s_gpu", 2405.0,
     "| Mistral 7B                   | 84         | 1         | 2048         | 128           |                      2,405 |"),
    ("mistral-7b", "h100_sxm", 1, 56, 2048, 2048, "out_tok_s_gpu", 3731.0,
     "| Mistral 7B                   | 56         | 1         | 2048         | 2048          |                      3,731 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 512, 128, 128, "out_tok_s_gpu", 5255.0,
     "| Mixtral 8x7B                 | 512        | 2         | 128          | 128           |                      5,255 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 128, 128, 2048, "out_tok_s_gpu", 3408.0,
     "| Mixtral 8x7B                 | 128        | 2         | 128          | 2048          |                      3,408 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 64, 2048, 128, "out_tok_s_gpu", 588.0,
     "| Mixtral 8x7B                 | 64         | 2         | 2048         | 128           |                        588 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 32, 2048, 2048, "out_tok_s_gpu", 1317.0,
     "| Mixtral 8x7B                 | 32         | 2         | 2048         | 2048          |                      1,317 |"),
    ("llama-2-7b", "h100_sxm", 1, 896, 128, 128, "out_tok_s_gpu", 19854.0,
     "| LLaMA 7B                     | 896        | 1         | 128          | 128           |                     19,854 |"),
    ("llama-2-7b", "h100_sxm", 1, 120, 128, 2048, "out_tok_s_gpu", 6944.0,
     "| LLaMA 7B                     | 120        | 1         | 128          | 2048          |                      6,944 |"),
    ("llama-2-7b", "h100_sxm", 1, 84, 2048, 128, "out_tok_s_gpu", 2163.0,
     "| LLaMA 7B                     | 84         | 1         | 2048         | 128           |                      2,163 |"),
    ("llama-2-7b", "h100_sxm", 1, 56, 2048, 2048, "out_tok_s_gpu", 2826.0,
     "| LLaMA 7B                     | 56         | 1         | 2048         | 2048          |                      2,826 |"),
    ("llama-2-70b", "h100_sxm", 2, 1024, 128, 128, "out_tok_s_gpu", 3214.0,
     "| LLaMA 70B                    | 1024       | 2         | 128          | 128           |                      3,214 |"),
    ("llama-2-70b", "h100_sxm", 4, 512, 128, 2048, "out_tok_s_gpu", 2725.0,
     "| LLaMA 70B                    | 512        | 4         | 128          | 2048          |                      2,725 |"),
    ("llama-2-70b", "h100_sxm", 2, 96, 2048, 128, "out_tok_s_gpu", 346.0,
     "| LLaMA 70B                    | 96         | 2         | 2048         | 128           |                        346 |"),
    ("llama-2-70b", "h100_sxm", 2, 64, 2048, 2048, "out_tok_s_gpu", 1011.0,
     "| LLaMA 70B                    | 64         | 2         | 2048         | 2048          |                      1,011 |"),
    ("mistral-7b", "a100_sxm", 1, 896, 128, 128, "out_tok_s_gpu", 6251.0,
     "| Mistral 7B                   | 896        | 1         | 128          | 128           |                  6,251 |"),
    ("mistral-7b", "a100_sxm", 1, 120, 128, 2048, "out_tok_s_gpu", 3776.0,
     "| Mistral 7B                   | 120        | 1         | 128          | 2048          |                  3,776 |"),
    ("mistral-7b", "a100_sxm", 1, 64, 2048, 128, "out_tok_s_gpu", 698.0,
     "| Mistral 7B                   | 64         | 1         | 2048         | 128           |                    698 |"),
    ("mistral-7b", "a100_sxm", 1, 56, 2048, 2048, "out_tok_s_gpu", 1576.0,
     "| Mistral 7B                   | 56         | 1         | 2048         | 2048          |                  1,576 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 512, 128, 128, "out_tok_s_gpu", 2842.0,
     "| Mixtral 8x7B                 | 512        | 2         | 128          | 128           |                  2,842 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 128, 128, 2048, "out_tok_s_gpu", 1724.0,
     "| Mixtral 8x7B                 | 128        | 2         | 128          | 2048          |                  1,724 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 64, 2048, 128, "out_tok_s_gpu", 319.0,
     "| Mixtral 8x7B                 | 64         | 2         | 2048         | 128           |                    319 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 32, 2048, 2048, "out_tok_s_gpu", 801.0,
     "| Mixtral 8x7B                 | 32         | 2         | 2048         | 2048          |                    801 |"),
    ("llama-2-7b", "a100_sxm", 1, 256, 128, 128, "out_tok_s_gpu", 5390.0,
     "| LLaMA 7B                     | 256        | 1         | 128          | 128           |                  5,390 |"),
    ("llama-2-7b", "a100_sxm", 1, 32, 128, 2048, "out_tok_s_gpu", 1484.0,
     "| LLaMA 7B                     | 32         | 1         | 128          | 2048          |                  1,484 |"),
    ("llama-2-7b", "a100_sxm", 1, 32, 2048, 128, "out_tok_s_gpu", 533.0,
     "| LLaMA 7B                     | 32         | 1         | 2048         | 128           |                    533 |"),
    ("llama-2-7b", "a100_sxm", 1, 16, 2048, 2048, "out_tok_s_gpu", 603.0,
     "| LLaMA 7B                     | 16         | 1         | 2048         | 2048          |                    603 |"),
    ("llama-2-70b", "a100_sxm", 4, 1024, 128, 128, "out_tok_s_gpu", 686.0,
     "| LLaMA 70B                    | 1024       | 4         | 128          | 128           |                    686 |"),
    ("llama-2-70b", "a100_sxm", 8, 512, 128, 2048, "out_tok_s_gpu", 684.0,
     "| LLaMA 70B                    | 512        | 8         | 128          | 2048          |                    684 |"),
    ("llama-2-70b", "a100_sxm", 4, 96, 2048, 128, "out_tok_s_gpu", 80.0,
     "| LLaMA 70B                    | 96         | 4         | 2048         | 128           |                     80 |"),
    ("llama-2-70b", "a100_sxm", 4, 64, 2048, 2048, "out_tok_s_gpu", 289.0,
     "| LLaMA 70B                    | 64         | 4         | 2048         | 2048          |                    289 |"),
    ("mistral-7b", "h200", 1, 1, 128, 1, "ttft_ms", 5.9,
     "| Mistral 7B                   | 1          | 1         | 128          |                    5.9 |"),
    ("mistral-7b", "h200", 1, 1, 2048, 1, "ttft_ms", 31.7,
     "| Mistral 7B                   | 1          | 1         | 2048         |                   31.7 |"),
    ("mixtral-8x7b", "h200", 2, 1, 128, 1, "ttft_ms", 12.1,
     "| Mixtral 8x7B                 | 1          | 2         | 128          |                   12.1 |"),
    ("mixtral-8x7b", "h200", 2, 1, 2048, 1, "ttft_ms", 87.7,
     "| Mixtral 8x7B                 | 1          | 2         | 2048         |                   87.7 |"),
    ("llama-2-7b", "h200", 1, 1, 128, 1, "ttft_ms", 5.7,
     "| LLaMA 7B                     | 1          | 1         | 128          |                    5.7 |"),
    ("llama-2-7b", "h200", 1, 1, 2048, 1, "ttft_ms", 30.2,
     "| LLaMA 7B                     | 1          | 1         | 2048         |                   30.2 |"),
    ("llama-2-70b", "h200", 4, 1, 128, 1, "ttft_ms", 17.8,
     "| LLaMA 70B                    | 1          | 4         | 128          |                   17.8 |"),
    ("llama-2-70b", "h200", 4, 1, 2048, 1, "ttft_ms", 103.0,
     "| LLaMA 70B                    | 1          | 4         | 2048         |                  103.0 |"),
    ("mistral-7b", "h100_sxm", 1, 1, 128, 1, "ttft_ms", 6.5,
     "| Mistral 7B                   | 1          | 1         | 128          |                    6.5 |"),
    ("mistral-7b", "h100_sxm", 1, 1, 2048, 1, "ttft_ms", 32.4,
     "| Mistral 7B                   | 1          | 1         | 2048         |                   32.4 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 1, 128, 1, "ttft_ms", 13.4,
     "| Mixtral 8x7B                 | 1          | 2         | 128          |                   13.4 |"),
    ("mixtral-8x7b", "h100_sxm", 2, 1, 2048, 1, "ttft_ms", 89.5,
     "| Mixtral 8x7B                 | 1          | 2         | 2048         |                   89.5 |"),
    ("llama-2-7b", "h100_sxm", 1, 1, 128, 1, "ttft_ms", 6.3,
     "| LLaMA 7B                     | 1          | 1         | 128          |                    6.3 |"),
    ("llama-2-7b", "h100_sxm", 1, 1, 2048, 1, "ttft_ms", 30.8,
     "| LLaMA 7B                     | 1          | 1         | 2048         |                   30.8 |"),
    ("llama-2-70b", "h100_sxm", 4, 1, 128, 1, "ttft_ms", 19.6,
     "| LLaMA 70B                    | 1          | 4         | 128          |                   19.6 |"),
    ("llama-2-70b", "h100_sxm", 8, 1, 2048, 1, "ttft_ms", 85.1,
     "| LLaMA 70B                    | 1          | 8         | 2048         |                   85.1 |"),
    ("mistral-7b", "a100_sxm", 1, 1, 128, 1, "ttft_ms", 16.3,
     "| Mistral 7B                   | 1          | 1         | 128          |                   16.3 |"),
    ("mistral-7b", "a100_sxm", 1, 1, 2048, 1, "ttft_ms", 139.6,
     "| Mistral 7B                   | 1          | 1         | 2048         |                  139.6 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 1, 128, 1, "ttft_ms", 23.8,
     "| Mixtral 8x7B                 | 1          | 2         | 128          |                   23.8 |"),
    ("mixtral-8x7b", "a100_sxm", 2, 1, 2048, 1, "ttft_ms", 160.9,
     "| Mixtral 8x7B                 | 1          | 2         | 2048         |                  160.9 |"),
    ("llama-2-7b", "a100_sxm", 1, 1, 128, 1, "ttft_ms", 16.2,
     "| LLaMA 7B                     | 1          | 1         | 128          |                   16.2 |"),
    ("llama-2-7b", "a100_sxm", 1, 1, 2048, 1, "ttft_ms", 132.4,
     "| LLaMA 7B                     | 1          | 1         | 2048         |                  132.4 |"),
    ("llama-2-70b", "a100_sxm", 4, 1, 128, 1, "ttft_ms", 45.6,
     "| LLaMA 70B                    | 1          | 4         | 128          |                   45.6 |"),
    ("llama-2-70b", "a100_sxm", 8, 1, 2048, 1, "ttft_ms", 249.2,
     "| LLaMA 70B                    | 1          | 8         | 2048         |                  249.2 |"),
]
TRTLLM090_ROWS = _trtllm_rows("trtllm-perf-v0.9.0", TRTLLM090, _TRT090)

# TensorRT-LLM perf-overview.md, the v1.0 page (added 2026-12-07 by corpus22s, the model as it stood on main fadfe1b,
# held out): "Throughput Measurements ... a local inference client is fed requests at an infinite rate (no delay
# between messages) ... The reported metric is `Total Output Throughput (tokens/sec)`" (the whole TP group's output
# tokens over the run, not per GPU), in-flight batching through `trtllm-bench --tp $tp_size --model $model_name
# throughput --backend pytorch` ("Starting with v0.19, testing was performed using the PyTorch backend") on
# "H100 SXM 80GB (DGX H100)" and "H200 SXM 141GB (DGX H200)". Each row: `$num_requests` requests of exactly ISL
# prompt and OSL output tokens ("--input-stdev=0 --output-stdev=0"; the page's $num_requests table), all at t = 0,
# metric out_tok_s = requests x OSL over the time the last one finishes. The checkpoints are NVIDIA's ModelOpt FP8
# ones ("nvidia/Llama-3.1-8B-Instruct-FP8", "nvidia/Llama-3.3-70B-Instruct-FP8", "nvidia/Llama-3.1-405B-Instruct-FP8"):
# FP8 GEMMs, and an FP8 KV cache: "KV cache quantization set to "auto". Using checkpoint KV quantization." and
# "Allocated 52.51 GiB for max tokens in paged KV cache (860320)" = 65,540 bytes a token = 2 x 32 layers x 8 KV
# heads x 128 x 1 byte, logged by trtllm-bench 0.20.0 on that 8B checkpoint (github.com/NVIDIA/TensorRT-LLM/issues/
# 6294, read 2026-12-07 as stored by the search corpus); the 70B / 405B checkpoints (the same ModelOpt FP8 export) are
# taken to have one too (kv_bytes 1.0: an assumption). Shapes: Llama 3.1 8B / 3.3 70B are the library's Llama 3
# 8B / 70B presets with their 131,072-token context (the 20000/2000 rows need it), Llama 3.1 405B its preset.
# Not on the page, so computed as trtllm-bench computes them (tensorrt_llm/bench/build/tuning.py calc_engine_setting
# / finetune_setting at 04cba882084a25665e7f80f5bda71b35b9790b6f, which trtllm-bench's get_settings calls for FP8
# when --max_batch_size / --max_num_tokens are not given, as in the page's commands): the max batch size (max_seqs)
# and max num tokens (the prefill token budget), see trtllm_bench_settings. KV memory: "we also use a higher KV cache
# percentage by setting `--kv_cache_free_gpu_mem_fraction 0.95` ... We fall back to `0.90` or lower if out-of-memory
# errors are encountered" (which rows used which is not stated: 0.95 taken, for the KV cache and the settings); the
# fraction is of the memory the weights leave, so memory_utilization = 0.95 + 0.05 x weights / GPU memory
# (activations and CUDA graphs' memory not taken out, as for the other rows; since fix22c the rows run with
# memory_accounting="trtllm" and kv_fraction 0.95 instead: TensorRT-LLM's fraction of the memory free after the
# weights, the activations of a max_num_tokens step and the runtime's memory, flowsolver/serving/_memory.py). H200 on the DGX H100 server as the
# v0.9.0 rows (the same NVLink 4 switch).
# Not modelled: the B200 / GB200 columns (FP4: not a precision of the model), the RTX 6000 Pro tables (not in the
# catalogue), Llama 4 Scout / Maverick and Qwen3 (MoE shapes not in the catalogue), empty cells.
_BENCH_MODELS = {
    # (preset, HF parameter count for trtllm-bench's engine-size estimate: the models' Hugging Face pages, 8.03B /
    # 70.6B / 406B, from memory; they move the settings' KV estimate by well under 1 %)
    "llama-3.1-8b": ("llama-3-8b", 8.03e9),
    "llama-3.3-70b": ("llama-3-70b", 70.6e9),
    "llama-3.1-405b": ("llama-3-405b", 406e9),
}
SHAPES.update({name: dataclasses.replace(fs.training.get_model(preset), name=name, context=131072)
               for name, (preset, _) in _BENCH_MODELS.items()})
# Mixtral 8x7B (the v0.14.0 rows): the library's preset; 46.7B parameters (Mistral AI's Mixtral announcement, from
# memory) for trtllm-bench's engine-size estimate
_BENCH_MODELS["mixtral-8x7b"] = ("mixtral-8x7b", 46.7e9)
SHAPES.setdefault("mixtral-8x7b", fs.training.get_model("mixtral-8x7b"))

#: trtllm-bench's KV cache fraction of the memory the weights leave (the page's "higher KV cache percentage")
BENCH_KV_FRACTION = 0.95


def trtllm_bench_settings(model: str, gpu: str, tp_: int, isl: int, osl: int, fraction: float = BENCH_KV_FRACTION,
                          weight_bytes: float = 1.0, kv_bytes: float = 1.0, legacy: bool = False) -> tuple[int, int]:
    """trtllm-bench's ``(max_batch_size, max_num_tokens)`` on ``tp_`` GPUs (``pp`` 1), ``weight_bytes`` and
    ``kv_bytes`` a value (FP8: 1, FP16: 2): tensorrt_llm/bench/build/tuning.py (04cba88) ``calc_engine_setting`` then
    ``finetune_setting``, memory in GiB as ``get_device_memory`` reads it (NVML's total: the catalogue's ``memory``).
    ``legacy``: the earlier version's engine size, ``param_count / 1000**3 x bytes`` (read as GiB), not ``/ 1024**3``.

    >>> trtllm_bench_settings("llama-3.1-8b", "h100_sxm", 1, 128, 128)
    (4096, 8192)
    """
    spec, params = fs.training.get_model(SHAPES[model]), _BENCH_MODELS[model][1]
    gib = 1024.0 ** 3
    kv_per_token = 2 * spec.layers * max(tp_, spec.kv_heads) * (spec.hidden // spec.heads) * kv_bytes / gib
    available = tp.get_gpu(gpu).memory / gib * tp_ - params * weight_bytes / (1000.0 ** 3 if legacy else gib)
    requests = available * fraction / (kv_per_token * (isl + osl))
    raw_bs = min(requests, 4096)
    raw_tokens = min(raw_bs * (1 + isl / osl), 32768)
    # finetune_setting: rounded up to a step that grows with the value, never below the least
    bs = _rounded_up(raw_bs, least=64, steps=((256, 32), (1024, 128), (math.inf, 256)))
    tokens = _rounded_up(raw_tokens, least=2048, steps=((4096, 256), (8192, 512), (math.inf, 1024)))
    return bs, tokens


def _rounded_up(value, least, steps):
    """``value`` rounded up to the step of the first ``(below, step)`` it is below, at least ``least``."""
    step = next(step for below, step in steps if value < below)
    return max(least, step * math.ceil(value / step))


#: the page's $num_requests per ISL / OSL
BENCH_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
                  (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000}
# per model: the table's heading, its header line, the (gpu, TP) of the H200 / H100 columns taken (the other
# columns: FP4 or off the catalogue) and the printed lines (ISL/OSL, then every column's cell)
_BENCH = {
    "llama-3.3-70b": ("#### Llama 3.3 70B",
                      "| Sequence Length (ISL/OSL) | B200<br/>TP1 (FP4) | GB200<br/>TP1 (FP4) | H200<br/>TP1 (FP8) | H100<br/>TP2 (FP8) |",
                      {3: ("h200", 1), 4: ("h100_sxm", 2)}, [
                          "| 128/128 | 11,147 | 12,189 | 3,803 | 6,378 |",
                          "| 128/2048 | 9,922 | 11,309 | 4,336 | 6,651 |",
                          "| 128/4096 | 6,831 | 7,849 | 2,872 | 4,199 |",
                          "| 500/2000 | 7,762 | 9,028 | 3,666 | 5,222 |",
                          "| 1000/1000 | 7,007 | 7,326 | 2,909 | 4,205 |",
                          "| 1000/2000 | 6,271 | 6,513 | 2,994 | 4,146 |",
                          "| 2048/128 | 1,339 | 1,450 | 442 | 762 |",
                          "| 2048/2048 | 4,783 | 5,646 | 2,003 | 3,082 |",
                          "| 5000/500 | 1,459 | 1,602 | 566 | 898 |",
                          "| 20000/2000 | 665 | 755 | 283 | 437 |"]),
    "llama-3.1-405b": ("#### Llama 3.1 405B",
                       "| Sequence Length (ISL/OSL) | B200<br/>TP4 (FP4) | GB200<br/>TP4 (FP4) | H200<br/>TP8 (FP8) | H100<br/>TP8 (FP8) |",
                       {3: ("h200", 8), 4: ("h100_sxm", 8)}, [
                           "| 128/128 | 6,281 | 6,740 | 3,814 | 3,627 |",
                           "| 128/2048 | 8,020 | 8,151 | 5,348 | 4,340 |",
                           "| 128/4096 | 6,345 | 6,608 | 4,741 | 3,116 |",
                           "| 500/2000 | 6,244 | 6,540 | 4,724 | 3,994 |",
                           "| 1000/1000 | 5,209 | 5,389 | 3,330 | 2,919 |",
                           "| 1000/2000 | 4,933 | 5,135 | 3,722 | 2,895 |",
                           "| 2048/128 | 749 | 797 | 456 | 453 |",
                           "| 2048/2048 | 4,212 | 4,407 | 2,948 | 2,296 |",
                           "| 5000/500 | 1,048 | 1,112 | 650 | 610 |",
                           "| 20000/2000 | 672 | 739 | 505 | 345 |"]),
    "llama-3.1-8b": ("#### Llama 3.1 8B",
                     "| Sequence Length (ISL/OSL) | H200<br/>TP1 (FP8) | H100<br/>TP1 (FP8) |",
                     {1: ("h200", 1), 2: ("h100_sxm", 1)}, [
                         "| 128/128 | 27,911 | 28,312 |",
                         "| 128/2048 | 26,221 | 22,714 |",
                         "| 128/4096 | 18,027 | 14,325 |",
                         "| 500/2000 | 20,770 | 17,660 |",
                         "| 1000/1000 | 17,744 | 15,220 |",
                         "| 1000/2000 | 16,828 | 13,899 |",
                         "| 2048/128 | 3,538 | 3,450 |",
                         "| 2048/2048 | 12,194 | 9,305 |",
                         "| 5000/500 | 3,902 | 3,459 |",
                         "| 20000/2000 | 1,804 | 1,351 |"]),
}


def _bench_rows():
    rows = []
    for model, (heading, header, columns, lines) in _BENCH.items():
        for line in lines:
            cells = [c.strip() for c in line.strip("|").split("|")]
            isl, osl = (int(x) for x in cells[0].split("/"))
            for col, (gpu, tp_) in columns.items():
                if not cells[col]:
                    continue
                bs, tokens = trtllm_bench_settings(model, gpu, tp_, isl, osl)
                weights = _BENCH_MODELS[model][1] / tp_            # FP8: a byte a weight
                mu = BENCH_KV_FRACTION + (1 - BENCH_KV_FRACTION) * weights / tp.get_gpu(gpu).memory
                rows.append(_row("trtllm-perf-overview-v1.0", TRTLLM_BENCH, model, gpu, tp_, BENCH_REQUESTS[isl, osl],
                                 isl, osl, "out_tok_s", float(cells[col].replace(",", "")), line,
                                 table=f"{heading} {header}", precision="fp8", kv_bytes=1.0, max_seqs=bs,
                                 token_budget=tokens, memory_utilization=mu, memory_accounting="trtllm",
                                 kv_fraction=BENCH_KV_FRACTION))
    return tuple(rows)


TRTLLM_BENCH_ROWS = _bench_rows()


# TensorRT-LLM perf-overview.md, the v0.14.0 page (added 2026-12-07 by corpus22s, the model as it stood on main fadfe1b,
# held out): "All data in the table below was generated using version 0.14.0 and presents token throughput in
# tokens/second", the same benchmark as the v1.0 rows above (trtllm-bench, requests "fed ... at an infinite rate", the
# same $num_requests table, ISL / OSL fixed) but on the TensorRT engine backend ("trtllm-bench --model $model_name
# build --tp_size $tp_size --quantization FP8 --dataset $dataset_file"; "If you would like to build an FP16 engine
# without any quantization, simply remove the `--quantization FP8` option"; "If you specify FP8 quantization, the KV
# cache will automatically be set to FP8 as well!") and with A100 and FP16 columns. The stored copy's commit could not
# be recovered here (the repository's snapshot is over this machine's size limit; the search index holds the file as
# id 5710131192): the URL is the release tag's. Columns taken: "H200 141GB HBM3" FP8, "H100 80GB HBM3" FP8 and FP16,
# "A100-SXM4-80GB" FP16 (FP16 run as bf16: the same tensor-core rate; KV cache 2 bytes); not taken: A100-PCIE-80GB and
# L40S (no PCIe A100 server or L40S in the catalogue). Models taken: LLaMA v3.1 8B / 70B / 405B (the v1.0 rows'
# shapes, 131,072-token context; v3.1 70B is the shape named llama-3.3-70b: Llama 3.3 70B keeps Llama 3.1 70B's
# architecture) and Mixtral 8x7B (the library's preset, experts TP-sharded: ep 1, as the v0.9.0
# rows); not taken: LLaMA v3 70B (the v3.1 70B shape and lines again within 1-2 %, 8K context), Mistral 7B (its shape
# from memory, its sliding window), Mixtral 8x22B (shape not in the catalogue). Engine settings: trtllm-bench build
# with --dataset computes max batch size and max num tokens with the same calc_engine_setting / finetune_setting as
# the v1.0 rows (taken here: the earlier stored version of tuning.py, which differs only in the engine size, parameter
# count / 1e9 x bytes read as GiB: legacy=True); the KV cache at run time: trtllm-bench throughput's
# --kv_cache_free_gpu_mem_fraction default 0.90 (not printed on the page: an assumption) of the memory the weights
# leave. The first three cells of a line are model / ISL-OSL / TP, carried down from the lines above when blank.
TRTLLM_V014 = "https://github.com/NVIDIA/TensorRT-LLM/blob/v0.14.0/docs/source/performance/perf-overview.md"
_V014_COLUMNS = {3: ("h200", "fp8"), 4: ("h100_sxm", "fp8"), 5: ("h100_sxm", "bf16"), 6: ("a100_sxm", "bf16")}
_V014_MODELS = {"LLaMA v3.1 405B": "llama-3.1-405b", "LLaMA v3.1 70B": "llama-3.3-70b", "LLaMA v3.1 8B": "llama-3.1-8b",
                "Mixtral 8x7B": "mixtral-8x7b"}
#: trtllm-bench throughput's KV cache fraction of the memory the weights leave (its default; the page gives none)
V014_KV_FRACTION = 0.90
_V014 = [
    "| LLaMA v3.1 405B | 1000/1000                | 8             | 3391.0372           |                    |                    |                    |                    |           |",
    "|                 | 128/128                  | 8             | 3766.2785           |                    |                    |                    |                    |           |",
    "|                 | 128/2048                 | 8             | 5952.1416           |                    |                    |                    |                    |           |",
    "|                 | 128/4096                 | 8             | 3944.117            |                    |                    |                    |                    |           |",
    "|                 | 20000/2000               | 8             | 481.5732            |                    |                    |                    |                    |           |",
    "|                 | 2048/128                 | 8             | 444.5735            |                    |                    |                    |                    |           |",
    "|                 | 2048/2048                | 8             | 2604.8557           |                    |                    |                    |                    |           |",
    "|                 | 500/2000                 | 8             | 4805.86             |                    |                    |                    |                    |           |",
    "|                 | 5000/500                 | 8             | 655.9754            |                    |                    |                    |                    |           |",
    "| LLaMA v3.1 70B  | 1000/1000                | 1             | 2585.0953           | 410.286            |                    |                    |                    |           |",
    "|                 |                          | 2             | 4600.9616           | 4116.4444          | 785.4931           | 468.6383           | 257.972            |           |",
    "|                 |                          | 4             | 7607.5304           | 6932.8808          | 3774.676           | 1762.6831          | 989.4082           | 1161.4814 |",
    "|                 |                          | 8             | 13081.434           | 10730.156          | 5978.4573          | 3190.0211          | 959.8463           | 1188.1193 |",
    "|                 | 128/128                  | 1             | 3897.2623           | 2459.6003          |                    |                    |                    |           |",
    "|                 |                          | 2             | 5357.0227           | 5194.8171          | 3207.2866          | 1346.9692          | 806.7215           |           |",
    "|                 |                          | 4             | 8826.9618           | 8542.3012          | 5846.8413          | 2420.8665          | 1272.6755          | 1438.0446 |",
    "|                 |                          | 8             | 16382.9807          | 15533.1169         | 10649.4968         | 4572.3445          | 1212.0566          | 1381.7051 |",
    "|                 | 128/2048                 | 1             | 3612.2603           | 445.7773           |                    |                    |                    |           |",
    "|                 |                          | 2             | 7054.7235           | 5869.3998          | 822.1912           | 483.1299           |                    |           |",
    "|                 |                          | 4             | 12763.4114          | 9017.4377          | 4982.6225          | 2492.4036          | 1435.236           | 1763.522  |",
    "|                 |                          | 8             | 19266.0398          | 15190.1652         | 7605.5295          | 4254.2871          | 1609.2473          | 1944.1251 |",
    "|                 | 128/4096                 | 1             | 2415.1981           |                    |                    |                    |                    |           |",
    "|                 |                          | 2             | 5671.9561           | 3518.782           | 419.0178           | 272.9137           |                    |           |",
    "|                 |                          | 4             | 8939.8227           | 6431.2702          | 3083.8794          | 1685.9677          | 1212.5416          | 1280.3778 |",
    "|                 |                          | 8             | 13974.2854          | 9168.709           | 4981.9765          | 3067.5452          | 1310.091           | 1499.2441 |",
    "|                 | 20000/2000               | 1             | 240.7202            |                    |                    |                    |                    |           |",
    "|                 |                          | 2             | 614.318             | 397.6801           |                    |                    |                    |           |",
    "|                 |                          | 4             | 1030.9528           | 851.8542           | 369.4269           | 179.5181           | 126.7676           | 140.5565  |",
    "|                 |                          | 8             | 1898.9762           | 1354.5333          |                    | 362.9368           | 156.5767           | 141.1584  |",
    "|                 | 2048/128                 | 1             | 458.1948            | 244.1842           |                    |                    |                    |           |",
    "|                 |                          | 2             | 692.3911            | 697.3907           | 322.7016           | 144.7921           | 95.0306            |           |",
    "|                 |                          | 4             | 1034.5773           | 1001.0771          | 688.0344           | 278.4018           | 150.6795           | 169.0386  |",
    "|                 |                          | 8             | 2070.8157           | 1966.6072          | 1316.3086          | 550.4751           | 142.6166           | 163.6749  |",
    "|                 | 2048/2048                | 1             | 1797.6743           | 209.1707           |                    |                    |                    |           |",
    "|                 |                          | 2             | 3518.0774           | 2445.0093          | 166.792            | 126.1127           |                    |           |",
    "|                 |                          | 4             | 6112.9026           | 4838.5272          | 2393.1359          | 1231.0359          | 823.4777           | 876.2254  |",
    "|                 |                          | 8             | 9716.1934           | 7434.8117          | 4023.6978          | 2171.5323          | 858.6602           | 1001.3649 |",
    "|                 | 500/2000                 | 1             | 2826.6665           |                    |                    |                    |                    |           |",
    "|                 |                          | 2             | 6106.5855           | 4605.9226          | 700.5415           | 430.6129           |                    |           |",
    "|                 |                          | 4             | 10816.8283          | 9205.3766          | 3781.082           | 2096.2441          | 1176.418           | 1470.0826 |",
    "|                 |                          | 8             | 17693.705           | 13109.4437         | 6205.2658          | 3486.7891          | 1306.35            | 1639.2778 |",
    "|                 | 5000/500                 | 1             | 533.6128            | 125.4236           |                    |                    |                    |           |",
    "|                 |                          | 2             | 936.7014            | 886.6758           | 228.874            | 116.9529           | 76.1601            |           |",
    "|                 |                          | 4             | 1386.4827           | 1313.893           | 849.1091           | 362.9361           | 209.2045           | 236.117   |",
    "|                 |                          | 8             | 2711.5057           | 2444.9643          | 1420.5163          | 670.3742           | 203.8008           | 230.3084  |",
    "| LLaMA v3.1 8B   | 1000/1000                | 1             | 16414.6988          | 14108.0361         | 7054.5156          | 3634.3886          | 3165.3542          | 3726.7552 |",
    "|                 | 128/128                  | 1             | 27778.8885          | 26933.1886         | 15571.6549         | 6701.7958          | 5338.0166          | 8639.7933 |",
    "|                 | 128/2048                 | 1             | 22948.5383          | 18995.2523         | 9150.7477          | 4963.4443          | 4250.6391          | 5101.6652 |",
    "|                 | 128/4096                 | 1             | 15583.3035          | 11815.449          | 5368.9227          | 3011.3335          | 2568.5398          | 2774.5363 |",
    "|                 | 20000/2000               | 1             | 1649.5453           | 1301.4754          | 562.8735           | 316.533            | 291.4776           | 270.5404  |",
    "|                 | 2048/128                 | 1             | 3619.4309           | 3460.3545          | 1904.3259          | 795.389            | 611.8446           | 986.9134  |",
    "|                 | 2048/2048                | 1             | 11032.9729          | 8777.6623          | 4159.6857          | 2264.9513          | 2011.1215          | 2018.303  |",
    "|                 | 500/2000                 | 1             | 19510.4015          | 14993.328          | 7498.3331          | 3945.1912          | 3374.7133          | 4065.3921 |",
    "|                 | 5000/500                 | 1             | 3787.6721           | 3258.2001          | 1708.0353          | 790.6631           | 703.56             | 855.9822  |",
    "| Mixtral 8x7B    | 1000/1000                | 2             | 18712.2046          | 15931.8663         | 6052.876           | 3276.6186          | 1907.8817          |           |",
    "|                 |                          | 4             | 32834.0923          | 28015.1981         | 15509.1538         | 7357.1613          | 4737.0179          | 5060.8399 |",
    "|                 |                          | 8             | 44410.7533          | 40573.0499         | 27684.9381         | 13948.1533         | 4970.9287          | 5725.9638 |",
    "|                 | 128/128                  | 2             | 24970.5594          | 24321.9927         | 15334.2103         | 5915.3897          | 3810.1846          |           |",
    "|                 |                          | 4             | 42500.5855          | 40182.7271         | 27718.9857         | 11328.7486         | 6026.9206          | 6769.9441 |",
    "|                 |                          | 8             | 54304.0436          | 51030.9048         | 40119.3268         | 17918.1146         | 5573.7682          | 6422.4308 |",
    "|                 | 128/2048                 | 2             | 29314.1475          | 20945.7816         | 7409.9253          | 4284.3035          | 2248.1815          |           |",
    "|                 |                          | 4             | 52680.8353          | 40668.5928         | 21293.1761         | 10929.0182         | 7353.7405          | 7506.7612 |",
    "|                 |                          | 8             | 70409.1968          | 64529.9982         | 40839.3077         | 21058.2144         | 8866.251           | 9907.6896 |",
    "|                 | 128/4096                 | 2             | 21520.4385          | 12070.6724         | 3928.6678          | 2302.964           | 1171.966           |           |",
    "|                 |                          | 4             | 32550.5267          | 29120.2002         | 11678.0071         | 6538.1511          | 5176.9632          | 4958.7004 |",
    "|                 |                          | 8             | 40373.4857          | 36357.7861         | 21628.821          | 13565.7778         | 7209.2336          | 8271.7938 |",
    "|                 | 20000/2000               | 2             | 2204.1378           | 1659.5907          | 622.2717           | 321.9839           | 185.6671           |           |",
    "|                 |                          | 4             | 4047.7473           | 3290.9457          | 1602.0208          | 778.7285           | 572.4282           | 587.1759  |",
    "|                 |                          | 8             | 6561.6849           | 5328.5261          | 3113.2047          | 1645.8114          | 750.5372           | 828.8471  |",
    "|                 | 2048/128                 | 2             | 2958.0873           | 2883.5166          | 1796.5451          | 687.7251           | 465.1585           |           |",
    "|                 |                          | 4             | 5229.8744           | 4972.6818          | 3354.994           | 1351.7191          | 728.4943           | 812.0143  |",
    "|                 |                          | 8             | 7030.9766           | 6532.721           | 5025.3047          | 2248.6418          | 677.9886           | 771.3656  |",
    "|                 | 2048/2048                | 2             | 13842.834           | 9334.0732          | 3503.0218          | 1997.1923          | 1060.8946          |           |",
    "|                 |                          | 4             | 22389.4914          | 20185.8212         | 9143.2741          | 4963.8758          | 3520.3659          | 3453.8076 |",
    "|                 |                          | 8             | 28975.322           | 26176.9163         | 19291.8278         | 10552.9732         | 4590.187           | 4929.7228 |",
    "|                 | 500/2000                 | 2             | 23459.0411          | 18185.6392         | 6023.3308          | 3438.6964          | 1817.11            |           |",
    "|                 |                          | 4             | 39971.0236          | 31693.8787         | 17087.037          | 8930.3495          | 6117.5624          | 6434.9178 |",
    "|                 |                          | 8             | 60721.462           | 48842.8084         | 31358.2791         | 17034.706          | 7118.0767          | 8130.8026 |",
    "|                 | 5000/500                 | 2             | 3742.5293           | 3563.8228          | 1648.9041          | 733.1921           | 448.6716           |           |",
    "|                 |                          | 4             | 6602.3877           | 6020.6267          | 3543.6819          | 1603.8223          | 948.0567           | 1047.3212 |",
    "|                 |                          | 8             | 8862.8164           | 8214.9445          | 5968.7734          | 2813.1531          | 969.817            | 1098.3081 |",
]


def _v014_rows():
    rows, model, lengths = [], None, None
    for line in _V014:
        cells = [c.strip() for c in line.strip("|").split("|")]
        model = _V014_MODELS[cells[0]] if cells[0] else model
        lengths = cells[1] or lengths
        isl, osl = (int(x) for x in lengths.split("/"))
        tp_ = int(cells[2])
        for col, (gpu, precision) in _V014_COLUMNS.items():
            if not cells[col]:
                continue
            weight_bytes = 1.0 if precision == "fp8" else 2.0
            bs, tokens = trtllm_bench_settings(model, gpu, tp_, isl, osl, weight_bytes=weight_bytes,
                                               kv_bytes=weight_bytes, legacy=True)
            weights = _BENCH_MODELS[model][1] * weight_bytes / tp_
            mu = V014_KV_FRACTION + (1 - V014_KV_FRACTION) * weights / tp.get_gpu(gpu).memory
            extra = dict(precision="fp8", kv_bytes=1.0) if precision == "fp8" else {}
            rows.append(_row("trtllm-perf-overview-v0.14.0", TRTLLM_V014, model, gpu, tp_, BENCH_REQUESTS[isl, osl],
                             isl, osl, "out_tok_s", float(cells[col]), line, max_seqs=bs, token_budget=tokens,
                             memory_utilization=mu, memory_accounting="trtllm", kv_fraction=V014_KV_FRACTION,
                             **extra))
    return tuple(rows)


TRTLLM_V014_ROWS = _v014_rows()

ROWS = LMDEPLOY_ROWS + TRTLLM_ROWS + GPTFAST_ROWS + NIM_ROWS + VLLM_H200_ROWS + TRTLLM090_ROWS + GPTFAST_MOE_ROWS + TRTLLM_BENCH_ROWS + TRTLLM_V014_ROWS

_SERVER = {"a100_sxm": ("dgx_a100", "ib_hdr"), "h100_sxm": ("dgx_h100", "ib_ndr"), "h200": ("dgx_h100", "ib_ndr")}


#: the compute model every row runs with: "auto" (the library default: the kernel tables where the
#: GPU has them) or a fraction (the flat model); ``--compute flat`` sets DEFAULT_COMPUTE_EFFICIENCY
COMPUTE = {"efficiency": "auto"}


def _memory_args(row) -> dict:
    """serve's memory keywords for a row: a trtllm-bench row states its engine's accounting
    (``memory_accounting="trtllm"``: ``kv_fraction``, its kv_cache_free_gpu_mem_fraction, of the memory
    the weights, the activations of a ``token_budget`` step and the runtime leave); its
    ``memory_utilization`` (the same fraction as vLLM's share of the total, weights alone taken out)
    is kept for the record and not used. Every other row: vLLM's accounting of ``memory_utilization``."""
    if row.get("memory_accounting") == "trtllm":
        return dict(memory_utilization=row["kv_fraction"], memory_accounting="trtllm")
    return dict(memory_utilization=row.get("memory_utilization", fs.serving.DEFAULT_MEMORY_UTILIZATION))


def trace(row):
    """The row's batch run through the model: ``batch`` requests at t = 0 on one instance of
    ``tp`` GPUs of one server, ``(trace, ServeResult)``."""
    server, link = _SERVER[row["gpu"]]
    graph = tp.rail_optimized(nodes=1, server=server, link=link)
    model = SHAPES.get(row["model"], row["model"])
    b, p, o = row["batch"], row["prompt"], row["output"]
    seqs = row.get("max_seqs", max(256, b))
    budget = row.get("token_budget", 8192)
    with warnings.catch_warnings():     # a 1 s run read for its step tables only: not steady, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        r = fs.serve(graph, model, rate=1.0, duration=1.0, prompt=p, output=o, tp=row["tp"], ranks=list(range(row["tp"])),
                     gpu=row["gpu"], max_batch=seqs, token_budget=budget, precision=row.get("precision", "bf16"), kv_bytes=row.get("kv_bytes"),
                     **_memory_args(row), compute_efficiency=COMPUTE["efficiency"])
    t = simulate(np.zeros(b), np.full(b, p), np.full(b, o), prefill_instances=1, decode_instances=0, max_seqs=seqs,
                 token_budget=budget, kv_capacity=r.kv_capacity, prefill_time=r.step_tables["prefill"],
                 decode_time=r.step_tables["decode"])
    return t, r


PREDICT = {
    "out_tok_s": lambda row, t: row["batch"] * row["output"] / float(np.max(t.finish)),
    "out_tok_s_gpu": lambda row, t: row["batch"] * row["output"] / float(np.max(t.finish)) / row["tp"],
    "ttft_ms": lambda row, t: float(t.first_token[0]) * 1e3,
    "itl_ms": lambda row, t: float(t.finish[0] - t.first_token[0]) / (row["output"] - 1) * 1e3,
    "latency_ms": lambda row, t: float(np.max(t.finish)) * 1e3,
}


def predict(row) -> float:
    return PREDICT[row["metric"]](row, trace(row)[0])


#: the throughput metrics (a time per token: the error is measured / model - 1)
THROUGHPUT = ("out_tok_s", "out_tok_s_gpu")


def time_error(row, model: float) -> float:
    """Model time over measured time, less 1 (negative: the model is fast), whatever the metric."""
    return row["value"] / model - 1 if row["metric"] in THROUGHPUT else model / row["value"] - 1


def gap_per_layer(row, model: float) -> float:
    """Measured less modelled time per step and per layer (s): decode rows over their
    ``output - 1`` steps (the prefill inside), first-token rows over the one prefill step."""
    b, o = row["batch"], row["output"]
    if row["metric"] in THROUGHPUT:
        per = row["tp"] if row["metric"] == "out_tok_s_gpu" else 1
        gap = b * o / (row["value"] * per) - b * o / (model * per)
    elif row["metric"] == "itl_ms":
        gap = (row["value"] - model) * 1e-3 * (o - 1)
    else:
        gap = (row["value"] - model) * 1e-3
    steps = 1 if row["metric"] == "ttft_ms" else o - 1
    layers = fs.training.get_model(SHAPES.get(row["model"], row["model"])).layers
    return gap / steps / layers


def regime(row) -> str:
    if row["metric"] == "ttft_ms":
        return f"prefill {'<= 128' if row['prompt'] <= 128 else '>= 2048'} tokens"
    if row["metric"] == "out_tok_s_gpu":
        return "static batch 16-1024, TensorRT-LLM v0.9.0"
    if "max_seqs" in row:
        return f"in-flight batching, trtllm-bench ({row['source'].rsplit('-', 1)[1]})"
    return "decode, batch <= 8" if row["batch"] <= 8 else (
        "decode, batch 16-64" if row["prompt"] == 1 else "static batch >= 48, TensorRT-LLM")


def label(row) -> str:
    prec = row.get("precision", "bf16")
    return (f"{row['source'][:18]:18s} {row['model']:12s} {row['gpu']:8s} {prec:4s} tp{row['tp']} b{row['batch']:<4d} "
            f"{row['prompt']:>5d}/{row['output']:<5d} {row['metric']}")


def main(argv=None) -> int:
    import serving         # beside this file: its --compute option and the COMPUTE it sets

    compute = serving.compute_option(argv, __doc__.split("\n\n")[0])
    COMPUTE.update(serving.COMPUTE)
    print(f"{'row':80s} {'measured':>10s} {'model':>10s} {'error':>8s} {'time err':>8s} {'gap/layer':>9s}")
    groups: dict = {}
    absolute = []
    for row in ROWS:
        model = predict(row)
        te = time_error(row, model)
        print(f"{label(row):80s} {row['value']:10.2f} {model:10.2f} {(model - row['value']) / row['value']:+8.1%} "
              f"{te:+8.1%} {gap_per_layer(row, model) * 1e6:7.0f}us")
        for key in (regime(row), row["gpu"], row["source"]):
            groups.setdefault(key, []).append(te)
        absolute.append(abs(te))
    print(f"\n{'group (time error: model time / measured - 1)':48s} {'rows':>4s} {'median':>8s} {'min':>8s} {'max':>8s}")
    for key, errs in groups.items():
        print(f"{key:48s} {len(errs):4d} {np.median(errs):+8.1%} {min(errs):+8.1%} {max(errs):+8.1%}")
    print(f"all {len(absolute)} rows, {compute} step model: median |time error| {np.median(absolute):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
