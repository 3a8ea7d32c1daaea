"""Private: the elements of an NCCL topology file as nodes, PCIe cables, GPUs and NIC ports
(``from_nccl_xml`` turns them into a server model).

Every attribute read is checked; a bad one is a ValueError naming the file, the element (its
tag and a locator: ``busid``, ``name``/``dev``, ``target``, or its position) and the attribute.
The PCI tree is walked with an explicit stack, so nesting depth costs no Python recursion.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import networkx as nx

from ._common import DECIMAL
from ..links import get_link

# PCI class codes (PCI-SIG code and ID assignment spec): base class << 8 | subclass.
_BRIDGE = 0x0604          # PCI-to-PCI bridge (a PCIe switch port)
_GPU_CLASSES = (0x0300, 0x0302)   # VGA / 3D controller
_NVSWITCH = 0x0680        # "other bridge": how NVSwitch chips present themselves
_IB, _ETH = 0x0207, 0x0200

# PCIe link rate by transfer rate (GT/s) -> (generation, encoding efficiency); Gen 4 and 5
# come from the catalogue (links.py), Gen 1-3 from the PCI-SIG base specs: 8b/10b at 2.5 and
# 5 GT/s, 128b/130b at 8 GT/s; Gen 6 (PCI-SIG PCIe 6.0 base spec, FLIT mode): 64 GT/s in
# 256-byte flits of which 242 carry TLP and DLLP bytes (8 CRC, 6 FEC). NCCL's own table
# (src/graph/topo.cc, kvDictPciGen) knows the same rates, 64 GT/s included.
_PCIE_GEN = {2.5: ("pcie1", 8 / 10), 5.0: ("pcie2", 8 / 10), 8.0: ("pcie3", 128 / 130),
             16.0: ("pcie4", None), 32.0: ("pcie5", None), 64.0: ("pcie6", 242 / 256)}
_KNOWN_TAGS = {"system", "cpu", "pci", "gpu", "nvlink", "nic", "net"}
# what Linux writes in link_speed: "32.0 GT/s PCIe" (kernels >= 5.7) or "32 GT/s"
_LINK_SPEED = re.compile(r"\s*([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*GT/s(?:\s+PCIe)?\s*")
_PCIE_WIDTHS = "1 to 32 lanes"
# NCCL (src/graph/topo.cc, ncclTopoAddNet): "if (mbps <= 0) mbps = 10000; // Some NICs define
# speed = -1": 0 and -1 are how a file says "speed unknown"
_UNKNOWN_SPEEDS = (0.0, -1.0)


def _clip(value) -> str:
    """An attribute value for a one-line message: as written when short and printable."""
    text = str(value)
    return text if text.isprintable() and len(text) <= 40 else repr(text)[:40] + "..."


def _loc(el, keys=(), of=None) -> str:
    """``<pci busid="0000:02:00.0">`` (the element's tag and identifying attributes), with
    ``of <parent locator>`` where the element's own attributes do not identify it."""
    attrs = [f'{k}="{_clip(el.get(k))}"' for k in keys if el.get(k) is not None]
    tag = "<" + " ".join([_clip(el.tag), *attrs]) + ">"
    return tag if of is None else f"{tag} of {of}"


def _bad(system, loc, attr, value, allowed):
    """The error for attribute ``attr`` of the element at ``loc``: what is ``allowed``, what
    the file has."""
    shown = repr(str(value))
    shown = shown if len(shown) <= 42 else shown[:40] + "..."
    return ValueError(f"{system.where}: {loc}: {attr} {allowed}, got {shown}")


def _class_code(text, system, loc, attr="class"):
    """``"0x030200"`` (class, subclass, prog-if) or ``"0x0302"`` or ``"0x03"`` -> class<<8|sub
    (``"0x03"`` -> 0x0300)."""
    if text is None:
        return None
    digits = text.strip().removeprefix("0x")
    if len(digits) not in (2, 4, 6) or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        raise _bad(system, loc, attr, text, "must be a PCI class code: 0x and 2, 4 or 6 hex digits "
                   "(e.g. 0x030200)")
    value = int(digits, 16)
    if len(digits) > 4:
        value >>= 8
    elif len(digits) <= 2:
        value <<= 8
    return value


def _integer(system, loc, attr, text, base=10):
    """A non-negative integer attribute (decimal, or hex with base 16), None when absent."""
    if text is None:
        return None
    pattern = r"[0-9]{1,9}" if base == 10 else r"(0x)?[0-9a-fA-F]{1,8}"
    if not re.fullmatch(pattern, text.strip()):
        raise _bad(system, loc, attr, text, "must be a non-negative integer" +
                   (" in hex (0x...)" if base == 16 else ""))
    return int(text.strip(), base)


@dataclass
class GpuInfo:
    node: str
    busid: str
    sm: int | None
    device: int | None
    rank: int | None
    dev: int | None
    nvlinks: list = field(default_factory=list)   # (target busid, count, tclass)


@dataclass
class System:
    where: str
    nodes: dict = field(default_factory=dict)      # local id -> attributes
    pci_cables: list = field(default_factory=list)  # (a, b, capacity, latency, tech, tier, count)
    gpus: list = field(default_factory=list)
    nic_speeds: dict = field(default_factory=dict)  # nic node -> [port bytes/s or None]
    nic_families: Counter = field(default_factory=Counter)
    notes: list = field(default_factory=list)
    ignored: Counter = field(default_factory=Counter)
    switch_groups: int = 0
    max_gpus: int = 640

    @property
    def nic_family(self) -> str:
        return self.nic_families.most_common(1)[0][0] if self.nic_families else "infiniband"

    def nvswitch_groups(self) -> list:
        """[(chip busids, {gpu node: links})] with chips reaching the same GPUs merged."""
        chips: dict = {}
        for g in self.gpus:
            for target, count, tclass in g.nvlinks:
                if tclass == _NVSWITCH:
                    chips.setdefault(target, Counter())[g.node] += count
        groups: dict = {}
        for chip in sorted(chips):
            key = frozenset(chips[chip])
            entry = groups.setdefault(key, ([], Counter()))
            entry[0].append(chip)
            entry[1].update(chips[chip])
        return list(groups.values())

    def gpu_pairs(self) -> list:
        """[(gpu node, gpu node, links)] of direct GPU-GPU NVLinks, both sides checked."""
        by_bus = {g.busid: g for g in self.gpus}
        seen: dict = {}
        for g in self.gpus:
            for target, count, tclass in g.nvlinks:
                if tclass not in _GPU_CLASSES:
                    continue
                if target not in by_bus or target == g.busid:
                    raise ValueError(f"{self.where}: <nvlink target=\"{target}\"> of GPU {g.busid}: "
                                     "no other GPU with that busid in the file")
                pair = tuple(sorted((g.node, by_bus[target].node)))
                side = seen.setdefault(pair, {})
                side[g.node] = side.get(g.node, 0) + count
        out = []
        for (a, b), side in seen.items():
            if len(set(side.values())) > 1:
                raise ValueError(f"{self.where}: <nvlink> counts between GPUs {a} and {b} disagree: "
                                 f"{side}")
            out.append((a, b, next(iter(side.values()))))
        return out


def _pcie_rate(el, loc, system):
    """(capacity bytes/s, tech name) of a PCI element's link to its parent.

    An absent, empty or ``Unknown`` link_speed is taken as Gen 5, an absent, empty or 0
    link_width as x16 (NCCL too reads width 0 as 16), and noted; anything else must be a PCIe
    rate and width."""
    speed, width = el.get("link_speed"), el.get("link_width")
    gts = lanes = None
    if speed is not None and speed.strip() not in ("", "Unknown"):
        match = _LINK_SPEED.fullmatch(speed)
        if not match or float(match.group(1)) not in _PCIE_GEN:
            rates = ", ".join(f"{r:g}" for r in _PCIE_GEN)
            raise _bad(system, loc, "link_speed", speed, f"must be a PCIe rate '<{rates}> GT/s'")
        gts = float(match.group(1))
    if width is not None and width.strip() not in ("", "0"):
        if not re.fullmatch(r"[0-9]{1,2}", width.strip()) or not 1 <= int(width) <= 32:
            raise _bad(system, loc, "link_width", width, f"must be a PCIe link width ({_PCIE_WIDTHS})")
        lanes = int(width)
    if gts is None or lanes is None:
        gts, lanes = gts or 32.0, lanes or 16
        system.ignored[f"PCI link_speed/link_width {speed!r}/{width!r} (taken as "
                       f"{_PCIE_GEN[gts][0]} x{lanes})"] += 1
    gen, encoding = _PCIE_GEN[gts]
    if encoding is None:
        return get_link(gen).bandwidth * lanes / 16, gen
    return gts * 1e9 * lanes * encoding / 8, gen


def _add_node(system, key, loc=None, **attrs):
    if key in system.nodes:
        raise ValueError(f"{system.where}: {loc or key}: two elements with this busid")
    attrs["order"] = len(system.nodes)
    system.nodes[key] = attrs


def _cable(system, a, b, capacity, tech):
    system.pci_cables.append((a, b, float(capacity), get_link("pcie5").latency, tech, "pcie", 1))


def _walk(cpu, key, loc, socket, system, full_dump):
    """The elements under a ``<cpu>``, depth first in file order, with an explicit stack."""
    stack = [(iter(enumerate(cpu)), cpu, key, loc)]
    while stack:
        children, el, parent, parent_loc = stack[-1]
        step = next(children, None)
        if step is None:
            stack.pop()
            continue
        i, child = step
        tag = child.tag
        if tag == "pci":
            child_loc = _loc(child, ("busid",), None if child.get("busid") else
                             f"child {i + 1} of {parent_loc}")
            bridge = _pci(child, child_loc, parent, socket, system, full_dump)
            if bridge is not None:
                stack.append((iter(enumerate(child)), child, bridge, child_loc))
        elif tag == "nic":
            # a <nic> outside a PCI NIC device (virtual NICs): on its parent at x16 of Gen 5
            nic_key = f"nic@{parent}/{len(system.nodes)}"
            _nic(child, nic_key, _ETH, system, _loc(child, (), f"child {i + 1} of {parent_loc}"))
            _cable(system, nic_key, parent, get_link("pcie5").bandwidth, "pcie5")
            system.notes.append(f"<nic> under {parent} has no PCI link: pcie5 x16 assumed")
        elif tag in _KNOWN_TAGS:
            system.ignored[f"<{tag}> under <{el.tag}>"] += 1
        else:
            system.ignored[f"<{_clip(tag)}>"] += 1


def _port_speed(net, loc, system):
    """A ``<net speed>`` (Mb/s) in bytes/s, None when the file does not know it."""
    speed = net.get("speed")
    if speed is None or not speed.strip():
        return None
    allowed = "must be the port speed in Mb/s: a number > 0 (0 or -1: unknown, as NCCL reads them)"
    if not DECIMAL.fullmatch(speed.strip()):
        raise _bad(system, loc, "speed", speed, allowed)
    mbps = float(speed)
    if mbps in _UNKNOWN_SPEEDS:
        system.ignored[f"<net speed=\"{_clip(speed)}\"> (NCCL's 'speed unknown')"] += 1
        return None
    rate = mbps * 1e6 / 8                  # NCCL writes Mb/s
    if not math.isfinite(rate) or rate <= 0:
        raise _bad(system, loc, "speed", speed, allowed)
    return rate


def _nic(el, key, pci_class, system, loc):
    ports = []
    for net in el:
        if net.tag != "net":
            system.ignored[f"<{_clip(net.tag)}> in <nic>"] += 1
            continue
        ports.append(_port_speed(net, _loc(net, ("name", "dev"), loc), system))
        name = net.get("name", "")
        family = ("infiniband" if pci_class == _IB else
                  "roce" if name.startswith(("mlx", "bnxt_re", "irdma")) else "ethernet")
        system.nic_families[family] += 1
    _add_node(system, key, loc, kind="nic")
    system.nic_speeds[key] = ports


def _pci(el, loc, parent, socket, system, full_dump):
    """Add one ``<pci>`` element (GPU, NIC or bridge); returns the bridge's key to walk its
    children, else None."""
    busid = (el.get("busid") or "").lower()
    code = _class_code(el.get("class"), system, loc)
    capacity, tech = _pcie_rate(el, loc, system)
    gpu_el = el.find("gpu")
    if gpu_el is not None or code in _GPU_CLASSES:
        _gpu(el, gpu_el, busid, system, loc, socket)
        _cable(system, f"gpu@{busid}", parent, capacity, tech)
    elif code is not None and code >> 8 == 0x02:
        nic_el = el.find("nic")
        if nic_el is None and full_dump:
            system.ignored["PCI NIC without <nic> (not used by NCCL)"] += 1
            return None
        key = f"nic@{busid}"
        if nic_el is None:
            _add_node(system, key, loc, kind="nic", busid=busid)
            system.nic_speeds[key] = [None]
            system.nic_families["infiniband" if code == _IB else "roce"] += 1
        else:
            _nic(nic_el, key, code, system, loc)
            system.nodes[key]["busid"] = busid
        _cable(system, key, parent, capacity, tech)
    elif code == _BRIDGE:
        key = f"pcie@{busid}"
        _add_node(system, key, loc, kind="pcie_switch", socket=socket, busid=busid)
        _cable(system, key, parent, capacity, tech)
        return key
    else:
        system.ignored[f"PCI device of class {_clip(el.get('class'))}"] += 1
    return None


def _gpu(el, gpu_el, busid, system, loc, socket):
    """Add one GPU, under the ``socket``-th ``<cpu>`` (its node's ``socket``, as the catalogue's
    PCIe servers give each GPU the socket its switch hangs off: NCCL's ring through GPUs of two
    sockets crosses their link, topo.cc ncclTopoConnectCpus)."""
    if len(system.gpus) >= system.max_gpus:
        raise ValueError(f"{system.where}: {loc}: more than max_gpus={system.max_gpus} GPUs "
                         "(pass a larger max_gpus to read this file)")
    if any(g.busid == busid for g in system.gpus):
        raise ValueError(f"{system.where}: {loc}: two GPUs with busid {_clip(busid)}")
    attrs = {} if gpu_el is None else gpu_el.attrib
    gpu_loc = loc if gpu_el is None else _loc(gpu_el, ("dev",), loc)

    def number(key):
        return _integer(system, gpu_loc, key, attrs.get(key))

    info = GpuInfo(f"gpu@{busid}", busid, number("sm"),
                   _integer(system, loc, "device", el.get("device"), base=16), number("rank"),
                   number("dev"))
    c2c = False
    for sub in ([] if gpu_el is None else gpu_el):
        if sub.tag == "c2c":            # a Grace Hopper / Blackwell's chip-to-chip link to its CPU
            c2c = True                  # (NCCL: GPU -> NIC under that CPU is PATH_P2C, paths.cc)
            continue
        if sub.tag != "nvlink":
            system.ignored[f"<{_clip(sub.tag)}> in <gpu>"] += 1
            continue
        link_loc = f"{_loc(sub, ('target',))} of GPU {_clip(busid)}"
        count = sub.get("count", "1")
        if not re.fullmatch(r"[0-9]{1,6}", count.strip()) or int(count) < 1:
            raise _bad(system, link_loc, "count", count, "must be an integer >= 1")
        tclass = _class_code(sub.get("tclass"), system, link_loc, "tclass")
        if tclass not in _GPU_CLASSES and tclass != _NVSWITCH:
            system.ignored[f"<nvlink> to class {_clip(sub.get('tclass'))} (not a GPU or NVSwitch)"] += 1
        info.nvlinks.append(((sub.get("target") or "").lower(), int(count), tclass))
    system.gpus.append(info)
    _add_node(system, info.node, loc, kind="gpu", busid=busid, socket=socket, **({"c2c": True} if c2c else {}))


def _order_gpus(system):
    """Local GPU order: by NCCL rank where every GPU has one, else by dev, else file order."""
    gpus = system.gpus
    for key in ("rank", "dev"):
        values = [getattr(g, key) for g in gpus]
        if None not in values:
            dup = [v for v, c in Counter(values).items() if c > 1]
            if dup:
                both = [f'<pci busid="{_clip(g.busid)}">' for g in gpus if getattr(g, key) == dup[0]]
                raise ValueError(f"{system.where}: two <gpu> elements with {key}={dup[0]}: "
                                 f"{' and '.join(both[:2])}")
            gpus.sort(key=lambda g: getattr(g, key))
            return


def _prune(system):
    """Drop PCI switches with no GPU or NIC below them."""
    tree = nx.Graph()
    tree.add_nodes_from(system.nodes)
    tree.add_edges_from((a, b) for a, b, *_ in system.pci_cables)
    while True:
        dead = [n for n, a in system.nodes.items() if a["kind"] == "pcie_switch" and tree.degree(n) <= 1]
        if not dead:
            return
        for n in dead:
            tree.remove_node(n)
            del system.nodes[n]
        system.pci_cables = [c for c in system.pci_cables if c[0] not in dead and c[1] not in dead]


def relabel(system, mapping):
    """Rename local node ids everywhere."""
    system.nodes = {mapping.get(n, n): a for n, a in system.nodes.items()}
    system.pci_cables = [(mapping.get(a, a), mapping.get(b, b), *rest) for a, b, *rest in system.pci_cables]
    system.nic_speeds = {mapping.get(n, n): v for n, v in system.nic_speeds.items()}
    for g in system.gpus:
        g.node = mapping.get(g.node, g.node)


def parse_system(root, where, max_gpus: int = 640) -> System:
    """The ``<system>`` element as a :class:`System` (GPU, PCI switch and CPU ids final)."""
    system = System(where, max_gpus=max_gpus)
    full_dump = root.find(".//net") is not None
    sockets = [c for c in root if c.tag == "cpu"]
    for child in root:
        if child.tag != "cpu":
            system.ignored[f"<{_clip(child.tag)}> under <system>"] += 1
    for c, cpu in enumerate(sockets):
        key = f"cpu{c}"
        # familyid / modelid: read (as integers) with the host's CPU make (_nccl_cpus.cpu_make)
        _add_node(system, key, kind="cpu", socket=c, numaid=cpu.get("numaid"), vendor=cpu.get("vendor"),
                  arch=cpu.get("arch"), familyid=cpu.get("familyid"), modelid=cpu.get("modelid"))
        loc = _loc(cpu, ("numaid",)) if cpu.get("numaid") is not None else f"<cpu> #{c + 1}"
        _walk(cpu, key, loc, c, system, full_dump)
    if not system.gpus:
        raise ValueError(f"{where}: no GPU (no <gpu>, no PCI class 0x0302/0x0300 device)")
    _order_gpus(system)
    _prune(system)
    mapping = {g.node: f"gpu{i}" for i, g in enumerate(system.gpus)}
    switches = [n for n, a in system.nodes.items() if a["kind"] == "pcie_switch"]
    mapping.update({n: f"pcie{k}" for k, n in enumerate(switches)})
    relabel(system, mapping)
    for i, g in enumerate(system.gpus):
        system.nodes[g.node].update(local_rank=i, order=i)
    system.notes.extend(f"ignored {what} x{n}" for what, n in sorted(system.ignored.items()))
    return system
