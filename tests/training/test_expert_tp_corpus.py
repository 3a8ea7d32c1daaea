"""The corpus rows whose recipe or page sets the expert layers' TP degree run with it
(benchmarks/validation/setups.py, review20 F1).

Row 371 (nemo-docs-perf-summary-25.02, Mixtral 8x22B on 256 B200, tp 2 pp 4 cp 8 ep 8 vp 14): NeMo's
B200 recipe line for that layout sets etp_size 1 (NVIDIA/NeMo scripts/performance/
recommended_model_configs/model_configs_b200.csv, 81d94d15 .. 8cfedd72). Row 374 (the GB200 run of the
same layout, 25.04): the GB200 file never had a Mixtral 8x22B line, so Megatron's default, etp = tp.
The Megatron MoE Model Zoo rows print "ETP 1" in their notes."""

import csv
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "validation"


@pytest.fixture(scope="module")
def setup_rows():
    for path in (ROOT / "benchmarks", CORPUS):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    with open(CORPUS / "training.csv", newline="", encoding="utf-8") as f:
        return importlib.import_module("setups"), list(csv.DictReader(f))


def test_the_b200_mixtral_8x22b_row_runs_its_recipe_s_expert_tp_1(setup_rows):
    S, rows = setup_rows
    row = rows[371]
    assert (row["source"], row["model"], row["tp"], row["ep"], row["cp"]) == (
        "nemo-docs-perf-summary-25.02", "mixtral-8x22b", "2", "8", "8")
    _, kw, assumed = S.training_call(row)
    assert kw["etp"] == 1
    assert any("expert TP 1" in a and "model_configs_b200.csv" in a for a in assumed)


def test_the_gb200_row_keeps_megatron_s_default(setup_rows):
    S, rows = setup_rows
    row = rows[374]
    assert (row["source"], row["model"], row["gpu"].split()[0]) == ("nemo-perf-summary-25.04", "mixtral-8x22b", "GB200")
    _, kw, _ = S.training_call(row)
    assert kw.get("etp") is None


def test_a_row_printing_etp_1_is_read(setup_rows):
    S, rows = setup_rows
    printed = [r for r in rows if "ETP 1" in r["notes"]]
    assert len(printed) == 6                           # the Megatron MoE Model Zoo's Qwen3 rows
    assert all(S._expert_tp(r) == (1, "ETP 1 as printed") for r in printed)
