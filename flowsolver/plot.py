"""Plots (matplotlib, imported lazily): each takes the ``ax`` to draw on first and returns it;
nothing here calls ``plt.show()``."""

from __future__ import annotations

import numpy as np

__all__ = ["study_bars", "busbw_vs_size", "scaling", "utilization_by_tier", "topology"]


def study_bars(ax, rows, *, metric: str = "overhead"):
    """The network study's comparison: the model's value beside the article's per network.

    ``rows`` from :func:`flowsolver.study.network_study`; ``metric`` ``"overhead"``
    (communication share of the step, %) or ``"speedup"`` (against one GPU).

    >>> from matplotlib.figure import Figure
    >>> from flowsolver.study import network_study
    >>> ax = Figure().subplots()
    >>> _ = study_bars(ax, network_study(global_batch=64, networks=("ideal", "ib_ndr")))
    >>> len(ax.patches)                                   # 2 networks x (model, article)
    4
    """
    if metric not in ("overhead", "speedup"):
        raise ValueError(f"metric must be 'overhead' or 'speedup', got {metric!r}")
    x = np.arange(len(rows))
    if metric == "overhead":
        model = [100 * r.step.comm_overhead for r in rows]
        article = [100 * r.article["overhead"] for r in rows]
        ax.set_ylabel("communication overhead (% of step)")
    else:
        model = [r.step.speedup for r in rows]
        article = [r.article["speedup"] or 0.0 for r in rows]
        ax.set_ylabel("speed-up over one GPU")
    ax.bar(x - 0.2, model, 0.4, label="flowsolver model")
    ax.bar(x + 0.2, article, 0.4, label="article")
    ax.set_xticks(x, [r.label.replace(" (no NVLink), NDR", "\n(no NVLink)") for r in rows], rotation=30, ha="right")
    ax.legend()
    ax.set_title(f"{rows[0].step.model}, {rows[0].step.gpus} GPUs: {metric}")
    return ax


def busbw_vs_size(ax, results, *, label=None, measured=None):
    """Bus bandwidth (GB/s) against message size (bytes, log scale), nccl-tests style.

    ``results``: CollectiveResults of one op at several sizes (a line), or a dict
    label -> such a list (one line each). ``measured``: optional ``{label: (sizes, busbw
    bytes/s)}`` drawn as markers, to compare with nccl-tests output.

    >>> from matplotlib.figure import Figure
    >>> import topologies as tp
    >>> from flowsolver import collective
    >>> g = tp.rail_optimized(1)
    >>> rs = [collective(g, "all_reduce", s, algorithm="ring") for s in (2**20, 2**24, 2**28)]
    >>> ax = busbw_vs_size(Figure().subplots(), {"ring": rs}, measured={"nccl-tests": ([2**28], [360e9])})
    >>> len(ax.lines)
    2
    """
    series = results if isinstance(results, dict) else {label or (results[0].algorithm if results else ""): results}
    for name, rs in series.items():
        ax.plot([r.size for r in rs], [r.busbw / 1e9 for r in rs], marker="o", label=name)
    for name, (sizes, values) in (measured or {}).items():
        ax.plot(sizes, np.asarray(values) / 1e9, linestyle="none", marker="x", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.legend()
    return ax


def scaling(ax, df, *, x="gpus", y="busbw", by=None, logx=True):
    """A metric against GPU count (or any column): one line per value of ``by``.

    ``df`` a DataFrame such as :func:`flowsolver.sweep` returns (rows with status ``"ok"``
    are drawn); ``busbw`` / ``algbw`` are shown in GB/s.

    >>> import pandas as pd
    >>> from matplotlib.figure import Figure
    >>> df = pd.DataFrame(dict(gpus=[8, 16, 8, 16], busbw=[3e11, 2e11, 1e11, 1e11], link=["a", "a", "b", "b"],
    ...                        status="ok"))
    >>> len(scaling(Figure().subplots(), df, by="link").lines)
    2
    """
    ok = df[df["status"] == "ok"] if "status" in df else df
    scale = 1e9 if y in ("busbw", "algbw") else 1.0
    groups = [(None, ok)] if by is None else list(ok.groupby(by, sort=False))
    for key, part in groups:
        part = part.sort_values(x)
        ax.plot(part[x], part[y] / scale, marker="o", label=None if key is None else str(key))
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{y} (GB/s)" if scale != 1.0 else y)
    if by is not None:
        ax.legend(title=by)
    return ax


def utilization_by_tier(ax, result):
    """Mean and max link utilisation per tier of a CollectiveResult (time-weighted over its
    transfers): two bars per tier.

    >>> from matplotlib.figure import Figure
    >>> import topologies as tp
    >>> from flowsolver import collective
    >>> r = collective(tp.rail_optimized(2), "all_reduce", 2**26, algorithm="ring")
    >>> len(utilization_by_tier(Figure().subplots(), r).patches)     # nvlink, pcie, access, leaf-spine x 2
    8
    """
    tiers = np.asarray(result.links.tier, dtype=object)
    util = np.asarray(result.link_utilization)
    names = [t for t in dict.fromkeys(tiers.tolist()) if t]
    mean = [100 * util[tiers == t].mean() for t in names]
    peak = [100 * util[tiers == t].max() for t in names]
    x = np.arange(len(names))
    ax.bar(x - 0.2, mean, 0.4, label="mean")
    ax.bar(x + 0.2, peak, 0.4, label="max")
    ax.set_xticks(x, names)
    ax.set_ylabel("link utilisation (%)")
    ax.set_title(f"{result.op} {result.algorithm}, {result.ranks} GPUs")
    ax.legend()
    return ax


def topology(ax, graph, result=None, *, threshold: float = 0.99):
    """A small cluster drawn by tier (GPUs at the bottom, switches above); with a
    CollectiveResult, links at or above ``threshold`` utilisation are drawn thick and red.

    >>> from matplotlib.figure import Figure
    >>> import topologies as tp
    >>> g = tp.fat_tree(4)
    >>> ax = topology(Figure().subplots(), g)
    >>> len(ax.collections) >= 2                         # nodes and edges
    True
    """
    import networkx as nx

    if graph.number_of_nodes() > 2000:
        raise ValueError(f"graph has {graph.number_of_nodes()} nodes; topology() draws clusters of <= 2000")
    level = {}
    for n, d in graph.nodes(data=True):
        kind = d.get("kind")
        tier = d.get("tier", 0)
        level[n] = (0 if kind == "gpu" else 1 if kind in ("nic", "nvswitch", "pcie_switch", "cpu") else
                    2 + (tier if isinstance(tier, int) else 0))
    rows: dict = {}
    for n in graph.nodes:
        rows.setdefault(level[n], []).append(n)
    pos = {}
    for lv, members in rows.items():
        for i, n in enumerate(members):
            pos[n] = ((i + 0.5) / len(members), lv)
    hot = set()
    if result is not None:
        util = np.asarray(result.link_utilization)
        hot = {(u, v) for u, v, x in zip(result.links.src, result.links.dst, util) if x >= threshold}
    cold = [e for e in graph.edges() if e not in hot]
    colors = ["tab:green" if graph.nodes[n].get("kind") == "gpu" else "tab:blue" for n in graph.nodes]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=12, node_color=colors)
    nx.draw_networkx_edges(graph, pos, edgelist=cold, ax=ax, width=0.3, edge_color="0.7", arrows=False)
    if hot:
        nx.draw_networkx_edges(graph, pos, edgelist=sorted(hot), ax=ax, width=2.0, edge_color="tab:red",
                               arrows=False)
    ax.set_axis_off()
    ax.set_title(f"{graph.graph.get('generator', 'cluster')}: {len(hot)} saturated links" if result is not None
                 else graph.graph.get("generator", "cluster"))
    return ax
