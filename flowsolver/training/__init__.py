"""Training-step model: compute, tensor / pipeline / data / expert parallel communication.

A training step of a transformer on ``tp x pp x dp`` GPUs (Megatron-style placement: rank
``i`` of the placement has TP index ``i mod tp``, DP index ``(i // tp) mod dp`` and PP stage
``i // (tp dp)``, so a TP group sits inside a server and a DP group spans servers on one
rail). The step is composed from the times of its collectives, each solved on the cluster
graph with every group of its kind running at once, in lockstep (:func:`flowsolver.concurrent`
with ``lockstep=True``; ``auto`` picks the algorithm fastest with all groups running):

* compute: ``m`` microbatches of ``micro_batch`` sequences per pipeline stage, each
  ``micro_batch x seq_len x F / (tp pp)`` FLOPs at ``mfu x`` the GPU's dense bf16 peak, with
  ``F = 6 N_active + 12 L h s`` FLOPs per token (weights forward and backward, plus the
  attention scores; PaLM's appendix B count). ``m = global_batch / (dp micro_batch)``.
* pipeline bubble (1F1B): ``(pp - 1)`` microbatch times.
* TP (Megatron): 4 all-reduces of ``micro_batch x seq_len x hidden`` bf16 activations per
  layer and microbatch (two forward, two backward), on the critical path.
* PP: per microbatch a forward activation and a backward gradient of ``micro_batch x
  seq_len x hidden / tp`` bytes cross each stage boundary (Megatron's scatter-gather over
  the TP ranks); ``2 (m + pp - 1)`` of them are on the critical path of 1F1B.
* EP (mixture of experts): 4 all-to-alls per MoE layer and microbatch (dispatch and combine,
  forward and backward) of ``micro_batch x seq_len x hidden x top_k / tp`` bytes per rank,
  among ``ep`` consecutive DP ranks; the experts are sharded over them.
* DP: the bf16 gradients of a GPU's parameter shard (``N / (tp pp)``, experts also ``/ ep``),
  all-reduced (``zero=0``) or reduce-scattered with the updated parameters all-gathered
  (``zero=1``/``2``: the distributed optimizer, the same bytes), or with FSDP (``zero=3``)
  all-gathered forward and backward and reduce-scattered every microbatch. The DP traffic
  may overlap ``dp_overlap`` of the backward pass of the last microbatch (``zero=3``: of
  each microbatch's compute), the window DDP and Megatron's overlapped gradient reduction
  use; the rest is exposed.

``step_time`` = compute + bubble + exposed TP + PP + EP + DP; ``comm_overhead`` = exposed
communication / step time; ``speedup`` = tokens/s against one GPU of the same type
computing alone at the same MFU (so the ideal is the GPU count; with ``pp > 1`` the bubble
keeps it below).

Solving and composing are separate: :func:`training_step` solves every collective once
into a :class:`CommProfile` (``_profile``: per parallelism its op, algorithm, bytes and
per-call time, on the groups of a :class:`ParallelLayout`, ``_layout``); the step is the
pure function ``compose(profile, schedule)`` (``_compose``) of it and a :class:`Schedule`
(global batch, DP overlap, MFU), which :meth:`StepResult.recompose` applies again. Model
presets are in ``_models``, the memory estimate in ``_memory``, the entry point in ``_step``.
"""

from ._compose import Phase, Schedule, StepResult, compose
from ._layout import ParallelLayout
from ._memory import memory_per_gpu
from ._models import MODELS, ModelSpec, get_model
from ._profile import CommProfile, CommTiming
from ._step import DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_TP_OVERLAP, training_step
from ._pipeline import stage_layers

__all__ = ["training_step", "compose", "StepResult", "Phase", "Schedule", "CommProfile", "CommTiming",
           "ParallelLayout", "ModelSpec", "MODELS", "get_model", "memory_per_gpu", "stage_layers",
           "DEFAULT_COMPUTE_EFFICIENCY", "DEFAULT_ATTENTION_EFFICIENCY", "DEFAULT_TP_OVERLAP"]
