"""Serving step times from the kernel tables: a step is the kernels of its layers, each timed by
the training model's measured curves (:mod:`flowsolver.training._kernels`), not one roofline of
the whole step.

A decoder layer runs as vLLM runs it (vllm-project/vllm, ``vllm/model_executor/models/llama.py``
at 0035bdf2b1ac243ef6f31eef27411b022461df8e, ``LlamaDecoderLayer.forward``: ``input_layernorm``
(RMSNorm with the residual add fused), ``qkv_proj``, ``rotary_emb``, ``attn``, ``o_proj``,
``post_attention_layernorm``, ``gate_up_proj``, ``act_fn`` (SiluAndMul), ``down_proj``; the
model's final ``norm``, ``lm_head`` and ``sampler`` once a step): per GPU (``tp`` shards),

* four GEMMs (QKV ``m x (h + 2 kv) / tp`` by ``h``, the output projection ``m x h`` by ``h / tp``,
  the MLP's ``m x 2 ffn / tp`` by ``h`` and ``m x h`` by ``ffn / tp``), each
  :func:`~flowsolver.training._kernels.gemm_seconds_shape` at ``m`` tokens: the larger of its
  FLOPs at the fitted GEMM efficiency and its operands at the achieved HBM bandwidth, plus the
  fitted launch-and-tail time ``t0`` (8 us on an A100, 6 us on an H100: GEMM benchmarks, never a
  serving run). At decode's ``m`` of a few tokens every GEMM reads its weights once, and ``t0``
  is what a small tensor-parallel slice adds;
* a mixture of experts instead runs its router (``m x experts`` by ``h``) and the experts some
  token is routed to (a fused kernel for the first and one for the second product: ``t0`` once
  each; the experts the busiest rank holds a token for,
  :func:`~flowsolver.serving._routing.busiest_rank_experts`, at decode and prefill alike) plus a
  top-k kernel;
* four memory-bound kernels (two fused add + RMSNorm: read x and the residual, write both,
  ``4 h`` elements a token; RoPE: read and write q and k, ``2 (h + kv) / tp``; SiluAndMul: read
  ``2 ffn / tp``, write ``ffn / tp``) at the achieved HBM
  bandwidth, each at least :data:`~flowsolver.training._kernels.LAUNCH_SECONDS` (torchao's
  measured least kernel time, 2 us);
* attention: decode reads its sequences' KV cache at the achieved bandwidth (its FLOPs, ``4 h``
  per token of context against ``2 kv_heads d`` cached values, are far below any GPU's ridge
  point), at least one launch a layer; prefill runs the rank's prompts in one varlen causal
  flash-attention call a layer (vLLM's ``flash_attn_varlen_func``), each prompt at
  :func:`~flowsolver.training._kernels.attention_rates` for its length (``"fa2"`` on an A100,
  ``"fa3"`` on Hopper and Blackwell) or at ``attention_efficiency`` of the bf16 peak where the
  caller sets one;
* the last norm, the logits GEMM (``sequences x vocab / tp`` by ``h``, bf16) and the sampler
  (the logits gathered whole to the first TP rank: reads and writes the fp32 logits of the full
  vocabulary once).

Not counted: the host's work between steps (scheduling, sampling's host side, detokenising) and
the gaps between kernels (vLLM captures decode steps in CUDA graphs); the logits' gather to the
first TP rank.
"""

from __future__ import annotations

import numpy as np

from ..training import LAUNCH_SECONDS, attention_rates, gemm_curve, gemm_seconds_shape, kernel_family
from ._routing import busiest_rank_experts, expected_active_experts

__all__ = ["KernelSteps", "kernel_model"]

#: bytes per element of the activations the memory-bound kernels move (bf16)
_ACT = 2.0
#: logits the sampler reads and writes, bytes per vocabulary entry of a sequence (fp32, both ways)
_SAMPLER_BYTES_PER_VOCAB = 8.0


class KernelSteps:
    """Per-GPU compute seconds of one instance's decode and prefill steps from the kernel
    tables (see the module); ``sm`` is the pool's :class:`~flowsolver.serving._steps.StepModel`.

    >>> import topologies as tp
    >>> from flowsolver.training import get_model
    >>> from flowsolver.serving._steps import InstanceLayout, StepModel
    >>> sm = StepModel(get_model("llama-3-8b"), tp.get_gpu("h100_sxm"), InstanceLayout(1, 1, 1, (0,)),
    ...                "bf16", 2.0, None, None, 2.97e12)
    >>> ks = KernelSteps(sm)
    >>> ks.decode_fixed(1, 1) > sm.weight_bytes(1) / 2.97e12      # every weight once, plus the launches
    True
    """

    def __init__(self, sm):
        self.sm = sm
        m, lay = sm.model, sm.layout
        self.bandwidth = sm.hbm_bandwidth
        self.launch = LAUNCH_SECONDS
        self.t0 = gemm_curve(kernel_family(sm.gpu), sm.precision)[2]
        d = m.hidden // m.heads
        self.kv = m.kv_heads * d                     # the K (or V) width of a token
        self.ffn_local = m.ffn / lay.tp
        self.fc1 = (2 if m.gated_mlp else 1) * self.ffn_local
        self._seen = {}                 # (what, tokens) -> seconds: a run's steps repeat their sizes

    # -- kernels ---------------------------------------------------------------------------------
    def _gemm(self, m, n, k, precision=None) -> float:
        if m <= 0:
            return 0.0
        return gemm_seconds_shape(m, n, k, self.sm.gpu, precision or self.sm.precision, bandwidth=self.bandwidth)

    def _memory(self, nbytes: float) -> float:
        return max(nbytes / self.bandwidth, self.launch)

    def _norm(self, tokens: float) -> float:
        """A fused add + RMSNorm: reads x and the residual, writes both (``4 h`` values a token)."""
        return self._memory(tokens * 4 * self.sm.model.hidden * _ACT)

    def _experts(self, tokens: float, experts: float) -> float:
        """The two fused expert products over ``experts`` local experts sharing ``tokens`` routed
        tokens: each expert's GEMM as the curve times it, one ``t0`` per fused kernel."""
        if experts <= 0:
            return 0.0
        h = self.sm.model.hidden
        per = max(tokens / experts, 1.0)
        return experts * (self._gemm(per, self.fc1, h) + self._gemm(per, h, self.ffn_local) - 2 * self.t0) + 2 * self.t0

    def _once(self, what: str, tokens: float, seconds) -> float:
        key = (what, float(tokens))
        if key not in self._seen:
            self._seen[key] = seconds(tokens)
        return self._seen[key]

    def _layer_dense_part(self, tokens: float) -> float:
        """One layer's kernels that run on a rank's own tokens: norms, QKV, RoPE, the output
        projection, and (a dense model) the MLP; attention apart."""
        return self._once("layer", tokens, self._layer_dense_part_of)

    def _layer_dense_part_of(self, tokens: float) -> float:
        m, lay = self.sm.model, self.sm.layout
        h = m.hidden
        t = (2 * self._norm(tokens)
             + self._gemm(tokens, (h + 2 * self.kv) / lay.tp, h)
             + self._memory(tokens * 2 * (h + self.kv) / lay.tp * _ACT)                # RoPE on q and k
             + self._gemm(tokens, h, h / lay.tp))
        if m.experts > 1:
            t += self._gemm(tokens, m.experts, h, "bf16") + self._memory(tokens * m.experts * 4.0)   # router, top-k
        else:
            t += self._gemm(tokens, self.fc1, h) + self._gemm(tokens, h, self.ffn_local)
        return t + self._memory(tokens * (self.fc1 + self.ffn_local) * _ACT)          # SiluAndMul

    def _output(self, sequences: float) -> float:
        """The last norm, the logits of ``sequences`` tokens and the sampler."""
        if sequences <= 0:
            return 0.0
        m, lay = self.sm.model, self.sm.layout
        v = m.vocab / lay.tp
        # the logits are gathered whole to the first TP rank, which samples the full vocabulary
        return (self._norm(sequences) + self._gemm(sequences, v, m.hidden, "bf16")
                + self._memory(sequences * m.vocab * _SAMPLER_BYTES_PER_VOCAB))

    # -- steps -----------------------------------------------------------------------------------
    def decode_fixed(self, busiest: float, group_tokens: float) -> float:
        """Seconds of a decode step's kernels but attention: the busiest attention rank holds
        ``busiest`` sequences, its expert-parallel group ``group_tokens`` tokens."""
        if busiest <= 0:
            return 0.0
        m = self.sm.model
        layer = self._layer_dense_part(busiest) + (self._routed(group_tokens) if m.experts > 1 else 0.0)
        return m.layers * layer + self._output(busiest)

    def decode_context(self, context_tokens: float) -> float:
        """Seconds of a decode step's attention on the busiest rank, which reads
        ``context_tokens`` tokens of KV cache: each layer's kernel its share of the bytes at the
        achieved bandwidth, at least one launch."""
        m = self.sm.model
        return m.layers * max(self.sm.kv_read_bytes(context_tokens) / m.layers / self.bandwidth, self.launch)

    def prefill(self, lengths, rank_of: np.ndarray, attention_efficiency) -> float:
        """Seconds of a prefill step of prompts of ``lengths`` tokens dealt to attention ranks
        ``rank_of``: the busiest rank's own kernels, then the experts spread over the ranks."""
        m, lay, gpu = self.sm.model, self.sm.layout, self.sm.gpu
        h, d = m.hidden, m.hidden // m.heads
        ranks = []
        for r in range(lay.ep):
            mine = lengths[rank_of == r]
            if not len(mine):
                continue
            tokens = float(mine.sum())
            if attention_efficiency is None:
                attention = sum(self._once("attention", s, lambda s: 2.0 * h * s * s / lay.tp   # causal: 2 h s^2
                                           / attention_rates(gpu, "auto", head_dim=d, tokens=s)[0]) for s in mine)
            else:
                attention = float(np.sum(2.0 * h * mine ** 2 / lay.tp)) / (attention_efficiency * gpu.peak_bf16_flops)
            # one varlen flash-attention call a layer for all the rank's prompts (vLLM's
            # flash_attn_varlen_func with cu_seqlens), at least one launch
            layer = self._layer_dense_part(tokens) + max(attention, self.launch)
            ranks.append(m.layers * layer + self._once("output", len(mine), self._output))
        total = float(lengths.sum())
        return max(ranks) + (m.layers * self._routed(total) if m.experts > 1 else 0.0)

    def _routed(self, tokens: float) -> float:
        """One layer's expert products for ``tokens`` tokens of an expert-parallel group: the
        experts the busiest rank holds a token for (all its local ones once the tokens are
        many), each with its share of the routed tokens."""
        return self._once("routed", tokens, self._routed_of)

    def _routed_of(self, tokens: float) -> float:
        m, lay = self.sm.model, self.sm.layout
        hit = busiest_rank_experts(m.experts, m.top_k, lay.ep, tokens)
        active = m.experts * expected_active_experts(m.experts, m.top_k, tokens)
        return self._experts(hit * tokens * m.top_k / max(active, 1.0), hit)


def kernel_model(sm) -> "KernelSteps | None":
    """The :class:`KernelSteps` of ``sm`` where it runs on the kernel tables
    (``compute_efficiency is None``), else None."""
    return KernelSteps(sm) if sm.compute_efficiency is None else None

