"""Server models from NCCL topology files (``NCCL_TOPO_DUMP_FILE`` / ``NCCL_TOPO_FILE``).

:func:`from_nccl_xml` reads the XML NCCL writes (``<system>``: ``<cpu>`` sockets, the
``<pci>`` tree with its ``link_speed`` / ``link_width``, ``<gpu>`` with ``<nvlink target count
tclass>``, ``<nic>`` with ``<net speed>`` ports) into a :class:`NcclServer`, a
:class:`~topologies.servers.ServerModel` that builds exactly that server, so it is usable as
``server=`` by every generator.

What becomes what
-----------------
* every ``<cpu>`` is a ``cpu`` node; sockets are joined by ``socket_link`` (the file does not
  describe the socket link; NCCL assumes one from the CPU vendor as well); each GPU's ``socket``
  is the ``<cpu>`` it hangs off (its index, as the cpu node's ``socket``), and an Intel host's
  ``cpu_make`` is read from ``familyid`` / ``modelid`` by NCCL's rules (:mod:`._nccl_cpus`): NCCL's
  rings through PCIe GPUs of two sockets carry no more than that make's socket link;
* every PCI bridge (class 0x0604) above a GPU or NIC is a ``pcie_switch`` node; each PCI
  element's link to its parent runs at its ``link_speed`` (PCIe generation) and
  ``link_width`` (lanes, scaling the catalogue's x16 rate);
* NVLinks to NVSwitch chips (tclass 0x0680) end on one logical ``nvswitch`` node per set of
  chips that reach the same GPUs (one for every NVSwitch system), of ``count`` links x the
  generation's per-link rate per GPU; NVLinks to a GPU (tclass 0x0302) are GPU-GPU cables;
* a ``<nic>`` is one ``nic`` node whose ``<net>`` ports are parallel cables of the port speed
  (Mb/s in the file) to its rail switch; NIC ``j`` is the rail of the GPUs nearest to it in
  the PCI tree (NCCL's GPU-NIC affinity). The rails' NICs set the NIC rate (the slowest port)
  and ports per NIC; a NIC no GPU is nearest to (a front-end, storage or management NIC NCCL
  also lists) sets neither, and the description says what it was.

What the file carries, and what it does not
-------------------------------------------
It carries the server's insides: sockets, the PCI tree with each link's generation and width,
GPUs (compute capability, PCI device id, NCCL rank) with their NVLinks, and NIC ports with
their speed. It does not carry: the GPU type by name (``gpu=``, else the PCI device id: one
of no catalogue part, an A30 or an H20, is refused rather than read as another part; ``sm``
only where the file gives no device id), the NVLink rate (from the generation of ``sm``:
NVLink 3/4/5 per-link rates of the catalogue), the CPU socket link (``socket_link=``),
latencies (catalogue latencies of PCIe 5 and the NVLink generation; ``<net latency>`` is not
read), anything outside the server (the
fabric is the generator's), nor a PCI skeleton's NIC speed (the NICs then take the fabric's
rate). A ``<net speed>`` of 0 or -1 is how NCCL files say "unknown" (NCCL reads both as 10
Gb/s); here both mean "no NIC speed in the file". An absent or ``Unknown`` ``link_speed`` is
taken as Gen 5, an absent or 0 ``link_width`` as x16 (NCCL reads 0 as 16), and noted. Every
assumption and every element ignored is listed in the model's ``description``.

Bad files
---------
A file that is not such a server gets one ``ValueError`` whose one-line message names the
file, the element (its tag and a locator: ``busid``, ``name``/``dev``, ``target``, or its
position) and the attribute: a negative, NaN, infinite, overflowing or non-numeric speed,
rate, width, class code, ``sm``/``rank``/``dev`` or NVLink ``count``; two elements with one
busid; bytes that are not well-formed XML in their declared encoding; a DOCTYPE (entity
declarations could expand without bound; NCCL never writes one). What the file can make the
reader allocate is bounded before the tree is built: its size (``max_bytes``), its element
count (``max_elements``) and nesting depth (``max_depth``; the walk itself uses no recursion),
and its GPUs are at most ``max_gpus``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import networkx as nx

from .._graph import check_int
from ._nccl_parse import _clip, _loc, parse_system, relabel
from ._common import MIB, check_limit, doctype_before_root, read_bytes
from ..links import LinkTech, get_link
from ..gpu_types import get_gpu
from ._nccl_cpus import cpu_kind, cpu_make
from ._nccl_gpus import _LINKS_PER_GPU, _generation
from ..servers import ServerModel, ServerPorts

__all__ = ["NcclServer", "from_nccl_xml"]

# an NCCL dump of an 8-GPU server is ~15 kB and ~150 elements, about 8 deep; NCCL itself holds
# at most NCCL_TOPO_MAX_NODES = 640 nodes of a type ("up to 576 GPUs (e.g., NVLD144) with
# headroom", src/include/graph.h, NCCL 2.30)
MAX_XML_BYTES = 4 * MIB
MAX_ELEMENTS = 20_000
MAX_DEPTH = 64
MAX_GPUS = 640


@dataclass(frozen=True)
class NcclServer(ServerModel):
    """A server read from an NCCL topology file (made by :func:`from_nccl_xml`).

    Besides the :class:`ServerModel` fields (``gpus``, ``nics``, ``nic``, ``nic_ports``,
    ``nvlink`` per GPU, ``host_link`` the slowest GPU-to-NIC PCIe link, ``pcie_switches``)
    it holds ``nodes`` (local node id and its attributes as (key, value) pairs), ``cables`` (local id pairs with their
    capacity in bytes/s, latency in s, tech, tier and link count), ``description`` (what
    was read, assumed and ignored) and ``source`` (the file).
    """

    nodes: tuple = ()
    cables: tuple = ()
    description: str = ""
    source: str = ""

    def __post_init__(self):
        # the file fixes the layout: ServerModel's rules for its generic layouts (NICs dividing
        # GPUs, an even number of PCIe switches) do not apply
        check_int("gpus", self.gpus, 1)
        check_int("nics", self.nics, 1)
        check_int("nic_ports", self.nic_ports, 1)
        get_gpu(self.gpu)
        get_link(self.host_link)
        gpus = [n for n, a in self.nodes if dict(a)["kind"] == "gpu"]
        if len(gpus) != self.gpus:
            raise ValueError(f"server {self.name!r}: {len(gpus)} GPU nodes for gpus={self.gpus}")

    def build(self, g: nx.DiGraph, index: int, first_rank: int) -> ServerPorts:
        """Add server number ``index`` to ``g``, its GPUs ranked from ``first_rank`` (node ids
        ``"s{index}/gpu{i}"``, ``.../nic{j}``, ``.../pcie{k}``, ``.../cpu{c}``, ``.../nvswitch``)."""
        pre = f"s{index}/"
        ports = ServerPorts()
        for local, items in self.nodes:
            attrs = dict(items, tier=0, server=index)
            if attrs["kind"] == "gpu":
                attrs.update(rank=first_rank + attrs["local_rank"], gpu_type=self.gpu_spec.name, cpu=self.cpu)
                if self.cpu_make is not None:
                    attrs["cpu_make"] = self.cpu_make
                ports.gpus.append(pre + local)
            elif attrs["kind"] == "nic":
                attrs["role"] = "compute"
                ports.nics.append(pre + local)
            elif attrs["kind"] == "cpu":
                ports.cpus.append(pre + local)
            g.add_node(pre + local, **attrs)
        for a, b, capacity, latency, tech, tier, count in self.cables:
            edge = dict(capacity=capacity, latency=latency, tech=tech, tier=tier, cables=count)
            g.add_edge(pre + a, pre + b, **edge)
            g.add_edge(pre + b, pre + a, **edge)
        return ports

    def to_dict(self) -> dict:
        """JSON-friendly description: the ServerModel fields plus the source file."""
        out = super().to_dict()
        out.update(layout=self.layout, source=self.source)
        return out




def from_nccl_xml(path, *, gpu=None, nvlink=None, socket_link="upi2x3", name=None,
                  max_bytes: int = MAX_XML_BYTES, max_elements: int = MAX_ELEMENTS,
                  max_depth: int = MAX_DEPTH, max_gpus: int = MAX_GPUS) -> NcclServer:
    """Read an NCCL topology file into a server model usable as ``server=`` everywhere.

    Parameters
    ----------
    path : str or Path
        The XML file (what ``NCCL_TOPO_DUMP_FILE`` writes, or an ``NCCL_TOPO_FILE`` skeleton).
    gpu : str or GpuSpec, optional
        GPU type; by default from the file's PCI device id (``sm`` where it has none). Required
        when the file names neither (a PCI-only skeleton), or its device id is of a GPU the
        catalogue has no part for.
    nvlink : str, optional
        NVLink generation (``"nvlink3"``, ``"nvlink4"``, ``"nvlink5"``); by default from the
        GPUs' sm. For a file without ``<nvlink>`` elements (an ``NCCL_TOPO_FILE`` skeleton:
        NCCL adds the NVLinks from the driver at run time) it declares an NVSwitch domain:
        every GPU gets the generation's full aggregate to one logical NVSwitch; ``"none"``
        says the GPUs have no NVLink (PCIe only). Such a file of several GPUs of an NVLink
        type (not ``*_pcie``) needs one of the two: the file does not say.
    socket_link : str or LinkTech
        CPU socket-to-socket link (not in the file).
    name : str, optional
        Model name; default ``"nccl:<file stem>"``.
    max_bytes : int
        Refuse a larger file before reading it (default 4 MiB).
    max_elements : int
        Refuse a file of more XML elements, before building its tree (default 20,000).
    max_depth : int
        Refuse elements nested deeper (default 64; a real PCI tree is under 10 deep).
    max_gpus : int
        Refuse a file of more GPUs (default 640, NCCL's own limit per node type); the GPU-NIC
        pairing takes time in GPUs x PCI tree size.

    Raises
    ------
    ValueError
        One line naming the file, the element and the attribute, for a bad attribute (see
        the module docstring), a file that contradicts itself (an NVLink to a GPU that is not
        in the file, more NVLinks than the GPU has, two GPUs with one rank) or lacks what a
        server needs (no GPU, no NIC), or a limit exceeded (naming the limit to raise).

    Examples
    --------
    >>> import tempfile, os
    >>> xml = '''<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel">
    ...   <pci busid="0000:01:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
    ...     <pci busid="0000:02:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
    ...       <gpu dev="0" sm="90" rank="0"/></pci>
    ...     <pci busid="0000:03:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
    ...       <nic><net name="mlx5_0" dev="0" speed="400000" port="1"/></nic></pci>
    ...   </pci></cpu></system>'''
    >>> path = os.path.join(tempfile.mkdtemp(), "topo.xml")
    >>> _ = open(path, "w").write(xml)
    >>> m = from_nccl_xml(path)
    >>> m.gpus, m.nics, m.gpu, get_link(m.nic).name, m.host_link
    (1, 1, 'h100_sxm', 'ib_ndr', 'pcie5')
    """
    path = Path(path)
    check_limit("max_elements", max_elements)
    check_limit("max_depth", max_depth)
    check_limit("max_gpus", max_gpus)
    root = _parse(path, read_bytes(path, check_limit("max_bytes", max_bytes)), max_elements, max_depth)
    if root.tag != "system":
        raise ValueError(f"{path}: the root element must be <system>, got <{_clip(root.tag)}>")
    system = parse_system(root, str(path), max_gpus)
    gpu_type, tech, notes = _generation(system, gpu, nvlink, str(path))
    return _assemble(system, path, gpu_type, tech, nvlink is not None, get_link(socket_link), name, notes)


def _parse(path, data: bytes, max_elements: int, max_depth: int):
    """The XML tree of ``data``, its element count and depth checked while it is parsed (the
    parse stops at the first element beyond a limit)."""
    if b"<!DOCTYPE" in data or doctype_before_root(data):      # the latter in any encoding (UTF-16 too)
        raise ValueError(f"{path}: a <!DOCTYPE> declaration; NCCL topology files have none "
                         "(its entities could expand without bound)")
    parser = ET.XMLPullParser(events=("start", "end"))
    root, depth, count, chunk = None, 0, 0, 1 << 16
    try:
        for start in range(0, max(len(data), 1), chunk):
            parser.feed(data[start:start + chunk])
            for event, el in parser.read_events():
                if event == "end":
                    depth -= 1
                    continue
                root = el if root is None else root
                depth, count = depth + 1, count + 1
                if depth > max_depth:
                    raise ValueError(f"{path}: {_loc(el, ('busid', 'name', 'target'))} is "
                                     f"nested {depth} elements deep, more than max_depth={max_depth} "
                                     "(pass a larger max_depth to read this file)")
                if count > max_elements:
                    raise ValueError(f"{path}: more than max_elements={max_elements} XML elements "
                                     "(pass a larger max_elements to read this file)")
        parser.close()
    except ET.ParseError as err:
        raise ValueError(f"{path}: not a well-formed NCCL topology XML file ({err})") from None
    except (LookupError, ValueError) as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a well-formed NCCL topology XML file (its encoding: "
                         f"{err})") from None
    return root


def _assemble(system, path, gpu_type, nvlink, declared, socket, name, notes) -> NcclServer:
    """The model from the parsed file: nodes, PCIe, NVLink and socket cables, rails."""
    notes = list(system.notes) + notes
    rails, host = _rails(system)
    nodes, cables = system.nodes, list(system.pci_cables)
    cpus = [n for n, a in nodes.items() if a["kind"] == "cpu"]
    for i, a in enumerate(cpus):
        for b in cpus[i + 1:]:
            cables.append((a, b, socket.bandwidth, socket.latency, socket.name, "cpu", 1))
    if len(cpus) > 1:
        notes.append(f"socket link {socket.name} assumed (not in the file)")
    per_gpu = _nvlink_cables(system, nodes, cables, nvlink, declared, notes)
    nics = [n for n, a in nodes.items() if a["kind"] == "nic"]
    nic_tech, ports = _nic_tech(system, nics, {f"nic{r}" for r in rails.values()}, notes)
    # one NVSwitch domain holding every GPU with the same link count: an "nvswitch" server
    uniform = (len(per_gpu) == len(system.gpus) and len(set(per_gpu.values())) == 1
               and system.switch_groups == 1)
    nv_tech = None
    if per_gpu and uniform:
        links = next(iter(per_gpu.values()))
        full = get_link(nvlink)
        nv_tech = full if links == _LINKS_PER_GPU[nvlink] else full.scaled(
            links / _LINKS_PER_GPU[nvlink], name=f"{nvlink}_x{links}")
    for gpu_node, rail in rails.items():
        nodes[gpu_node]["rail"] = rail
    slow = sum(1 for c in system.pci_cables if c[4] in ("pcie1", "pcie2", "pcie3"))
    if slow:
        notes.append(f"{slow} PCI link(s) below Gen 4 taken as written (NCCL reads the same rates)")
    switches = sum(1 for a in nodes.values() if a["kind"] == "pcie_switch")
    notes.insert(0, f"{len(system.gpus)} GPU(s) {gpu_type}, {len(nics)} NIC(s) x {ports} port(s), "
                    f"{switches} PCIe switch(es), {len(cpus)} CPU socket(s), "
                    f"{system.switch_groups} NVSwitch domain(s)")
    cpu = cpu_kind([nodes[c] for c in cpus], notes)
    make = cpu_make(system.where, [nodes[c] for c in cpus], cpu, notes)
    ordered = sorted(nodes.items(), key=lambda kv: (kv[1]["kind"], kv[1].get("order", 0)))
    frozen = tuple((n, tuple((k, v) for k, v in a.items() if k != "order")) for n, a in ordered)
    return NcclServer(cpu=cpu, cpu_make=make,
        name=name or f"nccl:{path.stem}", gpus=len(system.gpus), gpu=gpu_type,
        layout="nvswitch" if nv_tech is not None else "nccl", nvlink=nv_tech, nics=len(nics),
        nic=nic_tech, nic_ports=ports, host_link=host, socket_link=socket,
        pcie_switches=switches,
        nodes=frozen, cables=tuple(cables), description="; ".join(notes), source=str(path))


def _nvlink_cables(system, nodes, cables, nvlink, declared, notes) -> dict:
    """GPU -> NVSwitch and GPU -> GPU cables; returns GPU node -> its NVSwitch link count."""
    if nvlink is None:
        return {}
    tech = get_link(nvlink)
    per_link = tech.bandwidth / _LINKS_PER_GPU[nvlink]
    if not any(g.nvlinks for g in system.gpus):
        # no <nvlink> elements: the nvlink argument declares one NVSwitch domain
        if not declared:
            return {}
        nodes["nvswitch"] = dict(kind="nvswitch", chips=0)
        for g in system.gpus:
            cables.append((g.node, "nvswitch", tech.bandwidth, tech.latency, tech.name, "nvlink",
                           _LINKS_PER_GPU[nvlink]))
        system.switch_groups = 1
        notes.append(f"no <nvlink> in the file: one {nvlink} NVSwitch domain from the nvlink argument")
        return {g.node: _LINKS_PER_GPU[nvlink] for g in system.gpus}
    for g in system.gpus:
        total = sum(count for _, count, _ in g.nvlinks)
        if total > _LINKS_PER_GPU[nvlink]:
            raise ValueError(f"{system.where}: <gpu> of {g.busid} claims {total} NVLinks; an "
                             f"{nvlink} GPU has {_LINKS_PER_GPU[nvlink]}")
    groups = system.nvswitch_groups()
    system.switch_groups = len(groups)
    per_gpu = Counter()
    for k, (chips, gpu_links) in enumerate(groups):
        node = "nvswitch" if len(groups) == 1 else f"nvswitch{k}"
        nodes[node] = dict(kind="nvswitch", chips=len(chips), order=k)
        for gpu_node, count in gpu_links.items():
            cables.append((gpu_node, node, count * per_link, tech.latency, tech.name, "nvlink", count))
            per_gpu[gpu_node] += count
    for a, b, count in system.gpu_pairs():
        cables.append((a, b, count * per_link, tech.latency, tech.name, "nvlink", count))
    if groups:
        notes.append(f"{sum(len(c) for c, _ in groups)} NVSwitch chip(s) as {len(groups)} "
                     "logical nvswitch node(s) (NVSwitch is non-blocking)")
    return dict(per_gpu)


def _rails(system):
    """GPU node -> rail (the index of the NIC nearest in the PCI tree, as NCCL pairs them),
    NICs renamed
    ``nic{rail}``; and the slowest PCIe link on a GPU's path to its NIC (catalogue name or
    LinkTech)."""
    nodes = system.nodes
    if not any(a["kind"] == "nic" for a in nodes.values()):
        raise ValueError(f"{system.where}: no NIC (no PCI class 0x02 device with a <nic>, no <nic>): "
                         "a server model needs one to reach the fabric")
    pci = nx.Graph()
    for a, b, capacity, _, tech, _, _ in system.pci_cables:
        pci.add_edge(a, b, capacity=capacity, tech=tech)
    gpus = sorted((n for n, a in nodes.items() if a["kind"] == "gpu"), key=lambda n: nodes[n]["order"])
    nics = sorted((n for n, a in nodes.items() if a["kind"] == "nic"), key=lambda n: nodes[n]["order"])
    rail_of_nic, rails, rails_nic, slowest = {}, {}, {}, None
    for g in gpus:
        dist = nx.single_source_shortest_path_length(pci, g) if g in pci else {}
        # the nearest NIC; between equally near ones, one no other GPU took yet
        taken = Counter(rails_nic.values())
        near = min((n for n in nics if n in dist), key=lambda n: (dist[n], taken[n]), default=nics[0])
        rails_nic[g] = near
        rail_of_nic.setdefault(near, len(rail_of_nic))
        rails[g] = rail_of_nic[near]
        if near in dist:
            path = nx.shortest_path(pci, g, near)
            for u, v in zip(path, path[1:]):
                e = pci.edges[u, v]
                if slowest is None or e["capacity"] < slowest[0]:
                    slowest = (e["capacity"], e["tech"])
    for n in nics:
        rail_of_nic.setdefault(n, len(rail_of_nic))
    for n in nics:
        nodes[n].update(rail=rail_of_nic[n], order=rail_of_nic[n])
    relabel(system, {n: f"nic{r}" for n, r in rail_of_nic.items()})
    if slowest is None:
        return rails, "pcie5"
    return rails, _base_tech(slowest[1], slowest[0])


def _base_tech(tech: str, capacity: float):
    """The catalogue name when ``capacity`` is its rate, else a LinkTech of that rate."""
    try:
        known = get_link(tech)
    except ValueError:
        return LinkTech(tech, capacity, get_link("pcie5").latency, None, "pcie",
                        "PCI-SIG rate from an NCCL topology file")
    if abs(known.bandwidth - capacity) <= 1e-9 * capacity:
        return known.name
    return known.scaled(capacity / known.bandwidth, name=f"{tech}_x{round(16 * capacity / known.bandwidth)}")


def _nic_tech(system, nics, paired, notes):
    """The NIC port technology (catalogue entry at the file's port speed, or a LinkTech of
    it with the family reference's latency and efficiency; None when the file gives no speed)
    and the ports per NIC, both from the rails' NICs (``paired``: the NIC nearest each GPU); a
    NIC no GPU is paired with (a front-end, storage or management NIC NCCL also lists) is
    described in ``notes`` and sets neither."""
    speeds = system.nic_speeds
    others = [n for n in nics if n not in paired]
    for n in others:
        known = sorted({s * 8 / 1e6 for s in speeds.get(n, []) if s is not None})
        notes.append(f"{n}: no GPU is nearest to it (a front-end, storage or management NIC), "
                     f"{len(speeds.get(n, []))} port(s) at "
                     f"{'/'.join(f'{s:g}' for s in known) + ' Mb/s' if known else 'no speed in the file'}"
                     ": does not set the rails' NIC rate or ports")
    nics = [n for n in nics if n in paired]
    port_counts = {len(speeds.get(n, [])) for n in nics}
    ports = max(1, min(port_counts))
    if len(port_counts) > 1:
        notes.append(f"NICs with {sorted(port_counts)} ports: {ports} port(s) per NIC taken")
    known = [s for n in nics for s in speeds.get(n, []) if s is not None]
    if not known:
        notes.append("no NIC speed in the file: NICs take the fabric's rate")
        return None, ports
    rate = min(known)
    if len(set(known)) > 1:
        notes.append(f"NIC ports of {sorted(set(known))} bytes/s: the slowest, {rate:g}, taken")
    family = system.nic_family
    for candidate in ("ib_hdr", "ib_ndr", "ib_xdr", "roce_200g", "roce_400g", "eth_100g",
                      "eth_200g", "eth_400g"):
        tech = get_link(candidate)
        if tech.family == family and tech.bandwidth == rate:
            return tech.name, ports
    # Off the catalogue, the rate is the file's and the rest is the family reference's: its
    # latency and its efficiency, a property of the protocol (RoCE v2's 0.927: NDR's measured
    # 0.94 less RoCE's headers; InfiniBand: NDR's measured 47 of 50 GB/s; topologies/links.py),
    # not of the rate, as _base_tech scales a PCIe entry. Raw (None) read as 1.0 made a RoCE port
    # 7.9 % and an IB port 6 % faster than its line rate allows (adv21b F1).
    reference = get_link("ib_ndr" if family == "infiniband" else "roce_400g")
    notes.append(f"NIC port speed {rate * 8 / 1e6:g} Mb/s matches no {family} catalogue rate: "
                 f"taken as written, with {reference.name}'s latency and efficiency "
                 f"({reference.efficiency:.3f} of the rate)")
    return replace(reference, name=f"{family}_{rate * 8 / 1e9:g}g", bandwidth=rate,
                   source=f"port speed of an NCCL topology file <net speed>; {reference.name}'s latency and "
                          "efficiency"), ports

