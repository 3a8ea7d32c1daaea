"""Kernel times from published kernel benchmarks: GEMMs by shape and precision, flash
attention by kernel, head dimension and sequence length, memory-bound work at the GPU's
achieved HBM bandwidth, and GEMMs on a power-capped GPU.

Every constant is fitted to, or read from, the tables of :mod:`._kernel_data` (kernel
benchmarks, never a training run); ``tests/test_training_kernels.py`` refits them.

GEMM (the roofline of torchao's float8 model, ``get_individual_gemm_time_sympy``, with the
compute fraction fitted per GPU and precision): an ``m x k`` by ``k x n`` product takes

    max(2 m n k / (eta P), bytes / (beta B), t_launch)

with ``P`` the dense peak of its precision, ``eta`` (:func:`gemm_fraction`) the median of the
published large-GEMM throughputs (every dimension >= 4096: Azure's cuBLASLt tables, OpenXLA's
H100 table, the ml-engineering MAMF table) over the peak, ``bytes`` its operands (1 byte per FP8
element, 2 per BF16) and BF16 output, ``B`` the datasheet HBM bandwidth and ``beta``
(:func:`memory_fraction`) the share of it BabelStream's Triad reaches (torchao's measurement
where Azure has none), ``t_launch`` torchao's 2 us kernel launch. The efficiency therefore
rises with the arithmetic intensity of the shape and saturates at ``eta``: a tensor-parallel
slice with a small inner dimension turns memory-bound in FP8 long before it does in BF16.

Attention (flash attention, BF16 in every precision): forward and backward rates per GPU family
and kernel (``"fa3"``: FlashAttention-3 / cuDNN class, what Transformer Engine runs on Hopper and
Blackwell; ``"fa2"``: FlashAttention-2, PyTorch's SDPA flash backend), measured with the causal
mask at head dimension 128 and 8192 tokens, scaled by head dimension (FA3 paper, Figure 5) and
by sequence length as ``(1 + s0 / 8192) / (1 + s0 / s)`` with ``s0`` fitted to the only causal
sweep published (FA4 on GB200, 1k-4k tokens). FLOPs as flash-attention counts them: forward
``4 s^2 d heads`` per sequence halved by the mask, backward 2.5 x forward.
"""

from __future__ import annotations

import statistics
from functools import lru_cache

import numpy as np

from ._kernel_data import (ATTENTION_HEAD_DIM, ATTENTION_POINTS, ATTENTION_SEQ_RAMP, GEMM_POINTS, MAMF,
                           POWER_CAPPED_GEMM, STREAM_TRIAD, TORCHAO_ROOFLINE)

__all__ = ["FAMILIES", "ATTENTION_KERNELS", "gemm_fraction", "memory_fraction", "gemm_seconds_shape",
           "attention_rates", "attention_seq_factor", "attention_head_dim_factor", "memory_seconds",
           "LAUNCH_SECONDS", "check_power_cap", "kernel_family"]

FAMILIES = ("a100", "h100", "h200", "b200", "gb200")
ATTENTION_KERNELS = ("auto", "fa3", "fa2", "unfused")
#: torchao's measured kernel launch overhead on an H100 (KERNEL_LAUNCH_OVERHEAD_SEC): the
#: least time any kernel takes
LAUNCH_SECONDS = TORCHAO_ROOFLINE["launch_seconds"][0]

# Datasheet peaks the published fractions are taken over (the MAMF table's "Theory" column,
# which is the datasheet's dense figure): TFLOP/s per (family, precision)
_SPEC = {("a100", "bf16"): 312.0, ("h100", "bf16"): 989.0, ("h200", "bf16"): 989.0, ("b200", "bf16"): 2250.0,
         ("gb200", "bf16"): 2500.0, ("h100", "fp8"): 1979.0, ("h200", "fp8"): 1979.0, ("b200", "fp8"): 4500.0,
         ("gb200", "fp8"): 5000.0}
#: families measured only in another one's table: MAMF's H100 bf16 row says "H200 is the same"
_SAME_AS = {("h200", "bf16"): ("h100", "bf16")}
#: large-GEMM regime the fraction is the median over: every dimension at least this
LARGE = 4096


def kernel_family(gpu) -> str:
    """The kernel-table family of a GpuSpec (``""`` when it has none)."""
    return getattr(gpu, "family", "") or ""


def gemm_points(family: str, precision: str) -> list:
    """The published large-GEMM fractions of the peak for ``(family, precision)``: every shape of
    the shape tables with all dimensions >= 4096 and the MAMF best shape, each ``measured / spec``."""
    family, precision = _SAME_AS.get((family, precision), (family, precision))
    spec = _SPEC[(family, precision)]
    pts = [t / spec for _, f, p, m, n, k, t, _ in GEMM_POINTS
           if f == family and p == precision and min(m, n, k) >= LARGE]
    pts += [t / s for f, p, t, s, _, _ in MAMF if f == family and p == precision]
    return pts


@lru_cache(maxsize=None)
def _fitted_fraction(family: str, precision: str) -> float:
    return float(statistics.median(gemm_points(family, precision)))


def gemm_fraction(family: str, precision: str, power_cap: float | None = None, tdp: float = 0.0) -> float:
    """Fraction ``eta`` of the dense peak a large GEMM sustains on ``family`` in ``precision``:
    the median of the published large-GEMM measurements (:func:`gemm_points`). With
    ``power_cap`` (W) below the GPU's ``tdp``: linear in the cap between the fraction measured at
    a published cap (an H100 at 500 W, FBGEMM PR 2546: the median of its three shapes) and the
    uncapped one at ``tdp``; a cap outside that range, or on a family without a capped
    measurement, is a ``ValueError``.

    >>> round(gemm_fraction("h100", "bf16"), 3), round(gemm_fraction("h100", "fp8"), 3)
    (0.798, 0.689)
    >>> round(gemm_fraction("h100", "bf16", power_cap=500, tdp=700), 3)      # 575.12 / 989
    0.582
    """
    eta = _fitted_fraction(family, precision)
    if power_cap is None or power_cap >= tdp:
        return eta
    capped = {w: statistics.median(t for f, w2, p, _, _, _, t, _ in POWER_CAPPED_GEMM
                                   if f == family and p == precision and w2 == w) / _SPEC[(family, precision)]
              for f, w, p, *_ in POWER_CAPPED_GEMM if f == family and p == precision}
    if not capped:
        raise ValueError(f"power_cap: no published power-capped GEMM measurement for {family} in {precision}")
    low = min(capped)
    if power_cap < low:
        raise ValueError(f"power_cap ({power_cap:g} W) is below the lowest published cap for {family} ({low} W)")
    return capped[low] + (eta - capped[low]) * (power_cap - low) / (tdp - low)


def check_power_cap(power_cap, gpu) -> float | None:
    """``power_cap`` (W, or None) checked against the GPU: it needs a kernel family with a
    published capped measurement and a known ``tdp``; a cap at or above the TDP is no cap."""
    if power_cap is None:
        return None
    from .. import _checks
    cap = _checks.positive_number("power_cap", power_cap)
    fam = kernel_family(gpu)
    if not fam or not gpu.tdp:
        raise ValueError(f"power_cap needs a GPU with a kernel family and a TDP; {gpu.name} has family={fam!r}, "
                         f"tdp={gpu.tdp}")
    for precision in ("bf16",):
        gemm_fraction(fam, precision, cap, gpu.tdp)          # raises when not covered
    return cap


# Achieved HBM bandwidth: BabelStream Triad over the datasheet bandwidth per GPU (Azure), or
# torchao's measured fraction where Azure has none.
_DATASHEET_TBPS = {"a100": 2.039, "h100": 3.35, "h200": 4.8}
_MEM_FRACTION_BY_GPU = {
    "h100_sxm_hbm2e": TORCHAO_ROOFLINE["h100_hbm2e_mem_fraction"][0],    # Meta's H100 variant, 2.4 TB/s
    "b200": TORCHAO_ROOFLINE["blackwell_mem_fraction"][0],               # B300's measurement (HBM3e, 8 TB/s)
    "gb200": TORCHAO_ROOFLINE["blackwell_mem_fraction"][0],
}


def memory_fraction(gpu) -> float:
    """Share of the datasheet HBM bandwidth memory-bound kernels reach: BabelStream Triad on
    Azure's A100 / H100 / H200 VMs over the datasheet figure; torchao's measured 0.92 for Meta's
    HBM2e H100, its B300 measurement (0.84) for the Blackwell parts (no B200 / GB200 figure is
    published).

    >>> import topologies as tp
    >>> round(memory_fraction(tp.get_gpu("h100_sxm")), 3)          # 2.97 / 3.35
    0.887
    """
    if gpu.name in _MEM_FRACTION_BY_GPU:
        return _MEM_FRACTION_BY_GPU[gpu.name]
    fam = kernel_family(gpu)
    if fam in STREAM_TRIAD:
        return STREAM_TRIAD[fam][0] / _DATASHEET_TBPS[fam]
    if fam in ("b200", "gb200"):
        return TORCHAO_ROOFLINE["blackwell_mem_fraction"][0]
    raise ValueError(f"no achieved-bandwidth measurement for GPU {gpu.name!r} (family {fam!r})")


def memory_seconds(nbytes: float, gpu) -> float:
    """Seconds ``nbytes`` of memory-bound traffic take at the achieved HBM bandwidth (no launch
    floor: it is the sum of many kernels' traffic)."""
    return nbytes / (memory_fraction(gpu) * gpu.hbm_bandwidth)


def _peak(gpu, precision: str) -> float:
    return gpu.peak_fp8_flops if precision == "fp8" else gpu.peak_bf16_flops


def gemm_seconds_shape(m: float, n: float, k: float, gpu, precision: str, *, power_cap: float | None = None,
                       count: int = 1) -> float:
    """Seconds of ``count`` GEMMs ``(m x k) @ (k x n)`` in ``precision`` on ``gpu`` (the
    roofline of the module docstring; FP8 operands 1 byte, BF16 2, the output BF16).

    >>> import topologies as tp
    >>> h100 = tp.get_gpu("h100_sxm")
    >>> t = gemm_seconds_shape(8192, 8192, 8192, h100, "bf16")
    >>> t == 2 * 8192 ** 3 / (gemm_fraction("h100", "bf16") * 989e12)
    True
    """
    fam = kernel_family(gpu)
    eta = gemm_fraction(fam, precision, power_cap, gpu.tdp)
    operand = 1.0 if precision == "fp8" else 2.0
    flops = 2.0 * m * n * k
    nbytes = operand * (m * k + k * n) + 2.0 * m * n
    one = max(flops / (eta * _peak(gpu, precision)), memory_seconds(nbytes, gpu), LAUNCH_SECONDS)
    return count * one


# --- attention --------------------------------------------------------------------------------------

def _point(family, kernel, causal, direction, source=None):
    for src, f, kern, c, d, s, direc, t, _ in ATTENTION_POINTS:
        if f == family and kern == kernel and c == causal and direc == direction and (source in (None, src)):
            return t, d, s
    raise KeyError((family, kernel, causal, direction))


@lru_cache(maxsize=None)
def _ramp_s0(causal: bool) -> float:
    """``s0`` of ``rate(s) = r_inf / (1 + s0 / s)``, least squares on ``1 / rate`` against
    ``1 / s`` (linear in both): the causal sweep (FA4, GB200) or the non-causal one (FA3, H100)."""
    for _, _, _, c, _, pts, _ in ATTENTION_SEQ_RAMP:
        if c == causal:
            s = np.array([p[0] for p in pts], dtype=float)
            r = np.array([p[1] for p in pts], dtype=float)
            slope, intercept = np.polyfit(1.0 / s, 1.0 / r, 1)
            return float(slope / intercept)
    raise KeyError(causal)


def attention_seq_factor(tokens: float, *, causal: bool = True, reference: float = 8192.0) -> float:
    """Rate at ``tokens`` per sequence over the rate at ``reference``: ``(1 + s0 / reference) /
    (1 + s0 / tokens)``.

    >>> round(attention_seq_factor(8192), 12), round(attention_seq_factor(2048), 3)
    (1.0, 0.704)
    """
    s0 = _ramp_s0(causal)
    return (1.0 + s0 / reference) / (1.0 + s0 / tokens)


def attention_head_dim_factor(head_dim: float) -> float:
    """FA3's causal forward rate at ``head_dim`` over its rate at 128 (FA3 paper, Figure 5):
    piecewise linear between the published head dimensions 64, 128 and 256, constant beyond.

    >>> attention_head_dim_factor(128), round(attention_head_dim_factor(64), 3)
    (1.0, 0.771)
    """
    dims = sorted(ATTENTION_HEAD_DIM)
    rates = [ATTENTION_HEAD_DIM[d][0] for d in dims]
    return float(np.interp(head_dim, dims, rates) / ATTENTION_HEAD_DIM[128][0])


@lru_cache(maxsize=None)
def _reference_rates(family: str, kernel: str) -> tuple:
    """(forward, backward) FLOP/s of ``kernel`` on ``family``, causal, head dimension 128, 8192
    tokens. Measured for H100 (FA2 and FA3, flash-attention PR 1791) and B200 (FA4, PR 2280;
    the ``fa3`` class on Blackwell). Derived: H200 and GB200 take their sibling's figures (same
    SMs and clocks class; H200 differs from H100 in memory only); A100's FA2 from the FA2 paper's
    non-causal 16k peak (225 forward / 196 backward TFLOP/s), brought to causal 8k with H100 FA2's
    measured causal / non-causal ratios at 8k and the non-causal sequence ramp 16k -> 8k."""
    fam = {"h200": "h100", "gb200": "b200"}.get(family, family)
    if fam in ("h100", "b200"):
        try:
            fwd = _point(fam, kernel, True, "fwd")[0]
            bwd = _point(fam, kernel, True, "bwd")[0]
        except KeyError:
            raise ValueError(f"attention kernel {kernel!r}: no published measurement on {family}") from None
        return fwd * 1e12, bwd * 1e12
    if fam == "a100" and kernel == "fa2":
        ramp = attention_seq_factor(8192, causal=False, reference=16384)
        ratio = [_point("h100", "fa2", True, d)[0] / _point("h100", "fa2", False, d)[0] for d in ("fwd", "bwd")]
        return tuple(_point("a100", "fa2", False, d)[0] * 1e12 * ramp * r for d, r in zip(("fwd", "bwd"), ratio))
    raise ValueError(f"attention kernel {kernel!r}: no published measurement on {family} (FlashAttention-3 "
                     f"needs Hopper or Blackwell)")


def attention_rates(gpu, kernel: str, *, head_dim: float, tokens: float, power_cap: float | None = None) -> tuple:
    """(forward, backward) FLOP/s of causal flash attention with ``kernel`` (``"fa3"``,
    ``"fa2"``; ``"auto"``: ``"fa3"`` where the family has it, else ``"fa2"``) on ``gpu`` at
    ``head_dim`` and ``tokens`` keys per query block. Under ``power_cap`` both scale as the
    BF16 GEMM fraction does (attention is tensor-core bound; no capped attention measurement
    is published).

    >>> import topologies as tp
    >>> [r / 1e12 for r in attention_rates(tp.get_gpu("h100_sxm"), "fa3", head_dim=128, tokens=8192)]
    [630.0, 531.6]
    """
    fam = kernel_family(gpu)
    if kernel == "auto":
        kernel = "fa2" if fam == "a100" else "fa3"
    fwd, bwd = _reference_rates(fam, kernel)
    scale = attention_head_dim_factor(head_dim) * attention_seq_factor(tokens)
    if power_cap is not None and power_cap < gpu.tdp:
        scale *= gemm_fraction(fam, "bf16", power_cap, gpu.tdp) / gemm_fraction(fam, "bf16")
    return fwd * scale, bwd * scale
