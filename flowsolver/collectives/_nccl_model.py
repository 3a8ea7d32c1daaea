"""NCCL's tuning model (NCCL 2.30, src/graph/tuning.cc and topo.h; ../shared/REFERENCE.md,
"NCCL's cost model"): per (algorithm, protocol) the bandwidth it grants a bus bandwidth, which
pairs NCCL enables for an op on a topology, and its predicted time (units: s, bytes/s). Its
latencies are :mod:`._nccl_latency`'s, an older release's rules :mod:`._nccl_releases`'.

The bus bandwidth ``busbw`` passed in is NCCL's ``nChannels x bw`` of the graph: in
flowsolver the contention-aware flow solve of the ring on the real fabric provides it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._dual import lesser
from ._nccl import _NVLS_BY_GENERATION, PROTOCOLS, nvls_reduces, scaled_sum
from ._nccl_latency import (_BASE, TUNER_ALGORITHMS, _steps, log2i, tuner_hops,  # noqa: F401 (re-exported)
                            tuner_latency)
from ._nccl_releases import (_LL128_BEFORE_2_17, _LL128_PER_OP_BEFORE_2_10, FIRST_RELEASE,  # noqa: F401 (re-exported)
                             _older, _ring_ll_share, release_lacks)

__all__ = ["Hardware", "TUNER_ALGORITHMS", "GENERATIONS", "NVLS_MAX_ARITY", "tuner_latency", "tuner_hops", "tuner_algbw",
           "enabled", "predict", "tree_correction", "FIRST_RELEASE", "release_lacks"]

GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
_GB = 1e9

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
    the tuner's: what a step takes, :func:`~._pipeline.pipeline_time`), ``transport`` the
    transport's name where its settings limit ``protocols`` or turn NVLS off (what a refusal names). ``cpu`` is ``"intel"``, ``"amd"``,
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
    transport: str = ""         # the network transport whose settings ``protocols`` / ``nvls`` carry ("": none)
    nvls_off_by_transport: bool = False     # NVLS would run here but for the transport's NCCL_NVLS_ENABLE=0

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
    has no P2C (a Grace GPU's path to its CPU's NIC is PHB there: LL128 off, applied below);
    2.27.3 wrote ``<= (NCCL_LL128_C2C ? P2C : PXN)`` with P2C numbered after PXN and LL128_C2C 1 by
    default (v2.27.3-1 tuning.cc:211, 460), the same paths as 2.30's ``<= PXN`` with P2C before it;
    the numbers moved between versions (PXN was 5 in 2.19).

    Older releases (``nccl``): before 2.15 LL128 by default only on Volta and Ampere
    (``((minCompCap == 70 && maxCompCap == 70) || (minCompCap == 80 && maxCompCap == 80))``,
    v2.8.3-1 tuning.cc:191-192 ... v2.14.3-1:216-217); 2.15-2.17 also sm90 (``case 90:``,
    v2.15.5-1:237, v2.17.1-1:253; ``default: pEnable &= 0``), and a NIC through PCIe switches
    only (``typeInter <= PATH_PXB``, v2.17.1-1; PXN on sm90 from v2.18.3-1:285)."""
    if hw.pcie_only and hw.ranks > hw.nodes:
        return False
    nic_path = hw.nic_path
    if nic_path == PATH_P2C and nccl is not None and nccl < (2, 27):
        # no P2C before 2.27 (v2.26.2-1 topo.h: LOC NVL NVB C2C PIX PXB PXN PHB ...; v2.23.4-1 had no
        # C2C either): a path over C2C, then the CPU, to a NIC is PHB there, past PXN
        nic_path = PATH_PHB
    if nccl is not None and nccl < (2, 18):
        known = ("volta", "ampere") if nccl < (2, 15) else ("volta", "ampere", "hopper")
        if hw.generation not in known:
            return False
        return hw.nodes == 1 or nic_path <= PATH_PXB
    sm90 = hw.generation in ("hopper", "blackwell")
    return hw.nodes == 1 or nic_path <= (PATH_PXN if sm90 else PATH_PXB)


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
