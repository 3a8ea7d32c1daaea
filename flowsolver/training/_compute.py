"""Compute of a step: which work runs at which precision's peak, the recompute it adds, and a
stage's seconds per microbatch.

Work and precision (Transformer Engine's FP8 recipe, as Megatron-Bridge runs it): with
``precision="fp8"`` the weight GEMMs of the transformer layers (QKV, output projection, MLP,
experts) run at the GPU's dense FP8 peak; the attention scores and values (flash / cuDNN
attention) and the output projection to the vocabulary stay in bf16. With ``"bf16"`` all of
it runs at the bf16 peak. The GEMMs run at ``compute_efficiency x`` their peak, attention at
``attention_efficiency x`` the bf16 peak (FP8 GEMMs reach a smaller share of their doubled
peak than flash attention of its own: the memory-bound work between GEMMs does not speed
up with FP8, and the calibration charges it to the GEMMs).

Recompute (:mod:`flowsolver.training._recompute`; Korthikanti et al. 2022, table 2): ``"none"``
(the default, :class:`~flowsolver.training.Schedule`'s, as Megatron-Core's) runs nothing again;
``"selective"`` counts the core attention's forward again, ``+ 2 h s`` per token and layer
(Megatron-Core checkpoints it: it runs again in the backward, flash kernel or not); ``"full"``
each layer's forward again, ``+ 1/3`` of its
FLOPs (``recompute_layers=n``: the first ``n`` layers of each model chunk, Megatron's
``recompute_method="block"``); the partial modes (``"save_qkv_proj"``, ``"selective_op"``) the
share of the forward GEMMs they do not save (:func:`~flowsolver.training._recompute.layer_recompute`).
"""

from __future__ import annotations

from ._recompute import FORWARD_AGAIN, RECOMPUTE, check_recompute, layer_recompute

__all__ = ["PRECISIONS", "RECOMPUTE", "DEFAULT_COMPUTE_EFFICIENCY",
           "DEFAULT_ATTENTION_EFFICIENCY",
           "DEFAULT_KERNEL_UTILIZATION", "check_precision", "check_recompute",
           "stage_seconds", "attention_seconds", "gemm_seconds"]

PRECISIONS = ("bf16", "fp8")

# Fraction of the bf16 dense peak the attention kernels (flash / cuDNN attention, bf16 in
# every precision) reach on the FLOPs this module counts for them. FlashAttention-3 forward,
# bf16, head dim 128, 16 heads, 8192 tokens (the shape of one Llama 3 405B TP-8 rank) runs at
# 614 TFLOP/s on an H100 SXM (pytorch/benchmark PR 2391, FA3's own input sizes; the FA3 paper,
# Shah et al. 2024, reports up to 740 TFLOP/s, 75 %): 614 / 989 = 0.62. The backward runs
# slower per FLOP, but FlashAttention executes 7 h s FLOPs per token and layer (forward 2 h s,
# backward 2.5 x that: flash-attention's benchmarks/benchmark_flash_attention.py) where this
# module counts 8 h s (6 h s of the model count + 2 h s recompute), which makes up for it.
DEFAULT_ATTENTION_EFFICIENCY = 0.62

# Fraction of the dense peak the weight GEMMs (and the logits) reach while computing, with
# the step's memory-bound work (norms, activations, FP8 casts) charged to them; one value for
# every run. Taken from the one compute-bound row of Megatron-Bridge's performance summary
# (25.11, DGX-H100): Llama 3 8B in FP8 on 8 GPUs, data parallel only (its chunked gradient
# reduction hides, no bubble, no TP), 744 TFLOP/s, run with 5 of its 32 layers fully
# recomputed (recompute_num_layers=5 in Megatron-Bridge's LLAMA3_8B_PRETRAIN_CONFIG_H100_
# FP8_CS_V1, scripts/performance/configs/llama/llama3_workload_base_configs.py). With this
# module's split of that work, per token on one GPU (1 / 14,451 tokens/s = 69.20 us; Megatron's
# 51.47 GFLOP per token: 744e12 / 14,451): the layers' GEMMs, 32 + 5/3 layers of 1.3086 GFLOP
# (6 x 218.1 M parameters; the 5 recomputed layers' forward a third again) = 44.06 GFLOP at
# 1979 TFLOP/s FP8, 22.26 us; the logits, 6 x 128,256 x 4096 = 3.152 GFLOP at 989 bf16, 3.19 us;
# attention, 32 + 5/3 layers of 6 h s = 0.2013 GFLOP (the 5 recomputed layers' forward again)
# = 6.778 GFLOP at DEFAULT_ATTENTION_EFFICIENCY x 989 = 613 TFLOP/s, 11.05 us (not hidden, so
# it is taken off first): efficiency = (22.26 + 3.19) / (69.20 - 11.05) = 25.45 / 58.15 =
# 0.438; rounded to 0.44. (0.461, 0.46, until 2026-12-07, while the flat model charged the
# attention forward again to all 32 layers: 14.01 us of attention.) The other published rows
# are predictions from it (docs/accuracy.md, "Training steps against published runs").
DEFAULT_COMPUTE_EFFICIENCY = 0.44

# The kernel-table model's one figure taken from training runs: the share of a step's compute
# time the kernels run at their benchmarked speed (launch gaps, synchronisation, kernels the
# tables do not list). Fitted on the 222 training rows of the validation corpus
# (benchmarks/validation/training.csv, 7 public sources) leave-one-source-out, the median
# |error| minimised on a grid of 0.01 (benchmarks/fit_kernel_utilization.py, 2026-12-05, the
# rows run with their frameworks' recompute policies): 0.74 to 0.77 over the folds, held out
# median |error| 6.5 %; 0.76 minimises the in-sample median (5.7 %). The six published runs of
# tests/training/test_training_published.py (none in the corpus) each want their own value:
# Llama 3 405B bf16 (paper; 8K / 16K GPUs, 128K context) 0.642 / 0.632 / 0.716,
# Megatron-Bridge 25.11 FP8 Llama 3 70B / 405B / 8B 0.848 / 0.709 / 0.833; at 0.76 they come
# out +17.8 / +19.4 / +6.0 / -9.0 / +5.7 / -8.8 % in tokens/s (docs/accuracy.md, "The kernel
# tables, the default"). Fitted before selective recompute was charged its attention forward
# (2026-12-06); the corpus's Megatron-family rows without a stated recompute run the least that
# fits (none for 121 of 123, Megatron-Core's default, as the library's since), held out 6.9 %:
# docs/training-compute.md, "Accuracy".
DEFAULT_KERNEL_UTILIZATION = 0.76


def check_precision(precision, gpu) -> str:
    """``precision`` checked against the allowed values and the GPU (FP8 needs FP8 tensor cores).

    >>> import topologies as tp
    >>> check_precision("fp8", tp.get_gpu("a100_sxm"))
    Traceback (most recent call last):
    ...
    ValueError: precision='fp8' needs a GPU with FP8 tensor cores; a100_sxm has none (peak_fp8_flops = 0)
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp8" and not gpu.peak_fp8_flops > 0:
        raise ValueError(f"precision='fp8' needs a GPU with FP8 tensor cores; {gpu.name} has none "
                         f"(peak_fp8_flops = 0)")
    return precision


def _attention_flops(model, recompute: str) -> float:
    """Attention FLOPs executed per token of one recomputed layer (under ``"selective"``: of
    every layer), recompute included: the forward (a third of them) again where the mode runs
    it again (``"selective"``'s checkpointed core attention, ``"full"``, ``"save_qkv_proj"``;
    not ``"selective_op"``, which keeps the attention kernel's output), as the kernel tables'
    ``attention`` part charges it (:func:`kernel_parts`). A stage's seconds
    (:func:`stage_seconds`) charge the forward again only to the layers that run it."""
    attention = model.layer_attention_flops()
    again = layer_recompute(model, recompute)
    return attention * (4.0 / 3.0) if again.attention or again.core_attention else attention


def _gemm_params(model, capacity_factor: float = 1.0) -> dict:
    """Parameters of each weight GEMM of one layer (``qkv``, ``proj``, ``fc1``, ``fc2``), the
    MLP's counted for its ``top_k`` experts on ``capacity_factor x`` the routed tokens."""
    h, d, k = model.hidden, model.hidden // model.heads, model.top_k * _expert_share(model, capacity_factor)
    return dict(qkv=h * (h + 2 * model.kv_heads * d), proj=h * h,
                fc1=k * h * model.ffn * (2 if model.gated_mlp else 1), fc2=k * model.ffn * h)


def layer_gemm_flops(model, capacity_factor: float = 1.0) -> float:
    """FLOPs per token of one layer's weight GEMMs, forward and backward (``6 x`` the active
    parameters, :attr:`~flowsolver.training.ModelSpec.layer_linear_flops`), a mixture of
    experts' ``top_k`` expert GEMMs on ``capacity_factor x`` their routed tokens (:func:`_expert_share`).

    >>> from flowsolver.training import get_model
    >>> m = get_model("llama-3-8b")
    >>> layer_gemm_flops(m) == m.layer_linear_flops
    True
    """
    return model.layer_linear_flops + 6.0 * model.top_k * model.mlp_params * (_expert_share(model, capacity_factor) - 1)


def _gemm_share_again(model, recompute: str, capacity_factor: float = 1.0) -> float:
    """The share of a layer's weight-GEMM FLOPs that ``recompute`` runs again (1 for ``"full"``)."""
    again = layer_recompute(model, recompute).gemms
    if not any(again.values()):
        return 0.0
    params = _gemm_params(model, capacity_factor)
    return sum(again[g] * n for g, n in params.items()) / sum(params.values())


def _expert_share(model, capacity_factor: float) -> float:
    """Tokens each expert GEMM computes per routed token: ``capacity_factor`` for a mixture
    of experts padded to capacity (Megatron's token drop with ``moe_pad_expert_input_to_
    capacity``: every expert runs on its whole capacity), 1 for dropless routing or a dense
    model."""
    return capacity_factor if model.experts > 1 else 1.0


def stage_seconds(model, layers: int, last: bool, *, tokens: float, shards: int, gpu, precision: str,
                  efficiency: float, recompute: str, attention_efficiency: float | None = None,
                  recomputed: int | None = None, capacity_factor: float = 1.0) -> float:
    """Seconds one GPU of a stage holding ``layers`` transformer layers (and the output
    projection when ``last``) computes one microbatch of ``tokens`` tokens, its work split
    over ``shards`` GPUs (``tp x cp``), forward and backward. The GEMMs run at
    ``efficiency`` of their precision's peak, attention at ``attention_efficiency`` (default
    ``efficiency``) of the bf16 peak; with a mode that runs the forward again (``"full"`` and
    the partial modes), ``recomputed`` of the layers
    (default all) run their forward again: the share of their GEMMs the mode recomputes and,
    where it runs attention again (``"full"``, ``"save_qkv_proj"``), their attention forward;
    the other layers run none of it again. ``"selective"`` runs the attention forward again in
    every layer (the core attention checkpointed). A mixture of experts' expert GEMMs run on
    ``capacity_factor x`` the routed tokens (padded to capacity; 1: dropless).

    >>> import topologies as tp
    >>> from flowsolver.training import get_model
    >>> m, h100 = get_model("llama-3-8b"), tp.get_gpu("h100_sxm")
    >>> t = stage_seconds(m, 32, True, tokens=8192, shards=1, gpu=h100, precision="bf16", efficiency=1.0,
    ...                   recompute="none")
    >>> round(t * 989e12 / 8192 / m.flops_per_token, 12)
    1.0
    """
    redo = layer_recompute(model, recompute)
    again = (layers if recomputed is None else min(layers, recomputed)) if recompute in FORWARD_AGAIN else 0
    gemm_flops = layer_gemm_flops(model, capacity_factor) * (
        layers + again * _gemm_share_again(model, recompute, capacity_factor) / 3.0)
    # the attention forward (a third of a layer's attention FLOPs) again: in the ``again``
    # recomputed layers where the mode runs it again, in every layer where the core attention
    # is checkpointed (selective)
    attention_flops = model.layer_attention_flops() * (
        layers + (again * redo.attention + layers * redo.core_attention) / 3.0)
    fast = (gpu.peak_fp8_flops if precision == "fp8" else gpu.peak_bf16_flops) * efficiency
    slow = gpu.peak_bf16_flops
    attention_rate = slow * (efficiency if attention_efficiency is None else attention_efficiency)
    seconds = gemm_flops / fast + attention_flops / attention_rate
    seconds += model.output_flops / (slow * efficiency) if last else 0.0
    return tokens * seconds / shards


def attention_seconds(model, *, tokens: float, shards: int, gpu, efficiency: float, recompute: str) -> float:
    """Seconds one GPU spends in one layer's attention scores and values (bf16, recompute
    included) for a microbatch of ``tokens`` tokens split over ``shards`` GPUs, at
    ``efficiency`` (the attention efficiency) of the bf16 peak: the compute ring attention's
    KV exchange hides behind.

    >>> import topologies as tp
    >>> from flowsolver.training import get_model
    >>> m = get_model("llama-3-8b")
    >>> t = attention_seconds(m, tokens=8192, shards=1, gpu=tp.get_gpu("h100_sxm"), efficiency=1.0, recompute="none")
    >>> t == 8192 * 6 * 4096 * 8192 / 989e12
    True
    """
    attention = _attention_flops(model, recompute)
    return tokens * attention / (shards * efficiency * gpu.peak_bf16_flops)


def gemm_seconds(model, *, tokens: float, shards: int, gpu, precision: str, efficiency: float,
                 capacity_factor: float = 1.0) -> dict:
    """Seconds one GPU spends in each weight GEMM of one layer's forward pass (``qkv``,
    ``proj``, ``fc1``, ``fc2``; the backward's data-gradient and weight-gradient GEMMs take
    as long each) for a microbatch of ``tokens`` tokens, the work split over ``shards``
    GPUs (``tp x cp``): ``2 x tokens x`` the matrix's parameters ``/ shards`` at
    ``efficiency x`` the precision's peak (the MLP's ``top_k`` experts on ``capacity_factor
    x`` their routed tokens). The compute each TP collective hides behind.

    >>> import topologies as tp
    >>> from flowsolver.training import get_model
    >>> g = gemm_seconds(get_model("llama-3-8b"), tokens=8192, shards=1, gpu=tp.get_gpu("h100_sxm"),
    ...                  precision="bf16", efficiency=1.0)
    >>> g["proj"] == 2 * 8192 * 4096 * 4096 / 989e12
    True
    """
    params = _gemm_params(model, capacity_factor)
    rate = (gpu.peak_fp8_flops if precision == "fp8" else gpu.peak_bf16_flops) * efficiency
    return {name: 2.0 * tokens * n / (shards * rate) for name, n in params.items()}
