"""A collective's candidate schedules laid out on its rank groups (:func:`_plans`): the
algorithms that can run there, their steps per group (merged in lockstep) and NCCL's view of
the ranks."""

from __future__ import annotations

from dataclasses import dataclass

from ._algorithms import ALGORITHMS, NCCL_ALGORITHMS, TUNED_OPS, algorithm_of
from ._allowed import only_of
from ._choice import is_tuned
from ._hardware import laid_out, sharing_nics
from ._layout import without_nvls
from ._lockstep import merged
from ._nccl import PROTOCOLS
from ._nccl_timing import why_not_tuned
from ._p2p import nccl_view
from ._schedules import schedule

__all__ = ["Planned"]


@dataclass(frozen=True)
class Planned:
    """A call laid out (:func:`_plans`): all ``ranks`` (the groups' in order), ``p`` ranks per
    group, the steps of every candidate algorithm (``plans``), NCCL's view ``hw`` of the
    ranks, and the first group's ranks and RankLayout (``first``, ``layout``)."""

    ranks: list
    p: int
    plans: dict
    hw: object
    first: list
    layout: object
    hws: tuple = ()          # NCCL's view of each distinct group (the first's first)


def _pool(op, algorithm, options):
    if algorithm != "auto":
        return only_of(algorithm)
    return NCCL_ALGORITHMS[op] if options.tuner and options.candidates == "nccl" else ALGORITHMS[op]


def _why(a, op, p, layout, hw, options):
    """Why algorithm ``a`` cannot run here, or None."""
    algo = algorithm_of(a)
    if algo.derived(op):
        if not options.tuner:
            return "is timed by NCCL's cost model only (step_latency= turns it off)"
        return why_not_tuned(a, op, hw, options)
    if why := algo.why_unavailable(p, layout):
        return why
    if is_tuned(a, op, options):
        return why_not_tuned(a, op, hw, options)
    return None


def _check_threads(n, p, laid) -> None:
    """nccl-tests ``-g n``: one thread drives ``n`` GPUs of its process, on one server, and every
    process as many (ranks = processes x threads x n): ``n`` divides the GPUs the call has on
    each server (adv26 F3: 16 on two 8-GPU servers, 3 of 16 ranks were taken and slowed the call)."""
    per_server = sorted({len(g) for _, layout in laid for g in layout.groups})
    if p % n or any(k % n for k in per_server):
        on = ", ".join(map(str, per_server))
        raise ValueError(f"gpus_per_thread must divide the GPUs the call has on each server ({on} of its {p}: one "
                         f"nccl-tests thread drives -g of its process's GPUs on one server, every process as "
                         f"many), got {n}")


def _runnable(op, algorithm, p, distinct, options) -> list:
    """The algorithms of the call's pool that every ``(layout, NCCL's view)`` of ``distinct`` runs."""
    return [a for a in _pool(op, algorithm, options) if not any(_why(a, op, p, lay, own, options)
                                                                 for lay, own in distinct)]


def refusal(op, algorithm, p, distinct, options) -> str | None:
    """Why the call cannot run on groups of ``p`` ranks laid out and seen by NCCL as ``distinct``
    (``(layout, hw)`` pairs, the first group's first), or None: the algorithm named cannot run
    on one of them, or no algorithm of the call's pool runs on all. A communicator's own view
    (:func:`~flowsolver.collective_variants`' ``communicator="each"``) refuses on its own."""
    if isinstance(algorithm, str) and algorithm != "auto":
        for layout, own in distinct:
            if why := _why(algorithm, op, p, layout, own, options):
                return f"algorithm {algorithm!r} {why}"
        return None
    if _runnable(op, algorithm, p, distinct, options):
        return None
    hw = distinct[0][1]
    limited = "" if hw.protocols == PROTOCOLS else \
        f" (the network transport {hw.transport}'s NCCL settings run {', '.join(hw.protocols)} only)"
    among = "" if algorithm == "auto" else f" among {', '.join(only_of(algorithm))}"
    return f"no algorithm for {op}{among} can run on these ranks with protocol {options.protocol!r}{limited}"


def _plans(graph, op, size, rank_groups, algorithm, options) -> Planned:
    """All ranks (the groups' in order), the steps of every candidate algorithm (those NCCL
    times from the ring's flow solve get the ring's steps) and NCCL's view of the ranks."""
    laid = [laid_out(graph, op, ranks, options.channels) for ranks in rank_groups]
    p = len(laid[0][0])
    if any(len(r) != p for r, _ in laid):
        raise ValueError(f"groups run in lockstep must have equal sizes, got {sorted({len(r) for r, _ in laid})}")
    if options.gpus_per_thread > 1 and op != "send_recv":      # (sendrecv_perf -g 8: 8 GPUs, a pair each)
        _check_threads(options.gpus_per_thread, p, laid)
    ranks = [r for group, _ in laid for r in group]     # groups may share GPUs (a pipeline stage
    # sends to the next while it receives from the previous): their flows share links
    hw = nccl_view(graph, op, laid[0][0], laid[0][1], options, rank_groups[0])
    # groups laid out alike share one RankLayout; each distinct one has NCCL's view of its own
    distinct = [(layout, hw if layout is laid[0][1] else nccl_view(graph, op, group, layout, options, given))
                for given, group, layout in {id(lay): (r, g, lay) for r, (g, lay) in zip(rank_groups, laid)}.values()]
    hws = list({repr(h): h for _, h in distinct}.values())
    if len(laid) > 1:       # groups at once share the NICs of their servers (NVLSTree's network bound)
        hw, *hws = sharing_nics(graph, [g for g, _ in laid], options.efficiency, hw, *hws)
    forced = isinstance(algorithm, str) and algorithm != "auto"          # one algorithm named
    if why := refusal(op, algorithm, p, distinct, options):
        raise ValueError(why)
    names = _runnable(op, algorithm, p, distinct, options)
    if options.tuner and op in TUNED_OPS and any(algorithm_of(a).nccl_model for a in names) and "ring" not in names:
        names.append("ring")        # the graph's bus bandwidth
    chunk = float(options.chunk)
    plans = {}
    for a in names:
        sched = "ring" if algorithm_of(a).derived(op) else a
        # groups laid out alike share one RankLayout object (participants), and but for NVLS the
        # schedules do not read the NVSwitch domain (one per server)
        of = (lambda layout: layout) if algorithm_of(sched).reads_nvswitch else \
            (lambda layout: without_nvls(graph, layout))
        by_layout: dict = {}
        for _, layout in laid:
            if id(layout) not in by_layout:
                by_layout[id(layout)] = schedule(op, sched, p, size, of(layout), chunk)
        per_group = [by_layout[id(layout)] for _, layout in laid]
        plans[a] = per_group[0] if len(per_group) == 1 else merged(per_group, p)
        if plans[a] is None:                    # lockstep cannot run unlike schedules step for step
            if forced:
                raise ValueError(f"algorithm {a!r} runs a different schedule on groups laid out unlike (other "
                                 "servers or GPUs a server): lockstep=True needs them step for step; time them "
                                 "with lockstep=False (each on its own clock)")
            del plans[a]
    if not plans:
        raise ValueError(f"no algorithm for {op} runs the same schedule on every group: time groups laid out unlike "
                         "with lockstep=False")
    return Planned(ranks, p, plans, hw, laid[0][0], laid[0][1], tuple(hws))
