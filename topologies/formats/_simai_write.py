"""Cluster graphs written as SimAI topology files (:func:`to_simai`; the format and its reader:
:mod:`.simai`)."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np

from .._graph import compute_fabric
from .._validate import validate
from ..analysis import gpus as ranked_gpus

__all__ = ["to_simai"]

# the catalogue's GPUs by SimAI's type names (what the reader's table maps back)
_WRITE_TYPES = {"a100_sxm": "A100", "h100_sxm": "H100", "h100_pcie": "H100", "b200": "B200",
                "gb200": "GB200"}
# catalogue GPUs written under a name that reads back as another (SimAI has no name of their own)
_READS_BACK_AS = {"h100_pcie": "h100_sxm"}


def to_simai(g: nx.DiGraph, path, *, gpu_type: str | None = None) -> Path:
    """Write a cluster graph as a SimAI topology file (to cross-check with SimAI's ns-3 backend).

    GPUs get ids ``0 ... n-1`` in rank order, then the NVSwitches, then the switches. SimAI's
    GPU node holds its NIC, so a GPU's NIC becomes a link from the GPU to each switch the
    NIC is cabled to, at the slower of the cable and the GPU's path to the NIC (PCIe), with
    both latencies; PCIe switches and CPUs are not in the format and are left out (with a
    warning). Links are written in id order, rates in Gbps, delays in ns (both to 12
    significant digits), error rate 0; a failed link
    (capacity 0) is left out. Front-end and storage networks are not written, nor are link
    technologies: read back by :func:`from_simai`, links carry the technologies ``simai``,
    ``nvlink_simai`` and ``pcie_simai``, which have no measured efficiency in the catalogue,
    and the servers are rebuilt from the header, so a collective's time on the graph read back
    differs from the original's.

    Parameters
    ----------
    g : networkx.DiGraph
        A cluster graph (every GPU with its own NIC, or cabled directly).
    path : str or Path
        The file to write.
    gpu_type : str, optional
        SimAI's GPU type name (``"H100"``, ``"A100"``, ...); default from the GPUs' type. An
        ``h100_pcie`` is written as ``"H100"`` (SimAI has no PCIe name) with a warning: read
        back, it is an ``h100_sxm`` unless ``from_simai(..., gpu="h100_pcie")``.

    Examples
    --------
    >>> import tempfile, os
    >>> from topologies import rail_optimized
    >>> p = to_simai(rail_optimized(2), os.path.join(tempfile.mkdtemp(), "topo"))
    >>> open(p).readline().split()    # 16 GPUs, 2 NVSwitches, 8 leaves + 1 spine; 16 + 16 + 8 links
    ['27', '8', '2', '9', '40', 'H100']
    """
    core = compute_fabric(validate(g))
    gpus = ranked_gpus(core)
    stray = [n for n, d in core.nodes(data=True) if d["kind"] == "storage"]
    if stray:
        raise ValueError(f"g: storage node {stray[0]!r} on the compute fabric has no SimAI node type")
    nvs = [n for n, d in core.nodes(data=True) if d["kind"] == "nvswitch"]
    sws = [n for n, d in core.nodes(data=True) if d["kind"] == "switch"]
    ids = {n: i for i, n in enumerate(gpus + nvs + sws)}
    links = [(ids[u], ids[v], min(d["capacity"], core[v][u]["capacity"]), d.get("latency", 0.0))
             for u, v, d in core.edges(data=True) if u in ids and v in ids and ids[u] < ids[v]]
    links += _nic_links(core, gpus, ids)
    dropped = sorted({d["kind"] for _, d in core.nodes(data=True) if d["kind"] in ("pcie_switch", "cpu")})
    if dropped:
        warnings.warn(f"to_simai: {', '.join(dropped)} nodes are not in SimAI's format; GPU paths "
                      "through them are left out (NIC links keep their PCIe rate)", stacklevel=2)
    failed = [x for x in links if x[2] <= 0]
    if failed:
        warnings.warn(f"to_simai: {len(failed)} failed link(s) (capacity 0) left out", stacklevel=2)
    links = [x for x in links if x[2] > 0]
    if failed and _gpu_parts(links, len(ids), len(gpus)) > 1:
        raise ValueError(f"g: with its {len(failed)} failed link(s) left out (SimAI's format has no failed link) "
                         "the GPUs fall apart into disconnected parts, a file SimAI and from_simai refuse: "
                         "write the graph without the failures")
    per_server = Counter(core.nodes[n].get("server") for n in gpus)
    type_name = gpu_type or _simai_type(core, gpus)
    lines = [f"{len(ids)} {max(per_server.values())} {len(nvs)} {len(sws)} {len(links)} {type_name}",
             " ".join(str(ids[n]) for n in nvs + sws)]
    # 12 significant digits: what was read is written back unchanged
    lines += [f"{a} {b} {rate * 8 / 1e9:.12g}Gbps {lat * 1e9:.12g}ns 0" for a, b, rate, lat in sorted(links)]
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def _gpu_parts(links, n_nodes: int, n_gpus: int) -> int:
    """How many connected parts the GPUs (ids 0 ... n_gpus - 1) fall into over ``links``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    a = np.array([x[0] for x in links], dtype=np.int64)
    b = np.array([x[1] for x in links], dtype=np.int64)
    adj = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n_nodes, n_nodes))
    _, label = connected_components(adj, directed=False)
    return len(set(label[:n_gpus].tolist()))


def _simai_type(g, gpus) -> str:
    types = {g.nodes[n].get("gpu_type") for n in gpus}
    if len(types) != 1 or next(iter(types)) not in _WRITE_TYPES:
        raise ValueError(f"gpu_type: GPU type(s) {sorted(map(str, types))} have no SimAI name; "
                         f"pass gpu_type=... ({', '.join(sorted(set(_WRITE_TYPES.values())))})")
    gpu = types.pop()
    if gpu in _READS_BACK_AS:
        warnings.warn(f"to_simai: SimAI has no name for {gpu}: written as {_WRITE_TYPES[gpu]!r}, which from_simai "
                      f"reads as {_READS_BACK_AS[gpu]}; read the file back with gpu={gpu!r} to keep the type",
                      stacklevel=3)
    return _WRITE_TYPES[gpu]


def _nic_links(g, gpus, ids):
    """(gpu id, switch id, rate, latency) for every compute NIC's cable to a switch."""
    out = []
    by_rail = {(g.nodes[n].get("server"), g.nodes[n].get("rail")): n for n in reversed(gpus)}
    taken: dict = {}
    inside = g.subgraph(n for n, x in g.nodes(data=True) if x["kind"] != "switch")
    for nic, d in g.nodes(data=True):
        if d["kind"] != "nic":
            continue
        owner = by_rail.get((d.get("server"), d.get("rail")))
        if owner is None:
            raise ValueError(f"g: NIC {nic!r} serves no GPU (no GPU of server {d.get('server')} "
                             f"on rail {d.get('rail')}); SimAI gives every GPU its own NIC")
        if owner in taken:
            raise ValueError(f"g: GPU {owner!r} has NICs {taken[owner]!r} and {nic!r}; SimAI "
                             "gives every GPU one NIC (write a server with one NIC per GPU)")
        taken[owner] = nic
        path = nx.shortest_path(inside, owner, nic)
        hops = list(zip(path, path[1:]))
        rate = min(min(g[u][v]["capacity"], g[v][u]["capacity"]) for u, v in hops)
        lat = sum(g[u][v].get("latency", 0.0) for u, v in hops)
        for sw in g.successors(nic):
            if g.nodes[sw]["kind"] == "switch":
                cable = min(g[nic][sw]["capacity"], g[sw][nic]["capacity"])
                out.append((ids[owner], ids[sw], min(rate, cable), lat + g[nic][sw].get("latency", 0.0)))
    return out
