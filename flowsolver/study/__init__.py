"""The network study: the article's 64-GPU comparison, reproduced with the training model.

:func:`network_study` times one Llama-3-70B training step on 8 DGX-class servers over each
network of the article (an ideal one, InfiniBand NDR and HDR, RoCE 400G, Ethernet 100G, and
PCIe-only servers without NVLink on NDR) and puts the model's tokens/s, speed-up and
communication overhead beside the article's. :func:`article_search` looks for the
parallelism, batch and overlap settings under which the model gives overheads like the
article's. :func:`topology_study` runs the same job on a fat-tree (the rail-optimised Clos
of a SuperPOD), a DragonFly and a 3-D torus at 256, 1024 and 4096 GPUs. :func:`run` is the
main job (``make run``): it prints all three with the reasons for every difference and writes
a PNG of the comparison.

Modules: ``_article`` (the article's figures, the clusters, the comparison and the search),
``_families`` (the topology families), ``_text`` (the printed text, every figure read from
the results and the catalogue), ``_figure`` (the PNG).
"""

from __future__ import annotations

from ..training import DEFAULT_COMPUTE_EFFICIENCY, Parallelism, Schedule, get_model, training_step
from . import _text
from ._article import (ARTICLE, ARTICLE_SINGLE_GPU, NETWORKS, StudyRow, article_search, cluster, format_table,
                       network_study, roce_efficiency_for)
from ._costs import CostRow, cost_study, format_costs
from ._families import TOPOLOGIES, topology_study
from ._figure import _write_figure, study_figure

__all__ = ["ARTICLE", "ARTICLE_SINGLE_GPU", "NETWORKS", "TOPOLOGIES", "StudyRow", "cluster", "network_study",
           "article_search", "roce_efficiency_for", "topology_study", "format_table", "study_figure", "run",
           "CostRow", "cost_study", "format_costs"]


def run(*, out: str | None = "flowsolver-study.png", quick: bool = False, model="llama-3-70b", nodes: int = 8,
        sizes=(256, 1024, 4096), echo=print) -> dict:
    """The main job: the study's three parts printed with their explanations; the figure
    written to ``out`` (PNG; None for no figure). ``quick`` shrinks the search and the
    topology sizes (for tests). Returns the raw results: ``rows`` (:class:`StudyRow`),
    ``search`` (:func:`article_search`), ``topology`` (:func:`topology_study`), ``figure``
    (the path written, or None).

    >>> run(model="nope", echo=None)
    Traceback (most recent call last):
    ...
    ValueError: unknown model 'nope'; presets: llama-3-8b, llama-3-70b, llama-3-405b, gpt-3-175b, mixtral-8x7b (or pass a ModelSpec)
    """
    spec = get_model(model)
    rows = network_study(model=spec, nodes=nodes)
    for block in _text.overview(spec, rows) + _text.network_notes(spec, rows):
        echo(block)
    search = article_search(model=spec, nodes=nodes, settings=[(8, 1, 1), (1, 1, 3)] if quick else None,
                            batches=[8, 64] if quick else None)
    best = next((r for r in search if r["fits"]), search[0])
    need = roce_efficiency_for(ARTICLE["roce_400g"]["overhead"], best, spec, nodes, DEFAULT_COMPUTE_EFFICIENCY)
    pcie_like = training_step(cluster("pcie_only", nodes), spec,
                              Parallelism(tp=best["tp"], pp=best["pp"], zero=best["zero"]),
                              Schedule(global_batch=best["global_batch"], dp_overlap=best["dp_overlap"]))
    for block in _text.search_section(spec, search, best, need, pcie_like):
        echo(block)
    topo = topology_study(model=spec, sizes=(256,) if quick else sizes)
    for block in _text.topology_section(topo):
        echo(block)
    figure = None
    for block in _text.your_own_section(spec, nodes):
        echo(block)
    if out:
        figure = _write_figure(rows, out, search, topo)
        echo(f"\nfigure written to {figure}")
    return dict(rows=rows, search=search, topology=topo, figure=figure)
