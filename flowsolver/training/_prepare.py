"""prepare_step: training_step's arguments, each checked (a ``ValueError`` / ``TypeError``
naming the bad one), into what it solves (the profile's arguments) and composes (the
:class:`Schedule`)."""

from __future__ import annotations

import dataclasses

import topologies as tp_

from .. import _checks
from ..collectives import checked_collective_options
from ..routing import gpu_nodes
from ._schedule import check_recompute_layers, checked_schedule, default_batch, default_tp_overlap
from ._compute import check_precision
from ._layout import DEFAULT_ORDER, ParallelLayout, check_sequence_split, checked_etp
from ._memory import check_fp8_param_gather, check_zero, gather_bytes_of
from ._models import ModelSpec, get_model
from ._parallelism import REDUCE_DTYPES, check_param_sync
from ._pipeline import stage_layers

__all__ = ["prepare_step", "PreparedStep", "check_interleaved", "check_moe_sequence_parallel", "interleaving_refused",
           "moe_needs_sequence_parallel"]

_ALGORITHM_KEYS = ("tp", "cp", "pp", "ep", "dp")


def _layout(graph, spec: ModelSpec, *, tp, pp, dp, ep, cp, vp, ranks, order, gpus=None, etp=None) -> ParallelLayout:
    """The placement, its degrees checked against the GPU count (``gpus``, when the caller
    knows it) and the model."""
    n = len(tp_.gpus(graph)) if gpus is None else gpus
    tp, pp, ep, cp, vp = (_checks.integer(name, value) for name, value in
                          (("tp", tp), ("pp", pp), ("ep", ep), ("cp", cp), ("vp", vp)))
    cells = tp * pp * cp
    if dp is None:
        if n % cells:
            raise ValueError(f"tp * cp * pp must divide the GPU count {n} (dp is the quotient), got tp={tp}, "
                             f"cp={cp}, pp={pp} ({cells})")
        dp = n // cells
    else:
        dp = _checks.integer("dp", dp)
    if cells * dp != n:
        raise ValueError(f"tp * cp * pp * dp must equal the GPU count {n}, got tp={tp}, cp={cp}, pp={pp}, dp={dp} "
                         f"({cells * dp})")
    # Megatron-Core's attention (megatron/core/transformer/attention.py): divide(num_attention_heads,
    # tp) and divide(num_query_groups, tp), each an assert that tp divides them
    if spec.heads % tp or spec.kv_heads % tp:
        raise ValueError(f"tp ({tp}) must divide the attention heads of {spec.name} ({spec.heads}) and its KV heads "
                         f"({spec.kv_heads}): each TP rank holds whole heads (Megatron-Core splits the heads and the "
                         f"query groups over the TP group)")
    if cp > 1 and spec.seq_len % (2 * cp):        # no ring attention at cp 1: any length
        raise ValueError(f"cp ({cp}) must split the sequence of {spec.seq_len} tokens into 2 x cp equal chunks "
                         f"(load-balanced ring attention): 2 cp must divide seq_len")
    if vp > 1 and pp == 1:
        raise ValueError(f"vp ({vp}) interleaves pipeline stages: it needs pp > 1")
    stage_layers(spec.layers, pp, vp)           # a ValueError naming pp / vp when they do not split
    etp = checked_etp(etp, tp)
    if etp != tp and spec.experts == 1:
        raise ValueError(f"etp ({etp}) sets the expert layers' TP degree: it needs a mixture-of-experts model; "
                         f"{spec.name} is dense (leave etp None)")
    folded = dp * cp * tp // etp          # Megatron-Core's ep x expert DP of a stage
    if ep > 1 and (spec.experts == 1 or folded % ep or spec.experts % ep):
        over = f"dp x cp ({dp} x {cp}" if etp == tp else f"tp x dp x cp at etp 1 ({tp} x {dp} x {cp}"
        raise ValueError(f"ep ({ep}) needs a mixture-of-experts model and must divide {over}: the "
                         f"expert layers fold CP into their data parallel ranks) and the experts ({spec.experts})")
    placement = () if ranks is None else tuple(_checks.rank_indices(graph, ranks))
    return ParallelLayout(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, vp=vp, placement=placement,
                          order=DEFAULT_ORDER if order is None else order, etp=etp)


def interleaving_refused(pp: int, vp: int, microbatches: int) -> bool:
    """Whether Megatron-Core refuses an interleaved pipeline (``vp > 1``) of ``microbatches``
    per step over ``pp`` stages (:func:`check_interleaved`, whose rule it is).

    >>> interleaving_refused(4, 5, 8), interleaving_refused(4, 5, 6), interleaving_refused(4, 1, 2)
    (False, True, False)
    """
    return vp > 1 and (microbatches < pp or microbatches % pp != 0)


def moe_needs_sequence_parallel(spec: ModelSpec, tp: int, sequence_parallel: bool) -> bool:
    """Whether Megatron-Core refuses a mixture of experts with ``tp > 1`` and sequence
    parallelism off (:func:`check_moe_sequence_parallel`, whose rule it is).

    >>> from flowsolver.training import get_model
    >>> moe_needs_sequence_parallel(get_model("mixtral-8x7b"), 2, False)
    True
    """
    return spec.experts > 1 and tp > 1 and not sequence_parallel


def check_interleaved(pp: int, vp: int, microbatches: int) -> None:
    """Refuse an interleaved pipeline (``vp > 1``) whose ``microbatches`` per step are fewer
    than ``pp`` or not a multiple of it: Megatron-Core's interleaved 1F1B runs the
    microbatches in groups of ``microbatch_group_size_per_vp_stage`` (default ``pp``,
    megatron/core/model_parallel_config.py) and
    ``forward_backward_pipelining_with_interleaving`` (megatron/core/pipeline_parallel/schedules.py,
    NVIDIA/Megatron-LM d98e8a6) raises a ``ValueError`` when the group is larger than the
    microbatches ("The number of contiguous micro-batches in a virtual pipeline stage should
    range in [PP, M]") and a ``RuntimeError`` when ``0 < M % PP < PP`` ("The remainder of M
    ... should be 0, or larger than or equal to the pipeline-parallel size").

    >>> check_interleaved(4, 5, 8)
    >>> check_interleaved(4, 5, 6)
    Traceback (most recent call last):
    ...
    ValueError: vp (5) interleaves the pipeline: its microbatches per step (global_batch / (dp x micro_batch) = 6) must be at least pp (4) and a multiple of it (Megatron-Core's interleaved schedule refuses others); raise or round the global batch, or use vp=1
    """
    if interleaving_refused(pp, vp, microbatches):
        raise ValueError(f"vp ({vp}) interleaves the pipeline: its microbatches per step (global_batch / (dp x "
                         f"micro_batch) = {microbatches}) must be at least pp ({pp}) and a multiple of it "
                         f"(Megatron-Core's interleaved schedule refuses others); raise or round the global batch, "
                         f"or use vp=1")


def check_moe_sequence_parallel(spec: ModelSpec, tp: int, sequence_parallel: bool) -> None:
    """Refuse a mixture of experts trained with ``tp > 1`` and sequence parallelism off:
    Megatron-Core's ``MoELayer.forward`` raises ``ValueError("During training, performance may
    degrade if MoE and tensor parallelism are enabled without also enabling sequence
    parallelism.")`` (megatron/core/transformer/moe/moe_layer.py, NVIDIA/Megatron-LM d98e8a6;
    until May 2024 megatron/training/arguments.py asserted it: "When using MoE and tensor
    parallelism, sequence parallelism must be used.").

    >>> from flowsolver.training import get_model
    >>> check_moe_sequence_parallel(get_model("mixtral-8x7b"), 2, True)
    >>> check_moe_sequence_parallel(get_model("mixtral-8x7b"), 2, False)
    Traceback (most recent call last):
    ...
    ValueError: sequence_parallel must be True for a mixture of experts (mixtral-8x7b) with tp > 1 (tp=2): Megatron-Core's MoE layer refuses to train with tensor parallelism without sequence parallelism
    """
    if moe_needs_sequence_parallel(spec, tp, sequence_parallel):
        raise ValueError(f"sequence_parallel must be True for a mixture of experts ({spec.name}) with tp > 1 "
                         f"(tp={tp}): Megatron-Core's MoE layer refuses to train with tensor parallelism without "
                         f"sequence parallelism")


def checked_expert_routing(spec: ModelSpec, top_k, capacity_factor) -> tuple:
    """``top_k`` (default the model's) and ``capacity_factor`` (default 1: dropless) checked
    against the model's experts."""
    if spec.experts == 1 and (top_k not in (None, 1) or capacity_factor is not None):
        raise ValueError(f"top_k and capacity_factor need a mixture-of-experts model; {spec.name} is dense "
                         f"(experts = 1)")
    top_k = spec.top_k if top_k is None else _checks.integer("top_k", top_k, maximum=spec.experts)
    if capacity_factor is None:
        return top_k, 1.0
    factor = _checks.positive_number("capacity_factor", capacity_factor)
    if factor > spec.experts / top_k:
        raise ValueError(f"capacity_factor ({factor}) must be <= experts / top_k = {spec.experts / top_k:g}: an "
                         f"expert cannot take more than every token")
    return top_k, factor


def checked_gpu(graph, gpu):
    """The GPU type: ``gpu`` if given, else the one type the graph's GPU nodes carry."""
    if gpu is None:
        types = {graph.nodes[v].get("gpu_type") for v in tp_.gpus(graph)}
        if None in types or len(types) != 1:
            raise ValueError(f"the graph's GPUs have types {sorted(map(str, types))}: pass gpu= (one type)")
        gpu = types.pop()
    return tp_.get_gpu(gpu)


def _algorithms(algorithms) -> dict:
    out = {key: "auto" for key in _ALGORITHM_KEYS} | {"cp": "ring"} | dict(algorithms or {})
    unknown = set(out) - set(_ALGORITHM_KEYS)
    if unknown:
        raise ValueError(f"algorithms keys must be among tp, cp, pp, ep, dp, got {sorted(unknown)}")
    return out


@dataclasses.dataclass(frozen=True)
class PreparedStep:
    """What :func:`training_step` solves and composes, every argument checked: ``solve`` the
    keyword arguments of :func:`flowsolver.training._profile.solve_profile` (but the graph),
    ``schedule`` the :class:`Schedule` composed with the profile."""

    solve: dict
    schedule: object


def prepare_step(graph, *, model, tp, pp, dp, ep, cp, vp, global_batch, micro_batch, seq_len, compute_efficiency,
                 precision, recompute, recompute_layers, attention_efficiency, sequence_parallel, tp_overlap, top_k,
                 capacity_factor, zero, dp_overlap, ranks, order, gpu, algorithms, collective_options, attention,
                 fp8_recipe, power_cap, kernel_utilization, reduce_dtype, fp8_param_gather, tp_overlap_impl,
                 check_graph: bool = True, etp=None, param_sync: str = "all_gather") -> PreparedStep:
    """:func:`training_step`'s arguments checked (a ``ValueError`` / ``TypeError`` naming the
    bad one) into what it solves and composes; ``check_graph=False`` skips the graph's own
    check (a caller that checked it once and keeps it unchanged, e.g. :func:`flowsolver.plan`
    inside :func:`flowsolver.routing.unchanged`: the GPUs are then counted from its routing
    index)."""
    spec = get_model(model)
    if seq_len is not None:
        spec = dataclasses.replace(spec, seq_len=_checks.integer("seq_len", seq_len))
    if check_graph:
        _checks.checked_graph(graph)
    collective_options = checked_collective_options(collective_options, graph)
    micro_batch = _checks.integer("micro_batch", micro_batch)
    layout = _layout(graph, spec, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, vp=vp, ranks=ranks, order=order,
                     gpus=None if check_graph else len(gpu_nodes(graph)), etp=etp)
    zero = check_zero(zero)
    top_k, factor = checked_expert_routing(spec, top_k, capacity_factor)
    if spec.experts > 1:
        # Megatron-Core gives every expert at least one token of a rank's router input
        # (moe_utils.get_capacity: ceil(tokens x top_k / experts x capacity_factor)); the model scales
        # the routed bytes by the factor, so a factor that leaves an expert less than one token is
        # refused here, by name (adv24 F5: it surfaced as a collective size below one element). A
        # rank routes its share of the microbatch's tokens: 1 / cp of them, and 1 / tp of those with
        # sequence parallelism (review24)
        shard = layout.cp * (layout.tp if sequence_parallel and layout.tp > 1 else 1)
        routed = micro_batch * spec.seq_len / shard * top_k
        least = spec.experts / routed
        if factor < least:
            raise ValueError(f"capacity_factor ({factor:g}) must leave every expert at least one token of a rank's "
                             f"router input: at least experts / (micro_batch x seq_len / (cp x tp with sequence "
                             f"parallelism) x top_k) = {least:.3g}")
    if top_k != spec.top_k:         # the routing given: compute, model FLOPs and memory follow it too
        spec = dataclasses.replace(spec, top_k=top_k)
    if global_batch is None:
        global_batch = default_batch(layout.dp, micro_batch)
    gpu_spec = checked_gpu(graph, gpu)
    check_precision(precision, gpu_spec)
    check_recompute_layers(recompute_layers, spec.layers, layout.pp, layout.vp)
    schedule = checked_schedule(dp=layout.dp, micro_batch=micro_batch, global_batch=global_batch,
                                dp_overlap=dp_overlap, compute_efficiency=compute_efficiency, precision=precision,
                                recompute=recompute, gpu=gpu_spec, attention_efficiency=attention_efficiency,
                                recompute_layers=recompute_layers,
                                tp_overlap=default_tp_overlap(layout.tp) if tp_overlap is None else tp_overlap,
                                attention=attention, fp8_recipe=fp8_recipe, power_cap=power_cap,
                                kernel_utilization=kernel_utilization, tp_overlap_impl=tp_overlap_impl)
    check_interleaved(layout.pp, layout.vp, schedule.global_batch // (layout.dp * micro_batch))
    if reduce_dtype not in REDUCE_DTYPES:
        raise ValueError(f"reduce_dtype must be one of {', '.join(REDUCE_DTYPES)}, got {reduce_dtype!r}")
    check_fp8_param_gather(precision, fp8_param_gather)
    gather_bytes = float(gather_bytes_of(precision, fp8_param_gather))
    param_sync = check_param_sync(param_sync, zero)
    if not isinstance(sequence_parallel, bool):
        raise TypeError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    check_moe_sequence_parallel(spec, layout.tp, sequence_parallel)
    if sequence_parallel:
        check_sequence_split(spec.seq_len, layout.tp, layout.cp)
    return PreparedStep(solve=dict(model=spec, layout=layout, micro_batch=micro_batch, zero=zero, gpu=gpu_spec,
                                   algorithms=_algorithms(algorithms), options=collective_options,
                                   sequence_parallel=sequence_parallel, capacity_factor=factor,
                                   reduce_bytes=REDUCE_DTYPES[reduce_dtype], gather_bytes=gather_bytes,
                                   param_sync=param_sync),
                        schedule=schedule)
