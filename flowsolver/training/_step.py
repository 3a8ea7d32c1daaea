"""training_step: the arguments checked (``_prepare``), the communication solved once, the step composed;
one release's keywords converted with a DeprecationWarning; open values searched (``_auto``)."""

from __future__ import annotations

import dataclasses
import warnings

from .. import _checks
from ..routing import unchanged
from ._auto import choose_open
from ._compose import StepResult, compose  # noqa: F401 (re-exported)
from ._schedule import DEFAULT_BATCH, Schedule, default_tp_overlap  # noqa: F401 (re-exported)
from ._compute import DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_KERNEL_UTILIZATION  # noqa: F401
from ._models import get_model
from ._parallelism import PARALLELISM_FIELDS, REDUCE_DTYPES, Parallelism  # noqa: F401 (REDUCE_DTYPES re-exported)
# the checks (their own module, so _auto and other packages, from flowsolver.training, use them too)
from ._prepare import checked_expert_routing, prepare_step
from ._profile import solve_profile

__all__ = ["training_step", "step_arguments", "DEFAULT_COMPUTE_EFFICIENCY",
           "DEFAULT_ATTENTION_EFFICIENCY", "DEFAULT_TP_OVERLAP", "DEFAULT_BATCH", "DEFAULT_KERNEL_UTILIZATION",
           "REDUCE_DTYPES"]

# Fraction of the TP traffic hidden behind the GEMMs when none is given: (tp - 1) / tp.
# Megatron-Bridge turns Transformer Engine's userbuffers overlap on (tp_comm_overlap, with
# sequence parallelism) in its H100 recipes (Megatron-Bridge docs, "Communication
# Overlap"): the all-gather / reduce-scatter around each GEMM is split into tp chunks run
# ring-exchange style, each chunk's transfer under the previous chunk's GEMM, so all but one
# of tp chunks hides. The same default for every run (README, "Training steps against
# published runs"); pass a float to override. (default_tp_overlap, in _compose)
DEFAULT_TP_OVERLAP = None

#: the keyword arguments of one release that are fields of Schedule
SCHEDULE_FIELDS = tuple(f.name for f in dataclasses.fields(Schedule))
#: the fields training_step can leave open (``"auto"`` or candidates)
OPEN_FIELDS = ("vp", "micro_batch")
#: every keyword argument of one release but the eight of today: the Parallelism and
#: Schedule fields and ``top_k`` (now the model's, ``ModelSpec.top_k``), with their defaults
_KEYWORD_DEFAULTS = Parallelism().keywords() | Schedule().keywords() | dict(top_k=None)


def training_step(graph, model="llama-3-70b", parallelism: Parallelism | None = None,
                  schedule: Schedule | None = None, *, seq_len: int | None = None, gpu=None,
                  algorithms: dict | None = None, collective_options: dict | None = None,
                  **deprecated) -> StepResult:
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
        A preset of ``MODELS`` or a shape (MoE routing: its ``top_k`` experts per token).
    parallelism : Parallelism, optional
        How the job is laid out (default ``Parallelism()``: every GPU a data-parallel
        replica): ``tp``, ``cp``, ``pp``, ``dp``, ``ep``, ``vp``, ``micro_batch``, ``zero``,
        ``sequence_parallel``, ``capacity_factor``, ``reduce_dtype``, ``fp8_param_gather``,
        ``param_sync``, ``order`` / ``ranks`` (see :class:`Parallelism`). ``tp * cp * pp * dp`` must equal
        the GPU count (``dp`` defaults to the quotient); ``ep`` divides ``dp`` and the
        experts; ``2 cp`` divides the sequence; ``pp x vp`` divides the layers, or the layers
        + 2 (Megatron's lighter end stages, e.g. Llama 3 405B's 126 layers on 16 stages).
        ``vp="auto"`` / ``micro_batch="auto"`` (or a tuple of candidates): every candidate
        is timed exactly (the collective kinds they share solved once) and the fastest that
        fits in memory kept; the result's ``chosen`` (:class:`AutoChoice`) says what was
        picked, what each candidate took and why the others were excluded.
    schedule : Schedule, optional
        How the solved step is run (default ``Schedule()``), :meth:`StepResult.recompose`
        changes it without solving again:

        * ``global_batch``: sequences per step (default 512, 4 M tokens at 8192, rounded up
          to a multiple of ``dp x micro_batch``);
        * ``compute_efficiency``: ``"auto"`` (default): ``None`` where the GPU has a kernel
          ``family`` (every catalogue GPU but the H100 PCIe), else 0.44. A float
          (``DEFAULT_COMPUTE_EFFICIENCY``: 0.44): the flat model, the GEMMs at that fraction of
          the dense peak of their precision. ``None``: every kernel timed from published kernel
          benchmarks
          (:mod:`flowsolver.training._kernels`): each GEMM by its shape and precision, flash
          attention by kernel, head dimension and sequence length, the memory-bound work
          (norms, activations, residuals, RoPE, loss, FP8 casts) at the GPU's achieved HBM
          bandwidth, the sum divided by ``kernel_utilization``; needs a GPU with a kernel
          ``family``. Not the MFU: the result's ``mfu`` is measured over the whole step;
        * ``attention_efficiency``: fraction of the bf16 peak attention reaches: overrides
          the attention tables (flat model default 0.62, FlashAttention-3's measured rate);
        * ``attention`` (``auto``, ``fa3``, ``fa2``, ``unfused``): the attention kernel
          (kernel tables); ``auto``: ``fa3`` where the GPU has it, else ``fa2``;
        * ``fp8_recipe`` (``te``, ``tensorwise``, ``rowwise``): how FP8 GEMMs are fed
          (Transformer Engine, or torchao's float8 training with tensor-wise or row-wise
          scales);
        * ``power_cap``: board power limit (W) below the GPU's TDP (the GEMM fractions
          interpolate between the published capped and uncapped measurements);
        * ``kernel_utilization`` in (0, 1]: share of the step the measured kernels run at
          their benchmarked speed (default ``DEFAULT_KERNEL_UTILIZATION``);
        * ``precision`` (``bf16``, ``fp8``): ``fp8`` runs the layers' weight GEMMs in FP8 (with
          the ``te`` recipe the step's memory keeps their inputs at one byte, as Transformer
          Engine does: :func:`~flowsolver.training.memory_per_gpu`'s ``fp8_activations``);
        * ``recompute`` (``none``, ``selective``, ``full``) and ``recompute_layers`` (with
          ``full``: the first ``recompute_layers`` layers of each model chunk, Megatron's
          ``recompute_method="block"``; default all);
        * ``tp_overlap`` in [0, 1]: fraction of the TP traffic hidden behind the GEMMs
          (default ``(tp - 1) / tp``), ``tp_overlap_impl`` (``te``: Transformer Engine's
          userbuffers; ``async``: PyTorch's async TP). The overlap is on or off, as in the
          frameworks: any ``tp_overlap > 0`` (with sequence parallelism) runs the overlapped
          implementation with its whole cost (the GEMMs split into chunks, ``te``'s SMs held
          by the communication kernels) while only that fraction of the traffic is hidden, so
          a small fraction can take longer than ``0`` (overlap off);
        * ``dp_overlap`` in [0, 1]: fraction of the DP overlap windows (last backward, next
          forward) used (default 1); the compute beside the hidden DP / FSDP traffic runs on the
          SMs NCCL's channels leave and shares the HBM with its copies (the DP phase's exposed
          time counts what that costs).
    seq_len : int, optional
        Tokens per sequence (default the model's), e.g. 131072 for long-context training.
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
    **deprecated
        The keywords of the previous release (``tp=8, global_batch=64, top_k=2, ...``: each
        field of Parallelism and Schedule, and ``top_k``) still work for one release, with
        a ``DeprecationWarning`` naming the new spelling; the results are the same.
        :func:`step_arguments` converts a dict of them.

    Examples
    --------
    >>> import topologies as tp
    >>> r = training_step(tp.rail_optimized(nodes=8), "llama-3-70b", Parallelism(tp=8, dp=8),
    ...                   Schedule(global_batch=64))
    >>> r.gpus, r.microbatches, round(sum(r.breakdown.values()) / r.step_time, 9)
    (64, 8, 1.0)
    >>> r.phases["tp"].op, r.phases["dp"].bottleneck_tier
    ('reduce_scatter+all_gather', 'access')
    """
    if deprecated:
        keywords = _deprecated_keywords(parallelism, schedule, deprecated)
    else:
        keywords = _keywords(parallelism, schedule)
    return _step(graph, model=model, seq_len=seq_len, gpu=gpu, algorithms=algorithms,
                 collective_options=collective_options, **keywords)


def _keywords(parallelism, schedule) -> dict:
    """The Parallelism's and the Schedule's fields (each checked to be one), as keywords."""
    parallelism = Parallelism() if parallelism is None else parallelism
    schedule = Schedule() if schedule is None else schedule
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a flowsolver.Parallelism, got {type(parallelism).__name__}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a flowsolver.Schedule, got {type(schedule).__name__}")
    return parallelism.keywords() | schedule.keywords()


def _deprecated_keywords(parallelism, schedule, deprecated: dict) -> dict:
    """One release's keywords (``tp=``, ``global_batch=``, ...): warned about, naming the new
    spelling, and merged with a Parallelism / Schedule given beside them (not the same part)."""
    unknown = sorted(set(deprecated) - set(_KEYWORD_DEFAULTS))
    if unknown:
        raise TypeError(f"training_step() got unexpected keyword arguments {', '.join(unknown)}; it takes graph, "
                        f"model, parallelism, schedule, seq_len, gpu, algorithms, collective_options")
    layout = [k for k in deprecated if k in PARALLELISM_FIELDS]
    timing = [k for k in deprecated if k in SCHEDULE_FIELDS]
    if parallelism is not None and layout:
        raise TypeError(f"training_step: {', '.join(layout)} given beside parallelism=: set them in the Parallelism")
    if schedule is not None and timing:
        raise TypeError(f"training_step: {', '.join(timing)} given beside schedule=: set them in the Schedule")
    new = [f"parallelism=Parallelism({', '.join(f'{k}=...' for k in layout)})"] if layout else []
    new += [f"schedule=Schedule({', '.join(f'{k}=...' for k in timing)})"] if timing else []
    new += ["model=dataclasses.replace(get_model(model), top_k=...)"] if "top_k" in deprecated else []
    warnings.warn(f"training_step's keywords {', '.join(deprecated)} are deprecated and will be removed in the next "
                  f"release: pass {' and '.join(new)} (flowsolver.Parallelism, flowsolver.Schedule)",
                  DeprecationWarning, stacklevel=3)
    merged = _keywords(parallelism, schedule) | dict(top_k=None) | deprecated
    return merged


def step_arguments(**keywords) -> dict:
    """One release's :func:`training_step` keywords (``tp=``, ``global_batch=``, ``top_k=``,
    ...) in today's spelling: ``parallelism`` and ``schedule`` built from them (``top_k``
    folded into the model), the rest (``model``, ``seq_len``, ``gpu``, ``algorithms``,
    ``collective_options``, a ``parallelism`` / ``schedule`` already built) kept; for a caller
    that takes a dict of them (a study's workload).

    >>> a = step_arguments(model="llama-3-8b", tp=8, global_batch=16, dp_overlap=0.5)
    >>> a["parallelism"].tp, a["schedule"].global_batch, a["schedule"].dp_overlap, a["model"]
    (8, 16, 0.5, 'llama-3-8b')
    """
    layout = {k: keywords.pop(k) for k in PARALLELISM_FIELDS if k in keywords}
    timing = {k: keywords.pop(k) for k in SCHEDULE_FIELDS if k in keywords}
    for name, part, record in (("parallelism", layout, Parallelism), ("schedule", timing, Schedule)):
        if keywords.get(name) is not None and part:          # today's spelling passes through
            raise TypeError(f"step_arguments: {', '.join(part)} given beside {name}=: set them in the "
                            f"{record.__name__}")
        if keywords.get(name) is None:
            keywords[name] = record(**part)
    top_k = keywords.pop("top_k", None)
    if top_k is not None:
        spec = get_model(keywords.get("model", "llama-3-70b"))
        if top_k != spec.top_k:
            checked_expert_routing(spec, top_k, None)   # the same checks as the keyword
            keywords["model"] = dataclasses.replace(spec, top_k=_checks.integer("top_k", top_k))
    return keywords


def _step(graph, **arguments) -> StepResult:
    """:func:`training_step` of every argument as a keyword (``prepare_step``'s), ``vp`` /
    ``micro_batch`` ``"auto"`` or candidates searched (:func:`choose_open`)."""
    arguments = _KEYWORD_DEFAULTS | arguments
    if any(isinstance(arguments[k], (str, tuple, list, range)) for k in OPEN_FIELDS):
        return choose_open(graph, arguments)
    prepared = prepare_step(graph, **arguments)
    # every group's steps routed on one index of the graph, checked once (in prepare_step)
    with unchanged(graph, checked=True):
        profile = solve_profile(graph, **prepared.solve)
    return compose(profile, prepared.schedule)
