"""Plots (matplotlib, imported lazily): each takes the ``ax`` to draw on first and returns it;
nothing here calls ``plt.show()``."""

from __future__ import annotations

import numpy as np

__all__ = ["study_bars", "search_bars", "family_bars", "busbw_vs_size", "scaling", "utilization_by_tier", "topology",
           "sensitivity_bars", "bottleneck_structure"]

#: the four networks of the article's comparison, in its order
_ARTICLE_NETWORKS = (("ib_ndr", "NDR"), ("ib_hdr", "HDR"), ("roce_400g", "RoCE 400G"), ("eth_100g", "Eth 100G"))


def search_bars(ax, found, article, *, best: int = 3):
    """The article-settings search: the ``best`` closest settings' overheads per network
    (%), beside the article's (``article``: network -> dict with ``"overhead"``), labelled.

    >>> from matplotlib.figure import Figure
    >>> found = [dict(tp=8, pp=1, dp=8, zero=1, global_batch=8, dp_overlap=0.0,
    ...               overheads=dict(ib_ndr=0.4, ib_hdr=0.5, roce_400g=0.4, eth_100g=0.7))]
    >>> ax = search_bars(Figure().subplots(), found, {k: dict(overhead=0.5) for k in
    ...                  ("ib_ndr", "ib_hdr", "roce_400g", "eth_100g")})
    >>> len(ax.patches)                                   # 4 networks x (1 setting + article)
    8
    """
    x = np.arange(len(_ARTICLE_NETWORKS))
    shown, seen = [], set()
    for f in found:               # settings with the same figures (zero 0 vs 1) shown once, others named apart
        key = tuple(round(f["overheads"][k], 4) for k, _ in _ARTICLE_NETWORKS)
        if key not in seen and len(shown) < best:
            seen.add(key)
            shown.append(f)
    width = 0.8 / (len(shown) + 1)
    for i, f in enumerate(shown):
        zero = f" zero {f['zero']}" if "zero" in f else ""
        label = f"tp {f['tp']} pp {f['pp']}{zero} batch {f['global_batch']} overlap {f['dp_overlap']:.0%}"
        bars = ax.bar(x + (i - len(shown) / 2) * width, [100 * f["overheads"][k] for k, _ in _ARTICLE_NETWORKS],
                      width, label=label)
        ax.bar_label(bars, fmt="%.0f%%", fontsize="x-small", padding=1)
    bars = ax.bar(x + (len(shown) / 2) * width, [100 * article[k]["overhead"] for k, _ in _ARTICLE_NETWORKS],
                  width, label="article", color="0.4")
    ax.bar_label(bars, fmt="%.0f%%", fontsize="x-small", padding=1)
    ax.set_xticks(x, [name for _, name in _ARTICLE_NETWORKS])
    ax.set_ylabel("communication overhead (% of step)")
    ax.set_ylim(0, 1.45 * max([b.get_height() for b in ax.patches] + [1.0]))   # the legend above the bars
    ax.legend(fontsize="x-small", loc="upper left", ncol=2)
    ax.set_title("settings closest to the article's overheads")
    return ax


def family_bars(ax, rows):
    """The topology families: data-parallel all-reduce time (s) per family at each GPU
    count, labelled (``rows`` from :func:`flowsolver.study.topology_study`).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> rows = [dict(family="fat-tree", gpus=256, dp_time=1.0), dict(family="torus", gpus=256, dp_time=0.0)]
    >>> [t.get_text() for t in family_bars(Figure().subplots(), rows).texts]
    ['1.00', '0.00']
    """
    families = list(dict.fromkeys(r["family"] for r in rows))
    sizes = sorted({r["gpus"] for r in rows})
    x = np.arange(len(families))
    width = 0.8 / max(len(sizes), 1)
    for i, n in enumerate(sizes):
        by = {r["family"]: r["dp_time"] for r in rows if r["gpus"] == n}
        bars = ax.bar(x + (i - (len(sizes) - 1) / 2) * width, [by.get(f, np.nan) for f in families], width,
                      label=f"{n} GPUs")
        ax.bar_label(bars, fmt="%.2f", fontsize="x-small", padding=1)
    ax.set_xticks(x, families, rotation=20, ha="right")
    ax.set_ylabel("DP all-reduce per step (s)")
    ax.legend(fontsize="x-small")
    ax.set_title("topology families, same job")
    return ax


def study_bars(ax, rows, *, metric: str = "overhead", legend: bool = True):
    """The network study's comparison: the model's value beside the article's per network.

    ``rows`` from :func:`flowsolver.study.network_study`; ``metric`` ``"overhead"``
    (communication share of the step, %) or ``"speedup"`` (against one GPU). ``legend=False``
    leaves the legend to the caller (one for several panels: :func:`flowsolver.study.study_figure`).

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
        article = [100 * (r.article["overhead"] or 0.0) for r in rows]
        ax.set_ylabel("communication overhead (% of step)")
    else:
        model = [r.step.speedup for r in rows]
        article = [r.article["speedup"] or 0.0 for r in rows]
        ax.set_ylabel("speed-up over one GPU")
    fmt = "{:.0f}%" if metric == "overhead" else "{:.1f}"
    given = [r.article[metric] is not None for r in rows]      # None: the article gives none (or another size)
    bars = ax.bar(x - 0.2, model, 0.4, label="flowsolver model")
    ax.bar_label(bars, labels=[fmt.format(v) for v in model], fontsize="x-small", padding=1)  # 0 % labelled too
    bars = ax.bar(x + 0.2, article, 0.4, label="article")
    ax.bar_label(bars, labels=[fmt.format(v) if ok else "n/a" for v, ok in zip(article, given)],
                 fontsize="x-small", padding=1)
    ax.set_xticks(x, [r.label.replace(" (no NVLink), NDR", "\n(no NVLink)") for r in rows], rotation=30, ha="right")
    ax.margins(y=0.12)                                    # room for the labels above the tallest bars
    if legend:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.08), ncol=2, fontsize="small", frameon=False)
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
    for i, (key, part) in enumerate(groups):        # marker and dash vary, so lines that coincide stay visible
        part = part.sort_values(x)
        ax.plot(part[x], part[y] / scale, marker="osD^v"[i % 5], markersize=7 - 1.2 * (i % 4),
                linestyle=["-", "--", ":", "-."][i % 4], label=None if key is None else str(key))
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


def _drawing(graph, result, fabric):
    """What :func:`topology` draws: cables (drawn node pair -> busiest utilisation), the
    drawn nodes, their legend kinds, their row (0 servers, 1 + tier switches) and position."""
    def drawn(n):
        d = graph.nodes[n]
        return ("server", d["server"]) if fabric and d.get("server") is not None else n

    util = {}
    if result is not None:
        for u, v, x in zip(result.links.src, result.links.dst, np.asarray(result.link_utilization)):
            util[u, v] = float(x)
    cables: dict = {}
    for u, v in graph.edges():
        a, b = drawn(u), drawn(v)
        if a != b:
            key = (a, b) if str(a) <= str(b) else (b, a)
            cables[key] = max(cables.get(key, 0.0), util.get((u, v), 0.0))
    nodes = sorted({x for e in cables for x in e} | {drawn(n) for n in graph.nodes}, key=str)
    if len(nodes) > 2000:
        raise ValueError(f"the drawing has {len(nodes)} nodes; topology() draws clusters of <= 2000 "
                         "(fabric=True collapses servers)")

    def kind(x):
        if isinstance(x, tuple):
            gpus = sum(1 for n, d in graph.nodes(data=True) if d.get("server") == x[1] and d.get("kind") == "gpu")
            return f"server ({gpus} GPUs)"
        d = graph.nodes[x]
        tier = d.get("tier", 0)
        role = f" ({d['role']})" if d.get("role") else ""
        return f"switch tier {tier}{role}" if d.get("kind") == "switch" else d.get("kind", "node")

    kinds = {x: kind(x) for x in nodes}
    level = {x: (1 + int(graph.nodes[x].get("tier", 0))) if not isinstance(x, tuple)
             and graph.nodes[x].get("kind") == "switch" else 0 for x in nodes}
    rows: dict = {}
    for x in sorted(nodes, key=_natural):
        rows.setdefault(level[x], []).append(x)
    neighbours: dict = {}
    for a, b in cables:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    pos: dict = {}
    for lv in sorted(rows, reverse=True):      # switches in name order (pods together); servers under their switches
        members = rows[lv]
        above = {x: [pos[y][0] for y in neighbours.get(x, ()) if y in pos] for x in members}
        order = sorted(range(len(members)), key=lambda i: (np.mean(above[members[i]]) if lv == 0 and above[members[i]]
                                                           else 0.0, i))
        row = sorted(rows).index(lv)                    # rows stacked without gaps (no empty tier row)
        pos.update({members[i]: ((j + 0.5) / len(members), row) for j, i in enumerate(order)})
    return cables, nodes, kinds, level, pos


def _natural(x):
    """Sort key that orders names by their numbers ("pod2" before "pod10", server 2 before 10)."""
    import re

    text = str(x)
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def topology(ax, graph, result=None, *, fabric: bool = True, cmap: str = "viridis"):
    """A cluster drawn by tier (servers or GPUs at the bottom, switches above them by tier),
    with a legend of node kinds. ``fabric=True`` (default) draws each server as one node
    (its GPUs, NICs and NVSwitches inside), so a cluster of DGX servers stays readable.
    With a CollectiveResult, every cable is coloured by its utilisation (the larger of its
    two directions, and of the links a collapsed server has to one switch), with a
    colour bar; without one, cables are grey.

    >>> from matplotlib.figure import Figure
    >>> import topologies as tp
    >>> g = tp.fat_tree(4, server="dgx_h100")
    >>> ax = topology(Figure().subplots(), g)
    >>> sorted(t.get_text() for t in ax.get_legend().get_texts())
    ['server (8 GPUs)', 'switch tier 1 (edge)', 'switch tier 2 (aggregation)', 'switch tier 3 (core)']
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    cables, nodes, kinds, level, pos = _drawing(graph, result, fabric)
    order = sorted(cables, key=cables.get)             # the busiest cables drawn last, on top
    segments = [(pos[a], pos[b]) for a, b in order]
    values = np.array([cables[c] for c in order])
    lines = LineCollection(segments, linewidths=0.6 if result is None else 0.4 + 1.6 * values,
                           colors="0.7" if result is None else None, cmap=None if result is None else cmap)
    if result is not None:
        lines.set_array(values)
        lines.set_clim(0.0, 1.0)
        ax.figure.colorbar(lines, ax=ax, label="link utilisation (busiest direction)")
    ax.add_collection(lines)
    palette = ["tab:green", "tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:gray"]
    handles = []
    for i, k in enumerate(sorted(set(kinds.values()))):
        members = [x for x in nodes if kinds[x] == k]
        xy = np.array([pos[x] for x in members])
        size = 40 if k.startswith("server") else 14
        ax.scatter(xy[:, 0], xy[:, 1], s=size, color=palette[i % len(palette)], zorder=3)
        handles.append(Line2D([], [], marker="o", linestyle="", color=palette[i % len(palette)], label=k))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0) if result is None else (0.0, -0.02),
              ncol=1 if result is None else len(handles), fontsize="small", frameon=False)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.5, max(y for _, y in pos.values()) + 0.5)
    ax.set_axis_off()
    name = graph.graph.get("generator", "cluster")
    if result is not None:
        busy = int(np.count_nonzero(values >= 0.99))
        name += f": {result.op} {result.algorithm}, {busy} of {len(values)} cables at >= 99 %"
    ax.set_title(name)
    return ax


def sensitivity_bars(ax, table, *, group_by: str = "tier", percent: bool = True):
    """Time saved per added GB/s (``result.sensitivity()``'s table) for the rows of one
    ``group_by`` ("tier", "tech", "cable_group" or "link", the 12 largest): horizontal bars.

    >>> from matplotlib.figure import Figure
    >>> import topologies as tp
    >>> from flowsolver import collective
    >>> t = collective(tp.fat_tree(4), "all_to_all", 2**24).sensitivity()
    >>> len(sensitivity_bars(Figure().subplots(), t).patches)          # access, agg-core, edge-agg, pcie
    4
    """
    rows = table[table["group_by"] == group_by]
    if rows.empty:
        raise ValueError(f"group_by must be one of {sorted(set(table['group_by']))}, got {group_by!r}")
    column = "saved_percent_per_GBps" if percent else "saved_s_per_GBps"
    rows = rows.sort_values(column, ascending=False).head(12)[::-1]
    bars = ax.barh(rows["group"].astype(str), rows[column])
    ax.bar_label(bars, fmt="%.3g", fontsize="x-small", padding=2)       # a 0 is labelled too
    ax.margins(x=0.15)
    ax.set_xlabel("time saved per GB/s added to each link (" + ("%" if percent else "s") + ")")
    ax.set_title(f"what to upgrade, by {group_by.replace('_', ' ')}")
    return ax


def bottleneck_structure(ax, graph):
    """Draw a bottleneck structure (``RateSensitivity.graph()``): saturated links as red
    squares, flows (or groups) as blue circles, in freeze order from left (first to
    saturate) to right, every node labelled and a legend of the shapes and arrows.
    Links with the same ``name`` at the same freeze level are drawn as one node labelled
    with their count, so ``graph(link_names=routing.links.tier)`` gives one node per tier.

    >>> import scipy.sparse as sp
    >>> from matplotlib.figure import Figure
    >>> from flowsolver import max_min_fair, rate_sensitivity
    >>> A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])
    >>> g = rate_sensitivity(A, max_min_fair(A, [3.0, 1.0]), [3.0, 1.0]).graph()
    >>> bottleneck_structure(Figure().subplots(), g).get_title()
    'bottleneck structure: 2 links, 2 flow nodes'
    """
    import networkx as nx
    from matplotlib.lines import Line2D

    levels = sorted({round(d["level"], 12) for _, d in graph.nodes(data=True)})
    column = {lv: i for i, lv in enumerate(levels)}
    merged, members = {}, {}          # each node -> the node drawn for it; drawn link -> how many links
    for node, d in graph.nodes(data=True):
        key = ("links", d.get("name"), column[round(d["level"], 12)]) if d["kind"] == "link" else node
        merged[node] = key
        members[key] = members.get(key, 0) + 1
    drawn = nx.DiGraph()
    for node, d in graph.nodes(data=True):
        drawn.add_node(merged[node], kind=d["kind"], level=d["level"], flows=d.get("flows", 1))
    for u, v, d in graph.edges(data=True):
        a, b = merged[u], merged[v]
        drawn.add_edge(a, b, flows=drawn.edges[a, b]["flows"] + d.get("flows", 1) if drawn.has_edge(a, b)
                       else d.get("flows", 1))
    pos, count = {}, {}
    for node, d in drawn.nodes(data=True):
        x = 2 * column[round(d["level"], 12)] + (0 if d["kind"] == "link" else 1)
        count[x] = count.get(x, 0) + 1
        pos[node] = (x, -count[x])
    pos = {n: (x, y + (count[x] + 1) / 2) for n, (x, y) in pos.items()}       # each column centred
    links = [n for n, d in drawn.nodes(data=True) if d["kind"] == "link"]
    flows = [n for n, d in drawn.nodes(data=True) if d["kind"] == "flow"]

    def label(n):
        if n in members and n[0] == "links":
            return f"{n[1]}" + (f"\n{members[n]} links" if members[n] > 1 else "")
        name = n[1] if isinstance(n, tuple) else n
        k = drawn.nodes[n]["flows"]
        return f"{name}" + (f"\n{k} flows" if k > 1 else "")

    size = 900 if drawn.number_of_nodes() <= 30 else 300
    nx.draw_networkx_nodes(drawn, pos, nodelist=links, node_shape="s", node_color="tab:red", node_size=size, ax=ax)
    nx.draw_networkx_nodes(drawn, pos, nodelist=flows, node_color="tab:blue", node_size=size, ax=ax)
    held = [(u, v) for u, v in drawn.edges if drawn.nodes[u]["kind"] == "link"]
    passes = [(u, v) for u, v in drawn.edges if drawn.nodes[u]["kind"] != "link"]
    nx.draw_networkx_edges(drawn, pos, edgelist=held, ax=ax, arrows=True, node_size=size, edge_color="tab:red")
    nx.draw_networkx_edges(drawn, pos, edgelist=passes, ax=ax, arrows=True, node_size=size, edge_color="0.5",
                           style="dashed")
    if drawn.number_of_nodes() <= 60:
        for n, (x, y) in pos.items():
            ax.annotate(label(n), (x, y), xytext=(0, -21 if size > 300 else -11), textcoords="offset points",
                        ha="center", va="top", fontsize=7)
    ax.legend(handles=[
        Line2D([], [], marker="s", linestyle="", color="tab:red", label="saturated link(s)"),
        Line2D([], [], marker="o", linestyle="", color="tab:blue", label="flows"),
        Line2D([], [], color="tab:red", label="link holds these flows (their bottleneck)"),
        Line2D([], [], color="0.5", linestyle="dashed", label="flows pass this link, held elsewhere")],
        loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2, fontsize="x-small", frameon=False,
        title="left to right: the order in which the links saturate", title_fontsize="x-small")
    ys = [y for _, y in pos.values()] or [0]
    xs = [x for x, _ in pos.values()] or [0]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.5)
    n_links = sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "link")
    ax.set_title(f"bottleneck structure: {n_links} links, {len(flows)} flow nodes")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    return ax
