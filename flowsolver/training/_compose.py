"""A step composed from a communication profile and a schedule: pure arithmetic, no solving.

The schedule (global batch, DP overlap, MFU) sets the microbatch count, the compute time
and the overlap windows; the profile's per-call times do not depend on it, so a step is
re-timed under another schedule without solving again (:meth:`StepResult.recompose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import _checks
from ._memory import memory_per_gpu
from ..routing import first_tier
from ._profile import CommProfile

__all__ = ["Schedule", "Phase", "StepResult", "compose", "checked_schedule"]


@dataclass(frozen=True)
class Schedule:
    """How a step is run on a solved profile: ``global_batch`` sequences per step (a
    multiple of ``dp x micro_batch``), ``dp_overlap`` the fraction of the overlap window
    the DP traffic may hide behind (in [0, 1]), ``mfu`` the fraction of the GPU's dense bf16
    peak reached while computing (in (0, 1])."""

    global_batch: int
    dp_overlap: float
    mfu: float


def checked_schedule(*, dp: int, micro_batch: int, global_batch, dp_overlap, mfu) -> Schedule:
    """A :class:`Schedule` for a job of ``dp`` replicas and ``micro_batch`` sequences per
    microbatch, each value checked (a ``ValueError`` naming it and what it allows).

    >>> checked_schedule(dp=4, micro_batch=2, global_batch=16, dp_overlap=0, mfu=0.5)
    Schedule(global_batch=16, dp_overlap=0.0, mfu=0.5)
    >>> checked_schedule(dp=4, micro_batch=2, global_batch=12, dp_overlap=0, mfu=0.5)
    Traceback (most recent call last):
    ...
    ValueError: global_batch must be a positive multiple of dp x micro_batch = 8 sequences, got 12
    """
    mfu = _checks.fraction("mfu", mfu, zero_ok=False)
    dp_overlap = _checks.fraction("dp_overlap", dp_overlap, zero_ok=True)
    batch = _checks.integer("global_batch", global_batch)
    if batch % (dp * micro_batch):
        raise ValueError(f"global_batch must be a positive multiple of dp x micro_batch = {dp * micro_batch} "
                         f"sequences, got {batch!r}")
    return Schedule(global_batch=batch, dp_overlap=dp_overlap, mfu=mfu)


@dataclass(frozen=True)
class Phase:
    """The communication of one parallelism in a step.

    ``calls`` collectives of ``op`` on ``bytes`` each (nccl-tests sizes), ``per_call``
    seconds each with every group at once; ``total`` = calls x per_call; ``exposed`` the
    part on the critical path (s); ``groups`` and ``group_size``; ``bottleneck`` the links
    that set the first step's time (:class:`flowsolver.routing.Bottleneck` records, most
    utilised first).
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
        """Seconds of all calls, exposed or hidden."""
        return self.calls * self.per_call

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the link that holds this phase back most (``""`` if none)."""
        return first_tier(self.bottleneck)


@dataclass(frozen=True)
class StepResult:
    """Result of :func:`flowsolver.training_step`; times in seconds, rates in tokens/s.

    ``profile`` (:class:`CommProfile`, the collectives solved once) and ``schedule``
    (:class:`Schedule`: global batch, DP overlap, MFU) are the inputs; the step is
    :func:`compose` of them. ``phases`` maps each communicating parallelism to its
    :class:`Phase`; ``breakdown`` maps compute, bubble, tp, pp, ep, dp to their share of
    ``step_time`` (the communication entries are the exposed parts): the values add up to
    ``step_time``. ``comm_overhead`` = exposed communication / step time; ``speedup`` =
    tokens/s against one GPU of the same type computing alone at the same MFU.
    ``memory_per_gpu`` (bytes) is :func:`flowsolver.training.memory_per_gpu`'s estimate;
    ``fits`` compares it with the GPU's memory. The step is timed whether or not it fits.
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
    achieved_mfu: float
    memory_per_gpu: float

    model = property(lambda self: self.profile.model.name, doc="The model's name.")
    gpus = property(lambda self: self.profile.layout.gpus, doc="GPU count.")
    tp = property(lambda self: self.profile.layout.tp, doc="Tensor parallel degree.")
    pp = property(lambda self: self.profile.layout.pp, doc="Pipeline parallel degree (stages).")
    dp = property(lambda self: self.profile.layout.dp, doc="Data parallel degree.")
    ep = property(lambda self: self.profile.layout.ep, doc="Expert parallel degree.")
    micro_batch = property(lambda self: self.profile.micro_batch, doc="Sequences per microbatch.")
    zero = property(lambda self: self.profile.zero, doc="ZeRO stage.")
    global_batch = property(lambda self: self.schedule.global_batch, doc="Sequences per step.")
    dp_overlap = property(lambda self: self.schedule.dp_overlap, doc="Fraction of the overlap window used.")
    mfu = property(lambda self: self.schedule.mfu, doc="Fraction of the bf16 peak reached while computing.")
    gpu_memory = property(lambda self: self.profile.gpu.memory, doc="Bytes of memory per GPU.")

    @property
    def tokens_per_step(self) -> float:
        """Tokens per step: global batch x sequence length."""
        return float(self.schedule.global_batch * self.profile.model.seq_len)

    @property
    def fits(self) -> bool:
        """Whether the estimated ``memory_per_gpu`` fits the GPU's memory (bytes)."""
        return self.memory_per_gpu <= self.gpu_memory

    @property
    def breakdown(self) -> dict:
        """Seconds of the step per part: compute, bubble, then each phase's exposed time."""
        out = dict(compute=self.compute_time, bubble=self.bubble_time)
        out.update({k: p.exposed for k, p in self.phases.items()})
        return out

    @property
    def bottleneck(self) -> tuple:
        """The bottleneck links of the phase with the largest exposed time (the first of
        tp, pp, ep, dp on a tie); ``()`` without communication."""
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
        from ..collectives._sensitivity import sensitivity_table
        from ._sensitivity import step_directional, step_gradient

        if not self.phases:
            raise ValueError("sensitivity: this step communicates nothing, so no link changes its time")
        links = next(iter(self.profile.comms.values())).result.links
        return sensitivity_table(links, self.step_time, lambda s: step_gradient(self, s),
                                 lambda dc, s: step_directional(self, dc, s), side)

    def recompose(self, *, global_batch: int | None = None, dp_overlap: float | None = None,
                  mfu: float | None = None) -> "StepResult":
        """The same job with another global batch (sequences), DP overlap or MFU, without
        solving again: :func:`compose` of the stored profile and the new schedule (collective
        sizes do not depend on these, so each keeps its per-call time)."""
        s = self.schedule
        schedule = checked_schedule(dp=self.dp, micro_batch=self.micro_batch,
                                    global_batch=s.global_batch if global_batch is None else global_batch,
                                    dp_overlap=s.dp_overlap if dp_overlap is None else dp_overlap,
                                    mfu=s.mfu if mfu is None else mfu)
        return compose(self.profile, schedule)

    def to_dataframe(self):
        """The phases as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        rows = [dict(phase="compute", op="", algorithm="", bytes=0.0, calls=self.microbatches,
                     per_call=self.compute_time / self.microbatches, total=self.compute_time,
                     exposed=self.compute_time, tier=""),
                dict(phase="bubble", op="", algorithm="", bytes=0.0, calls=self.pp - 1, per_call=0.0,
                     total=self.bubble_time, exposed=self.bubble_time, tier="")]
        rows += [dict(phase=p.name, op=p.op, algorithm=p.algorithm, bytes=p.bytes, calls=p.calls,
                      per_call=p.per_call, total=p.total, exposed=p.exposed, tier=p.bottleneck_tier)
                 for p in self.phases.values()]
        return pd.DataFrame(rows)


def _phase(comm, op, calls, exposed, per_call) -> Phase:
    return Phase(name=comm.name, op=op, algorithm=comm.algorithm, bytes=comm.bytes, calls=calls, per_call=per_call,
                 exposed=exposed, groups=comm.groups, group_size=comm.group_size, bottleneck=comm.bottleneck)


def _critical_phases(comms: dict, layers: float, m: int, pp: int) -> dict:
    """TP, PP and EP phases: every call on the critical path. Per layer and microbatch 4
    TP all-reduces (Megatron: two forward, two backward) and 4 EP all-to-alls (dispatch and
    combine, forward and backward); ``2 (m + pp - 1)`` stage-boundary sends in 1F1B."""
    calls = dict(tp=4 * layers * m, pp=2 * (m + pp - 1), ep=4 * layers * m)
    ops = dict(tp="all_reduce", pp="send_recv", ep="all_to_all")
    return {k: _phase(comms[k], ops[k], calls[k], calls[k] * comms[k].per_call, comms[k].per_call)
            for k in ("tp", "pp", "ep") if k in comms}


def _dp_phases(comms: dict, zero: int, m: int, t_mb: float, dp_overlap: float) -> dict:
    """DP phases, dense gradients first then the experts', sharing one overlap window.

    ``zero = 3`` (FSDP): every microbatch gathers the parameters forward and backward and
    reduce-scatters the gradients, hidden behind ``dp_overlap`` of its compute. Otherwise
    one all-reduce (``zero = 0``) or reduce-scatter + all-gather of the gradients, hidden
    behind ``dp_overlap`` of the last microbatch's backward pass (2/3 of its compute): the
    window DDP and Megatron's overlapped gradient reduction use."""
    phases = {}
    if zero == 3:
        window = dp_overlap * t_mb
        for k in (k for k in ("dp", "dp_experts") if k in comms):
            per_mb = comms[k].per_call + 2 * comms[k].gather
            phases[k] = _phase(comms[k], "reduce_scatter+all_gather", 3 * m, m * max(0.0, per_mb - window),
                               per_mb / 3)
            window = max(0.0, window - per_mb)
        return phases
    window = dp_overlap * (2.0 / 3.0) * t_mb
    op, calls = ("all_reduce", 1) if zero == 0 else ("reduce_scatter+all_gather", 2)
    for k in (k for k in ("dp", "dp_experts") if k in comms):
        total = comms[k].per_call + comms[k].gather
        phases[k] = _phase(comms[k], op, calls, max(0.0, total - window), total / calls)
        window = max(0.0, window - total)
    return phases


def compose(profile: CommProfile, schedule: Schedule) -> StepResult:
    """The step from a solved profile and a schedule (pure arithmetic, no solving).

    Compute: ``m = global_batch / (dp micro_batch)`` microbatches per stage, each
    ``micro_batch x seq_len x F / (tp pp)`` FLOPs at ``mfu x`` the GPU's dense bf16 peak;
    the 1F1B bubble is ``pp - 1`` microbatch times; ``step_time`` = compute + bubble +
    exposed communication.

    >>> import topologies as tp
    >>> from flowsolver import training_step
    >>> r = training_step(tp.rail_optimized(2), model="llama-3-8b", tp=8, global_batch=16)
    >>> again = compose(r.profile, Schedule(global_batch=16, dp_overlap=1.0, mfu=r.mfu))
    >>> again.step_time == r.step_time, compose(r.profile, Schedule(64, 1.0, r.mfu)).microbatches
    (True, 32)
    """
    model, lay = profile.model, profile.layout
    peak = profile.gpu.peak_bf16_flops
    m = schedule.global_batch // (lay.dp * profile.micro_batch)
    rate = peak * schedule.mfu
    t_mb = profile.micro_batch * model.seq_len * model.flops_per_token / (lay.tp * lay.pp) / rate
    compute, bubble = m * t_mb, (lay.pp - 1) * t_mb
    phases = {**_critical_phases(profile.comms, model.layers / lay.pp, m, lay.pp),
              **_dp_phases(profile.comms, profile.zero, m, t_mb, schedule.dp_overlap)}
    exposed = sum(p.exposed for p in phases.values())
    step = compute + bubble + exposed
    tps = schedule.global_batch * model.seq_len / step
    single = rate / model.flops_per_token
    memory = memory_per_gpu(model, tp=lay.tp, pp=lay.pp, dp=lay.dp, ep=lay.ep, zero=profile.zero,
                            micro_batch=profile.micro_batch, microbatches=m)
    return StepResult(profile=profile, schedule=schedule, microbatches=m, compute_time=compute, bubble_time=bubble,
                      phases=phases, step_time=step, tokens_per_s=tps, single_gpu_tokens_per_s=single,
                      speedup=tps / single, comm_overhead=exposed / step,
                      achieved_mfu=tps * model.flops_per_token / (lay.gpus * peak), memory_per_gpu=memory)
