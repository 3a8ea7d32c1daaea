"""One collective (or one per rank group, in lockstep) on a graph: candidate schedules, batched
solving (``"auto"``'s rounds and pick: :mod:`._choice`), results. A graph's variants: :mod:`._variants`."""

from __future__ import annotations

import functools

from dataclasses import dataclass, replace

import numpy as np

from .. import _checks
from .._status import Status
from ..routing import gpu_nodes, unchanged
from ._calibration import checked_model
from ._lockstep import row_groups
from ._allowed import only_of
from ._hardware import nvlink_edges
from ._layout import edge_index
from ._p2p import channels_run, least_transfer
from ._algorithms import NCCL_ALGORITHMS
from ._nccl import DEFAULT_CHUNK, busbw_factor
from ._options import (CollectiveOptions, Options, check_call, check_efficiency_keys, check_split, communicator_options,
                       merged_options)
from ._results import CollectiveResult, Derivation, TunedFormula
from ._solve import Job, TimedScenario, time_many
from ._nccl_timing import (lazy_net_cells, slow_paths_of, steady_parts, steady_transfer, transfer_of, tuned_time,
                           tuned_times)
from ._choice import _FirstRound, _auto_first, _auto_rest, _pick, is_tuned
from ._planned import Planned, _plans

__all__ = ["collective", "solve_collective", "solve_collectives", "Call", "Planned"]

_STALLED = ("a collective step cannot complete: one of its flows crosses a failed (zero-capacity) link on "
            "every path")


@dataclass(frozen=True)
class Call:
    """One collective to solve (:func:`solve_collectives`): ``op``, ``size`` (bytes), the
    ``rank_groups`` run in lockstep (each a sequence of GPU ranks, or None: every GPU), the
    ``algorithm`` (or ``"auto"``), its :class:`~._options.Options` and calibration ``model``."""

    op: str
    size: float
    rank_groups: list
    algorithm: str
    options: Options
    model: object = None


def _lazy_nvlinks(graph, ranks):
    """A function of no arguments giving the indices (graph edge order) of every group's NVLink
    edges (:func:`~._hardware.nvlink_edges`), found on its first call only: a derivative asks
    for them, and a 16,384-GPU training step's results spent 0.3 s of each call finding them.
    The GPUs and the edge index are taken now, while the caller holds the graph unchanged (taken
    later, each look-up of the graph's index hashed the whole graph again: 130 s for a goodput
    study's 16,384 ranks)."""
    nodes = gpu_nodes(graph)
    gpus, index = [nodes[r] for r in ranks], edge_index(graph)
    return functools.cache(lambda: tuple(index[e] for e in nvlink_edges(graph, gpus)))


def _derivation(graph, ranks, p, results, best, proto, rivals, hw, call: Call, table) -> Derivation:
    """What the result's derivatives are computed from: the chosen algorithm's solved steps
    and, where NCCL's cost model set the time, its formula on the ring's and the algorithm's
    own flow solves and the NVLink bandwidth (``p`` ranks per group)."""
    op, size, options, model = call.op, call.size, call.options, call.model
    solved_on, cap = results[best].solved_on, results[best].capacity
    why_not = "" if not rivals else (
        f"NCCL's cost model times {best}/{proto} and {', '.join(rivals)} alike: which one NCCL picks after a change "
        "depends on its sign and size (time one of them with algorithm= and protocol=)")
    ring = results.get("ring")
    runs = {id(r): r for r in (results[best].run, None if ring is None else ring.run) if r is not None}
    cache = {"runs": list(runs.values())}           # the forward's events, reused by the derivatives
    if not is_tuned(best, op, options):
        p2p, gpu_time = None, results[best].time
        if hw.p2p is not None:          # a send: its P2P channels' least transfer beside the flows'
            least, solved = least_transfer(hw, size, model), transfer_of(results[best].steps)
            p2p, gpu_time = (least, solved), gpu_time + max(0.0, least - solved)
        if options.host_floor > gpu_time:
            why_not = (f"the time is the host's floor ({options.gpus_per_thread} GPUs a thread x NCCL's per-call "
                       "host cost), which no link changes")
        return Derivation(solved_on, cap, table.capacity, cache=cache, why_not=why_not, p2p=p2p)
    steps = results[best].steps
    ring_steps = results["ring"].steps
    formula = TunedFormula(
        formula=lambda ring, own, nvlink, net=hw.net_bw: tuned_time(best, proto, op, size, p, ring, own,
                                                                    replace(hw, nvlink_bw=nvlink, net_bw=net),
                                                                    options, model, slow_paths_of(steps))[0],
        ring=results["ring"].solved_on, own=tuple((*solved_on[i][:2], m) for i, m in steady_parts(steps)),
        values=(transfer_of(ring_steps), steady_transfer(steps), hw.nvlink_bw, hw.net_bw),
        nvlink=_lazy_nvlinks(graph, ranks) if hw.nvlink_bw > 0 else (),
        net=lazy_net_cells(graph, call.rank_groups) if hw.net_bw > 0 else ())
    return Derivation(solved_on, cap, table.capacity, cache=cache, why_not=why_not, tuned=formula)


def solve_collective(graph, op, size, rank_groups, algorithm, options: Options, model=None) -> list:
    """One collective per rank group, the groups in lockstep (step ``j`` of every group runs
    at the same time; one group is :func:`collective`), on ``graph``: one :class:`CollectiveResult`
    (a list, as :func:`solve_collectives` gives it). Variants of a graph: :mod:`._variants`."""
    options = communicator_options(op, rank_groups, options)
    return solve_collectives(graph, [Call(op, size, rank_groups, algorithm, options, model)])


def solve_collectives(graph, calls) -> list:
    """:func:`solve_collective` for several collectives on one graph, ``calls`` of
    :class:`Call` (each its groups in lockstep), one
    :class:`CollectiveResult` each: what each solves first (every candidate, or ``"auto"``'s
    first round) is routed per collective and solved together in one batched call (per link
    efficiency); ``"auto"``'s second round, when a pruned candidate could still win, apart."""
    calls = [replace(c, options=communicator_options(c.op, c.rank_groups, c.options)) for c in calls]
    with unchanged(graph):          # laid out and every step routed on one index of the graph
        planned = [_plans(graph, c.op, c.size, c.rank_groups, c.algorithm, c.options) for c in calls]
        firsts = []
        for c, pl in zip(calls, planned):
            auto = c.algorithm == "auto" and len(pl.plans) > 1
            firsts.append(_auto_first(graph, pl.ranks, pl.plans, c.options, c.model) if auto else
                          _FirstRound(list(pl.plans)))
        timed_first: dict = {}
        by_efficiency: dict = {}
        for i, c in enumerate(calls):
            by_efficiency.setdefault(repr(c.options.efficiency), []).append(i)
        for members in by_efficiency.values():
            jobs = [Job(planned[i].ranks, {a: planned[i].plans[a] for a in firsts[i].solve}, calls[i].options)
                    for i in members]
            for i, timed in zip(members, time_many(graph, jobs)):
                timed_first[i] = timed
        out = []
        for i, (c, pl, first) in enumerate(zip(calls, planned, firsts)):
            scenario, = timed_first[i]
            pruned: dict = {}
            if first.bounds is not None:
                tune = lambda results, c=c, pl=pl: \
                    tuned_times(c.op, c.size, pl.p, results, pl.hw, c.options, c.model)  # noqa: E731
                scenario, pruned = _auto_rest(graph, pl.ranks, pl.plans, c.options, tune, first.bounds, first.order,
                                              scenario.links, scenario.results)
            # groups NCCL sees unlike (2 x 4 GPUs beside 1 x 8) each take their own time: the
            # lockstep waits for the slowest
            out.append(max((_result(graph, c, pl, scenario, pruned, hw) for hw in pl.hws or (pl.hw,)),
                           key=lambda r: r.time))
    return out


def _result(graph, call: Call, planned: Planned, scenario: TimedScenario, pruned, hw,
            stalled_message: str = _STALLED) -> CollectiveResult:
    """The CollectiveResult of one scenario of ``call`` from its timed candidates
    (``stalled_message``: what a STALLED one says)."""
    op, size, p, results, table = call.op, call.size, planned.p, scenario.results, scenario.links
    only = only_of(call.algorithm)
    pick = _pick(op, size, p, results, hw, call.options, call.model, only)
    derivation = _derivation(graph, planned.ranks, p, results, pick.algorithm, pick.protocol, pick.rivals, hw, call,
                             table)
    total = pick.time
    stalled = not np.isfinite(total)
    algbw = 0.0 if stalled else float(size) / total
    return CollectiveResult(op=op, algorithm=pick.algorithm, size=float(size), ranks=p, time=total, algbw=algbw,
                            busbw=algbw * busbw_factor(op, p), steps=pick.steps, link_utilization=pick.utilization,
                            links=table, candidates=pick.candidates, pruned=dict(pruned),
                            status=Status.STALLED if stalled else Status.OK,
                            message=stalled_message if stalled else "", protocol=pick.protocol,
                            channels=hw.p2p.channels(size) if getattr(hw, "p2p", None) is not None else hw.channels,
                            channels_run=channels_run(pick.algorithm, pick.protocol, size, p, hw),
                            nccl=pick.algorithm in NCCL_ALGORITHMS[op], choices=pick.choices,
                            estimates=pick.estimates, solved_on=derivation)


def _gathered(entry, fn, options, values: dict):
    """The :class:`Options` and calibration of a call to ``fn`` (``entry`` its name) from its
    option keywords ``values`` or its ``options`` (a :class:`CollectiveOptions`)."""
    kw = merged_options(entry, options, values, {k: fn.__kwdefaults__[k] for k in values})
    return Options(policy=kw["policy"], policy_options=dict(kw["policy_options"] or {}), pxn=kw["pxn"],
                   protocol=kw["protocol"], chunk=kw["chunk"], efficiency=kw["efficiency"],
                   step_latency=kw["step_latency"], base_latency=kw["base_latency"], channels=kw["channels"],
                   nvls_channels=kw.get("nvls_channels"), nccl_version=kw.get("nccl_version"),
                   tuner=kw["step_latency"] is None, candidates=kw["candidates"],
                   gpus_per_thread=kw["gpus_per_thread"], host_overhead=kw["host_overhead"],
                   redop=kw.get("redop", "sum"), dtype=kw.get("dtype", "float")), kw["model"]


def collective(graph, op: str, size: float, *, ranks=None, algorithm: str = "auto",
               policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
               pxn: bool = True, protocol: str = "auto", chunk: float = DEFAULT_CHUNK,
               efficiency=None, step_latency: float | None = None,
               base_latency: float | None = None, candidates: str = "nccl", model=None,
               gpus_per_thread: int = 1, host_overhead: float = 0.0, redop: str = "sum", dtype: str = "float",
               nvls_channels: int | None = None, nccl_version: str | None = None,
               options: CollectiveOptions | None = None) -> CollectiveResult:
    """Time a collective on a cluster graph.

    Parameters
    ----------
    graph : networkx.DiGraph
    op : str
        One of ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``,
        ``broadcast``, ``reduce``, ``send_recv``.
    size : float
        Bytes, as nccl-tests counts them for ``op`` (see :mod:`flowsolver.collectives`).
    ranks : sequence of int, optional
        GPU ranks taking part, in order (placement); default every GPU. The first rank is
        the root of broadcast / reduce and the sender of send/recv, which times the one pair
        ``ranks[0] -> ranks[1]`` in the communicator of all the ranks (further ranks move no
        data but set NCCL's channels a peer: a pair in a larger communicator across nodes
        runs on fewer channels; nccl-tests' ``sendrecv_perf`` on N ranks is a ring shift,
        every rank sending to the next at once, set by its slowest pair: give that pair first).
    algorithm : str or list of str
        ``"auto"``: NCCL's choice, the (algorithm, protocol) of least time under NCCL's cost
        model among what NCCL runs (``NCCL_ALGORITHMS[op]``) on these ranks; one of
        ``ALGORITHMS[op]``; or several: the choice among them (``NCCL_ALGO=Ring,Tree`` is
        ``["ring", "tree"]``; names that do not run ``op`` are dropped, none left is an error).
    policy, policy_options, pxn
        Routing policy (``flowsolver.POLICIES``) and its options (``subflows``, ``seed``); PXN for cross-rail hops.
    channels : int in 1 ... 64, optional
        NCCL's ring and tree channels (default: as NCCL sets them from the hardware,
        :func:`~flowsolver.collectives.nccl_channels`) and the rings of the flow solve
        (default: NICs per server when the ranks span servers, else 1): what
        ``NCCL_MIN_NCHANNELS`` = ``NCCL_MAX_NCHANNELS`` = ``channels`` set. NVLS and NVLSTree
        keep NCCL's own NVLS channels (16 on Hopper, 24 on Blackwell in one NVLink domain, 32
        across nodes), which those settings leave alone (NCCL bounds them by ``NCCL_MIN_CTAS``
        / ``NCCL_MAX_CTAS`` only): ``nvls_channels`` sets those.
    nvls_channels : int in 1 ... 64, optional
        NVLS's and NVLSTree's channels, as ``NCCL_NVLS_NCHANNELS`` sets them (default: NCCL's own,
        ``nvls.cc`` ``ncclNvlsTuning``). Fewer than NCCL's each move their share of NVLS's
        bandwidth among NCCL's count (one CTA a channel: never faster); more move no more.
    nccl_version : str, optional
        The NCCL release the call runs on (``"2.18"``, ``"2.18.3-1"``; default: NCCL as of 2.30,
        whose rules the model follows). Before 2.20 NCCL shrank a tree Simple all-reduce's
        chunk with the tree's depth (``calcCollChunking``): with an older release that rule
        times the tree's pipeline (:class:`~flowsolver.CollectiveOptions`). A release runs only
        the algorithms it has (no NVLS before 2.17, none for all-gather / reduce-scatter in 2.18,
        no NVLSTree before 2.18, no PAT before 2.23): ``algorithm=`` naming another is a ValueError.
    protocol : {"auto", "LL", "LL128", "Simple"} or a list of them
        NCCL protocol (``"auto"``: NCCL's choice by size; a list: its choice among those,
        ``NCCL_PROTO=^LL128`` is ``["LL", "Simple"]``). NCCL's latencies and per-protocol
        bandwidth factors and caps apply to ring, tree, NVLS, NVLSTree and PAT; the other
        algorithms take the protocol's per-step latency constants.
    candidates : {"nccl", "all"}
        What ``"auto"`` chooses from: what NCCL runs, or also the algorithms NCCL lacks
        (halving-doubling, hierarchical, pairwise, binomial): ``result.nccl`` says which won.
    model : Calibration, optional
        Fitted constants (:func:`flowsolver.calibrate`).
    options : CollectiveOptions, optional
        All of the options above in one record, instead of the keywords (not both).
    chunk : float
        Pipeline chunk of tree all-reduce and ring broadcast / reduce, bytes (default
        512 KiB: NCCL's 4 MiB buffer over its 8 steps).
    efficiency : float in (0, 1] or dict, optional
        Fraction of the raw link rate reached (all links, or by tech: a key must be a
        technology of the catalogue or of the graph); default the catalogue's.
    step_latency, base_latency : float >= 0, optional
        Override the per-step latency (alpha, s; this turns NCCL's cost model off: a pure
        alpha-beta flow model) and the per-collective base latency (s).
    gpus_per_thread : int >= 1
        GPUs one host thread issues the collective for (nccl-tests ``-g N``; default 1, a
        process per GPU): above 1 the time is at least ``N x`` NCCL's per-call host cost
        (4.2 us; :class:`~flowsolver.CollectiveOptions`).
    host_overhead : float >= 0
        Seconds of host work added to the time (default 0): a call timed on its own from an
        idle device, e.g. ``flowsolver.collectives.TORCH_CALL_OVERHEAD`` for one
        ``torch.distributed`` call.
    redop, dtype : str
        The reduction op and data type, nccl-tests' ``-o`` / ``-d`` names (default ``"sum"``,
        ``"float"``): NCCL's NVLS and NVLSTree reduce only what the NVSwitch reduces (Sum of
        float and double; Sum, min or max of half, bfloat16, 32 / 64-bit integers; an avg is
        a scaled sum, none of these), and its PAT reduce-scatter no avg.

    A collective whose flows cannot complete (a failed link on every path) raises
    ValueError; so does an option outside its range, before any work.

    Examples
    --------
    >>> import topologies as tp
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32, algorithm="ring")
    >>> round(r.busbw / 1e9), r.bottleneck_tier, r.protocol, r.channels   # NVLink 4 at NCCL's 20.6 GB/s per link
    (365, 'nvlink', 'Simple', 24)
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32)
    >>> r.algorithm, round(r.busbw / 1e9)        # in-switch reduction (measured ~480 GB/s)
    ('nvls', 484)
    >>> r = collective(tp.rail_optimized(nodes=2), "all_reduce", 1024)
    >>> r.algorithm, r.protocol, round(r.time * 1e6, 1)   # NCCL's pick; its estimate 25.2 us, + the network hops' steps
    ('tree', 'LL', 27.7)
    """
    options, model = _gathered("collective", collective, options, dict(
        policy=policy, policy_options=policy_options, channels=channels, pxn=pxn, protocol=protocol, chunk=chunk,
        efficiency=efficiency, step_latency=step_latency, base_latency=base_latency, candidates=candidates,
        model=model, gpus_per_thread=gpus_per_thread, host_overhead=host_overhead, redop=redop, dtype=dtype,
        nvls_channels=nvls_channels, nccl_version=nccl_version))
    return collective_with(graph, op, size, ranks, algorithm, options, model)


def collective_with(graph, op, size, ranks, algorithm, options: Options, model=None,
                    as_tested: bool = False) -> CollectiveResult:
    """:func:`collective` with its options already gathered in an :class:`Options`; ``as_tested``:
    the rank groups nccl-tests' test of ``op`` runs on ``ranks`` in lockstep (:func:`~._lockstep.row_groups`:
    a send / receive is its ring shift)."""
    algorithm = check_call(op, algorithm, size, options, several=True)
    _checks.checked_graph(graph)
    check_efficiency_keys(options.efficiency, [graph])
    if checked_model(model, graph) is not None:
        options = model.apply(options)
    groups = row_groups(graph, op, ranks) if as_tested else [ranks]
    check_split(op, size, len(gpu_nodes(graph)) if groups[0] is None else len(groups[0]), options)
    result, = solve_collective(graph, op, float(size), groups, algorithm, options, model=model)
    if result.status != Status.OK:
        raise ValueError(result.message)
    return result
