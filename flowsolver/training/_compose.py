"""A step composed from a communication profile and a schedule: pure arithmetic, no solving.

The schedule (global batch, DP and TP overlap, compute efficiency, precision, recompute)
sets the microbatch count, the compute time and the overlap windows; the profile's per-call
times do not depend on it, so a step is re-timed under another schedule without solving
again (:meth:`StepResult.recompose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..routing import first_tier
from ._compute import DEFAULT_ATTENTION_EFFICIENCY, attention_seconds, gemm_seconds, stage_seconds
from ._kernel_costs import kernel_parts, layer_kernel_costs
from ._memory import grad_bytes_of, stage_memory, te_fp8_activations
from ._memory_overheads import usable_memory
from ._exposed import Phase, dp_phases, microbatch_phases, pipeline_phase
from ._overlap_costs import cp_ring_sm_share, dp_overlap_costs
from ._pipeline import bubble_slots, stage_layers
from ._recompute import FORWARD_AGAIN, layer_recompute
from ._prepare import check_interleaved
from ._profile import CommProfile
from ._schedule import Schedule, check_recompute_layers, checked_schedule, resolve_compute

__all__ = ["Phase", "StepResult", "compose", "layer_compute"]


@dataclass(frozen=True)
class StepResult:
    """Result of :func:`flowsolver.training_step`; times in seconds, rates in tokens/s.

    ``profile`` (:class:`CommProfile`, the collectives solved once) and ``schedule``
    (:class:`Schedule`) are the inputs; the step is :func:`compose` of them. ``phases`` maps
    each communicating parallelism to its :class:`Phase`; ``breakdown`` maps compute,
    bubble, tp, etp (a mixture of experts with expert TP = tp > 1: the token dispatcher's TP collectives),
    cp, pp, ep, dp to their share of ``step_time`` (the communication entries are
    the exposed parts): the values add up to ``step_time``. ``comm_overhead`` = exposed
    communication / step time; ``speedup`` = tokens/s against one GPU of the same type
    computing alone at the same efficiency and precision. Reported like the published runs:
    ``mfu`` = model FLOPs per second / (GPUs x the dense peak of the step's precision), over
    the whole step; ``tflops_per_gpu`` the model FLOP/s per GPU / 1e12; ``tokens_per_gpu``
    tokens/s per GPU. Model FLOPs per token: :attr:`flops_per_token` (a mixture of experts at a
    ``capacity_factor`` below 1 counts only the expert GEMMs of the tokens it keeps: dropped
    tokens are neither computed nor counted: the model FLOP/s never exceed the FLOP/s the GPUs
    compute). ``memory_per_gpu`` (bytes) is
    :func:`flowsolver.training.memory_per_gpu`'s estimate, the largest of
    ``stage_memory`` (each pipeline stage's bytes, stage 0 first; ``stage_layers`` its
    transformer layers); ``fits`` compares it with ``usable_memory``, the GPU's memory less
    what no allocation can use (the CUDA context,
    :data:`~flowsolver.training._memory_overheads.FITS_RESERVE`).
    The step is timed whether or not it fits. ``chosen``: with ``vp`` or ``micro_batch`` left
    ``"auto"``, the :class:`~flowsolver.training.AutoChoice` that says what training_step
    picked and why (``None`` otherwise; :meth:`recompose` keeps the picked values).
    """

    profile: CommProfile = field(repr=False)
    schedule: Schedule
    microbatches: int
    compute_time: float
    bubble_time: float
    phases: dict
    step_time: float
    tokens_per_s: float
    single_gpu_tokens_per_s: float
    speedup: float
    comm_overhead: float
    mfu: float
    memory_per_gpu: float
    stage_layers: tuple = ()
    stage_memory: tuple = ()
    chosen: object = None

    model = property(lambda self: self.profile.model.name, doc="The model's name.")
    gpus = property(lambda self: self.profile.layout.gpus, doc="GPU count.")
    tp = property(lambda self: self.profile.layout.tp, doc="Tensor parallel degree.")
    cp = property(lambda self: self.profile.layout.cp, doc="Context parallel degree.")
    pp = property(lambda self: self.profile.layout.pp, doc="Pipeline parallel degree (stages).")
    vp = property(lambda self: self.profile.layout.vp, doc="Virtual stages (model chunks) per pipeline stage.")
    dp = property(lambda self: self.profile.layout.dp, doc="Data parallel degree.")
    ep = property(lambda self: self.profile.layout.ep, doc="Expert parallel degree.")
    micro_batch = property(lambda self: self.profile.micro_batch, doc="Sequences per microbatch.")
    zero = property(lambda self: self.profile.zero, doc="ZeRO stage.")
    global_batch = property(lambda self: self.schedule.global_batch, doc="Sequences per step.")
    dp_overlap = property(lambda self: self.schedule.dp_overlap, doc="Fraction of the DP overlap windows used.")
    tp_overlap = property(lambda self: self.schedule.tp_overlap,
                          doc="Fraction of the TP traffic hidden; any value above 0 also runs the overlapped "
                              "GEMMs with their cost (chunks, SMs held), as the frameworks' on / off overlap does.")
    precision = property(lambda self: self.schedule.precision, doc="bf16 or fp8.")
    recompute = property(lambda self: self.schedule.recompute, doc="Activation recompute: none, selective, full.")
    compute_efficiency = property(lambda self: self.schedule.compute_efficiency,
                                  doc="Fraction of the GEMMs' peak reached while computing.")
    attention_efficiency = property(lambda self: self.schedule.attention_efficiency,
                                    doc="Fraction of the bf16 peak reached in attention.")
    recompute_layers = property(lambda self: self.schedule.recompute_layers,
                                doc="Layers per model chunk that full recompute recomputes (None: all).")
    achieved_mfu = property(lambda self: self.mfu, doc="Same as :attr:`mfu` (the earlier name).")
    gpu_memory = property(lambda self: self.profile.gpu.memory, doc="Bytes of memory per GPU.")

    @property
    def tokens_per_step(self) -> float:
        """Tokens per step: global batch x sequence length."""
        return float(self.schedule.global_batch * self.profile.model.seq_len)

    @property
    def tokens_per_gpu(self) -> float:
        """Tokens/s per GPU (the Megatron-Bridge tables' figure)."""
        return self.tokens_per_s / self.gpus

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per token the step counts (:attr:`mfu`, :attr:`tflops_per_gpu`): the
        model's :meth:`~flowsolver.training.ModelSpec.trained_flops_per_token` at the step's
        ``capacity_factor`` (the expert GEMMs of dropped tokens left out)."""
        return self.profile.model.trained_flops_per_token(self.profile.capacity_factor)

    @property
    def tflops_per_gpu(self) -> float:
        """Model TFLOP/s per GPU: tokens/s per GPU x :attr:`flops_per_token` / 1e12."""
        return self.tokens_per_gpu * self.flops_per_token / 1e12

    @property
    def usable_memory(self) -> float:
        """Bytes of the GPU's memory the job's tensors can take: ``gpu_memory`` less the CUDA
        context (:data:`~flowsolver.training._memory_overheads.FITS_RESERVE`)."""
        return usable_memory(self.gpu_memory)

    @property
    def fits(self) -> bool:
        """Whether the estimated ``memory_per_gpu`` fits :attr:`usable_memory` (the GPU's
        memory less its CUDA context)."""
        return self.memory_per_gpu <= self.usable_memory

    @property
    def breakdown(self) -> dict:
        """Seconds of the step per part: compute, bubble, then each phase's exposed time."""
        out = dict(compute=self.compute_time, bubble=self.bubble_time)
        out.update({k: p.exposed for k, p in self.phases.items()})
        return out

    @property
    def bottleneck(self) -> tuple:
        """The bottleneck links of the phase with the largest exposed time (the first of
        tp, etp, cp, pp, ep, dp on a tie); ``()`` without communication."""
        return max(self.phases.values(), key=lambda p: p.exposed).bottleneck if self.phases else ()

    @property
    def bottleneck_tier(self) -> str:
        """Tier of :attr:`bottleneck`'s most utilised link (``""`` if none)."""
        return first_tier(self.bottleneck)

    def sensitivity(self, side: str = "up"):
        """Step time saved per added GB/s, for every link and aggregated by tier, technology
        and cable group: a tidy pandas DataFrame (columns as
        :meth:`flowsolver.CollectiveResult.sensitivity`; needs pandas). Exact one-sided
        derivatives through every collective of the step and the DP overlap window."""
        from ..collectives import sensitivity_table
        from ._sensitivity import step_directional, step_gradient

        if not self.phases:
            raise ValueError("sensitivity: this step communicates nothing, so no link changes its time")
        links = next(iter(self.profile.comms.values())).result.links
        return sensitivity_table(links, self.step_time, lambda s: step_gradient(self, compose, s),
                                 lambda dc, s: step_directional(self, compose, dc, s), side)

    def recompose(self, **changes) -> "StepResult":
        """The same job under another schedule, without solving again: any of
        ``global_batch``, ``dp_overlap``, ``tp_overlap``, ``compute_efficiency``,
        ``attention_efficiency``, ``precision``, ``recompute``, ``recompute_layers``,
        ``attention``, ``fp8_recipe``, ``power_cap``, ``kernel_utilization`` (collective sizes
        do not depend on them, so each keeps its per-call time); :func:`compose` of the stored
        profile and the new schedule. ``None`` keeps a value, except for
        ``compute_efficiency``: ``None`` switches to the kernel tables, a float to the flat
        model, ``"auto"`` to the tables where the GPU has them (the attention then takes the new
        model's own default unless given)."""
        allowed = ("global_batch", "dp_overlap", "tp_overlap", "compute_efficiency", "attention_efficiency",
                   "precision", "recompute", "recompute_layers", "attention", "fp8_recipe", "power_cap",
                   "kernel_utilization", "tp_overlap_impl")
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise TypeError(f"recompose takes {', '.join(allowed)}; got {', '.join(unknown)}")
        values = {k: getattr(self.schedule, k) for k in allowed}
        if "compute_efficiency" in changes:                 # "auto": the tables if the GPU has them
            changes = dict(changes, compute_efficiency=resolve_compute(changes["compute_efficiency"], self.profile.gpu))
        values.update({k: v for k, v in changes.items() if v is not None})
        if "compute_efficiency" in changes and changes["compute_efficiency"] is None:
            values["compute_efficiency"] = None             # the kernel tables
        if "compute_efficiency" in changes and "attention_efficiency" not in changes \
                and (changes["compute_efficiency"] is None) != self.schedule.kernels:
            values["attention_efficiency"] = None           # the new model's own attention
        lay = self.profile.layout
        check_recompute_layers(values["recompute_layers"], self.profile.model.layers, lay.pp, lay.vp)
        schedule = checked_schedule(dp=self.dp, micro_batch=self.micro_batch, gpu=self.profile.gpu, **values)
        check_interleaved(lay.pp, lay.vp, schedule.global_batch // (lay.dp * self.micro_batch))
        return compose(self.profile, schedule)

    def to_dataframe(self):
        """The phases as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        rows = [dict(phase="compute", op="", algorithm="", bytes=0.0, calls=self.microbatches,
                     per_call=self.compute_time / self.microbatches, total=self.compute_time,
                     exposed=self.compute_time, tier=""),
                dict(phase="bubble", op="", algorithm="", bytes=0.0, calls=0, per_call=0.0,
                     total=self.bubble_time, exposed=self.bubble_time, tier="")]
        rows += [dict(phase=p.name, op=p.op, algorithm=p.algorithm, bytes=p.bytes, calls=p.calls,
                      per_call=p.per_call, total=p.total, exposed=p.exposed, tier=p.bottleneck_tier)
                 for p in self.phases.values()]
        return pd.DataFrame(rows)




def _on_gpu(schedule: Schedule, profile: CommProfile) -> Schedule:
    """``schedule`` as :func:`compose` runs it on ``profile``: its compute model ``"auto"``
    resolved on the profile's GPU and a float checked (a Schedule built by hand;
    :func:`checked_schedule` does both for :func:`~flowsolver.training_step`), its unset
    ``global_batch`` and ``tp_overlap`` given training_step's defaults."""
    efficiency = resolve_compute(schedule.compute_efficiency, profile.gpu)
    if efficiency != schedule.compute_efficiency:       # "auto" resolved (a checked float stays as it is)
        schedule = replace(schedule, compute_efficiency=efficiency)
    if schedule.global_batch is None or schedule.tp_overlap is None:
        lay = profile.layout
        schedule = schedule.resolved(dp=lay.dp, micro_batch=profile.micro_batch, tp=lay.tp)
    return schedule


def compose(profile: CommProfile, schedule: Schedule, parts: dict | None = None) -> StepResult:
    """The step from a solved profile and a schedule (pure arithmetic, no solving); ``parts``,
    :func:`layer_compute` of them when the caller has it (a planner composing many layouts
    of one compute shape).

    ``m = global_batch / (dp micro_batch)`` microbatches; each stage computes one in the
    :func:`layer_compute` time of its layers (a full-recompute layer's forward again, the
    output projection and loss on the last stage) and, per microbatch, waits for its exposed
    TP, ETP (a mixture of experts' dispatcher TP collectives), CP and EP traffic; the slowest
    stage sets the pace ``t``. ``step_time = m t + (pp - 1) / vp x t`` (the 1F1B or
    interleaved bubble) ``+`` exposed PP and DP traffic.

    >>> import topologies as tp
    >>> from flowsolver import training_step
    >>> from flowsolver import Parallelism
    >>> r = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8), Schedule(global_batch=16))
    >>> again = compose(r.profile, r.schedule)
    >>> again.step_time == r.step_time, compose(r.profile, Schedule(64, 1.0, 0.4)).microbatches
    (True, 32)
    """
    model, lay, gpu, s = profile.model, profile.layout, profile.gpu, _on_gpu(schedule, profile)
    m = s.global_batch // (lay.dp * profile.micro_batch)
    layers = stage_layers(model.layers, lay.pp, lay.vp)
    every = s.recompute_layers is None         # full recompute: all layers, or the first recompute_layers per chunk
    recomputed = [0 if s.recompute not in FORWARD_AGAIN else n if every else min(n, lay.vp * s.recompute_layers)
                  for n in layers]
    parts = layer_compute(profile, s) if parts is None else parts
    extra = parts["layer_recomputed"] - parts["layer"]
    redo = layer_recompute(model, s.recompute)
    stage_compute = [n * parts["layer"] + r * extra + (parts["output"] if q == lay.pp - 1 else 0.0)
                     for q, (n, r) in enumerate(zip(layers, recomputed))]
    distinct = {}           # stages of equal layers and recomputed layers have equal phases: composed once
    for n, r in zip(layers, recomputed):
        if (n, r) not in distinct:
            distinct[(n, r)] = microbatch_phases(profile.comms, layers=n, tp_overlap=s.tp_overlap,
                                                 attention_seconds=parts["attention"], gemms=parts["gemms"],
                                                 recomputed=r, attention_fwd=parts["attention_fwd"],
                                                 attention_bwd=parts["attention_bwd"], tp_again=redo.tp_ops,
                                                 attention_again=redo.attention, mlp_again=redo.gemms["fc1"] > 0,
                                                 core_again=redo.core_attention, moe=model.experts > 1,
                                                 cp_sm_share=cp_ring_sm_share(profile))
    per_mb = [distinct[(n, r)] for n, r in zip(layers, recomputed)]
    slot = [c + sum(p.exposed for p in ph.values()) for c, ph in zip(stage_compute, per_mb)]
    q = max(range(lay.pp), key=slot.__getitem__)
    t_mb, t_slot = stage_compute[q], slot[q]
    phases = {k: _times(p, m) for k, p in per_mb[q].items()}
    phases.update(pipeline_phase(profile.comms, pp=lay.pp, vp=lay.vp, microbatches=m))
    chunks = lay.vp if lay.vp > 1 else max(layers)
    again = (parts["forward"] if s.recompute == "full" else extra) if s.recompute in FORWARD_AGAIN and every else 0.0
    backward = parts["backward"] + again
    # ZeRO-3 prefetches beside a layer's whole run, its exposed TP / CP / EP waits included (the
    # gather's stream does not stop while the compute waits on NVLink): faster compute never slows it
    waits = (t_slot - t_mb) / max(1, layers[q])
    ahead = parts["forward"] / (parts["forward"] + backward) if parts["forward"] + backward > 0 else 0.0
    phases.update(dp_phases(profile.comms, zero=profile.zero, m=m, t_mb=t_mb, dp_overlap=s.dp_overlap, chunks=chunks,
                            pp=lay.pp, vp=lay.vp, layers=max(layers), layer_forward=parts["forward"] + ahead * waits,
                            layer_backward=backward + (1 - ahead) * waits,
                            root_scale=profile.fsdp_unit_scale() / max(1, lay.pp), t_run=t_slot,
                            costs=dp_overlap_costs(profile, parts)))
    compute, bubble = m * t_mb, bubble_slots(lay.pp, lay.vp, m) * t_slot
    exposed = sum(p.exposed for p in phases.values())
    step = compute + bubble + exposed
    tps = s.global_batch * model.seq_len / step
    tokens = profile.micro_batch * model.seq_len        # one microbatch, split over the tp x cp GPUs of a stage
    # one GPU computing the whole model alone: its GEMMs whole, not as TP overlap chunks them on
    # the SMs its communication leaves (newuser24: overlap on moved the reference 5,785 -> 5,333
    # tokens/s and the speed-up 19.9 -> 22.8x for a 5.5 % faster step)
    alone = stage_compute
    if s.kernels and s.tp_overlap > 0 and lay.tp > 1:
        plain = layer_compute(profile, replace(s, tp_overlap=0.0))
        plain_extra = plain["layer_recomputed"] - plain["layer"]
        alone = [n * plain["layer"] + r * plain_extra + (plain["output"] if q == lay.pp - 1 else 0.0)
                 for q, (n, r) in enumerate(zip(layers, recomputed))]
    single = tokens / (sum(alone) * lay.tp * lay.cp)
    peak = gpu.peak_fp8_flops if s.precision == "fp8" else gpu.peak_bf16_flops
    memory = stage_memory(model, tp=lay.tp, pp=lay.pp, dp=lay.dp, ep=lay.ep, zero=profile.zero,
                          micro_batch=profile.micro_batch, microbatches=m, cp=lay.cp, vp=lay.vp,
                          recompute=s.recompute, sequence_parallel=profile.sequence_parallel,
                          recompute_layers=s.recompute_layers, attention=s.attention,
                          fp8_activations=te_fp8_activations(s.precision, s.fp8_recipe),
                          gather_bytes=int(profile.gather_bytes),
                          grad_bytes=grad_bytes_of(profile.reduce_bytes, profile.zero),
                          capacity_factor=float(profile.capacity_factor), etp=lay.etp)
    return StepResult(profile=profile, schedule=s, microbatches=m, compute_time=compute, bubble_time=bubble,
                      phases=phases, step_time=step, tokens_per_s=tps, single_gpu_tokens_per_s=single,
                      speedup=tps / single, comm_overhead=exposed / step,
                      mfu=tps * model.trained_flops_per_token(profile.capacity_factor) / (lay.gpus * peak),
                      memory_per_gpu=max(memory), stage_layers=layers, stage_memory=memory)


def _compute_kw(profile: CommProfile, s: Schedule) -> dict:
    """:func:`stage_seconds`' arguments but ``layers``, ``last`` and ``recomputed``: one
    microbatch, split over the ``tp x cp`` GPUs of a stage (the flat model)."""
    return dict(tokens=profile.micro_batch * profile.model.seq_len, shards=profile.layout.tp * profile.layout.cp,
                gpu=profile.gpu, precision=s.precision, efficiency=s.compute_efficiency, recompute=s.recompute,
                attention_efficiency=s.attention_efficiency, capacity_factor=profile.capacity_factor)


def layer_compute(profile: CommProfile, schedule: Schedule) -> dict:
    """The compute :func:`compose` times one microbatch with, per GPU, in seconds: a
    transformer layer forward and backward (``layer``; ``layer_recomputed`` for a layer full
    recompute recomputes), the ``output`` projection and loss, one layer's ``attention``
    (forward and backward, ``attention_fwd`` / ``attention_bwd``: what CP's KV exchange hides
    behind), the forward ``gemms`` (``qkv``, ``proj``, ``fc1``, ``fc2``: what each TP
    collective hides behind) and a layer's ``forward`` / ``backward`` (what FSDP's per-layer
    traffic hides behind). The trace writer reads its durations from here.

    With the kernel tables (``compute_efficiency=None``) the parts are
    :func:`~flowsolver.training._kernel_costs.kernel_parts` of
    :func:`~flowsolver.training._kernel_costs.layer_kernel_costs`, divided by the schedule's
    ``kernel_utilization``; the flat model splits a layer (and the output projection: its
    ``output_fwd``) a third forward, two thirds backward.

    >>> import topologies as tp
    >>> from flowsolver import training_step
    >>> from flowsolver import Parallelism
    >>> r = training_step(tp.rail_optimized(1), "llama-3-8b", Parallelism(tp=8), Schedule(global_batch=4))
    >>> c = layer_compute(r.profile, r.schedule)
    >>> abs(32 * c["layer"] + c["output"] - r.compute_time / r.microbatches) < 1e-12
    True
    """
    model, s, lay = profile.model, _on_gpu(schedule, profile), profile.layout
    if s.kernels:
        costs = layer_kernel_costs(model, micro_batch=profile.micro_batch, tp=lay.tp, cp=lay.cp, ep=lay.ep,
                                   sequence_parallel=profile.sequence_parallel, gpu=profile.gpu,
                                   precision=s.precision, attention=s.attention, fp8_recipe=s.fp8_recipe,
                                   power_cap=s.power_cap, capacity_factor=profile.capacity_factor,
                                   tp_overlap=s.tp_overlap, tp_overlap_impl=s.tp_overlap_impl, etp=lay.etp)
        if s.attention_efficiency is not None:        # attention at a given fraction of the bf16 peak
            flops = 2.0 * profile.micro_batch * model.seq_len ** 2 * model.hidden / (lay.tp * lay.cp)
            rate = s.attention_efficiency * profile.gpu.peak_bf16_flops
            costs = dict(costs, attention_fwd=flops / rate, attention_bwd=2.5 * flops / rate)
        parts = kernel_parts(costs, layer_recompute(model, s.recompute))
        # the memory-bound kernels of a plain layer (what shares the HBM with NCCL's copies)
        parts["memory"] = costs["memory_fwd"] + costs["memory_bwd"] + costs["weight_casts"]
        u = s.kernel_utilization
        return {k: ({g: t / u for g, t in v.items()} if isinstance(v, dict) else v / u) for k, v in parts.items()}
    kw = _compute_kw(profile, s)
    if kw["attention_efficiency"] is None:
        kw["attention_efficiency"] = DEFAULT_ATTENTION_EFFICIENCY
    if s.power_cap is not None and s.power_cap < profile.gpu.tdp:
        # the flat efficiencies scale as the published capped GEMMs do (attention as bf16 GEMMs)
        from ._kernels import gemm_fraction, kernel_family
        fam, tdp = kernel_family(profile.gpu), profile.gpu.tdp
        ratio = {p: gemm_fraction(fam, p, s.power_cap, tdp) / gemm_fraction(fam, p) for p in ("bf16", s.precision)}
        kw = dict(kw, efficiency=s.compute_efficiency * ratio[s.precision],
                  attention_efficiency=s.attention_efficiency * ratio["bf16"])
    split = dict(tokens=kw["tokens"], shards=kw["shards"], gpu=profile.gpu)
    layer = stage_seconds(model, 1, False, recomputed=0, **kw)
    attention = attention_seconds(model, efficiency=kw["attention_efficiency"], recompute=s.recompute, **split)
    # one pass's blocks (what a ring step hides behind), as the kernel tables' attention_fwd /
    # attention_bwd: the plain layer's; a recomputed forward runs its own ring (cp_ring_exposed)
    plain = attention_seconds(model, efficiency=kw["attention_efficiency"], recompute="none", **split)
    output = stage_seconds(model, 0, True, **kw)
    return dict(layer=layer, layer_recomputed=stage_seconds(model, 1, False, recomputed=1, **kw),
                output=output, output_fwd=output / 3.0, attention=attention,
                attention_fwd=plain / 3.0, attention_bwd=2.0 * plain / 3.0,
                gemms=gemm_seconds(model, precision=s.precision, efficiency=kw["efficiency"],
                                   capacity_factor=profile.capacity_factor, **split),
                forward=layer / 3.0, backward=2.0 * layer / 3.0, memory=0.0)


def _times(phase: Phase, m: int) -> Phase:
    """A per-microbatch phase scaled to the step's ``m`` microbatches."""
    return Phase(name=phase.name, op=phase.op, algorithm=phase.algorithm, bytes=phase.bytes, calls=phase.calls * m,
                 per_call=phase.per_call, exposed=phase.exposed * m, groups=phase.groups,
                 group_size=phase.group_size, bottleneck=phase.bottleneck)
