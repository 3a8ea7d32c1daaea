"""ASTRA-sim's analytical network description (the network ``.yml`` of its analytical
backend) as a cluster graph.

The file lists, per dimension (dimension 1 innermost), its ``topology`` (``Ring``,
``FullyConnected`` or ``Switch``), ``npus_count``, ``bandwidth`` (GB/s per link and direction)
and ``latency`` (ns per link)::

    topology: [ Ring, FullyConnected, Switch ]
    npus_count: [ 2, 8, 4 ]
    bandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s
    latency: [ 50.0, 500.0, 2000.0 ]  # ns

NPU ``i`` has address ``x_d = (i // (n_1 ... n_{d-1})) mod n_d``; in dimension ``d`` the NPUs
whose addresses differ only in ``x_d`` form one building block, built as ASTRA-sim's
analytical backend (astra-network-analytical, ``MultiDimTopology``) builds it: a
bidirectional ring (``i <-> i+1`` and ``n-1 <-> 0``; a ring of 2 is one link each way, as
its devices keep one link per neighbour), every pair linked, or every NPU linked to a switch
of its own for the block. ASTRA-sim routes dimension by dimension; the graph keeps every
shortest path, so the routing policy chooses.

What the file carries, and what it does not
-------------------------------------------
It carries, per dimension, the block shape, the NPU count, one bandwidth and one latency for
every link of the dimension. Each link becomes a full-duplex cable of ``bandwidth x gigabyte``
bytes/s per direction and ``latency / 1e9`` s (converted once, when the edge is made; the
graph is in bytes, seconds and bytes/s from then on). The file does not carry the NPU type
(``gpu=``), the NPU's own injection port (taken as the sum of its links' rates at zero
latency, so it never limits), switch latency or buffering beyond the per-link latency, nor
anything of ASTRA-sim's system layer (collective algorithms, chunking, scheduling): those are
flowsolver's own models. Keys other than the four above are listed in ``g.graph["notes"]``.

A bad file gets one ``ValueError`` whose one-line message names the file and the key (and
dimension or line): bytes that are not UTF-8, a line that is not ``key: value``, a missing key,
lists of unequal length, an unknown block, an ``npus_count`` that is not an integer >= 1, a
bandwidth or latency that is negative, NaN, infinite, beyond float range or overflows once
converted (``1e300`` GB/s). What a file can make the reader build is bounded before anything
is built: the file's size (``max_bytes``), the number of dimensions (``max_dims``), the NPU
count, product of ``npus_count`` (``max_npus``), and the cable count (``max_links``; a
``FullyConnected`` dimension of ``n`` NPUs has ``n (n - 1) / 2`` cables per block).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import networkx as nx

from .._graph import check_int, finish
from ._common import MIB, check_limit, finite, read_text, short
from .._validate import TopologyError, validate
from ..gpu_types import get_gpu

__all__ = ["from_astra_network", "parse_simple_yaml"]

# astra-network-analytical (common/NetworkFunction, bw_GBps_to_Bpns): "1 GB = 2^30 B";
# some forks redefine it as 10^9 B: pass gigabyte=1e9 for those.
ASTRA_GIGABYTE = 2 ** 30
# an analytical network file is a few lines; a million NPUs is beyond any published ASTRA-sim
# study (they reach thousands to tens of thousands) and takes gigabytes as a graph
MAX_NPUS = 1_000_000
MAX_DIMS = 16            # published configurations have 1 to 4 dimensions
# cables the NPU counts imply (a few lines can ask for n^2 of them): published configurations of
# ten thousand NPUs in rings and switches need a few hundred thousand. Measured as a graph (peak
# RSS over the import; validate included): an NPU is ~4.6 kB (its GPU, NIC and router, 6 edges),
# a file cable between them ~1.1 kB more: a Ring of 100,000 NPUs (100,000 cables) 455 MB and 7.5
# s, of 250,000 1.15 GB and 17 s, of 1,000,000 (both limits) 4.5 GB and 200 s; a FullyConnected of
# 300 (44,850 cables) 49 MB and 0.6 s. Ten million cables took minutes and tens of gigabytes from
# an 83-byte file
MAX_LINKS = 1_000_000
MAX_YAML_BYTES = 1 * MIB
_BLOCKS = ("Ring", "FullyConnected", "Switch")
_KEYS = ("topology", "npus_count", "bandwidth", "latency")


def parse_simple_yaml(text: str, where: str = "<text>") -> dict:
    """The YAML subset of tool configuration files: ``key: scalar``, ``key: [a, b]`` and
    ``key:`` followed by ``- item`` lines; ``#`` comments. Scalars become int, float or str.

    >>> parse_simple_yaml("topology: [ Ring, Switch ]  # dims\\nlatency:\\n  - 5\\n  - 7.5\\n")
    {'topology': ['Ring', 'Switch'], 'latency': [5, 7.5]}
    """
    out: dict = {}
    key = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip() or line.strip() == "---":
            continue
        item = re.match(r"^\s+-\s*(.*)$", line) or re.match(r"^-\s+(.*)$", line)
        if item and key is not None and isinstance(out[key], list):
            out[key].append(_scalar(item.group(1)))
            continue
        pair = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not pair:
            raise ValueError(f"{where} line {number}: expected 'key: value', got {raw.strip()!r}")
        key, value = pair.groups()
        if key in out:           # YAML keeps the last silently: a file saying two things is refused
            raise ValueError(f"{where} line {number}: {key!r} is given twice")
        if not value:
            out[key] = []
        elif value.startswith("["):
            if not value.endswith("]"):
                raise ValueError(f"{where} line {number}: unclosed list {value!r}")
            inner = value[1:-1].strip()
            out[key] = [_scalar(v) for v in inner.split(",")] if inner else []
        else:
            out[key] = _scalar(value)
    return out


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _scalar(text: str):
    """An ASCII decimal number as int or float (int() and float() would also take '1_6' and other
    scripts' digits), anything else as its text."""
    text = text.strip().strip("'\"")
    if _NUMBER.fullmatch(text):
        if re.fullmatch(r"[+-]?[0-9]{1,30}", text):
            return int(text)
        return float(text)             # a longer integer too: its size is checked where it is used
    return text


def _dimensions(config: dict, where: str, max_dims: int):
    """Checked per-dimension lists (topology, npus, bandwidth GB/s, latency ns)."""
    missing = [k for k in _KEYS if k not in config]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}; an analytical network file has "
                         f"{', '.join(_KEYS)}")
    lists = [config[k] if isinstance(config[k], list) else [config[k]] for k in _KEYS]
    if len({len(v) for v in lists}) != 1 or not lists[0]:
        raise ValueError(f"{where}: {', '.join(_KEYS)} must list one entry per dimension, got "
                         f"lengths {[len(v) for v in lists]}")
    if len(lists[0]) > max_dims:
        raise ValueError(f"{where}: {len(lists[0])} dimensions, more than max_dims={max_dims} "
                         "(pass a larger max_dims to read this file)")
    for d, (topo, npus, bw, lat) in enumerate(zip(*lists), 1):
        if not isinstance(topo, str) or topo not in _BLOCKS:
            raise ValueError(f"{where}: topology of dimension {d} must be one of "
                             f"{', '.join(_BLOCKS)}, got {short(topo)}")
        if isinstance(npus, bool) or not isinstance(npus, int) or npus < 1:
            raise ValueError(f"{where}: npus_count of dimension {d} must be an integer >= 1, "
                             f"got {short(npus)}")
        bw = finite(bw, where, f"bandwidth of dimension {d}",
                    "a finite number > 0 (GB/s)")
        if bw <= 0:
            raise ValueError(f"{where}: bandwidth of dimension {d} must be a finite number > 0 "
                             f"(GB/s), got {bw!r}")
        lat = finite(lat, where, f"latency of dimension {d}",
                     "a finite number >= 0 (ns)")
        if lat < 0:
            raise ValueError(f"{where}: latency of dimension {d} must be a finite number >= 0 "
                             f"(ns), got {lat!r}")
    return lists



def _cable_count(topologies, npus) -> int:
    """Cables the file describes (each two directed edges), counted without building."""
    total = math.prod(npus)
    cables = 0
    for topo, n in zip(topologies, npus):
        blocks = total // n
        if n == 1:
            continue
        if topo == "Ring":
            cables += blocks * (n if n > 2 else 1)
        elif topo == "FullyConnected":
            cables += blocks * n * (n - 1) // 2
        else:
            cables += blocks * n
    return cables


def from_astra_network(path, *, gpu="h100_sxm", gigabyte: float = ASTRA_GIGABYTE,
                       max_npus: int = MAX_NPUS, max_links: int = MAX_LINKS,
                       max_dims: int = MAX_DIMS, max_bytes: int = MAX_YAML_BYTES) -> nx.DiGraph:
    """Read an ASTRA-sim analytical network file into a cluster graph.

    Parameters
    ----------
    path : str or Path
        The network ``.yml``.
    gpu : str or GpuSpec
        GPU type of the NPUs (the file does not say), for the training model.
    gigabyte : float
        Bytes in the file's "GB": ASTRA-sim's analytical backend takes 2**30 (default).
    max_npus : int
        Refuse a file whose NPU count (product of ``npus_count``) is larger, before building
        anything (default 1,000,000).
    max_links : int
        Refuse a file that describes more cables (default 1,000,000, :data:`MAX_LINKS`; a
        Ring of a million NPUs is ~4.5 GB and minutes as a graph).
    max_dims : int
        Refuse a file of more dimensions (default 16; every NPU keeps its address, one
        coordinate per dimension).
    max_bytes : int
        Refuse a larger file before reading it (default 1 MiB).

    Returns
    -------
    networkx.DiGraph
        NPU ``i`` is GPU node ``"npu{i}"`` (rank ``i``, attribute ``coords``), a one-GPU server
        whose NIC plugs into its router ``"npu{i}/router"`` (the NPU's forwarding, as in a
        torus of routers); a ``Switch`` block adds a switch ``"dim{d}/sw{k}"``. The file's links
        join routers and switches: ``capacity`` its bandwidth in bytes/s, ``latency`` its
        latency in s, ``tier`` ``"dim{d}"``. The NPU's own port (GPU -> NIC -> router) carries
        the sum of its links' rates at no latency, so it never limits more than they do.
        Unknown keys are listed in ``g.graph["notes"]``.

    Raises
    ------
    ValueError
        One line naming the file and the key at fault (see the module docstring), or a limit
        exceeded (naming the limit to raise).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "net.yml")
    >>> _ = open(path, "w").write("topology: [ Ring, Switch ]\\nnpus_count: [ 4, 2 ]\\n"
    ...                           "bandwidth: [ 100, 25 ]\\nlatency: [ 500, 1000 ]\\n")
    >>> g = from_astra_network(path)
    >>> sum(d["kind"] == "gpu" for _, d in g.nodes(data=True)), g["npu0/router"]["npu1/router"]["capacity"] / 2**30
    (8, 100.0)
    """
    path = Path(path)
    if isinstance(gigabyte, bool) or not isinstance(gigabyte, (int, float)) or not (
            math.isfinite(gigabyte) and gigabyte > 0):
        raise ValueError(f"gigabyte must be a finite number of bytes > 0 (2**30 or 1e9), got {gigabyte!r}")
    check_int("max_npus", max_npus, 1)
    check_int("max_links", max_links, 1)
    check_int("max_dims", max_dims, 1)
    gpu_name = get_gpu(gpu).name
    config = parse_simple_yaml(read_text(path, check_limit("max_bytes", max_bytes)), str(path))
    topologies, npus, bandwidths, latencies = _dimensions(config, str(path), max_dims)
    total = 1
    for d, n in enumerate(npus, 1):     # stops at the first factor beyond the limit
        total *= n
        if total > max_npus:
            raise ValueError(f"{path}: npus_count {short(list(npus))} gives "
                             f"{'' if d == len(npus) else 'at least '}{total} NPUs, more than "
                             f"max_npus={max_npus} (pass a larger max_npus to read this file)")
    if total < 2:
        raise ValueError(f"{path}: npus_count {list(npus)} gives {total} NPU; a network joins at least 2")
    cables = _cable_count(topologies, npus)
    if cables > max_links:
        raise ValueError(f"{path}: topology {short(list(topologies))} over npus_count "
                         f"{short(list(npus))} makes {cables} cables, more than max_links="
                         f"{max_links} (pass a larger max_links to read this file)")
    rates = [float(bw) * gigabyte for bw in bandwidths]
    for d, rate in enumerate(rates, 1):
        if not math.isfinite(rate):
            raise ValueError(f"{path}: bandwidth of dimension {d} {bandwidths[d - 1]!r} GB/s is "
                             f"{rate} bytes/s: beyond float range")
    g = nx.DiGraph()
    for i in range(total):
        coords, rest = [], i
        for n in npus:
            rest, x = divmod(rest, n)
            coords.append(x)
        g.add_node(f"npu{i}", kind="gpu", tier=0, rank=i, server=i, local_rank=0, rail=0,
                   coords=coords, gpu_type=gpu_name)
        g.add_node(f"npu{i}/nic", kind="nic", tier=0, server=i, rail=0, role="compute")
        g.add_node(f"npu{i}/router", kind="switch", role="router", tier=1, coords=coords)
    stride = 1
    for d, (topo, n, rate, lat) in enumerate(zip(topologies, npus, rates, latencies), 1):
        # the file's units converted once, here: GB/s -> bytes/s, ns -> s
        edge = dict(capacity=rate, latency=float(lat) / 1e9,
                    tech=f"astra_{topo.lower()}", tier=f"dim{d}", cables=1)
        for k, members in enumerate(_blocks(total, stride, n)):
            _build_block(g, topo, [f"npu{i}/router" for i in members], f"dim{d}/sw{k}", d, edge)
        stride *= n
    for i in range(total):
        # the NPU's own port into its router: all its links' rate, never tighter than they are
        router = f"npu{i}/router"
        rate = sum(g[router][v]["capacity"] for v in g.successors(router))
        port = dict(capacity=rate, latency=0.0, tech="astra_npu", tier="npu", cables=1)
        for a, b in ((f"npu{i}", f"npu{i}/nic"), (f"npu{i}/nic", router)):
            g.add_edge(a, b, **port)
            g.add_edge(b, a, **port)
    notes = [f"ignored key {k!r}" for k in config if k not in _KEYS]
    g.graph["notes"] = notes
    params = dict(source=str(path), topology=list(topologies), npus_count=list(npus),
                  bandwidth_gb_s=list(bandwidths), latency_ns=list(latencies), gigabyte=gigabyte)
    try:
        validate(g)
    except TopologyError as err:
        raise TopologyError(f"{path}: {err}") from None
    # the bisection the shape allows, as topologies.torus records a torus's (describe() took the
    # max flow between the rank-order halves: a 4 x 3 torus read 1,000 GB/s where the cut across
    # its 4-rings holds 600; adv21b F2)
    crossing, first, split = _coordinate_cut(tuple(range(len(npus))), tuple(topologies), tuple(npus), tuple(rates))
    cut = [i for i in range(total) if first(tuple(g.nodes[f"npu{i}"]["coords"]))]
    method = ("formula: links across the cheapest balanced cut by coordinates (a dimension's halves; an odd "
              "dimension's with its middle plane bisected the same way)")
    stars = sum(1 for t, n in zip(topologies, npus) if n > 1) > 1 and any(
        t == "Switch" and n > 1 for t, n in zip(topologies, npus))
    if split or stars:
        # a Switch dimension beside another: a cut through part of a block's star and part of the
        # next can beat whole halves (Switch x Switch 4 x 3: 500 GB/s by hand against 600; adv21c F3)
        method += ("; an upper bound (it cuts " + ("an odd dimension" if split else "beside a Switch dimension")
                   + ": no formula here proves that cut minimal)")
    return finish(g, "astra_network", params, bisection=crossing, bisection_method=method,
                  network_diameter=None, bisection_cut=cut)


def _block_cut(topo: str, n: int) -> int:
    """Links of one ``topo`` block of ``n`` NPUs (as :func:`_build_block` cables it) between
    its first ``n // 2`` NPUs and the rest (or its first ``n // 2 + 1``: the same count):
    a ring's two arcs meet at 2 links (a ring of 2 is one link); ``FullyConnected``, every
    pair across, ``m (n - m)``; a ``Switch`` lies on the larger side, ``m`` NPUs' links cut.

    >>> _block_cut("Ring", 8), _block_cut("Ring", 2), _block_cut("FullyConnected", 8), _block_cut("Switch", 7)
    (2, 1, 16, 3)
    """
    m = n // 2
    if n < 2:
        return 0
    if topo == "Ring":
        return 1 if n == 2 else 2
    if topo == "FullyConnected":
        return m * (n - m)
    return m


def _coordinate_cut(dims: tuple, topologies: tuple, npus: tuple, rates: tuple, memo: dict | None = None):
    """The cheapest balanced cut by coordinates of the dimensions ``dims`` (indices into the
    file's per-dimension ``topologies``, ``npus`` and ``rates``, bytes/s a link):
    ``(bytes/s crossing, is_first(coords), split)``, the first side ``floor(N / 2)`` of the
    ``N`` NPUs, ``split`` whether it bisects an odd dimension's middle plane.

    Across dimension ``d`` of ``n`` NPUs a block: the NPUs with ``x_d < n // 2``, each of the
    ``N / n`` blocks cut as :func:`_block_cut` counts; an odd ``n`` adds its middle plane
    (``x_d = n // 2``, a network of the other dimensions) bisected the same way. The least
    over the dimensions, an even one first on a tie, as :func:`topologies.torus` cuts a torus
    (Dally & Towles sec. 5.2: a k-ary n-cube's bisection). Every link crosses whole, and an
    NPU's port carries the sum of its links, so no cut between the same halves is cheaper; for
    odd lengths no formula here proves these halves the cheapest. ``memo``: the cuts of the
    dimension sets already met (each odd dimension's plane is cut over the others: twelve odd
    dimensions, 3^12 NPUs, took 12! calls without it).

    >>> _coordinate_cut((0, 1), ("Ring", "Ring"), (4, 3), (1.0, 1.0))[0]    # 3 rings x 2 links
    6.0
    """
    memo = {} if memo is None else memo
    if dims in memo:
        return memo[dims]
    best = None
    total = math.prod(npus[d] for d in dims)
    for d in sorted(dims, key=lambda d: (npus[d] % 2, -npus[d], d)):
        n = npus[d]
        if n < 2:
            continue
        cost = total // n * _block_cut(topologies[d], n) * rates[d]
        m = n // 2
        if n % 2 == 0:
            inside = (lambda d, m: lambda c: c[d] < m)(d, m)
        else:
            rest = tuple(e for e in dims if e != d and npus[e] > 1)
            sub_cost, sub_first, _ = (_coordinate_cut(rest, topologies, npus, rates, memo) if rest
                                      else (0.0, lambda c: False, False))
            cost += sub_cost
            inside = (lambda d, m, sub: lambda c: c[d] < m or (c[d] == m and sub(c)))(d, m, sub_first)
        if best is None or cost < best[0]:
            best = (float(cost), inside, n % 2 == 1)
    memo[dims] = best
    return best


def _blocks(total: int, stride: int, n: int):
    """NPU ids of each building block of a dimension with ``n`` NPUs at ``stride``."""
    for base in range(total):
        if (base // stride) % n == 0:
            yield [base + j * stride for j in range(n)]


def _build_block(g, topo, members, switch, d, edge):
    def cable(a, b):
        g.add_edge(a, b, **edge)
        g.add_edge(b, a, **edge)

    n = len(members)
    if n == 1:
        return
    if topo == "Ring":
        for j in range(n if n > 2 else 1):
            cable(members[j], members[(j + 1) % n])
    elif topo == "FullyConnected":
        for j in range(n):
            for k in range(j + 1, n):
                cable(members[j], members[k])
    else:
        g.add_node(switch, kind="switch", role="switch", tier=d, dim=d)
        for m in members:
            cable(m, switch)
