"""The Blackwell GEMM curves are levelled by one method: each passes through its own MAMF point
(ml-engineering's table, typed in here from the README at 744d01e1) times what Transformer
Engine's GEMMs sustain at training shapes on Blackwell against MAMF (its B300 benchmark, typed in
from docs/examples/gemm_profiling at 8f2e6357), with the shape of Azure's GB200 FP8 table.
Before, the GB200 FP8 curve took Azure's level (2.8 PFLOP/s), 25 % under its MAMF point and
0.78x the B200's FP8 curve, while the published runs of one layout on both GPUs are 1.01-1.05x;
the other three took MAMF's burst level (flowsolver/training/_kernels.py, ``_SHAPE_FROM``,
``sustained_fraction``)."""

import math

import pytest

import topologies as tp
from flowsolver.training import _kernels as K

GB200, B200 = tp.get_gpu("gb200"), tp.get_gpu("b200")

# ml-engineering compute/accelerator/README.md at 744d01e1, "Maximum Achievable Matmul FLOPS
# comparison table": (family, precision) -> (MAMF TFLOP/s, best shape m x n x k)
MAMF_ROWS = {("b200", "bf16"): (1745.0, (1792, 16128, 3072)), ("gb200", "bf16"): (1822.0, (4096, 9728, 2048)),
             ("b200", "fp8"): (3432.5, (15360, 4096, 3072)), ("gb200", "fp8"): (3615.6, (19456, 5120, 1536))}
MAMF_B300 = {"bf16": 1769.0, "fp8": 3353.3}
# Transformer Engine's B300 benchmark, pre-quantized, ms per layer (BF16, FP8 current scaling) of
# hidden 4096, FFN 16384, M = 15872: QKV 4096 -> 12288, proj 4096 -> 4096, FC1 4096 -> 16384,
# FC2 16384 -> 4096, each forward, data gradient and weight gradient
TE_B300_MS = {"bf16": 13.102, "fp8": 6.812}
LAYER_FLOPS = 3 * 2 * 15872 * (4096 * 12288 + 4096 * 4096 + 4096 * 16384 + 16384 * 4096)


def _sustained(precision):
    return LAYER_FLOPS / (TE_B300_MS[precision] * 1e-3) / 1e12 / MAMF_B300[precision]


def _tflops(m, n, k, gpu, precision):
    return 2 * m * n * k / K.gemm_seconds_shape(m, n, k, gpu, precision) / 1e12


def test_the_sustained_fraction_by_hand():
    # 1.917e13 FLOPs a layer: 1463 TFLOP/s BF16 and 2814 FP8 against MAMF's 1769.0 and 3353.3
    assert LAYER_FLOPS == pytest.approx(1.9174e13, rel=1e-4)
    for precision, expected in (("bf16", 0.827), ("fp8", 0.839)):
        assert K.sustained_fraction(precision) == pytest.approx(_sustained(precision), rel=1e-12)
        assert round(_sustained(precision), 3) == expected


@pytest.mark.parametrize("family,precision", sorted(MAMF_ROWS))
def test_every_blackwell_curve_is_its_mamf_point_times_the_sustained_fraction(family, precision):
    # the curve at the GPU's own achieved bandwidth, at MAMF's best shape: MAMF's time with its
    # compute part (all but the launch-and-tail t0, which the fraction does not scale) divided by
    # the sustained fraction; eta's grid is 0.005, so within 0.005 / 0.72 (0.7 %). The GB200 FP8
    # curve was Azure's level, 25 % under its MAMF point, the other three at their MAMF points
    tflops, (m, n, k) = MAMF_ROWS[(family, precision)]
    gpu = {"b200": B200, "gb200": GB200}[family]
    t0 = K.gemm_curve(family, precision)[2]
    mamf_seconds = 2 * m * n * k / (tflops * 1e12)
    expected = (mamf_seconds - t0) / _sustained(precision) + t0
    assert K.gemm_seconds_shape(m, n, k, gpu, precision) == pytest.approx(expected, rel=0.007)


def test_the_four_blackwell_curves_share_one_shape_from_azures_gb200_table():
    shapes = {K.gemm_curve(f, p)[1:] for f, p in MAMF_ROWS}
    assert shapes == {K.fit_gemm_curve("gb200", "fp8", with_mamf=False)[1:]}


def test_a_gb200_runs_fp8_gemms_at_least_as_fast_as_a_b200_and_twice_its_bf16():
    # one silicon: GB200's dense peaks are 5000 / 2500 TFLOP/s against B200's 4500 / 2250 (the
    # MAMF table's Theory column), so at one shape a GB200 is never the slower; MAMF's own ratios:
    # GB200 / B200 FP8 3615.6 / 3432.5 = 1.053, GB200 FP8 / BF16 3615.6 / 1822.0 = 1.984 (and
    # Transformer Engine's B300 FP8 / BF16 13.102 / 6.812 = 1.923)
    for m, n, k in ((8192, 8192, 8192), (16384, 28672, 8192), (16384, 8192, 28672), (8192, 1280, 8192)):
        gb_fp8, b_fp8 = _tflops(m, n, k, GB200, "fp8"), _tflops(m, n, k, B200, "fp8")
        gb_bf16 = _tflops(m, n, k, GB200, "bf16")
        assert 1.0 <= gb_fp8 / b_fp8 <= 5000 / 4500 + 0.01, (m, n, k)
        assert gb_fp8 / gb_bf16 == pytest.approx(3615.6 / 1822.0, rel=0.05), (m, n, k)


def test_a_large_gb200_fp8_gemm_by_hand():
    # 16384^3 on a GB200: the curve's saturation eta x 5000 TFLOP/s, the occupancy
    # 1 - exp(-16384^2 / (c 148)) ~ 1, plus t0; about 3.2 PFLOP/s, not Azure's 2819.5 nor MAMF's
    # burst 3615.6 x (its curve's 1.065 from its shape to saturation)
    eta, c, t0 = K.gemm_curve("gb200", "fp8")
    flops = 2 * 16384 ** 3
    by_hand = flops / (eta * 5000e12 * (1 - math.exp(-16384 ** 2 / (c * 148)))) + t0
    assert K.gemm_seconds_shape(16384, 16384, 16384, GB200, "fp8") == pytest.approx(by_hand, rel=1e-12)
    assert 3615.6 * _sustained("fp8") < flops / by_hand / 1e12 < 3615.6


def test_the_sustained_table_figures_are_in_their_verbatim_lines():
    from flowsolver.training import _kernel_data as D

    t = D.SUSTAINED_GEMM
    assert "15,872" in t["tokens"][1] and t["tokens"][0] == 15872
    for k, n in t["shapes"]:
        assert f"15872x{k}x{n}" in t["shapes_verbatim"]
    for precision in ("bf16", "fp8"):
        assert str(t[precision][0]) in t[precision][1].split()
        mamf, line = t["mamf_b300"][precision]
        assert str(mamf) in line and "B300" in line
    assert "te-gemm-profiling" in D.SOURCES
