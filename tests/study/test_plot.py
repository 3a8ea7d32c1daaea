"""Plots render under Agg with the artists they should have."""

import pytest
from matplotlib.figure import Figure

import topologies as tp
from flowsolver import collective, plot


def test_topology_colours_cables_by_utilisation_with_legends():
    g = tp.fat_tree(4, server=None)
    r = collective(g, "all_to_all", 2**24, algorithm="direct")
    node = lambda n: f"server {g.nodes[n]['server']}" if g.nodes[n].get("server") is not None else n  # noqa: E731
    cable = {}          # a cable between two drawn nodes (servers collapsed): its busiest link
    for u, v, x in zip(r.links.src, r.links.dst, r.link_utilization):
        if node(u) != node(v):
            key = tuple(sorted((node(u), node(v))))
            cable[key] = max(cable.get(key, 0.0), x)
    busy = sum(1 for x in cable.values() if x >= 0.99)
    fig = Figure()
    ax = plot.topology(fig.subplots(), g, r)
    assert busy > 0 and ax.get_title().endswith(f"{busy} of {len(cable)} cables at >= 99 %")
    assert len(fig.axes) == 2                          # the drawing and its colour bar
    labels = sorted(t.get_text() for t in ax.get_legend().get_texts())
    assert labels == ["server (1 GPUs)", "switch tier 1 (edge)", "switch tier 2 (aggregation)", "switch tier 3 (core)"]


def test_topology_collapses_servers():
    g = tp.fat_tree(4, server="dgx_h100")             # 2 DGX servers: 2 nodes, not 2 x 30
    ax = plot.topology(Figure().subplots(), g)
    servers = sum(1 for n, d in g.nodes(data=True) if d["kind"] == "switch") + 2
    assert sum(len(c.get_offsets()) for c in ax.collections[1:]) == servers


def _rows(*specs):
    """Small synthetic study rows: (network, label, model overhead, model speed-up, article)."""
    from types import SimpleNamespace

    from flowsolver.study import ARTICLE, StudyRow

    return [StudyRow(network=n, label=label, article=ARTICLE[n],
                     step=SimpleNamespace(comm_overhead=ov, speedup=sp, model="llama-3-70b", gpus=64))
            for n, label, ov, sp in specs]


def test_study_bars_put_the_model_beside_the_article(tmp_path):
    rows = _rows(("ideal", "ideal network", 0.0, 64.0), ("ib_ndr", "InfiniBand NDR", 0.12, 56.3),
                 ("pcie_only", "PCIe only (no NVLink), NDR", 0.4, 38.4))
    fig = Figure()
    ax1, ax2 = fig.subplots(1, 2)
    plot.study_bars(ax1, rows, metric="speedup")
    plot.study_bars(ax2, rows)
    assert len(ax1.patches) == len(ax2.patches) == 6
    assert [t.get_text() for t in ax1.get_xticklabels()] == ["ideal network", "InfiniBand NDR", "PCIe only\n(no NVLink)"]
    assert [round(p.get_height(), 6) for p in ax2.patches] == [0.0, 12.0, 40.0, 0.0, 41.0, 80.0]
    # the article gives no PCIe speed-up: its bar is labelled n/a, not 0
    assert "n/a" in [t.get_text() for t in ax1.texts] and ax1.get_title() == "llama-3-70b, 64 GPUs: speedup"
    fig.savefig(tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="metric must be 'overhead' or 'speedup'"):
        plot.study_bars(ax1, rows, metric="tokens")


def test_the_study_figure_has_its_three_parts_labelled():
    from flowsolver.study import ARTICLE, study_figure

    rows = _rows(("ideal", "ideal network", 0.0, 64.0), ("ib_ndr", "InfiniBand NDR", 0.12, 56.3))
    overheads = dict(ib_ndr=0.41, ib_hdr=0.5, roce_400g=0.3, eth_100g=0.7)
    search = [dict(tp=8, pp=1, dp=8, zero=1, global_batch=8, dp_overlap=0.0, overheads=overheads)]
    topology = [dict(family="fat-tree", gpus=256, dp_time=0.7), dict(family="torus", gpus=256, dp_time=5.8)]
    fig = study_figure(rows, search, topology)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 4 and "closest to the article" in titles[2] and "topology families" in titles[3]
    overhead_labels = [t.get_text() for t in fig.axes[1].texts]
    # the ideal network's model and article overheads are 0 %: labelled, not blank
    assert overhead_labels.count("0%") >= 2
    article_labels = [t.get_text() for t in fig.axes[2].texts]
    assert f"{100 * ARTICLE['ib_ndr']['overhead']:.0f}%" in article_labels and "41%" in article_labels


def test_the_study_figure_has_one_legend_for_its_two_comparison_panels():
    from flowsolver.study import study_figure

    rows = _rows(("ideal", "ideal network", 0.0, 64.0), ("ib_ndr", "InfiniBand NDR", 0.12, 56.3))
    fig = study_figure(rows)
    assert fig.axes[0].get_legend() is None and fig.axes[1].get_legend() is None
    assert len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["flowsolver model", "article"]


def test_topology_puts_each_server_under_its_own_switches():
    from flowsolver.plot import _drawing

    g = tp.fat_tree(8, server="dgx_h100")             # 16 servers, each cabled to two edge switches
    cables, nodes, kinds, level, pos = _drawing(g, None, True)
    servers = [x for x in nodes if level[x] == 0]
    assert len(servers) == 16
    for s in servers:
        above = [pos[b if a == s else a][0] for a, b in cables if s in (a, b)]
        assert min(above) - 1e-9 <= pos[s][0] <= max(above) + 1e-9
    # switches in name order with numbers compared as numbers: the edge row runs pod0 .. pod7, pods together
    edges = sorted((x for x in nodes if "edge" in str(x)), key=lambda x: pos[x][0])
    pods = [int(str(x).split("/")[0][3:]) for x in edges]
    assert len(edges) == 32 and pods == sorted(pods)


def test_bottleneck_structure_draws_same_named_links_as_one_labelled_node():
    import scipy.sparse as sp

    from flowsolver import max_min_fair, rate_sensitivity

    # two links of capacity 1, each holding one flow at rate 1: the same level, both named "access"
    A = sp.csc_matrix([[1.0, 0.0], [0.0, 1.0]])
    g = rate_sensitivity(A, max_min_fair(A, [1.0, 1.0]), [1.0, 1.0]).graph(link_names=["access", "access"])
    ax = plot.bottleneck_structure(Figure().subplots(), g)
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["0", "1", "access\n2 links"]
    assert ax.get_title() == "bottleneck structure: 2 links, 2 flow nodes"
    assert len(ax.get_legend().get_texts()) == 4


def test_sensitivity_bars_label_every_bar_zero_included():
    import pandas as pd

    table = pd.DataFrame(dict(group_by=["tier", "tier"], group=["a", "b"], saved_s_per_GBps=[1.0, 0.0],
                              saved_percent_per_GBps=[2.0, 0.0]))
    ax = plot.sensitivity_bars(Figure().subplots(), table)
    assert sorted(t.get_text() for t in ax.texts) == ["0", "2"]
