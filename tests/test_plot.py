"""Plots render under Agg with the artists they should have."""

from matplotlib.figure import Figure

import topologies as tp
from flowsolver import collective, plot


def test_topology_highlights_the_saturated_links():
    g = tp.fat_tree(4, server=None)
    r = collective(g, "all_to_all", 2**24, algorithm="direct")
    hot = int((r.link_utilization >= 0.99).sum())
    ax = plot.topology(Figure().subplots(), g, r)
    assert hot > 0 and ax.get_title().endswith(f"{hot} saturated links")
    assert len(ax.collections) == 3                  # nodes, ordinary edges, hot edges


def test_study_bars_and_busbw_curves(tmp_path):
    from flowsolver.study import network_study

    rows = network_study(global_batch=64, networks=("ideal", "ib_ndr", "eth_100g"))
    fig = Figure()
    ax1, ax2 = fig.subplots(1, 2)
    plot.study_bars(ax1, rows, metric="speedup")
    plot.study_bars(ax2, rows)
    assert len(ax1.patches) == len(ax2.patches) == 6
    assert [t.get_text() for t in ax1.get_xticklabels()][1] == "InfiniBand NDR"
    fig.savefig(tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
