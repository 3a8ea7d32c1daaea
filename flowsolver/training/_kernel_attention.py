"""Flash-attention rates from published kernel benchmarks (split from :mod:`._kernels`, which
re-exports these and gives :func:`~._kernels.attention_rates`, with the GEMM tables' power cap): forward and backward rates per GPU family and kernel (``"fa3"``:
FlashAttention-3 / cuDNN class, what Transformer Engine runs on Hopper and Blackwell; ``"fa2"``:
FlashAttention-2, PyTorch's SDPA flash backend), measured with the causal mask at head dimension
128 and 8192 tokens, scaled by head dimension (FA3 paper, Figure 5) and by sequence length: below
8192 tokens as ``(1 + s0 / 8192) / (1 + s0 / s)`` with ``s0`` fitted to the only causal sweep
published (FA4 on GB200, 1k-4k tokens); above it by the GPU's own measured sweep (FA3 on H100:
+1.1 % from 8k to 16k, tritonbench), held at its longest measured length, and flat where the
family has no measurement past 8192 tokens (Blackwell: FA4's B200 figures are at 8192) -- never
extrapolated. FLOPs as flash-attention counts them: forward ``4 s^2 d heads`` per sequence halved
by the mask, backward 2.5 x forward. Every figure is a table of :mod:`._kernel_data`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._kernel_data import ATTENTION_HEAD_DIM, ATTENTION_POINTS, ATTENTION_SEQ_RAMP

__all__ = ["ATTENTION_KERNELS", "attention_seq_factor", "attention_head_dim_factor", "reference_rates"]

ATTENTION_KERNELS = ("auto", "fa3", "fa2", "unfused")


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


#: the GPU family whose measured sequence sweep (ATTENTION_SEQ_RAMP) a family takes: its own, or
#: its sibling's (H200 = H100's SMs and clocks; B200 and GB200 the same Blackwell SM)
_SWEEP_FAMILY = {"h100": "h100", "h200": "h100", "b200": "gb200", "gb200": "gb200"}


@lru_cache(maxsize=None)
def _measured_above(family: str | None, kernel: str, reference: float) -> tuple:
    """``(tokens, TFLOP/s)`` of ``family``'s measured sweep of ``kernel`` from ``reference``
    tokens up (sorted), or ``()`` where no sweep of it reaches past ``reference``."""
    fam = _SWEEP_FAMILY.get(family)
    for _, f, kern, _, _, pts, _ in ATTENTION_SEQ_RAMP:
        if f == fam and kern == kernel and max(p[0] for p in pts) > reference >= min(p[0] for p in pts):
            return tuple(sorted(pts))
    return ()


def attention_seq_factor(tokens: float, *, causal: bool = True, reference: float = 8192.0,
                         family: str | None = None, kernel: str = "fa3") -> float:
    """Rate at ``tokens`` per sequence over the rate at ``reference`` (the length the rates of
    :func:`attention_rates` are measured at). Up to ``reference``: ``(1 + s0 / reference) /
    (1 + s0 / tokens)``, ``s0`` fitted to the published sweep (:func:`_ramp_s0`). Beyond it,
    only what is measured: the ratio of ``family``'s own sweep of ``kernel`` (``_kernel_data.
    ATTENTION_SEQ_RAMP``; H200 takes H100's, B200 GB200's), interpolated linearly in tokens and
    held at its longest measured length; 1 where the family has no measurement past
    ``reference`` (GB200's FA4 sweep ends at 4096, A100 has none) or ``family`` is not given.

    >>> round(attention_seq_factor(8192), 12), round(attention_seq_factor(2048), 3)
    (1.0, 0.704)
    >>> round(attention_seq_factor(16384, family="h100"), 4)           # 620.73 / 614.234
    1.0106
    >>> attention_seq_factor(1 << 20, family="h100") == attention_seq_factor(16384, family="h100")
    True
    >>> attention_seq_factor(1 << 20, family="b200"), attention_seq_factor(1 << 20)
    (1.0, 1.0)
    """
    if tokens <= reference:
        s0 = _ramp_s0(causal)
        return (1.0 + s0 / reference) / (1.0 + s0 / tokens)
    pts = _measured_above(family, kernel, reference)
    if not pts:
        return 1.0
    s = [p[0] for p in pts]
    r = [p[1] for p in pts]
    return float(np.interp(min(tokens, s[-1]), s, r) / np.interp(reference, s, r))


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
def reference_rates(family: str, kernel: str) -> tuple:
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
