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

Recompute (Korthikanti et al. 2022, "Reducing activation recomputation in large transformer
models", table 2; FLOPs per token of one layer):

* ``"selective"`` (default; what flash attention does in its backward pass): the attention
  scores are recomputed, ``+ 2 h s`` (one causal forward of the scores), and the activations
  kept are those of :func:`activation_bytes_per_layer` (``34 s b h / t`` bytes per layer for
  Llama 3 8B with sequence parallelism);
* ``"none"``: nothing recomputed; the ``2 a s^2 b / t`` bytes of attention probabilities are
  kept too;
* ``"full"``: each layer's forward runs again in the backward pass, ``+ 1/3`` of the layer's
  FLOPs; only the layer input is kept, ``2 s b h / t`` bytes per layer, plus one layer's
  working set. ``recompute_layers=n`` recomputes only the first ``n`` layers of each model
  chunk (Megatron's ``recompute_method="block"``); the others keep selective's activations.
"""

from __future__ import annotations

__all__ = ["PRECISIONS", "RECOMPUTE", "DEFAULT_COMPUTE_EFFICIENCY", "DEFAULT_ATTENTION_EFFICIENCY", "check_precision",
           "check_recompute",
           "stage_seconds", "attention_seconds", "gemm_seconds", "activation_bytes_per_layer", "logits_bytes"]

PRECISIONS = ("bf16", "fp8")
RECOMPUTE = ("none", "selective", "full")

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
# module's split of that work (the layers' GEMMs at 1979 TFLOP/s FP8, the logits at 989 bf16,
# attention at DEFAULT_ATTENTION_EFFICIENCY of 989) that is 0.461; rounded to 0.46. The other
# published rows are predictions from it (README, "Training steps against published runs").
DEFAULT_COMPUTE_EFFICIENCY = 0.46


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


def check_recompute(recompute) -> str:
    """``recompute`` checked: ``none``, ``selective`` or ``full``.

    >>> check_recompute("full")
    'full'
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return recompute


def _layer_flops(model, recompute: str) -> tuple:
    """(GEMM FLOPs, attention FLOPs) executed per token of one layer, recompute included."""
    gemm, attention = model.layer_linear_flops, model.layer_attention_flops()
    if recompute == "selective":
        return gemm, attention * (4.0 / 3.0)
    if recompute == "full":
        return gemm * (4.0 / 3.0), attention * (4.0 / 3.0)
    return gemm, attention


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
    ``efficiency``) of the bf16 peak; with ``recompute="full"``, ``recomputed`` of the layers
    (default all) run their forward again. A mixture of experts' expert GEMMs run on
    ``capacity_factor x`` the routed tokens (padded to capacity; 1: dropless).

    >>> import topologies as tp
    >>> from flowsolver.training import get_model
    >>> m, h100 = get_model("llama-3-8b"), tp.get_gpu("h100_sxm")
    >>> t = stage_seconds(m, 32, True, tokens=8192, shards=1, gpu=h100, precision="bf16", efficiency=1.0,
    ...                   recompute="none")
    >>> round(t * 989e12 / 8192 / m.flops_per_token, 12)
    1.0
    """
    attention = _layer_flops(model, recompute)[1]
    gemm = model.layer_linear_flops + 6.0 * model.top_k * model.mlp_params * (_expert_share(model, capacity_factor) - 1)
    if recompute == "full":
        gemm_flops = gemm * (layers + (layers if recomputed is None else min(layers, recomputed)) / 3.0)
    else:
        gemm_flops = gemm * layers
    fast = (gpu.peak_fp8_flops if precision == "fp8" else gpu.peak_bf16_flops) * efficiency
    slow = gpu.peak_bf16_flops
    attention_rate = slow * (efficiency if attention_efficiency is None else attention_efficiency)
    seconds = gemm_flops / fast + layers * attention / attention_rate
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
    attention = _layer_flops(model, recompute)[1]
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
    h, d, k = model.hidden, model.hidden // model.heads, model.top_k * _expert_share(model, capacity_factor)
    params = dict(qkv=h * (h + 2 * model.kv_heads * d), proj=h * h,
                  fc1=k * h * model.ffn * (2 if model.gated_mlp else 1), fc2=k * model.ffn * h)
    rate = (gpu.peak_fp8_flops if precision == "fp8" else gpu.peak_bf16_flops) * efficiency
    return {name: 2.0 * tokens * n / (shards * rate) for name, n in params.items()}


def activation_bytes_per_layer(model, *, micro_batch: int, tp: int, cp: int, recompute: str,
                               sequence_parallel: bool) -> float:
    """Bytes of activations one layer keeps per microbatch on one GPU for its backward pass
    (bf16), counted tensor by tensor from the model's shape as Korthikanti et al. 2022
    (section 4.1) count them, for a pre-norm transformer without dropout (Llama 3, and
    Megatron-Bridge's Llama recipes, train without): per token, the two norms' inputs
    (``2 h``), the QKV GEMM's input (``h``), Q, K and V (``h + 2 h kv_heads / heads``), the
    attention output (``h``, also the projection's input), the FC1 input(s) (``top_k h``) and
    the MLP's inner tensors (``top_k x 3 ffn`` gated: FC1's two outputs and the activation's;
    ``2 ffn`` plain). With sequence parallelism all of it is sharded over ``tp``; without,
    the norm and GEMM inputs are whole on every TP rank. For GPT-3's shape this is ``32 s b h
    / t`` (Korthikanti's ``34``, less two one-byte dropout masks); Llama 3 405B ``31.75``, 8B
    ``34``. Recompute: ``"none"`` keeps the ``2 a s^2 b / t`` bytes of attention
    probabilities an unfused attention stores (``"selective"``, flash attention, does not);
    ``"full"`` keeps only the layer's input, ``2 s b h / t``. ``s`` is the tokens per CP rank.

    >>> from flowsolver.training import get_model
    >>> activation_bytes_per_layer(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1,
    ...                            recompute="selective", sequence_parallel=True) == 34 * 8192 * 4096 / 8
    True
    """
    s, b, h, a = model.seq_len / cp, micro_batch, model.hidden, model.heads
    if recompute == "full":
        return 2.0 * s * b * h / (tp if sequence_parallel else 1)
    whole = 3.0 * h + model.top_k * h                   # norm inputs, QKV and FC1 inputs
    split = 2.0 * h + 2.0 * h * model.kv_heads / a + model.top_k * (3 if model.gated_mlp else 2) * model.ffn
    values = (whole + split) / tp if sequence_parallel else whole + split / tp
    per_layer = 2.0 * s * b * values
    if recompute == "none":
        per_layer += 2.0 * a * s * model.seq_len * b / tp    # local queries x all keys, bf16
    return per_layer


def logits_bytes(model, *, micro_batch: int, tp: int, cp: int) -> float:
    """Bytes the loss keeps per microbatch on the last stage: the softmax of the
    vocabulary-parallel logits, ``vocab / tp`` values per token in fp32 (Megatron-Core's
    ``vocab_parallel_cross_entropy`` saves it for its backward; the logits reach it in
    fp32 unless ``fp16_lm_cross_entropy``).

    >>> from flowsolver.training import get_model
    >>> logits_bytes(get_model("llama-3-8b"), micro_batch=1, tp=8, cp=1) == 8192 * 128256 / 8 * 4
    True
    """
    return 4.0 * micro_batch * model.seq_len / cp * model.vocab / tp
