"""Kernel times from published kernel benchmarks: GEMMs by shape and precision, flash
attention by kernel, head dimension and sequence length, memory-bound work at the GPU's
achieved HBM bandwidth, and GEMMs on a power-capped GPU.

Every constant is fitted to, or read from, the tables of :mod:`._kernel_data` (kernel
benchmarks, never a training run); ``tests/training/test_training_kernels.py`` refits them.

GEMM (torchao's float8 roofline, ``get_individual_gemm_time_sympy``, with an occupancy term
and its three constants fitted per GPU family and precision): an ``m x k`` by ``k x n``
product takes

    max(2 m n k / (eta P q), bytes / (beta B)) + t0,   q = max(1 - exp(-m n / (c SMs)), 1 / SMs)

with ``P`` the dense peak of its precision, ``eta`` the fraction of it large GEMMs sustain,
``q`` the share of the SMs an ``m x n`` output keeps busy (``c``: the output elements one SM
takes, in effect; never less than one SM), ``t0`` a fixed launch-and-tail time, ``bytes`` its operands (1 byte per
FP8 element, 2 per BF16) and BF16 output, ``B`` the datasheet HBM bandwidth and ``beta``
(:func:`memory_fraction`) the share of it BabelStream's Triad reaches (torchao's measurement
where Azure has none). ``(eta, c, t0)`` minimise the summed absolute log error over the
published table of that GPU and precision (Azure's cuBLASLt tables, OpenXLA's H100 table, the
ml-engineering MAMF best shape; :func:`fit_gemm_curve`, recomputed on first use, a grid of 0.005
in ``eta``); on Blackwell (B200, GB200, BF16 and FP8) ``c`` and ``t0`` come from Azure's GB200 FP8
shape rows and ``eta`` from each curve's own MAMF point (one method across the four: see
``_SHAPE_FROM``) times the share of it Transformer Engine's GEMMs sustain at training shapes on
Blackwell (:func:`sustained_fraction`, 0.83 BF16 / 0.84 FP8: MAMF is a burst figure there). The efficiency therefore rises with the output size and the arithmetic intensity
and saturates at ``eta``: a tensor-parallel slice with a small inner dimension turns
memory-bound in FP8 long before it does in BF16.

Attention: :mod:`._kernel_attention` (its names are re-exported here; :func:`attention_rates` scales its
rates under a power cap as the BF16 GEMM fraction does).
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

import numpy as np

from ._kernel_attention import ATTENTION_KERNELS, attention_head_dim_factor, attention_seq_factor, reference_rates
from ._kernel_data import GEMM_POINTS, MAMF, POWER_CAPPED_GEMM, STREAM_TRIAD, SUSTAINED_GEMM, TORCHAO_ROOFLINE

__all__ = ["FAMILIES", "ATTENTION_KERNELS", "gemm_curve", "SMS", "gemm_fraction", "fit_gemm_curve", "gemm_table",
           "sustained_fraction",
           "memory_fraction", "gemm_seconds_shape",
           "attention_rates", "attention_seq_factor", "attention_head_dim_factor", "memory_seconds",
           "LAUNCH_SECONDS", "check_power_cap", "kernel_family", "kernel_tables_missing"]

FAMILIES = ("a100", "h100", "h200", "b200", "gb200")
#: torchao's measured kernel launch overhead on an H100 (KERNEL_LAUNCH_OVERHEAD_SEC): the
#: least time any kernel takes
LAUNCH_SECONDS = TORCHAO_ROOFLINE["launch_seconds"][0]

# Datasheet peaks the published fractions are taken over (the MAMF table's "Theory" column,
# which is the datasheet's dense figure): TFLOP/s per (family, precision)
_SPEC = {("a100", "bf16"): 312.0, ("h100", "bf16"): 989.0, ("h200", "bf16"): 989.0, ("b200", "bf16"): 2250.0,
         ("gb200", "bf16"): 2500.0, ("h100", "fp8"): 1979.0, ("h200", "fp8"): 1979.0, ("b200", "fp8"): 4500.0,
         ("gb200", "fp8"): 5000.0}
#: streaming multiprocessors: "132 SMs for H100 SXM and 108 SMs for A100 SXM" (ml-engineering,
#: compute/accelerator/README.md, 744d01e1); "a B200 SKU also reads 148" (ml-engineering,
#: training/performance/README.md, the same commit); H200 is the H100's die, GB200's GPUs B200's.
SMS = {"a100": 108, "h100": 132, "h200": 132, "b200": 148, "gb200": 148}
#: the achieved HBM bandwidth the shape tables were measured with (bytes/s): BabelStream Triad on
#: the same Azure VMs; GB200 (no Triad published) at the Blackwell fraction below of 8 TB/s
_TABLE_BANDWIDTH = {"a100": STREAM_TRIAD["a100"][0] * 1e12, "h100": STREAM_TRIAD["h100"][0] * 1e12,
                    "h200": STREAM_TRIAD["h200"][0] * 1e12,
                    "gb200": TORCHAO_ROOFLINE["blackwell_mem_fraction"][0] * 8.0e12}
#: MAMF's H100 bf16 row says "H200 is the same": the H100 curve. It keeps the level of its fit
#: (OpenXLA's H100 table and MAMF's point: 0.82 of the peak, 811 TFLOP/s), though MAMF is a burst
#: figure and Transformer Engine's H200 NVL run of its 12 training GEMMs gives 0.718 of that card's
#: dense peak (``SUSTAINED_GEMM["h200_nvl"]``). Taken as the SXM's level (tried 2026-12-07) it moved
#: the corpus's held-out error from 7.0 to 9.1 % and the modelled FP8 / BF16 speed-up of the 55
#: identical published H100 job pairs from 0.99x to 1.08x the published one. The NVL runs at 600 W,
#: and power lifts BF16 GEMMs more than FP8 ones on an H100 (FBGEMM at 500 W: BF16 0.59 of the peak,
#: FP8 0.57; at 700 W MAMF's BF16 0.80, Azure's sustained FP8 0.695): the NVL's FP8 share matches
#: the SXM's sustained curve within 1 % (tests/training/test_kernel_hopper_level.py), its BF16 share
#: need not.
_SAME_AS = {("h200", "bf16"): ("h100", "bf16")}
#: Blackwell: every curve takes its shape (c, t0) from the one Blackwell shape sweep published,
#: Azure's GB200 FP8 cuBLASLt table (its shape rows alone), and its level (eta) from its own
#: MAMF point: ml-engineering measured B200 and GB200, BF16 and FP8, with one method (torch.mm /
#: torch._scaled_mm with per-tensor scales, the best of a shape sweep, CUDA 12.8-13.0), what the
#: training rows run (Transformer Engine's per-tensor FP8 on cuBLAS, NeMo 25.04+ / Megatron-Bridge
#: 25.09+ containers). Azure's level is not used, GB200 FP8 included: one run on CUDA 12.8 and
#: driver 570.133.20 (the first to support Blackwell), cuBLASLt's first heuristic algorithm with
#: its workspace held to 2 m n bytes (superbenchmark's cublaslt_gemm, Azure's GEMMCublasLt.py),
#: 2781.5-2819.5 TFLOP/s at 8k-16k cubes, 56 % of the 5 PFLOP/s dense peak where MAMF reaches
#: 72.3 % (Azure's later run of the page, github.com/Azure/AI-benchmarking-guide/blob/
#: 2a370be6de9586d365feed77e014a73f25198f4d/Azure_Results/ND_GB200_v6_results.md: 2876.6-2906.9,
#: 58 %, with FP4 at 7627.6 of 10,000, 76 %), and it has no B200 or BF16 row to put the other
#: three curves on the same footing:
#: taking it made a GB200 run FP8 GEMMs at 0.78x a B200's (2.8 against 3.6 PFLOP/s) where the
#: published runs of one layout on both are 1.01-1.05x (Megatron-Bridge 25.09 / 25.11, Llama 3 8B).
_SHAPE_FROM = {("b200", "bf16"): ("gb200", "fp8"), ("b200", "fp8"): ("gb200", "fp8"),
               ("gb200", "bf16"): ("gb200", "fp8"), ("gb200", "fp8"): ("gb200", "fp8")}


def sustained_fraction(precision: str) -> float:
    """What a Blackwell GPU sustains in training's GEMMs over its MAMF figure, by precision:
    Transformer Engine's B300 benchmark of a layer's 12 GEMMs at training shapes (back to back,
    inputs pre-quantized; ``_kernel_data.SUSTAINED_GEMM``) over MAMF's B300 row. MAMF times each
    call after a 256 MiB cache flush and an output rewrite and keeps the best shape of a sweep:
    on Hopper the sustained tables (Azure's) and MAMF agree within 2-6 %, on Blackwell this is
    0.83 (BF16) and 0.84 (FP8). B300 has B200's SMs and BF16 / FP8 dense peaks; the fraction is
    applied to B200 and GB200, whose own sustained figures at training shapes are not published.
    Taken point to point and applied to the asymptote, it leaves the B200 curves 3.2 % (BF16) /
    6.4 % (FP8) above TE's own figures on TE's own shapes (review20 F3); taken curve to curve (0.815
    / 0.794, tried 2026-12-07) the B200 rows' error fell (4.3 -> 2.9 %), the GB200 rows' rose (5.6 ->
    7.4 %), and the corpus's held-out error went 7.0 -> 7.3 %: not taken.

    >>> round(sustained_fraction("bf16"), 3), round(sustained_fraction("fp8"), 3)
    (0.827, 0.839)
    """
    m = SUSTAINED_GEMM["tokens"][0]
    flops = 3 * 2.0 * m * sum(k * n for k, n in SUSTAINED_GEMM["shapes"])
    tflops = flops / (SUSTAINED_GEMM[precision][0] * 1e-3) / 1e12
    return tflops / SUSTAINED_GEMM["mamf_b300"][precision][0]
#: the fit's grid: eta in steps of 0.005, the occupancy tile area c in powers of 2, t0 in us
_ETA_GRID = np.round(np.arange(0.50, 0.95, 0.005), 3)
_C_GRID = 2.0 ** np.arange(10, 18)
_T0_GRID = np.array([0.0, 1, 2, 3, 4, 5, 6, 8]) * 1e-6


def kernel_family(gpu) -> str:
    """The kernel-table family of a GpuSpec (``""`` when it has none)."""
    return getattr(gpu, "family", "") or ""


def kernel_tables_missing(gpu, precision: str | None = None) -> str:
    """Why the kernel tables cannot time ``gpu`` (``""`` when they can): no ``family``, a family
    the tables do not hold, no HBM bandwidth (the memory-bound work's rate), or, where
    ``precision`` is given, no GEMM table of that precision for the family.

    >>> import topologies as tp
    >>> kernel_tables_missing(tp.get_gpu("h100_sxm")), kernel_tables_missing(tp.get_gpu("h100_pcie"))
    ('', 'has no kernel family (family= one of a100, h100, h200, b200, gb200)')
    """
    family = kernel_family(gpu)
    if not family:
        return f"has no kernel family (family= one of {', '.join(SMS)})"
    if family not in SMS:
        return f"has family {family!r}, which the kernel tables do not hold (family= one of {', '.join(SMS)})"
    if not getattr(gpu, "hbm_bandwidth", 0) > 0:
        return "has no hbm_bandwidth (bytes/s; 0: unknown), which the kernel tables time memory-bound work at"
    if precision is not None and (family, precision) not in _SPEC:
        return f"has no {precision} GEMM table (family {family!r})"
    return ""


def gemm_table(family: str, precision: str) -> list:
    """The published ``(m, n, k, TFLOP/s)`` of ``(family, precision)``: every shape-table row and
    the MAMF best shape."""
    pts = [(m, n, k, t) for _, f, p, m, n, k, t, _ in GEMM_POINTS if f == family and p == precision]
    pts += [(*shape, t) for f, p, t, _, shape, _ in MAMF if f == family and p == precision]
    return pts


def _curve_tflops(m, n, k, *, eta, c, t0, peak, sms, bandwidth, operand) -> np.ndarray:
    """TFLOP/s of the GEMM curve (module docstring) for arrays of shapes."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    flops = 2.0 * m * n * k
    occupancy = np.maximum(1.0 - np.exp(-m * n / (c * sms)), 1.0 / sms)
    compute = flops / (eta * peak * occupancy)
    memory = (operand * (m * k + k * n) + 2.0 * m * n) / bandwidth
    return flops / (np.maximum(compute, memory) + t0) / 1e12


def fit_gemm_curve(family: str, precision: str, *, with_mamf: bool = True) -> tuple:
    """``(eta, c, t0)`` minimising the summed absolute log error of the curve (robust to the skinny
    shapes cuBLAS handles badly) over the published table of
    ``(family, precision)`` (:func:`gemm_table`; ``with_mamf=False``: its shape rows alone), on the
    grid above; a Blackwell curve (:data:`_SHAPE_FROM`) takes ``c``, ``t0`` from the shape rows of
    its shape table and the ``eta`` that puts its own MAMF point on the curve, times what
    Blackwell sustains at training shapes against MAMF (:func:`sustained_fraction`)."""
    peak = _SPEC[(family, precision)] * 1e12
    operand = 1.0 if precision == "fp8" else 2.0
    if with_mamf and (family, precision) in _SHAPE_FROM:
        _, c, t0 = fit_gemm_curve(*_SHAPE_FROM[(family, precision)], with_mamf=False)
        (m, n, k), t = next((shape, t) for f, p, t, _, shape, _ in MAMF if f == family and p == precision)
        bw = _TABLE_BANDWIDTH.get(family, TORCHAO_ROOFLINE["blackwell_mem_fraction"][0] * 8.0e12)
        model = _curve_tflops(m, n, k, eta=_ETA_GRID, c=c, t0=t0, peak=peak, sms=SMS[family], bandwidth=bw,
                              operand=operand)
        eta_mamf = float(_ETA_GRID[int(np.argmin(np.abs(np.log(model / t))))])
        return eta_mamf * sustained_fraction(precision), c, t0
    pts = np.array(gemm_table(family, precision) if with_mamf else
                   [(m, n, k, t) for _, f, p, m, n, k, t, _ in GEMM_POINTS if f == family and p == precision],
                   dtype=float)
    m, n, k, t = pts.T
    best = None
    for c in _C_GRID:
        for t0 in _T0_GRID:
            model = _curve_tflops(m[None, :], n[None, :], k[None, :], eta=_ETA_GRID[:, None], c=c, t0=t0, peak=peak,
                                  sms=SMS[family], bandwidth=_TABLE_BANDWIDTH[family], operand=operand)
            sse = np.sum(np.abs(np.log(model / t[None, :])), axis=1)
            i = int(np.argmin(sse))
            if best is None or sse[i] < best[0] - 1e-12:
                best = (float(sse[i]), float(_ETA_GRID[i]), float(c), float(t0))
    return best[1], best[2], best[3]


@lru_cache(maxsize=None)
def gemm_curve(family: str, precision: str) -> tuple:
    """The fitted ``(eta, c, t0)`` of ``(family, precision)`` (:func:`fit_gemm_curve`, once)."""
    if (family, precision) not in _SPEC:
        raise ValueError(f"no GEMM measurements for {family} in {precision}")
    return fit_gemm_curve(*_SAME_AS.get((family, precision), (family, precision)))


def gemm_points(family: str, precision: str) -> list:
    """The published large-GEMM fractions of the peak (all dimensions >= 4096, and the MAMF
    point) for ``(family, precision)``: what the fitted ``eta`` is compared with."""
    spec = _SPEC[(family, precision)]
    return [t / spec for m, n, k, t in gemm_table(family, precision) if min(m, n, k) >= 4096] + \
        [t / s for f, p, t, s, _, _ in MAMF if f == family and p == precision]


def gemm_fraction(family: str, precision: str, power_cap: float | None = None, tdp: float = 0.0) -> float:
    """Fraction ``eta`` of the dense peak a large GEMM sustains on ``family`` in ``precision``
    (the fitted curve's saturation, :func:`gemm_curve`). With ``power_cap`` (W) below the GPU's
    ``tdp``: scaled by the ratio of the throughput published at that cap to the uncapped
    curve's at the same shapes (an H100 at 500 W, FBGEMM PR 2546, the median over its three
    shapes), linear in the cap between the published cap and ``tdp``; a cap below the published
    one, or on a family without a capped measurement, is a ``ValueError``.

    >>> gemm_fraction("h100", "bf16"), gemm_fraction("h100", "fp8")
    (0.82, 0.695)
    """
    eta = gemm_curve(family, precision)[0]
    if power_cap is None or power_cap >= tdp:
        return eta
    capped = [(w, m, n, k, t) for f, w, p, m, n, k, t, _ in POWER_CAPPED_GEMM if f == family and p == precision]
    if not capped:
        raise ValueError(f"power_cap: no published power-capped GEMM measurement for {family} in {precision}")
    low = min(w for w, *_ in capped)
    if power_cap < low:
        raise ValueError(f"power_cap ({power_cap:g} W) is below the lowest published cap for {family} ({low} W)")
    eta_c, c, t0 = gemm_curve(family, precision)
    operand = 1.0 if precision == "fp8" else 2.0
    ratios = [t / float(_curve_tflops(m, n, k, eta=eta_c, c=c, t0=t0, peak=_SPEC[(family, precision)] * 1e12,
                                      sms=SMS[family], bandwidth=_TABLE_BANDWIDTH[family], operand=operand))
              for w, m, n, k, t in capped if w == low]
    at_low = eta * statistics.median(ratios)
    return at_low + (eta - at_low) * (power_cap - low) / (tdp - low)


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
                       count: int = 1, sm_share: float = 1.0, bandwidth: float | None = None) -> float:
    """Seconds of ``count`` GEMMs ``(m x k) @ (k x n)`` in ``precision`` on ``gpu``: the curve
    of the module docstring with the fitted ``(eta, c, t0)``, ``eta`` at ``power_cap``, the
    GPU's own achieved bandwidth (or ``bandwidth`` bytes/s where given) and ``sm_share`` of its
    SMs (communication kernels beside it hold the rest).

    >>> import topologies as tp
    >>> h100 = tp.get_gpu("h100_sxm")
    >>> t = gemm_seconds_shape(8192, 8192, 8192, h100, "bf16")
    >>> eta, c, t0 = gemm_curve("h100", "bf16")
    >>> q = 1 - math.exp(-8192 * 8192 / (c * 132))
    >>> abs(t - (2 * 8192 ** 3 / (eta * 989e12 * q) + t0)) < 1e-15
    True
    """
    fam = kernel_family(gpu)
    eta = gemm_fraction(fam, precision, power_cap, gpu.tdp)
    _, c, t0 = gemm_curve(fam, precision)
    operand = 1.0 if precision == "fp8" else 2.0
    flops = 2.0 * m * n * k
    # the share of the SMs the output keeps busy, never below one SM (a GEMM runs on at least one:
    # the curve, fitted on outputs of >= 2^17 elements, would otherwise give a 1 x 8 product less)
    occupancy = max(1.0 - math.exp(-m * n / (c * SMS[fam] * sm_share)), 1.0 / (SMS[fam] * sm_share))
    compute = flops / (eta * _peak(gpu, precision) * sm_share * occupancy)
    operands = operand * (m * k + k * n) + 2.0 * m * n
    memory = memory_seconds(operands, gpu) if bandwidth is None else operands / bandwidth
    return count * (max(compute, memory) + t0)


def attention_rates(gpu, kernel: str, *, head_dim: float, tokens: float, power_cap: float | None = None) -> tuple:
    """(forward, backward) FLOP/s of causal flash attention with ``kernel`` (``"fa3"``,
    ``"fa2"``; ``"auto"``: ``"fa3"`` where the family has it, else ``"fa2"``) on ``gpu`` at
    ``head_dim`` and ``tokens`` keys per query block (the sequence factor of
    :func:`attention_seq_factor` for the GPU's family and kernel: nothing past the longest
    measured length). Under ``power_cap`` both scale as the BF16 GEMM fraction does (attention
    is tensor-core bound; no capped attention measurement is published).

    >>> import topologies as tp
    >>> [r / 1e12 for r in attention_rates(tp.get_gpu("h100_sxm"), "fa3", head_dim=128, tokens=8192)]
    [630.0, 531.6]
    >>> [round(r / 1e12, 1) for r in attention_rates(tp.get_gpu("b200"), "fa3", head_dim=128, tokens=1 << 20)]
    [1418.1, 1208.6]
    """
    fam = kernel_family(gpu)
    if kernel == "auto":
        kernel = "fa2" if fam == "a100" else "fa3"
    fwd, bwd = reference_rates(fam, kernel)
    scale = attention_head_dim_factor(head_dim) * attention_seq_factor(tokens, family=fam, kernel=kernel)
    if power_cap is not None and power_cap < gpu.tdp:
        scale *= gemm_fraction(fam, "bf16", power_cap, gpu.tdp) / gemm_fraction(fam, "bf16")
    return fwd * scale, bwd * scale
