"""The study's figure: the network comparison beside the article's, the settings search and
the topology families (matplotlib, imported on use)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._article import ARTICLE

__all__ = ["study_figure"]


def study_figure(rows, search=None, topology=None):
    """The study's figure (a matplotlib Figure): the technology comparison beside the
    article's (speed-up and overhead), the settings search and the topology families (the
    panels whose results are given), every bar labelled with its value.

    >>> from flowsolver.study import network_study
    >>> len(study_figure(network_study(nodes=1, global_batch=8, networks=("ideal",))).axes)
    2
    """
    from matplotlib.figure import Figure

    from ..plot import family_bars, search_bars, study_bars

    panels = 2 + (search is not None) + (topology is not None)
    fig = Figure(figsize=(5.5 * panels, 4.6), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(1, panels)))
    first = axes[0]
    study_bars(axes.pop(0), rows, metric="speedup", legend=False)
    study_bars(axes.pop(0), rows, metric="overhead", legend=False)
    fig.legend(*first.get_legend_handles_labels(), loc="outside lower left", ncol=2, fontsize="small", frameon=False)
    if search is not None:
        search_bars(axes.pop(0), search, ARTICLE)
    if topology is not None:
        family_bars(axes.pop(0), topology)
    return fig


def _write_figure(rows, path, search=None, topology=None) -> str:
    """:func:`study_figure` written to exactly ``path`` (PNG unless its suffix names another
    format matplotlib writes); returns the path."""
    fig = study_figure(rows, search, topology)
    known = {f".{k}" for k in fig.canvas.get_supported_filetypes()}
    fig.savefig(path, dpi=110, format=None if Path(path).suffix.lower() in known else "png")
    return str(path)
