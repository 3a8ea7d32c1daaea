"""Training-step model: compute, tensor / context / pipeline / data / expert parallel
communication, pipeline schedules, recompute and memory.

A training step of a transformer on ``tp x cp x pp x dp`` GPUs, placed TP fastest, then CP,
DP, PP (``order=`` or ``ranks=`` override it), so a TP group sits inside a server and a DP
group spans servers on one rail. Every collective is solved on the cluster graph with all
groups of its kind running at once, in lockstep (:func:`flowsolver.concurrent` with
``lockstep=True``); the step is composed from those times:

* compute (``_compute``): each stage's layers, and the logits on the last stage, the weight
  GEMMs at ``compute_efficiency`` of the peak of the precision they run in (``fp8``: the
  layers' GEMMs at the GPU's dense FP8 peak), attention at ``attention_efficiency`` of the
  bf16 peak, plus what the recompute mode (none / selective / full, or the first
  ``recompute_layers`` of each model chunk) runs again (a float ``compute_efficiency``); or,
  with ``compute_efficiency=None`` (the default ``"auto"`` on a GPU with kernel tables),
  every kernel timed from published kernel benchmarks (``_kernels``, ``_kernel_data``: GEMMs
  by shape and precision, flash attention by kernel, memory-bound work and FP8 casts at the
  achieved HBM bandwidth, TP-overlap and power-cap effects);
* pipeline (``_pipeline``): 1F1B or interleaved 1F1B with ``vp`` model chunks per stage
  (bubble ``(pp - 1) / vp`` stage-microbatches; ``vp`` times the sends, the steady-state
  ones overlapped), Megatron's uneven split when the layers do not divide (the embedding
  and the loss count as one layer each);
* communication phases, exposed or hidden (``_exposed``): TP with sequence parallelism (6 all-gathers and 4
  reduce-scatters per layer, each hiding ``tp_overlap`` of itself behind the GEMM it
  overlaps, at most that GEMM), CP ring attention (KV exchanged per layer, hidden behind the
  attention step by step), EP all-to-alls of ``top_k x capacity_factor`` routed tokens, DP
  gradient reduce-scatter in buckets during the last backward and the distributed optimizer's
  parameter all-gather during the next forward, one bucket of each exposed, or FSDP / ZeRO-3
  per layer (each layer's gather prefetched beside the previous layer's forward, its
  gradients reduce-scattered beside the next layer's backward);
* memory (``_memory``): per stage, its parameters by ZeRO stage and the activations
  Megatron's schedule keeps in flight on it.

``step_time`` = compute + bubble + exposed TP, CP, PP, EP and DP time; ``mfu`` = model FLOPs
per second over the whole step / the GPUs' dense peak of the step's precision, as published
runs report it (a ``capacity_factor`` below 1 leaves the dropped tokens' expert FLOPs out).

:func:`training_step` (``_step``) takes the model, a :class:`Parallelism` (``_parallelism``:
how the job is laid out, what the collectives are solved for; ``vp`` / ``micro_batch`` may
be left ``"auto"``, ``_auto``) and a :class:`Schedule` (how the solved step is run), its
checks in ``_prepare``. Solving and composing are separate: :func:`training_step` solves every
collective once into a :class:`CommProfile` (``_profile``: per parallelism its op,
algorithm, bytes and per-call time, on the groups of a :class:`ParallelLayout`,
``_layout``); the step is the pure function ``compose(profile, schedule)`` (``_compose``) of
it and a :class:`Schedule` (``_schedule``), which :meth:`StepResult.recompose` applies again. Model presets
are in ``_models``.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# names load their module on first use (flowsolver._lazy): the command line reads the
# constants without importing JAX. Names not in __all__ are for flowsolver's other packages
# (planning, serving, traces, upgrade), which import them from here, never from a module.
__getattr__, __dir__ = lazy_exports(__name__, {
    "._compose": ("Phase", "StepResult", "compose", "layer_compute"),
    "._overlap_costs": ("dp_overlap_costs", "cp_ring_sm_share"),
    "._schedule": ("Schedule", "checked_schedule", "default_tp_overlap", "DEFAULT_COMPUTE", "resolve_compute"),
    "._layout": ("ParallelLayout", "DEFAULT_ORDER", "checked_order"),
    "._memory": ("memory_per_gpu", "stage_memory", "memory_breakdown", "MemoryOverheads", "ZERO_STAGES",
                  "CUDA_CONTEXT_A100", "DEEPSPEED_ZERO_NVIDIA_SMI_A100", "te_fp8_activations", "gather_bytes_of", "check_fp8_param_gather",
                  "grad_bytes_of"),
    "._models": ("MODELS", "ModelSpec", "get_model"),
    "._profile": ("CommProfile", "CommTiming", "ring_pairs", "solve_profile", "step_collectives", "time_collectives"),
    "._compute": ("DEFAULT_ATTENTION_EFFICIENCY", "DEFAULT_COMPUTE_EFFICIENCY", "DEFAULT_KERNEL_UTILIZATION",
                  "check_recompute", "layer_gemm_flops"),
    "._step": ("DEFAULT_TP_OVERLAP", "training_step", "step_arguments"),
    "._parallelism": ("Parallelism", "REDUCE_DTYPES"),
    "._auto": ("AutoChoice", "prefetch_kinds"),
    "._pipeline": ("stage_layers", "chunk_layers", "pass_order", "warmup_passes"),
    "._exposed": ("tp_hidden", "tp_layer_ops"),
    "._kernels": ("memory_fraction", "kernel_tables_missing", "kernel_family", "gemm_curve", "gemm_seconds_shape",
                  "attention_rates", "LAUNCH_SECONDS"),
    "._prepare": ("checked_expert_routing", "checked_gpu", "prepare_step", "interleaving_refused",
                  "moe_needs_sequence_parallel"),
    "._sensitivity": ("step_directional",),
    "._memory_overheads": ("FITS_RESERVE", "usable_memory"),
    "._recompute": ("RECOMPUTE",),
})

if TYPE_CHECKING:   # what the names above are, for type checkers, readers and tests/test_package.py
    from ._compose import Phase, StepResult, compose, layer_compute
    from ._overlap_costs import cp_ring_sm_share, dp_overlap_costs
    from ._schedule import Schedule, checked_schedule, default_tp_overlap, DEFAULT_COMPUTE, resolve_compute
    from ._layout import ParallelLayout, DEFAULT_ORDER, checked_order
    from ._memory import (memory_per_gpu, stage_memory, memory_breakdown, MemoryOverheads, ZERO_STAGES,
                          CUDA_CONTEXT_A100, DEEPSPEED_ZERO_NVIDIA_SMI_A100, te_fp8_activations, gather_bytes_of,
                          check_fp8_param_gather, grad_bytes_of)
    from ._models import MODELS, ModelSpec, get_model
    from ._profile import CommProfile, CommTiming, ring_pairs, solve_profile, step_collectives, time_collectives
    from ._compute import (DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_KERNEL_UTILIZATION,
                           check_recompute, layer_gemm_flops)
    from ._step import DEFAULT_TP_OVERLAP, training_step, step_arguments
    from ._parallelism import Parallelism, REDUCE_DTYPES
    from ._auto import AutoChoice, prefetch_kinds
    from ._pipeline import stage_layers, chunk_layers, pass_order, warmup_passes
    from ._exposed import tp_hidden, tp_layer_ops
    from ._kernels import (memory_fraction, kernel_tables_missing, kernel_family, gemm_curve, gemm_seconds_shape,
                           attention_rates, LAUNCH_SECONDS)
    from ._prepare import (checked_expert_routing, checked_gpu, prepare_step, interleaving_refused,
                           moe_needs_sequence_parallel)
    from ._sensitivity import step_directional
    from ._memory_overheads import FITS_RESERVE, usable_memory
    from ._recompute import RECOMPUTE

__all__ = ["training_step", "Parallelism", "AutoChoice", "step_arguments", "compose", "StepResult", "Phase", "Schedule",
           "CommProfile", "CommTiming",
           "ParallelLayout", "ModelSpec", "MODELS", "get_model", "memory_per_gpu", "stage_memory", "memory_breakdown",
           "MemoryOverheads", "CUDA_CONTEXT_A100", "DEEPSPEED_ZERO_NVIDIA_SMI_A100", "FITS_RESERVE", "usable_memory",
           "stage_layers",
           "DEFAULT_COMPUTE_EFFICIENCY", "DEFAULT_COMPUTE", "DEFAULT_ATTENTION_EFFICIENCY", "DEFAULT_TP_OVERLAP",
           "DEFAULT_KERNEL_UTILIZATION"]
