"""How the validation corpus' training rows reach training_step (benchmarks/validation/
setups.py): the framework facts each source states, passed as the new options; no solve."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))
setups = pytest.importorskip("setups")


def _rows():
    with open(ROOT / "benchmarks" / "validation" / "training.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _call(i, compute="kernels"):
    return setups.training_call(_rows()[i], compute)[1]


def test_torchtitan_rows_carry_their_stack():
    rows = _rows()
    for i, row in enumerate(rows):
        if row["source"] != "torchtitan":
            continue
        kw = _call(i)
        # FSDP2 reducing in fp32, SDPA's FlashAttention-2, Grand Teton's 500 W HBM2e H100s
        assert (kw["zero"], kw["attention"], kw["reduce_dtype"], kw["power_cap"]) == (3, "fa2", "fp32", 500.0)
        assert kw["gpu"].name == "h100_sxm_hbm2e"
        if kw["precision"] == "fp8":
            assert kw["fp8_recipe"] == ("rowwise" if "rowwise" in row["precision"] else "tensorwise")
        if "async" in row["framework"].lower():
            assert kw["tp_overlap_impl"] == "async"


def test_other_sources():
    rows = _rows()
    kinds = {}
    for i, row in enumerate(rows):
        kw = _call(i)
        kinds.setdefault(row["source"], kw)
        if "a100_40gb" in row["gpu"]:
            assert kw["gpu"].name == "a100_40gb"
        if row["source"] == "trainy-whitefiber":
            assert kw["gpu"].name == "h200" and kw["fp8_param_gather"] and kw["fp8_recipe"] == "tensorwise"
    assert kinds["bigscience-bloom"]["attention"] == "unfused"
    assert kinds["llm-foundry"]["attention"] == "fa2"
    assert "attention" not in kinds["nvidia-dgxc-benchmarking"]        # Transformer Engine: the default
    # the compute model: the kernel tables (the library's default on the corpus's GPUs), or the flat 0.46
    assert _call(0)["compute_efficiency"] is None and _call(0, "flat")["compute_efficiency"] == 0.46
    with pytest.raises(ValueError, match="compute must be one of"):
        _call(0, "roofline")
