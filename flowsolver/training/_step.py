"""training_step: the arguments checked, the communication solved once, the step composed."""

from __future__ import annotations

import topologies as tp_

from .. import _checks
from ..routing import unchanged
from ._compose import StepResult, checked_schedule, compose
from ._layout import ParallelLayout
from ._memory import check_zero
from ._models import ModelSpec, get_model
from ._profile import solve_profile

__all__ = ["training_step", "DEFAULT_MFU", "DEFAULT_BATCH"]

# Llama 3 405B trained at 38-43 % MFU on 16k H100s (Llama 3 paper, table 4). We take the top
# of that range as the fraction of peak reached while computing; the end-to-end MFU the
# model reports comes out lower once communication is exposed.
DEFAULT_MFU = 0.43
#: sequences per step when none is given: 4 M tokens at 8192 (rounded up to whole microbatches)
DEFAULT_BATCH = 512
_ALGORITHM_KEYS = ("tp", "pp", "ep", "dp")


def _layout(graph, spec: ModelSpec, *, tp, pp, dp, ep, ranks) -> ParallelLayout:
    """The placement, its degrees checked against the GPU count and the model."""
    n = len(tp_.gpus(graph))
    tp, pp, ep = (_checks.integer(name, value) for name, value in (("tp", tp), ("pp", pp), ("ep", ep)))
    if dp is None:
        dp = n // (tp * pp) if n % (tp * pp) == 0 else 0
    else:
        dp = _checks.integer("dp", dp)
    if tp * pp * dp != n:
        raise ValueError(f"tp * pp * dp must equal the GPU count {n}, got tp={tp}, pp={pp}, dp={dp} "
                         f"({tp * pp * dp})")
    if spec.layers % pp:
        raise ValueError(f"pp ({pp}) must divide the model's {spec.layers} layers")
    if ep > 1 and (spec.experts == 1 or dp % ep or spec.experts % ep):
        raise ValueError(f"ep ({ep}) needs a mixture-of-experts model and must divide dp ({dp}) and the "
                         f"experts ({spec.experts})")
    placement = () if ranks is None else tuple(_checks.rank_indices(graph, ranks))
    return ParallelLayout(tp=tp, pp=pp, dp=dp, ep=ep, placement=placement)


def _gpu(graph, gpu):
    """The GPU type: ``gpu`` if given, else the one type the graph's GPU nodes carry."""
    if gpu is None:
        types = {graph.nodes[v].get("gpu_type") for v in tp_.gpus(graph)}
        if None in types or len(types) != 1:
            raise ValueError(f"the graph's GPUs have types {sorted(map(str, types))}: pass gpu= (one type)")
        gpu = types.pop()
    return tp_.get_gpu(gpu)


def _algorithms(algorithms) -> dict:
    out = {key: "auto" for key in _ALGORITHM_KEYS} | dict(algorithms or {})
    unknown = set(out) - set(_ALGORITHM_KEYS)
    if unknown:
        raise ValueError(f"algorithms keys must be among tp, pp, ep, dp, got {sorted(unknown)}")
    return out


def training_step(graph, *, model="llama-3-70b", tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1,
                  global_batch: int | None = None, micro_batch: int = 1, mfu: float = DEFAULT_MFU,
                  zero: int = 1, dp_overlap: float = 1.0, ranks=None, gpu=None,
                  algorithms: dict | None = None, collective_options: dict | None = None) -> StepResult:
    """Time one training step of ``model`` on the cluster ``graph``.

    The collectives are solved once into a :class:`CommProfile`; the step is
    :func:`compose` of it and the :class:`Schedule` (global batch, DP overlap, MFU), so
    :meth:`StepResult.recompose` re-times another schedule without solving again.

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster (``topologies`` generator or hand-built).
    model : str or ModelSpec
        A preset of ``MODELS`` or a shape.
    tp, pp, dp, ep : int
        Tensor, pipeline, data and expert parallel degrees; ``tp * pp * dp`` must equal the
        GPU count (``dp`` defaults to the quotient); ``ep`` divides ``dp`` and the experts.
    global_batch : int, optional
        Sequences per step (default 512, 4 M tokens at 8192, rounded up to a multiple of
        ``dp x micro_batch``).
    micro_batch : int
        Sequences per microbatch.
    mfu : float
        Fraction of the dense bf16 peak reached while computing (default 0.43, see :mod:`flowsolver.training`).
    zero : {0, 1, 2, 3}
        0 all-reduce; 1 / 2 distributed optimizer (reduce-scatter + all-gather); 3 FSDP.
    dp_overlap : float in [0, 1]
        Fraction of the overlap window (see :mod:`flowsolver.training`) the DP traffic may hide behind.
    ranks : sequence of int, optional
        Placement: GPU rank of each logical rank (default ``topologies.gpus`` order).
    gpu : str or GpuSpec, optional
        GPU type when the graph's GPU nodes carry none.
    algorithms : dict, optional
        Collective algorithm per parallelism (``tp``, ``pp``, ``ep``, ``dp``), default ``"auto"``.
    collective_options : dict, optional
        Passed to every collective (``policy``, ``efficiency``, ``step_latency``, ...).

    Examples
    --------
    >>> import topologies as tp
    >>> r = training_step(tp.rail_optimized(nodes=8), model="llama-3-70b", tp=8, dp=8, global_batch=64)
    >>> r.gpus, r.microbatches, round(sum(r.breakdown.values()) / r.step_time, 9)
    (64, 8, 1.0)
    >>> r.phases["tp"].algorithm, r.phases["dp"].bottleneck_tier
    ('nvls', 'access')
    """
    spec = get_model(model)
    _checks.checked_graph(graph)
    micro_batch = _checks.integer("micro_batch", micro_batch)
    layout = _layout(graph, spec, tp=tp, pp=pp, dp=dp, ep=ep, ranks=ranks)
    zero = check_zero(zero)
    if global_batch is None:
        unit = layout.dp * micro_batch
        global_batch = -(-DEFAULT_BATCH // unit) * unit
    schedule = checked_schedule(dp=layout.dp, micro_batch=micro_batch, global_batch=global_batch,
                                dp_overlap=dp_overlap, mfu=mfu)
    gpu_spec = _gpu(graph, gpu)
    with unchanged(graph):          # every group's steps routed on one index of the graph
        profile = solve_profile(graph, spec, layout, micro_batch=micro_batch, zero=zero, gpu=gpu_spec,
                                algorithms=_algorithms(algorithms), options=dict(collective_options or {}))
    return compose(profile, schedule)
