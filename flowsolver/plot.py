"""Plots (matplotlib, imported lazily): each takes the ``ax`` to draw on first and returns it;
nothing here calls ``plt.show()``."""

from __future__ import annotations

import numpy as np

__all__ = ["study_bars"]


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
