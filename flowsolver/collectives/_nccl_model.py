"""NCCL's tuning model (NCCL 2.30, src/graph/tuning.cc and topo.h; ../shared/REFERENCE.md,
"NCCL's cost model"): per (algorithm, protocol) its latency and the bandwidth it grants a
bus bandwidth, and which pairs NCCL enables for an op on a topology (units: s, bytes/s).

The bus bandwidth ``busbw`` passed in is NCCL's ``nChannels x bw`` of the graph: in
flowsolver the contention-aware flow solve of the ring on the real fabric provides it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._dual import lesser
from ._nccl import _NVLS_BY_GENERATION, PROTOCOLS, nvls_reduces, scaled_sum

__all__ = ["Hardware", "TUNER_ALGORITHMS", "GENERATIONS", "NVLS_MAX_ARITY", "tuner_latency", "tuner_hops", "tuner_algbw",
           "enabled", "predict", "tree_correction", "FIRST_RELEASE", "release_lacks"]

GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
#: flowsolver names of NCCL's algorithms (CollNet is left out: no fabric here offers
#: in-network reduction, so NCCL would never enable it)
TUNER_ALGORITHMS = ("tree", "ring", "nvls", "nvls_tree", "pat")
_US, _GB = 1e-6, 1e9

# NCCL 2.30 tuning.cc baseLat, microseconds, (LL, LL128, Simple)
_BASE = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0),
         "nvls_tree": (0.0, 0.0, 0.0), "pat": (8.0, 8.0, 8.0)}
# NCCL 2.30 tuning.cc hwLat[NVLINK | PCI | NET][algorithm], microseconds, (LL, LL128, Simple)
_HW = {
    "tree": {"nvlink": (0.6, 1.25, 4.0), "pcie": (1.0, 1.9, 4.0), "network": (5.0, 8.5, 14.0)},
    "ring": {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7), "network": (2.7, 4.0, 14.0)},
    "nvls": {"nvlink": (0.0, 0.0, 25.0), "pcie": (0.0, 0.0, 0.0), "network": (0.0, 0.0, 18.0)},
    "nvls_tree": {"nvlink": (0.0, 0.0, 25.0), "pcie": (0.0, 0.0, 0.0), "network": (0.0, 0.0, 20.9)},
    "pat": {"nvlink": (0.0, 0.0, 4.0), "pcie": (0.0, 0.0, 4.0), "network": (0.0, 0.0, 14.0)},
}
# NCCL 2.30 tuning.cc bandwidth caps, GB/s, per GPU generation, columns 1 node / 2 nodes / 3+
_LL_MAX_ONE_NODE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
_LL_MAX_NODES = {"intel": (39.0, 20.4), "amd": (22.5, 19.0)}       # llMaxBws rows 0 / 1 across nodes
#: hosts NCCL's tuner counts as AMD (llMaxBws row 1: ``cpuVendor`` AMD or MIXED) and as x86
_AMD_ROW, _X86 = ("amd", "mixed", "mixed_arch"), ("intel", "amd", "mixed")
_RING_LL128 = {"volta": (20, 20, 20), "ampere": (20, 20, 20), "hopper": (36.7, 36.7, 36.7),
               "blackwell": (40, 40, 40)}
_TREE_LL128 = {"volta": (20, 20, 20), "ampere": (20, 20, 20), "hopper": (36.7, 36.7, 29.0),
               "blackwell": (55.6, 31.67, 20.0)}
_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
         "blackwell": (70.0, 42.8, 24.0)}
_NVLS_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (0.0, 57.7, 45.5),
              "blackwell": (0.0, 96.0, 80.0)}
# nvlsEfficiency (NCCL 2.30 tuning.cc): Hopper 0.85, Blackwell 0.74 (one table, in _nccl)
NVLS_EFFICIENCY_BY_GENERATION = _NVLS_BY_GENERATION
#: NCCL_MAX_NVLS_ARITY (src/include/device.h:213 of master 5067397c; 32 since 2.21): NCCL runs
#: NVLS and NVLSTree for no op but all-reduce where a node holds more local ranks
#: (src/enqueue.cc:2004-2006, 2.27 and later; 2.25-2.26: NVLS all-gather / reduce-scatter on
#: one node of more ranks, enqueue.cc:1610 of 2.25.1; 2.21-2.24 had no such rule)
NVLS_MAX_ARITY = 32
#: NCCL's path types (src/include/graph.h, NCCL 2.30's numbers: they moved between versions) that
#: its tuner's rules tell apart (:mod:`._nccl_paths`): NVLink, NVLink through a GPU, PCIe switches,
#: C2C then the CPU (P2C), NVLink then another GPU's path to a NIC (PXN), through a CPU
PATH_NVL, PATH_NVB, PATH_PXB, PATH_P2C, PATH_PXN, PATH_PHB = 1, 2, 5, 6, 7, 8
# NCCL_NET_OVERHEAD (tuning.cc getNetOverhead): 2 us on x86 AMD hosts, else 1 us; x3 for Simple
_NET_OVERHEAD = {"amd": 2.0}
# treeCorrectionFactor (NCCL 2.30 tuning.cc, "Trees are not perfectly sticking to the model for
# medium sizes"): NCCL's estimate of a tree (and, on Blackwell x86 hosts, an NVLSTree) all-reduce
# scales its bandwidth by this, per protocol (LL, LL128, Simple), at log2i(bytes / 64) = 0 ... 23
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)


@dataclass(frozen=True)
class Hardware:
    """What NCCL's tuner knows of a communicator: ``ranks``, ``nodes``, ``generation``
    (one of :data:`GENERATIONS`, or None: no per-generation caps), ``intra`` the hop class
    inside a node (``"nvlink"`` or ``"pcie"``), ``channels`` the ring and tree channels NCCL runs
    (``comm->nChannels``), ``graph_channels`` its graph's, which the tuner's per-channel caps
    count (None: ``channels``), ``nvls_channels`` NVLS's (None: ``channels``), ``default_channels``
    NCCL's own run count where the call set ``channels`` (None: not set), ``default_graph_channels``
    its ring graph's (the rings, one a NIC across nodes, the ring's flow solve then has fewer of), ``cpu`` (``"intel"`` or
    ``"amd"``), ``net_latency`` the network latency the plugin reports (s; NCCL's IB plugin reports 0),
    which NCCL's tuner adds to each network hop, ``hop_latency`` what a hop costs beyond NCCL's
    constants (s; None: ``net_latency``; a :class:`~topologies.transports.Transport`'s measured figure),
    ``nvls`` whether the GPUs of a node share an NVLS-capable NVSwitch (and the network
    transport leaves NVLS on), ``nvlink_bw`` a GPU's NVLink bandwidth (bytes/s, NVLS's
    intra-node graph bandwidth), ``protocols`` the protocols NCCL may run (the network
    transport's settings; all three by default), ``p2p`` a send / receive's communicator
    (:class:`~._p2p.P2pComm`; None for the collectives), ``net_bw`` the least a node's NICs
    send into the fabric (bytes/s; 0: not known, no bound), ``single_gpu_node`` whether a
    node holds one rank of the communicator (NCCL's tree search then takes its plain TREE
    pattern, search.cc, which its tuner charges 0.85 of the tree's bandwidth), ``pcie_only``
    whether a node's ranks cannot all meet over NVLink (NCCL's typeIntra beyond PATH_NVB: a GPU
    with no NVLink, or NVLink-bridged pairs a ring joins over PCIe), ``nic_path`` NCCL's
    typeInter, the class of a GPU's path to the NIC a ring crosses nodes on (:data:`PATH_PXB`,
    ``PATH_P2C``, ``PATH_PXN`` or ``PATH_PHB``; :func:`~._nccl_paths.type_inter`), ``rendezvous_above`` /
    ``rendezvous_cost`` the network transport's rendezvous (bytes, None: none; s a message; not
    the tuner's: what a step takes, :func:`~._pipeline.pipeline_time`). ``cpu`` is ``"intel"``, ``"amd"``,
    ``"arm"``, ``"mixed"`` (x86 hosts of both vendors) or ``"mixed_arch"`` (Arm and x86).

    >>> Hardware(ranks=16, nodes=2, generation="hopper").ppn
    8
    """

    ranks: int
    nodes: int
    generation: str | None = None
    intra: str = "nvlink"
    channels: int = 2
    cpu: str = "intel"
    net_latency: float = 0.0
    nvls: bool = False
    nvlink_bw: float = 0.0
    protocols: tuple = PROTOCOLS
    p2p: object = None
    net_bw: float = 0.0
    single_gpu_node: bool = False
    pcie_only: bool = False
    nic_path: int = PATH_PXB
    graph_channels: int | None = None
    nvls_channels: int | None = None
    default_channels: int | None = None
    default_graph_channels: int | None = None
    hop_latency: float | None = None
    rendezvous_above: float | None = None
    rendezvous_cost: float = 0.0

    @property
    def hop_cost(self) -> float:
        """What a network hop costs beyond NCCL's constants (s): :attr:`hop_latency`, or the
        reported :attr:`net_latency` where none is measured."""
        return self.net_latency if self.hop_latency is None else self.hop_latency

    @property
    def tuner_channels(self) -> int:
        """The channels NCCL's tuner multiplies its per-channel caps by (its graph's)."""
        return self.channels if self.graph_channels is None else self.graph_channels

    @property
    def pipeline_channels(self) -> int:
        """The ring and tree channels a call's pipeline is priced on: NCCL's run count, at most
        twice its graph's rings. Every copy beyond that doubling (connect.cc:460) puts a second
        CTA on a ring's links (channel ``c + n`` on channel ``c``'s): sm90's across nodes above 45
        GB/s a channel (``connect.cc:476``, :func:`~._channels.run_channels`), a
        ``NCCL_MIN_NCHANNELS`` / ``channels=`` above NCCL's count. The first ``2 x graph``
        channels, which NCCL keeps at small sizes, run the same links with or without the
        copies, so the copies of a ring are priced as one pipeline at their rate: a NIC just over
        45 GB/s times a collective as one just under (before, a channel moved the run's share,
        halved by the copies), and ``channels=`` above NCCL's count as NCCL's (its flow solve still
        runs the rings given: a tree's own solve may differ).

        >>> Hardware(16, 2, "hopper", channels=16, graph_channels=4).pipeline_channels
        8
        >>> Hardware(8, 1, "hopper", channels=24, graph_channels=12).pipeline_channels
        24
        """
        rings = self.default_graph_channels if self.default_graph_channels is not None else self.graph_channels
        return self.channels if rings is None else min(self.channels, max(2 * rings, 1))

    @property
    def nvls_run(self) -> int:
        """The channels NVLS and NVLSTree run on (``comm->nvlsChannels``)."""
        return self.channels if self.nvls_channels is None else self.nvls_channels

    @property
    def ppn(self) -> int:
        """Ranks per node (NCCL's integer ``nRanks / nNodes``, as its tree latency counts them)."""
        return max(1, self.ranks // self.nodes)

    @property
    def one_per_node(self) -> bool:
        """One rank on every node: NCCL's float ``ppn == 1`` (3 ranks on 2 nodes are not)."""
        return self.ranks == self.nodes

    @property
    def column(self) -> int:
        """Column of NCCL's cap tables: 0 on one node, 1 on two, 2 beyond."""
        return 0 if self.nodes == 1 else 1 if self.nodes == 2 else 2


def _steps(op, n):
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def enabled(algorithm, protocol, op, hw: Hardware, asked: bool = False, redop: str = "sum",
            dtype: str = "float", nccl=None) -> bool:
    """Whether NCCL runs ``algorithm`` with ``protocol`` for ``op`` on ``hw``; ``asked``: the
    protocol was named by the user (NCCL_PROTO), which NCCL then runs whatever the paths;
    ``redop`` / ``dtype`` the reduction op and data type (nccl-tests' names,
    :func:`~._nccl.reduction`): NVLS and NVLSTree reduce only what the NVSwitch reduces
    (:func:`~._nccl.nvls_reduces`; an all-gather reduces nothing, src/enqueue.cc:425-426),
    PAT's reduce-scatter no scaled sum (avg: :func:`~._nccl.scaled_sum`). ``nccl``: the release
    ``(major, minor)`` whose default LL128 rule applies (None: 2.30's; :func:`_ll128_paths`) and
    whose algorithms (:func:`release_lacks`: no NVLS before 2.17, no NVLSTree before 2.18, no PAT
    before 2.23).

    >>> enabled("nvls", "LL", "all_reduce", Hardware(8, 1, "hopper", nvls=True)), enabled("pat", "Simple", "all_gather", Hardware(4, 4))
    (False, True)
    """
    if release_lacks(algorithm, op, nccl):
        return False
    simple_only = algorithm in ("nvls", "nvls_tree", "pat")
    if (simple_only and protocol != "Simple") or protocol not in hw.protocols:
        return False
    # a transport's environment that sets NCCL_PROTO (a subset of the protocols) names LL128 where
    # it keeps it: asked, as the user's own setting (parseList writes 1 over the default 2)
    if protocol == "LL128" and not (asked or hw.protocols != PROTOCOLS) and not _ll128_paths(hw, nccl):
        return False
    if algorithm in ("nvls", "nvls_tree") and op != "all_gather" and not nvls_reduces(redop, dtype):
        return False
    if algorithm == "pat" and op == "reduce_scatter" and scaled_sum(redop, dtype):
        return False
    if algorithm == "ring":
        return op in ("all_reduce", "all_gather", "reduce_scatter")
    if algorithm == "tree":
        return op == "all_reduce"
    if algorithm == "nvls":
        # all-gather / reduce-scatter only up to NVLS_MAX_ARITY ranks a node (an NVL72 rack is one
        # node: NCCL's nodes are its rings' intra-node graphs, init.cc rankToNode)
        return op in ("all_reduce", "all_gather", "reduce_scatter") and hw.nvls and hw.nodes == 1 \
            and hw.nvls_run >= 2 and hw.generation in NVLS_EFFICIENCY_BY_GENERATION \
            and (op == "all_reduce" or hw.ppn <= NVLS_MAX_ARITY)
    if algorithm == "nvls_tree":
        return op == "all_reduce" and hw.nvls and hw.nodes > 1 and hw.nvls_run >= 2 \
            and hw.generation in NVLS_EFFICIENCY_BY_GENERATION
    if algorithm == "pat":
        # ncclPatEnable (tuning.cc): "PAT only supports 1 GPU per node" (nNodes == nRanks)
        return op in ("all_gather", "reduce_scatter") and hw.one_per_node and hw.nodes > 1
    return False


def _ll128_paths(hw: Hardware, nccl=None) -> bool:
    """Whether NCCL's default enables LL128 on ``hw``'s paths (tuning.cc:518-535 of master
    5067397c, checked only while LL128's enable is the default, 2: not for a protocol the user
    names): the ring inside a node over NVLink (typeIntra <= PATH_NVB; a node's one GPU is
    PATH_LOC, search.cc ngpus == 1) and, across nodes, a GPU's path to its NIC through PCIe
    switches (typeInter <= PATH_PXB), or on sm90 and later through another GPU's over NVLink or
    over C2C through its own CPU (<= PATH_PXN). NCCL 2.30's rule and path numbers: NCCL before 2.27
    has no P2C (a Grace GPU's path to its CPU's NIC is PHB there: LL128 off), 2.27.3 took only
    <= P2C on sm90, and the numbers moved between versions (PXN was 5 in 2.19).

    Older releases (``nccl``): before 2.15 LL128 by default only on Volta and Ampere
    (``((minCompCap == 70 && maxCompCap == 70) || (minCompCap == 80 && maxCompCap == 80))``,
    v2.8.3-1 tuning.cc:191-192 ... v2.14.3-1:216-217); 2.15-2.17 also sm90 (``case 90:``,
    v2.15.5-1:237, v2.17.1-1:253; ``default: pEnable &= 0``), and a NIC through PCIe switches
    only (``typeInter <= PATH_PXB``, v2.17.1-1; PXN on sm90 from v2.18.3-1:285)."""
    if hw.pcie_only and hw.ranks > hw.nodes:
        return False
    if nccl is not None and nccl < (2, 18):
        known = ("volta", "ampere") if nccl < (2, 15) else ("volta", "ampere", "hopper")
        if hw.generation not in known:
            return False
        return hw.nodes == 1 or hw.nic_path <= PATH_PXB
    sm90 = hw.generation in ("hopper", "blackwell")
    return hw.nodes == 1 or hw.nic_path <= (PATH_PXN if sm90 else PATH_PXB)


def _hop_constants(algorithm, protocol, hw: Hardware, cost: bool = False):
    """(intra, inter): NCCL's latency of one hop inside a node and between nodes (us) for
    ``algorithm`` / ``protocol`` on ``hw`` (a ring across nodes pays at least the network
    overhead inside one; one GPU per node crosses nodes with the tree's constant). A network
    hop adds the latency the plugin reports (``cost`` False: what NCCL's tuner chooses by) or
    what a hop costs on the platform (``cost`` True: :attr:`Hardware.hop_cost`)."""
    i = PROTOCOLS.index(protocol)
    intra = _HW[algorithm][hw.intra][i]
    inter_alg = "tree" if hw.one_per_node else algorithm        # tuning.cc: float ppn == 1
    net = hw.hop_cost if cost else hw.net_latency
    inter = _HW[inter_alg]["network"][i] + net / _US * (2 if protocol == "Simple" else 1)
    if algorithm == "ring" and hw.nodes > 1:
        intra = max(intra, _NET_OVERHEAD.get(hw.cpu, 1.0) * (3 if protocol == "Simple" else 1))
    return intra, inter


def log2i(n: int) -> int:
    """NCCL's ``log2i``: the floor of ``log2(n)`` (src/include/utils.h, ``log2Down``), which its
    tuner's tree, NVLSTree and PAT latencies count network hops by (NCCL 2.30 ``tuning.cc``:
    ``log2i(nNodes) * interLat``; 3 nodes count 1, not 1.58).

    >>> [log2i(n) for n in (1, 2, 3, 4, 7, 8, 10)]
    [0, 1, 1, 2, 2, 3, 3]
    """
    return int(n).bit_length() - 1


def tuner_hops(algorithm, protocol, op, hw: Hardware, cost: bool = False) -> tuple:
    """``((n_intra, intra), (n_inter, inter))``: how many hops inside a node and between
    nodes NCCL's latency of ``algorithm`` / ``protocol`` counts one after the other, and
    what it charges for one (s), as :func:`tuner_latency` adds them up (ring: ``2 (n - 1)``
    steps for all-reduce, ``n - 1`` otherwise, ``2 (nodes - 1)`` of them between nodes; tree:
    ``2 (ppn - 1)`` inside and ``2 log2i(nodes)`` between; NVLS one of each; NVLSTree one
    inside and ``2 log2i(nodes)`` between; PAT ``log2i(nodes)`` between at a third and a half
    of the network constant; :func:`log2i` the floor, as NCCL counts them). ``cost``: a network
    hop at what it costs on the platform (:attr:`Hardware.hop_cost`), not at what the plugin reports.

    >>> [(n, round(c * 1e6, 6)) for n, c in tuner_hops("ring", "Simple", "all_reduce", Hardware(16, 2))]
    [(28, 3.4), (2, 14.0)]
    """
    intra, inter = _hop_constants(algorithm, protocol, hw, cost)
    nodes, log_nodes = hw.nodes, log2i(hw.nodes)
    if algorithm == "ring":
        n_inter = 0 if nodes == 1 else _steps(op, nodes)
        n_intra = _steps(op, hw.ranks) - n_inter
    elif algorithm == "tree":
        n_intra, n_inter = 2 * (hw.ppn - 1), 2 * log_nodes
    elif algorithm == "nvls":
        n_intra, n_inter = 1, (1 if nodes > 1 else 0)
    elif algorithm == "nvls_tree":
        n_intra, n_inter = 1, 2 * log_nodes
    elif algorithm == "pat":
        n_intra, n_inter, inter = 0, log_nodes, inter / 3.5
    else:
        raise ValueError(f"algorithm must be one of {', '.join(TUNER_ALGORITHMS)}, got {algorithm!r}")
    return (n_intra, intra * _US), (n_inter, inter * _US)


def tuner_latency(algorithm, protocol, op, hw: Hardware, size: float | None = None,
                  cost: bool = False) -> float:
    """NCCL's predicted latency (s) of ``algorithm`` / ``protocol`` for ``op`` on ``hw``
    (``size`` bytes turns on the ring Simple all-reduce factor of large messages). ``cost``:
    its network hops at what they cost on the platform (:attr:`Hardware.hop_cost`) rather than
    at the latency the plugin reports, which is what NCCL chooses by.

    >>> round(tuner_latency("ring", "LL", "all_reduce", Hardware(8, 1)) * 1e6, 6)   # 6.6 + 14 x 0.6
    15.0
    >>> hw = Hardware(16, 2, net_latency=75e-6, hop_latency=22e-6)
    >>> round(tuner_latency("tree", "LL", "all_reduce", hw) * 1e6, 6)   # 6.8 + 2 x (7 x 0.6 + 5.0 + 75)
    175.2
    >>> round(tuner_latency("tree", "LL", "all_reduce", hw, cost=True) * 1e6, 6)   # ... + 22
    69.2
    """
    i = PROTOCOLS.index(protocol)
    simple = protocol == "Simple"
    lat = _BASE[algorithm][i]
    intra, inter = _hop_constants(algorithm, protocol, hw, cost)
    nodes, log_nodes = hw.nodes, log2i(hw.nodes)
    if algorithm == "ring":
        inter_steps = 0 if nodes == 1 else _steps(op, nodes)
        lat += (_steps(op, hw.ranks) - inter_steps) * intra + inter_steps * inter
        if simple and op == "all_reduce" and nodes > 1 and size is not None \
                and size / (hw.channels * hw.ranks) >= 64:
            lat *= 1.9 if hw.generation == "volta" else 1.4
    elif algorithm == "tree":
        lat += 2 * ((hw.ppn - 1) * intra + log_nodes * inter)
    elif algorithm == "nvls":
        lat = intra + (inter if nodes > 1 else 0.0)
    elif algorithm == "nvls_tree":
        lat += intra + 2 * log_nodes * inter
    elif algorithm == "pat":
        lat += log_nodes * inter / 3.5 + hw.ranks * 2.8
    return lat * _US


def _cap(table, hw):
    return math.inf if hw.generation is None else table[hw.generation][hw.column] * _GB


def _ll_max(hw):
    if hw.nodes == 1:
        return math.inf if hw.generation is None else _LL_MAX_ONE_NODE[hw.generation] * _GB
    return _LL_MAX_NODES["amd" if hw.cpu in _AMD_ROW else "intel"][0 if hw.nodes == 2 else 1] * _GB


def _nvls_bus(algorithm, op, busbw, hw):
    n = hw.nvls_run
    eff = NVLS_EFFICIENCY_BY_GENERATION.get(hw.generation, 0.0)
    ppn = hw.ranks / hw.nodes                   # NCCL's float ppn
    intra = hw.nvlink_bw / n * eff * (n - 1) / n * (2 if op == "all_reduce" else (ppn - 1) / ppn)
    bw = intra
    if hw.nodes > 1:
        bw = lesser(bw, busbw / n * (2 if algorithm == "nvls_tree" and hw.nodes <= 2 else 1))
    if algorithm == "nvls_tree":
        bw = lesser(bw, _cap(_NVLS_TREE, hw))
    return n * bw


# --- Older releases' tuner (``nccl_version=``): the refinements of tuning.cc that changed since ---
#: ring LL's share of the bus bandwidth before NCCL 2.21: ``busBw * ((nNodes > 1 || coll ==
#: ncclFuncAllReduce || coll == ncclFuncReduce) ? 1.0/4.0 : 1.0/3.0)`` (v2.7.8-1 tuning.cc:113,
#: v2.8.3-1 / v2.9.9-1 / v2.11.4-1 / v2.12.12-1 tuning.cc:125-127, v2.18.3-1:178, v2.20.5-1:181);
#: v2.21.5-1 tuning.cc:180 ``busBw * .5`` (the LL kernel, src/device/prims_ll.h, unchanged between
#: the two: the estimate was re-fitted)
RING_LL_SHARE_BEFORE_2_21 = (1 / 4, 1 / 3)
#: ``if (compCap80) busBw = std::min(busBw, 235.0f);`` (GB/s; v2.7.8-1 tuning.cc:112, v2.8.3-1:124,
#: v2.12.12-1:126, v2.17.1-1:153 with ``if (compCapIndex == HOPPER_COMPCAP_IDX) busBw =
#: std::min(busBw, 370.0f);`` at :154); gone from v2.18.1-1
_BUS_CAP_BEFORE_2_18 = {"ampere": 235.0}
_BUS_CAP_2_17 = {"ampere": 235.0, "hopper": 370.0}
#: ``ll128MaxBwPerCh[NCCL_NUM_FUNCTIONS] = { 18.8, 12.0, 18.3, 15.2, 16.9 }`` (GB/s a channel,
#: ncclFuncBroadcast, Reduce, AllGather, ReduceScatter, AllReduce; v2.8.3-1 / v2.9.9-1 tuning.cc:74;
#: 16.7 for the all-reduce in v2.7.8-1:74); v2.10.3-1 tuning.cc:73 ``ll128MaxBwPerCh = 20.0`` for
#: every op and GPU, to v2.16.5-1:81; v2.17.1-1:84 ``{ 20.0, 20.0, 36.7 }`` (Volta, Ampere, Hopper)
_LL128_PER_OP_BEFORE_2_10 = {"broadcast": 18.8, "reduce": 12.0, "all_gather": 18.3, "reduce_scatter": 15.2,
                             "all_reduce": 16.9}
_LL128_BEFORE_2_17 = 20.0
#: Not applied (it made the held-out corpus worse, fix22a 2026-12-07: abci2-benchmark and
#: aws-efa-eks 18.2 % -> 18.6 %, ABCI's 16 nodes 11.1 % -> 12.1 %): before 2.10 the tree's per-channel
#: caps ``perChMaxTreeBws`` Ampere ``{24.0, 22.5, 16.0}`` (v2.8.3-1 tuning.cc:76; v2.10.3-1:75
#: ``{24.0, 23.6, 17.8}``) and tree LL128 across nodes ``0.915`` (v2.8.3-1:129; v2.10.3-1:132
#: ``120.0/128.0``)
#: ``llMaxBws`` Hopper row ``{87.7, 22.5, 19.0}`` (v2.15.5-1 .. v2.20.5-1 tuning.cc, the Ampere
#: row); v2.21.5-1 ``{141.0, 45.0, 35.0}``. One node only: across nodes the row is the CPU's
_LL_MAX_HOPPER_BEFORE_2_21 = 87.7


def _older(hw, nccl):
    """The tuner refinements of NCCL release ``nccl`` (``(major, minor)``; None: the model's, NCCL
    2.30) that differ from 2.30's on ``hw`` (ring LL's share: :func:`_ring_ll_share`): a dict with
    ``bus_cap`` (GB/s, every protocol's bus bandwidth), ``ring_ll128`` / ``tree_ll128`` (GB/s a
    channel, or ``"per-op"``), ``ll128_one_gpu`` (ring LL128's factor with one GPU a node),
    ``ll_max`` (GB/s), each None where 2.30's applies.

    >>> _older(Hardware(8, 1, "ampere"), (2, 8))["bus_cap"], _older(Hardware(8, 1, "ampere"), None)["bus_cap"]
    (235.0, None)
    """
    out = dict(bus_cap=None, ring_ll128=None, tree_ll128=None, ll128_one_gpu=None, ll_max=None)
    if nccl is None:
        return out
    if nccl < (2, 21):
        if hw.nodes == 1 and hw.generation == "hopper":
            out["ll_max"] = _LL_MAX_HOPPER_BEFORE_2_21
    if nccl < (2, 23):      # ``busBw * (ppn < 2 ? 0.7 : 0.92)``, v2.8.3-1:126 .. v2.22.3-1:179
        out["ll128_one_gpu"] = 0.7
    if nccl < (2, 18):
        out["bus_cap"] = (_BUS_CAP_2_17 if nccl >= (2, 17) else _BUS_CAP_BEFORE_2_18).get(hw.generation)
    if nccl < (2, 17):
        out["ring_ll128"] = out["tree_ll128"] = _LL128_BEFORE_2_17
    if nccl < (2, 10):
        out["ring_ll128"] = out["tree_ll128"] = "per-op"
    return out


#: The first NCCL release (``(major, minor)``) with each algorithm NCCL may choose beside the
#: ring and the tree (which every 2.x has), by op: NVLS from 2.17 (``#define NCCL_ALGO_NVLS 4``,
#: v2.17.1-1 src/include/devcomm.h:23; v2.16.5-1:18 ``NCCL_NUM_ALGORITHMS 4``, Tree, Ring, CollNet
#: only), its all-gather and reduce-scatter too (v2.17.1-1 tuning.cc:143-144); NVLSTree from 2.18
#: (``#define NCCL_ALGO_NVLS_TREE 5``, v2.18.1-1 devcomm.h:24); PAT from 2.23 (``#define
#: NCCL_ALGO_PAT 6``, v2.23.4-1 src/include/nccl_common.h:61)
FIRST_RELEASE = {("nvls", "all_reduce"): (2, 17), ("nvls", "all_gather"): (2, 17),
                 ("nvls", "reduce_scatter"): (2, 17), ("nvls_tree", "all_reduce"): (2, 18),
                 ("pat", "all_gather"): (2, 23), ("pat", "reduce_scatter"): (2, 23)}
#: 2.18's tuner times NVLS for no all-gather or reduce-scatter (``if (coll == ncclFuncAllGather
#: && a != NCCL_ALGO_RING) continue;``, v2.18.1-1 tuning.cc:159-160 .. v2.18.6-1:168-169: no
#: time, so NCCL never runs it, NCCL_ALGO=NVLS included); 2.19 times it again (v2.19.1-1:168-169)
_NVLS_GATHER_OFF = (2, 18)


def release_lacks(algorithm, op, nccl) -> str | None:
    """Why NCCL release ``nccl`` (``(major, minor)``; None: the newest, which has every algorithm)
    runs ``algorithm`` for ``op`` on no ranks at all (:data:`FIRST_RELEASE`), or None.

    >>> release_lacks("nvls", "all_reduce", (2, 16))
    'NCCL 2.16 has no NVLS (first in NCCL 2.17)'
    >>> release_lacks("nvls", "all_reduce", (2, 17)) is None, release_lacks("ring", "all_gather", (2, 8)) is None
    (True, True)
    """
    if nccl is None:
        return None
    name = {"nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT"}.get(algorithm, algorithm)
    first = FIRST_RELEASE.get((algorithm, op))
    if first is not None and nccl < first:
        return f"NCCL {nccl[0]}.{nccl[1]} has no {name} (first in NCCL {first[0]}.{first[1]})"
    if algorithm == "nvls" and op != "all_reduce" and nccl[:2] == _NVLS_GATHER_OFF:
        return f"NCCL 2.18 runs NVLS for all-reduce only (2.17 ran it for {op} too, and 2.19 on again)"
    return None


def _ring_ll_share(op, hw, nccl) -> float:
    """Ring LL's share of the bus bandwidth in NCCL's tuner (0.5 from 2.21; before, 1/4 across
    nodes or for an all-reduce / reduce, 1/3 otherwise: :data:`RING_LL_SHARE_BEFORE_2_21`)."""
    if nccl is None or nccl >= (2, 21):
        return 0.5
    share_all, share_other = RING_LL_SHARE_BEFORE_2_21
    return share_all if hw.nodes > 1 or op in ("all_reduce", "reduce") else share_other


def _ll128_per_channel(kind, op, hw, old) -> float:
    """GB/s x 1e9 a channel that LL128 (``kind`` ``"ring_ll128"`` / ``"tree_ll128"``) is capped at."""
    cap = old[kind]
    if cap is None:
        return _cap(_RING_LL128 if kind == "ring_ll128" else _TREE_LL128, hw)
    if cap == "per-op":
        return _LL128_PER_OP_BEFORE_2_10.get(op, _LL128_BEFORE_2_17) * _GB
    return cap * _GB


def tuner_algbw(algorithm, protocol, op, busbw, hw: Hardware, nccl=None, ll_cap=True) -> float:
    """The algorithm bandwidth (bytes/s) NCCL's tuner grants ``algorithm`` / ``protocol``
    given the graph's bus bandwidth ``busbw`` (NCCL's ``nChannels x bw``, bytes/s): the ring's
    and NVLS's all-reduce times ``ranks / steps``, the tree's times 0.5, a PAT or NVLS
    all-gather / reduce-scatter as it is (NCCL >= 2.23). ``nccl``: the release ``(major,
    minor)`` whose refinements apply (None: NCCL 2.30's; :func:`_older`). ``ll_cap=False`` leaves
    out LL's ``llMaxBw``, the one cap NCCL sets on the whole communicator rather than a channel
    (tuning.cc: ``busBw = std::min(llMaxBw, busBw * .5)``): what every channel's own LL rate
    adds up to (:func:`~._nccl_timing._running_ctas`).

    >>> hw = Hardware(8, 1, "hopper", channels=16)
    >>> round(tuner_algbw("ring", "LL", "all_reduce", 370.8e9, hw) / 1e9, 2)   # LL capped at 141 GB/s
    80.57
    >>> round(tuner_algbw("ring", "LL", "all_reduce", 370.8e9, hw, nccl=(2, 18)) / 1e9, 2)   # 87.7 x 8 / 14
    50.11
    >>> round(tuner_algbw("ring", "LL", "all_reduce", 370.8e9, hw, ll_cap=False) / 1e9, 2)   # 0.5 x 370.8 x 8 / 14
    105.94
    """
    n = hw.tuner_channels
    old = _older(hw, nccl)
    if old["bus_cap"] is not None:
        busbw = lesser(busbw, old["bus_cap"] * _GB)
    ll_max = (_ll_max(hw) if old["ll_max"] is None else old["ll_max"] * _GB) if ll_cap else math.inf
    if algorithm == "ring":
        ll128 = 0.92 if not (hw.one_per_node and old["ll128_one_gpu"]) else old["ll128_one_gpu"]
        bus = {"LL": lesser(ll_max, busbw * _ring_ll_share(op, hw, nccl)),
               "LL128": lesser(busbw * ll128, n * _ll128_per_channel("ring_ll128", op, hw, old)),
               "Simple": busbw}[protocol]
    elif algorithm == "tree":
        # tuning.cc (NCCL 2.30, master 5067397c): every protocol of a tree all-reduce first takes
        # min(busBw x .92, nChannels x perChMaxTreeBw), then LL's and LL128's own refinements
        tree = lesser(busbw * 0.92, n * _cap(_TREE, hw))
        bus = {"LL": lesser(tree / 3.8, ll_max),
               "LL128": lesser(tree * (7 / 9 if hw.nodes == 1 else 120 / 128),
                               n * _ll128_per_channel("tree_ll128", op, hw, old)),
               "Simple": tree}[protocol]
        if hw.single_gpu_node:          # maxTreePattern == NCCL_TOPO_PATTERN_TREE
            bus = bus * 0.85
    elif algorithm in ("nvls", "nvls_tree"):
        bus = _nvls_bus(algorithm, op, busbw, hw)
    elif algorithm == "pat":
        bus = busbw * 0.75
    else:
        raise ValueError(f"algorithm must be one of {', '.join(TUNER_ALGORITHMS)}, got {algorithm!r}")
    if algorithm != "ring" and op in ("all_gather", "reduce_scatter"):
        # NCCL >= 2.23 (tuning.cc "Convert bus BW to algorithm BW", commit 68b54236, 2.23.4-1)
        # converts no bus bandwidth of a non-ring all-gather / reduce-scatter: algbw = busBw
        return bus
    if algorithm in ("ring", "nvls", "nvls_tree"):
        return bus * hw.ranks / _steps(op, hw.ranks)
    return bus * 0.5


def tree_correction(algorithm, protocol, op, size, hw: Hardware) -> float:
    """The factor NCCL's estimate (what it chooses by) scales a tree all-reduce's bandwidth by
    at ``size`` bytes (``ncclTopoGetAlgoTime``: ``treeCorrectionFactor[protocol][log2i(size /
    64)]`` below 512 MiB; NVLSTree too on Blackwell with x86 hosts); 1 elsewhere.

    >>> hw = Hardware(16, 2, "hopper")
    >>> tree_correction("tree", "LL", "all_reduce", 256 * 1024, hw), tree_correction("ring", "LL", "all_reduce", 256 * 1024, hw)
    (0.4, 1.0)
    """
    log_size = log2i(int(size) >> 6) if size >= 64 else -1
    if op != "all_reduce" or log_size < 0:
        return 1.0
    if (algorithm == "tree" and log_size < 23) or (algorithm == "nvls_tree" and log_size < 24 and
                                                   hw.generation == "blackwell" and hw.cpu in _X86):
        return _TREE_CORRECTION[PROTOCOLS.index(protocol)][log_size]
    return 1.0


def predict(op, size, busbw, hw: Hardware, nccl=None) -> dict:
    """NCCL's predicted time (s) of every enabled ``(algorithm, protocol)`` for ``op`` of
    ``size`` bytes, the graph's bus bandwidth ``busbw`` (bytes/s) on ``hw``.

    >>> t = predict("all_reduce", 1024, 370.8e9, Hardware(8, 1, "hopper", channels=16))
    >>> min(t, key=t.get)
    ('ring', 'LL')
    """
    out = {}
    for a in TUNER_ALGORITHMS:
        for p in PROTOCOLS:
            if enabled(a, p, op, hw, nccl=nccl):
                out[a, p] = tuner_latency(a, p, op, hw, size) + size / (
                    tuner_algbw(a, p, op, busbw, hw, nccl) * tree_correction(a, p, op, size, hw))
    return out
