"""Serving step times: a prefill step (compute-bound) and a decode step (memory-bound) of one
model instance, plus the communication each step runs, timed once per layout and kept in tables.

An *instance* is ``tp x pp x ep`` GPUs serving one batch: ``tp`` shards every layer (tensor
parallel), ``pp`` splits the layers into stages that one step crosses in turn, ``ep`` ranks each
run their own attention on their own share of the batch (attention data parallelism) and share
the experts of a mixture of experts (expert parallel). A dense model has ``ep = 1``.

Per GPU and step (all layers, the stages in turn; ``L`` layers, ``h`` hidden, ``b`` sequences
per attention rank, ``K`` tokens of context they hold, ``w`` bytes per weight, ``kv`` bytes per
cached value):

* decode, memory: the weights it reads, ``w (L (A + M_read) + V h) / tp`` with ``A`` the
  attention parameters of a layer, ``M_read`` the MLP parameters read (dense: one MLP; mixture:
  the local experts some token of the step is routed to on the busiest rank, which the
  others wait for: :func:`busiest_rank_experts` under uniform routing; one rank alone
  ``E (1 - (1 - k/E)^b)``), ``V h`` the output projection; plus the KV cache,
  ``K x 2 L kv_heads d kv / min(tp, kv_heads)``; at the achieved HBM bandwidth (BabelStream
  Triad over the datasheet, :func:`flowsolver.training._kernels.memory_fraction`);
* decode, compute: ``2 b (N_active + V h) + 4 h K L`` FLOPs / ``tp`` at ``compute_efficiency``
  of the precision's peak; the step takes the larger of memory and compute (a roofline);
* prefill of ``T`` prompt tokens in ``n`` sequences of lengths ``s_i``: each sequence whole on
  one attention rank (:func:`deal_longest_first`), which runs its attention alone: the
  projections ``2 s_i L A`` FLOPs at ``compute_efficiency`` of the precision's peak, causal
  scores ``2 h L s_i^2`` at ``attention_efficiency`` of the bf16 peak (the training model's
  forward counts, :mod:`flowsolver.training._compute`), its last token's logits (a dense
  model's MLP ``2 s_i L M`` too: it has one rank); a mixture's expert GEMMs, ``2 T L top_k M``,
  spread evenly over the ``ep`` ranks (uniform routing); the step waits for the busiest rank
  (every layer's all-to-alls hold the others); all over ``tp``; no faster than reading every
  weight once;
* communication, not overlapped with compute: ``2 L`` TP all-reduces of ``tokens x h x 2``
  bytes, ``2 L_moe`` EP all-to-alls (dispatch and combine) of ``tokens x top_k x h x
  a2a_bytes / tp`` bytes per rank, ``pp - 1`` sends of ``tokens x h x 2`` bytes, ``tokens``
  those of the attention rank holding the most (a prefill: its dealt prompts; a decode: its
  ``ceil(b / ep)`` sequences); each timed with every group of the pool running it at once
  (:func:`flowsolver.concurrent_kinds`, lockstep) at a grid of sizes, linear in between.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ..training import ParallelLayout
from ._kernel_steps import kernel_model
from ._routing import ROUTING_DRAWS, busiest_rank_experts, expected_active_experts  # noqa: F401 (re-exported)

__all__ = ["EMBEDDING_BYTES", "InstanceLayout", "StepModel", "WEIGHT_BYTES", "comm_table", "deal_longest_first"]

#: bytes per weight by precision (the transformer layers' linear weights)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0}
#: bytes per weight of the input embedding and the LM head, at either precision: FP8 checkpoints
#: keep them bf16. vLLM's online FP8 quantizes "all Linear modules (except for the final
#: lm_head)" (docs.vllm.ai/en/v0.5.4/quantization/fp8.html; the embedding is no Linear module),
#: llm-compressor's FP8 recipes pass ``ignore=["lm_head"]`` (docs.vllm.ai, features/quantization/
#: llm_compressor/fp8), and the kernel-table model times the logits GEMM in bf16 (_kernel_steps).
EMBEDDING_BYTES = 2.0
ACTIVATION_BYTES = 2.0      # bf16 activations on the wire (TP all-reduce, PP send)


@dataclass(frozen=True)
class InstanceLayout:
    """A pool of ``instances`` model instances of ``tp x pp x ep`` GPUs each, on the GPU ranks
    ``ranks`` (``topologies.gpus`` order), placed TP fastest, then PP, then the EP ranks, then
    the instances (an instance's GPUs are consecutive ranks).

    >>> lay = InstanceLayout(tp=2, pp=1, ep=2, ranks=tuple(range(8)))
    >>> lay.instances, lay.groups("tp")[:2], lay.groups("ep")[:2]
    (2, [[0, 1], [2, 3]], [[0, 2], [4, 6]])
    """

    tp: int
    pp: int
    ep: int
    ranks: tuple

    @property
    def size(self) -> int:
        """GPUs per instance."""
        return self.tp * self.pp * self.ep

    @property
    def instances(self) -> int:
        return len(self.ranks) // self.size

    def instance_ranks(self, i: int) -> list:
        """The GPU ranks of instance ``i``."""
        return list(self.ranks[i * self.size:(i + 1) * self.size])

    def groups(self, kind: str) -> list:
        """The pool's ``tp``, ``ep`` or ``pp`` groups as GPU ranks (``pp``: neighbouring stages)."""
        inner = ParallelLayout(tp=self.tp, pp=self.pp, dp=self.ep * self.instances, ep=self.ep,
                               order=("tp", "cp", "pp", "dp"))
        return [[self.ranks[r] for r in g] for g in inner.groups(kind)]


def deal_longest_first(lengths, ranks: int) -> np.ndarray:
    """The attention rank (``0 ... ranks - 1``) each prompt of a prefill step goes to, whole:
    longest first, each to the rank holding the fewest prompt tokens so far, ties to the lowest
    rank (Graham's longest-processing-time rule: its busiest rank holds at most ``4/3 - 1/(3
    ranks)`` times the tokens of the best dealing's busiest). vLLM and SGLang balance requests
    over their data-parallel attention ranks as they arrive; this is the balance such a step
    could reach, not a replay of either scheduler.

    >>> deal_longest_first([2, 2, 2, 3, 3], 2).tolist()      # 7 tokens on rank 0, where 3 + 3 | 2 + 2 + 2 holds 6
    [0, 1, 0, 0, 1]
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    rank_of = np.zeros(len(lengths), dtype=np.int64)
    if ranks > 1:
        loads = [(0.0, r) for r in range(ranks)]
        for i in np.argsort(-lengths, kind="stable"):
            load, r = heapq.heappop(loads)
            rank_of[i] = r
            heapq.heappush(loads, (load + float(lengths[i]), r))
    return rank_of


@dataclass
class StepModel:
    """Compute and memory times of one instance's steps (no communication): see the module."""

    model: object
    gpu: object
    layout: InstanceLayout
    precision: str
    kv_bytes: float
    compute_efficiency: float | None    # None: the kernel tables (:mod:`._kernel_steps`)
    attention_efficiency: float | None  # None: the kernel tables' flash attention rates
    hbm_bandwidth: float            # achieved, bytes/s
    kv_bytes_per_token: float = field(init=False)

    def __post_init__(self):
        m, lay = self.model, self.layout
        d = m.hidden // m.heads
        # the KV cache of one token over all layers, every copy (bytes); per GPU it is split
        # over min(tp, kv_heads) (heads beyond that are replicated) and the pp stages
        self.kv_bytes_per_token = 2.0 * m.layers * m.kv_heads * d * self.kv_bytes
        self.kv_shards = min(lay.tp, m.kv_heads)
        w = WEIGHT_BYTES[self.precision]
        self._w = w
        self._peak = self.gpu.peak_fp8_flops if self.precision == "fp8" else self.gpu.peak_bf16_flops
        self.kernels = kernel_model(self)

    # -- per GPU, the stages in turn -------------------------------------------------------
    def weight_bytes(self, tokens_per_ep_group: float) -> float:
        """Bytes of weights one GPU's share of a step reads (all stages in turn)."""
        m, lay = self.model, self.layout
        if m.experts > 1:       # the busiest rank's experts: the step waits for it (the all-to-alls)
            mlp = busiest_rank_experts(m.experts, m.top_k, lay.ep, tokens_per_ep_group) * m.mlp_params
        else:
            mlp = m.mlp_params
        return (self._w * m.layers * (m.attention_params + mlp) + EMBEDDING_BYTES * m.vocab * m.hidden) / lay.tp

    def kv_read_bytes(self, context_tokens: float) -> float:
        """Bytes of KV cache one GPU reads for ``context_tokens`` tokens of context."""
        return context_tokens * self.kv_bytes_per_token / self.kv_shards

    def decode_flops(self, batch: float, context_tokens: float) -> float:
        """FLOPs one GPU runs in a decode step of ``batch`` sequences holding ``context_tokens``."""
        m = self.model
        active = m.layers * (m.attention_params + m.top_k * m.mlp_params) + m.vocab * m.hidden
        return (2.0 * batch * active + 4.0 * m.hidden * context_tokens * m.layers) / self.layout.tp

    def decode_seconds(self, batch: float, context_tokens: float) -> float:
        """Compute / memory seconds of a decode step: ``batch`` sequences per attention rank
        holding ``context_tokens`` tokens of context together (no communication).

        >>> import topologies as tp
        >>> from flowsolver.training import get_model
        >>> sm = StepModel(get_model("llama-3-8b"), tp.get_gpu("h100_sxm"), InstanceLayout(1, 1, 1, (0,)),
        ...                "bf16", 2.0, 0.44, 0.62, 3.0e12)
        >>> sm.decode_seconds(1, 0) == 2 * 7_504_658_432 / 3.0e12   # every weight but the embedding, once
        True
        """
        if batch <= 0:
            return 0.0
        if self.kernels is not None:
            return (self.kernels.decode_fixed(batch, batch * self.layout.ep)
                    + self.kernels.decode_context(context_tokens))
        memory = (self.weight_bytes(batch * self.layout.ep) + self.kv_read_bytes(context_tokens)) / self.hbm_bandwidth
        # the LM head stays bf16 under fp8 (EMBEDDING_BYTES): its GEMM runs at the bf16 peak
        head = 2.0 * batch * self.model.vocab * self.model.hidden / self.layout.tp
        compute = ((self.decode_flops(batch, context_tokens) - head) / self._peak
                   + head / self.gpu.peak_bf16_flops) / self.compute_efficiency
        return max(memory, compute)

    def prefill_step(self, lengths) -> tuple:
        """(compute seconds, prompt tokens on the attention rank holding the most) of a prefill
        step of prompts of ``lengths`` tokens on one instance: each prompt's attention on the
        rank :func:`deal_longest_first` deals it to, the experts' GEMMs spread over the ``ep``
        ranks, the step as long as its busiest rank (see the module).

        >>> import topologies as tp
        >>> from flowsolver.training import get_model
        >>> lay = InstanceLayout(1, 1, 8, tuple(range(8)))
        >>> sm = StepModel(get_model("mixtral-8x7b"), tp.get_gpu("h100_sxm"), lay, "bf16", 2.0, 0.44, 0.62, 3.0e12)
        >>> one, eight = sm.prefill_step([4096]), sm.prefill_step([512] * 8)
        >>> one[1], eight[1], one[0] > 1.9 * eight[0]     # one prompt's attention on one of the 8 ranks
        (4096.0, 512.0, True)
        """
        lengths = np.asarray(lengths, dtype=np.float64)
        tokens = float(lengths.sum())
        if tokens <= 0:
            return 0.0, 0.0
        m, lay = self.model, self.layout
        moe = m.experts > 1
        rank_of = deal_longest_first(lengths, lay.ep)
        per_rank = np.bincount(rank_of, weights=lengths, minlength=lay.ep)
        squares = np.bincount(rank_of, weights=lengths ** 2, minlength=lay.ep)
        sequences = np.bincount(rank_of, minlength=lay.ep)
        if self.kernels is not None:
            return self.kernels.prefill(lengths, rank_of, self.attention_efficiency), float(per_rank.max())
        gemm = self._peak * self.compute_efficiency
        own = m.attention_params + (0.0 if moe else m.top_k * m.mlp_params)      # a dense model: ep = 1
        attention = (2.0 * per_rank * m.layers * own / gemm
                     + 2.0 * m.hidden * m.layers * squares / (self.gpu.peak_bf16_flops * self.attention_efficiency)
                     + 2.0 * sequences * m.vocab * m.hidden / (self.gpu.peak_bf16_flops * self.compute_efficiency))
        experts = 2.0 * tokens * m.layers * m.top_k * m.mlp_params / lay.ep / gemm if moe else 0.0
        compute = (float(attention.max()) + experts) / lay.tp
        memory = self.weight_bytes(tokens) / self.hbm_bandwidth
        return max(compute, memory), float(per_rank.max())

    # -- communication sizes per call (bytes, nccl-tests conventions) ---------------------------
    def tp_bytes(self, tokens: float) -> float:
        return tokens * self.model.hidden * ACTIVATION_BYTES

    def ep_bytes(self, tokens: float, a2a_bytes: float) -> float:
        return tokens * self.model.top_k * self.model.hidden * a2a_bytes / self.layout.tp

    def pp_bytes(self, tokens: float) -> float:
        return tokens * self.model.hidden * ACTIVATION_BYTES


def size_grid(smallest: float, largest: float) -> np.ndarray:
    """Sizes (bytes) at which communication is timed: powers of two from below ``smallest``
    to above ``largest``.

    >>> size_grid(3000, 9000).tolist()
    [2048.0, 4096.0, 8192.0, 16384.0]
    """
    lo = math.floor(math.log2(max(smallest, 1.0)))
    hi = max(math.ceil(math.log2(max(largest, 1.0))), lo + 1)
    return 2.0 ** np.arange(lo, hi + 1)


@dataclass(frozen=True)
class CommTable:
    """Seconds per call of each kind of a pool's communication at a grid of sizes, with every
    group of the pool running it at once; ``bottleneck`` per kind at the largest size."""

    sizes: np.ndarray
    seconds: dict               # kind -> array over sizes
    bottleneck: dict            # kind -> tuple of Bottleneck
    algorithms: dict            # kind -> algorithm at the largest size

    def time(self, kind: str, size) -> np.ndarray:
        """Seconds of one call of ``kind`` at ``size`` bytes (linear between grid points;
        0 for a kind the pool does not run)."""
        if kind not in self.seconds:
            return np.zeros_like(np.asarray(size, dtype=np.float64))
        if np.any(np.asarray(size, dtype=np.float64) > self.sizes[-1] * (1 + 1e-9)):
            raise ValueError(f"a {kind} call of {float(np.max(size)):.4g} bytes is beyond the step tables "
                             f"(timed up to {self.sizes[-1]:.4g} bytes): serve's token_budget and its prompt's longest "
                             f"length set the prefill tables (raise token_budget or the prompt), max_batch the "
                             f"decode ones")
        return np.interp(size, self.sizes, self.seconds[kind])


def comm_table(graph, layout: InstanceLayout, kinds: dict, sizes: np.ndarray, options: dict) -> CommTable:
    """Time every communication kind of ``kinds`` (``{"tp": "all_reduce", "ep": "all_to_all",
    "pp": "send_recv"}``, those the layout runs) of the pool ``layout`` at ``sizes`` bytes."""
    from ..collectives import concurrent_kinds

    names = [k for k in ("tp", "ep", "pp") if k in kinds]
    seconds = {k: np.zeros(len(sizes)) for k in names}
    bottleneck, algorithms = {}, {}
    if not names:
        return CommTable(sizes=np.asarray(sizes, dtype=np.float64), seconds={}, bottleneck={}, algorithms={})
    group_lists = {k: layout.groups(k) for k in names}
    # every (kind, size) is one kind of lockstep groups: all solved together in one batched call
    cells = [(k, j) for j in range(len(sizes)) for k in names]
    specs = [[dict(op=kinds[k], size=float(sizes[j]), ranks=g) for g in group_lists[k]] for k, j in cells]
    for (k, j), res in zip(cells, concurrent_kinds(graph, specs, **options)):
        seconds[k][j] = res.makespan
        if j == len(sizes) - 1:
            bottleneck[k], algorithms[k] = tuple(res.bottleneck), res.algorithms[0]
    return CommTable(sizes=np.asarray(sizes, dtype=np.float64), seconds=seconds, bottleneck=bottleneck,
                     algorithms=algorithms)
