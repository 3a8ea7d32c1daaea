"""SimAI's topology file (what its ``gen_Topo_Template.py`` writes and its ns-3 backend reads)
as a cluster graph, and cluster graphs written in that format.

The format (whitespace-separated)::

    node_num gpus_per_server nvswitch_num switch_num link_num gpu_type
    <nvswitch_num NVSwitch ids> <switch_num switch ids>
    src dst rate delay error_rate          (link_num lines, e.g. "0 16 400Gbps 0.0005ms 0")

Every node id not listed as a switch is a GPU (SimAI's "server" node: the GPU and its NIC);
a link is full duplex at ``rate`` (an ns-3 DataRate: ``Gbps``, ``Mbps``, ...) with ``delay``
(an ns-3 Time: ``ms``, ``us``, ``ns``, ...).

What the file carries, and what it does not
-------------------------------------------
It carries the nodes (GPUs, NVSwitches, switches), each link's rate and delay, and a GPU type
name. Rates (bits/s) and delays become each edge's ``capacity`` in bytes/s and ``latency`` in
seconds, converted once when the link is read. Repeated links between the same two nodes are
parallel cables: one edge of the summed rate; if their delays differ the edge takes the larger
(noted in ``g.graph["notes"]``). The file does not carry a server's insides: SimAI's GPU node
holds its NIC, so a GPU's links to switches become one NIC: GPU -> NIC (at the sum of the links'
rates, no latency: the PCIe hop is not in the file) -> each switch (the link's rate and delay).
A GPU cabled to two switches (SimAI's dual-ToR layouts, ``gen_Topo_Template.py``
``Rail_Opti_DualToR_*``: Alibaba HPN's NIC with a port to each ToR) has one NIC of two ports,
and routing spreads its traffic over both. There are no PCIe switches
or CPUs, and the servers are ``gpus_per_server`` consecutive GPU ids (the file does not say
which GPUs share a box otherwise). Switch tiers and roles (leaf, spine, core) are inferred from
the hop count to the GPUs. The per-link ``error_rate`` (packet loss) is not modelled: a non-zero
one is noted and ignored. Switch buffers, ECN/PFC settings and SimAI's ns-3 configuration are
not in this file.

A bad file gets one ``ValueError`` naming the file, line and field: bytes that are not UTF-8, a
header field that is not a count, switch ids out of range or repeated, a link line that is not
``src dst rate delay error_rate``, a rate or delay that is not a number with an ns-3 unit, is
negative (rate: not > 0), NaN, infinite, or overflows once converted (``1e400Gbps``,
``1e300Tbps``). Before anything is built the reader checks the file's size (``max_bytes``),
``node_num`` (``max_nodes``), ``link_num`` (``max_links``) and that the GPUs the header
implies (ids not listed as switches) are no more than twice the link lines (every GPU needs a
link): what a file makes the reader allocate is bounded by the file.
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from pathlib import Path

import networkx as nx

from .._graph import check_int, finish
from ._common import DECIMAL, MIB, check_limit, over, read_text, short
from ._simai_write import to_simai      # the writer (its own module)
from .._validate import TopologyError, validate
from ..gpu_types import get_gpu

__all__ = ["from_simai", "to_simai"]

# ns-3 DataRate units (src/network/utils/data-rate.cc): bit-based SI, "B" = bytes.
_RATE = {"bps": 1, "kbps": 1e3, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12,
         "Bps": 8, "KBps": 8e3, "MBps": 8e6, "GBps": 8e9}
# ns-3 Time units (src/core/model/nstime.h)
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}
# SimAI's GPU type names (its topology generator and ns-3 backend: A100, A800, H100, H800)
# -> the catalogue's compute figures. A800 and H800 are A100 and H100 with less NVLink
# bandwidth (NVIDIA export variants); the file carries the link rates itself.
_GPU_TYPES = {"A100": "a100_sxm", "A800": "a100_sxm", "H100": "h100_sxm", "H800": "h100_sxm",
              "B200": "b200", "GB200": "gb200"}
# Type names SimAI's files use (its inputs/topo/*_H20) for GPUs the catalogue has no figures of:
# refused, not read as another GPU (an H20 is not an H100 SXM; no NVIDIA datasheet of it to cite)
_UNKNOWN_TYPES = {"H20": "NVIDIA H20 (no public NVIDIA datasheet of its peaks, so no catalogue row)"}
# SimAI's generator writes clusters of up to tens of thousands of GPUs (about 50-60 bytes of
# links per GPU); a million nodes takes gigabytes as a graph
MAX_NODES = 1_000_000
MAX_LINKS = 10_000_000
# The file's bytes read (the default of max_bytes). A graph costs ~75-85x its file: fat trees of 32
# GPUs a leaf and 16 spines, peak RSS over the import (2026-12-07): 40,960 GPUs, a 1.9 MB file, +162 MB
# and 7 s; 163,840 GPUs, 8.0 MB, +579 MB and 24 s; 409,600 GPUs, 20.3 MB, 1.62 GB and 82 s (adv21b
# F3). So 16 MiB, ~340,000 GPUs, stays near 1.3 GB and a minute; the 256 MiB default it replaces
# let a file take ~21 GB and ~17 min before max_nodes stopped it
MAX_SIMAI_BYTES = 16 * MIB
_HEADER = ("node_num", "gpus_per_server", "nvswitch_num", "switch_num", "link_num")
_ID = re.compile(r"[0-9]{1,30}")      # ASCII digits only; 30 digits is beyond any limit
_QUANTITY = re.compile(rf"({DECIMAL.pattern})([A-Za-z]+)")


def _quantity(text, units, what, where):
    """``"400Gbps"`` -> 4e11 (in the table's base unit), finite, or a ValueError."""
    match = _QUANTITY.fullmatch(text)
    if not match or match.group(2) not in units:
        raise ValueError(f"{where}: {what} {short(text)} is not a number with a unit "
                         f"({', '.join(units)})")
    value = float(match.group(1)) * units[match.group(2)]
    if not math.isfinite(value):
        raise ValueError(f"{where}: {what} {short(text)} is beyond float range")
    return value + 0.0       # -0.0 -> 0.0


def _count(token, name, where) -> int:
    if not _ID.fullmatch(token):
        raise ValueError(f"{where}: {name} must be an integer >= 0, got {short(token)}")
    return int(token)



def _read_header(lines, where, max_nodes, max_links):
    """The header's counts and GPU type, the switch ids, and the index of the first link line;
    every count checked against its limit before anything of that size is made."""
    number, first = lines[0]
    at = f"{where} line {number}"
    head = first.split()
    if len(head) not in (6, 7):
        raise ValueError(f"{at}: expected 'node_num gpus_per_server nvswitch_num "
                         f"switch_num link_num gpu_type', got {short(first.strip())}")
    nodes, per_server, n_nvs, n_sw, n_links = (_count(t, name, at) for t, name in zip(head, _HEADER))
    if nodes > max_nodes:
        raise over(at, "node_num", nodes, "max_nodes", max_nodes)
    if n_links > max_links:
        raise over(at, "link_num", n_links, "max_links", max_links)
    if n_nvs + n_sw > nodes:
        raise ValueError(f"{at}: nvswitch_num {n_nvs} + switch_num {n_sw} exceed node_num {nodes}")
    tokens, row = [], 1
    while len(tokens) < n_nvs + n_sw and row < len(lines):
        tokens += lines[row][1].split()
        row += 1
    if len(tokens) != n_nvs + n_sw or not all(_ID.fullmatch(t) for t in tokens):
        raise ValueError(f"{where}: expected {n_nvs} NVSwitch and {n_sw} switch ids after the "
                         f"header, got {short(' '.join(tokens[:12]))}")
    ids = [int(t) for t in tokens]
    bad = [i for i in ids if i >= nodes]
    if bad or len(set(ids)) != len(ids):
        raise ValueError(f"{where}: switch ids must be distinct and < node_num {nodes}, got {ids[:12]}")
    return (nodes, per_server, head[5]), ids[:n_nvs], ids[n_nvs:], n_links, row


def from_simai(path, *, gpu=None, max_nodes: int = MAX_NODES, max_links: int = MAX_LINKS,
               max_bytes: int = MAX_SIMAI_BYTES) -> nx.DiGraph:
    """Read a SimAI topology file into a cluster graph.

    GPU ``k`` (the ``k``-th id not listed as a switch) is ``"s{k // gpus_per_server}/gpu{j}"``;
    its links to switches go through one NIC node of its server, a port per link at the
    link's rate, the GPU -> NIC edge at their sum (SimAI's GPU node holds its NIC); switches
    are ``"sw{id}"`` with tier and role from their distance to the GPUs (``leaf``, ``spine``,
    ``core``), NVSwitches ``"nvs{id}"``. Edges carry
    the link's ``capacity`` (bytes/s per direction: the file's bits/s / 8) and ``latency`` (s).

    Parameters
    ----------
    path : str or Path
        The topology file.
    gpu : str or GpuSpec, optional
        GPU type; default from the header's type name (``H100``, ``A100``, ...). A type name
        the catalogue has no figures for (``H20``) is refused unless ``gpu`` is given.
    max_nodes : int
        Refuse a header whose ``node_num`` is larger, before building anything (default
        1,000,000).
    max_links : int
        Refuse a header whose ``link_num`` is larger (default 10,000,000).
    max_bytes : int
        Refuse a larger file before reading it (default 16 MiB, :data:`MAX_SIMAI_BYTES`: ~340,000
        GPUs of fat tree; the graph takes ~80x its file, 1.6 GB for 20 MB).

    Raises
    ------
    ValueError
        One line naming the file, line and field (see the module docstring), or a limit
        exceeded (naming the limit to raise); a :class:`TopologyError` (a ValueError) naming
        the file when the graph breaks the schema (a GPU without links).

    Examples
    --------
    >>> import tempfile, os
    >>> text = "4 2 1 1 4 H100\\n2 3\\n0 2 2880Gbps 0.000025ms 0\\n1 2 2880Gbps 0.000025ms 0\\n" \\
    ...        "0 3 400Gbps 0.0005ms 0\\n1 3 400Gbps 0.0005ms 0\\n"
    >>> path = os.path.join(tempfile.mkdtemp(), "topo")
    >>> _ = open(path, "w").write(text)
    >>> g = from_simai(path)
    >>> g["s0/gpu1"]["nvs2"]["capacity"] / 1e9, g["s0/nic1"]["sw3"]["capacity"] / 1e9
    (360.0, 50.0)
    >>> g["s0/nic1"]["sw3"]["latency"]          # 0.0005 ms
    5e-07
    """
    path = Path(path)
    where = str(path)
    check_int("max_nodes", max_nodes, 1)
    check_int("max_links", max_links, 1)
    text = read_text(path, check_limit("max_bytes", max_bytes))
    lines = [(number, ln) for number, ln in enumerate(text.split("\n"), 1) if ln.strip()]
    if not lines:
        raise ValueError(f"{where}: empty file")
    (nodes, per_server, type_name), nvswitches, switches, n_links, row = _read_header(
        lines, where, max_nodes, max_links)
    if per_server < 1:
        raise ValueError(f"{where} line 1: gpus_per_server must be >= 1, got {per_server}")
    body = lines[row:]
    if len(body) != n_links:
        raise ValueError(f"{where}: the header announces {n_links} links, the file has {len(body)}")
    gpus = nodes - len(nvswitches) - len(switches)
    if gpus > 2 * len(body):
        raise ValueError(f"{where}: node_num {nodes} less {len(nvswitches) + len(switches)} switch "
                         f"ids leaves {gpus} GPUs, but the file has {len(body)} link lines: every "
                         f"GPU needs a link (a truncated file, or a wrong node_num)")
    if gpu is None and type_name in _UNKNOWN_TYPES:
        raise ValueError(f"{where}: GPU type {short(type_name)} is the {_UNKNOWN_TYPES[type_name]}; pass "
                         "gpu=... (a catalogue name such as 'h100_sxm' to time it as that GPU, or a topologies.GpuSpec "
                         "with your GPU's figures, which training_step then needs as gpu= too)")
    if gpu is None and type_name not in _GPU_TYPES:
        raise ValueError(f"{where}: GPU type {short(type_name)} is not one of {', '.join(_GPU_TYPES)}; "
                         "pass gpu=... (e.g. 'h100_sxm')")
    gpu_name = get_gpu(gpu if gpu is not None else _GPU_TYPES[type_name]).name
    links = [_link(ln, number, nodes, where) for number, ln in body]
    g = _graph(nodes, per_server, nvswitches, switches, links, gpu_name, where)
    params = dict(source=where, gpus_per_server=per_server, gpu_type=type_name)
    try:
        validate(g)
    except TopologyError as err:
        raise TopologyError(f"{where}: {err}") from None
    g = finish(g, "simai", params, bisection=None, bisection_method="", network_diameter=None)
    # the file lists links, not a family with a bisection formula: describe() takes the max flow
    # between the server halves in rank order, one balanced cut of many (adv21b F2)
    g.graph["bisection_note"] = ("an upper bound on the bisection: the file's links have no formula, and "
                                 "another balanced cut may hold less")
    return g


def _link(line, number, nodes, where):
    """(src, dst, rate bytes/s, delay s, error rate, line number) of one link line."""
    at = f"{where} line {number}"
    parts = line.split()
    if len(parts) != 5 or not _ID.fullmatch(parts[0]) or not _ID.fullmatch(parts[1]):
        raise ValueError(f"{at}: expected 'src dst rate delay error_rate', got {short(line.strip())}")
    a, b = int(parts[0]), int(parts[1])
    if a >= nodes or b >= nodes or a == b:
        raise ValueError(f"{at}: link {a} -> {b} needs two distinct node ids < node_num {nodes}")
    rate = _quantity(parts[2], _RATE, "rate", at) / 8        # bits/s -> bytes/s, once, here
    delay = _quantity(parts[3], _TIME, "delay", at)          # s
    if rate <= 0:
        raise ValueError(f"{at}: rate must be > 0, got {short(parts[2])}")
    if delay < 0:
        raise ValueError(f"{at}: delay must be >= 0, got {short(parts[3])}")
    error = parts[4]
    if not DECIMAL.fullmatch(error) or not 0 <= float(error) <= 1:
        raise ValueError(f"{at}: error_rate must be a number in [0, 1], got {short(error)}")
    return a, b, rate, delay, error, number


def _graph(nodes, per_server, nvswitches, switches, links, gpu_name, where):
    kind = {i: "nvswitch" for i in nvswitches} | {i: "switch" for i in switches}
    gpu_ids = [i for i in range(nodes) if i not in kind]
    rank = {i: k for k, i in enumerate(gpu_ids)}
    name = {i: f"s{k // per_server}/gpu{k % per_server}" for i, k in rank.items()}
    name.update({i: f"nvs{i}" for i in nvswitches} | {i: f"sw{i}" for i in switches})
    g = nx.DiGraph()
    for i, k in rank.items():
        g.add_node(name[i], kind="gpu", tier=0, rank=k, server=k // per_server,
                   local_rank=k % per_server, gpu_type=gpu_name)
    for i in nvswitches:
        g.add_node(name[i], kind="nvswitch", tier=0)
    for i in switches:
        g.add_node(name[i], kind="switch", role="switch", tier=1)
    nics = Counter()
    nic_of: dict = {}
    notes = []
    for a, b, rate, delay, error, number in links:
        if kind.get(a) == "switch" and b in rank:
            a, b = b, a
        if float(error) != 0:
            notes.append(f"error rate {error} of link {a} - {b} (line {number}) ignored")
        if a in rank and kind.get(b) == "switch":
            nic = nic_of.get(a)
            if nic is None:     # the GPU's first switch link: its NIC
                server = rank[a] // per_server
                nic = nic_of[a] = f"s{server}/nic{nics[server]}"
                nics[server] += 1
                g.add_node(nic, kind="nic", tier=0, server=server, rail=nics[server] - 1, role="compute")
                g.nodes[name[a]].setdefault("rail", nics[server] - 1)
                _cable(g, name[a], nic, rate, 0.0, "pcie_simai", "pcie", number, notes)
            else:               # another port of the same NIC (a dual-ToR GPU): the GPU side carries the ports' sum
                for u, v in ((name[a], nic), (nic, name[a])):
                    g[u][v]["capacity"] += rate
            _cable(g, nic, name[b], rate, delay, "simai", "access", number, notes)
        elif "nvswitch" in (kind.get(a), kind.get(b)) or (a in rank and b in rank):
            _cable(g, name[a], name[b], rate, delay, "nvlink_simai", "nvlink", number, notes)
        else:
            _cable(g, name[a], name[b], rate, delay, "simai", "fabric", number, notes)
    _nvswitch_servers(g)
    _switch_tiers(g)
    several = [name[i] for i, nic in nic_of.items()
               if sum(g.nodes[v]["kind"] == "switch" for v in g.successors(nic)) > 1]
    if several:
        notes.append(f"{len(several)} GPU(s) cabled to several switches (e.g. {several[0]}): one NIC with a "
                     "port to each (SimAI's dual-ToR layouts), its traffic spread over them as ECMP spreads it")
    g.graph["notes"] = notes
    return g


def _cable(g, u, v, rate, delay, tech, tier, number, notes):
    if g.has_edge(u, v):       # a repeated link is a parallel cable
        if delay != g[u][v]["latency"]:
            notes.append(f"link {u} - {v} (line {number}) repeats a link of delay "
                         f"{g[u][v]['latency']:g} s with delay {delay:g} s: the larger taken")
        for a, b in ((u, v), (v, u)):
            g[a][b]["capacity"] += rate
            g[a][b]["cables"] += 1
            g[a][b]["latency"] = max(g[a][b]["latency"], delay)
        return
    attrs = dict(capacity=rate, latency=delay, tech=tech, tier=tier, cables=1)
    g.add_edge(u, v, **attrs)
    g.add_edge(v, u, **attrs)


def _nvswitch_servers(g):
    """An NVSwitch whose GPUs all sit in one server belongs to that server."""
    for n, d in g.nodes(data=True):
        if d["kind"] == "nvswitch":
            servers = {g.nodes[v].get("server") for v in g.successors(n) if g.nodes[v]["kind"] == "gpu"}
            if len(servers) == 1:
                d["server"] = servers.pop()


def _switch_tiers(g):
    """Switch tier = hops from the nearest NIC or GPU (1 leaf, 2 spine, 3 core)."""
    level = {n: 1 for n, d in g.nodes(data=True) if d["kind"] == "switch"
             and any(g.nodes[v]["kind"] in ("nic", "gpu") for v in g.successors(n))}
    queue = deque(level)
    while queue:
        n = queue.popleft()
        for v in g.successors(n):
            if g.nodes[v]["kind"] == "switch" and v not in level:
                level[v] = level[n] + 1
                queue.append(v)
    roles = {1: "leaf", 2: "spine", 3: "core"}
    for n, t in level.items():
        g.nodes[n].update(tier=t, role=roles.get(t, f"tier{t}"))
