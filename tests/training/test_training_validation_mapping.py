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
        if (row["source"], i) in setups.TRAINING_NOT_MODELLED:
            continue
        kw = _call(i)
        kinds.setdefault(row["source"], kw)
        if "a100_40gb" in row["gpu"]:
            assert kw["gpu"].name == "a100_40gb"
        if row["source"] == "trainy-whitefiber":
            assert kw["gpu"].name == "h200" and kw["fp8_param_gather"] and kw["fp8_recipe"] == "tensorwise"
    assert kinds["bigscience-bloom"]["attention"] == "unfused"
    assert kinds["llm-foundry"]["attention"] == "fa2"
    assert "attention" not in kinds["nvidia-dgxc-benchmarking"]        # Transformer Engine: the default
    # the compute model: the kernel tables (the library's default on the corpus's GPUs), or the flat 0.44
    assert _call(0)["compute_efficiency"] is None and _call(0, "flat")["compute_efficiency"] == 0.44
    with pytest.raises(ValueError, match="compute must be one of"):
        _call(0, "roofline")


def test_megatron_bridge_rows_map_as_the_page_prints_them():
    """MXFP8 runs as the library's fp8; FSDP > 0 is zero 3; an 8-GPU DGX-GB200 run is 2 trays
    of one rack; GB300 / B300 GPUs, NVFP4 and the MoE shapes ModelSpec cannot hold are listed
    as not modelled with a reason, never run."""
    rows = _rows()
    mb = [(i, r) for i, r in enumerate(rows) if r["source"] == "megatron-bridge-perf-summary"]
    assert len(mb) == 94
    for i, r in mb:
        reason = setups.TRAINING_NOT_MODELLED.get((r["source"], i))
        gpu, prec = r["gpu"], r["precision"]
        moe = r["model"].startswith(("deepseek", "qwen3", "gpt-oss"))
        if "GB300" in gpu or "B300" in gpu or prec == "NVFP4" or moe:
            assert reason, (i, r["model"], gpu, prec)
            continue
        assert reason is None, (i, reason)
        cluster, kw, assumed = setups.training_call(r)
        assert kw["precision"] == ("fp8" if prec in ("MXFP8", "fp8", "fp8 (FP8-CS)") else "bf16")
        assert ("MXFP8" in " ".join(assumed)) == (prec == "MXFP8")
        assert kw.get("zero") == (3 if r["zero"] == "3" else None)
        if "GB200" in gpu:
            assert cluster == ("dgx_gb200_nvl72_8" if r["gpus"] == "8" else "dgx_gb200_nvl72")
