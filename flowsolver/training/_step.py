"""training_step: the arguments checked, the communication solved once, the step composed."""

from __future__ import annotations

import dataclasses

import topologies as tp_

from .. import _checks
from ..collectives._options import checked_collective_options
from ..routing import gpu_nodes, unchanged
from ._compose import StepResult, check_recompute_layers, checked_schedule, compose
from ._compute import (DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_KERNEL_UTILIZATION,
                       check_precision)
from ._layout import DEFAULT_ORDER, ParallelLayout
from ._memory import check_zero
from ._models import ModelSpec, get_model
from ._pipeline import stage_layers
from ._profile import solve_profile

__all__ = ["training_step", "DEFAULT_COMPUTE_EFFICIENCY", "DEFAULT_ATTENTION_EFFICIENCY", "DEFAULT_TP_OVERLAP",
           "DEFAULT_BATCH", "DEFAULT_KERNEL_UTILIZATION", "REDUCE_DTYPES"]

#: gradient reduction dtypes: bytes per value on the wire (Megatron-Bridge's recipes reduce in
#: bf16, ``grad_reduce_in_fp32=False``; torchtitan's FSDP2 reduces in fp32,
#: ``mixed_precision_reduce = "float32"``, its default and only choice)
REDUCE_DTYPES = {"bf16": 2.0, "fp32": 4.0}

# Fraction of the TP traffic hidden behind the GEMMs when none is given: (tp - 1) / tp.
# Megatron-Bridge turns Transformer Engine's userbuffers overlap on (tp_comm_overlap, with
# sequence parallelism) in its H100 recipes (Megatron-Bridge docs, "Communication
# Overlap"): the all-gather / reduce-scatter around each GEMM is split into tp chunks run
# ring-exchange style, each chunk's transfer under the previous chunk's GEMM, so all but one
# of tp chunks hides. The same default for every run (README, "Training steps against
# published runs"); pass a float to override.
DEFAULT_TP_OVERLAP = None


def default_tp_overlap(tp: int) -> float:
    """``(tp - 1) / tp``: the share of a ring-exchange-overlapped TP collective hidden.

    >>> default_tp_overlap(8), default_tp_overlap(1)
    (0.875, 0.0)
    """
    return (tp - 1) / tp


#: sequences per step when none is given: 4 M tokens at 8192 (rounded up to whole microbatches)
DEFAULT_BATCH = 512
_ALGORITHM_KEYS = ("tp", "cp", "pp", "ep", "dp")


def _layout(graph, spec: ModelSpec, *, tp, pp, dp, ep, cp, vp, ranks, order, gpus=None) -> ParallelLayout:
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
    if spec.seq_len % (2 * cp):
        raise ValueError(f"cp ({cp}) must split the sequence of {spec.seq_len} tokens into 2 x cp equal chunks "
                         f"(load-balanced ring attention): 2 cp must divide seq_len")
    if vp > 1 and pp == 1:
        raise ValueError(f"vp ({vp}) interleaves pipeline stages: it needs pp > 1")
    stage_layers(spec.layers, pp, vp)           # a ValueError naming pp / vp when they do not split
    if ep > 1 and (spec.experts == 1 or dp % ep or spec.experts % ep):
        raise ValueError(f"ep ({ep}) needs a mixture-of-experts model and must divide dp ({dp}) and the "
                         f"experts ({spec.experts})")
    placement = () if ranks is None else tuple(_checks.rank_indices(graph, ranks))
    return ParallelLayout(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, vp=vp, placement=placement,
                          order=DEFAULT_ORDER if order is None else order)


def _routing(spec: ModelSpec, top_k, capacity_factor) -> tuple:
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


def _gpu(graph, gpu):
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


def training_step(graph, *, model="llama-3-70b", tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1,
                  cp: int = 1, vp: int = 1, global_batch: int | None = None, micro_batch: int = 1,
                  seq_len: int | None = None,
                  compute_efficiency: float | None = DEFAULT_COMPUTE_EFFICIENCY, precision: str = "bf16",
                  recompute: str = "selective", recompute_layers: int | None = None,
                  attention_efficiency: float | None = None, sequence_parallel: bool = True,
                  tp_overlap: float | None = DEFAULT_TP_OVERLAP, top_k: int | None = None, capacity_factor=None,
                  zero: int = 1, dp_overlap: float = 1.0, ranks=None, order=None, gpu=None,
                  algorithms: dict | None = None, collective_options: dict | None = None,
                  attention: str = "auto", fp8_recipe: str = "te", power_cap: float | None = None,
                  kernel_utilization: float = DEFAULT_KERNEL_UTILIZATION, reduce_dtype: str = "bf16",
                  fp8_param_gather: bool = False, tp_overlap_impl: str = "te") -> StepResult:
    """Time one training step of ``model`` on the cluster ``graph``.

    The collectives are solved once into a :class:`CommProfile`; the step is
    :func:`compose` of it and the :class:`Schedule`, so :meth:`StepResult.recompose`
    re-times another schedule (batch, overlaps, efficiency, precision, recompute) without
    solving again.

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster (``topologies`` generator or hand-built).
    model : str or ModelSpec
        A preset of ``MODELS`` or a shape.
    tp, cp, pp, dp, ep, vp : int
        Tensor, context, pipeline, data and expert parallel degrees; ``tp * cp * pp * dp``
        must equal the GPU count (``dp`` defaults to the quotient); ``ep`` divides ``dp`` and
        the experts; ``vp`` virtual stages per pipeline stage (interleaved 1F1B); ``2 cp``
        divides the sequence. ``pp x vp`` divides the layers, or the layers + 2 (Megatron's
        lighter end stages, e.g. Llama 3 405B's 126 layers on 16 stages).
    global_batch : int, optional
        Sequences per step (default 512, 4 M tokens at 8192, rounded up to a multiple of
        ``dp x micro_batch``).
    micro_batch : int
        Sequences per microbatch.
    seq_len : int, optional
        Tokens per sequence (default the model's), e.g. 131072 for long-context training.
    compute_efficiency : float or None
        A float (default 0.46, ``DEFAULT_COMPUTE_EFFICIENCY``): the flat model, the GEMMs at
        that fraction of the dense peak of their precision. ``None``: every kernel timed from
        published kernel benchmarks (:mod:`flowsolver.training._kernels`): each GEMM by its
        shape and precision, flash attention by kernel, head dimension and sequence length,
        the memory-bound work (norms, activations, residuals, RoPE, loss, FP8 casts) at the
        GPU's achieved HBM bandwidth, the sum divided by ``kernel_utilization``; needs a GPU
        with a kernel ``family``. Not the MFU: the result's ``mfu`` is measured over the whole
        step.
    attention_efficiency : float, optional
        Fraction of the bf16 peak attention reaches: overrides the attention tables (flat
        model default 0.62, FlashAttention-3's measured rate).
    attention : {"auto", "fa3", "fa2", "unfused"}
        The attention kernel (kernel tables): ``fa3`` FlashAttention-3 / cuDNN (what
        Transformer Engine runs on Hopper and Blackwell), ``fa2`` FlashAttention-2 (PyTorch
        SDPA's flash backend), ``unfused`` (scores through HBM, no flash kernel); ``auto``:
        ``fa3`` where the GPU has it, else ``fa2``.
    fp8_recipe : {"te", "tensorwise", "rowwise"}
        How FP8 GEMMs are fed (kernel tables): Transformer Engine (``te``, Megatron / NeMo) or
        torchao's float8 training (torchtitan) with tensor-wise or row-wise scales: the cast
        kernels' traffic (and row-wise's rescaling of the backward GEMMs' outputs).
    power_cap : float, optional
        Board power limit (W) below the GPU's TDP: the GEMM fractions interpolate between the
        published capped measurement (an H100 at 500 W) and the uncapped one, attention scales
        as the BF16 GEMMs (the flat model: its efficiencies scale by the same ratios); a GPU
        without a published capped measurement is a ``ValueError``.
    kernel_utilization : float in (0, 1]
        Share of the step the measured kernels run at their benchmarked speed (default
        ``DEFAULT_KERNEL_UTILIZATION``, calibrated on one published run).
    tp_overlap_impl : {"te", "async"}
        How TP communication is overlapped (kernel tables, with ``tp_overlap > 0``): Transformer
        Engine's userbuffers as NeMo configures them (GEMMs split into chunks, some SMs held by
        the communication), or PyTorch's async TP (chunks only).
    reduce_dtype : {"bf16", "fp32"}
        Dtype of the data-parallel gradient reduction (bytes on the wire).
    fp8_param_gather : bool
        FSDP / ZeRO-3 all-gathers the parameters in FP8 (1 byte) with ``precision="fp8"``
        (torchao's float8 all-gather).
    precision : {"bf16", "fp8"}
        ``fp8``: the transformer layers' weight GEMMs in FP8 (attention and logits stay
        bf16); needs a GPU with FP8.
    recompute : {"none", "selective", "full"}
        Activation recompute (compute cost and memory, :mod:`flowsolver.training._compute`).
    recompute_layers : int, optional
        With ``recompute="full"``: recompute only the first ``recompute_layers`` layers of
        each model chunk (Megatron's ``recompute_method="block"``, ``recompute_num_layers``);
        default all.
    sequence_parallel : bool
        TP all-reduces as reduce-scatter + all-gather, activations sharded over TP.
    tp_overlap : float in [0, 1]
        Fraction of the TP traffic hidden behind the GEMMs (default ``(tp - 1) / tp``, see
        ``DEFAULT_TP_OVERLAP``).
    top_k, capacity_factor : optional
        MoE routing: experts per token (default the model's; another value changes the
        model's FLOPs, compute and memory too) and capacity factor (default dropless: the
        all-to-alls carry the routed tokens once; ``c``: padded to capacity, the all-to-alls
        and the expert GEMMs carry ``c x`` the routed tokens, Megatron's token drop with
        ``moe_pad_expert_input_to_capacity``).
    zero : {0, 1, 2, 3}
        0 all-reduce; 1 / 2 distributed optimizer (reduce-scatter + all-gather); 3 FSDP.
    dp_overlap : float in [0, 1]
        Fraction of the DP overlap windows (last backward, next forward) used.
    ranks : sequence of int, optional
        Placement: GPU rank of each logical rank (default ``topologies.gpus`` order).
    order : str or tuple, optional
        Rank order, fastest-varying first (default ``"tp-cp-dp-pp"``: TP inside a server).
    gpu : str or GpuSpec, optional
        GPU type when the graph's GPU nodes carry none.
    algorithms : dict, optional
        Collective algorithm per parallelism (``tp``, ``cp``, ``pp``, ``ep``, ``dp``),
        default ``"auto"`` (``cp``: ``"ring"``, ring attention).
    collective_options : dict, optional
        Passed to every collective (:func:`flowsolver.concurrent_kinds`' options: ``policy``,
        ``policy_options``, ``pxn``, ``protocol``, ``chunk``, ``efficiency``, ``step_latency``,
        ``base_latency``, ``model``: a :func:`flowsolver.calibrate` result); checked, with
        the ranges :func:`flowsolver.collective` gives them, before anything is solved.

    Examples
    --------
    >>> import topologies as tp
    >>> r = training_step(tp.rail_optimized(nodes=8), model="llama-3-70b", tp=8, dp=8, global_batch=64)
    >>> r.gpus, r.microbatches, round(sum(r.breakdown.values()) / r.step_time, 9)
    (64, 8, 1.0)
    >>> r.phases["tp"].op, r.phases["dp"].bottleneck_tier
    ('reduce_scatter+all_gather', 'access')
    """
    prepared = prepare_step(graph, model=model, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, vp=vp, global_batch=global_batch,
                            micro_batch=micro_batch, seq_len=seq_len, compute_efficiency=compute_efficiency,
                            precision=precision, recompute=recompute, recompute_layers=recompute_layers,
                            attention_efficiency=attention_efficiency, sequence_parallel=sequence_parallel,
                            tp_overlap=tp_overlap, top_k=top_k, capacity_factor=capacity_factor, zero=zero,
                            dp_overlap=dp_overlap, ranks=ranks, order=order, gpu=gpu, algorithms=algorithms,
                            collective_options=collective_options, attention=attention, fp8_recipe=fp8_recipe,
                            power_cap=power_cap, kernel_utilization=kernel_utilization, reduce_dtype=reduce_dtype,
                            fp8_param_gather=fp8_param_gather, tp_overlap_impl=tp_overlap_impl)
    # every group's steps routed on one index of the graph, checked once (in prepare_step)
    with unchanged(graph, checked=True):
        profile = solve_profile(graph, **prepared.solve)
    return compose(profile, prepared.schedule)


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
                 check_graph: bool = True) -> PreparedStep:
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
                     gpus=None if check_graph else len(gpu_nodes(graph)))
    zero = check_zero(zero)
    top_k, factor = _routing(spec, top_k, capacity_factor)
    if top_k != spec.top_k:         # the routing given: compute, model FLOPs and memory follow it too
        spec = dataclasses.replace(spec, top_k=top_k)
    if global_batch is None:
        unit = layout.dp * micro_batch
        global_batch = -(-DEFAULT_BATCH // unit) * unit
    gpu_spec = _gpu(graph, gpu)
    check_precision(precision, gpu_spec)
    check_recompute_layers(recompute_layers, spec.layers, layout.pp, layout.vp)
    schedule = checked_schedule(dp=layout.dp, micro_batch=micro_batch, global_batch=global_batch,
                                dp_overlap=dp_overlap, compute_efficiency=compute_efficiency, precision=precision,
                                recompute=recompute, gpu=gpu_spec, attention_efficiency=attention_efficiency,
                                recompute_layers=recompute_layers,
                                tp_overlap=default_tp_overlap(layout.tp) if tp_overlap is None else tp_overlap,
                                attention=attention, fp8_recipe=fp8_recipe, power_cap=power_cap,
                                kernel_utilization=kernel_utilization, tp_overlap_impl=tp_overlap_impl)
    if reduce_dtype not in REDUCE_DTYPES:
        raise ValueError(f"reduce_dtype must be one of {', '.join(REDUCE_DTYPES)}, got {reduce_dtype!r}")
    if not isinstance(fp8_param_gather, bool):
        raise TypeError(f"fp8_param_gather must be True or False, got {fp8_param_gather!r}")
    gather_bytes = 1.0 if (fp8_param_gather and precision == "fp8") else 2.0
    if not isinstance(sequence_parallel, bool):
        raise TypeError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    return PreparedStep(solve=dict(model=spec, layout=layout, micro_batch=micro_batch, zero=zero, gpu=gpu_spec,
                                   algorithms=_algorithms(algorithms), options=collective_options,
                                   sequence_parallel=sequence_parallel, capacity_factor=factor,
                                   reduce_bytes=REDUCE_DTYPES[reduce_dtype], gather_bytes=gather_bytes),
                        schedule=schedule)
