"""Server models: what sits between a GPU and the fabric.

A server model builds, inside a cluster graph, its GPUs, the fabric that joins them
(NVSwitch, PCIe switches and CPUs, or nothing) and its NICs. Rail ``i`` of a server is
its NIC ``i``; on the NVLink servers NIC ``i`` is attached to GPU ``i`` (GPUDirect RDMA
over a PCIe path), so GPU ``i`` sits on rail ``i``.

Layouts
-------
``"nvswitch"``
    Every GPU has one edge (tier ``"nvlink"``) of its aggregate NVLink bandwidth to one
    logical NVSwitch node. NVSwitch chips are non-blocking, so one node of per-GPU capacity
    gives the same max-min rates as the 4 (DGX H100) or 18 (NVL72) physical chips.
    NIC ``j`` hangs off GPU ``j`` through ``host_link`` (tier ``"pcie"``); the PCIe switch
    between them is not a bottleneck for one GPU/NIC pair and is folded into that edge. With
    ``nics_on="cpu"`` the NICs sit on the host CPU's root ports instead: one CPU node, every GPU
    and NIC on its own ``host_link`` to it (no PCIe switch shared by a GPU and a NIC: NCCL's PHB
    or SYS path between them, not PXB).
``"nvlink_mesh"``
    No NVSwitch: every pair of GPUs joined by its own edge (tier ``"nvlink"``) of
    ``links_per_pair`` NVLinks of the ``nvlink`` GPU's, both ways (:mod:`topologies._mesh`, which
    cites each machine's count: HGX A100 4-GPU 4 a pair; 4 x H100 / GH200 not published, taken as
    a required parameter). At most 4 GPUs. NICs as ``"nvswitch"`` attaches them (``nics_on``
    too); no NVLS.
``"pcie"``
    No NVLink: a two-socket host with ``pcie_switches`` PCIe switches split evenly over
    the sockets, the GPUs and NICs split evenly over the switches (``pcie_8gpu``: 4
    switches, each with 2 GPUs and 2 NICs, 2 switches per CPU socket). GPU-to-GPU traffic
    goes GPU -> switch -> GPU under one switch, through the CPU's root complex between
    switches of one socket, and over the socket link (UPI) between sockets. Every edge is a
    x16 link of ``host_link``. NIC ``j`` serves GPU ``j`` when there are as many NICs as GPUs.
``"single"``
    One GPU and one NIC joined by ``host_link``: the endpoint of the textbook fabrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import networkx as nx

from ._graph import add_cable, check_int, resolve_link, slower
from ._mesh import build_mesh, check_mesh
from .gpu_types import GpuSpec, get_gpu
from .links import LinkTech, get_link

__all__ = [
    "GpuSpec",
    "ServerModel",
    "ServerPorts",
    "get_gpu",
    "get_server",
    "register_server",
    "server_names",
]


@dataclass(frozen=True)
class ServerPorts:
    """What a built server exposes: its GPU node ids (local rank order) and NIC node ids
    (rail order)."""

    gpus: list = field(default_factory=list)
    nics: list = field(default_factory=list)
    cpus: list = field(default_factory=list)


_LAYOUTS = ("nvswitch", "nvlink_mesh", "pcie", "single")
#: where a NVLink server's NICs attach (:class:`ServerModel` ``nics_on``)
_NICS_ON = ("gpu", "cpu")
#: host CPU kinds NCCL's tuner tells apart (x86 Intel, x86 AMD, Arm)
CPUS = ("intel", "amd", "arm")
#: the CPU makes NCCL tells apart, by vendor (src/graph/topo.cc:748-751 of master 5067397c: Intel's
#: Broadwell, Skylake, Sapphire Rapids, Emerald Rapids by family / model id; one make for AMD and Arm)
CPU_MAKES = {"intel": ("broadwell", "skylake", "sapphire_rapids", "emerald_rapids"), "amd": (), "arm": ()}


@dataclass(frozen=True)
class ServerModel:
    """A server: GPUs, their internal fabric and their NICs.

    Parameters
    ----------
    name : str
        Model name, e.g. ``"dgx_h100"``.
    gpus : int
        GPUs per server (>= 1).
    layout : str
        ``"nvswitch"``, ``"nvlink_mesh"``, ``"pcie"`` or ``"single"`` (see the module docstring).
    gpu : str or GpuSpec
        GPU type (compute peak for the training model).
    nvlink : str, LinkTech or None
        Aggregate NVLink technology of one GPU to the NVSwitch (one direction), for
        ``layout="nvswitch"``; the GPU's NVLink generation for ``layout="nvlink_mesh"``.
    nics : int
        NICs per server; NIC ``i`` is rail ``i``.
    nic : str, LinkTech or None
        The NIC's port technology. ``None`` takes the fabric's link. When NIC and fabric
        differ, the cable runs at the slower of the two.
    host_link : str or LinkTech
        The PCIe path between a GPU and its NIC (and the PCIe fabric of ``layout="pcie"``).
    pcie_switches : int
        PCIe switches, for ``layout="pcie"``.
    socket_link : str or LinkTech
        The CPU socket-to-socket link, for ``layout="pcie"``.
    gpus_per_tray : int
        GPUs per compute tray where an NVLink domain spans trays (``nvl72``: 4), else 0.
    nic_ports : int
        Ports of one NIC, each a cable of ``nic`` to the NIC's rail switch (a dual-port
        ConnectX-7: 2); the NIC's cable to the fabric carries ``nic_ports`` parallel cables.
    cpu : {"intel", "amd", "arm"}
        The host CPU's vendor / architecture (each GPU node's ``cpu`` attribute). NCCL's
        tuner reads it: across nodes an AMD host caps LL lower and posts network sends at
        2 us, not 1 (src/graph/tuning.cc, ``llMaxBws``, ``getNetOverhead``).
    cpu_make : str, optional
        The Intel CPU's make (one of ``CPU_MAKES["intel"]``: NCCL prices the socket link of a
        two-socket host by it, ``ncclTopoGetInterCpuBw``); None: not known (NCCL's default for
        a make it does not name). Each GPU node's ``cpu_make`` attribute.
    links_per_pair : int
        NVLinks between each pair of GPUs, for ``layout="nvlink_mesh"`` (required there: no
        default, the count differs between boards; 0 elsewhere).
    nics_on : {"gpu", "cpu"}
        Where the NICs of ``layout="nvswitch"`` or ``"nvlink_mesh"`` attach: ``"gpu"`` (default)
        NIC ``j`` on a PCIe path from its first GPU (a PCIe switch they share: NCCL's PIX / PXB,
        GPUDirect RDMA and PXN relays through it); ``"cpu"`` on the host CPU's root ports, each
        GPU on its own PCIe link to the CPU (NCCL's PHB / SYS from every GPU: ALCF Polaris).

    Examples
    --------
    >>> m = get_server("dgx_h100")
    >>> m.gpus, m.nics, get_link(m.nvlink).bandwidth / 1e9
    (8, 8, 450.0)
    >>> fast = ServerModel("my_b200", gpus=8, layout="nvswitch", gpu="b200",
    ...                    nvlink="nvlink5", nics=8, nic="ib_xdr")
    >>> fast.rails
    8
    """

    name: str
    gpus: int
    layout: str
    gpu: "str | GpuSpec" = "h100_sxm"
    nvlink: "str | LinkTech | None" = None
    nics: int = 1
    nic: "str | LinkTech | None" = None
    host_link: "str | LinkTech" = "pcie5"
    pcie_switches: int = 0
    socket_link: "str | LinkTech" = "upi2x3"
    gpus_per_tray: int = 0
    nic_ports: int = 1
    cpu: str = "intel"
    links_per_pair: int = 0
    nics_on: str = "gpu"
    cpu_make: "str | None" = None

    def __post_init__(self):
        check_int("gpus", self.gpus, 1)
        if self.cpu not in CPUS:
            raise ValueError(f"server {self.name!r}: cpu must be one of {', '.join(CPUS)}, got {self.cpu!r}")
        if self.cpu_make is not None and self.cpu_make not in CPU_MAKES[self.cpu]:
            raise ValueError(f"server {self.name!r}: cpu_make must be None or, for cpu {self.cpu!r}, one of "
                             f"{', '.join(CPU_MAKES[self.cpu]) or 'none (NCCL knows one make)'}, got {self.cpu_make!r}")
        check_int("nics", self.nics, 1)
        check_int("nic_ports", self.nic_ports, 1)
        if self.layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(_LAYOUTS)}, got {self.layout!r}")
        get_gpu(self.gpu)
        resolve_link("host_link", self.host_link)
        if self.nic is not None:
            resolve_link("nic", self.nic)
        if self.layout == "nvswitch":
            if self.nvlink is None:
                raise ValueError(f"server {self.name!r}: layout 'nvswitch' needs nvlink "
                                 "(a link technology name or LinkTech)")
            resolve_link("nvlink", self.nvlink)
            if self.gpus % self.nics:
                raise ValueError(f"server {self.name!r}: nics ({self.nics}) must divide gpus "
                                 f"({self.gpus}) so every GPU has a rail")
        elif self.layout == "nvlink_mesh":
            check_mesh(self.name, self.gpus, self.nvlink, self.links_per_pair)
            if self.gpus % self.nics:
                raise ValueError(f"server {self.name!r}: nics ({self.nics}) must divide gpus "
                                 f"({self.gpus}) so every GPU has a rail")
        elif self.layout == "pcie":
            check_int("pcie_switches", self.pcie_switches, 2, "an even number, split over 2 sockets")
            if self.pcie_switches % 2 or self.gpus % self.pcie_switches or self.nics % self.pcie_switches:
                raise ValueError(
                    f"server {self.name!r}: pcie_switches ({self.pcie_switches}) must be even and "
                    f"divide both gpus ({self.gpus}) and nics ({self.nics})")
            resolve_link("socket_link", self.socket_link)
        elif self.gpus != 1 or self.nics != 1:
            raise ValueError(f"server {self.name!r}: layout 'single' has exactly 1 GPU and 1 NIC")
        if self.nics_on not in _NICS_ON:
            raise ValueError(f"server {self.name!r}: nics_on must be one of {', '.join(_NICS_ON)} (what a NIC's "
                             f"PCIe path starts from), got {self.nics_on!r}")
        if self.nics_on != "gpu" and self.layout not in ("nvswitch", "nvlink_mesh"):
            raise ValueError(f"server {self.name!r}: nics_on is for layouts 'nvswitch' and 'nvlink_mesh' (layout "
                             f"{self.layout!r} places its NICs itself), got nics_on={self.nics_on!r}")
        if self.links_per_pair and self.layout != "nvlink_mesh":
            raise ValueError(f"server {self.name!r}: links_per_pair is for layout 'nvlink_mesh', not {self.layout!r}")
        if self.gpus_per_tray:
            check_int("gpus_per_tray", self.gpus_per_tray, 1)
            if self.gpus % self.gpus_per_tray:
                raise ValueError(f"server {self.name!r}: gpus_per_tray must divide gpus")

    @property
    def rails(self) -> int:
        """Rails (NICs) per server."""
        return self.nics

    @property
    def gpu_spec(self) -> GpuSpec:
        return get_gpu(self.gpu)

    @property
    def has_nvlink(self) -> bool:
        """Whether NVLink joins every pair of GPUs (an NVSwitch, or a mesh of direct links)."""
        return self.layout in ("nvswitch", "nvlink_mesh")

    def nic_tech(self, fabric_link: "str | LinkTech") -> LinkTech:
        """The technology a NIC-to-switch cable runs at on a fabric of ``fabric_link``: the
        slower of the two, the fabric's at equal rates (a 400G NIC such as ConnectX-7 runs NDR
        InfiniBand or 400G Ethernet, whichever the switch speaks).

        >>> get_server("dgx_h100").nic_tech("roce_400g").name, get_server("dgx_h100").nic_tech("ib_hdr").name
        ('roce_400g', 'ib_hdr')
        """
        fabric = get_link(fabric_link)
        return fabric if self.nic is None else slower(fabric, get_link(self.nic))

    def nic_rate(self, fabric_link: "str | LinkTech") -> float:
        """Bytes/s one NIC sends into a fabric of ``fabric_link``: its ports times the rate of
        one port's cable (:meth:`nic_tech`).

        >>> get_server("dgx_h100").with_(nic_ports=2).nic_rate("ib_ndr") / 1e9
        100.0
        """
        return self.nic_ports * self.nic_tech(fabric_link).bandwidth

    def to_dict(self) -> dict:
        """JSON-friendly description (technology objects by name)."""
        out = {}
        for key in ("name", "gpus", "layout", "gpu", "nvlink", "nics", "nic", "host_link",
                    "pcie_switches", "socket_link", "gpus_per_tray", "nic_ports", "cpu", "links_per_pair",
                    "nics_on", "cpu_make"):
            value = getattr(self, key)
            out[key] = getattr(value, "name", value)
        return out

    def with_(self, **changes) -> "ServerModel":
        """A modified copy, e.g. ``get_server("dgx_h100").with_(nic="ib_xdr")``."""
        return replace(self, **changes)

    # -- building ------------------------------------------------------------------
    def build(self, g: nx.DiGraph, index: int, first_rank: int) -> ServerPorts:
        """Add server number ``index`` to ``g``, its GPUs ranked from ``first_rank``.

        Node ids are ``"s{index}/gpu{i}"``, ``"s{index}/nic{j}"``, ``"s{index}/nvswitch"``,
        ``"s{index}/pcie{k}"``, ``"s{index}/cpu{c}"``. NICs are returned but not cabled.
        """
        pre = f"s{index}/"
        host = get_link(self.host_link)
        gpu_name = self.gpu_spec.name
        gpus = [pre + f"gpu{i}" for i in range(self.gpus)]
        nics = [pre + f"nic{j}" for j in range(self.nics)]
        gpus_per_nic = self.gpus // self.nics if self.gpus >= self.nics else 1
        for i, node in enumerate(gpus):
            attrs = dict(kind="gpu", tier=0, rank=first_rank + i, server=index, local_rank=i,
                         rail=min(i // gpus_per_nic, self.nics - 1), gpu_type=gpu_name, cpu=self.cpu)
            if self.cpu_make is not None:
                attrs["cpu_make"] = self.cpu_make
            if self.gpus_per_tray:
                attrs["tray"] = i // self.gpus_per_tray
            g.add_node(node, **attrs)
        for j, node in enumerate(nics):
            g.add_node(node, kind="nic", tier=0, server=index, rail=j, role="compute")
        cpus: list = []
        if self.layout in ("nvswitch", "nvlink_mesh"):
            nvs = pre + "nvswitch"
            if self.layout == "nvswitch":
                g.add_node(nvs, kind="nvswitch", tier=0, server=index)
                nvl = get_link(self.nvlink)
                for i, node in enumerate(gpus):
                    add_cable(g, node, nvs, nvl, tier="nvlink")
            else:
                build_mesh(g, gpus, self.nvlink, self.links_per_pair)
            if self.nics_on == "cpu":       # the NICs on the CPU's root ports, every GPU its own PCIe link
                cpus = [pre + "cpu0"]
                g.add_node(cpus[0], kind="cpu", tier=0, server=index, socket=0)
                for node in gpus + nics:
                    add_cable(g, node, cpus[0], host, tier="pcie")
            else:
                for j, nic in enumerate(nics):
                    # the first GPU of the NIC's group owns the PCIe path to it
                    add_cable(g, gpus[j * gpus_per_nic], nic, host, tier="pcie")
        elif self.layout == "pcie":
            socket = get_link(self.socket_link)
            cpus = [pre + "cpu0", pre + "cpu1"]
            for c, node in enumerate(cpus):
                g.add_node(node, kind="cpu", tier=0, server=index, socket=c)
            add_cable(g, cpus[0], cpus[1], socket, tier="cpu")
            nsw = self.pcie_switches
            gps, nps = self.gpus // nsw, self.nics // nsw
            for s in range(nsw):
                sw = pre + f"pcie{s}"
                g.add_node(sw, kind="pcie_switch", tier=0, server=index, socket=s * 2 // nsw)
                add_cable(g, sw, cpus[s * 2 // nsw], host, tier="pcie")
                for node in gpus[s * gps:(s + 1) * gps]:
                    g.nodes[node]["socket"] = s * 2 // nsw          # the socket its switch hangs off
                    add_cable(g, node, sw, host, tier="pcie")
                for nic in nics[s * nps:(s + 1) * nps]:
                    add_cable(g, nic, sw, host, tier="pcie")
        else:
            add_cable(g, gpus[0], nics[0], host, tier="pcie")
        return ServerPorts(gpus=gpus, nics=nics, cpus=cpus)


_SERVERS: dict[str, ServerModel] = {}


def _add(model: ServerModel) -> None:
    _SERVERS[model.name] = model


# DGX H100 (DGX H100 user guide): 8 H100 SXM5, 4 NVSwitch chips, 18 NVLink 4 per GPU
# (450 GB/s per direction), 8 ConnectX-7 400 Gb/s compute NICs, one per GPU, on PCIe Gen5;
# two Intel Xeon Platinum 8480C (DGX H100 datasheet).
_add(ServerModel("dgx_h100", gpus=8, layout="nvswitch", gpu="h100_sxm", nvlink="nvlink4",
                 nics=8, nic="ib_ndr", host_link="pcie5"))
# DGX H200 (NVIDIA DGX BasePOD reference architecture, "Core Components", "DGX H200 and H100
# Systems", docs.nvidia.com, read 2026-12-06): the DGX H100's system with 8 H200 (1,128 GB of GPU
# memory), four NVSwitch chips, two Xeon Platinum 8480C and four OSFP ports serving eight
# single-port ConnectX-7 400 Gb/s; NVLink 4 as the H100's (H200 SXM datasheet: 900 GB/s).
_add(ServerModel("dgx_h200", gpus=8, layout="nvswitch", gpu="h200", nvlink="nvlink4",
                 nics=8, nic="ib_ndr", host_link="pcie5"))
# DGX A100 (DGX A100 user guide): 8 A100 SXM4, 6 NVSwitch chips, 12 NVLink 3 per GPU
# (300 GB/s per direction), 8 ConnectX-6 HDR 200 Gb/s compute NICs on PCIe Gen4; two AMD
# EPYC 7742 ("Dual AMD Rome 7742", DGX A100 datasheet).
_add(ServerModel("dgx_a100", gpus=8, layout="nvswitch", gpu="a100_sxm", nvlink="nvlink3",
                 nics=8, nic="ib_hdr", host_link="pcie4", cpu="amd"))
# DGX B200 (DGX B200 user guide): 8 B200, 2 NVSwitch chips, 18 NVLink 5 per GPU
# (900 GB/s per direction), 8 ConnectX-7 400 Gb/s compute NICs on PCIe Gen5; two Intel Xeon
# Platinum 8570 (DGX B200 datasheet).
_add(ServerModel("dgx_b200", gpus=8, layout="nvswitch", gpu="b200", nvlink="nvlink5",
                 nics=8, nic="ib_ndr", host_link="pcie5"))
# A generic 8-GPU PCIe server (dual-root layout of common 4U 8-GPU chassis): 8 H100 PCIe,
# no NVLink bridges, 4 PCIe Gen5 switches (2 per CPU socket), 2 GPUs + 2 NICs per switch.
# The NICs take the fabric's rate.
# HGX A100 4-GPU node of ALCF Polaris (argonne-lcf/user-guides at 0a867f3,
# docs/polaris/hardware-overview/machine-overview.md: HPE Apollo 6500 Gen10+, "a single 2.8 Ghz AMD EPYC Milan
# 7543P", "four Nvidia A100 GPUs connected via NVLink" -- NV4 between every pair in its device-affinity table, no
# NVSwitch -- and "a pair of slingshot network adapters"; A100: PCIe 4): the 4 A100 on an NVLink 3 mesh of 4 links
# a pair, 2 NICs at the fabric's rate, one a GPU pair. Its GPUs are the A100 40GB parts: the overview's "A100 HGX
# (Polaris)" column gives "GPU Memory | 160 GiB HBM2" and "GPU Memory BW | 6.4 TB/s" for the node's four (40 GiB and
# 1.6 TB/s each): the catalogue's a100_40gb (the datasheet's 40 GB, 1,555 GB/s). Its device-affinity table puts each
# GPU in its own NUMA domain, mlx5_0 PHB to GPU3, mlx5_1 PHB to GPU1 and every other GPU-NIC path SYS: the NICs on
# the CPU's root ports, none under a GPU's PCIe switch (nics_on="cpu": NCCL's typeInter is PHB, so no LL128 across
# nodes on A100 and no PXN relay; PHB and SYS are one class to NCCL's rules, and one CPU node here).
_add(ServerModel("polaris_a100", gpus=4, layout="nvlink_mesh", gpu="a100_40gb", nvlink="nvlink3",
                 links_per_pair=4, nics=2, nic=None, host_link="pcie4", cpu="amd", nics_on="cpu"))
# Its sockets are Sapphire Rapids: UPI 2.0 at 16 GT/s and PCIe Gen5 are 4th-generation Xeon's (Intel
# Xeon Scalable specs; Emerald Rapids runs UPI at 20 GT/s)
_add(ServerModel("pcie_8gpu", gpus=8, layout="pcie", gpu="h100_pcie", nics=8, nic=None,
                 host_link="pcie5", pcie_switches=4, socket_link="upi2x3", cpu_make="sapphire_rapids"))
# GB200 NVL72 (NVIDIA GB200 NVL72 spec): 72 Blackwell GPUs in 18 compute trays of 4, one
# NVLink 5 domain through 9 NVSwitch trays (18 chips), 900 GB/s per GPU per direction;
# one 400 Gb/s ConnectX-7 per GPU for the compute fabric; each tray's two Grace CPUs are Arm
# (Neoverse V2 cores, NVIDIA Grace CPU datasheet).
_add(ServerModel("nvl72", gpus=72, layout="nvswitch", gpu="gb200", nvlink="nvlink5",
                 nics=72, nic="ib_ndr", host_link="pcie5", gpus_per_tray=4, cpu="arm"))
# A single-GPU host with one NIC at the fabric's rate: the textbook fabrics' endpoint.
_add(ServerModel("host", gpus=1, layout="single", gpu="h100_sxm", nics=1, nic=None,
                 host_link="pcie5"))

_BUILTIN_SERVERS = frozenset(_SERVERS)


def server_names() -> list[str]:
    """Names of the registered server models, sorted.

    Examples
    --------
    >>> server_names()[:3]
    ['dgx_a100', 'dgx_b200', 'dgx_h100']
    """
    return sorted(_SERVERS)


def get_server(server: "str | ServerModel | None") -> ServerModel:
    """Look a server model up by name, pass one through; ``None`` gives ``"host"``.

    >>> get_server(None).gpus
    1
    """
    if server is None:
        return _SERVERS["host"]
    if isinstance(server, ServerModel):
        return server
    if isinstance(server, str) and server in _SERVERS:
        return _SERVERS[server]
    raise ValueError(f"unknown server {server!r}; known: {', '.join(server_names())} "
                     "(or pass a ServerModel)")


def register_server(model: ServerModel, *, overwrite: bool = False) -> ServerModel:
    """Add a user server model so that it can be used by name.

    >>> quad = ServerModel("doc_quad", gpus=4, layout="nvswitch", nvlink="nvlink4", nics=4)
    >>> register_server(quad, overwrite=True).name in server_names()
    True
    """
    if not isinstance(model, ServerModel):
        raise ValueError(f"model must be a ServerModel, got {type(model).__name__}")
    if model.name in _BUILTIN_SERVERS:
        raise ValueError(f"server {model.name!r} is built in; register it under another name")
    if model.name in _SERVERS and not overwrite:
        raise ValueError(f"server {model.name!r} is already registered; pass overwrite=True")
    _SERVERS[model.name] = model
    return model
