"""Compute of a step from measured kernels (``compute_efficiency=None``, the default where the GPU
has kernel tables): a layer's GEMMs, attention and memory-bound passes timed one by one from the
published kernel benchmarks (:mod:`flowsolver.training._kernels`), and how a recompute mode
splits them into a plain and a recomputed layer (:func:`kernel_parts`). The flat model beside
it is :mod:`flowsolver.training._compute`.
"""

from __future__ import annotations

__all__ = ["FP8_RECIPES", "TP_OVERLAP_IMPLS", "layer_kernel_costs", "kernel_parts"]

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
                       tp_overlap_impl: str = "te", etp: int | None = None) -> dict:
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
    experts`` tokens each, split over ``tp`` along FFN; at expert TP 1 (``etp=1``: no gather
    over TP, Megatron-Core's ``expert_tensor_parallel_size = 1``) each whole (FFN not split) on
    ``T top_k capacity_factor ep / (experts tp)`` tokens, the same FLOPs. A forward ``(m, n, k)`` has a data gradient ``(m, k, n)`` and a weight
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
    if moe:
        # a mixture of experts' fc1 / fc2 are the experts' grouped GEMMs, run with
        # ``explicit_expert_comm`` (no Transformer Engine communication, no userbuffers overlap:
        # :func:`~._exposed.etp_layer_exposed`), whole and on every SM; only the attention's
        # GEMMs run as the overlap runs them (adv24 F1: Mixtral tp 8 charged 9.2 s of chunked
        # expert GEMMs a step that hid nothing)
        overlap = {key: plan for key, plan in overlap.items() if key[0] in ("qkv", "proj")}

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
    local = max(1, model.experts // ep) if moe else 1          # the experts a GPU holds
    if moe:
        etp = tp if etp is None else etp
        # the tokens a GPU's experts take: gathered over the expert-TP group (etp = tp), or the
        # EP ranks' sequence-parallel shares alone (etp = 1, each expert whole: FFN / etp)
        m_e = T * routed * ep / model.experts * etp / tp
        ffn_e = model.ffn / etp
        shapes.update(fc1=(m_e, (2 if gated else 1) * ffn_e, h, local), fc2=(m_e, h, ffn_e, local))
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
        # the weights a GPU holds: its attention share and its experts' (its experts / ep local
        # experts, each split over the expert-TP group; a dense MLP split over TP), not the
        # top_k experts a token visits (adv24 F1)
        layer_params = model.attention_params / tp + local * model.mlp_params / (tp if etp is None else etp)
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
    :func:`~._compute.stage_seconds` / :func:`~._compute.attention_seconds` / :func:`~._compute.gemm_seconds` give them:
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
