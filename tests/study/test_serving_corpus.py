"""The held-out serving rows (benchmarks/validation/serving_heldout.py): counts, pinned URLs, and every
TensorRT-LLM v0.9.0 row's fields read back from the printed table line it carries (an independent check
of the transcription: the line is parsed here, not the row's own fields), and the per-GPU throughput
metric against its formula."""

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "validation"


@pytest.fixture(scope="module")
def H():
    if str(CORPUS) not in sys.path:
        sys.path.insert(0, str(CORPUS))
    import serving_heldout
    return serving_heldout


def test_row_counts_by_source(H):
    counts = {}
    for row in H.ROWS:
        counts[row["source"]] = counts.get(row["source"], 0) + 1
    # the corpus README's counts: 47 rows of five sources, then 72 of TensorRT-LLM v0.9.0 (48 peak-throughput
    # rows: 3 GPUs x 4 models x 4 lengths; 24 first-token rows: 3 GPUs x 4 models x 2 prompt lengths)
    assert counts == {"lmdeploy-a100-fp16": 18, "trtllm-perf-v0.5-v0.6.1": 15, "gpt-fast-readme": 7,
                      "nim-benchmarking-1.0.0": 4, "vllm-buildkite-9515": 3, "trtllm-perf-v0.9.0": 72,
                      "gpt-fast-mixtral-readme": 3}
    assert len(H.ROWS) == 122
    new = [r for r in H.ROWS if r["source"] == "trtllm-perf-v0.9.0"]
    assert sum(r["metric"] == "out_tok_s_gpu" for r in new) == 3 * 4 * 4
    assert sum(r["metric"] == "ttft_ms" for r in new) == 3 * 4 * 2


def test_github_urls_are_pinned_to_a_commit(H):
    for row in H.ROWS:
        if "github.com" in row["url"]:
            assert re.search(r"/blob/[0-9a-f]{40}/", row["url"]), row["url"]
    assert all("250d9c293d5edbc2a45c20775b3150b1eb68b364" in r["url"] for r in H.TRTLLM090_ROWS)


# the table's model names -> the rows' models (the page's configs: Llama2-7b / Llama2-70b)
_NAMES = {"LLaMA 7B": "llama-2-7b", "LLaMA 70B": "llama-2-70b", "Mistral 7B": "mistral-7b",
          "Mixtral 8x7B": "mixtral-8x7b"}


def test_trtllm_v090_rows_agree_with_their_printed_lines(H):
    for row in H.TRTLLM090_ROWS:
        cells = [c.strip() for c in row["verbatim"].strip("|").split("|")]
        assert _NAMES[cells[0]] == row["model"], row["verbatim"]
        assert int(cells[1]) == row["batch"] and int(cells[2]) == row["tp"] and int(cells[3]) == row["prompt"]
        if row["metric"] == "out_tok_s_gpu":          # Model | Batch | TP | Input | Output | out tok/s/GPU
            assert len(cells) == 6 and int(cells[4]) == row["output"]
            assert float(cells[5].replace(",", "")) == row["value"]
        else:                                         # Model | Batch | TP | Input | 1st token latency (ms)
            assert row["metric"] == "ttft_ms" and len(cells) == 5 and row["batch"] == 1 and row["output"] == 1
            assert float(cells[4]) == row["value"]
        # the page's precisions: H200 / H100 tables "(FP8)" with an FP8 KV cache, A100 "(FP16)"
        if row["gpu"] == "a100_sxm":
            assert "precision" not in row and row.get("kv_bytes") is None
        else:
            assert row["precision"] == "fp8" and row["kv_bytes"] == 1.0


def test_gpt_fast_mixtral_rows_are_the_bf16_line(H):
    # "|baseline(bfloat16)|    OOM  |    96.67  | 155.35 |  227.82    |": 1 / 2 / 4 / 8 GPUs, 1 GPU out of memory
    cells = [c.strip() for c in H.GPTFAST_MOE_ROWS[0]["verbatim"].strip("|").split("|")]
    assert cells[0] == "baseline(bfloat16)" and cells[1] == "OOM"
    assert [(r["tp"], r["value"]) for r in H.GPTFAST_MOE_ROWS] == [(2, float(cells[2])), (4, float(cells[3])),
                                                                  (8, float(cells[4]))]
    assert all(r["batch"] == 1 and r["prompt"] == 5 and r["output"] == 200 and r["metric"] == "out_tok_s"
               for r in H.GPTFAST_MOE_ROWS)


def test_mistral_7b_shape_is_mixtral_without_experts(H):
    import flowsolver as fs
    mistral, mixtral = H.SHAPES["mistral-7b"], fs.training.get_model("mixtral-8x7b")
    # Mistral 7B paper, table 1: 32 layers, dim 4096, hidden 14336, 32 heads, 8 KV heads, vocabulary 32,000
    assert (mistral.layers, mistral.hidden, mistral.ffn, mistral.heads, mistral.kv_heads, mistral.vocab) == \
        (32, 4096, 14336, 32, 8, 32000)
    assert (mixtral.layers, mixtral.hidden, mixtral.ffn, mixtral.heads, mixtral.kv_heads, mixtral.vocab) == \
        (32, 4096, 14336, 32, 8, 32000)
    assert mistral.experts == 1 and mistral.context >= 2048 + 2048


def test_per_gpu_throughput_is_the_batch_over_its_time_and_tp(H):
    # 4 requests of 10 output tokens, the last finishing at 2 s, on TP 2: 4 x 10 / 2 s / 2 GPUs = 10 tok/s/GPU
    trace = SimpleNamespace(finish=np.array([1.0, 1.5, 2.0, 2.0]), first_token=np.zeros(4))
    row = dict(batch=4, output=10, tp=2, metric="out_tok_s_gpu", value=5.0)
    assert H.PREDICT["out_tok_s_gpu"](row, trace) == pytest.approx(10.0)
    assert H.PREDICT["out_tok_s"](row, trace) == pytest.approx(20.0)
    # a throughput row's time error is measured / model - 1: 5 against 10 tok/s/GPU is a model twice as fast
    assert H.time_error(row, 10.0) == pytest.approx(-0.5)
