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
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

import topologies as tp_

from . import _checks
from .collectives import concurrent

__all__ = ["ModelSpec", "MODELS", "get_model", "training_step", "StepResult", "Phase", "DEFAULT_MFU",
           "memory_per_gpu"]

# Llama 3 405B trained at 38-43 % MFU on 16k H100s (Llama 3 paper, table 4). We take the top
# of that range as the fraction of peak reached while computing; the end-to-end MFU the
# model reports comes out lower once communication is exposed.
DEFAULT_MFU = 0.43
BF16 = 2          # bytes per bf16 value (activations, gradients)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer by shape.

    ``ffn`` is the MLP's inner width (per expert); ``gated_mlp`` (SwiGLU: three matrices) or
    not (two); ``experts`` and ``top_k`` for a mixture of experts; ``seq_len`` the training
    sequence length (tokens).

    >>> m = get_model("llama-3-70b")
    >>> round(m.params / 1e9, 1), round(m.flops_per_token / 1e9)       # ~70.6e9 parameters
    (70.6, 488)
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

    def __post_init__(self):
        for key in ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq_len", "experts", "top_k"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelSpec {self.name!r}: {key} must be an integer >= 1, got {value!r}")
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
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def expert_params(self) -> int:
        """Parameters in the experts (0 for a dense model)."""
        return self.layers * self.experts * self.mlp_params if self.experts > 1 else 0

    @property
    def params(self) -> int:
        return self.layers * (self.attention_params + self.experts * self.mlp_params) + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (top_k experts)."""
        return self.layers * (self.attention_params + self.top_k * self.mlp_params) + self.embedding_params

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 N_active + 12 L h s (attention scores), forward and backward."""
        return 6.0 * self.active_params + 12.0 * self.layers * self.hidden * self.seq_len


MODELS = {
    # Llama 3 paper (Dubey et al. 2024), table 3: layers, model dim, FFN dim, heads, KV heads;
    # vocabulary 128,256; pre-training sequence length 8,192
    "llama-3-8b": ModelSpec("llama-3-8b", 32, 4096, 14336, 32, 8, 128256),
    "llama-3-70b": ModelSpec("llama-3-70b", 80, 8192, 28672, 64, 8, 128256),
    "llama-3-405b": ModelSpec("llama-3-405b", 126, 16384, 53248, 128, 8, 128256),
    # GPT-3 paper (Brown et al. 2020), table 2.1: 96 layers, d_model 12288, 96 heads,
    # d_ff = 4 d_model, context 2048; GPT-2 BPE vocabulary 50,257, tied embeddings
    "gpt-3-175b": ModelSpec("gpt-3-175b", 96, 12288, 49152, 96, 96, 50257, seq_len=2048, gated_mlp=False,
                            tied_embeddings=True),
    # Mixtral of Experts (Jiang et al. 2024), table 1: 32 layers, dim 4096, hidden 14336,
    # 32 heads, 8 KV heads, vocab 32000, 8 experts, top-2; training length not published,
    # we take 4096
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, seq_len=4096, experts=8, top_k=2),
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


@dataclass(frozen=True)
class Phase:
    """The communication of one parallelism in a step.

    ``calls`` collectives of ``op`` on ``bytes`` each (nccl-tests sizes), ``per_call``
    seconds each with every group at once; ``total`` = calls x per_call; ``exposed`` the
    part on the critical path (s); ``groups`` and ``group_size``; ``bottleneck`` the links
    that set the first step's time, as ``(src, dst, tier, utilization)``.
    """

    name: str
    op: str
    algorithm: str
    bytes: float
    calls: float
    per_call: float
    exposed: float
    groups: int
    group_size: int
    bottleneck: tuple = ()

    @property
    def total(self) -> float:
        return self.calls * self.per_call

    @property
    def tier(self) -> str:
        """Tier of the link that holds this phase back most ('' if none)."""
        return self.bottleneck[0].tier if self.bottleneck else ""


@dataclass(frozen=True)
class StepResult:
    """Result of :func:`training_step`; times in seconds, rates in tokens/s.

    ``breakdown`` maps compute, bubble, tp, pp, ep, dp to their share of ``step_time`` (the
    communication entries are the exposed parts): the values add up to ``step_time``.
    ``memory_per_gpu`` (bytes) is :func:`memory_per_gpu`'s estimate; ``fits`` compares it with
    the GPU's memory. The step is timed whether or not it fits.
    """

    model: str
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
    global_batch: int
    micro_batch: int
    microbatches: int
    tokens_per_step: float
    compute_time: float
    bubble_time: float
    phases: dict
    step_time: float
    tokens_per_s: float
    single_gpu_tokens_per_s: float
    speedup: float
    comm_overhead: float
    mfu: float
    achieved_mfu: float
    memory_per_gpu: float = 0.0
    gpu_memory: float = 0.0
    _parts: dict = field(default_factory=dict, repr=False)

    @property
    def fits(self) -> bool:
        """Whether the estimated ``memory_per_gpu`` fits the GPU's memory (bytes)."""
        return self.memory_per_gpu <= self.gpu_memory

    @property
    def breakdown(self) -> dict:
        out = dict(compute=self.compute_time, bubble=self.bubble_time)
        out.update({k: p.exposed for k, p in self.phases.items()})
        return out

    def recompose(self, *, global_batch: int | None = None, dp_overlap: float | None = None,
                  mfu: float | None = None) -> "StepResult":
        """The same job with another global batch (sequences), DP overlap or MFU, without
        solving again: collective sizes do not depend on these, so each keeps its per-call
        time; counts, compute and overlap windows are recomputed."""
        parts = dict(self._parts)
        if global_batch is not None:
            parts["global_batch"] = _check_batch(global_batch, self.dp, self.micro_batch)
        if dp_overlap is not None:
            parts["dp_overlap"] = _check_fraction("dp_overlap", dp_overlap, zero_ok=True)
        if mfu is not None:
            parts["mfu"] = _check_fraction("mfu", mfu, zero_ok=False)
        return _compose(**parts)

    def to_dataframe(self):
        """The phases as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        rows = [dict(phase="compute", op="", algorithm="", bytes=0.0, calls=self.microbatches,
                     per_call=self.compute_time / self.microbatches, total=self.compute_time,
                     exposed=self.compute_time, tier=""),
                dict(phase="bubble", op="", algorithm="", bytes=0.0, calls=self.pp - 1, per_call=0.0,
                     total=self.bubble_time, exposed=self.bubble_time, tier="")]
        rows += [dict(phase=p.name, op=p.op, algorithm=p.algorithm, bytes=p.bytes, calls=p.calls,
                      per_call=p.per_call, total=p.total, exposed=p.exposed, tier=p.tier)
                 for p in self.phases.values()]
        return pd.DataFrame(rows)


def _check_fraction(name, value, *, zero_ok):
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and \
        (0.0 <= value <= 1.0 if zero_ok else 0.0 < value <= 1.0)
    if not ok:
        raise ValueError(f"{name} must be in {'[0, 1]' if zero_ok else '(0, 1]'}, got {value!r}")
    return float(value)


def _check_batch(global_batch, dp, micro_batch) -> int:
    if isinstance(global_batch, (bool, np.bool_)) or not isinstance(global_batch, numbers.Integral) \
            or global_batch < 1 or global_batch % (dp * micro_batch):
        raise ValueError(f"global_batch must be a positive multiple of dp x micro_batch = {dp * micro_batch} "
                         f"sequences, got {global_batch!r}")
    return int(global_batch)


def memory_per_gpu(model, *, tp: int, pp: int, dp: int, ep: int = 1, zero: int = 1, micro_batch: int = 1,
                   microbatches: int = 1) -> float:
    """Estimated bytes per GPU of mixed-precision Adam training.

    Parameters held: ``(N - N_experts) / (tp pp) + N_experts / (tp pp ep)``. Per parameter
    (ZeRO paper, Rajbhandari et al. 2020): bf16 weights 2 bytes, bf16 gradients 2, fp32
    master weights + Adam moments 12; ZeRO stage 1 shards the 12 over ``dp``, stage 2 also
    the gradients, stage 3 also the weights. Activations: ``34 s b h / tp`` bytes per layer
    and microbatch with sequence parallelism and flash attention (Korthikanti et al. 2022,
    without the ``5 a s / h`` term that flash attention removes), for the ``L / pp`` layers
    of a stage and the ``min(pp, m)`` microbatches 1F1B keeps in flight on the first stage.

    >>> round(memory_per_gpu(get_model("llama-3-70b"), tp=8, pp=1, dp=8) / 1e9, 1)
    71.3
    """
    spec = get_model(model)
    held = (spec.params - spec.expert_params) / (tp * pp) + spec.expert_params / (tp * pp * ep)
    weights = 2.0 * held / (dp if zero >= 3 else 1)
    grads = 2.0 * held / (dp if zero >= 2 else 1)
    optimizer = 12.0 * held / (dp if zero >= 1 else 1)
    in_flight = min(pp, max(1, microbatches))
    activations = 34.0 * spec.seq_len * micro_batch * spec.hidden / tp * (spec.layers / pp) * in_flight
    return weights + grads + optimizer + activations


def _compose(*, model, gpus, tp, pp, dp, ep, global_batch, micro_batch, peak, mfu, zero, dp_overlap,
             per_call, algorithms, bytes_, groups, bottlenecks, gpu_memory=0.0):
    """The step from per-call collective times (pure arithmetic)."""
    m = global_batch // (dp * micro_batch)
    s = model.seq_len
    rate = peak * mfu
    t_mb = micro_batch * s * model.flops_per_token / (tp * pp) / rate       # one microbatch, one stage
    compute, bubble = m * t_mb, (pp - 1) * t_mb
    layers = model.layers / pp
    phases = {}

    def add(name, op, calls, exposed, each=None):
        phases[name] = Phase(name=name, op=op, algorithm=algorithms[name], bytes=bytes_[name], calls=calls,
                             per_call=per_call[name] if each is None else each, exposed=exposed, groups=groups[name][0],
                             group_size=groups[name][1], bottleneck=bottlenecks[name])

    if "tp" in per_call:
        calls = 4 * layers * m
        add("tp", "all_reduce", calls, calls * per_call["tp"])
    if "pp" in per_call:
        calls = 2 * (m + pp - 1)
        add("pp", "send_recv", calls, calls * per_call["pp"])
    if "ep" in per_call:
        calls = 4 * layers * m
        add("ep", "all_to_all", calls, calls * per_call["ep"])
    dp_names = [k for k in ("dp", "dp_experts") if k in per_call]
    if dp_names:
        # per name: the collectives of one gradient reduction (and parameter gathers)
        if zero == 3:
            window = dp_overlap * t_mb
            for k in dp_names:
                per_mb = per_call[k] + 2 * per_call[k + "_gather"]
                add(k, "reduce_scatter+all_gather", 3 * m, m * max(0.0, per_mb - window), each=per_mb / 3)
                window = max(0.0, window - per_mb)
        else:
            window = dp_overlap * (2.0 / 3.0) * t_mb      # the backward pass of the last microbatch
            for k in dp_names:
                total = per_call[k] + per_call.get(k + "_gather", 0.0)
                ops = "all_reduce" if zero == 0 else "reduce_scatter+all_gather"
                calls = 1 if zero == 0 else 2
                add(k, ops, calls, max(0.0, total - window), each=total / calls)
                window = max(0.0, window - total)
    exposed = sum(p.exposed for p in phases.values())
    step = compute + bubble + exposed
    tokens = global_batch * s
    single = rate / model.flops_per_token
    tps = tokens / step
    parts = dict(model=model, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, global_batch=global_batch,
                 micro_batch=micro_batch, peak=peak, mfu=mfu, zero=zero, dp_overlap=dp_overlap,
                 per_call=per_call, algorithms=algorithms, bytes_=bytes_, groups=groups, bottlenecks=bottlenecks,
                 gpu_memory=gpu_memory)
    memory = memory_per_gpu(model, tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, micro_batch=micro_batch, microbatches=m)
    return StepResult(model=model.name, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, global_batch=global_batch,
                      micro_batch=micro_batch, microbatches=m, tokens_per_step=float(tokens), compute_time=compute,
                      bubble_time=bubble, phases=phases, step_time=step, tokens_per_s=tps,
                      single_gpu_tokens_per_s=single, speedup=tps / single,
                      comm_overhead=exposed / step, mfu=mfu,
                      achieved_mfu=tps * model.flops_per_token / (gpus * peak), memory_per_gpu=memory,
                      gpu_memory=gpu_memory, _parts=parts)


def _time_groups(graph, op, size, groups, algorithm, options):
    """Per-call seconds with every group at once (in lockstep: the groups of one
    parallelism are symmetric), the algorithm and the links that set the time."""
    together = concurrent(graph, [dict(op=op, size=size, ranks=g, algorithm=algorithm) for g in groups],
                          alone=False, lockstep=True, **options)
    return together.makespan, together.algorithms[0], together.bottleneck


def training_step(graph, *, model="llama-3-70b", tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1,
                  global_batch: int | None = None, micro_batch: int = 1, mfu: float = DEFAULT_MFU,
                  zero: int = 1, dp_overlap: float = 1.0, ranks=None, gpu=None,
                  algorithms: dict | None = None, collective_options: dict | None = None) -> StepResult:
    """Time one training step of ``model`` on the cluster ``graph``.

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster (``topologies`` generator or hand-built).
    model : str or ModelSpec
        A preset of ``MODELS`` or a shape.
    tp, pp, dp, ep : int
        Tensor, pipeline, data and expert parallel degrees; ``tp * pp * dp`` must equal the
        GPU count (``dp`` defaults to the quotient); ``ep`` divides ``dp`` and the experts.
    global_batch : int, optional
        Sequences per step (default 512, 4 M tokens at 8192, rounded up to a multiple of
        ``dp x micro_batch``).
    micro_batch : int
        Sequences per microbatch.
    mfu : float
        Fraction of the dense bf16 peak reached while computing (default 0.43, see module).
    zero : {0, 1, 2, 3}
        0 all-reduce; 1 / 2 distributed optimizer (reduce-scatter + all-gather); 3 FSDP.
    dp_overlap : float in [0, 1]
        Fraction of the overlap window (see module) the DP traffic may hide behind.
    ranks : sequence of int, optional
        Placement: GPU rank of each logical rank (default ``topologies.gpus`` order).
    gpu : str or GpuSpec, optional
        GPU type when the graph's GPU nodes carry none.
    algorithms : dict, optional
        Collective algorithm per parallelism (``tp``, ``pp``, ``ep``, ``dp``), default ``"auto"``.
    collective_options : dict, optional
        Passed to every collective (``policy``, ``efficiency``, ``step_latency``, ...).

    Examples
    --------
    >>> import topologies as tp
    >>> r = training_step(tp.rail_optimized(nodes=8), model="llama-3-70b", tp=8, dp=8, global_batch=64)
    >>> r.gpus, r.microbatches, round(sum(r.breakdown.values()) / r.step_time, 9)
    (64, 8, 1.0)
    >>> r.phases["tp"].algorithm, r.phases["dp"].tier
    ('nvls', 'access')
    """
    spec = get_model(model)
    _checks.checked_graph(graph)
    nodes = tp_.gpus(graph)
    n = len(nodes)
    tp, pp, ep, micro_batch = (_checks.integer(name, value) for name, value in
                               (("tp", tp), ("pp", pp), ("ep", ep), ("micro_batch", micro_batch)))
    if dp is not None:
        dp = _checks.integer("dp", dp)
    if dp is None:
        dp = n // (tp * pp) if n % (tp * pp) == 0 else 0
    if tp * pp * dp != n:
        raise ValueError(f"tp * pp * dp must equal the GPU count {n}, got tp={tp}, pp={pp}, dp={dp} "
                         f"({tp * pp * dp})")
    if spec.layers % pp:
        raise ValueError(f"pp ({pp}) must divide the model's {spec.layers} layers")
    if ep > 1 and (spec.experts == 1 or dp % ep or spec.experts % ep):
        raise ValueError(f"ep ({ep}) needs a mixture-of-experts model and must divide dp ({dp}) and the "
                         f"experts ({spec.experts})")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    mfu = _check_fraction("mfu", mfu, zero_ok=False)
    dp_overlap = _check_fraction("dp_overlap", dp_overlap, zero_ok=True)
    if global_batch is None:        # 512 sequences (4 M tokens at 8192), rounded up to whole microbatches
        global_batch = -(-512 // (dp * micro_batch)) * dp * micro_batch
    global_batch = _check_batch(global_batch, dp, micro_batch)
    placement = list(range(n)) if ranks is None else _checks.rank_indices(graph, ranks)
    if sorted(placement) != list(range(n)):
        raise ValueError(f"ranks must be a permutation of the {n} GPU ranks")
    if gpu is None:
        types = {graph.nodes[v].get("gpu_type") for v in nodes}
        if None in types or len(types) != 1:
            raise ValueError(f"the graph's GPUs have types {sorted(map(str, types))}: pass gpu= (one type)")
        gpu = types.pop()
    peak = tp_.get_gpu(gpu).peak_bf16_flops
    gpu_memory = tp_.get_gpu(gpu).memory
    algorithms = {"tp": "auto", "pp": "auto", "ep": "auto", "dp": "auto", **(algorithms or {})}
    unknown = set(algorithms) - {"tp", "pp", "ep", "dp"}
    if unknown:
        raise ValueError(f"algorithms keys must be among tp, pp, ep, dp, got {sorted(unknown)}")
    options = dict(collective_options or {})

    def rank(t, d, q):
        return placement[t + tp * (d + dp * q)]

    h, s = spec.hidden, spec.seq_len
    per_call, algs, sizes, groups, bottlenecks = {}, {}, {}, {}, {}

    def timed(key, kind, op, size, members):
        per_call[key], algs[key], bottlenecks[key] = _time_groups(graph, op, size, members, algorithms[kind],
                                                                  options)
        sizes[key], groups[key] = size, (len(members), len(members[0]))

    if tp > 1:
        timed("tp", "tp", "all_reduce", micro_batch * s * h * BF16,
              [[rank(t, d, q) for t in range(tp)] for q in range(pp) for d in range(dp)])
    if pp > 1:
        pairs = [[rank(t, d, q), rank(t, d, q + 1)] for q in range(pp - 1) for d in range(dp) for t in range(tp)]
        timed("pp", "pp", "send_recv", micro_batch * s * h * BF16 / tp, pairs)
    if ep > 1:
        timed("ep", "ep", "all_to_all", micro_batch * s * h * BF16 * spec.top_k / tp,
              [[rank(t, d, q) for d in range(e * ep, (e + 1) * ep)]
               for q in range(pp) for t in range(tp) for e in range(dp // ep)])
    dense = (spec.params - spec.expert_params) / (tp * pp) * BF16
    shards = [("dp", dense, [[rank(t, d, q) for d in range(dp)] for q in range(pp) for t in range(tp)])]
    if spec.expert_params and dp // ep > 1:
        shards.append(("dp_experts", spec.expert_params / (tp * pp * ep) * BF16,
                       [[rank(t, d, q) for d in range(r, dp, ep)] for q in range(pp) for t in range(tp)
                        for r in range(ep)]))
    for key, size, members in shards:
        if len(members[0]) < 2:
            continue
        if zero == 0:
            timed(key, "dp", "all_reduce", size, members)
        else:
            timed(key, "dp", "reduce_scatter", size, members)
            gather = key + "_gather"
            per_call[gather], _, _ = _time_groups(graph, "all_gather", size, members, algs[key], options)
    return _compose(model=spec, gpus=n, tp=tp, pp=pp, dp=dp, ep=ep, global_batch=global_batch,
                    micro_batch=micro_batch, peak=peak, mfu=mfu, zero=zero, dp_overlap=dp_overlap,
                    per_call=per_call, algorithms=algs, bytes_=sizes, groups=groups, bottlenecks=bottlenecks,
                    gpu_memory=gpu_memory)
