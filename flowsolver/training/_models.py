"""Model presets: decoder-only transformers by shape, their parameter and FLOP counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _checks

__all__ = ["ModelSpec", "MODELS", "get_model", "BF16"]

BF16 = 2          # bytes per bf16 value (weights, activations, gradients)

_INTEGER_FIELDS = ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq_len", "experts", "top_k")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer by shape.

    ``ffn`` is the MLP's inner width (per expert); ``gated_mlp`` (SwiGLU: three matrices) or
    not (two); ``experts`` and ``top_k`` for a mixture of experts; ``seq_len`` the training
    sequence length (tokens); ``context`` the longest sequence (prompt + output tokens) the model
    serves, its published ``max_position_embeddings`` (None: not known, not checked).

    >>> m = get_model("llama-3-70b")
    >>> round(m.params / 1e9, 1), round(m.flops_per_token / 1e9)       # ~70.6e9 parameters
    (70.6, 449)
    """

    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    seq_len: int = 8192
    gated_mlp: bool = True
    experts: int = 1
    top_k: int = 1
    tied_embeddings: bool = False
    context: int | None = None

    def __post_init__(self):
        for key in _INTEGER_FIELDS:
            object.__setattr__(self, key, _checks.integer(f"ModelSpec {self.name!r}: {key}", getattr(self, key)))
        if self.context is not None:
            object.__setattr__(self, "context", _checks.integer(f"ModelSpec {self.name!r}: context", self.context))
        for key in ("gated_mlp", "tied_embeddings"):       # a model file's "false" is not False
            value = getattr(self, key)
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"ModelSpec {self.name!r}: {key} must be True or False, got {value!r}")
            object.__setattr__(self, key, bool(value))
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"ModelSpec {self.name!r}: heads must divide hidden and kv_heads divide heads")
        if self.top_k > self.experts:
            raise ValueError(f"ModelSpec {self.name!r}: top_k ({self.top_k}) must be <= experts ({self.experts})")

    @property
    def attention_params(self) -> int:
        """Per layer: Q and O (h x h), K and V (h x kv_heads x head_dim)."""
        head_dim = self.hidden // self.heads
        return 2 * self.hidden ** 2 + 2 * self.hidden * self.kv_heads * head_dim

    @property
    def mlp_params(self) -> int:
        """Per layer and expert."""
        return (3 if self.gated_mlp else 2) * self.hidden * self.ffn

    @property
    def embedding_params(self) -> int:
        """Input embedding and output projection (one matrix when tied)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def expert_params(self) -> int:
        """Parameters in the experts (0 for a dense model)."""
        return self.layers * self.experts * self.mlp_params if self.experts > 1 else 0

    @property
    def params(self) -> int:
        """All parameters."""
        return self.layers * (self.attention_params + self.experts * self.mlp_params) + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (top_k experts)."""
        return self.layers * (self.attention_params + self.top_k * self.mlp_params) + self.embedding_params

    @property
    def layer_linear_flops(self) -> float:
        """Training FLOPs per token of one layer's weight GEMMs, forward and backward:
        ``6 x`` the layer's active parameters (attention projections, ``top_k`` experts)."""
        return 6.0 * (self.attention_params + self.top_k * self.mlp_params)

    def layer_attention_flops(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token of one layer's attention scores and values with a causal
        mask: ``6 h s`` (``4 h s`` forward over the full square, halved by the mask, x 3 for
        forward and backward) at ``seq_len`` tokens (default the model's)."""
        return 6.0 * self.hidden * (self.seq_len if seq_len is None else seq_len)

    @property
    def output_flops(self) -> float:
        """Training FLOPs per token of the output projection (logits): ``6 vocab h``. The
        input embedding is a lookup and costs no matrix FLOPs."""
        return 6.0 * self.vocab * self.hidden

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per token of a training step (forward and backward, no recompute):
        ``L (6 N_layer + 6 h s) + 6 V h`` -- the count Megatron-LM's
        ``num_floating_point_operations`` and the Megatron-Bridge performance tables use
        (causal attention, logits, no embedding lookup)."""
        return self.layers * (self.layer_linear_flops + self.layer_attention_flops()) + self.output_flops

    def trained_flops_per_token(self, capacity_factor: float = 1.0) -> float:
        """Model FLOPs per token of a training step whose experts take ``capacity_factor x``
        their even share of the routed tokens (what a step's ``mfu`` and ``tflops_per_gpu``
        count): :attr:`flops_per_token` with its expert GEMMs, ``6 L top_k mlp_params``,
        counted ``min(1, capacity_factor)`` times. Below 1 the tokens over an expert's capacity
        are dropped and skip its MLP (their FLOPs are never computed, so they are not model
        FLOPs of the step); above 1 the padding is computed but is not model work. A dense
        model: :attr:`flops_per_token`.

        >>> m = get_model("mixtral-8x7b")
        >>> m.trained_flops_per_token(2.0) == m.flops_per_token
        True
        >>> round((m.flops_per_token - m.trained_flops_per_token(0.5)) / (3 * m.layers * m.top_k * m.mlp_params))
        1
        """
        factor = _checks.positive_number("capacity_factor", capacity_factor)
        if self.experts == 1 or factor >= 1.0:
            return self.flops_per_token
        return self.flops_per_token - 6.0 * self.layers * self.top_k * self.mlp_params * (1.0 - factor)


MODELS = {
    # Llama 3 paper (Dubey et al. 2024), table 3: layers, model dim, FFN dim, heads, KV heads;
    # vocabulary 128,256; pre-training sequence length 8,192. context: "max_position_embeddings":
    # 8192 in config.json of huggingface.co/meta-llama/Meta-Llama-3-8B and .../Meta-Llama-3-70B;
    # 131072 in .../meta-llama/Llama-3.1-405B (405B was released as Llama 3.1 only; Llama 3.1's
    # 8B and 70B, the same shapes, take 131072 too: dataclasses.replace(m, context=131072))
    "llama-3-8b": ModelSpec("llama-3-8b", 32, 4096, 14336, 32, 8, 128256, context=8192),
    "llama-3-70b": ModelSpec("llama-3-70b", 80, 8192, 28672, 64, 8, 128256, context=8192),
    "llama-3-405b": ModelSpec("llama-3-405b", 126, 16384, 53248, 128, 8, 128256, context=131072),
    # GPT-3 paper (Brown et al. 2020), table 2.1: 96 layers, d_model 12288, 96 heads,
    # d_ff = 4 d_model, context 2048 (section 2.1: n_ctx = 2048 tokens for every model);
    # GPT-2 BPE vocabulary 50,257, tied embeddings
    "gpt-3-175b": ModelSpec("gpt-3-175b", 96, 12288, 49152, 96, 96, 50257, seq_len=2048, gated_mlp=False,
                            tied_embeddings=True, context=2048),
    # Mixtral of Experts (Jiang et al. 2024), table 1: 32 layers, dim 4096, hidden 14336,
    # 32 heads, 8 KV heads, vocab 32000, 8 experts, top-2; training length not published,
    # we take 4096. context: "max_position_embeddings": 32768 in config.json of
    # huggingface.co/mistralai/Mixtral-8x7B-v0.1
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, seq_len=4096, experts=8, top_k=2,
                              context=32768),
}


def get_model(model: "str | ModelSpec") -> ModelSpec:
    """A preset by name, or a ModelSpec passed through.

    >>> get_model("mixtral-8x7b").active_params / 1e9 > 12.8
    True
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    raise ValueError(f"unknown model {model!r}; presets: {', '.join(MODELS)} (or pass a ModelSpec)")
