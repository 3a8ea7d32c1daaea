"""How long NCCL's kernels take to move a buffer, beside what its tuner estimates: the
channels NCCL runs at that size, the chunks each channel pipelines, a step's floor and the
pipeline's fill (units: bytes, seconds, bytes/s).

NCCL's tuner (:mod:`._nccl_model`) prices a collective as ``latency + size / bandwidth``: the
estimate NCCL *chooses* an algorithm and protocol by. What a kernel achieves differs in three
ways this module models from NCCL's source (2.30: ``src/enqueue.cc`` ``topoGetAlgoInfo`` and
``calcCollChunking``, ``src/include/device.h``, ``collectives.h``, ``comm.h``):

1. **Channels**: below ``channels x threads x threshold`` bytes NCCL drops channels one by one
   (ring and tree; NVLS keeps its own), and every algorithm hands its channels whole cells of
   32 KiB of traffic (``scheduleCollTasksToPlan``, :func:`channel_split`). A channel is one SM
   driving its share of the links, so fewer channels move proportionally fewer bytes per
   second, and the most loaded one sets the pace.
2. **Steps**: each channel moves its share as a sequence of chunk steps (ring: ``nranks``
   chunks a loop, ``2 (nranks - 1)`` steps for an all-reduce; tree: a chunk a step down the
   tree's depth; NVLS and NVLSTree: a loop of ``nHeads`` chunks a channel, a node's GPUs each
   a head: ``all_reduce.h``'s ``loopSize``), the chunk set by the protocol's buffer
   and shrunk for small sizes exactly as ``calcCollChunking`` does.
3. **Fill and floor**: a step takes at least a floor (flag polling, fences, the proxy) and the
   pipeline needs ``fill`` further steps to fill and drain, so the time is
   ``latency + (steps + fill) x max(step transfer, floor)`` (a tree's chunks also cross its
   depth's hops: ``steps + depth - 1`` for Simple, whose hops store a whole step each). At large sizes the steps are
   long and many and the time tends to ``size / bandwidth``; at mid sizes the fill and the
   floor are what the tuner's affine estimate leaves out (measured: 20-40 % at 4-256 MiB).

LL128 runs the same chunk pipeline as Simple: its steps are NCCL's LL128 steps (a channel's
buffer slot, 15/16 of it data, ``chunkSteps = 1``; the tree's chunk shrunk by the tree's depth as
``calcCollChunking`` shrinks it, a rule written for the pipeline's depth). A connection's slots
are freed a step at a time (``prims_ll128.h``: ``waitSend`` and ``postRecv`` count steps) and
the network proxy sends a posted slot as one message, so the tree's depth and the algorithm's
fill are counted in whole steps, as for Simple (over NVLink a receiver reads each 128-byte line
as its flag lands, so there the count is an upper bound: the two one-node tree LL128 points of
the corpus come out 31-94 % slow). LL128 has no step floor (its lines carry
their own flags: no fence or flush per step): a fitted floor for LL128 raised the corpus's held-out
median (22.9 % to 23.3 %; with the transports 18.8 % to 18.6 % against 16.8 % without) and priced
a 1 MiB tree LL128 all-reduce on 2 x 8 H100 at 230 us against 87 us measured. LL forwards its
8-byte payloads line by line over NVLink (``prims_ll.h``: a thread passes each 16-byte line on as
its flag arrives), so no fill in steps applies, nor a step's depth inside a node (the whole
tree's depth counted as steps makes tree LL 11 % too slow where it was 30 % fast; a fill in
ring steps fits the platforms' small-message floors, not the protocol), except where a step
crosses the network: a network connection's LL send buffer is in host memory and the proxy
sends a step as one message once every line of it carries its flag (``src/transport/net.cc``: LL buffers never on the GPU,
``sendProxyProgress`` checks each line's flags before ``isend``), so a network hop stores and
forwards a whole step. Tree LL runs its reduce and its broadcast at once on split threads, the
root turning each chunk around as it reduces it (``src/device/all_reduce.h``
``runTreeSplit``), so a chunk moves up and down at the tree's step rate and waits a whole step
at each of the ``2 log2(nodes)`` network hops on its way: tree LL across nodes takes
``2 log2(nodes)`` steps beyond its own (:func:`ll_depth`). A ring's steps run in lock step on every GPU (each GPU's next step waits
for its own last one), so a ring's network hops store and forward no more than the ring's own
steps take: ring LL keeps the tuner's ``latency + size / bandwidth``. Both keep NCCL's channel
count at the size.
The floors and fills are fitted on the validation corpus (``benchmarks/fit_pipeline.py``), see
:data:`PIPELINE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._dual import greater, lesser
from ._nccl_model import log2i

__all__ = ["Pipeline", "PIPELINE", "PIPELINED", "channels_used", "channel_split", "chunk_steps", "ll_depth",
           "nvls_tree_stages",
           "pipeline_time", "step_message", "wire_bytes"]

KIB = 1024
# NCCL_STEPS (src/include/device.h): slots of a connection's buffer
NCCL_STEPS = 8
# Each protocol's buffer (src/init.cc DEFAULT_*_BUFFSIZE), bytes: LL 8 lines x 512 threads x
# NCCL_STEPS x 16 B; LL128 120 elements x 640 threads x NCCL_STEPS x 8 B; Simple 4 MiB
_BUFFER = {"LL": 8 * 512 * NCCL_STEPS * 16, "LL128": 120 * 640 * NCCL_STEPS * 8, "Simple": 1 << 22}
# maxThreads (src/graph/tuning.cc): LL and Simple 512, LL128 640 (NVLS: its own channels)
_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
# NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD (src/include/comm.h); ring LL's is x nRanks (tuning.cc)
_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
# ALLREDUCE_ / ALLGATHER_ / REDUCESCATTER_CHUNKSTEPS = NCCL_STEPS / 2 (src/include/collectives.h)
_RING_CHUNK_STEPS = NCCL_STEPS // 2
# NCCL_NVLS_CHUNKSIZE default (src/transport/nvls.cc): 128 KiB
_NVLS_CHUNK = 128 * KIB
# NCCL_NVLSTREE_MAX_CHUNKSIZE default (src/enqueue.cc calcCollChunking, NCCL 2.20-2.29; 2.30's
# nvls.cc ncclNvlsTuning): NVLSTree's chunk is at most 64 KiB on 4 nodes or more
_NVLS_TREE_CHUNK_4_NODES = 64 * KIB
# MinTrafficPerChannel (src/enqueue.cc scheduleCollTasksToPlan): a channel gets whole cells of
# at least 32 KiB of traffic
_MIN_TRAFFIC = 32 * KIB
#: the algorithms whose chunk pipeline is modelled (PAT, absent from the corpus, keeps the tuner's time)
PIPELINED = ("ring", "tree", "nvls", "nvls_tree")


@dataclass(frozen=True)
class Pipeline:
    """The step floors (s) per protocol family and the fills (steps) per algorithm family.

    ``floor_simple`` / ``floor_nvls``: the least time one chunk step takes (ring and tree
    Simple; NVLS and NVLSTree); ``fill_ring`` / ``fill_tree`` /
    ``fill_nvls``: steps the pipeline spends filling and draining beyond its structural depth
    (a tree's ``2 x depth``, counted from the topology; one-node NVLS's. NVLSTree's stages are
    summed at their own rates instead, :func:`nvls_tree_stages`).
    A ring's fill in proportion to its loop's steps, their square root, or a constant plus a
    share of them holds the corpus worse (held out 0.26, 0.24, 0.25 against 0.23): it is one
    number of steps.

    >>> Pipeline(fill_ring=0.0).fill_ring, Pipeline().floor_nvls
    (0.0, 0.0)
    """

    floor_simple: float = 0.0
    floor_nvls: float = 0.0
    fill_ring: float = 1.88
    fill_tree: float = 0.0
    fill_nvls: float = 3.09

    def __post_init__(self):
        for name, value in vars(self).items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"Pipeline {name} must be a finite number >= 0, got {value!r}")


#: fitted on the validation corpus's 536 modelled points (11 sources; ``python
#: benchmarks/fit_pipeline.py``) by least soft-L1 log error over the points NCCL runs with
#: Simple, each source weighted by 1/sqrt(its tuned non-LL points). Ranges over the
#: leave-one-source-out folds: floor_nvls 0-2.0 us, fill_ring 1.84-2.61 steps, fill_nvls
#: 2.7-4.8 steps; fill_tree 0 in every fold. floor_simple is 0 because no Simple step in the
#: corpus is short enough for a floor to matter (the fit cannot tell one). Held out: median
#: |error| 0.229 against 0.285 for NCCL's estimate; see the docs' accuracy page.
#: With LL128 through the pipeline (2026-12-04) the fit on the corpus gives floor_simple
#: 2.1 us, floor_nvls 2.0 us, fill_ring 2.71, fill_tree 0, fill_nvls 2.71 (folds: fill_ring
#: 2.43-4.85); these shipped values are kept (in sample 16.9 %, held out 16.8 %). With tree
#: LL's stored network steps and the channels' cells (2026-12-04; no constant added, none
#: moved): held out 15.4 % (536 points; 13.2 % over the 488 of the corpus with the DRANET
#: H200 pairing excluded, in sample 13.1 %, the refit 11.7 %). With the host's floor of
#: ``-g N`` runs (2026-12-05, :mod:`._host`; none moved) the fit finds floor_nvls 0 in every
#: fold (the one it found stood in for the host's on Azure's ``-g 8`` NVLS runs), fill_ring 2.67
#: (folds 2.16-5.38): held out 12.0 %, in sample 11.7 %, the refit 10.2 %. With NVLSTree's
#: loop of ``nChannels x nHeads`` chunks and its 64 KiB chunk from 4 nodes (2026-12-05, as
#: NCCL counts them; none moved): held out 9.7 % (in sample 10.1 % before the 4-node chunk);
#: the refit (floor_simple 2.14 us, floor_nvls 0, fill_ring 2.67, fill_nvls 2.18) is not
#: shipped: it puts the Megatron-Bridge 70B FP8 published run outside 10 %. The NVLS step
#: floor is 0 and not fitted since 2026-12-05 (second session): its 1.67 us bound no corpus point,
#: the whole corpus fits it at 0, and its one non-zero fold (7.6 us without Azure's runs) priced
#: Azure's 2-512 KiB NVLS all-reduces at 44 us against 26-43 measured (docs' accuracy page).
PIPELINE = Pipeline()


def channels_used(algorithm, protocol, size, ranks, channels) -> int:
    """The channels NCCL runs ``algorithm`` / ``protocol`` on for ``size`` bytes (its
    ``topoGetAlgoInfo``): ring and tree drop a channel while ``size < channels x threads x
    threshold`` (ring LL's threshold times ``ranks``); NVLS, NVLSTree and PAT keep theirs.

    >>> channels_used("ring", "Simple", 1 << 20, 8, 16), channels_used("ring", "Simple", 64 * 1024, 8, 16)
    (16, 2)
    """
    if algorithm not in ("ring", "tree"):
        return channels
    threshold = _THRESHOLD[protocol] * (ranks if algorithm == "ring" and protocol == "LL" else 1)
    nc = channels
    while nc > 1 and size < nc * _THREADS[protocol] * threshold:
        nc -= 1
    return nc


def _divup(a, b):
    return -(-a // b)


def channel_split(op, protocol, size, ranks, channels) -> tuple:
    """``(channels given data, bytes of the largest channel's share)`` of ``op`` of ``size``
    bytes on ``ranks`` GPUs over at most ``channels`` channels, as NCCL's
    ``scheduleCollTasksToPlan`` (``src/enqueue.cc``) splits one collective: into cells of 32 KiB
    of traffic (traffic: 2 bytes a byte for all-reduce, ``ranks`` for all-gather and
    reduce-scatter, whose count is a rank's ``size / ranks``, 1 otherwise; 4 times that for LL,
    whose lines are half flags and its cells an eighth), each channel taking
    ``ceil(traffic / channels / 32 KiB)`` whole cells, so a small buffer runs on fewer channels
    than it may and a buffer of a few cells a channel on unevenly loaded ones.

    >>> channel_split("all_reduce", "Simple", 64 * 1024, 8, 16)      # 4 cells of 16 KiB
    (4, 16384.0)
    >>> channel_split("all_reduce", "Simple", 320 * 1024, 8, 16)     # 20 cells, 2 a channel
    (10, 32768.0)
    """
    per_byte = {"all_reduce": 2, "all_gather": ranks, "reduce_scatter": ranks}.get(op, 1)
    per_byte *= 4 if protocol == "LL" else 1
    nbytes = max(1, int(size // ranks if op in ("all_gather", "reduce_scatter") else size))
    per_channel = _divup(max(_MIN_TRAFFIC, nbytes * per_byte) // channels, 16) * 16
    cell = _divup(_divup(_MIN_TRAFFIC, per_byte), 16) * 16
    cells, cell_traffic = _divup(nbytes, cell), cell * per_byte
    per = min(cells, _divup(per_channel, cell_traffic))
    lo = cells if channels == 1 else per
    mid, hi = (cells - lo) // per, (cells - lo) % per
    if (1 if lo else 0) + mid + (1 if hi else 0) > channels:          # spread over the last ones
        mid = channels - 2
        per = (cells - lo) // (mid + 1)
        hi = per + (cells - lo) % (mid + 1)
    if hi == 0 and mid:
        hi, mid = per, mid - 1
    largest = min(max(lo, per if mid else 0, hi) * cell, nbytes)
    return (1 if lo else 0) + mid + (1 if hi else 0), largest * size / nbytes      # a rank's count -> bytes


def _data_chunk(algorithm, protocol) -> float:
    """A chunk's payload (bytes) before the small-size reductions (``calcCollChunking``)."""
    chunk = _BUFFER[protocol] // NCCL_STEPS
    if algorithm == "ring" and protocol == "Simple":
        chunk *= _RING_CHUNK_STEPS
    if protocol == "LL":
        chunk //= 2                                     # half of each line is flags
    if protocol == "LL128":
        chunk = chunk // 16 * 15                        # 15 of each 16 words carry data
    return chunk


def _loop_steps(op, ranks) -> int:
    """A ring loop's steps: ``2 (ranks - 1)`` for all-reduce, ``ranks - 1`` otherwise."""
    return 2 * (ranks - 1) if op == "all_reduce" else ranks - 1


#: NCCL releases before this one shrank a tree Simple all-reduce's chunk with the tree's depth
#: (``calcCollChunking``, src/enqueue.cc of v2.4.8 ... v2.19.4: while ``nBytes / (nChannels x
#: chunk)`` is under ``8 x depth`` halve it down to 128 KiB, under ``4 x depth`` to 64 KiB, under
#: ``depth`` to 32 KiB; ``depth = nRanks / nNodes - 1 + log2i(nNodes)``, src/graph/connect.cc);
#: v2.20.3 dropped it (its tree Simple chunk is the step's, 512 KiB)
TREE_DEPTH_CHUNKS_UNTIL = (2, 20)


def _tree_chunk(protocol, share, nodes, ppn, nccl=None) -> float:
    """The tree's chunk (bytes) for a channel's ``share``: calcCollChunking's tree LL128 rule,
    and its tree Simple rule on an NCCL release (``(major, minor)``) before
    :data:`TREE_DEPTH_CHUNKS_UNTIL`.

    >>> _tree_chunk("Simple", 1 << 20, 8, 4), _tree_chunk("Simple", 1 << 20, 8, 4, (2, 18))    # depth 3 + 3
    (524288, 65536)
    """
    chunk = _data_chunk("tree", protocol)
    if protocol == "Simple" and nccl is not None and nccl < TREE_DEPTH_CHUNKS_UNTIL:
        depth = ppn - 1 + log2i(nodes)
        for times, least in ((8, 131072), (4, 65536), (1, 32768)):
            while share // chunk < depth * times and chunk > least:
                chunk //= 2
    if protocol == "LL128":
        steps = 1 + log2i(nodes) + 0.1 * ppn          # NCCL's log2i: the floor (enqueue.cc)
        while share / chunk < steps * 64 / ppn and chunk > 131072:
            chunk /= 2
        while share / chunk < steps * 16 / ppn and chunk > 32768:
            chunk /= 2
    return chunk


def _nvls_chunk(algorithm, size, concurrent, nodes) -> int:
    """NVLS's and NVLSTree's chunk (bytes), shrunk for small sizes as calcCollChunking does
    (NVLSTREE_MAX_CHUNKSIZE's default: 64 KiB from 4 nodes)."""
    if algorithm == "nvls":
        chunk, rules = _NVLS_CHUNK, ((64, 65536), (8, 32768), (2, 16384))
    else:
        chunk, rules = _NVLS_CHUNK if nodes < 4 else _NVLS_TREE_CHUNK_4_NODES, ((4, 65536), (1, 32768))
    for factor, smaller in rules:
        if size < factor * concurrent * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def chunk_steps(algorithm, protocol, op, size, ranks, nodes, channels) -> tuple:
    """``(steps, depth)``: the chunk steps each channel runs one after the other for ``op``
    of ``size`` bytes on ``ranks`` GPUs over ``nodes`` nodes with ``channels`` channels, and
    the pipeline's structural depth in steps (a tree's ``2 x`` (chain inside a node + levels
    between nodes), NVLSTree's NVLS stage and ``2 log2(nodes)`` levels).

    >>> chunk_steps("ring", "Simple", "all_reduce", 1 << 30, 8, 1, 16)   # 64 MiB a channel: 4 loops of 14
    (56, 0)
    """
    return _chunking(algorithm, protocol, op, size, ranks, nodes, channels)[:2]


#: bytes a protocol puts on the wire for a byte of data: LL's 16-byte lines carry 8 (the rest
#: flags), LL128's 128-byte lines 120 (src/include/device.h NCCL_LL128_LINEELEMS 16,
#: NCCL_LL128_DATAELEMS 15)
_WIRE = {"LL": 2.0, "LL128": 16 / 15, "Simple": 1.0}


def wire_bytes(protocol) -> float:
    """Bytes ``protocol`` puts on a link for a byte of data (LL 2, LL128 16 / 15, Simple 1): a
    flow solve of the data's bytes moves data ``wire_bytes`` times faster than the protocol can.

    >>> wire_bytes("LL128") * 120 == 128, wire_bytes("Simple")
    (True, 1.0)
    """
    return _WIRE[protocol]


def step_message(algorithm, protocol, op, size, ranks, nodes, channels, nccl=None) -> float:
    """Bytes of one chunk step's network message for ``op`` of ``size`` bytes by ``algorithm`` /
    ``protocol`` on ``ranks`` GPUs over ``nodes`` nodes with ``channels`` channels running: a
    ring's chunk (a loop's ``ranks`` chunks a channel, shrunk to a rank's share of a channel's
    bytes below one loop, ``realChunkSize`` in NCCL's kernels), a tree's (its share of a channel's
    bytes at most), as the protocol writes it (LL: 2 bytes a byte; LL128: 16 / 15). NCCL's
    network proxy sends a step as one message (``src/transport/net.cc`` ``sendProxyProgress``:
    one ``isend`` a step). 0 for the algorithms with no modelled chunk (NVLS, PAT).

    >>> step_message("ring", "Simple", "all_reduce", 1 << 30, 8, 2, 8)      # a whole 512 KiB x 4 chunk
    2097152.0
    >>> step_message("ring", "LL", "all_reduce", 256 * 1024, 8, 2, 8)       # 4 KiB a rank, in LL lines
    8192.0
    """
    if algorithm == "ring":
        data = min(_data_chunk(algorithm, protocol), size / channels / ranks)
    elif algorithm == "tree":
        share = size / channels
        data = min(_tree_chunk(protocol, share, nodes, max(1, ranks // nodes), nccl), share)
    else:
        return 0.0
    return float(data * _WIRE[protocol])


def _chunking(algorithm, protocol, op, size, ranks, nodes, channels, nccl=None) -> tuple:
    """``(steps, depth, whole)``: :func:`chunk_steps`' two and a whole chunk over the steps'
    mean chunk (>= 1): NCCL sends whole chunks and the remainder last (``realChunkSize =
    min(chunkSize, divUp(left, ...))`` in its kernels); one loop (ring) or one chunk: 1.

    >>> _chunking("tree", "Simple", "all_reduce", 5 << 18, 16, 2, 1)   # 2.5 chunks of 512 KiB in 3
    (3, 16.0, 1.2)
    """
    ppn = max(1, ranks // nodes)
    if algorithm == "ring":
        per_loop = ranks * _data_chunk(algorithm, protocol)           # a channel's bytes a loop
        loops = max(1, math.ceil(size / channels / per_loop))
        return loops * _loop_steps(op, ranks), 0, loops * per_loop * channels / size if loops > 1 else 1.0
    if algorithm == "tree":
        share = size / channels
        chunk = _tree_chunk(protocol, share, nodes, ppn, nccl)
        steps = max(1, math.ceil(share / chunk))
        return steps, 2 * ((ppn - 1) + math.log2(nodes)), steps * chunk / share if steps > 1 else 1.0
    if algorithm in ("nvls", "nvls_tree"):
        concurrent = channels * ppn
        per_step = concurrent * _nvls_chunk(algorithm, size, concurrent, nodes)
        steps = max(1, math.ceil(size / per_step))
        depth = 0 if algorithm == "nvls" else 1 + 2 * math.log2(nodes)
        return steps, depth, steps * per_step / size if steps > 1 else 1.0
    raise ValueError(f"algorithm must be one of {', '.join(PIPELINED)}, got {algorithm!r}")


def ll_depth(algorithm, nodes) -> float:
    """Steps an LL pipeline of ``algorithm`` spends beyond its own chunk steps on ``nodes``
    nodes: the network hops that store and forward a whole step (NCCL's proxy sends an LL step
    once all its lines are flagged; over NVLink a receiver reads each line as its flag lands).
    Tree: ``2 log2(nodes)``, a step at each network hop up and down (its reduce and broadcast
    run at once, ``runTreeSplit``); ring and one node: 0 (a ring's steps run in lock step, the
    hops add no step).

    >>> ll_depth("tree", 4), ll_depth("tree", 1), ll_depth("ring", 8)
    (4.0, 0.0, 0.0)
    """
    return 2 * math.log2(nodes) if algorithm == "tree" and nodes > 1 else 0.0


def nvls_tree_stages(nodes, nvls_share, net_share) -> float:
    """The steps one loop of NVLSTree's all-reduce takes from a channel's first byte in to its
    last byte out (units: the pipeline's step, a loop's bytes at the algorithm's bandwidth),
    summed over its stages (``src/device/all_reduce.h``, ``NCCL_ALGO_NVLS_TREE``: separate warps
    scatter the loop's ``nHeads`` chunks to the heads, reduce a head's chunk in the switch and
    send it up the tree, receive it back and multicast it, gather the loop's chunks): the
    scatter and gather move a loop's ``nHeads`` chunks and the in-switch reduce and multicast one
    chunk each, together a loop at the node's NVLS rate (``nvls_share``: the algorithm's
    bandwidth over the NVLS rate, the one-node schedule's ``1 + 1 / ppn`` buffers); each of the
    tree's ``2 log2(nodes)`` network levels moves a head's chunk at the NICs' rate
    (``net_share``, the algorithm's bandwidth over the NICs'). Stages that are not the
    bottleneck take less than a step, which counting each as a whole step (plus NVLS's fill,
    fitted on one node) missed: 2 x 8 H100 at 4-8 MiB, one loop, 7.1 steps against the ~3.6
    the nccl-tests#309 curve measures (docs' accuracy page).

    >>> nvls_tree_stages(2, 1.0, 1.0), round(nvls_tree_stages(2, 0.82, 0.66), 2)
    (4.0, 2.96)
    """
    return 2.0 * nvls_share + 2.0 * math.log2(nodes) * net_share


def pipeline_time(algorithm, protocol, op, size, ranks, nodes, channels, latency, algbw,
                  params: Pipeline = PIPELINE, stage_algbw=None, share_of=None, channel_rate=0.0, nccl=None):
    """Seconds NCCL's kernels take for ``op`` of ``size`` bytes by ``algorithm`` /
    ``protocol`` given the tuner's ``latency`` (s) and the algorithm bandwidth ``algbw``
    (bytes/s, all ``channels`` running): ``latency + (steps + fill) x max(step, floor)``
    with the bandwidth of the channels NCCL runs at that size (LL: ``latency + (steps +
    ll_depth) x step``, no fill or floor, ``latency + size / bandwidth`` but for a tree across
    nodes; LL128: its own steps, the algorithm's fill and depth, no floor). NVLSTree:
    ``latency + (steps - 1) x step + stages`` (:func:`nvls_tree_stages`), its stages at the
    rates ``stage_algbw = (nvls, network)`` (bytes/s, the algbw a node's NVLS and its NICs
    allow; None: ``algbw`` each). The ``nc`` channels running at ``size`` move ``algbw x min(1, nc x
    max(1 / share_of, channel_rate))``: each its share of ``algbw`` among ``share_of`` channels
    (None: ``channels``), or, where fewer than ``share_of`` run, a CTA's own rate, ``channel_rate``
    (a share of ``algbw``), if more. ``latency`` and ``algbw`` may be :class:`~._dual.Dual` numbers.
    ``nccl``: the NCCL release ``(major, minor)`` whose chunk rules apply (None: the model's,
    2.30's; :data:`TREE_DEPTH_CHUNKS_UNTIL`).

    >>> p = Pipeline(floor_simple=2e-6, fill_ring=2.0)
    >>> t = pipeline_time("ring", "Simple", "all_reduce", 16 << 20, 8, 1, 16, 10e-6, 200e9, p)
    >>> round(t * 1e6, 2)        # 14 steps of 16 MiB / 200 GB/s / 14 each, plus 2 of fill
    105.87
    """
    if algorithm not in PIPELINED:
        return latency + size / algbw
    running = nc = channels_used(algorithm, protocol, size, ranks, channels)
    _, largest = channel_split(op, protocol, size, ranks, nc)
    if largest > 0:
        nc = size / largest                             # the largest share's time sets the pace
    # each running channel: its share of algbw among share_of (NCCL's count), or, where some of
    # those are idle, a CTA's own rate if more
    share_of = share_of or channels
    per = 1.0 / share_of if running >= share_of else greater(1.0 / share_of, channel_rate)
    bandwidth = algbw * lesser(1.0, nc * per)
    steps, depth, whole = _chunking(algorithm, protocol, op, size, ranks, nodes, nc, nccl)
    step = size / bandwidth / steps
    if protocol == "LL":                                # lines stream; network hops store a step
        return latency + (steps + ll_depth(algorithm, nodes)) * step
    if algorithm == "nvls_tree":                        # one loop's stages beyond its step, no fill
        nvls, net = (bandwidth, bandwidth) if stage_algbw is None else stage_algbw
        floor, fill = params.floor_nvls, 0.0
        depth = greater(nvls_tree_stages(nodes, bandwidth / nvls, bandwidth / net) - 1.0, 0.0)
    elif algorithm == "nvls":
        floor, fill = params.floor_nvls, params.fill_nvls
    else:
        floor, fill = params.floor_simple, params.fill_ring if algorithm == "ring" else params.fill_tree
        if algorithm == "tree" and protocol == "Simple":
            # S chunks through a tree's D hops, each hop storing and forwarding a whole step
            # (Simple posts a step once it is written whole: ProtoSimple<1, 1>, a chunk a step):
            # the first chunk's D steps include its own, so S + D - 1 steps, not S + D.
            # (LL128's lines stream over NVLink and a network hop stores a step: its D counts
            # every hop whole, an approximation kept: docs' accuracy page)
            depth = depth - 1
    if protocol == "LL128":                             # no floor: flags in every line
        return latency + (steps + fill + depth) * step
    # Simple fills and drains at a whole chunk's pace (one byte more than whole chunks is a
    # chunk and a byte, not two half chunks); LL128's shrunk chunks keep the mean's (the
    # whole chunk's calibrates AWS p5's halves worse: docs' accuracy page)
    return latency + steps * greater(step, floor) + (fill + depth) * greater(step * whole, floor)
