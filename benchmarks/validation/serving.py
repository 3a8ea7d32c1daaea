"""Published LLM-serving measurements (hardware and layout stated) and flowsolver.serve's
predictions of them, kept apart from the training / collective corpus.

Every figure below is copied from the source named beside it (``verbatim`` is the printed
line, ``url`` where it was read); nothing was fitted to them: the step model is the library's
default, the kernel tables (GEMM curves, flash attention rates and BabelStream's achieved HBM
bandwidth, all from kernel benchmarks; ``--compute flat``: the training model's flat
``DEFAULT_COMPUTE_EFFICIENCY`` and ``DEFAULT_ATTENTION_EFFICIENCY`` instead). Run ``python
benchmarks/validation/serving.py`` to print model against measurement (docs/serving.md,
"Accuracy", quotes its output). Held-out rows from other sources (lmdeploy, TensorRT-LLM,
gpt-fast, NVIDIA NIM, vLLM on H200), added with the flat model as it stood, are in
``serving_heldout.py`` beside this file.
"""

from __future__ import annotations

import warnings

import numpy as np
import topologies as tp

import flowsolver as fs
from flowsolver.serving import simulate

BUILDKITE = "https://buildkite.com/vllm/performance-benchmark/builds/9523"
# the page as stored by the search corpus is a mirror of the gist below
GIST = ("https://gist.github.com/surajssd/c8bbcb244b210a3607ad952a7bdda759 (read at the mirror "
        "https://gist.521000.best/surajssd/c8bbcb244b210a3607ad952a7bdda759)")

#: vLLM's nightly "latency tests" (build 9523): "Input length: 32 tokens. Output length: 128
#: tokens. Batch size: fixed (8)." on A100-SXM4-80GB; the metric is the end-to-end latency of
#: the batch (vLLM's benchmark_latency: the 8 requests at once, to their 128th token).
LATENCY_ROWS = (
    dict(source="vllm-buildkite-9523", url=BUILDKITE, model="llama-3-70b", tp=4, gpu="A100-SXM4-80GB",
         metric="mean_latency_ms", value=3990.59,
         verbatim="latency_llama70B_tp4 A100-SXM4-80GB 3990.59 3990.39 3991.87"),
    dict(source="vllm-buildkite-9523", url=BUILDKITE, model="llama-3-8b", tp=1, gpu="A100-SXM4-80GB",
         metric="mean_latency_ms", value=1579.27,
         verbatim="latency_llama8B_tp1 A100-SXM4-80GB 1579.27 1579.34 1579.87"),
    dict(source="vllm-buildkite-9523", url=BUILDKITE, model="mixtral-8x7b", tp=2, gpu="A100-SXM4-80GB",
         metric="mean_latency_ms", value=3643.84,
         verbatim="latency_mixtral8x7B_tp2 A100-SXM4-80GB 3643.84 3648.91 3680.16"),
)

#: vLLM's serving benchmark (ShareGPT prompts, 200 requests, Poisson at 1 request/s) of
#: Llama 3.3 70B (the Llama 3 70B shape) at TP 4 x PP 2 on two Azure ND96asr_v4 (8 x A100 40GB
#: SXM each, 8 x 200 Gb/s HDR InfiniBand: Azure ND A100 v4 documentation). The table gives
#: 0.928406 requests/s, 198.242 output and 396.267 total tokens/s: 213.5 output and 213.3
#: prompt tokens per request on average, the fixed lengths the model is given (ShareGPT's
#: lengths vary; the model sees their means only).
SERVING_ROWS = (
    dict(source="vllm-serving-gist", url=GIST, model="llama-3-70b", tp=4, pp=2, gpu="A100 40GB (ND96asr_v4) x 2",
         metric="median_tpot_ms", value=43.5453,
         verbatim="serving_meta-llama-Llama-3.3-70B-Instruct_tp4_pp2_sharegpt_qps_01 | 1xStandard_ND96asr_v4 x 2 | "
                  "200 | 0.928406 | 198.242 | 396.267 | 110.373 | 96.9817 | 230.301 | 43.7218 | 43.5453 | 50.5137"),
    dict(source="vllm-serving-gist", url=GIST, model="llama-3-70b", tp=4, pp=2, gpu="A100 40GB (ND96asr_v4) x 2",
         metric="median_ttft_ms", value=96.9817,
         verbatim="serving_meta-llama-Llama-3.3-70B-Instruct_tp4_pp2_sharegpt_qps_01 | 1xStandard_ND96asr_v4 x 2 | "
                  "200 | 0.928406 | 198.242 | 396.267 | 110.373 | 96.9817 | 230.301"),
)


#: the step model: "auto" (the library default, the kernel tables) or the flat model's fraction
COMPUTE = {"efficiency": "auto"}


def predict_latency(row) -> float:
    """Model of a latency row: 8 requests of 32 prompt tokens at once to their 128th token (ms)."""
    graph = tp.rail_optimized(nodes=1, server="dgx_a100", link="ib_hdr")
    with warnings.catch_warnings():     # a 1 s run read for its step tables only: not steady, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        r = fs.serve(graph, row["model"], rate=1.0, duration=1.0, prompt=32, output=128, tp=row["tp"],
                     compute_efficiency=COMPUTE["efficiency"])
    trace = simulate(np.zeros(8), np.full(8, 32), np.full(8, 128), prefill_instances=1, decode_instances=0,
                     max_seqs=256, token_budget=8192, kv_capacity=r.kv_capacity,
                     prefill_time=r.step_tables["prefill"], decode_time=r.step_tables["decode"])
    return float(np.max(trace.finish)) * 1e3


def predict_serving(metric: str) -> float:
    """Model of the ShareGPT serving rows: stage 0 on 4 GPUs of one server, stage 1 on 4 of the
    other (the layout's PP sends cross the InfiniBand fabric), A100 40GB compute and memory."""
    graph = tp.rail_optimized(nodes=2, server="dgx_a100", link="ib_hdr")
    rate = 0.928406
    r = fs.serve(graph, "llama-3-70b", rate=rate, duration=200 / rate, prompt=213, output=214, tp=4, pp=2,
                 ranks=[0, 1, 2, 3, 8, 9, 10, 11], gpu="a100_40gb", seed=0, compute_efficiency=COMPUTE["efficiency"])
    return (r.tpot_p50 if metric == "median_tpot_ms" else r.ttft_p50) * 1e3


def compute_option(argv, description: str) -> str:
    """A serving validation script's ``--compute``: ``"kernels"`` (the library default, the kernel
    tables) or ``"flat"`` (DEFAULT_COMPUTE_EFFICIENCY); sets :data:`COMPUTE` and returns it."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--compute", choices=("kernels", "flat"), default="kernels",
                        help="step model: the kernel tables (the library default) or the flat efficiencies")
    compute = parser.parse_args(argv).compute
    COMPUTE["efficiency"] = "auto" if compute == "kernels" else fs.training.DEFAULT_COMPUTE_EFFICIENCY
    return compute


def main(argv=None) -> int:
    compute_option(argv, __doc__.split("\n\n")[0])
    print(f"{'row':60s} {'measured':>10s} {'model':>10s} {'error':>8s}")
    for row in LATENCY_ROWS + SERVING_ROWS:
        model = predict_latency(row) if row in LATENCY_ROWS else predict_serving(row["metric"])
        name = f"{row['model']} tp{row['tp']}{' pp' + str(row['pp']) if 'pp' in row else ''} {row['metric']}"
        print(f"{name:60s} {row['value']:10.2f} {model:10.2f} {(model - row['value']) / row['value']:+8.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
