"""What NCCL's tuner sees of a collective's ranks on a cluster graph: the GPU generation,
nodes, the intra-node hop class, NVLS support, a GPU's NVLink bandwidth and the channel
count NCCL would set (:class:`~._nccl_model.Hardware`)."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from itertools import permutations

import numpy as np

import topologies as tp

from .. import _checks
from ..routing import gpu_nodes, graph_memo, link_efficiency, ranges
from ._layout import mesh_cycles, near_nics, near_nics_of, rank_server_codes, server_nics
from ._nccl import GPU_GENERATION
from ._nccl_model import NVLS_EFFICIENCY_BY_GENERATION, PATH_NVB, PATH_NVL, Hardware
from ._nccl_paths import type_inter, type_intra
from ._options import MAX_CHANNELS

__all__ = ["GPU_GENERATION", "describe", "near_nics", "nccl_channels", "nvlink_edges", "server_transport",
           "sharing_nics", "mesh_ring_channels", "mesh_pairs"]
# The most channels NCCL's ring graph keeps: MAXCHANNELS / 2 (init.cc:1177 ringGraph->maxChannels,
# which ncclTopoDupChannels' doubling stops at, search.cc:1042), MAXCHANNELS being 64 from NCCL
# 2.25 (device.h:91 of master 5067397c, 62 of v2.25.1) and 32 before: 32 channels for NCCL 2.30,
# as this model (16 for NCCL 2.24 and earlier; the doubling connect.cc:460 adds at run time is not
# in the count the tuner's bandwidth sums)
_MAX_CHANNELS = MAX_CHANNELS // 2
# NCCL's per-channel speeds of an intra-node ring search, GB/s (src/graph/search.cc:1051
# speedArrayIntra, :1057 sm90SpeedArrayIntra, :1063 sm100SpeedArrayIntra; master 5067397c, as
# 2.22's): the search starts at the first below the best path's bandwidth and goes down
_INTRA_SPEEDS = {"hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                 "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
_SM80_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_COMPCAP = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}


def _packed(cycles, capacity: dict) -> int:
    """The most rings (``cycles``, each a tuple of arcs, any used several times) whose arcs'
    uses stay within ``capacity`` (arc -> channels it carries): NCCL's search backtracks
    through them until it finds the most channels (search.cc ncclTopoSearchRec)."""
    best = 0

    def grow(i, used, room):
        nonlocal best
        best = max(best, used)
        if i == len(cycles) or best >= _MAX_CHANNELS:
            return
        most = min(room[a] for a in cycles[i])
        for k in range(most, -1, -1):
            for a in cycles[i]:
                room[a] -= k
            grow(i + 1, used + k, room)
            for a in cycles[i]:
                room[a] += k
    grow(0, 0, dict(capacity))
    return min(best, _MAX_CHANNELS)


def mesh_ring_channels(pair_gbs: dict, gpus: int, generation: str | None) -> int:
    """The ring channels NCCL's search sets on one node of ``gpus`` GPUs joined pairwise by
    NVLink without an NVSwitch, ``pair_gbs`` NCCL's bandwidth of each directed pair (GB/s: the
    pair's links x ``ncclTopoNVLinkBw``, 20 a link on A100, 20.6 on H100), following NCCL's
    ``ncclTopoCompute`` (src/graph/search.cc, master 5067397c):

    1. per-channel speed: the first of the generation's intra speeds (search.cc:1051-1063) no more
       than the best path's bandwidth (``maxBw``) and the GPU's total (``totalBw``,
       search.cc:1170-1173); a channel at speed ``s`` takes ``s`` on each arc of its ring (every
       directed Hamiltonian cycle is one, :func:`~._layout.mesh_cycles`), an arc carrying
       ``floor(bw / s)`` (followPath, search.cc:81);
    2. pass 1 keeps the most ``channels x speed``, stopping where that reaches ``totalBw`` or the
       next speed is under 0.49 of the best (search.cc:1197-1198, 1245);
    3. ``ncclTopoDupChannels`` doubles the channels, halving the speed, at 25 GB/s and more, unless
       sm > 80, under 50 GB/s and more than 4 channels (search.cc:1036-1047);
    4. pass 2 tries every faster speed with at least those channels (search.cc:1267-1273).

    The tuner's ``nChannels`` (NCCL prints twice as many: the copy connect.cc adds at run time).
    4 H100 of 6 NVLinks a pair: 6 rings at 60 GB/s (360 < 370.8), doubled to 12 at 30 (SURF
    Snellius' log prints "24 coll channels"); 4 A100 of 4 a pair: 6 at 40 = totalBw, doubled to 12.

    >>> h100 = {(a, b): 6 * 20.6 for a in range(4) for b in range(4) if a != b}
    >>> a100 = {(a, b): 4 * 20.0 for a in range(4) for b in range(4) if a != b}
    >>> mesh_ring_channels(h100, 4, "hopper"), mesh_ring_channels(a100, 4, "ampere")
    (12, 12)
    """
    return _mesh_ring_channels(tuple(sorted((k, round(float(v), 3)) for k, v in pair_gbs.items())), int(gpus),
                               generation)


@lru_cache(maxsize=256)
def _mesh_ring_channels(pairs: tuple, gpus: int, generation) -> int:
    """:func:`mesh_ring_channels` of ``pairs`` (sorted ``(arc, GB/s)`` items), kept: a training
    step describes every group of a job."""
    pair_gbs = dict(pairs)
    cycles = [tuple((c[i], c[(i + 1) % gpus]) for i in range(gpus))
              for c in ((0, *p) for p in permutations(range(1, gpus)))]
    speeds = _INTRA_SPEEDS.get(generation or "", _SM80_INTRA)
    max_bw = max(pair_gbs.values())
    total = max(sum(bw for (a, _), bw in pair_gbs.items() if a == g) for g in range(gpus))

    def rings(speed):
        # SUB_ROUND keeps a thousandth (search.cc:79): an arc of 123.6 carries 2 x 60, not 3 x 41.2
        return _packed(cycles, {arc: int(math.floor(bw / speed + 1e-6)) for arc, bw in pair_gbs.items()})

    i = 0
    while i < len(speeds) - 1 and (speeds[i] > max_bw or speeds[i] > total):
        i += 1
    n, bw = 0, speeds[i]
    while True:                                             # pass 1
        found = rings(speeds[i])
        if found * speeds[i] > n * bw:
            n, bw = found, speeds[i]
        if n >= _MAX_CHANNELS or n * bw >= total:
            break
        if i < len(speeds) - 1 and (n == 0 or speeds[i + 1] / bw > 0.49):
            i += 1
            continue
        break
    if n == 0:
        return 1                                            # NCCL's fallback: one channel
    if bw >= 25.0 and not (_COMPCAP.get(generation or "", 80) > 80 and bw < 50.0 and n > 4):
        dup = min(2 * n, _MAX_CHANNELS)
        n, bw = dup, bw / math.ceil(dup / n)
    least = n
    for speed in reversed([s for s in speeds if s > bw]):  # pass 2: at least the channels kept
        found = rings(speed)
        if found >= least and found * speed > n * bw:
            n, bw = found, speed
    return n


def mesh_pairs(graph, gpus, efficiency=None) -> dict | None:
    """NCCL's bandwidth (GB/s) of each directed pair of ``gpus`` (indices) joined by their own
    NVLink edge -- the edge's capacity at NCCL's view of it (the catalogue's NVLink efficiency is
    ``ncclTopoNVLinkBw`` over the link's rate) -- or None unless ``gpus`` are one NVLink mesh
    (:func:`~._layout.mesh_cycles`)."""
    if not mesh_cycles(graph, gpus):
        return None
    return {(i, j): _rate(graph.edges[a, b], efficiency) / 1e9
            for i, a in enumerate(gpus) for j, b in enumerate(gpus) if i != j}


def nccl_channels(nodes: int, gpus_per_node: int, nics_per_node: int, nvswitch: bool) -> int:
    """The channel count NCCL sets for a communicator (an approximation of its graph search).

    NCCL's search finds one channel per NIC that the ring crosses nodes on, then doubles
    the channels (``ncclTopoDupChannels``, for channels of 25 GB/s or more); inside one
    NVSwitch node it finds one channel per GPU and doubles them the same way; PCIe-only
    nodes get 2 (the shared logs of 1 and 4 H100s per node on one 400G NIC show 2 and 4).
    At most ``MAXCHANNELS / 2`` = 32 (NCCL 2.25 and later; a whole NVL72 rack). Override with
    ``channels=``.

    >>> nccl_channels(1, 8, 8, True), nccl_channels(2, 8, 8, True), nccl_channels(2, 1, 1, False)
    (16, 16, 2)
    >>> nccl_channels(1, 72, 72, True)
    32
    """
    if nodes > 1:
        base = max(1, min(nics_per_node, gpus_per_node))
    else:
        base = gpus_per_node if nvswitch else 1
    return max(2, min(_MAX_CHANNELS, 2 * base))


def _nvswitch_of(graph, node):
    return next((v for v in graph.successors(node) if graph.nodes[v].get("kind") == "nvswitch"), None)


def nvlink_edges(graph, gpus) -> list:
    """The NVLink edges of each of ``gpus``, to its NVSwitch and back, whose least effective
    capacity is the ``nvlink_bw`` NCCL's tuner sees (:func:`describe`: NCCL's search reserves a
    channel's bandwidth both ways on the NVLinks of every GPU it passes, ``src/graph/search.cc``
    ``ncclTopoSearchTryNvls``, so the slowest GPU's, either way, sets the graph's, whichever rank
    it is); [] where one has no NVSwitch."""
    switches = [_nvswitch_of(graph, g) for g in gpus]
    if any(s is None for s in switches):
        return []
    return [e for g, s in zip(gpus, switches) for e in ((g, s), (s, g)) if graph.has_edge(*e)]


def _rate(d, efficiency) -> float:
    """A link's capacity times its efficiency (bytes/s), ``d`` its edge attributes."""
    return d.get("capacity", 0.0) * link_efficiency(d.get("tech", ""), efficiency, d.get("efficiency"))


def slowest_nvlink(graph, gpus, efficiency) -> float:
    """The least effective capacity (bytes/s) of the NVLink edges of ``gpus`` (:func:`nvlink_edges`),
    0 where one has no NVSwitch; each GPU's kept with the unchanged graph (a job's groups ask
    for thousands)."""
    rates = graph_memo(graph, ("nvlink-rates", repr(efficiency)), dict)
    low = np.inf
    for g in gpus:
        if g not in rates:          # None: no NVSwitch
            edges = nvlink_edges(graph, [g])
            rates[g] = min(_rate(graph.edges[e], efficiency) for e in edges) if edges else None
        if rates[g] is None:
            return 0.0
        low = min(low, rates[g])
    return 0.0 if low == np.inf else float(low)


def _transports(graph) -> dict:
    """Server -> the transport name of its first compute NIC's cable into the fabric (None:
    the technology names none)."""
    out: dict = {}
    for nic, d in graph.nodes(data=True):
        if d.get("kind") != "nic" or d.get("role") != "compute" or d.get("server") in out:
            continue
        for _, v, e in graph.out_edges(nic, data=True):
            if graph.nodes[v].get("kind") == "switch":
                name = e.get("transport")
                if name is None:
                    try:
                        name = tp.get_link(e.get("tech", "")).transport
                    except ValueError:
                        name = None
                out[d.get("server")] = name
                break
    return out


def server_transport(graph, server) -> tp.Transport:
    """The :class:`topologies.Transport` NCCL drives ``server``'s NICs with: the one its NIC
    cables name (edge attribute ``transport``, else the link catalogue's), else NCCL's own.

    >>> import topologies as tp
    >>> server_transport(tp.rail_optimized(2), 0).name
    'nccl_builtin'
    >>> g = tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(nic="efa_100g", nic_ports=4), link="efa_100g")
    >>> round(server_transport(g, 0).net_latency * 1e6)
    75
    """
    return tp.get_transport(graph_memo(graph, "nic_transports", lambda: _transports(graph)).get(server))


def _egress(graph, near, efficiency) -> float:
    """Bytes/s the compute NICs of ``near`` (each GPU's nearest NICs, :func:`near_nics_of`; each
    NIC counted once) send into the fabric: each cable's capacity at its efficiency. NVLSTree's
    heads send through their own GPUs' NICs."""
    return sum(_nic_egress(graph, nic, efficiency) for nic in dict.fromkeys(n for nics in near for n in nics))


def _nic_egress(graph, nic, efficiency) -> float:
    """Bytes/s a compute NIC's cables send into the fabric at their efficiency (0: another role)."""
    if graph.nodes[nic].get("role", "compute") != "compute":
        return 0.0
    return sum(_rate(e, efficiency) for _, v, e in graph.out_edges(nic, data=True)
               if graph.nodes[v].get("kind") == "switch")


def sharing_nics(graph, groups, efficiency, *hws) -> list:
    """``hws`` (NCCL's views of groups run at once in lockstep, ``groups`` their GPU ranks) with
    ``nvlink_bw`` no more than the slowest NVLink of any group's GPUs (:func:`nvlink_edges`), and
    ``net_bw`` no more than the least share of NICs any group has on any server: a NIC nearest
    GPUs of several groups sends its bytes/s for all of them (a job's data-parallel groups on
    servers whose GPUs share NICs leave through the same NICs), and the groups go at the pace of
    the one with the least (NVLSTree's network bound, :func:`~._nccl_timing._network_bound`).

    >>> import topologies as tp
    >>> from ._nccl_model import Hardware
    >>> g = tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(gpus=4, nics=2))
    >>> hw = sharing_nics(g, [[0, 2, 4, 6], [1, 3, 5, 7]], None, Hardware(4, 2, net_bw=94e9))[0]
    >>> round(hw.net_bw / 1e9)            # both groups out through the same 2 NICs a server: half each
    47
    """
    ranks = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
    # each group's NCCL sees its own GPUs' NVLinks: the groups go at the slowest one's pace
    nodes = gpu_nodes(graph)        # once: a look-up per rank cost 0.25 ms (15 s for 30,720 pipeline pairs)
    floor = slowest_nvlink(graph, [nodes[r] for r in ranks], efficiency)
    if floor > 0:
        hws = [replace(hw, nvlink_bw=min(hw.nvlink_bw, floor)) if hw.nvlink_bw > 0 else hw for hw in hws]
    ptr, nic, egress = _nics_by_rank(graph, efficiency)
    member = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    counts = ptr[ranks + 1] - ptr[ranks]
    pairs = np.unique(np.stack([np.repeat(member, counts), nic[ranges(ptr[ranks], counts)],
                                np.repeat(rank_server_codes(graph)[ranks], counts)]), axis=1)
    if not pairs.size:          # no GPU of the groups has a NIC near it
        return list(hws)
    users = np.bincount(pairs[1], minlength=len(egress))          # groups nearest each NIC
    servers = int(pairs[2].max()) + 1
    # each (group, server) present once: a dense groups x servers table took 1 GB and 15 s for
    # a pipeline's 30,720 pairs on 4,096 servers
    _, cell = np.unique(pairs[0] * servers + pairs[2], return_inverse=True)
    mine = np.bincount(cell.reshape(-1), weights=egress[pairs[1]] / users[pairs[1]])
    share = float(mine.min())
    return [replace(hw, net_bw=min(hw.net_bw, share)) if hw.net_bw > 0 and share > 0 else hw for hw in hws]


def _nics_by_rank(graph, efficiency) -> tuple:
    """Per GPU rank its nearest NICs (:func:`near_nics`) as a CSR (``ptr``, NIC numbers) and
    each NIC's egress (bytes/s, :func:`_nic_egress`), kept with the unchanged graph."""
    def build():
        near = near_nics_of(graph, gpu_nodes(graph))
        number = {n: i for i, n in enumerate(dict.fromkeys(n for nics in near for n in nics))}
        ptr = np.concatenate([[0], np.cumsum([len(nics) for nics in near])]).astype(np.int64)
        nic = np.array([number[n] for nics in near for n in nics], dtype=np.int64)
        return ptr, nic, np.array([_nic_egress(graph, n, efficiency) for n in number], dtype=np.float64)
    return graph_memo(graph, ("nics-by-rank", repr(efficiency)), build)


#: GPU types already warned about (once a process)
_WARNED: set = set()
#: the GPU types NCCL's model has a generation for
_KNOWN = frozenset(GPU_GENERATION)


def _say_unknown(names) -> None:
    """Warn once a process for each GPU type NCCL's model has no generation for: a typo of a
    known name ('h100-sxm') or a GpuSpec of one's own is timed with no NVLS and none of the
    per-generation bandwidth caps, which changes the answer (2 x 8 H100: 0.714 -> 0.467 ms)."""
    for name in sorted(map(str, set(names) - _WARNED)):
        _WARNED.add(name)
        _checks.warn_at_caller(f"GPU type {name!r} has no NCCL generation in flowsolver's model (known: "
                               f"{', '.join(sorted(GPU_GENERATION))}): its collectives are timed without NVLS or "
                               "the per-generation bandwidth caps (a misspelt name?)", RuntimeWarning)


def _say_mixed(types) -> None:
    """Warn once a process for each set of GPU types one collective's ranks mix: NCCL's model
    then has no one generation for them (no NVLS, no per-generation caps)."""
    key = "+".join(sorted(map(str, types)))
    if len(types) > 1 and key not in _WARNED:
        _WARNED.add(key)
        _checks.warn_at_caller(f"the ranks mix GPU types {sorted(map(str, types))}: their collectives are timed "
                               "with no GPU generation (no NVLS, no per-generation bandwidth caps)", RuntimeWarning)


def describe(graph, ranks, layout, channels=None, efficiency=None, pxn=True) -> Hardware:
    """The :class:`Hardware` of ``ranks`` (laid out as ``layout``) on ``graph``; ``channels``
    overrides NCCL's channel count, ``efficiency`` the links' (as in :func:`flowsolver.collective`).

    >>> import topologies as tp
    >>> from ._layout import participants
    >>> g = tp.rail_optimized(nodes=2)
    >>> ranks, layout = participants(g, "all_reduce", None, None)
    >>> hw = describe(g, ranks, layout)
    >>> hw.generation, hw.nodes, hw.channels, hw.nvls, round(hw.nvlink_bw / 1e9, 1)
    ('hopper', 2, 16, True, 370.8)
    """
    nodes = gpu_nodes(graph)
    gpus = [nodes[r] for r in ranks]
    types = {graph.nodes[g].get("gpu_type") for g in gpus}
    generation = GPU_GENERATION.get(next(iter(types))) if len(types) == 1 else None
    _say_unknown(types - _KNOWN - {None})
    _say_mixed(types - {None})
    nvswitch = all(_nvswitch_of(graph, g) is not None for g in gpus)
    nvlink_bw = slowest_nvlink(graph, gpus, efficiency) if nvswitch else 0.0
    n_nodes = len(layout.groups)
    ppn = max(len(g) for g in layout.groups)
    nics = server_nics(graph, graph.nodes[gpus[0]].get("server"))
    # servers whose GPUs are joined pairwise by NVLink, no NVSwitch: a GPU's NVLink is the sum of
    # its pairs' (NCCL's getTotalBw, search.cc:30-38), and one node's channels are its search's
    meshes = [] if nvswitch else [mesh_pairs(graph, [gpus[i] for i in group], efficiency)
                                  for group in layout.groups]
    if meshes and all(m is not None for m in meshes):
        nvlink_bw = min(sum(bw for (a, _), bw in m.items() if a == g) for m in meshes for g, _ in m) * 1e9
        if channels is None and n_nodes == 1:       # NCCL's search sees its own link rate, not efficiency=
            view = meshes[0] if efficiency is None else mesh_pairs(graph, [gpus[i] for i in layout.groups[0]])
            channels = mesh_ring_channels(view, ppn, generation)
    if channels is None:
        channels = nccl_channels(n_nodes, ppn, nics, nvswitch)
    # NCCL turns NVLS off where a node holds fewer than two of the communicator's GPUs
    # (src/transport/nvls.cc, ncclNvlsInit: gpuCount < 2): nothing to reduce in the switch
    nvls = nvswitch and generation in NVLS_EFFICIENCY_BY_GENERATION and min(len(g) for g in layout.groups) >= 2
    extra = {}
    if n_nodes > 1:         # across nodes: the network transport's reported latency and settings
        near = near_nics_of(graph, gpus)        # (one look-up of the graph's memo for every group)
        transport = server_transport(graph, graph.nodes[gpus[0]].get("server"))
        nvls = nvls and transport.nvls
        extra = dict(net_latency=transport.net_latency, protocols=transport.protocols,
                     net_bw=min(_egress(graph, [near[i] for i in group], efficiency) for group in layout.groups))
    # the hosts' CPU (each GPU node's ``cpu``; NCCL's cpuVendor is MIXED where they differ)
    cpus = {graph.nodes[g].get("cpu", "intel") for g in gpus}
    # NCCL's NVLink latency row where its ring inside a node runs over NVLink (tuning.cc:285,
    # intraHw: typeIntra == PATH_NVL): an NVSwitch, or GPUs joined straight by NVLink; a node's
    # one GPU counts no hop inside a node (PATH_LOC), and keeps the NVSwitch's row
    groups = [[gpus[i] for i in group] for group in layout.groups]
    kind = PATH_NVL if nvswitch else type_intra(graph, groups)
    intra = ("nvlink" if nvswitch else "pcie") if kind is None else "nvlink" if kind == PATH_NVL else "pcie"
    if n_nodes > 1:         # NCCL's typeInter: a GPU's path to the NIC the ring crosses nodes on
        extra["nic_path"] = type_inter(graph, groups, pxn)
    return Hardware(ranks=len(ranks), nodes=n_nodes, generation=generation, intra=intra,
                    channels=int(channels), nvls=nvls, nvlink_bw=nvlink_bw,
                    pcie_only=kind is not None and kind > PATH_NVB,
                    cpu=cpus.pop() if len(cpus) == 1 else "mixed_arch" if "arm" in cpus else "mixed",
                    single_gpu_node=n_nodes > 1 and min(len(g) for g in layout.groups) == 1, **extra)
