"""An NCCL topology file's GPU type and NVLink generation: from the arguments, else from the
GPUs' ``sm`` and PCI device ids (units: none; used by :mod:`.nccl`)."""

from __future__ import annotations

from ..gpu_types import get_gpu

# sm (compute capability x 10) -> (GPU type, NVLink catalogue entry, NVLinks per GPU). Links
# per GPU from the datasheets quoted in links.py: A100 12 x NVLink 3, H100 18 x NVLink 4,
# B200 18 x NVLink 5.
_BY_SM = {80: ("a100_sxm", "nvlink3", 12), 90: ("h100_sxm", "nvlink4", 18),
          100: ("b200", "nvlink5", 18)}
_LINKS_PER_GPU = {tech: links for _, tech, links in _BY_SM.values()}
# PCI device ids of vendor 10de -> (catalogue GPU type, sm). Names as the PCI ID Repository's
# pci.ids lists them (pciutils/pciids at c1c12547d626ebf05fd0223144ad87fab5e95d06, 2026-08-22):
_BY_DEVICE = {
    0x20b0: ("a100_40gb", 80),    # "GA100 [A100 SXM4 40GB]" (AWS p4d, OCI BM.GPU4.8)
    0x20b2: ("a100_sxm", 80),     # "GA100 [A100 SXM4 80GB]"
    0x2330: ("h100_sxm", 90),     # "GH100 [H100 SXM5 80GB]"
    0x2331: ("h100_pcie", 90),    # "GH100 [H100 PCIe]"
    # "GH100 [H100L 94GB]", sold as the H100 NVL: the catalogue's PCIe H100, as the nccl-tests
    # reader takes "NVIDIA H100 NVL" (flowsolver._nccl_log.DEVICE_GPUS); noted in the description
    0x2321: ("h100_pcie", 90),
    0x2335: ("h200", 90),         # "GH100 [H200 SXM 141GB]" (lspci -nn on H200 servers prints the same)
    0x2901: ("b200", 100),        # "GB100 [B200]"
    0x2941: ("gb200", 100),       # "GB100 [HGX GB200]"
}
# read as a catalogue part that is not the same GPU: said in the description
_NEAREST = {0x2321: "an H100 NVL (94 GB) taken as the catalogue's h100_pcie (80 GB)"}
# device ids of NVIDIA data-centre GPUs the catalogue has no part for (pci.ids, as above): named
# in the error, which asks for gpu= (any other id of no known part is refused the same way)
_UNCATALOGUED = {0x20b1: "A100 PCIe 40GB", 0x20b5: "A100 PCIe 80GB", 0x20b7: "A30 PCIe",
                 0x20bd: "A800 SXM4 40GB", 0x20f3: "A800-SXM4-80GB", 0x2322: "H800 PCIe",
                 0x2324: "H800", 0x2329: "H20", 0x232c: "H20 HBM3e", 0x233b: "H200 NVL",
                 0x2339: "H100 SXM5 94GB", 0x2342: "GH200 120GB / 480GB",
                 0x2348: "GH200 144G HBM3e", 0x2909: "HGX B200 168GB", 0x31c2: "GB300",
                 0x3182: "B300 SXM6 AC"}

_GENERATIONS = ", ".join(_LINKS_PER_GPU)


def _generation(system, gpu, nvlink, where):
    """GPU type and NVLink catalogue entry: the arguments, else from sm / device id."""
    notes = []
    sms = {g.sm for g in system.gpus if g.sm is not None}
    if len(sms) > 1:
        raise ValueError(f"{where}: GPUs of several generations (sm {sorted(sms)}) in one server")
    sm = sms.pop() if sms else None
    # device 0x0000: a skeleton's placeholder (Azure's ndv5-topo.xml writes it on bridges)
    devices = {g.device for g in system.gpus} - {None, 0}
    if gpu is None:
        gpu, sm = _by_device(devices, sm, where, notes)
    if gpu is None:
        if sm in _BY_SM:
            gpu = _BY_SM[sm][0]
            notes.append(f"GPU type {gpu} from sm {sm} (the file gives no PCI device id)")
        else:
            raise ValueError(f"{where}: the file does not name the GPU type (sm {sm}, no PCI device "
                             "id); pass gpu=... (e.g. 'h100_sxm')")
    name = get_gpu(gpu).name
    if nvlink == "none":                        # said: no NVLink (PCIe only)
        if any(g.nvlinks for g in system.gpus):
            raise ValueError(f"{where}: nvlink='none' but the file's GPUs have <nvlink> elements")
        return name, None, notes + ["nvlink='none': the GPUs joined over PCIe only"]
    if nvlink is None and not any(g.nvlinks for g in system.gpus) and len(system.gpus) > 1 \
            and not name.endswith("_pcie"):
        # NCCL adds a GPU's NVLinks from the driver (NVML) to a file that has none when it loads
        # it (src/graph/xml.cc ncclTopoGetXmlFromGpu): such a file, an NCCL_TOPO_FILE skeleton of
        # PCI devices, does not say how its SXM GPUs are joined
        raise ValueError(f"{where}: the file has no <nvlink> elements, and NCCL adds each GPU's NVLinks "
                         f"from the driver when it loads such a file, so it does not say how these "
                         f"{len(system.gpus)} {name} GPUs are joined; pass nvlink=: the generation "
                         f"({_GENERATIONS}; one NVSwitch domain, every GPU's links to it, as on an HGX "
                         f"baseboard) or 'none' (PCIe only)")
    if nvlink is None and sm in _BY_SM:
        nvlink = _BY_SM[sm][1]
    if nvlink is not None and nvlink not in _LINKS_PER_GPU:
        raise ValueError(f"nvlink must be one of {_GENERATIONS} or 'none', got {nvlink!r}")
    if nvlink is None and any(g.nvlinks for g in system.gpus):
        raise ValueError(f"{where}: the GPUs have <nvlink> elements but sm {sm} names no NVLink "
                         f"generation; pass nvlink=... ({_GENERATIONS})")
    return name, nvlink, notes


def _by_device(devices, sm, where, notes):
    """(GPU type, sm) from the GPUs' PCI device ids, (None, sm) where the file gives none; a
    ValueError for an id of no catalogue part, several types, or an id contradicting ``sm``."""
    if not devices:
        return None, sm
    unknown = sorted(d for d in devices if d not in _BY_DEVICE)
    if unknown:
        d = unknown[0]
        what = f"pci.ids: {_UNCATALOGUED[d]!r}" if d in _UNCATALOGUED else "not a GPU this reader knows"
        raise ValueError(f"{where}: PCI device id 10de:{d:04x} ({what}; sm {sm}) has no part in the "
                         "GPU catalogue, and another part's figures would misstate its compute and "
                         "memory; pass gpu=... (a catalogue name or a GpuSpec)")
    types = sorted({_BY_DEVICE[d][0] for d in devices})
    if len(types) > 1:
        raise ValueError(f"{where}: GPUs of several types ({', '.join(types)}, PCI device ids "
                         f"{', '.join(f'10de:{d:04x}' for d in sorted(devices))}) in one server")
    d = min(devices)
    gpu, device_sm = _BY_DEVICE[d]
    if sm is not None and sm != device_sm:
        raise ValueError(f"{where}: PCI device id 10de:{d:04x} is a {gpu} (sm {device_sm}), but its "
                         f"<gpu> says sm {sm}")
    notes.append(f"GPU type {gpu} from PCI device id {', '.join(f'10de:{d:04x}' for d in sorted(devices))}")
    notes.extend(_NEAREST[d] for d in sorted(devices) if d in _NEAREST)
    return gpu, device_sm
