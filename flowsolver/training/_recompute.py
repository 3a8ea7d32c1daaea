"""Activation recompute modes: what each one keeps of a layer's forward and what it runs again.

Megatron's modes (Korthikanti et al. 2022, "Reducing activation recomputation in large
transformer models"):

* ``"selective"``: the core attention (scores, softmax, dropout, the product
  with the values) is checkpointed and its forward runs again in every layer's backward:
  Megatron-Core's ``recompute_granularity="selective"`` with its default
  ``recompute_modules=["core_attn"]`` wraps the core attention in ``tensor_parallel.checkpoint``
  (``megatron/core/transformer/attention.py``, ``_checkpointed_attention_forward``, NVIDIA/Megatron-LM
  at d98e8a64ddf34856e74b24714e3bedb2f5a39553), a flash kernel included (its backward then
  recomputes the scores once more inside itself); the rest of the layer's activations are kept;
* ``"none"`` (the default, as Megatron-Core's: ``TransformerConfig.recompute_granularity``
  ``None``): nothing recomputed; an unfused attention keeps its probabilities too;
* ``"full"``: only the layer's input is kept; the whole forward runs again in the backward.

Two partial modes as other frameworks run them, each the layer input kept plus some forward
outputs, the rest of the forward run again in the backward (so they cost a partial forward,
and hold one layer's working set while it is recomputed, as ``"full"``):

* ``"save_qkv_proj"``: MaxText's ``remat_policy="save_qkv_proj"`` (MaxText
  ``layers/models.py`` / the ``checkpoint_name`` tags ``query_proj``, ``key_proj``,
  ``value_proj``): the Q, K and V projections' outputs are saved, what the backward needs
  after them (attention, output projection, FC1, norms) is recomputed; FC2, whose output only
  the residual add reads, is not (JAX replays what the backward's residuals need);
* ``"selective_op"``: torchtitan's per-op selective activation checkpointing
  (``activation_checkpoint.mode = "selective"``, ``selective_ac_option = "op"``, the default
  of its Llama recipes; ``torchtitan/parallelisms/parallelize_llama.py`` of December 2024): the
  outputs of the attention kernel (and its log-sum-exp), of the TP reduce-scatters and of every
  other matmul of a layer (the 1st, 3rd, 5th, 7th: ``wq``, ``wv``, ``w1``, ``w2`` of a Llama
  block, whose matmuls run ``wq wk wv wo w1 w3 w2``) are saved; ``wk``, ``wo``, ``w3`` and the
  element-wise work are recomputed (a replay stops once the backward has what it needs, so a
  plain MLP's ``w2``, the 6th, is not). Dense models only (a mixture of experts' grouped GEMMs
  are not plain matmuls to that policy), with a fused attention (the policy saves the flash and
  memory-efficient kernels' outputs, not the math path's).
"""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple

from ._exposed import _AR_FORWARD, _SP_FORWARD

__all__ = ["RECOMPUTE", "FORWARD_AGAIN", "LayerRecompute", "check_recompute", "check_layers_mode",
           "layer_recompute"]

RECOMPUTE = ("none", "selective", "full", "save_qkv_proj", "selective_op")
#: the modes that run (part of) each layer's forward again in its backward pass
FORWARD_AGAIN = ("full", "save_qkv_proj", "selective_op")

_GEMMS = ("qkv", "proj", "fc1", "fc2")
#: a layer's forward TP collectives, ``(op, gemm)`` as :func:`flowsolver.training._exposed.tp_layer_ops` lists them
_TP_FORWARD = frozenset(_SP_FORWARD + _AR_FORWARD)


class LayerRecompute(NamedTuple):
    """What one layer runs again of its forward in its backward pass under a recompute mode:
    ``gemms``, each forward GEMM's (``qkv``, ``proj``, ``fc1``, ``fc2``) share of FLOPs run
    again; ``attention``, whether attention's forward runs again; ``elementwise``, whether the
    memory-bound work (norms, activations, rotary embedding) runs again; ``tp_ops``, the forward
    TP collectives run again (``(op, gemm)`` pairs). These four are what a recomputed layer
    (``"full"`` or a partial mode) runs again. ``core_attention``: the core attention is
    checkpointed in every layer (``"selective"``), so its forward runs again in each layer's
    backward whatever ``recompute_layers`` says."""
    gemms: dict
    attention: bool
    elementwise: bool
    tp_ops: frozenset
    core_attention: bool = False

    @property
    def any(self) -> bool:
        return self.attention or self.elementwise or any(self.gemms.values())


def check_recompute(recompute) -> str:
    """``recompute`` checked: ``none``, ``selective``, ``full``, ``save_qkv_proj`` or ``selective_op``.

    >>> check_recompute("full")
    'full'
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return recompute


def check_layers_mode(recompute_layers, recompute) -> None:
    """``recompute_layers`` (the layers of each model chunk full recompute recomputes) is
    refused with any other ``recompute`` mode.

    >>> check_layers_mode(2, "selective")
    Traceback (most recent call last):
    ...
    ValueError: recompute_layers (2) chooses the layers ... it needs recompute='full', got recompute='selective'
    """
    if recompute_layers is not None and recompute != "full":
        raise ValueError(f"recompute_layers ({recompute_layers}) chooses the layers full recompute recomputes: "
                         f"it needs recompute='full', got recompute={recompute!r}")


def op_sac_matmuls(model) -> list:
    """A dense layer's matmuls in the order torchtitan's Llama block runs them, each
    ``(gemm, in_features, out_features, saved)``: ``wq wk wv wo`` then ``w1 w3 w2`` (gated MLP;
    ``w1 w2`` plain); per-op selective checkpointing saves the 1st, 3rd, 5th, ... and recomputes
    every second one.

    >>> from flowsolver.training import get_model
    >>> [(g, saved) for g, _, _, saved in op_sac_matmuls(get_model("llama-3-8b"))][3:]
    [('proj', False), ('fc1', True), ('fc1', False), ('fc2', True)]
    """
    if model.experts > 1:
        raise ValueError(f"recompute='selective_op' (torchtitan's per-op checkpointing) is modelled for dense models; "
                         f"{model.name} has {model.experts} experts")
    h, f = model.hidden, model.ffn
    kv = h * model.kv_heads // model.heads
    mms = [("qkv", h, h), ("qkv", h, kv), ("qkv", h, kv), ("proj", h, h)]
    mms += [("fc1", h, f), ("fc1", h, f)] if model.gated_mlp else [("fc1", h, f)]
    mms += [("fc2", f, h)]
    return [(g, i, o, n % 2 == 0) for n, (g, i, o) in enumerate(mms)]


@lru_cache(maxsize=256)        # asked again for every layout a planner composes
def layer_recompute(model, recompute: str) -> LayerRecompute:
    """What ``recompute`` runs again of one layer's forward (:class:`LayerRecompute`; its
    ``gemms`` read-only: the answer is shared).

    >>> from flowsolver.training import get_model
    >>> r = layer_recompute(get_model("llama-3-8b"), "selective_op")
    >>> {g: round(s, 4) for g, s in r.gemms.items()}, r.attention
    ({'qkv': 0.1667, 'proj': 1.0, 'fc1': 0.5, 'fc2': 0.0}, False)
    """
    again = _layer_recompute(model, check_recompute(recompute))
    return again._replace(gemms=MappingProxyType(again.gemms))


def _layer_recompute(model, recompute: str) -> LayerRecompute:
    """:func:`layer_recompute` of a checked mode, ``gemms`` a plain dict."""
    if recompute not in FORWARD_AGAIN:       # selective: the core attention's forward again, every layer
        return LayerRecompute(dict.fromkeys(_GEMMS, 0.0), False, False, frozenset(), recompute == "selective")
    if recompute == "full":              # Megatron's reentrant checkpoint: the whole forward again
        return LayerRecompute(dict.fromkeys(_GEMMS, 1.0), True, True, _TP_FORWARD)
    # A partial mode's replay (JAX's remat, PyTorch's non-reentrant checkpoint) runs only what the
    # backward needs: FC2's output feeds nothing but the residual add, so FC2 and its reduction
    # never run again. The all-gathers before QKV and FC1 are counted once, in the backward's
    # re-gather for the weight gradients (tp_layer_ops' backward: the step's convention), not
    # again here. What runs again of the TP traffic is then the reduction after proj, whose
    # output the MLP's recomputed norm reads (a reduce-scatter under sequence parallelism, which
    # torchtitan's policy saves; an all-reduce without).
    if recompute == "save_qkv_proj":     # everything after the Q, K, V projections but FC2
        return LayerRecompute(dict(qkv=0.0, proj=1.0, fc1=1.0, fc2=0.0), True, True,
                              frozenset({("reduce_scatter", "proj"), ("all_reduce", "proj")}))
    mms = op_sac_matmuls(model)
    flops = {g: sum(i * o for n, i, o, _ in mms if n == g) for g in _GEMMS}
    again = {g: sum(i * o for n, i, o, saved in mms if n == g and not saved) / flops[g] for g in _GEMMS}
    again["fc2"] = 0.0                   # a replay stops before the block's last matmul
    ops = {("all_reduce", "proj")} if again["fc1"] > 0 else set()
    return LayerRecompute(again, False, True, frozenset(ops))


def kept_bytes_per_token(model, recompute: str, *, tp: int, sequence_parallel: bool) -> float:
    """Bytes one layer keeps per token (per CP rank) under a partial recompute mode
    (``"save_qkv_proj"``, ``"selective_op"``), bf16 outputs: the layer's input (``2 h``, over
    ``tp`` with sequence parallelism) and the outputs the mode saves. Column-parallel GEMMs'
    outputs are split over ``tp``; a row-parallel GEMM's local output (before its reduction)
    is whole on every TP rank. ``selective_op`` also saves the attention output (``2 h / tp``),
    its fp32 log-sum-exp (``4 heads / tp``) and, with sequence parallelism over ``tp > 1``, the
    two reduce-scatters' outputs (``2 h / tp`` each).

    >>> from flowsolver.training import get_model
    >>> m = get_model("llama-3-8b")      # input, Q, V, attention out + LSE, w1, w2 (tp 1)
    >>> kept_bytes_per_token(m, "selective_op", tp=1, sequence_parallel=True) == 2 * (4 * 4096 + 1024 + 14336) + 4 * 32
    True
    """
    h, a = model.hidden, model.heads
    kv = h * model.kv_heads // a
    kept = 2.0 * h / (tp if sequence_parallel else 1)
    if recompute == "save_qkv_proj":
        return kept + 2.0 * (h + 2 * kv) / tp
    if recompute != "selective_op":
        raise ValueError(f"recompute must be save_qkv_proj or selective_op here, got {recompute!r}")
    for gemm, _, out, saved in op_sac_matmuls(model):
        if saved:
            kept += 2.0 * out / (1 if gemm in ("proj", "fc2") else tp)
    kept += 2.0 * h / tp + 4.0 * a / tp
    if sequence_parallel and tp > 1:
        kept += 2 * 2.0 * h / tp
    return kept
