"""NCCL's constants and cost model: the ops (their algorithms: :mod:`._algorithms`),
protocol latencies, NVLS efficiency, the pipeline chunk and nccl-tests' bus-bandwidth
factors (units: s, bytes)."""

from __future__ import annotations

__all__ = ["GPU_GENERATION", "OPS", "PROTOCOLS", "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY", "NVLS_EFFICIENCY",
           "DEFAULT_CHUNK", "busbw_factor", "base_latency", "hop_latency", "min_hop_latency"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "send_recv")
PROTOCOLS = ("LL", "LL128", "Simple")
# NCCL 2.30 src/graph/tuning.cc (../shared/REFERENCE.md), microseconds, (LL, LL128, Simple)
NCCL_BASE_LATENCY = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4)}
NCCL_HOP_LATENCY = {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7), "network": (2.7, 4.0, 14.0)}
#: GPU type (topologies' names) -> NCCL's generation (SM70 Volta, SM80 Ampere, SM90 Hopper,
#: SM100 Blackwell; NVIDIA data sheets). H800, H200 and the 96 GB HBM2e H100 SXM are Hopper
#: parts, B300 / GB300 Blackwell (Ultra) parts.
GPU_GENERATION = {"v100": "volta", "a100_sxm": "ampere", "a100_pcie": "ampere", "a100_40gb": "ampere",
                  "a100_80gb": "ampere", "h100_sxm": "hopper", "h100_sxm_hbm2e": "hopper", "h100_pcie": "hopper",
                  "h800": "hopper", "h200": "hopper", "gh200": "hopper", "b200": "blackwell", "gb200": "blackwell",
                  "b300": "blackwell", "gb300": "blackwell"}
#: NCCL 2.30 tuning.cc nvlsEfficiency: the fraction of the NVLink rate NVLS reaches, Hopper
#: 0.85, Blackwell 0.74 (Volta and Ampere have no NVLS)
_NVLS_BY_GENERATION = {"hopper": 0.85, "blackwell": 0.74}
#: the same keyed by our GPU types (every Hopper and Blackwell part: H200's NVLS is H100's);
#: PCIe parts have no NVSwitch, which the layout checks separately
NVLS_EFFICIENCY = {gpu: _NVLS_BY_GENERATION[gen] for gpu, gen in GPU_GENERATION.items() if gen in _NVLS_BY_GENERATION}
# NCCL's Simple protocol moves its 4 MiB channel buffer (NCCL_BUFFSIZE) in 8 steps
# (NCCL_STEPS): 512 KiB per pipeline chunk
DEFAULT_CHUNK = 512 * 1024


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` (one of :data:`OPS`) on ``p`` ranks (an
    integer >= 1): ``busbw = algbw x factor``.

    >>> busbw_factor("all_reduce", 8)
    1.75
    >>> busbw_factor("allreduce", 8)       # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: op must be one of all_reduce, reduce_scatter, ..., send_recv; got 'allreduce'
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    if isinstance(p, bool) or not hasattr(p, "__index__") or int(p) < 1:
        raise ValueError(f"p must be an integer >= 1 (ranks), got {p!r}")
    p = int(p)
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (p - 1) / p
    return 1.0


def base_latency(protocol: str, override: float | None = None) -> float:
    """NCCL's per-collective base latency of ``protocol`` (s), or ``override``.

    >>> round(base_latency("Simple") * 1e6, 6), base_latency("LL", 0.0)
    (8.4, 0.0)
    """
    if override is not None:
        return float(override)
    return NCCL_BASE_LATENCY["ring"][PROTOCOLS.index(protocol)] * 1e-6


def hop_latency(hop_class: str, protocol: str) -> float:
    """NCCL's per-hop latency (s) of a hop class (``"nvlink"``, ``"pcie"``, ``"network"``).

    >>> round(hop_latency("network", "Simple") * 1e6, 6)
    14.0
    """
    return NCCL_HOP_LATENCY[hop_class][PROTOCOLS.index(protocol)] * 1e-6


def min_hop_latency(protocol: str) -> float:
    """The smallest per-hop latency of ``protocol`` over every hop class (s)."""
    return min(h[PROTOCOLS.index(protocol)] for h in NCCL_HOP_LATENCY.values()) * 1e-6
