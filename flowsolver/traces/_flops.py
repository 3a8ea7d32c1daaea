"""The floating-point operations a training step's kernels execute, per GPU and microbatch,
from the model's arithmetic (a Chakra node's ``num_ops``)."""

from __future__ import annotations

from ..training import layer_gemm_flops

__all__ = ["executed_flops"]


def executed_flops(profile) -> dict:
    """Forward FLOPs one GPU executes per microbatch (``micro_batch x seq_len`` tokens, the
    work split over the ``tp x cp`` GPUs of a stage), from the model's arithmetic: ``gemms``,
    one layer's weight GEMMs, ``2 x`` their active parameters per token (:attr:`~flowsolver.
    training.ModelSpec.layer_linear_flops` / 3), a mixture of experts' ``top_k`` expert GEMMs
    on ``capacity_factor x`` their routed tokens (padded to capacity, or dropped below 1: what
    the experts run, as ``training_step`` times them); ``attention``, one layer's causal
    attention scores and values, ``2 h s`` per token (:meth:`~flowsolver.training.ModelSpec.
    layer_attention_flops` / 3); ``output``, the output projection, ``2 V h`` per token. A
    backward executes twice its forward.

    >>> import topologies as tp
    >>> from flowsolver import Parallelism, Schedule, training_step
    >>> step = training_step(tp.rail_optimized(1), "llama-3-8b", Parallelism(tp=8), Schedule(global_batch=8))
    >>> f = executed_flops(step.profile)          # 8,192 tokens, 1/8 of each on a GPU
    >>> f["attention"] == 8192 * 2 * 4096 * 8192 / 8, f["output"] == 8192 * 2 * 128256 * 4096 / 8
    (True, True)
    """
    model, lay = profile.model, profile.layout
    per_gpu = profile.micro_batch * model.seq_len / (lay.tp * lay.cp)
    gemms = layer_gemm_flops(model, profile.capacity_factor) / 3.0         # the forward's third
    return dict(gemms=per_gpu * gemms, attention=per_gpu * model.layer_attention_flops() / 3.0,
                output=per_gpu * model.output_flops / 3.0)
