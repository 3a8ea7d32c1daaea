"""The article's 64-GPU comparison: its figures, the clusters, the model's table beside it,
and the search for settings under which the model gives the article's overheads."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import topologies as tp

from ..training import DEFAULT_COMPUTE_EFFICIENCY, Parallelism, Schedule, get_model, training_step

__all__ = ["ARTICLE", "ARTICLE_SINGLE_GPU", "ARTICLE_NDR_CLAIM", "ARTICLE_SIZE_BANDS", "PUBLISHED_BATCH_TOKENS",
           "NETWORKS", "cluster",
           "StudyRow", "network_study", "format_table", "article_search"]

# The article's table (../shared/REFERENCE.md): 64-GPU tokens/s, speed-up, communication
# overhead, from a single-GPU speed of 100 tokens/s; PCIe only: "over 80 %" overhead.
ARTICLE = {
    "ideal": dict(tokens_per_s=6400.0, speedup=64.0, overhead=0.0),
    "ib_ndr": dict(tokens_per_s=3800.0, speedup=38.0, overhead=0.41),
    "ib_hdr": dict(tokens_per_s=3200.0, speedup=32.0, overhead=0.50),
    "roce_400g": dict(tokens_per_s=2600.0, speedup=26.0, overhead=0.59),
    "eth_100g": dict(tokens_per_s=1800.0, speedup=18.0, overhead=0.72),
    "pcie_only": dict(tokens_per_s=None, speedup=None, overhead=0.80),
}
ARTICLE_SINGLE_GPU = 100.0      # tokens/s, the article's single-H100 speed
#: GPUs of the article's clusters (8 DGX H100): its figures are of these, so a cluster of another
#: size is shown with none (None, printed ``-``), not beside the 64-GPU figures
ARTICLE_GPUS = 64
ARTICLE_NDR_CLAIM = 400e9       # bytes/s: the article's "400 GB/s" for an NDR port (it is 400 Gb/s)
# the article's recommended GPU counts per topology family (REFERENCE.md)
ARTICLE_SIZE_BANDS = "fat-tree 64-256, DragonFly 256-1000+, torus < 64"
# tokens per step of published large runs: Llama 2 (Touvron et al. 2023, section 2.2) 4 M for
# every size; Llama 3 (Dubey et al. 2024, section 3.4.1) 4 M, doubled to 8 M, then 16 M
PUBLISHED_BATCH_TOKENS = (4e6, 16e6)

# network name -> (label, server model, fabric link); "ideal" is the NDR cluster with every
# link 1e9 times faster and no latency anywhere
NETWORKS = {
    "ideal": ("ideal network", "dgx_h100", "ib_ndr"),
    "ib_ndr": ("InfiniBand NDR", "dgx_h100", "ib_ndr"),
    "ib_hdr": ("InfiniBand HDR", "dgx_h100", "ib_hdr"),
    "roce_400g": ("RoCE 400G", "dgx_h100", "roce_400g"),
    "eth_100g": ("Ethernet 100G", "dgx_h100", "eth_100g"),
    "pcie_only": ("PCIe only (no NVLink), NDR", "pcie_8gpu", "ib_ndr"),
}
_IDEAL_SPEEDUP = 1e9
_ZERO_LATENCY = dict(step_latency=0.0, base_latency=0.0)
_SEARCH_NETWORKS = ("ib_ndr", "ib_hdr", "roce_400g", "eth_100g")


def cluster(network: str, nodes: int = 8):
    """The cluster of one network of the study (rail-optimised, ``nodes`` servers).

    >>> g = cluster("ideal", nodes=1)
    >>> min(d["capacity"] for *_, d in g.edges(data=True)) > 1e18
    True
    """
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    _, server, link = NETWORKS[network]
    g = tp.rail_optimized(nodes, server=server, link=link)
    if network == "ideal":
        for *_, d in g.edges(data=True):
            d["capacity"] *= _IDEAL_SPEEDUP
            d["latency"] = 0.0
    return g


@dataclass(frozen=True)
class StudyRow:
    """One network: the model's step and the article's figures (None where it gives none)."""

    network: str
    label: str
    step: object
    article: dict


def network_study(*, model="llama-3-70b", nodes: int = 8, tp_degree: int = 8, pp: int = 1,
                  global_batch: int = 512, micro_batch: int = 1, zero: int = 1, dp_overlap: float = 1.0,
                  compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY, networks=tuple(NETWORKS)) -> list:
    """The article's comparison: one :class:`StudyRow` per network.

    Defaults: Llama-3-70B, 8 servers x 8 GPUs, TP 8 inside the server, DP 8 across servers
    (one rail per DP group), distributed optimizer, 512 sequences of 8192 tokens per step
    (4 M tokens), DP overlapping the last backward pass.

    >>> rows = network_study(global_batch=64, networks=("ideal", "ib_ndr"))
    >>> [r.network for r in rows], round(rows[0].step.speedup, 3)
    (['ideal', 'ib_ndr'], 64.0)
    """
    rows = []
    for net in networks:
        g = cluster(net, nodes)
        options = dict(_ZERO_LATENCY) if net == "ideal" else {}
        step = training_step(g, model, Parallelism(tp=tp_degree, pp=pp, micro_batch=micro_batch, zero=zero),
                             Schedule(global_batch=global_batch, dp_overlap=dp_overlap,
                                      compute_efficiency=compute_efficiency), collective_options=options)
        article = ARTICLE[net] if step.gpus == ARTICLE_GPUS else dict.fromkeys(ARTICLE[net])   # its size only
        rows.append(StudyRow(network=net, label=NETWORKS[net][0], step=step, article=article))
    return rows


def format_table(rows) -> str:
    """The study as the article's table, model beside article (overheads in %; the
    bottleneck is the tier that holds the most exposed phase back, ``-`` without overhead).

    >>> print(format_table(network_study(nodes=1, global_batch=8, networks=("ideal",))).splitlines()[2])
    ideal network ...        -      8.0x        -      0.0%       -   -
    """
    head = (f"{'network':28s} {'tokens/s*':>9s} {'article*':>8s} {'speed-up':>9s} {'article':>8s} "
            f"{'overhead':>9s} {'article':>8s}  bottleneck")
    lines = [head, "-" * len(head)]
    for r in rows:
        s, a = r.step, r.article
        tier = s.bottleneck_tier if s.comm_overhead > 1e-3 else "-"
        art_tok = f"{a['tokens_per_s']:8.0f}" if a["tokens_per_s"] else f"{'-':>8s}"
        art_sp = f"{a['speedup']:7.0f}x" if a["speedup"] else f"{'-':>8s}"
        art_ov = f"{'-':>7s} " if a["overhead"] is None else \
            f"{a['overhead']:7.0%}" + ("+" if r.network == "pcie_only" else " ")
        lines.append(f"{r.label:28s} {s.tokens_per_s:9.0f} {art_tok} {s.speedup:8.1f}x {art_sp} "
                     f"{s.comm_overhead:9.1%} {art_ov:>8s}  {tier}")
    return "\n".join(lines)


def article_search(*, model="llama-3-70b", nodes: int = 8, settings=None, batches=None,
                   overlaps=(0.0, 0.5, 1.0), compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY) -> list:
    """Settings under which the model's overheads come closest to the article's four.

    For each parallelism setting ``(tp, pp, zero)`` the collectives are solved once per
    network (NDR, HDR, RoCE 400G, Ethernet 100G); global batch and DP overlap are then varied
    without solving again (:meth:`StepResult.recompose`). Returns dicts sorted by the largest
    gap to the article's overheads (``worst_gap``), closest first; ``fits`` says whether the
    setting's estimated memory per GPU fits the GPU.

    >>> best = article_search(settings=[(8, 1, 1)], batches=[8], overlaps=(0.0,))[0]
    >>> sorted(best["overheads"]), best["worst_gap"] > 0.1
    (['eth_100g', 'ib_hdr', 'ib_ndr', 'roce_400g'], True)
    """
    spec = get_model(model)
    settings = settings or [(8, 1, 1), (8, 2, 1), (4, 2, 1), (4, 4, 1), (8, 1, 0), (1, 1, 3)]
    graphs = {net: cluster(net, nodes) for net in _SEARCH_NETWORKS}
    n = len(tp.gpus(graphs["ib_ndr"]))
    out = []
    for tp_degree, pp, zero in settings:
        dp = n // (tp_degree * pp)
        if spec.layers % pp:
            continue
        grid = [b for b in (batches or [dp * 2 ** k for k in range(0, 8) if dp * 2 ** k <= 1024]) if b % dp == 0]
        if not grid:
            continue
        base = {net: training_step(g, spec, Parallelism(tp=tp_degree, pp=pp, zero=zero),
                                   Schedule(global_batch=grid[0], compute_efficiency=compute_efficiency))
                for net, g in graphs.items()}
        for batch, overlap in itertools.product(grid, overlaps):
            steps = {net: s.recompose(global_batch=batch, dp_overlap=overlap) for net, s in base.items()}
            overheads = {net: s.comm_overhead for net, s in steps.items()}
            gap = max(abs(overheads[k] - ARTICLE[k]["overhead"]) for k in _SEARCH_NETWORKS)
            out.append(dict(tp=tp_degree, pp=pp, dp=dp, zero=zero, global_batch=batch, dp_overlap=overlap,
                            overheads=overheads, worst_gap=gap, fits=steps["ib_ndr"].fits,
                            memory_per_gpu=steps["ib_ndr"].memory_per_gpu,
                            tokens_per_s={net: s.tokens_per_s for net, s in steps.items()}))
    return sorted(out, key=lambda r: r["worst_gap"])


def roce_efficiency_for(target: float, setting: dict, model, nodes: int, compute_efficiency: float):
    """Fraction of its line rate RoCE 400G must reach for the model to give ``target``
    overhead under ``setting`` (an :func:`article_search` entry): a bisection over the link
    efficiency; 1.0 when the line rate already gives it, None when even a trickle does not.

    >>> setting = dict(tp=8, pp=1, zero=1, global_batch=8, dp_overlap=0.0)
    >>> roce_efficiency_for(0.01, setting, "llama-3-70b", 1, DEFAULT_COMPUTE_EFFICIENCY)      # TP alone costs more than 1 %
    1.0
    """
    g = cluster("roce_400g", nodes)

    def overhead(eff):
        s = training_step(g, model, Parallelism(tp=setting["tp"], pp=setting["pp"], zero=setting["zero"]),
                          Schedule(global_batch=setting["global_batch"], dp_overlap=setting["dp_overlap"],
                                   compute_efficiency=compute_efficiency),
                          collective_options=dict(efficiency={"roce_400g": eff}))
        return s.comm_overhead

    lo, hi = 1e-3, 1.0
    if overhead(hi) >= target:
        return 1.0
    if overhead(lo) < target:
        return None
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if overhead(mid) >= target else (lo, mid)
    return math.sqrt(lo * hi)
