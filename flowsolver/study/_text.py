"""The study's printed text: every figure in it read from the results, the catalogue
(:mod:`topologies`) or the article's table, none typed into the prose.

Each function returns the blocks :func:`flowsolver.study.run` echoes, one per call."""

from __future__ import annotations

import topologies as tp

from ._article import (ARTICLE, ARTICLE_NDR_CLAIM, ARTICLE_SINGLE_GPU, ARTICLE_SIZE_BANDS, NETWORKS,
                       PUBLISHED_BATCH_TOKENS, format_table)
from ._families import FAMILY_LINK, FAMILY_SERVER

__all__ = ["overview", "network_notes", "search_section", "topology_section"]

_SEARCH_LABELS = {"ib_ndr": "NDR", "ib_hdr": "HDR", "roce_400g": "RoCE 400G", "eth_100g": "Ethernet 100G"}


def _pct(fraction: float) -> str:
    """The article's percent style: ``0.41`` -> ``"41 %"``."""
    return f"{fraction * 100:.0f} %"


def _gbit(rate: float) -> str:
    """A line rate in bytes/s as Gb/s, ``50e9`` -> ``"400"``."""
    return f"{rate * 8 / 1e9:.0f}"


def _gbyte(rate: float) -> str:
    """A rate in bytes/s as GB/s, ``47e9`` -> ``"47"``."""
    return f"{rate / 1e9:.0f}"


def _link(network: str):
    return tp.get_link(NETWORKS[network][2])


def overview(spec, rows) -> list:
    """The job, its setting (the NDR row's) and the table beside the article's."""
    s = next(r.step for r in rows if r.network == "ib_ndr")
    servers = s.gpus // tp.get_server(NETWORKS["ib_ndr"][1]).gpus
    return [f"flowsolver network study: {spec.name} ({spec.params / 1e9:.1f} B parameters) on {servers} servers x "
            f"{s.gpus // servers} GPUs = {s.gpus} GPUs",
            f"setting: TP {s.tp} inside each server, PP {s.pp}, DP {s.dp} across servers, "
            f"distributed optimizer, {s.global_batch} sequences x {spec.seq_len} tokens per step, "
            f"compute at {s.compute_efficiency:.0%} of peak (MFU over the step {s.mfu:.0%}), DP overlapping "
            f"the backward and forward passes; "
            f"~{s.memory_per_gpu / 1e9:.0f} GB per GPU of its {s.gpu_memory / 1e9:.0f} GB "
            f"({s.gpu_memory / 2**30:.0f} GiB)\n",
            format_table(rows),
            f"* tokens/s of the whole {s.gpus}-GPU job; the article's column is its speed-up times its own "
            "single-GPU rate (see 'Single GPU' below), so compare speed-ups and overheads, not tokens/s", ""]


def your_own_section(spec, nodes: int) -> list:
    """Three commands that ask the study's question of the reader's own cluster and job."""
    from ..training import MODELS

    model = spec.name if spec.name in MODELS else "llama-3-70b"
    return ["", "The same question for your own cluster and job:",
            f"  flowsolver train --nodes {nodes} --link roce_400g --model {model} --tp 8 --pp 2   one step, "
            "its overhead and breakdown (--cluster FILE: your fabric; --server topo.xml: your servers)",
            f"  flowsolver upgrade --nodes {nodes} --op all_reduce --size 1G --budget 2   what to upgrade first",
            "  flowsolver sweep examples/sweep.toml   many clusters and settings at once (a TOML grid)"]


def network_notes(spec, rows) -> list:
    """Why the model's table differs from the article's: single-GPU speed, line rates, where
    the overhead comes from, RoCE against NDR, PCIe-only servers."""
    by = {r.network: r.step for r in rows}
    s, ndr, roce = by["ib_ndr"], _link("ib_ndr"), _link("roce_400g")
    peak = s.profile.gpu.peak_bf16_flops
    dgx = tp.get_server(NETWORKS["ib_ndr"][1])
    tp_phase, pcie = s.phases["tp"], by["pcie_only"]
    notes = [
        f"Single GPU: the model's H100 computes {s.single_gpu_tokens_per_s:.0f} tokens/s "
        f"({spec.flops_per_token / 1e9:.0f} GFLOP per token at {s.compute_efficiency:.0%} of {peak / 1e12:.0f} TFLOP/s); the "
        f"article's {ARTICLE_SINGLE_GPU:.0f} tokens/s is {ARTICLE_SINGLE_GPU * spec.flops_per_token / peak:.1%} "
        f"MFU, so its tokens/s column is its speed-up x {ARTICLE_SINGLE_GPU:.0f}. Compare speed-ups and overheads, "
        "not tokens/s.",
        f"Line rates: NDR is {_gbit(ndr.bandwidth)} Gb/s = {_gbyte(ndr.bandwidth)} GB/s per port "
        f"({_gbyte(ndr.effective_bandwidth)} GB/s measured), not the article's '{_gbyte(ARTICLE_NDR_CLAIM)} GB/s'; "
        f"a DGX H100 has {dgx.nics} of them, {_gbyte(dgx.nics * ndr.bandwidth)} GB/s per server, while each GPU "
        f"has {_gbyte(tp.get_link(dgx.nvlink).bandwidth)} GB/s of NVLink.",
        f"At this setting the inter-server network barely matters: NDR to Ethernet 100G moves the overhead by "
        f"{by['eth_100g'].comm_overhead - s.comm_overhead:.1%} points. TP collectives over NVLink "
        f"({tp_phase.op.replace('_', '-')}, {tp_phase.algorithm}, {tp_phase.per_call * 1e3:.2f} ms each, "
        f"{tp_phase.calls:.0f} per step, {s.tp_overlap:.0%} of them hidden behind the GEMMs) leave "
        f"{tp_phase.exposed / s.step_time:.1%} of the step exposed; the DP gradient reduction "
        f"({s.phases['dp'].total:.2f} s on NDR) hides behind the backward and forward passes but one bucket.",
        f"RoCE 400G and NDR share the {_gbit(roce.bandwidth)} Gb/s line rate: the model gives "
        f"{by['roce_400g'].comm_overhead:.1%} and {s.comm_overhead:.1%} (NDR's measured "
        f"{_gbyte(ndr.effective_bandwidth)} GB/s per NIC vs RoCE's {_gbyte(roce.effective_bandwidth)}: NDR's loss "
        "and RoCE's larger headers; no measured RoCE figure in the catalogue); "
        f"the article's {_pct(ARTICLE['ib_ndr']['overhead'])} vs {_pct(ARTICLE['roce_400g']['overhead'])} cannot "
        "come from the line rate.",
        f"PCIe only: TP collectives cross PCIe switches and the CPU socket link "
        f"({pcie.phases['tp'].per_call * 1e3:.2f} ms each vs {tp_phase.per_call * 1e3:.2f} ms on NVLink): overhead "
        f"{pcie.comm_overhead:.1%} (article: over {_pct(ARTICLE['pcie_only']['overhead'])}); speed-up against one "
        "H100 PCIe.",
    ]
    return ["* " + text for text in notes] + [""]


def _search_rows(search) -> list:
    """The distinct settings of the search, closest first, at most five."""
    lines, shown = [], []
    for r in search:
        o = r["overheads"]
        key = tuple(round(o[k], 4) for k in _SEARCH_LABELS)
        if key in shown:        # another setting with the same figures (zero 0 vs 1 move the same bytes)
            continue
        shown.append(key)
        if len(shown) > 5:
            break
        lines.append(f"  tp {r['tp']} pp {r['pp']} dp {r['dp']} zero {r['zero']} batch {r['global_batch']:4d} "
                     f"overlap {r['dp_overlap']:.1f}:  " + " / ".join(f"{o[k]:.0%}" for k in _SEARCH_LABELS)
                     + f"   worst gap {r['worst_gap']:.0%}   {r['memory_per_gpu'] / 1e9:.0f} GB"
                     + ("" if r["fits"] else " (does not fit)"))
    return lines


def search_section(spec, search, best, need, pcie_like) -> list:
    """The settings search, its closest setting ``best``, the RoCE efficiency ``need`` it
    would take there (None: none does) and the PCIe-only step ``pcie_like`` at it."""
    article = " / ".join(f"{ARTICLE[k]['overhead'] * 100:.0f}" for k in _SEARCH_LABELS)
    roce, ndr, target = _link("roce_400g"), _link("ib_ndr"), ARTICLE["roce_400g"]["overhead"]
    lines = [f"Which settings give the article's overheads? (tp, pp, dp, zero, global batch, DP overlap; "
             f"overheads {' / '.join(_SEARCH_LABELS.values())}; article {article} %; memory per GPU)"]
    lines += _search_rows(search)
    low, high = (tokens / 1e6 for tokens in PUBLISHED_BATCH_TOKENS)
    lines.append(f"* Closest: {best['global_batch']} sequences ({best['global_batch'] * spec.seq_len / 1e6:.2f} M "
                 f"tokens) per step, {best['global_batch'] // best['dp']} sequence(s) per DP replica, DP overlap "
                 f"{best['dp_overlap']:.0%}: a step too small to hide the gradient reduction, so every byte of it is "
                 f"exposed. Real 70B runs use {low:.0f}-{high:.0f} M token batches and overlap it.")
    if need is None:
        lines.append(f"* Even with RoCE at a trickle the model cannot reach {_pct(target)} at that setting.")
    else:
        lines.append(f"* To give {_pct(target)} there, RoCE would have to deliver {need:.0%} of its "
                     f"{_gbit(roce.bandwidth)} Gb/s line rate ({_gbyte(need * roce.bandwidth)} GB/s per NIC vs NDR's "
                     f"{_gbyte(ndr.effective_bandwidth)}): the line rate cannot explain the article's RoCE figure; "
                     "it would take a fabric losing most of its bandwidth to congestion or pauses.")
    lines.append(f"* At that setting the PCIe-only cluster gives {pcie_like.comm_overhead:.0%} overhead "
                 f"(article: over {_pct(ARTICLE['pcie_only']['overhead'])}).")
    return lines + [""]


def _family_note(topo) -> list:
    """DragonFly and torus against the rail Clos at the same sizes (none without a Clos)."""
    clos = {r["gpus"]: r for r in topo if r["family"].startswith("fat-tree")}
    others = [r for r in topo if not r["family"].startswith("fat-tree") and r["gpus"] in clos]
    if not others:
        return []
    worst = max(r["dp_time"] / clos[r["gpus"]]["dp_time"] for r in others)
    best = min(r["dp_time"] / clos[r["gpus"]]["dp_time"] for r in others)
    server, cable = tp.get_server(FAMILY_SERVER), tp.get_link(FAMILY_LINK)
    injection = server.nics * server.nic_tech(FAMILY_LINK).bandwidth
    return [f"* As built here a DragonFly or torus router holds a whole server ({server.nics} NICs, "
            f"{_gbyte(injection)} GB/s of injection) but joins each neighbour by one {_gbyte(cable.bandwidth)} GB/s "
            f"cable: the job's {others[0]['tp']} DP rings (one per rail) meet on one cable per hop, so the DP "
            f"reduction takes {best:.1f}-{worst:.1f}x as long as on the rail Clos, where each rail has its own leaf, "
            "at every size. Router counts are no lower either (one per server). Nothing here supports the article's "
            f"size bands ({ARTICLE_SIZE_BANDS}): what decides is the bandwidth a server can push into its first hop, "
            "not the GPU count."]


def topology_section(topo) -> list:
    """The topology families' table and what it shows."""
    job = topo[0] if topo else dict(tp="-", sequences_per_replica="-")
    lines = [f"Topology families, same job (TP {job['tp']}, DP across servers, {job['sequences_per_replica']} "
             "sequences per replica: weak scaling; ring DP all-reduce)",
             f"{'family':22s} {'GPUs':>5s} {'switches':>8s} {'bisection TB/s':>14s} {'DP s':>6s} {'exposed s':>9s} "
             f"{'overhead':>8s} {'scaling eff.':>12s}  bottleneck"]
    for r in topo:
        bis = r["bisection"] / 1e12 if r["bisection"] else float("nan")
        lines.append(f"{r['family']:22s} {r['gpus']:5d} {r['switches'] or 0:8d} {bis:14.1f} {r['dp_time']:6.2f} "
                     f"{r['dp_exposed']:9.2f} {r['overhead']:8.1%} {r['efficiency']:12.1%}  {r['dp_tier']}")
    return lines + _family_note(topo)
