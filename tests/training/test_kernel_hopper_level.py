"""Transformer Engine's GEMM benchmark on Hopper against the library's Hopper curves.

TE's gemm_profiling page (NVIDIA/TransformerEngine 8f2e6357, docs/examples/gemm_profiling/
gemm_profiling.rst, typed in here) times one layer's 12 GEMMs on an H200 NVL, pre-quantized:
BF16 31.968 ms, FP8 current scaling 16.785 ms. The NVL is the H100 / H200 SXM's die (132 SMs) at
lower clocks and 600 W; its dense peaks are the product page's "with sparsity" 1671 / 3341
TFLOP/s halved. In FP8 the library's curves (Azure's sustained cuBLASLt tables) give the NVL's
share of its peak on these shapes within 1.5 %. In BF16 they do not (0.818 against 0.718):
levelling the Hopper BF16 curve on the NVL's share (review20 F2) was tried and not kept, since it
worsened the corpus (held out 7.0 -> 9.1 %) and overstated the published FP8 / BF16 speed-ups of
identical H100 jobs by 8 % (flowsolver/training/_kernels.py, the comment above ``_SAME_AS``; the
change is /work/notes/fix21b_f2_f3_hopper_bf16_and_blackwell_level.patch)."""

import math

import pytest

import topologies as tp
from flowsolver.training import _kernels as K

H100, H200 = tp.get_gpu("h100_sxm"), tp.get_gpu("h200")
M = 15872
# hidden 4096, FFN 16384: QKV 4096 -> 12288, proj 4096 -> 4096, FC1 4096 -> 16384, FC2 16384 -> 4096;
# forward (M x k by k x n), data gradient (M x n by n x k), weight gradient (k x M by M x n)
LINEARS = ((4096, 12288), (4096, 4096), (4096, 16384), (16384, 4096))
SHAPES = [s for k, n in LINEARS for s in ((M, n, k), (M, k, n), (k, n, M))]
LAYER_FLOPS = sum(2 * m * n * k for m, n, k in SHAPES)
NVL_MS = {"bf16": 31.968, "fp8": 16.785}
NVL_DENSE = {"bf16": 1671 / 2, "fp8": 3341 / 2}


def _nvl_share(precision):
    return LAYER_FLOPS / (NVL_MS[precision] * 1e-3) / 1e12 / NVL_DENSE[precision]


def _layer_tflops(gpu, precision):
    return LAYER_FLOPS / sum(K.gemm_seconds_shape(m, n, k, gpu, precision) for m, n, k in SHAPES) / 1e12


def test_the_shapes_and_shares_by_hand():
    # 1.917e13 FLOPs: 599.7 TFLOP/s BF16 (0.718 of 835.5), 1142.3 FP8 (0.684 of 1670.5)
    assert len(SHAPES) == 12 and LAYER_FLOPS == pytest.approx(1.9174e13, rel=1e-4)
    assert round(_nvl_share("bf16"), 3) == 0.718 and round(_nvl_share("fp8"), 3) == 0.684


@pytest.mark.parametrize("gpu,family", [(H100, "h100"), (H200, "h200")], ids=["h100", "h200"])
def test_hopper_fp8_from_azure_s_sustained_tables_gives_the_nvl_s_share(gpu, family):
    # Hopper FP8 is its own fit (Azure's cuBLASLt tables, 10,000 warm-up calls, and MAMF's point;
    # nothing from TE) and lands on the NVL's FP8 share (0.684) within 1.5 %: 0.691 (H100), 0.677
    # (H200)
    assert K.gemm_curve(family, "fp8") == K.fit_gemm_curve(family, "fp8")
    assert _layer_tflops(gpu, "fp8") / 1979 == pytest.approx(_nvl_share("fp8"), rel=0.015)


def test_hopper_bf16_stays_at_its_fit_above_the_nvl_s_share():
    # what review20 F2 found and this session left (see the module docstring): 0.818 of 989 on
    # TE's shapes, 14 % above the NVL's 0.718
    assert K.gemm_curve("h100", "bf16") == K.fit_gemm_curve("h100", "bf16") == K.gemm_curve("h200", "bf16")
    assert _layer_tflops(H100, "bf16") / 989 / _nvl_share("bf16") == pytest.approx(1.14, abs=0.01)


def test_the_h200_fp8_curve_s_level_is_the_nvl_s_by_hand():
    # every one of the 12 GEMMs is compute-bound on the H200 FP8 curve's shape, so the NVL's summed
    # time is sum(2 m n k / (eta P q)) + 12 t0 and its level eta = sum(2 m n k / (P q)) / (T - 12 t0):
    # 0.687 of the NVL's 1670.5 TFLOP/s, the H200 curve's own level (Azure's table) 0.68
    eta, c, t0 = K.gemm_curve("h200", "fp8")
    peak = NVL_DENSE["fp8"] * 1e12
    for m, n, k in SHAPES:
        q = 1 - math.exp(-m * n / (c * 132))
        assert 2 * m * n * k / (0.7 * peak * q) > (m * k + k * n + 2 * m * n) / 4.15e12
    by_hand = sum(2 * m * n * k / (peak * (1 - math.exp(-m * n / (c * 132))))
                  for m, n, k in SHAPES) / (NVL_MS["fp8"] * 1e-3 - 12 * t0)
    assert round(by_hand, 3) == 0.687
    assert eta == pytest.approx(by_hand, rel=0.015)


def test_the_h200_nvl_figures_are_in_their_verbatim_lines():
    from flowsolver.training import _kernel_data as D

    t = D.SUSTAINED_GEMM["h200_nvl"]
    for precision in ("bf16", "fp8"):
        assert str(t[precision][0]) in t[precision][1].split()
        assert t[precision][0] == NVL_MS[precision]
        peak, line = t["peak_sparse"][precision]
        assert f"{peak:,.0f}" in line and peak / 2 == NVL_DENSE[precision]
    assert "nvidia-h200" in D.SOURCES and "sparsity" in D.SOURCES["nvidia-h200"]
