"""What NCCL's tuner sees of a collective's ranks on a cluster graph: the GPU generation,
nodes, the intra-node hop class, NVLS support, a GPU's NVLink bandwidth and the channel
count NCCL would set (:class:`~._nccl_model.Hardware`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import topologies as tp

from .. import _checks
from ..routing import GraphIndex, LinkTable, gpu_nodes, graph_memo, link_efficiency, ranges
from ._channels import inter_cpu_gbs, nvls_channel_count, mesh_ring_channels, nccl_channels, nccl_graph_channels, run_channels
from ._layout import RankLayout, mesh_cycles, near_nics, near_nics_of, node_nics, participants, rank_server_codes
from ._nccl import GPU_GENERATION, PROTOCOLS
from ._nccl_model import NVLS_EFFICIENCY_BY_GENERATION, PATH_NVB, PATH_NVL, Hardware
from ._nccl_paths import type_inter, type_intra
from ._options import MAX_CHANNELS

__all__ = ["GPU_GENERATION", "describe", "near_nics", "nccl_channels", "nvlink_edges", "server_transport",
           "sharing_nics", "mesh_ring_channels", "mesh_pairs"]
def mesh_pairs(graph, gpus, efficiency=None) -> dict | None:
    """NCCL's bandwidth (GB/s) of each directed pair of ``gpus`` (indices) joined by their own
    NVLink edge -- the edge's capacity at NCCL's view of it (the catalogue's NVLink efficiency is
    ``ncclTopoNVLinkBw`` over the link's rate) -- or None unless ``gpus`` are one NVLink mesh
    (:func:`~._layout.mesh_cycles`)."""
    if not mesh_cycles(graph, gpus):
        return None
    return {(i, j): _rate(graph.edges[a, b], efficiency) / 1e9
            for i, a in enumerate(gpus) for j, b in enumerate(gpus) if i != j}


def _nvswitch_of(graph, gpu):
    """The NVSwitch ``gpu`` has an edge to, or None (read from the graph: :func:`nvlink_edges` is
    called after the call that made a result, where the graph's index is not held)."""
    return next((v for v in graph.successors(gpu) if graph.nodes[v].get("kind") == "nvswitch"), None)


def _all_on_nvswitches(graph, gpus) -> bool:
    """Whether each of ``gpus`` has an edge to an NVSwitch, each GPU's answer kept with the
    unchanged graph (as its routing index keeps the nodes' kinds): a job's groups ask for all."""
    known = graph_memo(graph, "on-nvswitch", dict)
    for g in gpus:
        if g not in known:
            known[g] = _nvswitch_of(graph, g) is not None
        if not known[g]:
            return False
    return True


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
    ix = GraphIndex.of(graph)                   # the NICs from its kinds and roles, in node order
    for i in np.flatnonzero((ix.kind == "nic") & (ix.role == "compute")):
        nic = ix.nodes[i]
        d = graph.nodes[nic]
        if d.get("server") in out:
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
    # a server cabled to no fabric (a one-server cluster) runs under its cluster's link's
    # transport, where the builder names one (the job's NCCL settings, not a cable's)
    link = (graph.graph.get("params") or {}).get("link")
    try:
        fallback = tp.get_link(link).transport if isinstance(link, str) else None
    except ValueError:
        fallback = None
    if fallback is not None:
        for server in {graph.nodes[ix.nodes[i]].get("server") for i in np.flatnonzero(ix.kind == "gpu")}:
            out.setdefault(server, fallback)
    return out


def transport_settings(graph) -> tuple:
    """The NCCL settings the network transports of ``graph``'s servers set, each once (sorted
    ``(protocols, nvls)`` pairs): graphs alike but for these have other NCCL candidates.

    >>> import topologies as tp
    >>> transport_settings(tp.rail_optimized(2)), transport_settings(tp.rail_optimized(2, link="tcpxo_200g"))
    (((('LL', 'LL128', 'Simple'), True),), ((('Simple',), False),))
    """
    names = set(graph_memo(graph, "nic_transports", lambda: _transports(graph)).values()) or {None}
    return tuple(sorted({(t.protocols, t.nvls) for t in map(tp.get_transport, names)}))


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


def _egress(near, tables) -> float:
    """Bytes/s the compute NICs of ``near`` (each GPU's nearest NICs, :func:`near_nics_of`; each
    NIC counted once) send into the fabric: each cable's capacity at its efficiency. NVLSTree's
    heads send through their own GPUs' NICs. ``tables``: :func:`_egress_table`'s, looked up once
    a call (outside an ``unchanged`` block each look-up of the routing index hashes the graph)."""
    ix, table = tables
    return sum(float(table[ix.idx[nic]]) for nic in dict.fromkeys(n for nics in near for n in nics))


def _egress_table(graph, efficiency) -> tuple:
    """The graph's routing index and, per node of it, the bytes/s its cables into a switch send
    at their efficiency where it is a compute NIC (a node with no ``role`` counts as one), else 0;
    over the link arrays at once, kept with the unchanged graph (a 16,384-GPU job asked each of
    its NICs' edges one by one, ~0.2 s). A node's cables are summed in the graph's edge order, as
    a sum over its out-edges would."""
    ix = GraphIndex.of(graph)

    def build():
        rate = graph_memo(graph, "links", lambda: LinkTable.from_graph(graph)).effective_capacity(efficiency)
        into = ix.is_switch[ix.head]
        tails = np.unique(ix.tail[into])
        compute = np.zeros(ix.nv, dtype=bool)
        compute[tails] = [graph.nodes[ix.nodes[t]].get("role", "compute") == "compute" for t in tails]
        out = into & compute[ix.tail]
        return np.bincount(ix.tail[out], weights=rate[out], minlength=ix.nv)
    return ix, ix.memo(("nic-egress", repr(efficiency)), build)


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
    each NIC's egress (bytes/s, :func:`_egress_table`), kept with the unchanged graph."""
    def build():
        near = near_nics_of(graph, gpu_nodes(graph))
        number = {n: i for i, n in enumerate(dict.fromkeys(n for nics in near for n in nics))}
        ptr = np.concatenate([[0], np.cumsum([len(nics) for nics in near])]).astype(np.int64)
        nic = np.array([number[n] for nics in near for n in nics], dtype=np.int64)
        ix, table = _egress_table(graph, efficiency)
        return ptr, nic, table[np.array([ix.idx[n] for n in number], dtype=np.int64)]
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


# NCCL counts a PCIe lane at its GT/s x 7.5 (kvDictPciGen, src/graph/topo.cc:545, 100 Mb/s units)
# / 80 GB/s (topo.cc:657): 48 GB/s for Gen5 x16; the graph's PCIe capacities are the lanes' rate
# after 128b/130b encoding (63.0 GB/s for Gen5 x16): NCCL's view is 0.7617 of it
_NCCL_PCI_VIEW = (7.5 / 80) / (128 / 130 / 8)


def _socket_link(graph, gpus) -> float | None:
    """NCCL's bandwidth (GB/s, :func:`~._channels.inter_cpu_gbs`) of the socket link a ring
    through a server's ``gpus`` crosses: where some server's GPUs among them hang off two CPU
    sockets (each GPU node's ``socket``, its PCIe switch's), by the host's ``cpu`` and
    ``cpu_make``; else None."""
    sockets: dict = {}
    for g in gpus:
        d = graph.nodes[g]
        if "socket" in d:
            sockets.setdefault(d.get("server"), set()).add(d["socket"])
    if not any(len(s) > 1 for s in sockets.values()):
        return None
    d = graph.nodes[gpus[0]]
    return inter_cpu_gbs(d.get("cpu", "intel"), d.get("cpu_make"))


def _nic_port_gbs(graph, gpu) -> float:
    """GB/s of ``gpu``'s nearest NIC's fastest working port, at most its PCIe path to the NIC as
    NCCL counts it (0: no NIC, or no port up)."""
    nic = next(iter(near_nics_of(graph, [gpu])[0]), None)
    if nic is None:
        return 0.0
    ports = [e.get("capacity", 0.0) for _, v, e in graph.out_edges(nic, data=True)
             if graph.nodes[v].get("kind") == "switch"]
    gbs = max(ports, default=0.0) / 1e9
    if graph.has_edge(gpu, nic) and str(graph.edges[gpu, nic].get("tech", "")).startswith("pcie"):
        gbs = min(gbs, graph.edges[gpu, nic].get("capacity", 0.0) * _NCCL_PCI_VIEW / 1e9)
    return gbs


def search_view(graph, gpus, generation, nodes, nvswitch) -> dict:
    """The figures NCCL's ring search reads (:func:`~._channels.nccl_graph_channels`' keywords):
    across nodes ``net_gbs``, the slowest GPU's nearest NIC port's rate and its PCIe path to it
    as NCCL counts them (GB/s; NCCL's search results are combined over the ranks; a port of
    capacity 0 is down, left out of NCCL's topology, and a GPU with no working port is left
    out); in NVSwitch nodes (one or several) ``nvlink_gbs``, the slowest GPU's NVLink at NCCL's view (the catalogue's efficiency, never the user's ``efficiency=``); in
    a node of PCIe GPUs ``pci_gbs``, the first GPU's PCIe link as NCCL counts it; PCIe GPUs of a
    server under two CPU sockets, one node or several, ``cpu_gbs`` (:func:`_socket_link`)."""
    view = {"generation": generation}
    if nodes > 1:
        memo = graph_memo(graph, "nic-port-gbs", dict)
        rates = [memo[g] if g in memo else memo.setdefault(g, _nic_port_gbs(graph, g)) for g in dict.fromkeys(gpus)]
        if rates := [r for r in rates if r > 0]:
            view["net_gbs"] = min(rates)
    if nvswitch:                    # across nodes too: a ring's NVLink inside a node bounds the rings
        low = slowest_nvlink(graph, gpus, None)
        if low > 0:
            view["nvlink_gbs"] = low / 1e9
        return view
    if (cpu := _socket_link(graph, gpus)) is not None:         # across nodes too: a ring's socket link
        view["cpu_gbs"] = cpu
    if nodes == 1:
        pci = [e.get("capacity", 0.0) for _, _, e in graph.out_edges(gpus[0], data=True)
               if str(e.get("tech", "")).startswith("pcie")]
        if max(pci, default=0.0) > 0:
            view["pci_gbs"] = max(pci) * _NCCL_PCI_VIEW / 1e9
    return view


def describe(graph, ranks, layout, channels=None, efficiency=None, pxn=True, nvls_channels=None) -> Hardware:
    """The :class:`Hardware` of ``ranks`` (laid out as ``layout``) on ``graph``; ``channels``
    overrides NCCL's ring and tree channel count (as ``NCCL_MIN_NCHANNELS`` = ``NCCL_MAX_NCHANNELS``
    do: NVLS keeps its own), ``nvls_channels`` NVLS's and NVLSTree's (``NCCL_NVLS_NCHANNELS``;
    None: NCCL's own, :func:`~._channels.nvls_channel_count`), ``efficiency`` the links' (as in
    :func:`flowsolver.collective`).

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
    nvswitch = _all_on_nvswitches(graph, gpus)
    nvlink_bw = slowest_nvlink(graph, gpus, efficiency) if nvswitch else 0.0
    n_nodes = len(layout.groups)
    ppn = max(len(g) for g in layout.groups)
    nics = node_nics(graph, graph.nodes[gpus[0]].get("server"), n_nodes)
    # servers whose GPUs are joined pairwise by NVLink, no NVSwitch: a GPU's NVLink is the sum of
    # its pairs' (NCCL's getTotalBw, search.cc:30-38), and one node's channels are its search's
    meshes = [] if nvswitch else [mesh_pairs(graph, [gpus[i] for i in group], efficiency)
                                  for group in layout.groups]
    graph_channels = None
    meshed = bool(meshes) and all(m is not None for m in meshes)
    if meshed:
        nvlink_bw = min(sum(bw for (a, _), bw in m.items() if a == g) for m in meshes for g, _ in m) * 1e9
        if n_nodes == 1:       # NCCL's search sees its own link rate, not efficiency=
            view = meshes[0] if efficiency is None else mesh_pairs(graph, [gpus[i] for i in layout.groups[0]])
            graph_channels = mesh_ring_channels(view, ppn, generation)
    if graph_channels is None:      # the tuner's count (NCCL's graph) and the run's (twice or more)
        view = search_view(graph, gpus, generation, n_nodes, nvswitch)
        if meshed:                      # rings over NVLink: no socket link
            view.pop("cpu_gbs", None)
        graph_channels = nccl_graph_channels(n_nodes, ppn, nics, nvswitch, **view)
        run = nccl_channels(n_nodes, ppn, nics, nvswitch, **view)
    else:
        run = run_channels(graph_channels, n_nodes)
    # NVLS's own count (nvls.cc ncclNvlsTuning), which channels= leaves alone: NCCL_MIN_NCHANNELS /
    # NCCL_MAX_NCHANNELS clamp comm->nChannels only (connect.cc:492-506), NVLS only NCCL_MIN_CTAS /
    # NCCL_MAX_CTAS and NCCL_NVLS_NCHANNELS (nvls.cc:222-235)
    nvls_channels = nvls_channel_count(generation, n_nodes) if nvls_channels is None else int(nvls_channels)
    default = default_graph = None
    if channels is not None:        # the ring's and tree's run count given: the tuner sums no more
        default, default_graph = run, graph_channels
        run, graph_channels = int(channels), min(graph_channels, int(channels))
    channels = run
    # NCCL turns NVLS off where a node holds fewer than two of the communicator's GPUs
    # (src/transport/nvls.cc, ncclNvlsInit: gpuCount < 2): nothing to reduce in the switch
    nvls = nvswitch and generation in NVLS_EFFICIENCY_BY_GENERATION and min(len(g) for g in layout.groups) >= 2
    # the network transport's NCCL settings (NCCL_PROTO, NCCL_NVLS_ENABLE) are the job's
    # environment: every communicator of it runs under them, one node's too (newuser26 #1: one
    # A3 Mega VM under GCP's TCPXO profile ran NVLS and LL, which its settings turn off)
    transport = server_transport(graph, graph.nodes[gpus[0]].get("server"))
    nvls_off = nvls and not transport.nvls
    nvls = nvls and transport.nvls
    extra = dict(protocols=transport.protocols, nvls_off_by_transport=nvls_off,
                 transport=transport.name if transport.protocols != PROTOCOLS or nvls_off else "")
    if n_nodes > 1:         # across nodes: the network transport's reported latency
        near = near_nics_of(graph, gpus)        # (one look-up of the graph's memo for every group)
        egress = _egress_table(graph, efficiency)       # (one look-up of the routing index for every group)
        extra.update(net_latency=transport.net_latency, hop_latency=transport.hop_latency,
                     rendezvous_above=transport.rendezvous_above, rendezvous_cost=transport.rendezvous_cost,
                     net_bw=min(_egress([near[i] for i in group], egress)
                                for group in layout.groups))
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
                    channels=int(channels), graph_channels=int(graph_channels),
                    nvls_channels=nvls_channels, default_channels=default,
                    default_graph_channels=default_graph, nvls=nvls,
                    nvlink_bw=nvlink_bw,
                    pcie_only=kind is not None and kind > PATH_NVB,
                    cpu=cpus.pop() if len(cpus) == 1 else "mixed_arch" if "arm" in cpus else "mixed",
                    single_gpu_node=n_nodes > 1 and min(len(g) for g in layout.groups) == 1, **extra)


def _chain_channels(graph, ranks, layout) -> int:
    """The channels NCCL runs a ring broadcast or reduce of ``ranks`` (checked GPU ranks, laid
    out as ``layout``) on: its ring channel count (:func:`describe`'s, the result's
    ``channels``), at most MAX_CHANNELS (64, src/include/device.h); one chain each, as NCCL runs
    the ring pipeline of ``src/device/broadcast.h`` / ``reduce.h`` on every channel (remembered
    while the graph is unchanged)."""
    known = graph_memo(graph, "chain-channels", dict)
    key = tuple(ranks)
    if key not in known:
        flat = RankLayout(layout.groups, (), 1)
        known[key] = max(1, min(MAX_CHANNELS, describe(graph, list(ranks), flat).channels))
    return known[key]


def laid_out(graph, op, ranks, channels):
    """:func:`~._layout.participants` with a broadcast's or reduce's default ``channels`` NCCL's
    channel count (:func:`_chain_channels`: their ring chains are NCCL's channels, so
    ``channels=`` set to the count a result reports changes nothing)."""
    if channels is None and op in ("broadcast", "reduce"):
        checked, layout = participants(graph, op, ranks, None)
        channels = _chain_channels(graph, checked, layout)
    return participants(graph, op, ranks, channels)
