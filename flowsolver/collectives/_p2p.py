"""The channels NCCL runs a send / receive on, and what a channel moves (units: bytes, seconds,
bytes/s).

A send of NCCL's is striped over a few of its channels, each one block of the P2P kernel whose
warps are split between the channel's send and its receive (``src/device/sendrecv.h``). How
many depends on the whole communicator, not on the pair alone (NCCL 2.29, whose rules 2.30
keeps):

1. **Per peer** (``src/graph/paths.cc``, ``ncclTopoGetNchannels``): two a NVLink for a peer over
   NVLink (``2 x path bandwidth / ncclTopoNVLinkBw``), two over PCIe, and over the network one
   a NIC port or ``ceil(NIC GB/s / 14)`` (``NCCL_P2P_PER_CHANNEL_NET_BW``), whichever is more,
   a GPU's ports counted until they reach its PCIe bandwidth (``getLocalNetCountByBw``); the
   least over the communicator's peers, rounded up to a power of two.
2. **The P2P channels** (``ncclTopoComputeP2pChannels``): NCCL's channels rounded up to a power
   of two. Across nodes a peer's channels are halved while ``per peer x ceil(ranks / 8)``
   exceeds them (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``: a round of 8 peers), so ten ranks on one
   GPU a node get one channel a peer where two ranks get two; on one node they are at most the
   P2P channels.
3. **Per send** (``src/enqueue.cc``, ``scheduleP2pTasksToPlan`` and ``addP2pToPlan``): from the
   per-peer count halved while ``x ranks`` exceeds the P2P channels, doubled (up to the
   per-peer count) while a channel's part exceeds one P2P chunk across nodes (128 KiB,
   ``NCCL_P2P_NET_CHUNKSIZE``) or 32 on one node (512 KiB on NVLink, ``NCCL_P2P_NVL_CHUNKSIZE``).

A channel moves at most :data:`P2P_CHANNEL_SHARE` of the GPU's NVLink bandwidth as NCCL sees it,
over NVLink or the network: a send's transfer takes at least ``size / (channels x share x NVLink
rate)``, a property of the GPUs and NCCL that no link capacity changes. The share is fitted on
the corpus (``benchmarks/validate.py`` refits it without each source), whose sends are nccl-tests'
ring shifts: every channel sends and receives, where a channel with a send alone gets all its
warps (``sendrecv.h``) and may move more. GPUs without NVLink get no such bound inside a node (no
measurement prices their channels). Across the network a channel moves no more than
:data:`NET_CHANNEL_RATE`, NCCL's own figure for one (``NCCL_P2P_PER_CHANNEL_NET_BW``, 14 GB/s:
it gives a network peer ``ceil(NIC GB/s / 14)`` channels "to meet the bw requirement",
``src/graph/paths.cc``), whatever the GPU: one channel across 400 Gb/s NDR moved 14.8 GB/s
(10 x 8 H100), two 23.7-26.2 GB/s (10 x 1, 2, 4 H100; 8 x 8 B200, whose NVLink share alone
would give 76 GB/s), where the NVLink share gave H100's 21.1 a channel and B200's its NIC.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import topologies as tp

from .. import _checks
from ..routing import gpu_nodes, graph_memo
from ._channels import P2P_CHANNEL_SHARE, run_channels
from ._hardware import describe, mesh_pairs, mesh_ring_channels, nccl_channels, near_nics, search_view
from ._layout import node_nics
from ._nccl import PROTOCOLS
from ._nccl_releases import FIRST_TUNED, release_predates
from ._options import MAX_CHANNELS
from ._nccl_timing import transfer_of
from ._pipeline import PIPELINED, channels_used

__all__ = ["NET_CHANNEL_RATE", "P2P_CHANNEL_SHARE", "P2pComm", "least_transfer", "p2p_bound", "p2p_channels_per_peer", "p2p_comm",
           "send_channels", "with_communicator"]

KIB = 1024
# NCCL_P2P_NET_CHUNKSIZE / NCCL_P2P_NVL_CHUNKSIZE / NCCL_P2P_PCI_CHUNKSIZE defaults (src/init.cc)
_NET_CHUNK, _NVL_CHUNK, _PCI_CHUNK = 128 * KIB, 512 * KIB, 128 * KIB
# NCCL_P2P_PER_CHANNEL_NET_BW default, GB/s (src/graph/paths.cc, NCCL 2.29): NCCL's own sizing
_PER_CHANNEL_NET_GBS = 14
#: the most one P2P channel moves across the network, bytes/s: NCCL's per-channel network
#: bandwidth (``NCCL_P2P_PER_CHANNEL_NET_BW``, 14 GB/s, src/graph/paths.cc), by which it gives a
#: network peer enough channels to fill its NICs
NET_CHANNEL_RATE = _PER_CHANNEL_NET_GBS * 1e9
# NCCL_MAX_DEV_WORK_P2P_PER_BATCH (src/include/device.h): peers a round of P2P work serves
_PEERS_PER_ROUND = 8
# ncclTopoNVLinkBw (src/graph/topo.h), GB/s a NVLink: SM70 / SM80 20, SM90 20.6, SM100 40.1
_NVLINK_GBS = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}


def _pow2_up(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def _net_channels(nic_count: int, nic_bw: float) -> int:
    """A peer's channels across the network from a GPU's ``nic_count`` NIC ports of ``nic_bw``
    bytes/s together: a port each, or NCCL's channels for their bandwidth if more."""
    return max(nic_count, -(-int(nic_bw / 1e9) // _PER_CHANNEL_NET_GBS))


def p2p_channels_per_peer(ranks: int, nodes: int, p2p_channels: int, nvlink_links: int, nic_count: int,
                          nic_bw: float) -> int:
    """A peer's P2P channels in a communicator of ``ranks`` GPUs on ``nodes`` nodes with
    ``p2p_channels`` P2P channels: ``nvlink_links`` NVLinks a GPU (0: PCIe), ``nic_count`` NICs
    (ports) a GPU and their bandwidth ``nic_bw`` (bytes/s) for peers across nodes.

    >>> p2p_channels_per_peer(10, 10, 2, 18, 1, 50e9), p2p_channels_per_peer(2, 2, 2, 18, 1, 50e9)
    (1, 2)
    >>> p2p_channels_per_peer(8, 1, 32, 18, 1, 50e9)      # one node: 2 x 18 NVLinks, at most 32
    32
    """
    least = MAX_CHANNELS
    if ranks > nodes:                                   # some peers on the same node
        least = min(least, 2 * max(1, nvlink_links) if nvlink_links else 2)
    if nodes > 1:                                       # peers across the network
        least = min(least, _net_channels(nic_count, nic_bw))
    per_peer = _pow2_up(least)
    if nodes == 1:
        return min(per_peer, p2p_channels)
    rounds = -(-ranks // _PEERS_PER_ROUND)
    while per_peer * rounds > p2p_channels and per_peer > 1:
        per_peer //= 2
    return per_peer


def send_channels(size: float, ranks: int, nodes: int, per_peer: int, p2p_channels: int, chunk: int) -> int:
    """The channels NCCL stripes one send of ``size`` bytes over: from ``per_peer`` halved while
    ``x ranks`` exceeds the ``p2p_channels``, doubled up to ``per_peer`` while a channel's part
    exceeds ``chunk`` bytes across nodes or ``32 x chunk`` on one node.

    >>> [send_channels(s << 20, 8, 1, 32, 32, 512 * 1024) for s in (32, 64, 128, 256, 512)]
    [4, 4, 8, 16, 32]
    >>> send_channels(1 << 30, 10, 10, 1, 2, 128 * 1024), send_channels(1 << 30, 2, 2, 2, 2, 128 * 1024)
    (1, 2)
    """
    least = per_peer
    while least * ranks > p2p_channels and least > 1:
        least //= 2
    nbytes = int(size)
    if nbytes <= 0:
        return 1
    min_part, max_part = (chunk // 2, chunk) if nodes > 1 else (chunk // 8, 32 * chunk)
    n = min(least, -(-nbytes // min_part))
    part = max(min_part, -(-nbytes // n))
    while part > max_part and n <= per_peer // 2:
        n *= 2
        part = -(-nbytes // n)
    return n


@dataclass(frozen=True)
class P2pComm:
    """A communicator's P2P structure: its ``ranks`` and ``nodes``, ``per_peer`` channels, its
    ``p2p_channels`` and P2P ``chunk`` (bytes), and ``nvlink_view`` the NVLink bandwidth NCCL
    sees on its GPUs (bytes/s: the links times ``ncclTopoNVLinkBw``, the catalogue's rate times
    its efficiency; 0: no NVLink, no bound); :meth:`channels` of a send of some size.
    ``all_to_all``: the call is an all-to-all, each rank's ``size`` a send of ``size / ranks`` to
    every other rank at once (NCCL groups them, ``scheduleP2pTasksToPlan``: each send on its
    channels, ``ncclP2pChannelForPart`` wrapping them onto the ``p2p_channels``). ``crosses``:
    the call's sends cross the network (its ranks span nodes: a send's channels then move no
    more than :data:`NET_CHANNEL_RATE` each; an all-to-all's sends to the other nodes' ranks)."""

    ranks: int
    nodes: int
    per_peer: int
    p2p_channels: int
    chunk: int
    nvlink_view: float = 0.0
    all_to_all: bool = False
    crosses: bool = False
    fewest: int = 0

    def remote_share(self) -> float:
        """The share of the bytes a rank sends that cross the network: 1 for a send that
        crosses, an all-to-all's sends to the ranks of the other nodes, else 0. An all-to-all's
        slowest rank is on the node with the fewest of its ranks (:attr:`fewest`; 0: ``ranks /
        nodes`` each): ``(ranks - fewest) / (ranks - 1)``.

        >>> P2pComm(9, 2, 1, 2, 128 * 1024, all_to_all=True, crosses=True, fewest=1).remote_share()
        1.0
        """
        if not self.crosses:
            return 0.0
        if not self.all_to_all or self.ranks < 2:
            return 1.0
        fewest = self.fewest if self.fewest > 0 else self.ranks / self.nodes
        return (self.ranks - fewest) / (self.ranks - 1)

    def channels(self, size: float) -> int:
        """The channels a send of ``size`` bytes runs on (:func:`send_channels`); an all-to-all's:
        its ``ranks - 1`` sends' channels, at most the P2P channels."""
        if self.all_to_all:
            each = send_channels(size / self.ranks, self.ranks, self.nodes, self.per_peer, self.p2p_channels,
                                 self.chunk)
            return min(self.p2p_channels, (self.ranks - 1) * each)
        return send_channels(size, self.ranks, self.nodes, self.per_peer, self.p2p_channels, self.chunk)

    def least_transfer(self, size: float, factor: float = 1.0) -> float:
        """The least seconds the channels take to move ``size`` bytes (an all-to-all: the
        ``(ranks - 1) / ranks`` of them a rank sends), a channel moving ``factor`` times
        :data:`P2P_CHANNEL_SHARE` of :attr:`nvlink_view`, and across the network no more than
        ``factor`` times :data:`NET_CHANNEL_RATE` (0.0: no bound; the channels' time is each
        byte's at its channel rate, the bytes spread over the channels). A property of the
        GPUs and of NCCL, not of the links: no link capacity changes it.

        >>> c = P2pComm(8, 1, 1, 32, 512 * 1024, nvlink_view=370.8e9)
        >>> round(1e9 / c.least_transfer(1e9) / 1e9, 1)      # one channel of 5.7 % of 370.8 GB/s
        21.1
        >>> c = P2pComm(10, 10, 1, 2, 128 * 1024, nvlink_view=370.8e9, crosses=True)
        >>> round(1e9 / c.least_transfer(1e9) / 1e9, 1)      # across the network: NCCL's 14 GB/s
        14.0
        """
        if size <= 0:
            return 0.0
        remote = self.remote_share()
        local_rate = P2P_CHANNEL_SHARE * self.nvlink_view * factor if self.nvlink_view > 0 else math.inf
        net_rate = min(local_rate, NET_CHANNEL_RATE * factor)
        per_byte = (1.0 - remote) / local_rate + (remote / net_rate if remote > 0 else 0.0)
        if per_byte <= 0:
            return 0.0
        moved = float(size) * (self.ranks - 1) / self.ranks if self.all_to_all else float(size)
        return moved * per_byte / self.channels(size)


def _view(tech, fallback: float) -> float:
    """NCCL's view of a link technology (bytes/s): the catalogue's rate times its efficiency (set
    to NCCL's own figures: NVLink ``ncclTopoNVLinkBw``, PCIe its 12 GB/s a Gen3 x16), else
    ``fallback`` for a technology the catalogue lacks."""
    try:
        link = tp.get_link(tech)
    except ValueError:
        return fallback
    return link.bandwidth * link.efficiency


def _pair_view(edge) -> float:
    """NCCL's view (bytes/s) of a GPU pair's own NVLink edge: its capacity (the pair's links) at
    its technology's efficiency (NCCL's ``ncclTopoNVLinkBw`` a link)."""
    try:
        eff = tp.get_link(edge.get("tech", "")).efficiency
    except ValueError:
        eff = None
    eff = edge.get("efficiency", eff)
    return float(edge.get("capacity", 0.0)) * (1.0 if eff is None else float(eff))


def _gpu_nics(graph, gpu) -> tuple:
    """``(count, bytes/s)`` of the NICs NCCL counts for a GPU (``getLocalNetCountByBw``,
    ``src/graph/topo.cc``): its nearest NICs' ports one by one, each at its line rate or the PCIe
    path's (NCCL's view), until they add up to the GPU's own PCIe bandwidth. A GPU cabled straight
    into the fabric (no NIC node: a torus of GPUs) has its own cables to switches and to other
    servers' GPUs as its ports (adv24 F2: counted as none, its sends stayed at one channel's 14
    GB/s whatever the cables' rate); (0, 0) with none. A port of capacity 0 (a failed cable) is
    not counted: NCCL leaves a port that is down out of its topology."""
    near = near_nics(graph, gpu)
    if not near:
        kind, server = graph.nodes, graph.nodes[gpu].get("server")
        ports = [e for _, v, e in graph.out_edges(gpu, data=True)
                 if kind[v].get("kind") == "switch" or (kind[v].get("kind") == "gpu" and kind[v].get("server") != server)]
        ports = [e for e in ports if float(e.get("capacity", 0.0)) > 0]
        count = sum(max(1, int(e.get("cables", 1))) for e in ports)
        return count, float(sum(float(e.get("capacity", 0.0)) for e in ports))
    hop = graph.edges[gpu, near[0]] if graph.has_edge(gpu, near[0]) else \
        next((graph.edges[gpu, v] for v in graph.successors(gpu) if graph.nodes[v].get("kind") == "pcie_switch"), None)
    if hop is None:     # its rail's NIC, whose PCIe cable the pair's first GPU owns (layout._rail_nics): that cable's
        hop = next(graph.edges[u, near[0]] for u in graph.predecessors(near[0]) if graph.nodes[u].get("kind") == "gpu")
    gpu_bw = _view(hop.get("tech", ""), float(hop.get("capacity", 0.0)))
    count, total = 0, 0.0
    for nic in near:
        for _, v, e in graph.out_edges(nic, data=True):
            if graph.nodes[v].get("kind") != "switch" or not float(e.get("capacity", 0.0)) > 0:
                continue
            cables = max(1, int(e.get("cables", 1)))
            for _ in range(cables):
                count, total = count + 1, total + min(float(e.get("capacity", 0.0)) / cables, gpu_bw)
                if total >= gpu_bw:
                    return count, total
    return count, total


def _fewest_nics(graph, gpus) -> tuple:
    """:func:`_gpu_nics` of the GPU of ``gpus`` whose NICs give a peer across nodes the fewest
    channels (NCCL's ``ncclTopoComputeP2pChannels`` takes the least over a node's GPUs, so no
    rank order changes it; adv27 F2: the first rank's alone, a failed NIC cable there cut every
    send of the communicator, NVLink ones too, to one channel). A GPU none of whose nearest
    NICs has a working port is left out (its traffic leaves by another rail's NIC, which the
    routing picks); (0, 0) where no GPU has one. Each GPU's figure is worked out once while the
    graph is unchanged."""
    memo = graph_memo(graph, "gpu-nics", dict)
    best, least = (0, 0.0), None
    for gpu in dict.fromkeys(gpus):
        count, bw = memo[gpu] if gpu in memo else memo.setdefault(gpu, _gpu_nics(graph, gpu))
        if count == 0:
            continue
        per_gpu = _net_channels(count, bw)
        if least is None or per_gpu < least:
            best, least = (count, bw), per_gpu
    return best


def p2p_comm(graph, comm_ranks, hw, channels=None) -> P2pComm:
    """The :class:`P2pComm` of a communicator of GPU ranks ``comm_ranks`` on ``graph`` whose
    NCCL view is ``hw`` (:class:`~._nccl_model.Hardware`: the generation, whether the GPUs
    share an NVSwitch); ``channels`` NCCL's channels where the call sets them (else NCCL's own:
    32 P2P channels on one NVSwitch node, NCCL's channel count rounded up elsewhere).

    >>> import topologies as tp
    >>> from ._hardware import describe
    >>> from ._layout import participants
    >>> g = tp.rail_optimized(nodes=2)
    >>> ranks, layout = participants(g, "send_recv", [0, 8], None)
    >>> c = p2p_comm(g, [0, 8], describe(g, ranks, layout))
    >>> c.per_peer, c.p2p_channels, c.chunk, c.channels(1 << 30), round(c.nvlink_view / 1e9, 1)
    (4, 4, 131072, 4, 370.8)
    """
    nodes_of = gpu_nodes(graph)
    first = nodes_of[comm_ranks[0]]
    servers = [graph.nodes[nodes_of[r]].get("server") for r in comm_ranks]
    per_server = Counter(servers)
    nodes, ppn = len(per_server), max(per_server.values())
    nvswitch = hw.intra == "nvlink" and hw.nvlink_bw > 0
    view = 0.0
    if nvswitch:
        edge = next((graph.edges[first, v] for v in graph.successors(first)
                     if graph.nodes[v].get("kind") == "nvswitch"), {})
        view = _view(edge.get("tech", ""), float(edge.get("capacity", hw.nvlink_bw)))
    per_link = _NVLINK_GBS.get(hw.generation or "", 20.0) * 1e9
    links = max(1, round(view / per_link)) if nvswitch else 0
    # an NVLink mesh (no NVSwitch; hw.nvlink_bw its GPU's pairs together): a peer's channels
    # count the links of its own pair (src/graph/paths.cc:936 of master 5067397c, ncclTopoGetNchannels:
    # 2 x path bw / ncclTopoNVLinkBw, rounded up to a power of two at :989)
    pairs = [graph.edges[first, nodes_of[r]] for r in comm_ranks
             if graph.has_edge(first, nodes_of[r]) and graph.nodes[nodes_of[r]].get("kind") == "gpu"]
    mesh = nvswitch and not any(graph.nodes[v].get("kind") == "nvswitch" for v in graph.successors(first))
    if mesh and pairs:
        links = max(1, min(round(_pair_view(e) / per_link) for e in pairs))
        # what a channel moves is the GPU's (its SMs'), not the communicator's: every NVLink of it
        view = sum(_pair_view(e) for _, v, e in graph.out_edges(first, data=True)
                   if graph.nodes[v].get("kind") == "gpu" and str(e.get("tech", "")).startswith("nvlink"))
    if channels is not None:
        p2p_channels = _pow2_up(min(MAX_CHANNELS, int(channels)))
    elif nodes == 1 and mesh:
        # NCCL's p2pnChannels: its channel count with the run-time copy (twice the tuner's),
        # rounded up to a power of two (paths.cc:980-990, ncclTopoComputeP2pChannels): SURF Snellius' 4 H100
        # print "24 coll channels, ... 32 p2p channels, 16 p2p channels per peer"
        # (the communicator's channels, not the routed pair's: a send inside four mesh GPUs
        # has the four's 12, the pair alone 4)
        local = [nodes_of[r] for r in comm_ranks]
        pairs_gbs = mesh_pairs(graph, local)
        comm_channels = hw.channels if pairs_gbs is None else mesh_ring_channels(pairs_gbs, len(local),
                                                                                 hw.generation)
        p2p_channels = _pow2_up(run_channels(comm_channels, 1))
    else:       # one NVSwitch node: its 24 run channels rounded up, NCCL's "32 p2p channels" (8-GPU H100 logs)
        searched = search_view(graph, [nodes_of[r] for r in comm_ranks], hw.generation, nodes, nvswitch)
        nics = node_nics(graph, servers[0], nodes)
        p2p_channels = _pow2_up(min(MAX_CHANNELS, nccl_channels(nodes, ppn, nics, nvswitch, **searched)))
    nic_count, nic_bw = _fewest_nics(graph, [nodes_of[r] for r in comm_ranks]) if nodes > 1 else (0, 0.0)
    per_peer = p2p_channels_per_peer(len(comm_ranks), nodes, p2p_channels, links, nic_count, nic_bw)
    gpu = graph.nodes[first].get("gpu_type", "")
    if nodes > 1:       # Grace-Blackwell hosts double the network chunk (src/init.cc computeBuffSizes)
        chunk = _NET_CHUNK * (2 if gpu in ("gb200", "gb300") else 1)
    else:
        chunk = _NVL_CHUNK if nvswitch else _PCI_CHUNK
    return P2pComm(len(comm_ranks), nodes, per_peer, p2p_channels, chunk, view, fewest=min(per_server.values()))


def with_communicator(graph, ranks, hw, channels=None, all_to_all=False):
    """``hw`` (:class:`~._nccl_model.Hardware`) with the :class:`P2pComm` of the communicator of
    GPU ranks ``ranks`` (None: every GPU of ``graph``; checked as every call's ranks are)."""
    nodes = gpu_nodes(graph)
    comm = list(range(len(nodes))) if ranks is None else _checks.rank_indices(graph, ranks, nodes=nodes)
    return replace(hw, p2p=replace(p2p_comm(graph, comm, hw, channels), all_to_all=all_to_all, crosses=hw.nodes > 1))


def least_transfer(hw, size: float, model=None) -> float:
    """The least seconds a send of ``size`` bytes takes on ``hw.p2p``'s channels, a channel's rate
    times a calibration ``model``'s ``p2p_bandwidth`` (0.0: no communicator, no bound)."""
    if getattr(hw, "p2p", None) is None:
        return 0.0
    return hw.p2p.least_transfer(size, 1.0 if model is None else model.p2p_bandwidth)


def p2p_bound(steps, time: float, size: float, hw, model=None) -> tuple:
    """``(steps, time, scale)`` of a send / receive whose flows were solved as ``steps`` in
    ``time`` seconds, with its transfer no shorter than its channels allow
    (:func:`least_transfer`, a calibration ``model``'s factor on a channel's rate): where that
    binds, the steps' transfers stretched alike, no link their bottleneck, and ``scale`` (< 1)
    the factor on the links' loads.

    >>> from ._nccl_model import Hardware
    >>> from ._results import CollectiveStep
    >>> comm = P2pComm(10, 10, 1, 2, 128 * 1024, nvlink_view=370.8e9, crosses=True)
    >>> hw = Hardware(ranks=10, nodes=10, p2p=comm)
    >>> st = CollectiveStep(count=1, flows=1, bytes=1e9, transfer=1e9 / 46.6e9, latency=5e-6, bottleneck=())
    >>> _, t, scale = p2p_bound((st,), 5e-6 + st.transfer, 1e9, hw)
    >>> round(1e9 / (t - 5e-6) / 1e9, 1), round(scale, 3)           # 14 of the 46.6 GB/s the flow had
    (14.0, 0.3)
    """
    transfer = transfer_of(steps)
    least = least_transfer(hw, size, model)
    if not (transfer > 0 and least > transfer):         # an inf transfer (stalled) stays
        return steps, time, 1.0
    scale = least / transfer
    return (tuple(replace(st, transfer=st.transfer * scale, bottleneck=()) for st in steps), time + least - transfer,
            transfer / least)


def nccl_view(graph, op, group, layout, options, communicator):
    """NCCL's view (:class:`~._nccl_model.Hardware`) of one group's ranks laid out as
    ``layout``; a send's, and an all-to-all's (NCCL runs it as a send to every peer on the same
    P2P channels), with the channels NCCL sizes by its whole ``communicator`` (the ranks as
    given) from the communicator's channel count (``channels=``: NCCL's ``p2pnChannels`` is
    ``nChannels`` rounded up to a power of two, src/graph/paths.cc ncclTopoComputeP2pChannels);
    not with ``step_latency=``, which turns NCCL's model off: a pure flow model, no channel bound."""
    # once per group and layout in the call (a step's reduce-scatter and all-gather share 2,048 groups)
    hw = _checks.block_memo(graph, ("describe", tuple(group), layout, options.channels, repr(options.efficiency),
                                    options.pxn, options.nvls_channels),
                            lambda: describe(graph, group, layout, options.channels, options.efficiency, options.pxn,
                                             options.nvls_channels))
    if options.tuner and (why := release_predates(hw.generation, options.nccl_version)):
        first = FIRST_TUNED[hw.generation]
        raise ValueError(f"nccl_version: {why}; the model follows NCCL {first[0]}.{first[1]} or later on them (as "
                         "given, or a log's NCCL version line: name such a release, or none for the newest)")
    if op in ("send_recv", "all_to_all") and options.tuner:
        hw = with_communicator(graph, communicator, hw, options.channels, all_to_all=op == "all_to_all")
    return hw


def channels_run(algorithm, protocol, size, ranks, hw) -> int:
    """The channels NCCL runs ``algorithm`` / ``protocol`` on at ``size`` bytes, those its time is
    computed with: a send's P2P channels; NVLS's own for NVLS and NVLSTree (``comm->nvlsChannels``,
    :attr:`~._nccl_model.Hardware.nvls_run`); ring and tree drop channels below their thresholds
    (:func:`~._pipeline.channels_used`); else the communicator's count."""
    if getattr(hw, "p2p", None) is not None:
        return hw.p2p.channels(size)
    if algorithm in ("nvls", "nvls_tree"):
        return hw.nvls_run
    if algorithm in PIPELINED and protocol in PROTOCOLS:
        return channels_used(algorithm, protocol, size, ranks, hw.channels)
    return hw.channels
