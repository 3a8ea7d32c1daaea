"""The training rows published in TFLOP/s with the publisher's own FLOP count
(benchmarks/validation/setups.py TRAINING_FLOP_COUNTS) are compared as tokens/s by that count
(benchmarks/validate.py compared_measurement), and a row whose printed batch cannot split over
its data-parallel ranks is refused with its reason, not crashed on. No solve.

The formulas are typed here from their sources, not read from setups.py: Megatron-LM r0.8.0
num_floating_point_operations (GELU MLP, MHA: 12 L h^2 (2 + s/h + 4 + V / (2 L h)) per token),
Narayanan et al. 2021 eq. 3 (96 L h^2 (1 + s / (6 h) + V / (16 L h)) per token), NeMo's count
before its causal discount (12 L h^2 (1 + G/H + s/h + 1.5 F/h + V / (2 L h)) per token)."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT / "benchmarks", ROOT / "benchmarks" / "validation"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
setups = pytest.importorskip("setups")
validate = pytest.importorskip("validate")


def _rows():
    with open(ROOT / "benchmarks" / "validation" / "training.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _aggregate_agrees(r):
    """The table's aggregate column (PFLOP/s, its last) = per-GPU TFLOP/s x GPUs, to the rounding
    of the two printed figures: the transcription of the image's row holds together."""
    aggregate = float(r["verbatim"].strip(" |").split("|")[-1])
    half_unit = 0.05 if "." in r["value"] else 0.5               # per GPU printed to 0.1 or to 1
    return abs(aggregate - float(r["value"]) * int(r["gpus"]) / 1000) <= half_unit * int(r["gpus"]) / 1000 + 0.051


def _of(source):
    return [(i, r) for i, r in enumerate(_rows()) if r["source"] == source]


def test_megatron_lm_2024_rows_by_megatron_lm_count():
    rows = _of("megatron-lm-readme-h100")
    assert len(rows) == 9
    for _, r in rows:
        L, h, s, V = 24, 2048, 4096, 131072
        if r["model"] == "megatron-gpt-1.7b":             # the README's first row, by hand
            metric, tokens = validate.compared_measurement(r)
            fpt = 12 * L * h * h * (2 + s / h + 4 + V / (2 * L * h))
            assert fpt == pytest.approx(11_274_289_152, rel=1e-12)
            assert metric == "tokens_per_s_per_gpu" and tokens == pytest.approx(408.8e12 / fpt, rel=1e-12)
        assert _aggregate_agrees(r), r["verbatim"]


def test_megatron_lm_2021_rows_by_narayanan_et_al():
    rows = _of("megatron-lm-readme-a100-2021")
    assert len(rows) == 10
    for _, r in rows:
        L, h, s, V = int(r["layers"]), int(r["hidden"]), 2048, 51200
        metric, tokens = validate.compared_measurement(r)
        fpt = 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
        assert metric == "tokens_per_s_per_gpu" and tokens == pytest.approx(float(r["value"]) * 1e12 / fpt, rel=1e-12)
        assert _aggregate_agrees(r), r["verbatim"]


def test_nemo_long_sequence_rows_by_nemo_count():
    for _, r in _of("nemo-long-sequence"):
        L, h, H, G, F, V = ((32, 4096, 32, 32, 11008, 32000) if r["model"] == "llama2-7b"
                            else (32, 4096, 32, 8, 14336, 128256))
        s = int(r["seq_len"])
        fpt = 12 * L * h * h * (1 + G / H + s / h + 1.5 * F / h + V / (2 * L * h))
        assert validate.compared_measurement(r) == ("tokens_per_s_per_gpu",
                                                    pytest.approx(float(r["value"]) * 1e12 / fpt, rel=1e-12))


def test_other_rows_keep_their_printed_metric():
    for r in _rows():
        if r["source"] not in setups.TRAINING_FLOP_COUNTS:
            assert validate.compared_measurement(r) == (r["metric"], float(r["value"]))
    # the one TFLOP/s row of a source without its own count stays a duplicate of its step time
    (oci,) = [r for _, r in _of("oci-gpu-quickstarts") if r["metric"] == "tflops_per_gpu"]
    assert validate.compared_measurement(oci)[0] == "tflops_per_gpu"


def test_a_batch_that_cannot_split_is_refused_with_its_reason():
    """NeMo's B200 long-sequence table at 512K tokens: 512 GPUs, TP 4 x CP 8 (dp 16 at the printed
    GPU count), global batch 8: 8 sequences cannot fill 16 ranks."""
    (i, r), = [(i, r) for i, r in _of("nemo-long-sequence") if r["seq_len"] == "524288" and "B200" in r["gpu"]]
    with pytest.raises(ValueError, match=r"global_batch 8 .* not a positive multiple of dp x micro_batch = 16 x 1"):
        setups.training_call(r)
    assert "global batch 8" in setups.TRAINING_NOT_MODELLED[(r["source"], i)]
    pt = validate.run_training(r, i)
    assert pt["status"] == "not_modelled" and "global batch 8" in pt["reason"]
