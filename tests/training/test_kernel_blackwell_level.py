"""The Blackwell GEMM curves are levelled by one method: each passes through its own MAMF point
(ml-engineering's table, typed in here from the README at 744d01e1), with the shape of Azure's
GB200 FP8 table. Before, the GB200 FP8 curve took Azure's level (2.8 PFLOP/s), 25 % under its
MAMF point and 0.78x the B200's FP8 curve, while the published runs of one layout on both GPUs
are 1.01-1.05x (flowsolver/training/_kernels.py, ``_SHAPE_FROM``)."""

import math

import pytest

import topologies as tp
from flowsolver.training import _kernels as K

GB200, B200 = tp.get_gpu("gb200"), tp.get_gpu("b200")

# ml-engineering compute/accelerator/README.md at 744d01e1, "Maximum Achievable Matmul FLOPS
# comparison table": (family, precision) -> (MAMF TFLOP/s, best shape m x n x k)
MAMF_ROWS = {("b200", "bf16"): (1745.0, (1792, 16128, 3072)), ("gb200", "bf16"): (1822.0, (4096, 9728, 2048)),
             ("b200", "fp8"): (3432.5, (15360, 4096, 3072)), ("gb200", "fp8"): (3615.6, (19456, 5120, 1536))}


def _tflops(m, n, k, gpu, precision):
    return 2 * m * n * k / K.gemm_seconds_shape(m, n, k, gpu, precision) / 1e12


@pytest.mark.parametrize("family,precision", sorted(MAMF_ROWS))
def test_every_blackwell_curve_passes_through_its_own_mamf_point(family, precision):
    # the curve at the GPU's own achieved bandwidth, at MAMF's best shape; eta's grid is 0.005, so
    # within 0.005 / 0.72 (0.7 %) of the printed figure; the GB200 FP8 curve was 25 % under it
    tflops, (m, n, k) = MAMF_ROWS[(family, precision)]
    gpu = {"b200": B200, "gb200": GB200}[family]
    assert _tflops(m, n, k, gpu, precision) == pytest.approx(tflops, rel=0.007)


def test_the_four_blackwell_curves_share_one_shape_from_azures_gb200_table():
    shapes = {K.gemm_curve(f, p)[1:] for f, p in MAMF_ROWS}
    assert shapes == {K.fit_gemm_curve("gb200", "fp8", with_mamf=False)[1:]}


def test_a_gb200_runs_fp8_gemms_at_least_as_fast_as_a_b200_and_twice_its_bf16():
    # one silicon: GB200's dense peaks are 5000 / 2500 TFLOP/s against B200's 4500 / 2250 (the
    # MAMF table's Theory column), so at one shape a GB200 is never the slower; MAMF's own ratios:
    # GB200 / B200 FP8 3615.6 / 3432.5 = 1.053, GB200 FP8 / BF16 3615.6 / 1822.0 = 1.984
    for m, n, k in ((8192, 8192, 8192), (16384, 28672, 8192), (16384, 8192, 28672), (8192, 1280, 8192)):
        gb_fp8, b_fp8 = _tflops(m, n, k, GB200, "fp8"), _tflops(m, n, k, B200, "fp8")
        gb_bf16 = _tflops(m, n, k, GB200, "bf16")
        assert 1.0 <= gb_fp8 / b_fp8 <= 5000 / 4500 + 0.01, (m, n, k)
        assert gb_fp8 / gb_bf16 == pytest.approx(3615.6 / 1822.0, rel=0.05), (m, n, k)


def test_a_large_gb200_fp8_gemm_by_hand():
    # 16384^3 on a GB200: the curve's saturation eta (its MAMF point's) x 5000 TFLOP/s, the
    # occupancy 1 - exp(-16384^2 / (c 148)) ~ 1, plus t0; not Azure's 2819.5
    eta, c, t0 = K.gemm_curve("gb200", "fp8")
    flops = 2 * 16384 ** 3
    by_hand = flops / (eta * 5000e12 * (1 - math.exp(-16384 ** 2 / (c * 148)))) + t0
    assert K.gemm_seconds_shape(16384, 16384, 16384, GB200, "fp8") == pytest.approx(by_hand, rel=1e-12)
    assert flops / by_hand / 1e12 > 3615.6 * 0.99
