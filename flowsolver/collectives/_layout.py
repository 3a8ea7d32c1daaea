"""Where the ranks sit: servers, ring orders, channels and the NVLS domain of a collective."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations

import numpy as np

from .. import _checks
from ..routing import gpu_nodes, graph_memo, link_efficiency
from ._algorithms import algorithm_of
from ._mesh_rings import mesh_rings
from ._nccl import GPU_GENERATION, NVLS_EFFICIENCY

__all__ = ["RankLayout", "NvlsDomain", "participants", "unavailable", "rank_server_codes", "mesh_cycles", "mesh_edges",
           "MAX_MESH_RING_GPUS"]

#: the most GPUs of one node joined pairwise by NVLink without an NVSwitch whose rings
#: :func:`mesh_cycles` lists ((n - 1)! of them: the NVLink meshes built are of 4 GPUs at most)
MAX_MESH_RING_GPUS = 6


@dataclass(frozen=True)
class NvlsDomain:
    """One NVSwitch that every rank hangs off, with its GPUs' NVLS efficiency."""

    switch: object
    efficiency: float


@dataclass(frozen=True)
class RankLayout:
    """The ranks of a collective laid out on the cluster (rank positions, not ranks).

    ``groups`` positions by server (servers in order of first appearance); ``rings`` one
    ring order per channel; ``channels``; ``nvls`` the NVSwitch domain, or None with the
    reason in ``nvls_unavailable``.
    """

    groups: tuple
    rings: tuple
    channels: int
    nvls: NvlsDomain | None = None
    nvls_unavailable: str = ""
    sides: tuple | None = None      # per server its positions by NIC where GPUs share NICs (_nic_sides)


def _rank_servers(graph, nodes):
    """Each GPU rank's server (its ``server`` attribute, else a server of its own)."""
    return graph_memo(graph, "rank-server", lambda: [graph.nodes[n].get("server", ("rank", r))
                                                     for r, n in enumerate(nodes)])


def edge_index(graph) -> dict:
    """Each link ``(u, v)`` of ``graph`` -> its position in ``graph.edges()`` order (the order
    of link tables and routing matrices), kept with the unchanged graph."""
    return graph_memo(graph, "edge_index", lambda: {(u, v): i for i, (u, v) in enumerate(graph.edges())})


def rank_server_codes(graph) -> np.ndarray:
    """Each GPU rank's server as an integer code (equal codes: one server), kept with the
    unchanged graph."""
    def build():
        of_rank = _rank_servers(graph, gpu_nodes(graph))
        code: dict = {}
        return np.array([code.setdefault(s, len(code)) for s in of_rank], dtype=np.int64)
    return graph_memo(graph, "rank-server-code", build)


def _server_groups(graph, ranks, nodes):
    """Rank positions grouped by server, servers in order of first appearance."""
    of_rank = _rank_servers(graph, nodes)
    servers: dict = {}
    for pos, r in enumerate(ranks):
        servers.setdefault(of_rank[r], []).append(pos)
    return tuple(tuple(g) for g in servers.values())


def _ring_orders(groups, channels, sides=None):
    """Ring orders (positions), one per channel: ring ``c`` enters the ``k``-th server at its
    local GPU ``(c - k) mod m``, the rail the previous server was left by (every GPU its own
    NIC). ``sides``: where servers' GPUs share NICs, per server its positions grouped by their
    NIC (:func:`_nic_sides`); ring ``c`` then enters and leaves every server by GPUs of NIC
    ``c mod n``, as NCCL's ring search keeps a channel on one NIC (its ``NET -> GPU ... GPU ->
    NET`` pattern on the same device): the rings spread over every NIC, where the rail rule
    would send them all out through the NICs of the same GPUs (2 NICs for 4 GPUs: one NIC)."""
    rings = []
    for c in range(channels):
        ring = []
        for idx, members in enumerate(groups):
            if sides is None or len(sides[idx]) < 2:
                k = (c - idx) % len(members)
                ring.extend(members[k:] + members[:k])
                continue
            side = sides[idx][c % len(sides[idx])]
            j = (c // len(sides[idx])) % len(side)
            ends = (side[j],) if len(side) < 2 else (side[j], side[(j + 1) % len(side)])
            ring.extend([ends[0], *(p for p in members if p not in ends), *ends[1:]])
        rings.append(tuple(ring))
    return tuple(rings)


def mesh_edges(graph, gpus) -> dict | None:
    """The NVLink edge (its attributes) of each directed pair ``(i, j)`` of ``gpus`` (node ids of
    one server, indices into them) joined pairwise by their own NVLink edges without an NVSwitch
    (``topologies`` layout ``"nvlink_mesh"``), a failed pair's too (capacity 0,
    ``topologies.fail_links``); None where they are not such a mesh (an NVSwitch, a pair
    without its NVLink edge, more than :data:`MAX_MESH_RING_GPUS`)."""
    n = len(gpus)
    if not 2 <= n <= MAX_MESH_RING_GPUS or len(set(gpus)) != n:
        return None
    if any(graph.nodes[v].get("kind") == "nvswitch" for g in gpus for v in graph.successors(g)):
        return None
    edges = {(i, j): graph.get_edge_data(a, b) for i, a in enumerate(gpus) for j, b in enumerate(gpus) if i != j}
    if any(d is None or not str(d.get("tech", "")).startswith("nvlink") for d in edges.values()):
        return None
    return edges


def node_mesh_rings(graph, gpus) -> tuple:
    """:func:`~._mesh_rings.mesh_rings` of ``gpus`` (node ids of one server, in rank order) on ``graph``, each
    pair at NCCL's view of its NVLink edge (its capacity at the catalogue's NVLink efficiency,
    ``ncclTopoNVLinkBw`` over the link's rate, as :func:`~._hardware.mesh_pairs` reads it), a
    failed pair at 0; () where they are not one NVLink mesh (:func:`mesh_edges`)."""
    edges = mesh_edges(graph, gpus)
    if edges is None:
        return ()
    pairs = {arc: d.get("capacity", 0.0) * link_efficiency(d.get("tech", ""), None, d.get("efficiency")) / 1e9
             for arc, d in edges.items()}
    types = {graph.nodes[g].get("gpu_type") for g in gpus}
    return mesh_rings(pairs, len(gpus), GPU_GENERATION.get(next(iter(types))) if len(types) == 1 else None)


def mesh_cycles(graph, gpus) -> tuple:
    """The rings NCCL's search finds through ``gpus`` (node ids of one server, in rank order)
    joined pairwise by their own NVLink edges without an NVSwitch (:func:`mesh_edges`), every
    pair working, as indices into ``gpus``: every directed Hamiltonian cycle from the first GPU,
    in lexicographic order (on 4 GPUs the 6 of SURF Snellius' NCCL log, "Channel 00/24 : 0 1 2 3"
    to "05/24 : 0 3 2 1", then repeated, the log listing 0 2 3 1 before 0 2 1 3;
    odissei-benchmarks/nccl-tests runs/1node). NCCL's search (src/graph/search.cc
    ncclTopoSearchRec, sameChannels off) keeps a channel wherever its arcs have bandwidth left, so
    on a uniform mesh every such cycle is one of its channels (:func:`~._hardware.mesh_ring_channels`
    counts them; :func:`~._mesh_rings.mesh_rings` gives the ones a slow pair leaves). () where
    ``gpus`` are not such a mesh or a pair of it failed (capacity 0: the rings that avoid it are
    :func:`node_mesh_rings`').

    >>> import topologies as tp
    >>> g = tp.rail_optimized(1, server="polaris_a100")
    >>> mesh_cycles(g, [f"s0/gpu{i}" for i in range(4)])
    ((0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1))
    >>> mesh_cycles(tp.rail_optimized(1), [f"s0/gpu{i}" for i in range(4)])      # an NVSwitch
    ()
    """
    edges = mesh_edges(graph, gpus)
    if edges is None or not all(d.get("capacity", 0) > 0 for d in edges.values()):
        return ()
    return tuple((0, *p) for p in permutations(range(1, len(gpus))))


def near_nics(graph, gpu) -> tuple:
    """The NICs nearest ``gpu`` through PCIe switches alone (what NCCL counts as a GPU's local
    NICs: its PIX or PXB paths, not through the CPU): on its own PCIe link, else behind its
    switch, else behind the fewest switches (nested switches, as NCCL's XML dumps of OCI's
    H100 servers have: GPU, switch, switch, switch, NIC)."""
    kind = graph.nodes
    seen, level = {gpu}, [gpu]
    while level:
        near = tuple(v for u in level for v in graph.successors(u) if kind[v].get("kind") == "nic")
        if near:
            return tuple(dict.fromkeys(near))
        level = [v for u in level for v in graph.successors(u)
                 if kind[v].get("kind") == "pcie_switch" and v not in seen and not seen.add(v)]
    return _rail_nics(graph, gpu)


def near_nics_of(graph, gpus) -> list:
    """:func:`near_nics` of each of ``gpus``, each GPU's searched once while the graph is
    unchanged (a training step's data-parallel groups ask for every GPU of the job)."""
    memo = graph_memo(graph, "near-nics", dict)
    return [memo[g] if g in memo else memo.setdefault(g, near_nics(graph, g)) for g in gpus]


def _rail_nics(graph, gpu) -> tuple:
    """The compute NICs of ``gpu``'s rail on its server that another GPU owns the PCIe cable of,
    for a GPU with no PCIe path of its own to a NIC: a server model's second GPU of a NIC it
    shares (``topologies.servers``: the first GPU of the pair owns the cable), which on the
    machine sits under the NIC's PCIe switch as the first does (DGX A100, p4d: a NIC per GPU
    pair), so NCCL counts the NIC as local to both. A NIC reached through switches or a CPU (a
    machine file's) is not one: NCCL's path type to it is the PCIe tree's, not the pair's."""
    rail = graph.nodes[gpu].get("rail")
    if rail is None:
        return ()

    def build():
        table: dict = {}
        for n, a in graph.nodes(data=True):
            if a.get("kind") == "nic" and a.get("role", "compute") == "compute" and \
                    any(graph.nodes[u].get("kind") == "gpu" for u in graph.predecessors(n)):
                table.setdefault((a.get("server"), a.get("rail")), []).append(n)
        return {k: tuple(v) for k, v in table.items()}

    return graph_memo(graph, "rail-nics", build).get((graph.nodes[gpu].get("server"), rail), ())


def _nvls_switch(graph, gpu_nodes, n_servers):
    """(the NVSwitch every GPU hangs off, "") or (None, why not): the graph's structure only."""
    if n_servers > 1:
        return None, f"the ranks span {n_servers} servers (NVLS reduces inside one NVSwitch domain)"
    switches = {v for g in gpu_nodes for v in graph.successors(g) if graph.nodes[v].get("kind") == "nvswitch"}
    if len(switches) != 1 or not all(graph.has_edge(g, next(iter(switches))) for g in gpu_nodes):
        return None, "the ranks do not all hang off one NVSwitch"
    return next(iter(switches)), ""


def _nvls_domain(graph, gpu_nodes, n_servers, switch=None):
    """(NvlsDomain, "") when the GPUs share one NVSwitch with NVLS support, else (None, the
    reason they do not); ``switch``, :func:`_nvls_switch`'s answer when the caller has it."""
    switch, why = _nvls_switch(graph, gpu_nodes, n_servers) if switch is None else (switch, "")
    if switch is None:
        return None, why
    switches = (switch,)
    gpu_types = {graph.nodes[g].get("gpu_type") for g in gpu_nodes}
    eff = {NVLS_EFFICIENCY.get(t) for t in gpu_types}
    if None in eff or len(eff) != 1:
        return None, f"GPU type {sorted(map(str, gpu_types))} has no NVLS (NCCL: Hopper and Blackwell only)"
    return NvlsDomain(next(iter(switches)), eff.pop()), ""


def _compute_nics(graph) -> dict:
    """Server -> how many compute NICs it has."""
    count: dict = {}
    for _, d in graph.nodes(data=True):
        if d.get("kind") == "nic" and d.get("role") == "compute":
            count[d.get("server")] = count.get(d.get("server"), 0) + 1
    return count


def server_nics(graph, server) -> int:
    """How many compute NICs ``server`` has (counted once per unchanged graph)."""
    return graph_memo(graph, "compute_nics", lambda: _compute_nics(graph)).get(server, 0)


def node_nics(graph, server, nodes: int) -> int:
    """The NICs NCCL's search gives a node of ``server`` in a communicator over ``nodes`` nodes:
    its compute NICs (:func:`server_nics`), at least one across nodes (GPUs cabled straight into
    a fabric, no NIC node: each GPU's own port is its NIC)."""
    return max(server_nics(graph, server), 1 if nodes > 1 else 0)


def participants(graph, op, ranks, channels):
    """Checked ranks (a list) and their :class:`RankLayout`. ``channels`` default: the NICs of
    a server when the ranks span several servers, else 1 (a broadcast's or reduce's default is
    NCCL's channel count: :func:`~._hardware.laid_out` gives it)."""
    nodes = gpu_nodes(graph)
    n_gpu = len(nodes)
    ranks = list(range(n_gpu)) if ranks is None else _checks.rank_indices(graph, ranks, nodes=nodes)
    if len(set(ranks)) != len(ranks):
        twice = next(r for i, r in enumerate(ranks) if r in ranks[:i])
        raise ValueError(f"ranks must be distinct GPU ranks: rank {twice} is given twice")
    if len(ranks) < 2:
        raise ValueError(f"ranks must be at least 2 distinct GPU ranks in 0 ... {n_gpu - 1}, got {ranks[:8]}")
    if op == "send_recv":
        ranks = ranks[:2]
    if channels is not None:
        channels = _checks.integer("channels", channels)
    # the same groups recur across the collectives a planner solves: laid out once per
    # unchanged graph (a RankLayout is frozen; the ranks are handed out as a fresh list), and
    # groups laid out alike share one RankLayout object (schedules are looked up by it)
    interned = graph_memo(graph, "layouts", dict)
    known = graph_memo(graph, "participants", dict)
    key = (tuple(ranks), channels)
    if key not in known:
        laid = _laid_out(graph, nodes, ranks, channels)
        known[key] = interned.setdefault(laid, laid)
    laid = known[key]
    if laid.nvls is not None or "no NVLS" in laid.nvls_unavailable:
        # one server on one NVSwitch: its GPUs' NVLS read afresh (GPU types are not part of
        # the graph's signature, an in-place edit of one must be seen; the switch is)
        switch = laid.nvls.switch if laid.nvls is not None else known_switch(graph, nodes, ranks)
        nvls, why = _nvls_domain(graph, [nodes[r] for r in ranks], 1, switch)
        if (nvls, why) != (laid.nvls, laid.nvls_unavailable):
            laid = replace(laid, nvls=nvls, nvls_unavailable=why)
            laid = interned.setdefault(laid, laid)
    return list(ranks), laid


def known_switch(graph, nodes, ranks):
    """The NVSwitch of one server's ``ranks`` (remembered while the graph is unchanged)."""
    known = graph_memo(graph, "nvswitch-of-ranks", dict)
    key = tuple(ranks)
    if key not in known:
        known[key] = _nvls_switch(graph, [nodes[r] for r in ranks], 1)[0]
    return known[key]


def without_nvls(graph, layout: RankLayout) -> RankLayout:
    """``layout`` without its NVSwitch domain: what every schedule but NVLS's reads of it
    (groups of different servers laid out alike then share one object, and their steps);
    one object per value while the graph is unchanged."""
    if layout.nvls is None and not layout.nvls_unavailable:
        return layout
    known = graph_memo(graph, "layouts-without-nvls", dict)
    seen = known.get(id(layout))
    if seen is None or seen[0] is not layout:       # (kept alive here: its id is not reused)
        plain = replace(layout, nvls=None, nvls_unavailable="")
        seen = known[id(layout)] = (layout, graph_memo(graph, "layouts", dict).setdefault(plain, plain))
    return seen[1]


def _nic_sides(graph, nodes, ranks, groups):
    """Per server, its positions grouped by each GPU's NIC (its ``rail``, else the first of
    :func:`near_nics`), NICs in rail order (by name where there are no rails); None unless some
    server of several NICs has GPUs sharing one (where every GPU has its own NIC, or one NIC
    serves all, the rail rule of :func:`_ring_orders` already spreads the rings as NCCL does)."""
    near = graph_memo(graph, "first-near-nic", dict)
    out, shared = [], False
    for members in groups:
        by: dict = {}
        for pos in members:
            gpu = nodes[ranks[pos]]
            if gpu not in near:          # its rail (the NIC a server model gives it), else its nearest NIC
                near[gpu] = graph.nodes[gpu].get("rail", next(iter(near_nics(graph, gpu)), None))
            by.setdefault(("own", pos) if near[gpu] is None else near[gpu], []).append(pos)
        # in NIC order (rails by number): ring c leaves and enters every server on the same rail
        # whatever order the ranks list a server's GPUs in
        ordered = sorted(by.items(), key=lambda kv: (0, kv[0], "") if isinstance(kv[0], int) else (1, 0, str(kv[0])))
        out.append(tuple(tuple(s) for _, s in ordered))
        shared |= len(by) > 1 and len(by) < len(members)
    return tuple(out) if shared else None


def _laid_out(graph, nodes, ranks, channels) -> RankLayout:
    """:func:`participants`' RankLayout of the checked ``ranks``."""
    groups = _server_groups(graph, ranks, nodes)
    if len(groups) == 1:
        cycles = node_mesh_rings(graph, [nodes[ranks[p]] for p in groups[0]])
        if cycles:      # one NVLink mesh: the rings NCCL's search packs at the pairs' bandwidth, one a channel
            channels = len(cycles) if channels is None else channels
            rings = tuple(tuple(groups[0][i] for i in cycles[c % len(cycles)]) for c in range(channels))
            return RankLayout(groups=groups, rings=rings, channels=channels, nvls=None,
                              nvls_unavailable="the ranks do not all hang off one NVSwitch (an NVLink mesh)")
    if channels is None:
        first = graph.nodes[nodes[ranks[0]]].get("server")
        nics = server_nics(graph, first)
        # one ring per NIC, but no more than the GPUs a server contributes (a ring through
        # one GPU per server can only use that GPU's NIC: more channels change nothing)
        channels = max(1, min(nics, max(len(g) for g in groups))) if len(groups) > 1 else 1
    nvls, why = _nvls_domain(graph, [nodes[r] for r in ranks], len(groups))
    # sides matter only where a server gives three or more GPUs (two sharing a NIC beside one of
    # its own): a pipeline's 15,360 pairs, a GPU a server, skip the look-ups
    sides = _nic_sides(graph, nodes, ranks, groups) if len(groups) > 1 and max(map(len, groups)) > 2 else None
    return RankLayout(groups=groups, rings=_ring_orders(groups, channels, sides), channels=channels,
                      nvls=nvls, nvls_unavailable=why, sides=sides)


def unavailable(algorithm, p, layout: RankLayout) -> str | None:
    """Why ``algorithm`` cannot run on ``p`` ranks laid out as ``layout``, or None (its
    registration's ``unavailable``, :func:`~._algorithms.register_algorithm`)."""
    return algorithm_of(algorithm).why_unavailable(p, layout)
