"""The channels NCCL sets for a communicator, from its graph search (``src/graph/search.cc``) and
the copies it adds when it connects the rings (``src/graph/connect.cc``; master 5067397c): two
counts, because NCCL's tuner and its kernels see different ones.

* The **graph's** channels (``graph->nChannels``) are what the tuner multiplies its per-channel
  bandwidth caps by (``src/graph/tuning.cc:324-335``: ``nChannels x perChMaxRingLL128Bw``, ...).
  The search finds as many rings as the links carry at one per-channel speed, then
  ``ncclTopoDupChannels`` doubles them, halving the speed, at 25 GB/s a channel or more, unless
  sm > 80, under 50 GB/s and more than 4 channels (search.cc:1036-1047).
* The **run's** channels (``comm->nChannels``, the ``N coll channels`` NCCL prints) are what the
  kernels split a buffer over: twice the graph's (connect.cc:460, every communicator), twice
  again on sm90 and later across nodes where a channel's speed is over 45 GB/s and fewer than 16
  run (connect.cc:476).

A DGX H100 (18 NVLinks a GPU, 370.8 GB/s as NCCL counts them): 6 rings at 60 GB/s, doubled to
12 at 30 (the tuner's), 24 run ("24 coll channels" in NCCL's logs of 8-GPU H100 nodes); two of
them over 8 NDR NICs (48 GB/s a channel: no doubling at sm90 with 8 channels): 8 and 16.
Units: GB/s as NCCL's search counts them (its speed arrays are GB/s).
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import permutations

import numpy as np

from .. import _checks
from ._options import MAX_CHANNELS

__all__ = ["inter_cpu_gbs", "mesh_ring_channels", "nccl_channels", "nccl_graph_channels", "nvlink_ring_bound",
           "nvls_channel_count",
           "INTER_CPU_GBS", "NVLS_CHANNELS", "P2P_CHANNEL_SHARE"]

# The most channels NCCL's ring graph keeps: MAXCHANNELS / 2 (init.cc:1177 ringGraph->maxChannels,
# which ncclTopoDupChannels' doubling stops at, search.cc:1042), MAXCHANNELS being 64 from NCCL
# 2.25 (device.h:91 of master 5067397c, 62 of v2.25.1) and 32 before: 32 for NCCL 2.30, as this model
_MAX_CHANNELS = MAX_CHANNELS // 2
# NCCL's per-channel speeds of a ring search inside a node, GB/s (src/graph/search.cc:1051
# speedArrayIntra, :1057 sm90SpeedArrayIntra, :1063 sm100SpeedArrayIntra; master 5067397c, as
# 2.22's): the search starts at the first below the best path's bandwidth and goes down
_INTRA_SPEEDS = {"hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                 "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
_SM80_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
# ... and across nodes (search.cc:1052 speedArrayInter, :1058 sm90SpeedArrayInter, :1064
# sm100SpeedArrayInter)
_INTER_SPEEDS = {"hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                            1.2, 0.24, 0.12),
                 "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0,
                               12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)}
_SM80_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
               0.24, 0.12)
_COMPCAP = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}
#: NCCL's bandwidth of the link between two CPU sockets, GB/s (src/graph/topo.h:26-34 of master
#: 5067397c, read by topo.cc:60-82 ncclTopoGetInterCpuBw): Intel by make (BDW_QPI_BW 6, SKL_QPI_BW
#: 10, SRP_QPI_BW 22, ERP_QPI_BW 40; a make NCCL does not name gets Broadwell's 6, topo.cc:71-74),
#: AMD_BW 16, ARM_BW 6
INTER_CPU_GBS = {("intel", "broadwell"): 6.0, ("intel", "skylake"): 10.0, ("intel", "sapphire_rapids"): 22.0,
                 ("intel", "emerald_rapids"): 40.0, ("intel", None): 6.0, ("amd", None): 16.0, ("arm", None): 6.0}


def inter_cpu_gbs(cpu: str, make: str | None = None) -> float:
    """NCCL's bandwidth (GB/s) of the socket link of a host whose CPUs are ``cpu`` (``"intel"``,
    ``"amd"``, ``"arm"``) of ``make`` (Intel's: ``"skylake"``, ...; None: not known):
    :data:`INTER_CPU_GBS`, Intel's default (Broadwell's) for a make it does not list.

    >>> inter_cpu_gbs("intel", "sapphire_rapids"), inter_cpu_gbs("intel"), inter_cpu_gbs("amd")
    (22.0, 6.0, 16.0)
    """
    if (cpu, None) not in INTER_CPU_GBS:
        raise ValueError(f"cpu must be one of intel, amd, arm, got {cpu!r}")
    return INTER_CPU_GBS.get((cpu, make), INTER_CPU_GBS[cpu, None])


#: NVLS's channels (comm->nvlsChannels, src/transport/nvls.cc:155-157 and ncclNvlsTuning; 2.27-2.29
#: the same): 16 on sm90; sm100 24 inside one NVLink domain, 32 across nodes (2.30's
#: ncclNvlsTreeSm100Tuning moves the multi-node count by NIC speed: not modelled)
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}


def nvls_channel_count(generation: str | None, nodes: int) -> int:
    """NCCL's own NVLS channel count on ``nodes`` nodes of ``generation`` GPUs
    (:data:`NVLS_CHANNELS`; 16 where the generation is not listed).

    >>> nvls_channel_count("hopper", 2), nvls_channel_count("blackwell", 1), nvls_channel_count("blackwell", 4)
    (16, 24, 32)
    """
    return NVLS_CHANNELS.get(generation or "", (16, 16))[nodes > 1]

#: the most a P2P channel moves, as a share of the GPU's NVLink bandwidth (:attr:`~._p2p.P2pComm.nvlink_view`:
#: 370.8 GB/s on H100, 240 on A100, NCCL's ``links x ncclTopoNVLinkBw``). Fitted on the 76 send /
#: receive points of the corpus of 2026-12-05 (xxrjun/nccl-tests-cluster H100 over NVLink and NDR,
#: li-plus A100 over NVLink; 0.057, leave-one-source-out folds 0.054-0.060). Measured a channel:
#: 18.7-20.4 GB/s over H100 NVLink on one node (5.4 %), 13.9 GB/s over A100 NVLink (5.8 %). Across
#: the network a channel moves NCCL's 14 GB/s (:data:`~._p2p.NET_CHANNEL_RATE`, since 2026-12-07):
#: on today's corpus (Together's B200 sends added) ``benchmarks/validate.py`` fits 0.054 (folds
#: 0.0537-0.0541); the shipped value is kept because it also prices a Simple collective's idle-channel
#: CTAs (``_nccl_timing._cta_rate``), whose points a change would move: to refit with them.
P2P_CHANNEL_SHARE = 0.057


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


def _doubled(n: int, bw: float, generation) -> tuple:
    """``ncclTopoDupChannels`` (search.cc:1036-1047): ``(channels, GB/s a channel)`` doubled, the
    speed halved, at 25 GB/s and more unless sm > 80, under 50 GB/s and more than 4 channels."""
    if bw >= 25.0 and not (_COMPCAP.get(generation or "", 80) > 80 and bw < 50.0 and n > 4):
        dup = min(2 * n, _MAX_CHANNELS)
        return dup, bw / math.ceil(dup / n)
    return n, bw


def _searched(speeds, max_bw: float, total: float, rings, generation) -> tuple:
    """``(channels, GB/s a channel)`` of NCCL's ring search (``ncclTopoCompute``): ``rings(s)`` the
    rings the links carry at speed ``s``.

    1. per-channel speed: the first of ``speeds`` no more than the best path's bandwidth
       (``max_bw``) and the GPU's total (``total``, search.cc:1170-1173);
    2. pass 1 keeps the most ``channels x speed``, stopping where that reaches ``total`` or the
       next speed is under 0.49 of the best (search.cc:1197-1198, 1245);
    3. :func:`_doubled`;
    4. pass 2 tries every faster speed with at least those channels (search.cc:1267-1273).
    """
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
        return 1, speeds[-1]                                # NCCL's fallback: one channel
    n, bw = _doubled(n, bw, generation)
    least = n
    for speed in reversed([s for s in speeds if s > bw]):  # pass 2: at least the channels kept
        found = rings(speed)
        if found >= least and found * speed > n * bw:
            n, bw = found, speed
    return n, bw


def directed_cycles(gpus: int) -> tuple:
    """``(orders, cycles)``: every directed Hamiltonian cycle of ``gpus`` GPUs from GPU 0, as a GPU
    order and as its arcs ``(a, b)``, in the same lexicographic order.

    >>> directed_cycles(3)
    (((0, 1, 2), (0, 2, 1)), (((0, 1), (1, 2), (2, 0)), ((0, 2), (2, 1), (1, 0))))
    """
    orders = tuple((0, *p) for p in permutations(range(1, gpus)))
    return orders, tuple(tuple((c[i], c[(i + 1) % gpus]) for i in range(gpus)) for c in orders)


def mesh_ring_channels(pair_gbs: dict, gpus: int, generation: str | None) -> int:
    """The ring channels of NCCL's graph (the tuner's count) on one node of ``gpus`` GPUs joined
    pairwise by NVLink without an NVSwitch, ``pair_gbs`` NCCL's bandwidth of each directed pair
    (GB/s: the pair's links x ``ncclTopoNVLinkBw``, 20 a link on A100, 20.6 on H100): NCCL's
    search (:func:`_searched`) where a channel at speed ``s`` takes ``s`` on each arc of its ring
    (every directed Hamiltonian cycle is one, :func:`~._layout.mesh_cycles`), an arc carrying
    ``floor(bw / s)`` (followPath, search.cc:81).

    NCCL runs twice as many (:func:`nccl_channels`). 4 H100 of 6 NVLinks a pair: 6 rings at
    60 GB/s (360 < 370.8), doubled to 12 at 30 (SURF Snellius' log prints "24 coll channels");
    4 A100 of 4 a pair: 6 at 40 = totalBw, doubled to 12.

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
    _, cycles = directed_cycles(gpus)
    total = max(sum(bw for (a, _), bw in pair_gbs.items() if a == g) for g in range(gpus))

    def rings(speed):
        # SUB_ROUND keeps a thousandth (search.cc:79): an arc of 123.6 carries 2 x 60, not 3 x 41.2
        return _packed(cycles, {arc: int(math.floor(bw / speed + 1e-6)) for arc, bw in pair_gbs.items()})
    return _searched(_INTRA_SPEEDS.get(generation or "", _SM80_INTRA), max(pair_gbs.values()), total, rings,
                     generation)[0]


def _fits(gbs: float, speed: float) -> int:
    """Rings at ``speed`` a link of ``gbs`` carries (GB/s; NCCL keeps a thousandth, search.cc:79)."""
    return _MAX_CHANNELS if gbs == math.inf else int(math.floor(gbs / speed + 1e-6))


def nvlink_ring_bound(gpus: int, nvlink_gbs: float, speed: float) -> int:
    """The most rings at ``speed`` (GB/s a ring) a node of ``gpus`` GPUs behind an NVSwitch
    carries across nodes, each GPU's NVLink ``nvlink_gbs`` each way: a ring enters the node at
    one GPU and leaves it at another, sending ``speed`` over NVLink out of every GPU but the one
    it leaves by (and into every one but the one it enters by), so ``r`` rings take ``r (G - 1)``
    of the ``G floor(nvlink / speed)`` NVLink sends the GPUs have (NCCL's search reserves the
    speed on each link a ring's path takes, search.cc followPath): ``r <= G floor(nvlink / s) /
    (G - 1)``. A node's one GPU sends nothing over NVLink: no bound.

    GB200 NVL72 (72 GPUs of 18 NVLinks at 40.1 GB/s, 721.8): 15 rings at 48 GB/s (15 a GPU,
    1080 / 71), 16 at 45.1 (16 a GPU, 1152 / 71 = 16.2).

    >>> nvlink_ring_bound(72, 721.8, 48.0), nvlink_ring_bound(72, 721.8, 45.1), nvlink_ring_bound(8, 370.8, 48.0)
    (15, 16, 8)
    """
    if gpus < 2:
        return _MAX_CHANNELS
    return (gpus * int(math.floor(nvlink_gbs / speed + 1e-6))) // (gpus - 1)


@lru_cache(maxsize=256)
def _graph(nodes: int, gpus_per_node: int, nics_per_node: int, nvswitch: bool, generation, nvlink_gbs,
           net_gbs, pci_gbs=None, cpu_gbs=None) -> tuple:
    """``(channels, GB/s a channel or None)`` of NCCL's ring graph (:func:`nccl_graph_channels`).
    ``cpu_gbs``: PCIe GPUs of a node under two CPU sockets, the socket link's bandwidth each way,
    which a ring through them crosses once each way inside a node, and across nodes once (one
    way: NCCL's rings enter a node on one socket and leave on the other, half of them each way)."""
    if nodes > 1:
        # NCCL's search of rings at a speed the NIC's path carries: one a NIC (no more than the GPUs
        # a node gives: a ring through one GPU a node can only use that GPU's NIC), and no more
        # than the NVLink inside a node carries (:func:`nvlink_ring_bound`)
        base = max(1, min(nics_per_node, gpus_per_node, _MAX_CHANNELS))
        if net_gbs is None:
            return base, None

        def rings(s):
            n = base if s <= net_gbs + 1e-6 else 0
            if nvswitch and nvlink_gbs is not None:
                n = min(n, nvlink_ring_bound(gpus_per_node, nvlink_gbs, s))
            if not nvswitch and cpu_gbs is not None:
                n = min(n, 2 * _fits(cpu_gbs, s))
            return n
        # totalBw: a GPU's NVLink, else its PCIe link (search.cc:30-38 getTotalBw)
        total = nvlink_gbs if nvswitch and nvlink_gbs is not None else pci_gbs or math.inf
        return _searched(_INTER_SPEEDS.get(generation or "", _SM80_INTER), net_gbs, total, rings, generation)
    if not nvswitch:                            # GPUs over PCIe: a ring takes s of each GPU's link
        if pci_gbs is None:
            return 1, None
        return _searched(_INTRA_SPEEDS.get(generation or "", _SM80_INTRA), pci_gbs, pci_gbs,
                         lambda s: min(_MAX_CHANNELS, _fits(pci_gbs, s), _fits(cpu_gbs or math.inf, s)), generation)
    if nvlink_gbs is None:                      # no NVLink figure: one channel a GPU
        return min(_MAX_CHANNELS, max(1, gpus_per_node)), None
    # through an NVSwitch every ring at speed s takes s of each GPU's NVLinks each way
    return _searched(_INTRA_SPEEDS.get(generation or "", _SM80_INTRA), nvlink_gbs, nvlink_gbs,
                     lambda s: min(_MAX_CHANNELS, int(math.floor(nvlink_gbs / s + 1e-6))), generation)


def _key(nodes, gpus_per_node, nics_per_node, nvswitch, generation, *gbs) -> tuple:
    """:func:`_graph`'s arguments checked, the figures rounded (a cache key)."""
    if generation is not None and generation not in _COMPCAP:
        raise ValueError(f"generation must be one of {', '.join(_COMPCAP)} or None, got {generation!r}")
    if not isinstance(nvswitch, (bool, np.bool_)):
        raise ValueError(f"nvswitch must be True or False, got {nvswitch!r}")
    nodes = _checks.integer("nodes", nodes)
    # across nodes every ring leaves a node through a NIC: none is no ring (nics_per_node 0 is one GPU node's)
    nics = _checks.integer("nics_per_node", nics_per_node, minimum=1 if nodes > 1 else 0)
    names = ("nvlink_gbs", "net_gbs", "pci_gbs", "cpu_gbs")
    return (nodes, _checks.integer("gpus_per_node", gpus_per_node), nics, bool(nvswitch), generation,
            *(None if x is None else round(_checks.positive_number(n, x, "GB/s"), 3) for n, x in zip(names, gbs)))


def nccl_graph_channels(nodes: int, gpus_per_node: int, nics_per_node: int, nvswitch: bool, *,
                        generation: str | None = None, nvlink_gbs: float | None = None,
                        net_gbs: float | None = None, pci_gbs: float | None = None,
                        cpu_gbs: float | None = None) -> int:
    """The channels of NCCL's ring graph, which its tuner multiplies its per-channel caps by.

    Across nodes: one ring per NIC (no more than the GPUs a node gives), at the first of the
    generation's inter-node speeds no more than ``net_gbs`` (GB/s: the NIC's rate and the GPU's
    PCIe path to it as NCCL counts them, e.g. 48 for a 400 Gb/s NIC behind PCIe Gen5 x16, 24
    for 200 Gb/s), doubled as :func:`_doubled` says. Inside one NVSwitch node: NCCL's search over
    each GPU's ``nvlink_gbs`` (links x ``ncclTopoNVLinkBw``); inside one node of PCIe GPUs, over
    each GPU's PCIe link, ``pci_gbs`` as NCCL counts it (48 GB/s for Gen5 x16). PCIe GPUs of a
    node under two CPU sockets: ``cpu_gbs``, NCCL's bandwidth of the socket link
    (:func:`inter_cpu_gbs`), which every ring crosses (once each way inside a node; once across
    nodes, half the rings each way), on one node and across nodes. Without the
    figures: one channel per NIC across nodes, per GPU in an NVSwitch node, 1 over PCIe.

    >>> nccl_graph_channels(1, 8, 8, True, generation="hopper", nvlink_gbs=370.8)
    12
    >>> nccl_graph_channels(2, 8, 8, True, generation="hopper", net_gbs=48.0)
    8
    >>> nccl_graph_channels(2, 8, 4, True, generation="hopper", net_gbs=48.0)   # 4 rings at 48: doubled
    8
    >>> nccl_graph_channels(2, 8, 8, False, generation="hopper", net_gbs=48.0, pci_gbs=48.0, cpu_gbs=22.0)
    2
    """
    return _graph(*_key(nodes, gpus_per_node, nics_per_node, nvswitch, generation, nvlink_gbs, net_gbs, pci_gbs,
                        cpu_gbs))[0]


def run_channels(graph_channels: int, nodes: int, generation=None, speed=None) -> int:
    """The channels NCCL's kernels run (``comm->nChannels``) given its graph's: twice them
    (connect.cc:460), twice again on sm90 and later across nodes below 16 where a channel's
    ``speed`` (GB/s, after :func:`_doubled`) is over 45 (connect.cc:476), at most MAXCHANNELS.

    >>> run_channels(12, 1), run_channels(8, 2, "hopper", 48.0), run_channels(2, 2, "hopper", 48.0)
    (24, 16, 8)
    """
    n = min(MAX_CHANNELS, 2 * int(graph_channels))
    if _COMPCAP.get(generation or "", 80) >= 90 and nodes > 1 and speed is not None and speed > 45.0 and n < 16:
        n = min(MAX_CHANNELS, 2 * n)
    return n


def nccl_channels(nodes: int, gpus_per_node: int, nics_per_node: int, nvswitch: bool, *,
                  generation: str | None = None, nvlink_gbs: float | None = None,
                  net_gbs: float | None = None, pci_gbs: float | None = None, cpu_gbs: float | None = None) -> int:
    """The channels NCCL runs a communicator's ring and tree collectives on (the ``N coll
    channels`` it prints): :func:`run_channels` of :func:`nccl_graph_channels` (same arguments).
    Override with ``channels=``.

    >>> nccl_channels(1, 8, 8, True, generation="hopper", nvlink_gbs=370.8)   # "24 coll channels"
    24
    >>> nccl_channels(2, 8, 8, True, generation="hopper", net_gbs=48.0), nccl_channels(2, 1, 1, False)
    (16, 2)
    >>> nccl_channels(2, 4, 1, False, generation="hopper", net_gbs=48.0)   # 4 H100 on one 400G NIC: "4 coll channels"
    4
    """
    n, speed = _graph(*_key(nodes, gpus_per_node, nics_per_node, nvswitch, generation, nvlink_gbs, net_gbs, pci_gbs,
                            cpu_gbs))
    return run_channels(n, nodes, generation, speed)
