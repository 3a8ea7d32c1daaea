"""Planning a training job: the best parallel layout, schedule and placement of a model on a
cluster, memory-feasible, searched on the real fabric.

:func:`plan` enumerates tensor, context, pipeline, data and expert parallel degrees, virtual
stages, micro-batch, recompute mode, ZeRO stage, sequence parallelism and the rank order
(``_space``: pruned before any network work, with a count per reason), bounds each layout's
step from below without the network (compute and pipeline bubble), then times the best
bounds exactly as :func:`flowsolver.training_step` does, each distinct collective kind solved
once (``_search``), into a ranked :class:`Plan` with the Pareto front of throughput against
memory (``_result``). :func:`place_job` (``_placement``) gives a job its GPUs by a placement
policy (:data:`PLACEMENTS`: packed, rail_aligned, spread, rail_unaligned), which ``plan``
searches when asked.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "._search": ("plan", "KindCache", "STEP_OPTIONS"),
    "._result": ("Plan", "PlanRow", "pareto_rows"),
    "._space": ("Layout", "Space", "layout_space", "PRUNE_REASONS", "DEFAULT_ORDERS"),
    "._placement": ("PLACEMENTS", "place_job", "server_racks"),
})

if TYPE_CHECKING:
    from ._search import plan, KindCache, STEP_OPTIONS
    from ._result import Plan, PlanRow, pareto_rows
    from ._space import Layout, Space, layout_space, PRUNE_REASONS, DEFAULT_ORDERS
    from ._placement import PLACEMENTS, place_job, server_racks

__all__ = ["plan", "Plan", "PlanRow", "Layout", "Space", "layout_space", "PRUNE_REASONS", "DEFAULT_ORDERS",
           "KindCache", "STEP_OPTIONS", "pareto_rows", "PLACEMENTS", "place_job", "server_racks"]
