"""The communication phases of a step: how many calls of each solved collective a step
makes and how much of them the schedule hides (pure arithmetic on a profile)."""

from __future__ import annotations

from dataclasses import dataclass

from ..routing import first_tier
from ._pipeline import critical_sends

__all__ = ["Phase", "microbatch_phases", "pipeline_phase", "dp_phases"]


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


def _phase(comm, op, calls, exposed, per_call) -> Phase:
    return Phase(name=comm.name, op=op, algorithm=comm.algorithm, bytes=comm.bytes, calls=calls, per_call=per_call,
                 exposed=exposed, groups=comm.groups, group_size=comm.group_size, bottleneck=comm.bottleneck)


def microbatch_phases(comms: dict, *, layers: int, tp_overlap: float, attention_seconds: float) -> dict:
    """TP, CP and EP phases of ONE microbatch through a stage of ``layers`` layers.

    * TP (Megatron): 4 all-reduces per layer (two forward, two backward); with sequence
      parallelism each is a reduce-scatter + all-gather. ``tp_overlap`` of them hides behind
      the GEMMs (Transformer Engine's userbuffers overlap), the rest is exposed.
    * CP (ring attention): 3 ring all-gathers of KV per layer (forward KV, backward KV and
      the KV gradients), hidden behind the layer's attention compute (``attention_seconds``
      per layer), the excess exposed.
    * EP: 4 all-to-alls per MoE layer (dispatch and combine, forward and backward), exposed.
    """
    out = {}
    if "tp" in comms:
        c = comms["tp"]
        if c.op == "reduce_scatter":
            calls, per_call, op = 8 * layers, (c.per_call + c.gather) / 2, "reduce_scatter+all_gather"
        else:
            calls, per_call, op = 4 * layers, c.per_call, "all_reduce"
        out["tp"] = _phase(c, op, calls, (1.0 - tp_overlap) * calls * per_call, per_call)
    if "cp" in comms:
        c = comms["cp"]
        exposed = layers * max(0.0, 3 * c.per_call - attention_seconds)
        out["cp"] = _phase(c, "all_gather", 3 * layers, exposed, c.per_call)
    if "ep" in comms:
        c = comms["ep"]
        out["ep"] = _phase(c, "all_to_all", 4 * layers, 4 * layers * c.per_call, c.per_call)
    return out


def pipeline_phase(comms: dict, *, pp: int, vp: int, microbatches: int) -> dict:
    """The PP phase: stage-boundary sends, ``vp x`` as many with interleaving, those on the
    critical path exposed (:func:`flowsolver.training._pipeline.critical_sends`)."""
    if "pp" not in comms:
        return {}
    c = comms["pp"]
    calls = 2 * microbatches * vp + 2 * (pp - 1)
    return {"pp": _phase(c, "send_recv", calls, critical_sends(pp, vp, microbatches) * c.per_call, c.per_call)}


def dp_phases(comms: dict, *, zero: int, m: int, t_mb: float, dp_overlap: float, chunks: int, pp: int = 1,
              vp: int = 1) -> dict:
    """DP phases, dense gradients first then the experts', sharing the overlap windows.

    ``zero = 3`` (FSDP): every microbatch gathers the parameters forward and backward and
    reduce-scatters the gradients, hidden behind ``dp_overlap`` of its compute. Otherwise
    the gradients are reduced bucket by bucket during the last microbatch's backward pass
    (2/3 of ``t_mb``) and, with the distributed optimizer (``zero`` 1 / 2), the updated
    parameters are all-gathered bucket by bucket during the next step's first forward pass
    (1/3 of ``t_mb``), each window scaled by ``dp_overlap``. With ``vp`` interleaved model
    chunks the windows stretch to ``1 + (vp - 1) pp / vp`` of these: a stage's chunks run
    their last backward (first forward) about ``pp`` chunk-slots apart, so the first chunk's
    gradients are final (the last chunk's parameters needed) that much earlier (later)
    than the stage's last backward (first forward). One bucket of each (of
    ``chunks``: a layer, or a virtual stage's layers with pipelining) is always exposed:
    Megatron's chunked DP overlap "exposes only one DP communication chunk"
    (Megatron-Bridge docs, Communication Overlap).
    """
    phases = {}
    keys = [k for k in ("dp", "dp_experts") if k in comms]
    if zero == 3:
        window = dp_overlap * t_mb
        for k in keys:
            per_mb = comms[k].per_call + 2 * comms[k].gather
            phases[k] = _phase(comms[k], "reduce_scatter+all_gather", 3 * m, m * max(0.0, per_mb - window),
                               per_mb / 3)
            window = max(0.0, window - per_mb)
        return phases
    stretch = 1.0 + (vp - 1) * pp / vp          # interleaved: chunks finish / start pp slots apart
    backward, forward = dp_overlap * (2.0 / 3.0) * t_mb * stretch, dp_overlap * (1.0 / 3.0) * t_mb * stretch
    op, calls = ("all_reduce", 1) if zero == 0 else ("reduce_scatter+all_gather", 2)
    for k in keys:
        reduce, gather = comms[k].per_call, comms[k].gather
        exposed = max(reduce / chunks, reduce - backward)
        backward = max(0.0, backward - reduce)
        if gather:
            exposed += max(gather / chunks, gather - forward)
            forward = max(0.0, forward - gather)
        phases[k] = _phase(comms[k], op, calls, exposed, (reduce + gather) / calls)
    return phases
