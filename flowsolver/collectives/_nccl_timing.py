"""NCCL's cost model on the flow solve: per (algorithm, protocol) NCCL's latency plus the
size over the bandwidth NCCL grants the graph's bus bandwidth, that bus bandwidth being the
contention-aware flow solve of the ring on the real fabric (NCCL's ``nChannels x bw``), and
an algorithm with a schedule of its own (tree, NVLS) no faster than its own flow solve."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ._algorithms import algorithm_of
from ._channels import P2P_CHANNEL_SHARE, nvls_channel_count
from ._dual import greater, lesser
from ._nccl import PROTOCOLS, busbw_factor, is_fp8
from ._pipeline import PIPELINE, channels_used, pipeline_time, step_message, wire_bytes
from ._net_cells import lazy_net_cells, net_cells  # noqa: F401 (re-exported)
from ._nccl_model import (_BASE, NVLS_EFFICIENCY_BY_GENERATION, NVLS_MAX_ARITY, enabled, release_lacks, tree_correction,
                          tuner_algbw, tuner_hops, tuner_latency)

__all__ = ["transfer_of", "tuned_times", "tuned_time", "nccl_pick", "steady_parts", "why_not_tuned", "rescaled", "runs",
           "slow_paths_of", "path_excess", "net_cells", "lazy_net_cells"]



def transfer_of(steps) -> float:
    """Seconds of transfer of solved :class:`CollectiveStep` values (latencies left out)."""
    return float(sum(st.count * st.transfer for st in steps))


def steady_parts(steps, transfer=None) -> list:
    """``[(index, multiplier)]``: the steps' steady-state transfer (see
    :func:`steady_transfer`) is ``sum multiplier x steps[index].transfer``: a pipeline's ``k``
    chunks at its slowest step's pace (with as many chunks as stages, the step where all are
    active; with fewer, no step holds every stage, and the one with most stages, where the
    pipeline's depth is counted, may hold none of its bottleneck: a 2-node tree on 16 channels
    over 100 Gb/s NICs, 4 chunks through 16 stages, timed its NVLink stages only). ``transfer``:
    a step's seconds (default its solved ``transfer``; a bound passes its least)."""
    piped = [i for i, st in enumerate(steps) if st.latency_count not in (None, st.count)]
    if not piped:
        return [(i, st.count) for i, st in enumerate(steps)]
    widest = max(piped, key=lambda i: steps[i].latency_count or 0)
    k = sum(st.count for st in steps) - steps[widest].latency_count + 1
    seconds = (lambda st: st.transfer) if transfer is None else transfer
    slowest = max(range(len(steps)), key=lambda i: float(seconds(steps[i])))
    return [(slowest, max(k, 1))]


def steady_transfer(steps) -> float:
    """Transfer seconds of solved steps at the pipeline's steady state: ``k`` chunks through
    the widest stage, its fill and drain left out (NCCL prices those in its latency)."""
    return float(sum(m * steps[i].transfer for i, m in steady_parts(steps)))


def slow_paths_of(steps) -> tuple:
    """The ``slow_paths`` of solved :class:`CollectiveStep` values, together."""
    return tuple(t for st in steps for t in getattr(st, "slow_paths", ()))


def path_excess(paths, algorithm, protocol, op, hw) -> float:
    """Seconds to add to NCCL's latency of ``algorithm`` / ``protocol`` because the graph's
    paths are slower than NCCL's hop constants assume (``paths``: :func:`slow_paths_of`).

    A hop cannot take less than its path's latency. NCCL counts its hops inside nodes and
    between nodes (:func:`~._nccl_latency.tuner_hops`) at a constant ``c`` each, measured on
    hardware whose links have the catalogue's latencies; so each counted hop of a kind
    costs, beyond ``c``, ``max(0, min(path - c, excess))`` for the kind's slowest path
    (``excess``: its latency beyond the same links at catalogue latencies, which ``c``
    already includes). A catalogue graph has no slow path: nothing is added.

    >>> from ._nccl_model import Hardware
    >>> paths = ((True, 10e-3, 10e-3),)        # a 10 ms path between nodes (unknown technology)
    >>> round(path_excess(paths, "ring", "Simple", "all_reduce", Hardware(8, 8)) * 1e3, 6)   # 14 hops, 14 us each
    139.804
    """
    if not paths:
        return 0.0
    total = 0.0
    for (count, constant), between in zip(tuner_hops(algorithm, protocol, op, hw, cost=True), (False, True)):
        if count:
            worst = max((min(path - constant, excess) for kind, path, excess in paths if kind == between),
                        default=0.0)
            total += count * max(worst, 0.0)
    return total


def _protocols(options):
    return options.protocols


def runs(algorithm, protocol, op, hw, options) -> bool:
    """:func:`~._nccl_model.enabled` with the protocols the user named counted as NCCL_PROTO set."""
    return enabled(algorithm, protocol, op, hw, asked=options.protocol != "auto", redop=options.redop,
                   dtype=options.dtype, nccl=options.nccl_version)


def why_not_tuned(algorithm, op, hw, options) -> str | None:
    """Why NCCL would not run ``algorithm`` for ``op`` on ``hw`` with the asked protocol, reduction
    op and data type."""
    if lacks := release_lacks(algorithm, op, options.nccl_version):
        major, minor = options.nccl_version
        return f"is not run by NCCL for {op} at nccl_version {major}.{minor}: {lacks}"

    def on(p):
        return enabled(algorithm, p, op, hw, redop=options.redop, dtype=options.dtype, nccl=options.nccl_version)
    if not any(on(p) for p in PROTOCOLS):
        what = f"{options.redop} of {options.dtype}, " if (options.redop, options.dtype) != ("sum", "float") else ""
        wide = f"; NCCL_MAX_NVLS_ARITY: NVLS reduces or gathers on at most {NVLS_MAX_ARITY} ranks a node but for " \
            "all_reduce" if algorithm.startswith("nvls") and op != "all_reduce" and hw.ppn > NVLS_MAX_ARITY else ""
        return f"is not run by NCCL for {op} on these ranks ({what}{hw.ranks} ranks on {hw.nodes} node(s), " \
               f"{hw.generation or 'unknown'} GPUs, {hw.channels} channels{wide}){_settings(algorithm, op, hw, options)}"
    if not any(runs(algorithm, p, op, hw, options) for p in _protocols(options)):
        return f"runs with {', '.join(p for p in PROTOCOLS if on(p))} only (NCCL), got protocol " \
               f"{options.protocol!r}{_settings(algorithm, op, hw, options)}"
    return None


def _settings(algorithm, op, hw, options) -> str:
    """What the network transport's NCCL settings leave NCCL, where they are why ``algorithm``
    does not run (newuser26: a refusal named ranks and channels, not the link's NCCL_PROTO /
    NCCL_NVLS_ENABLE; review26 F4: and only where the settings are the cause)."""
    if not hw.transport:
        return ""
    freed = replace(hw, protocols=PROTOCOLS, nvls=hw.nvls or hw.nvls_off_by_transport)
    if not any(runs(algorithm, p, op, freed, options) for p in _protocols(options)):
        return ""                       # refused whatever the settings
    off = ", NVLS off" if hw.nvls_off_by_transport else ""
    return f"; the network transport {hw.transport}'s NCCL settings run {', '.join(hw.protocols)} only{off}"


def tuned_times(op, size, p, results, hw, options, model=None) -> dict:
    """``{(algorithm, protocol): (time, latency, estimate)}`` (s) of the NCCL algorithms in ``results``
    (algorithm -> the flow solve's :class:`~._solve.Timed`). ``model`` (a calibration)
    scales latencies and bandwidths."""
    ring = results.get("ring")
    if ring is None:
        return {}
    ring_transfer = transfer_of(ring.steps)
    out = {}
    for a, timed in results.items():
        own = steady_transfer(timed.steps)
        paths = slow_paths_of(timed.steps)
        for proto in _protocols(options):
            if runs(a, proto, op, hw, options):
                out[a, proto] = tuned_time(a, proto, op, size, p, ring_transfer, own, hw, options, model, paths)
    return out


def nccl_pick(tuned: dict):
    """``((algorithm, protocol), (time, latency, estimate))`` of :func:`tuned_times`'s entries
    that NCCL runs: the least *estimate* (NCCL chooses by its cost model, and its kernels then
    take ``time``), or None when there are none.

    >>> nccl_pick({("ring", "LL"): (3.0, 1.0, 2.0), ("tree", "LL"): (2.5, 1.0, 2.2)})[0]
    ('ring', 'LL')
    """
    return min(tuned.items(), key=lambda kv: kv[1][2], default=None)


def tuned_time(a, proto, op, size, p, ring_transfer, own_transfer, hw, options, model=None, paths=()):
    """(time, latency, estimate) (s) of ``a`` / ``proto``: ``estimate`` is NCCL's cost model
    (``latency + size / bandwidth``, what NCCL chooses by), ``time`` what its kernels take,
    ``latency`` NCCL's latency (the rest of ``time`` scales with the bandwidth)
    (:func:`~._pipeline.pipeline_time`: the channels it runs at this size, its chunk steps,
    their floor and the pipeline's fill; no less than the host's floor where one thread issues
    it for several GPUs, :func:`~._host.host_floor`, plus ``host_overhead``: the host's part
    is in ``latency``, no link carries it). The ring's flow-solved
    transfer ``ring_transfer`` (s) is the graph's bus bandwidth, ``own_transfer`` (s) the
    algorithm's own steady-state transfer, ``hw.nvlink_bw`` a GPU's NVLink (bytes/s). The
    three may be :class:`~._dual.Dual` numbers: the time is then their Dual (its derivative).
    ``paths``: the algorithm's steps' paths slower than the catalogue's (:func:`path_excess`
    adds what they cost beyond NCCL's hop constants, after a calibration's latency scale,
    which fits NCCL's constants only)."""
    busbw = size * busbw_factor(op, p) / ring_transfer if ring_transfer > 0 else np.inf
    if a.startswith("nvls"):
        busbw = _nvls_ring_busbw(busbw, hw)
    own_algbw = size / own_transfer if own_transfer > 0 else np.inf
    lat = tuner_latency(a, proto, op, hw, size, cost=True)       # its network hops at what they cost
    # NCCL chooses with the latency its network plugin reports on each hop (Transport.net_latency)
    told = tuner_latency(a, proto, op, hw, size) - lat if hw.hop_latency is not None else 0.0
    pulled = rendezvous_latency(a, proto, op, size, hw, options.nccl_version)
    told -= pulled                                              # NCCL's tuner does not know of it
    if options.base_latency is not None:
        lat += float(options.base_latency) - _BASE[a][PROTOCOLS.index(proto)] * 1e-6
    if model is not None:
        lat = model.latency(lat, a, proto, op, hw)
        told -= model.hop_cost(a, proto, op, hw)        # a fitted hop's cost: not what NCCL chooses by
    # after a calibration's latency scale, which fits NCCL's constants only: the rendezvous's Get
    # (libfabric's, review21 F1: scaled, it moved NCCL's estimates) and the slower paths' excess
    lat += pulled + path_excess(paths, a, proto, op, hw)
    algbw = tuner_algbw(a, proto, op, _graph_busbw(a, busbw, hw), hw, options.nccl_version)
    if a in ("tree", "nvls") and not algorithm_of(a).derived(op):    # no faster than its own flow solve
        # of the data's bytes, which the protocol's lines carry with their flags (LL128: 120 of
        # 128 bytes; adv26 F2: a lone GPU's NIC bound tree LL128 at Simple's rate, 5-6 % fast)
        algbw = lesser(algbw, own_algbw / wire_bytes(proto))
    if a == "nvls_tree":
        algbw = lesser(lesser(algbw, _nvls_node_bound(hw)), _network_bound(hw))
    if not algbw > 0:                                           # 0: a stalled flow
        return np.inf, lat, np.inf
    run_bw = _nvls_channel_bound(algbw, hw) if a in ("nvls", "nvls_tree") else algbw   # NCCL chooses by algbw
    share_of, rate = None, 0.0
    if a in ("ring", "tree"):
        run_bw, share_of, rate = _running_ctas(a, proto, op, busbw, own_algbw, run_bw, hw, options.nccl_version)
    kernel_bw = run_bw if model is None else model.bandwidth(run_bw, a, proto)
    gpu = pipeline_time(a, proto, op, size, p, hw.nodes, hw.nvls_run if a.startswith("nvls") else hw.pipeline_channels,
                        lat, kernel_bw,
                        PIPELINE if model is None else model.pipeline,
                        stage_algbw=_nvls_tree_stage_algbw(hw) if a == "nvls_tree" else None,
                        share_of=share_of, channel_rate=rate, nccl=options.nccl_version)
    time = options.with_host(gpu, greater)     # one thread for N GPUs; a call timed from an idle device
    # what the pipeline adds (its fill, idle channels) scales with the bandwidth as the
    # transfer does: only NCCL's latency is latency, and the host's time, which no link carries
    # NCCL chooses by its estimate, whose tree bandwidth it corrects at medium sizes, and which
    # it multiplies by 1024 for a ring of an 8-bit float type beyond 8 ranks (to choose it last)
    estimate = lat + told + size / (algbw * tree_correction(a, proto, op, size, hw))
    return time, lat + (time - gpu), estimate * (FP8_RING_PENALTY if fp8_relegated(a, hw, options) else 1.0)


def rendezvous_latency(algorithm, protocol, op, size, hw, nccl=None) -> float:
    """Seconds a transport's rendezvous adds to ``algorithm`` / ``protocol``'s ``op`` of
    ``size`` bytes on ``hw`` (a :class:`~._nccl_model.Hardware` across nodes): where a chunk
    step's network message (:func:`~._pipeline.step_message`, on the channels NCCL runs at that
    size) is larger than ``hw.rendezvous_above``, each hop between nodes that NCCL's latency
    counts one after the other (:func:`~._nccl_latency.tuner_hops`: a ring all-reduce's ``2 (nodes
    - 1)``, a tree's ``2 log2(nodes)``) waits ``hw.rendezvous_cost`` for the payload's Get. A
    chunk's chain around a ring or up and down a tree crosses those hops; the other steps'
    messages overlap it. 0 on one node, with no rendezvous, or for NVLS and PAT (no modelled
    chunk).

    >>> from ._nccl_model import Hardware
    >>> hw = Hardware(8, 2, rendezvous_above=18433, rendezvous_cost=5.4e-6)
    >>> round(rendezvous_latency("ring", "LL", "all_reduce", 1 << 20, hw) * 1e6, 6)   # 2 hops x 5.4 us
    10.8
    >>> rendezvous_latency("ring", "LL", "all_reduce", 8192, hw)       # 8-byte lines: eager
    0.0
    """
    if hw.nodes < 2 or hw.rendezvous_above is None or not hw.rendezvous_cost or algorithm not in ("ring", "tree"):
        return 0.0
    running = channels_used(algorithm, protocol, size, hw.ranks, hw.pipeline_channels)
    if step_message(algorithm, protocol, op, size, hw.ranks, hw.nodes, running, nccl) <= hw.rendezvous_above:
        return 0.0
    _, (hops, _) = tuner_hops(algorithm, protocol, op, hw)
    return hw.rendezvous_cost * hops


#: src/enqueue.cc:2015-2020 (master 5067397c; NCCL 2.24 and later): "Relegate fp8 reduction trees
#: of sufficient depth that they incur precision loss to be least preferred", a ring's cost of an
#: 8-bit float type (f8e4m3, f8e5m2) on more than 8 ranks times 1024, whatever the function
FP8_RING_PENALTY = 1024.0


def fp8_relegated(algorithm, hw, options) -> bool:
    """Whether NCCL's estimate of ``algorithm`` carries :data:`FP8_RING_PENALTY`."""
    return algorithm == "ring" and is_fp8(options.dtype) and hw.ranks > 8


def _graph_busbw(algorithm, ring_busbw, hw) -> float:
    """NCCL's ``nChannels x bw`` for ``algorithm``: the tree graph's on two nodes is its
    intra-node one (NCCL 2.30 tuning.cc: ``bwIntra`` when ``nNodes <= 2``), a GPU's NVLink
    (the tree's own flow solve then bounds it by the network); elsewhere the ring's; fewer
    channels than NCCL's own move less (:func:`_channel_bound`)."""
    if algorithm == "tree" and hw.nodes == 2 and hw.nvlink_bw > 0:
        return _channel_bound(hw.nvlink_bw, hw)
    if algorithm.startswith("nvls"):        # NVLS's own channels, which channels= leaves alone
        return ring_busbw
    return _channel_bound(ring_busbw, hw)


def _nvls_ring_busbw(busbw, hw):
    """The ring's bus bandwidth (bytes/s) as NVLS and NVLSTree see it across nodes: where the call
    runs fewer ring channels than NCCL's ring graph has rings (``channels=``, ``NCCL_MAX_NCHANNELS``;
    one a NIC across nodes), the ring's flow solve took that many rings and left NICs idle that
    NVLS's own channels (which those settings leave alone: enqueue.cc ``topoGetAlgoInfo`` gives
    NVLSTree ``comm->nvlsChannels``) use: scaled back to the graph's rings (or, between the graph's
    and the run's count, to the run's), no more than the node's NICs send (``hw.net_bw``, where known).

    >>> from ._nccl_model import Hardware
    >>> hw = Hardware(16, 2, "hopper", channels=4, graph_channels=4, default_channels=16,
    ...               default_graph_channels=8, net_bw=386e9)
    >>> round(_nvls_ring_busbw(185e9, hw) / 1e9)      # 4 of the graph's 8 rings: twice
    370
    """
    scale = _ring_scale(hw)
    if scale == 1.0:
        return busbw
    return lesser(busbw * scale, hw.net_bw) if hw.net_bw > 0 else busbw * scale


def _ring_scale(hw) -> float:
    """What the call's flow solve of ``channels=`` rings (or trees) is scaled by to NCCL's own
    count's across nodes (1 where the call runs NCCL's count, or one node): fewer rings than the
    graph's use that many NICs (``graph / channels``); between the graph's and the run's count the
    graph's rings are unevenly doubled (12 of 16 on 8 NICs: 4 NICs carry two, the lockstep ring
    moves at the doubled ones' pace: ``run / channels``)."""
    rings, run = hw.default_graph_channels, hw.default_channels
    if hw.nodes < 2 or rings is None or run is None or hw.channels >= run or hw.channels == rings:
        return 1.0
    return rings / hw.channels if hw.channels < rings else run / hw.channels


def _running_ctas(a, proto, op, busbw, own_algbw, algbw, hw, nccl=None) -> tuple:
    """``(algbw, share_of, channel_rate)`` a ring's or tree's kernels run at (:func:`~._pipeline.pipeline_time`):
    k running CTAs move the same whether NCCL dropped to k at this size or ``channels=``
    (``NCCL_MAX_NCHANNELS``) set k, each its share of the algorithm bandwidth at NCCL's own count
    (``share_of`` its pipeline's channels, :attr:`~._nccl_model.Hardware.pipeline_channels`), or,
    for Simple, one CTA's own rate where that is more (the P2P channel's measured rate,
    :data:`~._channels.P2P_CHANNEL_SHARE` of the GPU's NVLink, as a share of the bus bandwidth:
    measured on Simple's sends; LL128's caps are per channel, so its share is a channel's rate),
    for ring LL its share of LL's bandwidth before NCCL's whole-communicator ``llMaxBw`` cap
    (:func:`_ll_channel_rate`), each no more
    than its ring moves (NCCL's count's bus bandwidth over its graph's rings: across nodes a ring
    crosses on one NIC, so one CTA on a 100 Gb/s NIC moves no more than 12.5 GB/s; the history:
    docs/collective-timing.md). Across nodes
    the call's flow solve ran its own rings (and trees): its bus bandwidth, and the tree's own
    flow-solved bandwidth, are scaled back to NCCL's count's (:func:`_ring_scale`; no cap at the
    NICs' float rate, which would drop a sensitivity's derivative at a tie). ``algbw``: the call's
    (returned where ``channels=`` is not set)."""
    own = hw if hw.default_channels is None else replace(
        hw, channels=hw.default_channels, graph_channels=hw.default_graph_channels,
        default_channels=None, default_graph_channels=None)
    scale = 1.0 if own is hw else _ring_scale(hw)
    full_bus = _graph_busbw(a, busbw * scale, own)
    if own is not hw:
        algbw = tuner_algbw(a, proto, op, full_bus, own, nccl)
        if a == "tree" and not algorithm_of(a).derived(op):
            algbw = lesser(algbw, own_algbw * scale)
    rate = 0.0
    if proto == "Simple" and full_bus > 0 and hw.nvlink_bw > 0:
        rate = lesser(_cta_rate(hw) / full_bus, 1.0 / own.tuner_channels)
    elif proto == "LL" and a == "ring" and algbw > 0 and hw.nodes == 1:
        rate = _ll_channel_rate(a, op, full_bus, own, nccl) / algbw
    return algbw, own.pipeline_channels, rate


def _ll_channel_rate(a, op, full_bus, own, nccl=None):
    """What one running LL channel of a ring inside one node moves, bytes/s of the buffer: its
    share among NCCL's count (``own.pipeline_channels``) of the algorithm bandwidth NCCL's tuner
    grants ring LL before ``llMaxBw`` (:func:`~._nccl_model.tuner_algbw` ``ll_cap=False``;
    ``full_bus`` the graph's ``nChannels x bw``, bytes/s): NCCL caps every other protocol a
    channel but LL on the whole communicator (2.30 src/graph/tuning.cc:327, ``busBw =
    std::min(llMaxBw, busBw * .5)``), so a share of the capped figure made a channel's rate fall
    as the channels NCCL could open rose (adv22a F1). The running channels add up to no more than
    the capped figure (:func:`~._pipeline.pipeline_time`). Across nodes, and for the tree, a
    channel keeps its share of the capped figure: the uncapped one held the corpus worse
    (docs/collective-timing.md, "Within one pair"). ``nccl``: the release whose ring LL share
    applies."""
    return tuner_algbw(a, "LL", op, full_bus, own, nccl, ll_cap=False) / own.pipeline_channels


def _cta_rate(hw) -> float:
    """What one channel (one CTA) is measured to move alone, bytes/s: the P2P channel's rate,
    :data:`~._channels.P2P_CHANNEL_SHARE` of the GPU's NVLink."""
    return P2P_CHANNEL_SHARE * hw.nvlink_bw


def _channel_bound(busbw, hw):
    """``busbw`` (bytes/s) where the call runs fewer channels than NCCL's own count
    (``NCCL_MAX_NCHANNELS``, ``channels=``): each channel is one CTA and moves no more than its
    share of ``busbw`` among NCCL's count, or than one channel is measured to move alone (the P2P
    channel's rate, :data:`~._channels.P2P_CHANNEL_SHARE` of the GPU's NVLink), whichever is more."""
    if hw.default_channels is None or hw.channels >= hw.default_channels:
        return busbw
    per = greater(busbw / hw.default_channels, _cta_rate(hw))
    return lesser(busbw, hw.channels * per)


def _nvls_channel_bound(algbw, hw):
    """``algbw`` (bytes/s) where NVLS or NVLSTree runs fewer channels (``hw.nvls_run``:
    ``NCCL_MAX_CTAS``, ``NCCL_NVLS_NCHANNELS``) than NCCL's own count (:data:`~._channels.NVLS_CHANNELS`,
    which ``algbw`` is for): each channel is one CTA issuing the multimem loads, reductions and
    stores of its slice of the buffer, and moves what NCCL's tuner grants it, its share of
    ``algbw`` among NCCL's count (tuning.cc:306-323: NVLS's bus bandwidth is ``nChannels`` x a
    per-channel rate); fewer CTAs move that many shares, never more (no single NVLS CTA's rate
    is measured to bound it otherwise, as the P2P channel's bounds the ring's,
    :func:`_channel_bound`). The pipeline's steps shrink with the channels (``channels x ppn``
    chunks a step), its fill with them: the rate, not the steps, must carry the loss.

    >>> from ._nccl_model import Hardware
    >>> hw = Hardware(8, 1, "hopper", nvls=True, nvls_channels=4)
    >>> round(_nvls_channel_bound(480e9, hw) / 1e9)      # 4 of NCCL's 16 CTAs: a quarter
    120
    """
    own = nvls_channel_count(hw.generation, hw.nodes)
    if hw.nvls_run >= own:
        return algbw
    return algbw * (hw.nvls_run / own)


def _nvls_tree_stage_algbw(hw) -> tuple:
    """``(nvls, network)``: the rates (bytes/s of the buffer) NVLSTree's in-switch stages and each
    of its network levels move a loop at (:func:`~._pipeline.nvls_tree_stages`): the node's NVLS
    rate (:func:`_nvls_node_bound`) and what a node's NICs send (``hw.net_bw``; a level sends a
    loop's chunks of every head and channel of the node; unbounded where not known), each the
    CTAs' share where fewer run than NCCL's own count (:func:`_nvls_channel_bound`). Both are
    NCCL's view of the node as :func:`_network_bound` reads it: a re-solve of a degraded fabric
    with the healthy run's choice (:func:`~flowsolver.collective_variants`, goodput) keeps the
    healthy NICs' rate here, as it keeps NCCL's tuning."""
    net = hw.net_bw if hw.net_bw > 0 else np.inf
    return _nvls_channel_bound(_nvls_node_bound(hw), hw), _nvls_channel_bound(net, hw)


def _nvls_node_bound(hw) -> float:
    """The algbw (bytes/s) NVLSTree's in-switch reduction allows: each node's NVSwitch
    reduces at most at the rate of the one-node NVLS schedule (each GPU sends its buffer and
    its reduced shard, ``1 + 1/ppn`` buffers, at NCCL's NVLS efficiency of its NVLink)."""
    ppn = hw.ppn
    eff = NVLS_EFFICIENCY_BY_GENERATION.get(hw.generation, 0.0)
    bus = 2 * (ppn - 1) / ppn * hw.nvlink_bw * eff / (1 + 1 / ppn)
    return bus * hw.ranks / (2 * (hw.ranks - 1)) if bus > 0 else np.inf


def _network_bound(hw) -> float:
    """The algbw (bytes/s) no all-reduce across ``hw.nodes`` nodes exceeds without a reduction
    in the network: each node sends at least ``2 (nodes - 1) / nodes`` of the buffer (its
    reduce-scatter and all-gather shares) through NICs that send ``hw.net_bw`` bytes/s. NCCL's
    tuner grants NVLSTree on two nodes twice the ring's network bus bandwidth, ``(ranks - 1) /
    ranks`` above this; NVLSTree has no flow solve of its own to hold it. Unbounded where
    ``net_bw`` is not known (0).

    >>> from ._nccl_model import Hardware
    >>> round(_network_bound(Hardware(16, 2, net_bw=100e9)) / 1e9, 1)    # 2 nodes: the whole buffer out
    100.0
    """
    if hw.nodes < 2 or not hw.net_bw > 0:
        return np.inf
    return hw.net_bw * hw.nodes / (2 * (hw.nodes - 1))


def rescaled(steps, time, latency, base):
    """The solved steps made to add up to a tuned ``time``: transfers scaled to ``time -
    latency``, ``latency - base`` spread over the steps' latency counts."""
    transfer = transfer_of(steps)
    paid = sum(st.count if st.latency_count is None else st.latency_count for st in steps)
    scale = (time - latency) / transfer if transfer > 0 else 1.0
    per = (latency - base) / paid if paid else 0.0
    return tuple(replace(st, transfer=st.transfer * scale, latency=per) for st in steps)
