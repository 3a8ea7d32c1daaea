"""The path classes NCCL's graph search settles on for a communicator (``typeIntra``, between
the GPUs of a node, and ``typeInter``, between a GPU and its NIC), from a cluster graph, as
NCCL's tuner reads them (NCCL 2.30 ``src/graph/tuning.cc``: the NVLink latency row only where
``typeIntra == PATH_NVL``; LL128 by default only where ``typeIntra <= PATH_NVB`` and
``typeInter <= PATH_PXB``, ``<= PATH_PXN`` on sm90 and later).

NCCL's path types (``src/include/graph.h``) are ordered; flowsolver keeps the ones its rules
tell apart, under NCCL's numbers: ``PATH_NVL`` (1: over NVLink, straight or through an
NVSwitch), ``PATH_NVB`` (2: over NVLink through another GPU), ``PATH_PXB`` (5: through PCIe
switches only; PIX, 4, is the same to the rules), ``PATH_PXN`` (7: to a NIC through another
GPU reached over NVLink, ``src/graph/paths.cc``), ``PATH_P2C`` (6: through the CPU a Grace
Hopper / Blackwell GPU meets over C2C, an NCCL topology file's ``<c2c>``: NCCL merges C2C and
PHB into P2C, ``paths.cc``, and takes GPUDirect RDMA over it), ``PATH_PHB`` (8: through a CPU;
PHB and SYS, 9, are the same to the rules; between GPUs, any PCIe path: every one is above NVB).
"""

from __future__ import annotations

from ._layout import near_nics_of
from ._nccl_model import PATH_NVB, PATH_NVL, PATH_P2C, PATH_PHB, PATH_PXB, PATH_PXN

__all__ = ["PATH_NVL", "PATH_NVB", "PATH_PXB", "PATH_P2C", "PATH_PXN", "PATH_PHB", "type_intra", "type_inter"]

#: the most GPUs of one node without an NVSwitch whose ring :func:`type_intra` searches for
#: exhaustively (2^n x n^2 steps); a larger one is taken as NVB where NVLink joins it all
_MAX_SEARCHED = 12


def _nvlink_peers(graph, gpus) -> dict:
    """GPU -> the set of ``gpus`` it reaches over NVLink in one path of NCCL's type NVL: an
    NVLink edge to it, or an NVSwitch both hang off."""
    mine = set(gpus)
    out = {g: set() for g in gpus}
    switches: dict = {}
    for g in gpus:
        for _, v, d in graph.out_edges(g, data=True):
            if not str(d.get("tech", "")).startswith("nvlink"):
                continue
            kind = graph.nodes[v].get("kind")
            if kind == "gpu" and v in mine and v != g:
                out[g].add(v)
                out[v].add(g)
            elif kind == "nvswitch":
                switches.setdefault(v, []).append(g)
    for members in switches.values():
        for g in members:
            out[g].update(m for m in members if m != g)
    return out


def _has_ring(order, peers) -> bool:
    """Whether ``order`` (GPUs) can be visited in a cycle whose every hop is in ``peers``
    (a Hamiltonian cycle: bitmask dynamic programming from the first GPU)."""
    n = len(order)
    index = {g: i for i, g in enumerate(order)}
    adj = [sum(1 << index[p] for p in peers[g]) for g in order]
    if n == 2:
        return bool(adj[0] & 2)
    ends = {1: 1}                       # visited set -> bitmask of GPUs a path from 0 can end at
    for _ in range(n - 1):
        grown: dict = {}
        for seen, last in ends.items():
            for i in range(n):
                if last >> i & 1:
                    step = adj[i] & ~seen
                    while step:
                        j = (step & -step).bit_length() - 1
                        step &= step - 1
                        key = seen | 1 << j
                        grown[key] = grown.get(key, 0) | 1 << j
        ends = grown
    return any(last & adj[0] for last in ends.values())


def _connected(order, peers) -> bool:
    seen, todo = {order[0]}, [order[0]]
    while todo:
        for p in peers[todo.pop()]:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return len(seen) == len(order)


def type_intra(graph, groups) -> int | None:
    """NCCL's ``typeIntra`` of a ring through each of ``groups`` (a node's GPU nodes each),
    the worst over the nodes (NCCL takes every rank's graph's worst, ``init.cc``): ``PATH_NVL``
    where NVLink paths close a ring through a node's GPUs (an NVSwitch, a pair joined by NVLink,
    a cube mesh), ``PATH_NVB`` where NVLink joins them only through other GPUs, else
    ``PATH_PHB`` (a PCIe hop: no NVLink, or NVLink-bridged pairs joined over PCIe). None where
    no node holds two (a node's one GPU is NCCL's PATH_LOC: no hop inside a node is counted).

    >>> import topologies as tp
    >>> four = [[f"s0/gpu{i}" for i in range(4)]]
    >>> type_intra(tp.rail_optimized(1), four), type_intra(tp.rail_optimized(1, server="pcie_8gpu"), four)
    (1, 8)
    """
    worst = None
    for gpus in groups:
        gpus = list(dict.fromkeys(gpus))
        if len(gpus) < 2:
            continue
        peers = _nvlink_peers(graph, gpus)
        if all(len(peers[g]) == len(gpus) - 1 for g in gpus):
            kind = PATH_NVL                 # every pair over NVLink (an NVSwitch): any ring
        elif not _connected(gpus, peers):
            kind = PATH_PHB
        elif len(gpus) <= _MAX_SEARCHED and _has_ring(gpus, peers):
            kind = PATH_NVL
        else:
            kind = PATH_NVB
        worst = kind if worst is None else max(worst, kind)
    return worst


def type_inter(graph, groups, pxn: bool = True) -> int:
    """NCCL's ``typeInter`` of a ring through each of ``groups`` (a node's GPU nodes each)
    between nodes, the worst over the nodes: a ring enters a node from a NIC at one GPU and
    leaves to a NIC from another, NCCL's search picking them for the best paths. A GPU's path
    to a NIC is ``PATH_PXB`` where PCIe switches alone lead to one (:func:`~._layout.near_nics`:
    a catalogue server's NIC hangs off its GPU, the PCIe switch folded), else ``PATH_PXN`` from
    a GPU it reaches over NVLink that has one (``paths.cc``: only GPU to NIC, so for the GPU the
    ring leaves from; not with ``pxn`` off, NCCL_PXN_DISABLE=1, which skips those paths), else
    ``PATH_PHB`` (through a CPU; ``PATH_P2C`` through the CPU a GPU meets over C2C). The node's
    class is the worse of the best entry (no PXN) and the best exit from another of its GPUs.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(2)
    >>> type_inter(g, [[f"s{s}/gpu{i}" for i in range(8)] for s in (0, 1)])
    5
    """
    worst = PATH_PXB
    groups = [list(dict.fromkeys(gpus)) for gpus in groups]
    every = [g for gpus in groups for g in gpus]
    nearest = dict(zip(every, near_nics_of(graph, every)))       # one look-up of the graph's memo
    for gpus in groups:
        raw = [PATH_PXB if nearest[g] else _through_cpu(graph, g) for g in gpus]
        if max(raw) <= PATH_PXB:
            continue
        peers = _nvlink_peers(graph, gpus)
        local = {g for g, r in zip(gpus, raw) if r <= PATH_P2C}     # pxnType P2C (NCCL_PXN_C2C, 2.28 on)
        out = [min(r, PATH_PXN) if pxn and peers[g] & local else r for g, r in zip(gpus, raw)]
        entry = min(range(len(gpus)), key=lambda i: raw[i])
        exits = [o for i, o in enumerate(out) if i != entry] or [out[entry]]
        worst = max(worst, raw[entry], min(exits))
    return worst


def _below(graph, start, kinds) -> set:
    """The nodes reached from ``start`` through PCIe switches only whose kind is in ``kinds``."""
    seen, level, found = {start}, [start], set()
    while level:
        nxt = []
        for u in level:
            for v in graph.successors(u):
                kind = graph.nodes[v].get("kind")
                if kind in kinds:
                    found.add(v)
                if kind == "pcie_switch" and v not in seen:
                    seen.add(v)
                    nxt.append(v)
        level = nxt
    return found


def _through_cpu(graph, gpu) -> int:
    """The class of ``gpu``'s path to a NIC with none under its PCIe switches: ``PATH_P2C`` where
    it meets its CPU over C2C (an NCCL file's ``<c2c>``: NCCL links the GPU straight to the CPU
    above its PCIe switches, topo.cc ncclTopoAddC2c) and a NIC sits under that CPU, through
    switches or not (PHB, merged with C2C into P2C: paths.cc), else ``PATH_PHB``."""
    if graph.nodes[gpu].get("c2c"):
        for cpu in _below(graph, gpu, {"cpu"}):
            if _below(graph, cpu, {"nic"}):
                return PATH_P2C
    return PATH_PHB
