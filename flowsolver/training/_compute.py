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
           "DEFAULT_KERNEL_UTILIZATION", "FP8_RECIPES", "TP_OVERLAP_IMPLS", "check_precision", "check_recompute",
           "stage_seconds", "attention_seconds", "gemm_seconds",
           "layer_kernel_costs", "kernel_parts"]

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


# --- compute from measured kernels (compute_efficiency=None, the default where the GPU has tables) ---

#: the FP8 recipes: ``"te"`` (Transformer Engine, what Megatron / NeMo run: tensor-wise
#: scaling, casts fused into the norm and activation kernels, weights cast once per step),
#: ``"tensorwise"`` and ``"rowwise"`` (torchao's float8 training, what torchtitan runs)
FP8_RECIPES = ("te", "tensorwise", "rowwise")

# Bytes each memory-bound pass moves per element, counted from the kernels a pre-norm
# transformer layer runs (bf16, 2 bytes per element; one read and one write unless said):
# forward: the two norms (read x, write y: 2 passes each), RoPE on Q and K (read, write), the
# two residual adds (read two, write one: 3) and the MLP activation (gated: read the two FC1
# halves, write one: 3 per ffn element; GeLU: read, write: 2); backward: each norm reads dy and
# x and writes dx (3), RoPE 2, each residual branch reads dy and writes the branch gradient (2),
# the activation reads dy and its inputs and writes their gradients (gated: 1 + 2 + 2 = 5;
# GeLU: 3).
_NORM_FWD, _NORM_BWD, _RESID_FWD, _RESID_BWD, _ROPE = 2, 3, 3, 2, 2
_ACT_FWD = {True: 3, False: 2}
_ACT_BWD = {True: 5, False: 3}
#: the loss on the last stage, per vocabulary entry of a token (bf16 logits, a fused
#: vocab-parallel cross entropy): forward reads the logits twice (max, then sum of exponentials),
#: backward reads them and writes their gradient: 4 passes of 2 bytes
_LOSS_BYTES_PER_VOCAB = 8
# FP8 casts, bytes per element cast, from torchao's float8 roofline
# (torchao/testing/training/roofline_utils.py, get_tensor_memory_traffic_ovhd_s, fuse_with_prev:
# the amax read fused into the producer, as torch.compile does): tensorwise input / grad_output
# read 2 and write 1 twice (row- and column-major) = 4, weight 3 + 3 = 6; rowwise input /
# grad_output 3 + 3 = 6, weight 1 + 4 + 3 = 8. Transformer Engine's cast-transpose is the
# tensorwise kernel (4 per element), and fused into the producing kernel for the norm outputs
# (QKV and FC1 inputs) and the activation output (FC2 input).
_CAST = {"te": (4, 4), "tensorwise": (4, 6), "rowwise": (6, 8)}
#: torchao rowwise: the backward GEMMs run slow-accumulation cuBLAS tensor-wise and apply the
#: row scales in an extra kernel per GEMM (torchao float8_ops.py; pytorch/ao issue 2184: "at
#: least one extra triton kernel per GEMM ... just for the rescaling"): read and write each
#: backward GEMM's bf16 output once
_ROWWISE_RESCALE_BYTES = 4
#: TP communication overlap (``tp_overlap > 0``) as the kernels run it, per GEMM ``(op, pass)``:
#: Transformer Engine's userbuffers (``"te"``) as NeMo's recipes configure them
#: (nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py at 8cfedd72,
#: ``userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192`` for Hopper,
#: ``userbuffers_{bf16,fp8}_b200_h8192_tp2_mbs1_seqlen8192`` for Blackwell): a ring exchange splits
#: the GEMM into ``tp`` chunks along its rows, a pipelined reduce-scatter into ``num_splits`` = 4
#: and holds ``num_sm`` SMs (``set_sm_margin``: the GEMM runs on the others), a bulk overlap runs a
#: communication kernel on ``num_sm`` SMs beside the whole GEMM. Value: ``(chunks, SMs held)``,
#: ``chunks`` ``"tp"`` or a number. PyTorch's async TP (``"async"``, torchtitan's AsyncTP:
#: symmetric-memory copies, no SMs held) splits the forward and data-gradient GEMMs into ``tp``.
_UB = {
    ("hopper", "bf16"): {("proj", "fwd"): (4, 24), ("fc2", "fwd"): (4, 16), ("qkv", "fwd"): ("tp", 1),
                         ("fc1", "fwd"): ("tp", 1), ("proj", "dgrad"): ("tp", 1), ("fc2", "dgrad"): ("tp", 1),
                         ("qkv", "dgrad"): (1, 4), ("qkv", "wgrad"): (1, 24), ("fc1", "dgrad"): (1, 2),
                         ("fc1", "wgrad"): (1, 4)},
    ("hopper", "fp8"): {("proj", "fwd"): ("tp", 1), ("fc2", "fwd"): ("tp", 1), ("qkv", "fwd"): ("tp", 1),
                        ("fc1", "fwd"): ("tp", 1), ("proj", "dgrad"): ("tp", 1), ("fc2", "dgrad"): ("tp", 1),
                        ("qkv", "dgrad"): (1, 4), ("qkv", "wgrad"): (1, 24), ("fc1", "dgrad"): (1, 2),
                        ("fc1", "wgrad"): (1, 4)},
    ("blackwell", "bf16"): {("proj", "fwd"): (4, 32), ("fc2", "fwd"): (4, 16), ("qkv", "fwd"): ("tp", 1),
                            ("fc1", "fwd"): ("tp", 1), ("proj", "dgrad"): ("tp", 1), ("fc2", "dgrad"): ("tp", 1),
                            ("qkv", "dgrad"): (1, 16), ("qkv", "wgrad"): (1, 24), ("fc1", "dgrad"): (1, 2),
                            ("fc1", "wgrad"): (1, 4)},
    ("blackwell", "fp8"): {("proj", "fwd"): ("tp", 1), ("fc2", "fwd"): ("tp", 1), ("qkv", "fwd"): ("tp", 1),
                           ("fc1", "fwd"): ("tp", 1), ("proj", "dgrad"): ("tp", 1), ("fc2", "dgrad"): ("tp", 1),
                           ("qkv", "dgrad"): (1, 16), ("qkv", "wgrad"): (1, 24), ("fc1", "dgrad"): (1, 2),
                           ("fc1", "wgrad"): (1, 4)},
}
_GENERATION = {"h100": "hopper", "h200": "hopper", "b200": "blackwell", "gb200": "blackwell"}
TP_OVERLAP_IMPLS = ("te", "async")


def _overlap_plan(family: str, precision: str, tp: int, tp_overlap: float, impl: str) -> dict:
    """``(op, pass) -> (chunks, SMs held)`` of the GEMMs a TP collective overlaps (see _UB);
    empty without TP overlap."""
    if tp <= 1 or tp_overlap <= 0:
        return {}
    if impl == "async":
        return {(op, ps): (tp, 0) for op in ("qkv", "proj", "fc1", "fc2") for ps in ("fwd", "dgrad")}
    table = _UB.get((_GENERATION.get(family, ""), precision), {})
    return {key: (tp if chunks == "tp" else chunks, sms) for key, (chunks, sms) in table.items()}


#: unfused attention (no flash kernel: Megatron-DeepSpeed 2022): the scores and probabilities
#: go through HBM, bytes per score element and layer: forward writes the scores, the softmax
#: reads them and writes the probabilities (3 passes of 2 bytes), backward reads the
#: probabilities and the gradient and writes the scores' gradient (3 more)
_UNFUSED_BYTES_PER_SCORE = 12


def layer_kernel_costs(model, *, micro_batch: int, tp: int, cp: int, ep: int, sequence_parallel: bool, gpu,
                       precision: str, attention: str = "auto", fp8_recipe: str = "te",
                       power_cap: float | None = None, capacity_factor: float = 1.0, tp_overlap: float = 0.0,
                       tp_overlap_impl: str = "te") -> dict:
    """Seconds one GPU spends on one layer of one microbatch, by part, from the measured kernels
    of :mod:`._kernels` (the kernel-table compute model): ``gemm_fwd`` / ``gemm_bwd`` (dicts by GEMM:
    ``qkv``, ``proj``, ``fc1``, ``fc2``; backward = data gradient + weight gradient),
    ``attention_fwd`` / ``attention_bwd``, ``memory_fwd`` / ``memory_bwd`` (norms, RoPE,
    residuals, activation, FP8 casts), ``weight_casts`` (per microbatch), ``output_fwd`` /
    ``output_bwd`` (logits GEMM and loss, last stage).

    Shapes per GPU: ``T = micro_batch x seq_len / cp`` tokens; column-parallel QKV and FC1 are
    ``T x h`` by ``h x out / tp``, row-parallel proj and FC2 ``T x in / tp`` by ``in / tp x h``
    (sequence parallelism gathers the tokens before them, so the GEMMs see all ``T``); a
    mixture of experts runs its ``experts / ep`` local experts on ``T top_k capacity_factor ep /
    experts`` tokens each. A forward ``(m, n, k)`` has a data gradient ``(m, k, n)`` and a weight
    gradient ``(k, n, m)``, in the step's precision (FP8: the layers' four GEMMs; the logits stay
    bf16). With TP overlap (and sequence parallelism) the GEMMs beside a TP collective run as the
    overlap runs them (:data:`_UB`: split into chunks along their rows, on the SMs the
    communication leaves). Attention: causal flash attention, forward ``2 T s h / (tp)`` FLOPs per layer (``s``
    the full sequence: a CP rank's queries see all keys), backward 2.5 x, at
    :func:`._kernels.attention_rates` for ``s / cp`` keys per block; ``"unfused"`` computes the
    full square at the BF16 GEMM rate and moves the scores through HBM.
    """
    from ._kernels import (SMS, attention_rates, gemm_fraction, gemm_seconds_shape, kernel_family, kernel_tables_missing,
                           memory_seconds)

    why = kernel_tables_missing(gpu)
    if why:
        raise ValueError(f"GPU {gpu.name!r} {why}: pass compute_efficiency= (the flat model)")
    h, heads, kvh = model.hidden, model.heads, model.kv_heads
    d = h // heads
    kvd = kvh * d
    gated = model.gated_mlp
    s = model.seq_len
    T = micro_batch * s / cp
    moe = model.experts > 1
    routed = model.top_k * (capacity_factor if moe else 1.0)
    ffn_local = model.ffn / tp
    fc1_out = (2 if gated else 1) * ffn_local

    fam = kernel_family(gpu)
    # no TP overlap without sequence parallelism (Megatron-LM refuses it: "Tensor parallel
    # communication/GEMM overlap can happen only when sequence parallelism is enabled"): whole GEMMs
    overlap = _overlap_plan(fam, precision, tp, tp_overlap if sequence_parallel else 0.0, tp_overlap_impl)

    def one(m, n, k, prec, count, op, ps):
        chunks, held = overlap.get((op, ps), (1, 0))
        share = 1.0 - held / SMS[fam]
        return gemm_seconds_shape(m / chunks, n, k, gpu, prec, power_cap=power_cap, count=count * chunks,
                                  sm_share=share)

    def gemm(m, n, k, prec, count=1, op=""):
        fwd = one(m, n, k, prec, count, op, "fwd")
        bwd = one(m, k, n, prec, count, op, "dgrad") + one(k, n, m, prec, count, op, "wgrad")
        return fwd, bwd

    shapes = dict(qkv=(T, (h + 2 * kvd) / tp, h, 1), proj=(T, h, h / tp, 1))
    if moe:
        local = max(1, model.experts // ep)
        m_e = T * routed * ep / model.experts
        shapes.update(fc1=(m_e, fc1_out, h, local), fc2=(m_e, h, ffn_local, local))
    else:
        shapes.update(fc1=(T, fc1_out, h, 1), fc2=(T, h, ffn_local, 1))
    gemm_fwd, gemm_bwd = {}, {}
    for name, (m, n, k, count) in shapes.items():
        gemm_fwd[name], gemm_bwd[name] = gemm(m, n, k, precision, count, name)

    # attention
    flops_fwd = 2.0 * micro_batch * s * s * h / (tp * cp)          # causal: half of 4 s^2 d heads
    if attention == "unfused":
        eta = gemm_fraction(kernel_family(gpu), "bf16", power_cap, gpu.tdp)
        full = 2.0 * flops_fwd                                     # the full square, masked afterwards
        scores = micro_batch * (heads / tp) * s * s / cp
        mem = memory_seconds(_UNFUSED_BYTES_PER_SCORE * scores, gpu)
        attn_fwd = full / (eta * gpu.peak_bf16_flops) + mem / 2
        attn_bwd = 2.0 * full / (eta * gpu.peak_bf16_flops) + mem / 2
    else:
        r_fwd, r_bwd = attention_rates(gpu, attention, head_dim=d, tokens=s / cp, power_cap=power_cap)
        attn_fwd, attn_bwd = flops_fwd / r_fwd, 2.5 * flops_fwd / r_bwd

    # memory-bound work per token (elements), bf16
    h_e = h / tp if sequence_parallel else h
    rope = _ROPE * (h + kvd) / tp
    mem_f = 2 * _NORM_FWD * h_e + rope + 2 * _RESID_FWD * h_e + _ACT_FWD[gated] * ffn_local * routed
    mem_b = 2 * _NORM_BWD * h_e + rope + 2 * _RESID_BWD * h_e + _ACT_BWD[gated] * ffn_local * routed
    if moe:            # token permutation before and after the experts, both ways
        mem_f += 4 * routed * h_e
        mem_b += 4 * routed * h_e
    bytes_f, bytes_b, weight_bytes = 2.0 * mem_f, 2.0 * mem_b, 0.0
    if precision == "fp8":
        c_act, c_w = _CAST[fp8_recipe]
        dy = (h + 2 * kvd) / tp + h_e + fc1_out * routed + h_e         # the four GEMMs' output gradients
        layer_params = (model.attention_params + routed * model.mlp_params) / tp
        if fp8_recipe == "te":
            # the attention output (proj input) cast-transposed; the others fused; weights once per step
            bytes_f += c_act * h / tp
            bytes_b += c_act * dy
        else:
            # torchao casts the GEMM-local tensors: the gathered inputs of QKV and FC1 and the
            # gathered output gradients of proj and FC2 are whole (h) on every TP rank
            x = h + h / tp + h + ffn_local * routed
            dy_local = (h + 2 * kvd) / tp + h + fc1_out * routed + h
            bytes_f += c_act * x
            bytes_b += c_act * dy_local
            weight_bytes = c_w * layer_params
            if fp8_recipe == "rowwise":
                bytes_b += _ROWWISE_RESCALE_BYTES * x                  # data-gradient outputs, shaped like the inputs
                weight_bytes += _ROWWISE_RESCALE_BYTES * layer_params  # weight-gradient outputs
    memory_fwd = memory_seconds(T * bytes_f, gpu)
    memory_bwd = memory_seconds(T * bytes_b, gpu)
    weight_casts = memory_seconds(weight_bytes, gpu)

    # logits (bf16) and the loss
    v = model.vocab / tp
    out_f, out_b = gemm(T, v, h, "bf16")
    loss = memory_seconds(T * _LOSS_BYTES_PER_VOCAB * v, gpu)
    return dict(gemm_fwd=gemm_fwd, gemm_bwd=gemm_bwd, attention_fwd=attn_fwd, attention_bwd=attn_bwd,
                memory_fwd=memory_fwd, memory_bwd=memory_bwd, weight_casts=weight_casts,
                output_fwd=out_f + loss / 2, output_bwd=out_b + loss / 2)


def kernel_parts(costs: dict, again) -> dict:
    """The per-layer seconds :func:`layer_kernel_costs` adds up to, as the flat model's
    :func:`stage_seconds` / :func:`attention_seconds` / :func:`gemm_seconds` give them:
    ``layer`` (forward and backward, no recompute), ``layer_recomputed`` (a layer whose
    forward runs again, as much of it as ``again``, a
    :class:`~flowsolver.training._recompute.LayerRecompute`, says), ``output`` (``output_fwd``
    of it forward), ``attention`` (forward + backward, the forward again when recomputed),
    ``attention_fwd`` / ``attention_bwd``, ``gemms`` (forward GEMMs, what each TP collective
    hides behind) and ``forward`` / ``backward``.
    Selective recompute (``again.core_attention``) runs the attention forward again in every
    layer's backward, flash kernel or not: Megatron-Core checkpoints the core attention
    (``_checkpointed_attention_forward``), and a flash backward then recomputes the scores once
    more inside its own 2.5 x."""
    fwd = sum(costs["gemm_fwd"].values()) + costs["attention_fwd"] + costs["memory_fwd"]
    bwd = (sum(costs["gemm_bwd"].values()) + costs["attention_bwd"] + costs["memory_bwd"]
           + again.core_attention * costs["attention_fwd"])
    layer = fwd + bwd + costs["weight_casts"]
    redo = (sum(again.gemms[g] * t for g, t in costs["gemm_fwd"].items()) + again.attention * costs["attention_fwd"]
            + again.elementwise * costs["memory_fwd"])
    return dict(layer=layer, layer_recomputed=layer + redo, output=costs["output_fwd"] + costs["output_bwd"],
                output_fwd=costs["output_fwd"],
                attention=costs["attention_fwd"] * (1 + again.attention + again.core_attention) + costs["attention_bwd"],
                attention_fwd=costs["attention_fwd"], attention_bwd=costs["attention_bwd"],
                gemms=dict(costs["gemm_fwd"]), forward=fwd, backward=bwd)
