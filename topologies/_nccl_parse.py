"""Private: the elements of an NCCL topology file as nodes, PCIe cables, GPUs and NIC ports
(``from_nccl_xml`` turns them into a server model)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import networkx as nx

from .links import get_link

# PCI class codes (PCI-SIG code and ID assignment spec): base class << 8 | subclass.
_BRIDGE = 0x0604          # PCI-to-PCI bridge (a PCIe switch port)
_GPU_CLASSES = (0x0300, 0x0302)   # VGA / 3D controller
_NVSWITCH = 0x0680        # "other bridge": how NVSwitch chips present themselves
_IB, _ETH = 0x0207, 0x0200

# PCIe link rate by transfer rate (GT/s) -> (generation, encoding efficiency); Gen 4 and 5
# come from the catalogue (links.py), Gen 1-3 from the PCI-SIG base specs: 8b/10b at 2.5 and
# 5 GT/s, 128b/130b at 8 GT/s.
_PCIE_GEN = {2.5: ("pcie1", 8 / 10), 5.0: ("pcie2", 8 / 10), 8.0: ("pcie3", 128 / 130),
             16.0: ("pcie4", None), 32.0: ("pcie5", None)}
_KNOWN_TAGS = {"system", "cpu", "pci", "gpu", "nvlink", "nic", "net"}


def _class_code(text):
    """``"0x030200"`` (class, subclass, prog-if) or ``"0x0302"`` or ``"0x03"`` -> class<<8|sub
    (``"0x03"`` -> 0x0300)."""
    if text is None:
        return None
    value = int(text, 16)
    if len(text.removeprefix("0x")) > 4:
        value >>= 8
    elif len(text.removeprefix("0x")) <= 2:
        value <<= 8
    return value


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


def _pcie_rate(el, system):
    """(capacity bytes/s, tech name) of a PCI element's link to its parent."""
    speed, width = el.get("link_speed"), el.get("link_width")
    try:
        gts = float(speed.split()[0])
        lanes = int(width)
        gen, encoding = _PCIE_GEN[gts]
    except (AttributeError, ValueError, KeyError, IndexError, TypeError):
        system.ignored[f"PCI link_speed/link_width {speed!r}/{width!r} (taken as pcie5 x16)"] += 1
        return get_link("pcie5").bandwidth, "pcie5"
    if encoding is None:
        return get_link(gen).bandwidth * lanes / 16, gen
    return gts * 1e9 * lanes * encoding / 8, gen


def _add_node(system, key, **attrs):
    attrs["order"] = len(system.nodes)
    system.nodes[key] = attrs


def _cable(system, a, b, capacity, tech):
    system.pci_cables.append((a, b, float(capacity), get_link("pcie5").latency, tech, "pcie", 1))


def _walk(el, parent, socket, system, full_dump):
    for child in el:
        tag = child.tag
        if tag == "pci":
            _pci(child, parent, socket, system, full_dump)
        elif tag == "nic":
            # a <nic> outside a PCI NIC device (virtual NICs): on its parent at x16 of Gen 5
            key = f"nic@{parent}/{len(system.nodes)}"
            _nic(child, key, _ETH, system)
            _cable(system, key, parent, get_link("pcie5").bandwidth, "pcie5")
            system.notes.append(f"<nic> under {parent} has no PCI link: pcie5 x16 assumed")
        elif tag in _KNOWN_TAGS:
            system.ignored[f"<{tag}> under <{el.tag}>"] += 1
        else:
            system.ignored[f"<{tag}>"] += 1


def _nic(el, key, pci_class, system):
    ports = []
    for net in el:
        if net.tag != "net":
            system.ignored[f"<{net.tag}> in <nic>"] += 1
            continue
        speed = net.get("speed")
        mbps = float(speed) if speed not in (None, "") else -1.0
        ports.append(mbps * 1e6 / 8 if mbps > 0 else None)   # NCCL writes Mb/s
        name = net.get("name", "")
        family = ("infiniband" if pci_class == _IB else
                  "roce" if name.startswith(("mlx", "bnxt_re", "irdma")) else "ethernet")
        system.nic_families[family] += 1
    _add_node(system, key, kind="nic")
    system.nic_speeds[key] = ports


def _pci(el, parent, socket, system, full_dump):
    busid = (el.get("busid") or "").lower()
    code = _class_code(el.get("class"))
    capacity, tech = _pcie_rate(el, system)
    gpu_el = el.find("gpu")
    if gpu_el is not None or code in _GPU_CLASSES:
        _gpu(el, gpu_el, busid, system)
        _cable(system, f"gpu@{busid}", parent, capacity, tech)
    elif code is not None and code >> 8 == 0x02:
        nic_el = el.find("nic")
        if nic_el is None and full_dump:
            system.ignored["PCI NIC without <nic> (not used by NCCL)"] += 1
            return
        key = f"nic@{busid}"
        if nic_el is None:
            _add_node(system, key, kind="nic", busid=busid)
            system.nic_speeds[key] = [None]
            system.nic_families["infiniband" if code == _IB else "roce"] += 1
        else:
            _nic(nic_el, key, code, system)
            system.nodes[key]["busid"] = busid
        _cable(system, key, parent, capacity, tech)
    elif code == _BRIDGE:
        key = f"pcie@{busid}"
        _add_node(system, key, kind="pcie_switch", socket=socket, busid=busid)
        _cable(system, key, parent, capacity, tech)
        _walk(el, key, socket, system, full_dump)
    else:
        system.ignored[f"PCI device of class {el.get('class')}"] += 1


def _gpu(el, gpu_el, busid, system):
    if any(g.busid == busid for g in system.gpus):
        raise ValueError(f"{system.where}: two GPUs with busid {busid}")
    attrs = {} if gpu_el is None else gpu_el.attrib

    def number(key, base=10):
        value = attrs.get(key) if key != "device" else el.get("device")
        try:
            return None if value is None else int(value, base)
        except ValueError:
            raise ValueError(f"{system.where}: <gpu> of {busid}: {key}={value!r} is not a number") from None

    info = GpuInfo(f"gpu@{busid}", busid, number("sm"), number("device", 16), number("rank"),
                   number("dev"))
    for sub in ([] if gpu_el is None else gpu_el):
        if sub.tag != "nvlink":
            system.ignored[f"<{sub.tag}> in <gpu>"] += 1
            continue
        count = sub.get("count", "1")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"{system.where}: <nvlink target=\"{sub.get('target')}\"> of GPU "
                             f"{busid}: count must be an integer >= 1, got {count!r}")
        tclass = _class_code(sub.get("tclass"))
        if tclass not in _GPU_CLASSES and tclass != _NVSWITCH:
            system.ignored[f"<nvlink> to class {sub.get('tclass')} (not a GPU or NVSwitch)"] += 1
        info.nvlinks.append(((sub.get("target") or "").lower(), int(count), tclass))
    system.gpus.append(info)
    _add_node(system, info.node, kind="gpu", busid=busid)


def _order_gpus(system):
    """Local GPU order: by NCCL rank where every GPU has one, else by dev, else file order."""
    gpus = system.gpus
    for key in ("rank", "dev"):
        values = [getattr(g, key) for g in gpus]
        if None not in values:
            dup = [v for v, c in Counter(values).items() if c > 1]
            if dup:
                raise ValueError(f"{system.where}: two <gpu> elements with {key}={dup[0]}")
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


def parse_system(root, where) -> System:
    """The ``<system>`` element as a :class:`System` (GPU, PCI switch and CPU ids final)."""
    system = System(where)
    full_dump = root.find(".//net") is not None
    sockets = [c for c in root if c.tag == "cpu"]
    for child in root:
        if child.tag != "cpu":
            system.ignored[f"<{child.tag}> under <system>"] += 1
    for c, cpu in enumerate(sockets):
        key = f"cpu{c}"
        _add_node(system, key, kind="cpu", socket=c, numaid=cpu.get("numaid"),
                  vendor=cpu.get("vendor"))
        _walk(cpu, key, c, system, full_dump)
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
