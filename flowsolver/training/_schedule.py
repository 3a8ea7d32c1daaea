"""How a step is run on a solved profile (:class:`Schedule`: batch, overlaps, compute,
precision, recompute), its defaults and its checks, and which compute model ``"auto"`` names on
a GPU; :mod:`._compose` times a profile under it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .. import _checks
from ._recompute import check_layers_mode
from ._compute import (DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_KERNEL_UTILIZATION,
                       check_precision, check_recompute)
from ._kernel_costs import FP8_RECIPES, TP_OVERLAP_IMPLS
from ._kernels import ATTENTION_KERNELS, check_power_cap, kernel_tables_missing
from ._pipeline import stage_layers

__all__ = ["Schedule", "DEFAULT_COMPUTE", "resolve_compute", "DEFAULT_BATCH", "default_batch",
           "default_tp_overlap", "check_recompute_layers", "checked_schedule"]


#: training_step's default compute model: the kernel tables (``compute_efficiency=None``) where
#: the GPU has a kernel ``family`` (every catalogue GPU but the H100 PCIe), else the flat model at
#: DEFAULT_COMPUTE_EFFICIENCY. Held out on the validation corpus's 222 training rows (7 sources,
#: ``python benchmarks/fit_kernel_utilization.py``, ``validate.py --compute flat``): median |error| 6.5 %
#: with the kernel tables, 15.4 % flat (241 rows, 2026-12-07: 15.8 % flat at 0.44, 15.0 % at 0.46).
DEFAULT_COMPUTE = "auto"


def resolve_compute(compute_efficiency, gpu, precision: str | None = None):
    """The compute model ``compute_efficiency`` names on ``gpu``: ``"auto"`` is ``None`` (the
    kernel tables) where the tables can time ``gpu`` (in ``precision`` where given:
    :func:`kernel_tables_missing`) or it is not known yet, else DEFAULT_COMPUTE_EFFICIENCY (the
    flat model); ``None`` is returned as given, a float checked (a fraction in (0, 1]).

    >>> import topologies as tp
    >>> resolve_compute("auto", tp.get_gpu("h100_sxm")), resolve_compute("auto", tp.get_gpu("h100_pcie"))
    (None, 0.44)
    >>> resolve_compute(0.5, tp.get_gpu("h100_pcie"))
    0.5
    """
    if isinstance(compute_efficiency, str):
        if compute_efficiency != DEFAULT_COMPUTE:
            raise ValueError(f"compute_efficiency must be 'auto', None (the kernel tables) or a fraction in (0, 1] "
                             f"(the flat model), got {compute_efficiency!r}")
        return None if gpu is None or not kernel_tables_missing(gpu, precision) else DEFAULT_COMPUTE_EFFICIENCY
    return None if compute_efficiency is None else \
        _checks.fraction("compute_efficiency", compute_efficiency, zero_ok=False)


@dataclass(frozen=True)
class Schedule:
    """How a step is run on a solved profile: ``global_batch`` sequences per step (a
    multiple of ``dp x micro_batch``); ``dp_overlap`` and ``tp_overlap`` the fractions of
    their overlap windows / of the TP traffic hidden (in [0, 1]); ``precision`` (``bf16`` or
    ``fp8``) and ``recompute`` (``none``, ``selective``, ``full``, or the partial modes
    ``save_qkv_proj`` (MaxText's remat policy) and ``selective_op`` (torchtitan's per-op
    checkpointing): :mod:`flowsolver.training._recompute`), with ``recompute_layers`` the layers
    of each model chunk that full recompute recomputes (``None``: all).
    Unset, ``global_batch`` is ``DEFAULT_BATCH`` (512) rounded up to a multiple of ``dp x
    micro_batch`` and ``tp_overlap`` ``(tp - 1) / tp``; :func:`flowsolver.training_step`
    takes a Schedule beside a :class:`~flowsolver.training.Parallelism`, and checks it.

    Compute: ``compute_efficiency="auto"`` (the default) is the kernel tables where the GPU has
    a kernel ``family`` (every catalogue GPU but the H100 PCIe), else the flat model at 0.44;
    :func:`checked_schedule` resolves it. With ``compute_efficiency=None`` every kernel is timed from
    published kernel benchmarks (:mod:`flowsolver.training._kernels`: GEMMs by shape and
    precision, ``attention`` kernel ``auto`` / ``fa3`` / ``fa2`` / ``unfused``, memory-bound
    work at the achieved HBM bandwidth, the ``fp8_recipe``'s casts, ``power_cap`` W) and the
    sum divided by ``kernel_utilization``; ``attention_efficiency`` (a fraction of the bf16
    peak) overrides the attention tables when given. With a float ``compute_efficiency``
    (``DEFAULT_COMPUTE_EFFICIENCY``: 0.44) the flat model: the GEMMs at that fraction of their
    precision's peak, attention at ``attention_efficiency`` (``None``: 0.62) of the bf16 peak."""

    global_batch: int | None = None
    dp_overlap: float = 1.0
    compute_efficiency: float | str | None = DEFAULT_COMPUTE
    precision: str = "bf16"
    recompute: str = "none"
    tp_overlap: float | None = None
    attention_efficiency: float | None = None
    recompute_layers: int | None = None
    attention: str = "auto"
    fp8_recipe: str = "te"
    power_cap: float | None = None
    kernel_utilization: float = DEFAULT_KERNEL_UTILIZATION
    tp_overlap_impl: str = "te"

    @property
    def kernels(self) -> bool:
        """Whether compute is timed from the kernel tables (``compute_efficiency`` None; a checked
        schedule, as a step result holds, has ``"auto"`` resolved)."""
        return self.compute_efficiency is None


    def keywords(self) -> dict:
        """The fields as training_step's keyword arguments of one release (``prepare_step``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def resolved(self, *, dp: int, micro_batch: int, tp: int) -> "Schedule":
        """The schedule with its unset ``global_batch`` and ``tp_overlap`` given their defaults
        for a job of ``dp`` replicas, ``micro_batch`` sequences per microbatch, ``tp``.

        >>> s = Schedule(dp_overlap=0.5).resolved(dp=24, micro_batch=1, tp=8)
        >>> s.global_batch, s.tp_overlap, s.dp_overlap
        (528, 0.875, 0.5)
        """
        batch, overlap = self.global_batch, self.tp_overlap
        if batch is None:
            batch = default_batch(dp, micro_batch)
        return replace(self, global_batch=batch, tp_overlap=default_tp_overlap(tp) if overlap is None else overlap)


#: sequences per step when none is given: 4 M tokens at 8192 (rounded up to whole microbatches)
DEFAULT_BATCH = 512


def default_batch(dp: int, micro_batch: int) -> int:
    """``DEFAULT_BATCH`` rounded up to a multiple of ``dp x micro_batch`` sequences.

    >>> default_batch(24, 1), default_batch(8, 2)
    (528, 512)
    """
    unit = dp * micro_batch
    return -(-DEFAULT_BATCH // unit) * unit


def default_tp_overlap(tp: int) -> float:
    """``(tp - 1) / tp``: the share of a ring-exchange-overlapped TP collective hidden.

    >>> default_tp_overlap(8), default_tp_overlap(1)
    (0.875, 0.0)
    """
    return (tp - 1) / tp


def check_recompute_layers(recompute_layers, layers: int, pp: int, vp: int) -> None:
    """``recompute_layers`` (None, or layers per model chunk to recompute) must be a whole
    number from 1 to the layers of the largest model chunk (``layers`` over ``pp`` stages of
    ``vp`` chunks each)."""
    if recompute_layers is not None:
        chunk = -(-max(stage_layers(layers, pp, vp)) // vp)
        _checks.integer("recompute_layers", recompute_layers, maximum=chunk)


def checked_schedule(*, dp: int, micro_batch: int, global_batch, dp_overlap, compute_efficiency=DEFAULT_COMPUTE,
                     precision="bf16", recompute="none", tp_overlap=0.0, gpu=None,
                     attention_efficiency=None, recompute_layers=None, attention="auto", fp8_recipe="te",
                     power_cap=None, kernel_utilization=DEFAULT_KERNEL_UTILIZATION,
                     tp_overlap_impl="te") -> Schedule:
    """A :class:`Schedule` for a job of ``dp`` replicas and ``micro_batch`` sequences per
    microbatch, each value checked (a ``ValueError`` naming it and what it allows; FP8 and
    ``power_cap`` against ``gpu`` when given; ``compute_efficiency="auto"`` resolved on ``gpu``,
    :func:`._compute.resolve_compute`).

    >>> checked_schedule(dp=4, micro_batch=2, global_batch=16, dp_overlap=0, compute_efficiency=0.5).compute_efficiency
    0.5
    >>> checked_schedule(dp=4, micro_batch=2, global_batch=12, dp_overlap=0, compute_efficiency=0.5)
    Traceback (most recent call last):
    ...
    ValueError: global_batch must be a positive multiple of dp x micro_batch = 8 sequences, got 12
    """
    efficiency = resolve_compute(compute_efficiency, gpu)
    if attention_efficiency is None and efficiency is not None:
        attention_efficiency = DEFAULT_ATTENTION_EFFICIENCY
    attn_eff = None if attention_efficiency is None else \
        _checks.fraction("attention_efficiency", attention_efficiency, zero_ok=False)
    if recompute_layers is not None:
        recompute_layers = _checks.integer("recompute_layers", recompute_layers)
        check_layers_mode(recompute_layers, recompute)
    dp_overlap = _checks.fraction("dp_overlap", dp_overlap, zero_ok=True)
    tp_overlap = _checks.fraction("tp_overlap", tp_overlap, zero_ok=True)
    batch = _checks.integer("global_batch", global_batch)
    if batch % (dp * micro_batch):
        raise ValueError(f"global_batch must be a positive multiple of dp x micro_batch = {dp * micro_batch} "
                         f"sequences, got {batch!r}")
    if gpu is not None:
        check_precision(precision, gpu)
    elif precision not in ("bf16", "fp8"):
        raise ValueError(f"precision must be one of bf16, fp8, got {precision!r}")
    if attention not in ATTENTION_KERNELS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KERNELS)}, got {attention!r}")
    if recompute == "selective_op" and attention == "unfused":
        raise ValueError("recompute='selective_op' (torchtitan's per-op policy) saves a fused attention kernel's "
                         "output; with attention='unfused' it would recompute the attention: pass a fused "
                         "attention (auto, fa2, fa3)")
    if fp8_recipe not in FP8_RECIPES:
        raise ValueError(f"fp8_recipe must be one of {', '.join(FP8_RECIPES)}, got {fp8_recipe!r}")
    if power_cap is not None:
        power_cap = check_power_cap(power_cap, gpu) if gpu is not None else \
            _checks.positive_number("power_cap", power_cap)
    utilization = _checks.fraction("kernel_utilization", kernel_utilization, zero_ok=False)
    if efficiency is not None:          # the flat model: the kernel tables' own settings would be ignored
        for name, value, default in (("kernel_utilization", utilization, DEFAULT_KERNEL_UTILIZATION),
                                     ("fp8_recipe", fp8_recipe, "te")):
            if value != default:
                where = (f"compute_efficiency={compute_efficiency!r}" if not isinstance(compute_efficiency, str)
                         else f"compute_efficiency='auto' on {gpu.name}, which the kernel tables cannot time")
                hint = "" if isinstance(compute_efficiency, str) else " or pass compute_efficiency=None"
                raise ValueError(f"{name}={value!r} sets the kernel-table compute model, but the step runs the flat "
                                 f"model ({where}); leave {name} at its default ({default!r}){hint}")
    if tp_overlap_impl not in TP_OVERLAP_IMPLS:
        raise ValueError(f"tp_overlap_impl must be one of {', '.join(TP_OVERLAP_IMPLS)}, got {tp_overlap_impl!r}")
    return Schedule(global_batch=batch, dp_overlap=dp_overlap, compute_efficiency=efficiency, precision=precision,
                    recompute=check_recompute(recompute), tp_overlap=tp_overlap, attention_efficiency=attn_eff,
                    recompute_layers=recompute_layers, attention=attention, fp8_recipe=fp8_recipe,
                    power_cap=power_cap, kernel_utilization=utilization, tp_overlap_impl=tp_overlap_impl)
