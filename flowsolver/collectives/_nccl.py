"""NCCL's constants and cost model: the ops (their algorithms: :mod:`._algorithms`),
protocol latencies, NVLS efficiency, the pipeline chunk and nccl-tests' bus-bandwidth
factors (units: s, bytes)."""

from __future__ import annotations

import numpy as np

__all__ = ["GPU_GENERATION", "OPS", "PROTOCOLS", "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY", "NVLS_EFFICIENCY",
           "DEFAULT_CHUNK", "PEER_LATENCY", "busbw_factor", "base_latency", "hop_latency", "min_hop_latency",
           "peer_latency", "REDOPS", "DTYPES", "reduction", "nvls_reduces", "scaled_sum", "is_fp8"]

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
#: seconds a GPU spends on each further peer of a step it sends to many peers at once (NCCL's
#: grouped send / receive: an all-to-all's kernel and network proxy set up, post and complete
#: every peer's send and receive in turn). Measured: nccl-tests' zero-byte all-to-all on ALCF
#: Polaris (argonne-lcf/alcf-nccl-tests, commit 1922bfd, results_polaris/, 4 A100 a node over
#: Slingshot-11, NCCL 2.18.5 and 2.21.5) takes 23-30 us on 8 ranks, 62-75 on 32, 2.13 ms on 1024
#: and 4.2-4.7 ms on 2160: 1.95-2.15 us a peer. The zero-byte rows move no data, so this is
#: NCCL's own cost a peer; Polaris's rows with data take 10-23 us a peer, the libfabric
#: transport's own per-message cost on top (not modelled: docs' accuracy page).
PEER_LATENCY = 2.0e-6
# NCCL's Simple protocol moves its 4 MiB channel buffer (NCCL_BUFFSIZE) in 8 steps
# (NCCL_STEPS): 512 KiB per pipeline chunk
DEFAULT_CHUNK = 512 * 1024


#: nccl-tests' reduction op names (``-o``; src/common.cu test_opnames; ``mulsum`` is a PreMulSum op
#: of ``ncclRedOpCreatePreMulSum``)
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum")
#: nccl-tests' data type names (``-d``; src/common.cu test_typenames)
DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
          "f8e5m2")
#: older nccl-tests' names of the same types (before NCCL 2.10's ncclAvg: "char", "int")
_DTYPE_ALIASES = {"char": "int8", "int": "int32"}
#: bytes an element of each data type (nccl-tests src/common.cu wordSize; NCCL's ncclTypeSize)
ELEMENT_BYTES = {"int8": 1, "uint8": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
                 "float": 4, "int64": 8, "uint64": 8, "double": 8}
_INTS = ("int8", "uint8", "int32", "uint32", "int64", "uint64")
_FP8 = ("f8e4m3", "f8e5m2")


def reduction(redop, dtype, label: str = "") -> tuple:
    """``(redop, dtype)`` checked and in nccl-tests' current names (``"char"`` is ``"int8"``,
    ``"int"`` ``"int32"``): a ValueError names the parameter (``label`` before it, e.g. a log's
    path) and the names allowed.

    >>> reduction("avg", "char")
    ('avg', 'int8')
    >>> reduction("mean", "float")
    Traceback (most recent call last):
    ...
    ValueError: redop must be one of sum, prod, max, min, avg, mulsum (nccl-tests' -o names), got 'mean'
    """
    if not isinstance(redop, str) or redop not in REDOPS:
        raise ValueError(f"{label}redop must be one of {', '.join(REDOPS)} (nccl-tests' -o names), got {redop!r}")
    dtype = _DTYPE_ALIASES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"{label}dtype must be one of {', '.join(DTYPES)} (nccl-tests' -d names), got {dtype!r}")
    return redop, dtype


def _device_op(redop, dtype) -> str:
    """NCCL's device reduction op of ``redop`` on ``dtype`` (src/enqueue.cc, hostToDevRedOp):
    sum Sum, prod Prod, min and max MinMax, avg SumPostDiv on integers and PreMulSum on floats,
    a PreMulSum op (nccl-tests ``mulsum``) PreMulSum."""
    if redop == "avg":
        return "sumpostdiv" if dtype in _INTS else "premulsum"
    return {"max": "minmax", "min": "minmax", "mulsum": "premulsum"}.get(redop, redop)


def nvls_reduces(redop, dtype) -> bool:
    """NCCL's ``ncclNvlsSupported`` (src/include/device.h:586-601 of master 5067397c, the same
    from 2.19 to 2.30): the NVSwitch reduces Sum of float and double, Sum or MinMax of half,
    bfloat16 and 32 / 64-bit integers, nothing else (no 8-bit type, no Prod, no avg: PreMulSum
    or SumPostDiv).

    >>> [nvls_reduces(*r) for r in (("sum", "float"), ("max", "float"), ("max", "bfloat16"), ("sum", "int8"))]
    [True, False, True, False]
    """
    op = _device_op(redop, dtype)
    if dtype in ("float", "double"):
        return op == "sum"
    return dtype in ("int32", "uint32", "int64", "uint64", "half", "bfloat16") and op in ("sum", "minmax")


def scaled_sum(redop, dtype) -> bool:
    """Whether NCCL runs ``redop`` on ``dtype`` as a scaled sum (its device op PreMulSum or
    SumPostDiv: avg, nccl-tests' mulsum), which its PAT reduce-scatter does not run
    (src/enqueue.cc:2010-2012: "Tree reduceScatter doesn't support scaling yet")."""
    return _device_op(redop, dtype) in ("premulsum", "sumpostdiv")


def is_fp8(dtype) -> bool:
    """An 8-bit float type: NCCL (2.24 and later) times its ring 1024 times slower beyond 8 ranks,
    to choose it last (src/enqueue.cc:2015-2020, "Relegate fp8 reduction trees ...")."""
    return dtype in _FP8


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


def peer_latency(flows) -> float:
    """Seconds a step's ranks spend on their peers beyond the first (:data:`PEER_LATENCY` each),
    for the rank that sends to the most distinct peers in ``flows`` (a
    :class:`~._trees.StepFlows`; 0 for in-switch steps, whose endpoints are nodes).

    >>> from ._trees import StepFlows
    >>> round(peer_latency(StepFlows([(0, 1, 8.0), (0, 2, 8.0), (1, 0, 8.0)])) * 1e6, 6)   # rank 0: 2 peers
    2.0
    """
    src, dst = flows.positions()
    if len(src) == 0 or flows.has_node_ids:
        return 0.0
    width, height = int(dst.max()) + 1, int(src.max()) + 1
    pair = src.astype(np.int64) * width + dst
    if width * height <= 1 << 26:                   # a bitmap of the pairs: linear time
        seen = np.zeros(width * height, dtype=bool)
        seen[pair] = True
        peers = seen.reshape(height, width).sum(axis=1).max()
    else:
        peers = np.bincount(np.unique(pair) // width).max()
    return float(max(0, int(peers) - 1)) * PEER_LATENCY
