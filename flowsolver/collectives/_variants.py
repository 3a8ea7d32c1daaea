"""A collective on several graphs of one structure (:func:`collective_variants`): routed once,
solved for every graph in one batched call, each graph's NCCL view its own or the first's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import _checks
from .._status import Status
from ..routing import RoutingError, gpu_nodes, policy_of, unchanged
from ._collective import Call, _gathered, _result, solve_collectives
from ._hardware import describe, transport_settings
from ._nccl import DEFAULT_CHUNK
from ._options import CollectiveOptions, Options, check_call, check_efficiency_keys, check_split, communicator_options
from ._p2p import nccl_view
from ._planned import _plans, refusal
from ._results import CollectiveResult
from ._solve import time_plans

__all__ = ["collective_variants", "solve_variants"]


def solve_variants(op, size, rank_groups, algorithm, options: Options, variants, model=None,
                   communicator: str = "first") -> list:
    """One collective per rank group, the groups in lockstep, on each of the same-structure
    graphs ``variants``: one :class:`CollectiveResult` per graph (``communicator``:
    :func:`collective_variants`')."""
    options = communicator_options(op, rank_groups, options)
    call = Call(op, size, rank_groups, algorithm, options, model)
    variants = list(variants)
    if len(variants) > 1 and policy_of(options.policy).depends_on_load:
        # routes that follow the load (ugal) follow each variant's capacities: routed per variant;
        # one that cannot be routed (a server cut off) is timed on the shared routes: STALLED
        out = []
        for i, v in enumerate(variants):
            try:
                out.append(solve_collectives(v, [call])[0])
            except ValueError as err:   # not routed (STALLED on the shared routes), or its own communicator
                if not isinstance(err, RoutingError) and communicator != "each":    # refuses it (FAILED)
                    raise
                out.append(_on_shared_routes(variants, call, [i], communicator)[0])
        return out
    if communicator == "each":
        # graphs whose network transports set other NCCL settings have other candidates (NVLS off
        # over TCPXO): planned apart, each group as alone (review26 F1: a TCPXO graph first left the
        # NDR graph without NVLSTree, 285 us against its 208 alone)
        groups: dict = {}
        for i, v in enumerate(variants):
            groups.setdefault(transport_settings(v), []).append(i)
        if len(groups) > 1:
            out, refused = [None] * len(variants), []
            for members in groups.values():
                try:
                    results = _on_shared_routes([variants[i] for i in members], call, range(len(members)),
                                                communicator)
                except ValueError as err:       # every graph of the group refuses: each FAILED
                    if isinstance(err, RoutingError):
                        raise
                    refused.append(err)
                    p = len(gpu_nodes(variants[0]) if rank_groups[0] is None else rank_groups[0])
                    results = [_failed(call, p, None, str(err)) for _ in members]
                for i, r in zip(members, results):
                    out[i] = r
            if len(refused) == len(groups):     # no graph runs the call: as collective() says
                raise refused[0]
            return out
    return _on_shared_routes(variants, call, range(len(variants)), communicator)


def _on_shared_routes(variants, call: Call, which, communicator: str = "first") -> list:
    """The results of the variants ``which`` (indices into ``variants``), every one timed on
    the routes of the first of ``variants`` that routes (a graph with a server cut off cannot
    be routed: listed first, it failed the whole batch, listed second it was one STALLED
    variant; now either order gives the same statuses). Raises the first graph's
    RoutingError when none routes. ``communicator`` ``"first"``: a send's P2P channels are the
    routed graph's; ``"each"``: each variant's own."""
    op, size, rank_groups, algorithm, options = call.op, call.size, call.rank_groups, call.algorithm, call.options
    first_error = None
    refused: dict = {}      # communicator="each": a variant whose own communicator refuses the call (adv26 F1)
    for r, graph in enumerate(variants):
        try:
            with unchanged(graph):          # laid out and every step routed on one index of the graph
                planned = _plans(graph, op, size, rank_groups, algorithm, options)
                timed = time_plans(graph, planned.ranks, planned.plans, options, [variants[i] for i in which])
            break
        except RoutingError as err:
            first_error = first_error or err
        except ValueError as err:           # the same call on a graph alike but for its technologies
            if communicator != "each":
                raise
            first_error, refused[r] = first_error or err, str(err)
    else:
        raise first_error
    # NCCL's view of each scenario's hardware (a variant's own NVLink and NIC rates)
    if communicator == "each":          # a communicator created on each variant: its own P2P channels
        hws = [nccl_view(variants[i], op, planned.first, planned.layout, options, rank_groups[0]) for i in which]
        for i, hw in zip(which, hws):
            if i not in refused and (why := refusal(op, algorithm, planned.p, [(planned.layout, hw)], options)):
                refused[i] = why
    else:                               # the communicator created on the routed graph: its P2P channels
        hws = [replace(describe(variants[i], planned.first, planned.layout, options.channels, options.efficiency,
                                options.pxn, options.nvls_channels), p2p=planned.hw.p2p) for i in which]
    stalled = (f"a collective step cannot complete: one of its flows crosses a failed (zero-capacity) link on its "
               f"route, the route graphs[{r}] gives it (collective_variants routes every variant on the first "
               "graph that routes; collective() on this graph routes around its failed links where a path is left)")
    return [_failed(call, planned.p, scenario.links, refused[i]) if i in refused else
            _result(graph, call, planned, scenario, {}, hw, stalled) for i, scenario, hw in zip(which, timed, hws)]


def _failed(call: Call, ranks: int, links, message: str) -> CollectiveResult:
    """A variant's result where its own communicator refuses the call (``message``, what
    :func:`collective` on it raises): status FAILED, no time, no protocol; ``links`` its
    LinkTable where its steps were routed (None where its group planned nothing)."""
    algorithm = call.algorithm if isinstance(call.algorithm, str) else ",".join(call.algorithm)
    busy = np.zeros(0 if links is None else len(links.capacity))
    return CollectiveResult(op=call.op, algorithm=algorithm, size=float(call.size), ranks=ranks, time=np.nan,
                            algbw=np.nan, busbw=np.nan, steps=(), link_utilization=busy, links=links,
                            status=Status.FAILED, message=message, protocol="", nccl=False)




def collective_variants(graphs, op: str, size: float, *, ranks=None, algorithm: str = "auto",
                        policy: str = "ecmp", policy_options: dict | None = None, channels: int | None = None,
                        pxn: bool = True, protocol: str = "auto", chunk: float = DEFAULT_CHUNK,
                        efficiency=None, step_latency: float | None = None,
                        base_latency: float | None = None, candidates: str = "nccl", model=None,
                        gpus_per_thread: int = 1, host_overhead: float = 0.0, nvls_channels: int | None = None,
                        nccl_version: str | None = None, options: CollectiveOptions | None = None,
                        communicator: str = "first") -> list:
    """:func:`collective` on several graphs of one structure (same nodes and edges, other
    capacities or latencies: a technology swap, derated links, failed links at capacity 0),
    routed once on the first and solved for all in one batched call.

    Options as :func:`collective` (``model=`` a :func:`flowsolver.calibrate` result, ``gpus_per_thread``,
    ``host_overhead``; or
    ``options=`` a :class:`~flowsolver.CollectiveOptions`).
    Returns one :class:`CollectiveResult` per graph; a variant that cannot complete has
    ``status`` ``Status.STALLED``, ``time`` inf and the reason in ``message``. Routes are
    the first graph's that routes (a graph with a server cut off by failed links cannot be
    routed; it is skipped, and its variant stalls on the routes of the next): a link failed in
    another variant is not routed around (its flows stall; call :func:`collective` on the
    edited graph to reroute). A policy whose routes
    depend on the load (``register_policy(..., depends_on_load=True)``, e.g. ``ugal``) is
    routed on each variant, as :func:`collective` would. NCCL's view of the communicator (its
    channel counts, a send's P2P channels) is the first graph's too: NCCL sets it when the
    communicator is created, so a link derated in a variant slows the flows on it and no more,
    where :func:`collective` on the derated graph is a communicator created on it (a GPU whose
    NIC is derated gets fewer P2P channels). ``communicator="each"``: every graph its own
    communicator, as :func:`collective` on it (another cluster, e.g. a technology swap: a
    send on 100 GbE gets 1 P2P channel where NDR gets 4); ``"first"`` (default) as above. With
    ``"each"``, a variant whose own communicator cannot run the call (an algorithm or protocol
    its network transport's NCCL settings leave off: NVLSTree over GCP TCPXO, LL128 over
    Slingshot) reports ``Status.FAILED`` with the message :func:`collective` on it raises
    (NaN time); the others are timed as alone (graphs whose transports set other NCCL settings
    are planned apart, each choosing among its own candidates).

    >>> import topologies as tp
    >>> ndr, hdr = tp.rail_optimized(2), tp.rail_optimized(2, link="ib_hdr")
    >>> [round(r.busbw / 1e9) for r in collective_variants([ndr, hdr], "all_reduce", 2**30, algorithm="ring")]  # under 8 NICs' 376 / 192
    [348, 183]
    """
    options, model = _gathered("collective_variants", collective_variants, options, dict(
        policy=policy, policy_options=policy_options, channels=channels, pxn=pxn, protocol=protocol, chunk=chunk,
        efficiency=efficiency, step_latency=step_latency, base_latency=base_latency, candidates=candidates,
        model=model, gpus_per_thread=gpus_per_thread, host_overhead=host_overhead, nvls_channels=nvls_channels,
        nccl_version=nccl_version))
    algorithm = check_call(op, algorithm, size, options, several=True)
    if communicator not in ("first", "each"):
        raise ValueError(f"communicator must be 'first' (NCCL's communicator created on graphs[0]) or 'each' "
                         f"(one per graph, as collective() on it), got {communicator!r}")
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs must be a non-empty list of cluster graphs")
    edges = list(graphs[0].edges())
    for i, g in enumerate(graphs[1:], 1):
        if list(g.edges()) != edges:
            raise ValueError(f"graphs[{i}] has other nodes or edges than graphs[0]: variants must share the structure")
        _checks.checked_graph(g)            # as collective() checks it: an edited capacity of True or "5e10"
    check_efficiency_keys(options.efficiency, graphs)
    if model is not None:
        model.check(graphs[0])
        options = model.apply(options)
    check_split(op, size, len(gpu_nodes(graphs[0])) if ranks is None else len(list(ranks)), options)
    return solve_variants(op, float(size), [ranks], algorithm, options, graphs, model=model, communicator=communicator)
