"""The layouts of a job: every combination of the searched values, each pruned for the first
reason it cannot run (divisibility, heads, layers per stage, experts, batch, memory) before
any network work, with a count per reason."""

from __future__ import annotations

import numbers
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .. import _checks
from ..training import (DEFAULT_ORDER, ZERO_STAGES, ModelSpec, Parallelism, check_recompute, checked_order,
                        chunk_layers, grad_bytes_of, interleaving_refused, memory_per_gpu,
                        moe_needs_sequence_parallel, usable_memory)

__all__ = ["Layout", "Space", "layout_space", "PRUNE_REASONS", "DEFAULT_ORDERS", "RECOMPUTE_MODES"]

#: why a combination is pruned, checked in this order (the first that applies is counted)
PRUNE_REASONS = {
    "gpus": "tp x cp x pp does not divide the GPU count",
    "heads": "tp does not divide the attention heads and KV heads",
    "sequence": "2 cp does not divide the sequence length, or tp x cp does not with sequence parallelism, or a "
                "mixture of experts at tp > 1 without sequence parallelism (Megatron-Core's MoE layer refuses it)",
    "layers": "pp x vp does not split the layers (nor layers + 2), or vp > 1 without pp > 1",
    "experts": "ep > 1 on a dense model, or ep does not divide dp x cp and the experts",
    "batch": "dp x micro_batch does not divide the global batch, or, with vp > 1, the microbatches are fewer "
             "than pp or not a multiple of it (Megatron-Core's interleaved schedule refuses them)",
    "same": "the same job as another combination (sequence parallelism at tp 1, a rank order that only "
            "moves degree-1 axes, a ZeRO stage above the least searched with dp x cp = 1: nothing to shard), "
            "or one that cannot beat it: selective recompute beside none with a fused attention when both need "
            "the same memory (it runs the attention forward again and keeps no scores it would save)",
    "memory": "the largest stage's memory estimate exceeds the GPU's memory less the headroom and the CUDA context",
}

#: placements searched by default, fastest-varying first: Megatron's (DP across servers on one
#: rail, PP outermost) and the Llama 3 paper's (section 3.3.2: PP inside DP)
DEFAULT_ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp")
RECOMPUTE_MODES = ("none", "selective", "full")


@dataclass(frozen=True, order=True)
class Layout:
    """One way to run the job: the parallel degrees (``tp x cp x pp x dp`` GPUs, ``ep``
    dividing ``dp``, ``vp`` model chunks per stage), ``micro_batch`` sequences per
    microbatch, the ``recompute`` mode, the ``zero`` stage (3: FSDP), ``sequence_parallel``
    and the rank ``order`` (fastest-varying first; :class:`flowsolver.training.ParallelLayout`);
    ``placement`` names the :data:`flowsolver.planning.PLACEMENTS` policy that chose the job's
    GPUs when :func:`flowsolver.plan` searched placements (empty: the graph as given).

    >>> Layout(tp=8, cp=1, pp=16, dp=128, ep=1, vp=8, micro_batch=1, recompute="selective", zero=1,
    ...        sequence_parallel=True, order=("tp", "cp", "pp", "dp")).label
    'TP8 PP16 VP8 DP128 mb1 selective zero1 tp-cp-pp-dp'
    """

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int
    vp: int
    micro_batch: int
    recompute: str
    zero: int
    sequence_parallel: bool
    order: tuple
    placement: str = ""

    def parallelism(self):
        """This layout as a :class:`flowsolver.Parallelism` (its ``recompute`` goes in the
        :class:`flowsolver.Schedule`): ``training_step(g, model, row.layout.parallelism(),
        Schedule(global_batch=..., recompute=row.layout.recompute))``."""
        kw = self.step_kwargs()
        kw.pop("recompute")
        return Parallelism(**kw)

    def step_kwargs(self) -> dict:
        """The layout as one release's :func:`flowsolver.training_step` keywords (``tp=``, ...,
        ``recompute=``; deprecated there: :meth:`parallelism` gives today's spelling)."""
        return dict(tp=self.tp, cp=self.cp, pp=self.pp, dp=self.dp, ep=self.ep, vp=self.vp,
                    micro_batch=self.micro_batch, recompute=self.recompute, zero=self.zero,
                    sequence_parallel=self.sequence_parallel, order="-".join(self.order))

    @property
    def label(self) -> str:
        """A short text: the degrees above 1 (TP, CP, PP, VP, DP, EP), micro-batch, recompute,
        ZeRO stage, ``noSP`` without sequence parallelism, the rank order, the placement (if any)."""
        degrees = " ".join(f"{k.upper()}{v}" for k, v in (("tp", self.tp), ("cp", self.cp), ("pp", self.pp),
                                                          ("vp", self.vp), ("dp", self.dp), ("ep", self.ep))
                           if v > 1 or k == "dp")
        sp = "" if self.sequence_parallel or self.tp == 1 else " noSP"
        where = f" {self.placement}" if self.placement else ""
        return f"{degrees} mb{self.micro_batch} {self.recompute} zero{self.zero}{sp} {'-'.join(self.order)}{where}"


@dataclass(frozen=True)
class Space:
    """The enumeration: ``feasible`` layouts with their memory per GPU (bytes, the largest
    stage's estimate), ``pruned`` the count per reason of :data:`PRUNE_REASONS`, ``total``
    the combinations looked at (feasible + pruned), ``usable_memory`` the bytes per GPU a
    layout may need (the GPU's memory less the headroom and the CUDA context)."""

    feasible: tuple
    memory: tuple
    pruned: dict
    total: int
    usable_memory: float


def _divisors(n: int, limit: int | None = None) -> tuple:
    return tuple(d for d in range(1, (n if limit is None else min(n, limit)) + 1) if n % d == 0)


def _values(name, given, default) -> tuple:
    """The searched values of one axis: ``given`` (one value or a sequence) or ``default``."""
    if given is None:
        return tuple(default)
    if isinstance(given, np.ndarray) and given.ndim == 0:
        given = given.item()                    # np.array(4): one value
    scalar = isinstance(given, (str, bytes, numbers.Number, np.generic)) or not hasattr(given, "__iter__")
    values = (given,) if scalar else tuple(given)
    if not values:
        raise ValueError(f"{name}: give at least one value to search, got an empty sequence")
    return values


def _splits(layers: int, pp: int, vp: int) -> bool:
    if vp > 1 and pp == 1:
        return False
    try:
        chunk_layers(layers, pp, vp)
    except ValueError:
        return False
    return True


def _canonical(order: tuple, degrees: dict) -> tuple:
    """The order with its degree-1 axes removed: two orders that only move those place
    every rank alike."""
    return tuple(name for name in order if degrees[name] > 1)


def layout_space(spec: ModelSpec, gpus: int, global_batch: int, *, gpu_memory: float, headroom: float = 0.0,
                 max_tp: int | None = None, tp=None, cp=None, pp=None, vp=None, ep=None, micro_batch=None,
                 recompute=None, zero=None, sequence_parallel=None, orders=None, attention=None,
                 fp8_activations=False, gather_bytes: int = 2, reduce_bytes: float = 2,
                 capacity_factor: float = 1.0) -> Space:
    """Every combination of the searched values for ``spec`` on ``gpus`` GPUs and a global
    batch of ``global_batch`` sequences, pruned (first reason of :data:`PRUNE_REASONS`) or
    kept with its memory estimate. No network work.

    Searched values (one value or a sequence each; defaults in brackets): ``tp`` [divisors
    of the heads up to ``max_tp``], ``cp`` [1, 2, 4, 8, 16], ``pp`` [divisors of the GPU
    count up to the layers], ``vp`` [1 to 12], ``ep`` [divisors of the experts; 1 for a dense
    model], ``micro_batch`` [1 to 32, those dividing the per-replica batch], ``recompute``
    [none, selective, full], ``zero``
    [1, 2, 3], ``sequence_parallel`` [True, False], ``orders`` [:data:`DEFAULT_ORDERS`].
    A layout is kept when its estimate fits ``gpu_memory`` (bytes) less ``headroom`` (fraction
    in [0, 1)) of it, kept free for what the estimate does not count (communication buffers,
    workspace, fragmentation), less the CUDA context, which no process can allocate
    (:func:`flowsolver.training.usable_memory`, what ``StepResult.fits`` compares with). ``attention``:
    the step's attention kernel, as :func:`flowsolver.training.memory_per_gpu` takes it (a
    fused one keeps no scores without recompute; ``plan`` passes the step's, default ``"auto"``);
    ``fp8_activations``: Transformer Engine's one-byte FP8 GEMM inputs (``plan`` passes it for an
    FP8 step with the ``"te"`` recipe); ``gather_bytes``: bytes per weight FSDP (ZeRO 3) gathers
    and holds unsharded (1 with an FP8 all-gather); ``reduce_bytes``: bytes per gradient value
    reduced (4: ``reduce_dtype="fp32"``, whose gradient buffers are fp32 at ZeRO 0 to 2,
    :func:`flowsolver.training.grad_bytes_of`); ``capacity_factor``: a mixture of
    experts' expert inputs padded to, or cut at, that factor (its saved activations with them).

    >>> from flowsolver.training import get_model
    >>> s = layout_space(get_model("llama-3-8b"), 8, 32, gpu_memory=80e9, tp=(1, 2), cp=1, pp=1, vp=1,
    ...                  micro_batch=1, recompute="selective", zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    >>> [lay.label for lay in s.feasible], s.pruned["memory"]
    (['TP2 DP4 mb1 selective zero1 tp-cp-dp-pp'], 1)
    """
    gpus = _checks.integer("gpus", gpus)
    global_batch = _checks.integer("global_batch", global_batch)
    ok = isinstance(headroom, numbers.Real) and not isinstance(headroom, (bool, np.bool_)) and 0 <= headroom < 1
    if not ok:          # one message for 1.0 and for 1.5 or -0.5 (they said [0, 1) and [0, 1])
        raise ValueError(f"headroom must be a fraction in [0, 1), got {headroom!r}")
    headroom = float(headroom)
    max_tp = spec.heads if max_tp is None else _checks.integer("max_tp", max_tp)
    ints = {}
    for name, given, default in (("tp", tp, [d for d in _divisors(spec.heads) if d <= max_tp]),
                                 ("cp", cp, (1, 2, 4, 8, 16)),
                                 ("pp", pp, _divisors(gpus, spec.layers)),
                                 ("vp", vp, range(1, 13)),
                                 ("ep", ep, _divisors(spec.experts)),
                                 ("micro_batch", micro_batch, range(1, 33)),
                                 ("zero", zero, (1, 2, 3))):
        ints[name] = tuple(sorted({_checks.integer(name, v, minimum=0 if name == "zero" else 1) for v in
                                   _values(name, given, default)}))
    for z in ints["zero"]:
        if isinstance(z, bool) or z not in ZERO_STAGES:
            raise ValueError(f"zero must be among 0, 1, 2, 3, got {z!r}")
    modes = tuple(dict.fromkeys(check_recompute(r) for r in _values("recompute", recompute, RECOMPUTE_MODES)))
    fused = attention not in (None, "unfused")      # flash attention stores no scores: selective recomputes none
    sps = tuple(dict.fromkeys(_values("sequence_parallel", sequence_parallel, (True, False))))
    if not all(isinstance(s, bool) for s in sps):
        raise TypeError(f"sequence_parallel must be True / False values, got {sps!r}")
    order_values = _values("orders", orders, DEFAULT_ORDERS)
    if isinstance(orders, tuple) and all(name in DEFAULT_ORDER for name in orders):
        order_values = (orders,)                 # one order given as a tuple of names
    order_list = tuple(dict.fromkeys(checked_order(o) for o in order_values))
    usable = usable_memory(gpu_memory * (1.0 - headroom))
    if usable <= 0:                 # (adv25 F8: headroom 0.99 printed "memory <= -0.8 GB")
        raise ValueError(f"headroom {headroom:g} leaves {gpu_memory * (1.0 - headroom) / 1e9:.3g} GB of the GPU's "
                         f"{gpu_memory / 1e9:.3g} GB, no more than the CUDA context's reserve: no layout can fit")

    pruned = Counter({reason: 0 for reason in PRUNE_REASONS})
    feasible, memory = [], []
    vps, eps, mbs = ints["vp"], ints["ep"], ints["micro_batch"]
    tail = len(ints["zero"]) * len(modes) * len(sps) * len(order_list)     # combinations under (.., mb)
    for t in ints["tp"]:
        for c in ints["cp"]:
            for p in ints["pp"]:
                below = len(vps) * len(eps) * len(mbs) * tail
                if gpus % (t * c * p):
                    pruned["gpus"] += below
                    continue
                d = gpus // (t * c * p)
                if spec.heads % t or spec.kv_heads % t:
                    pruned["heads"] += below
                    continue
                if c > 1 and spec.seq_len % (2 * c):
                    pruned["sequence"] += below
                    continue
                for v in vps:
                    if not _splits(spec.layers, p, v):
                        pruned["layers"] += len(eps) * len(mbs) * tail
                        continue
                    for e in eps:
                        if e > 1 and (spec.experts == 1 or (d * c) % e or spec.experts % e):
                            pruned["experts"] += len(mbs) * tail
                            continue
                        for mb in mbs:
                            if global_batch % (d * mb):
                                pruned["batch"] += tail
                                continue
                            m = global_batch // (d * mb)
                            if interleaving_refused(p, v, m):
                                pruned["batch"] += tail
                                continue
                            degrees = dict(tp=t, cp=c, pp=p, dp=d)
                            for z in ints["zero"]:
                                if d * c == 1 and z != ints["zero"][0]:      # ZeRO shards over dp x cp
                                    pruned["same"] += len(modes) * len(sps) * len(order_list)
                                    continue
                                mems = {}           # (recompute, sp) -> the memory estimate, once each

                                def memory_of(r, sp, z=z, mb=mb, m=m, mems=mems):
                                    if (r, sp) not in mems:
                                        mems[r, sp] = memory_per_gpu(
                                            spec, tp=t, pp=p, dp=d, ep=e, zero=z, micro_batch=mb, microbatches=m,
                                            cp=c, vp=v, recompute=r, sequence_parallel=sp, attention=attention,
                                            fp8_activations=fp8_activations, gather_bytes=gather_bytes,
                                            grad_bytes=grad_bytes_of(reduce_bytes, z),
                                            capacity_factor=capacity_factor)
                                    return mems[r, sp]

                                for r in modes:
                                    twin = r == "selective" and fused and "none" in modes
                                    for sp in sps:
                                        if sp and spec.seq_len % (t * c):        # SP shards s / cp over tp
                                            pruned["sequence"] += len(order_list)
                                            continue
                                        if moe_needs_sequence_parallel(spec, t, sp):
                                            pruned["sequence"] += len(order_list)
                                            continue
                                        seen = set()
                                        for order in order_list:
                                            key = _canonical(order, degrees)
                                            if (not sp and t == 1 and True in sps) or key in seen:
                                                pruned["same"] += 1
                                                continue
                                            seen.add(key)
                                            mem = memory_of(r, sp)
                                            # a fused attention keeps no scores: "selective" saves no memory
                                            # (unless "none" keeps more: FP8's output copy) and runs the
                                            # attention forward again: never faster than "none"
                                            if twin and mem == memory_of("none", sp):
                                                pruned["same"] += 1
                                                continue
                                            if mem > usable:
                                                pruned["memory"] += 1
                                                continue
                                            feasible.append(Layout(t, c, p, d, e, v, mb, r, z, sp, order))
                                            memory.append(mem)
    total = len(feasible) + sum(pruned.values())
    return Space(feasible=tuple(feasible), memory=tuple(memory), pruned=dict(pruned), total=total,
                 usable_memory=usable)
