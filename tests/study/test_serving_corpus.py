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
                      "gpt-fast-mixtral-readme": 3, "trtllm-perf-overview-v1.0": 60,
                      "trtllm-perf-overview-v0.14.0": 273}
    assert len(H.ROWS) == 455
    # TensorRT-LLM v1.0 perf-overview: 3 Llama models x 2 GPUs (H200, H100 columns) x 10 ISL/OSL lines, no empty cell
    assert len(H.TRTLLM_BENCH_ROWS) == 3 * 2 * 10
    new = [r for r in H.ROWS if r["source"] == "trtllm-perf-v0.9.0"]
    assert sum(r["metric"] == "out_tok_s_gpu" for r in new) == 3 * 4 * 4
    assert sum(r["metric"] == "ttft_ms" for r in new) == 3 * 4 * 2


def test_github_urls_are_pinned_to_a_commit(H):
    for row in H.ROWS:
        if row["source"] == "trtllm-perf-overview-v0.14.0":
            # the one tag-pinned source: its stored copy's commit is not recoverable here (serving_heldout.py says why)
            assert "/blob/v0.14.0/docs/source/performance/perf-overview.md" in row["url"]
        elif "github.com" in row["url"]:
            assert re.search(r"/blob/[0-9a-f]{40}/", row["url"]), row["url"]
    assert all("250d9c293d5edbc2a45c20775b3150b1eb68b364" in r["url"] for r in H.TRTLLM090_ROWS)
    assert all("00f37686aa854010d68bcbd0f4ab000221541ca6/docs/source/performance/perf-overview.md" in r["url"]
               for r in H.TRTLLM_BENCH_ROWS)


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


# the v1.0 page's "$num_requests" table (Input Length | Output Length | $seq_len | $num_requests), typed from the page
_BENCH_REQUESTS = {"128/128": 30000, "128/2048": 3000, "128/4096": 1500, "1000/2000": 1500, "2048/128": 3000,
                   "2048/2048": 1500, "5000/500": 1500, "1000/1000": 3000, "500/2000": 3000, "20000/2000": 1000}
_BENCH_NAMES = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.3 70B": "llama-3.3-70b", "Llama 3.1 405B": "llama-3.1-405b"}
_BENCH_GPUS = {"H200": "h200", "H100": "h100_sxm"}


def test_trtllm_v10_rows_agree_with_their_printed_lines(H):
    for row in H.TRTLLM_BENCH_ROWS:
        heading, header = row["table"].split(" | ", 1)
        assert _BENCH_NAMES[heading.removeprefix("#### ").split(" | ")[0].strip()] == row["model"]
        columns = [c.strip() for c in ("| " + header).strip("|").split("|")]
        cells = [c.strip() for c in row["verbatim"].strip("|").split("|")]
        assert len(cells) == len(columns) and columns[0] == "Sequence Length (ISL/OSL)"
        # the column this row was read from: "<GPU><br/>TP<n> (FP8)"
        (col,) = [i for i, c in enumerate(columns) if c.startswith(next(k for k, v in _BENCH_GPUS.items()
                                                                        if v == row["gpu"]) + "<br/>")]
        gpu, rest = columns[col].split("<br/>")
        assert rest == f"TP{row['tp']} (FP8)" and row["precision"] == "fp8"
        assert float(cells[col].replace(",", "")) == row["value"]
        assert cells[0] == f"{row['prompt']}/{row['output']}" and row["batch"] == _BENCH_REQUESTS[cells[0]]
        assert row["metric"] == "out_tok_s"          # "Total Output Throughput (tokens/sec)": the whole TP group
        assert row["kv_bytes"] == 1.0                # the ModelOpt FP8 checkpoints' FP8 KV cache


def test_trtllm_bench_settings_by_hand(H):
    # tensorrt_llm/bench/build/tuning.py's formula worked by hand (GiB = 2**30 bytes):
    # Llama 3.3 70B on one H200: KV a token 2 x 80 layers x 8 heads x 128 x 1 byte = 163,840 B; memory 143,771 MiB
    # = 140.401 GiB, less 70.6e9 B of FP8 weights (65.752 GiB) = 74.649 GiB; x 0.95 / (163,840 B x 4,096 tokens
    # = 0.625 GiB) = 113.5 requests -> under 256: max(64, 32 x ceil(113.5 / 32)) = 128; tokens 113.5 x (1 + 1)
    # = 227 -> max(2048, ...) = 2048
    assert H.trtllm_bench_settings("llama-3.3-70b", "h200", 1, 2048, 2048) == (128, 2048)
    # Llama 3.1 8B on one H100, 128/128: 65,536 B a token; (79.647 - 7.479) x 0.95 / (65,536 B x 256 = 0.015625
    # GiB) = 4,388 requests -> capped at 4,096 (a multiple of 256); tokens min(4,096 x 2, 32,768) = 8,192
    assert H.trtllm_bench_settings("llama-3.1-8b", "h100_sxm", 1, 128, 128) == (4096, 8192)
    # Llama 3.1 8B on one H100, 2048/128: 72.168 x 0.95 / (65,536 B x 2,176 = 0.1328 GiB) = 516.2 -> 128 x
    # ceil(516.2 / 128) = 640; tokens 516.2 x (1 + 16) = 8,775 -> 1,024 x ceil(8,775 / 1,024) = 9,216
    assert H.trtllm_bench_settings("llama-3.1-8b", "h100_sxm", 1, 2048, 128) == (640, 9216)


def test_trtllm_v10_kv_memory_is_the_fraction_of_what_the_weights_leave(H):
    import topologies as tp
    for row in H.TRTLLM_BENCH_ROWS:
        memory = tp.get_gpu(row["gpu"]).memory
        weights = H._BENCH_MODELS[row["model"]][1] / row["tp"]          # FP8: a byte a weight
        # the model's KV cache is memory_utilization x memory - weights; trtllm-bench's 0.95 x (memory - weights)
        assert row["memory_utilization"] * memory - weights == pytest.approx(0.95 * (memory - weights))
        assert (row["max_seqs"], row["token_budget"]) == H.trtllm_bench_settings(row["model"], row["gpu"], row["tp"],
                                                                                row["prompt"], row["output"])


# the v0.14.0 table's cells 4-7 (after model / ISL-OSL / TP): H200 FP8, H100 FP8, H100 FP16, A100-SXM4-80GB FP16
_V014_COLUMNS = {3: ("h200", "fp8"), 4: ("h100_sxm", "fp8"), 5: ("h100_sxm", "bf16"), 6: ("a100_sxm", "bf16")}
_V014_NAMES = {"LLaMA v3.1 405B": "llama-3.1-405b", "LLaMA v3.1 70B": "llama-3.3-70b", "LLaMA v3.1 8B": "llama-3.1-8b",
               "Mixtral 8x7B": "mixtral-8x7b"}


def test_trtllm_v014_rows_agree_with_their_printed_lines(H):
    # read the printed lines in order, carrying the model and ISL/OSL down as the table does, and rebuild every
    # non-empty cell of the four columns taken: the rows must be exactly those, in that order
    expected, model, lengths = [], None, None
    for line in H._V014:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 9, line                 # model | ISL/OSL | TP | 6 GPU columns
        model, lengths = _V014_NAMES.get(cells[0], model), cells[1] or lengths
        for col, (gpu, precision) in _V014_COLUMNS.items():
            if cells[col]:
                expected.append((model, gpu, precision, int(cells[2]), lengths, float(cells[col]), line))
    got = [(r["model"], r["gpu"], r.get("precision", "bf16"), r["tp"], f"{r['prompt']}/{r['output']}", r["value"],
            r["verbatim"]) for r in H.TRTLLM_V014_ROWS]
    assert got == expected
    assert len(H._V014) == 9 + 36 + 9 + 27          # 405B: 9 lengths at TP 8; 70B: 9 x TP 1/2/4/8; 8B: 9; Mixtral 9 x 3
    for r in H.TRTLLM_V014_ROWS:
        assert r["batch"] == _BENCH_REQUESTS[f"{r['prompt']}/{r['output']}"] and r["metric"] == "out_tok_s"
        # "If you specify FP8 quantization, the KV cache will automatically be set to FP8 as well!"
        assert r.get("kv_bytes") == (1.0 if r.get("precision") == "fp8" else None)


def test_trtllm_v014_settings_by_hand(H):
    # the earlier tuning.py: engine size = parameters / 1e9 x bytes, read as GiB. Llama 3.1 70B FP16 on two H100s,
    # 1000/1000: KV a token 2 x 80 x 8 x 128 x 2 bytes = 327,680 B; 2 x 79.647 GiB - 70.6 x 2 = 18.09; x 0.95
    # / (327,680 B x 2,000 = 0.6104 GiB) = 28.2 requests -> max(64, 32 x 1) = 64; tokens 56 -> 2,048
    assert H.trtllm_bench_settings("llama-3.3-70b", "h100_sxm", 2, 1000, 1000, weight_bytes=2.0, kv_bytes=2.0,
                                   legacy=True) == (64, 2048)
    # FP8 on two H200s: 163,840 B a token; 2 x 140.401 - 70.6 = 210.2; x 0.95 / 0.3052 GiB = 654.3 -> 128 x 6 = 768
    assert H.trtllm_bench_settings("llama-3.3-70b", "h200", 2, 1000, 1000, legacy=True) == (768, 2048)
    for r in H.TRTLLM_V014_ROWS:
        w = 1.0 if r.get("precision") == "fp8" else 2.0
        weights = H._BENCH_MODELS[r["model"]][1] * w / r["tp"]
        import topologies as tp
        memory = tp.get_gpu(r["gpu"]).memory
        # trtllm-bench throughput's default 0.90 of the memory the weights leave
        assert r["memory_utilization"] * memory - weights == pytest.approx(0.90 * (memory - weights))
