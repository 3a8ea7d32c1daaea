"""A job's communication solved once: per parallelism the collective, its algorithm, bytes
and per-call time with every group of its kind running at once."""

from __future__ import annotations

from dataclasses import dataclass, field

from topologies import GpuSpec

from ..collectives import concurrent
from ..routing import first_tier
from ._layout import ParallelLayout
from ._models import BF16, ModelSpec

__all__ = ["CommTiming", "CommProfile", "solve_profile"]


@dataclass(frozen=True)
class CommTiming:
    """One parallelism's collective, solved on the cluster.

    ``name`` is ``tp``, ``pp``, ``ep``, ``dp`` or ``dp_experts`` (the gradients of the
    experts' shards, reduced among the DP ranks holding the same shard); ``op`` the
    collective solved (``all_reduce``, ``send_recv``, ``all_to_all``, or ``reduce_scatter``
    for DP with ZeRO >= 1), of ``bytes`` per call (nccl-tests sizes); ``per_call`` seconds
    with all ``groups`` groups of ``group_size`` ranks at once, in lockstep; ``gather`` the
    seconds of the matching ``all_gather`` of the same bytes (DP with ZeRO >= 1: the updated
    parameters; 0 otherwise); ``bottleneck`` the links that set the first step's time
    (:class:`flowsolver.routing.Bottleneck` records, most utilised first).
    """

    name: str
    op: str
    algorithm: str
    bytes: float
    per_call: float
    groups: int
    group_size: int
    gather: float = 0.0
    bottleneck: tuple = ()
    result: object = field(default=None, repr=False, compare=False)          # the CollectiveResult timed
    gather_result: object = field(default=None, repr=False, compare=False)   # its all_gather's

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the link that holds this collective back most (``""`` if none)."""
        return first_tier(self.bottleneck)


@dataclass(frozen=True)
class CommProfile:
    """What a step's communication costs, independent of batch, overlap and MFU.

    ``model``, ``layout`` (degrees and placement), ``micro_batch`` (sequences; it sets the
    activation sizes) and ``zero`` (it sets the DP collectives) fix the collectives; ``gpu``
    (:class:`topologies.GpuSpec`) its peak and memory; ``comms`` maps each communicating
    parallelism to its :class:`CommTiming`, in the order ``tp``, ``pp``, ``ep``, ``dp``,
    ``dp_experts`` (a degree of 1 communicates nothing and has no entry).
    """

    model: ModelSpec
    layout: ParallelLayout
    micro_batch: int
    zero: int
    gpu: GpuSpec
    comms: dict = field(default_factory=dict)


def _timed(graph, op, size, groups, algorithm, options):
    """Per-call seconds with every group at once (in lockstep: the groups of one
    parallelism are symmetric), the algorithm and the links that set the time."""
    together = concurrent(graph, [dict(op=op, size=size, ranks=g, algorithm=algorithm) for g in groups],
                          alone=False, lockstep=True, **options)
    return together.makespan, together.algorithms[0], together.bottleneck, together.lockstep


def _plan(model: ModelSpec, layout: ParallelLayout, micro_batch: int, zero: int) -> list:
    """The collectives of a step: ``(name, kind, op, bytes, groups)`` per parallelism that
    communicates (``kind`` names the entry of ``algorithms`` that applies).

    * TP: all-reduces of ``micro_batch x seq_len x hidden`` bf16 activations;
    * PP: ``micro_batch x seq_len x hidden / tp`` bytes to the next stage;
    * EP: all-to-alls of ``micro_batch x seq_len x hidden x top_k / tp`` bytes per rank;
    * DP: the bf16 gradients of a GPU's dense shard ``(N - N_experts) / (tp pp)``, and of its
      expert shard ``N_experts / (tp pp ep)`` among the ``dp / ep`` ranks holding it.
    """
    activation = micro_batch * model.seq_len * model.hidden * BF16
    plan = []
    if layout.tp > 1:
        plan.append(("tp", "tp", "all_reduce", activation, layout.groups("tp")))
    if layout.pp > 1:
        plan.append(("pp", "pp", "send_recv", activation / layout.tp, layout.groups("pp")))
    if layout.ep > 1:
        plan.append(("ep", "ep", "all_to_all", activation * model.top_k / layout.tp, layout.groups("ep")))
    shard = layout.tp * layout.pp
    dp_op = "all_reduce" if zero == 0 else "reduce_scatter"
    if layout.dp > 1:
        plan.append(("dp", "dp", dp_op, (model.params - model.expert_params) / shard * BF16, layout.groups("dp")))
    if model.expert_params and layout.dp // layout.ep > 1:
        plan.append(("dp_experts", "dp", dp_op, model.expert_params / (shard * layout.ep) * BF16,
                     layout.groups("dp_experts")))
    return plan


def solve_profile(graph, model: ModelSpec, layout: ParallelLayout, *, micro_batch: int, zero: int, gpu,
                  algorithms: dict, options: dict) -> CommProfile:
    """Solve every collective of the step once on ``graph`` (:func:`flowsolver.concurrent`,
    lockstep) into a :class:`CommProfile`; ``algorithms`` maps ``tp``, ``pp``, ``ep``, ``dp``
    to an algorithm (or ``"auto"``), ``options`` goes to every collective.

    >>> import topologies as tp
    >>> from flowsolver.training import ParallelLayout, get_model
    >>> prof = solve_profile(tp.rail_optimized(2), get_model("llama-3-8b"), ParallelLayout(tp=8, pp=1, dp=2),
    ...                      micro_batch=1, zero=1, gpu=tp.get_gpu("h100_sxm"),
    ...                      algorithms=dict(tp="auto", dp="ring"), options={})
    >>> list(prof.comms), prof.comms["dp"].op, prof.comms["dp"].group_size, prof.comms["dp"].gather > 0
    (['tp', 'dp'], 'reduce_scatter', 2, True)
    """
    comms = {}
    for name, kind, op, size, groups in _plan(model, layout, micro_batch, zero):
        per_call, algorithm, bottleneck, result = _timed(graph, op, size, groups, algorithms[kind], options)
        gather, gather_result = 0.0, None
        if op == "reduce_scatter":
            gather, _, _, gather_result = _timed(graph, "all_gather", size, groups, algorithm, options)
        comms[name] = CommTiming(name=name, op=op, algorithm=algorithm, bytes=size, per_call=per_call,
                                 groups=len(groups), group_size=len(groups[0]), gather=gather,
                                 bottleneck=bottleneck, result=result, gather_result=gather_result)
    return CommProfile(model=model, layout=layout, micro_batch=micro_batch, zero=zero, gpu=gpu, comms=comms)
