"""What communication hidden beside the compute takes from it: NCCL's kernels hold SMs (one CTA
a channel) and HBM bandwidth while DP / FSDP collectives and the CP ring's sends run under the
layers (:func:`~flowsolver.training._exposed.overlap_cost`; units: s)."""

from __future__ import annotations

from ._exposed import NCCL_HBM_PASSES, overlap_cost
from ._profile import CommProfile

__all__ = ["dp_overlap_costs", "cp_ring_sm_share"]


def _sms(gpu) -> int:
    """The GPU's SM count (:data:`~flowsolver.training._kernels.SMS`), 0 where it has no kernel family."""
    from ._kernels import SMS, kernel_family

    return SMS.get(kernel_family(gpu), 0)


def dp_overlap_costs(profile: CommProfile, parts: dict) -> dict:
    """``{name: (per_call, gather)}``: the seconds of compute each DP collective of ``profile``
    (``dp``, ``dp_experts``, ``dp_gather``, ``dp_reduce``) and its all-gather take from the
    compute they run beside (:func:`~flowsolver.training._exposed.overlap_cost`): its CTAs, one per
    channel NCCL runs (the solved collective's ``channels_run``; 0 where nothing was solved, as
    plan's bound), over the GPU's SMs (:data:`~flowsolver.training._kernels.SMS`; none where the GPU
    has no kernel family: its SM count is not known), and its
    :data:`~flowsolver.training._exposed.NCCL_HBM_PASSES` x the bytes each rank receives
    (``(n - 1) / n`` of the nccl-tests size; twice that for an all-reduce) at the achieved HBM
    bandwidth, shared by the memory-bound ``memory / layer`` of the compute (the kernel tables'; the
    flat model has none: all of its compute runs on the SMs). ``parts``: :func:`~._compose.layer_compute`'s.

    >>> import topologies as tp
    >>> from flowsolver import training_step, Parallelism, Schedule
    >>> r = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8, zero=1), Schedule(global_batch=16))
    >>> from ._compose import layer_compute
    >>> c = dp_overlap_costs(r.profile, layer_compute(r.profile, r.schedule))
    >>> list(c), 0 < c["dp"][0] < r.profile.comms["dp"].per_call
    (['dp'], True)
    """
    from ._kernels import memory_fraction

    gpu = profile.gpu
    sms = _sms(gpu)
    hbm = memory_fraction(gpu) * gpu.hbm_bandwidth if sms and gpu.hbm_bandwidth > 0 else 0.0
    memory_share = min(1.0, parts.get("memory", 0.0) / parts["layer"]) if parts["layer"] > 0 else 0.0

    def cost(seconds, solved, size, op, n):
        ctas = getattr(solved, "channels_run", 0) if solved is not None else 0
        moved = NCCL_HBM_PASSES * size * (n - 1) / n * (2.0 if op == "all_reduce" else 1.0)
        if op == "all_reduce" and (solved is None or getattr(solved, "algorithm", "") in ("nvls", "nvls_tree")):
            # NVLink SHARP reduces in the switch (multimem ld_reduce, then st of the result): each
            # GPU's buffer is read once and the result written once, 2 x size, no FIFO passes
            # (review21 F5: the ring's 3 passes of 2 (n - 1) / n were charged); unsolved (plan's
            # bound, which must not exceed the step) the least any algorithm moves, the same
            moved = 2.0 * size
        return overlap_cost(seconds, sm_share=min(1.0, ctas / sms) if sms else 0.0,
                            hbm_seconds=moved / hbm if hbm else 0.0, memory_share=memory_share)

    out = {}
    for name in ("dp", "dp_experts", "dp_gather", "dp_reduce"):
        if name in profile.comms:
            c = profile.comms[name]
            gather_size = c.bytes * profile.gather_bytes / profile.reduce_bytes
            out[name] = (cost(c.per_call, c.result, c.bytes, c.op, c.group_size),
                         cost(c.gather, c.gather_result, gather_size, "all_gather", c.group_size) if c.gather else 0.0)
    return out


def cp_ring_sm_share(profile: CommProfile) -> float:
    """The share of a GPU's SMs the CP ring's NCCL send / receive kernels hold while a step's
    KV chunk moves (:func:`~flowsolver.training._exposed.cp_ring_exposed`): one CTA per channel
    NCCL runs (the solved ``cp_step``'s ``channels_run``) over the GPU's SMs
    (:data:`~flowsolver.training._kernels.SMS`); 0 without CP, where nothing was solved (plan's
    bound) or where the GPU has no kernel family (its SM count not known), as
    :func:`dp_overlap_costs`.

    >>> import topologies as tp
    >>> from flowsolver import training_step, Parallelism, Schedule
    >>> r = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8, cp=2), Schedule(global_batch=8))
    >>> r.profile.comms["cp_step"].result.channels_run / 132 == cp_ring_sm_share(r.profile)
    True
    """
    c = profile.comms.get("cp_step")
    sms = _sms(profile.gpu)
    if c is None or c.result is None or not sms:
        return 0.0
    return min(1.0, getattr(c.result, "channels_run", 0) / sms)
