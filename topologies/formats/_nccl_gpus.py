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
# PCI device ids (PCI ID Repository, vendor 10de) whose GPU type differs from the sm's default.
# 10de:2331 "GH100 [H100 PCIe]"; 10de:2335 "GH100 [H200 SXM 141GB]" (also as lspci -nn prints it on
# H200 servers: "NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335]")
_BY_DEVICE = {0x2331: "h100_pcie", 0x2335: "h200"}

_GENERATIONS = ", ".join(_LINKS_PER_GPU)


def _generation(system, gpu, nvlink, where):
    """GPU type and NVLink catalogue entry: the arguments, else from sm / device id."""
    notes = []
    sms = {g.sm for g in system.gpus if g.sm is not None}
    if len(sms) > 1:
        raise ValueError(f"{where}: GPUs of several generations (sm {sorted(sms)}) in one server")
    sm = sms.pop() if sms else None
    devices = {g.device for g in system.gpus} - {None}
    if gpu is None:
        known = {_BY_DEVICE[d] for d in devices if d in _BY_DEVICE}
        if len(known) == 1:
            gpu = known.pop()
        elif sm in _BY_SM:
            gpu = _BY_SM[sm][0]
            notes.append(f"GPU type {gpu} from sm {sm}")
        else:
            raise ValueError(f"{where}: the file does not name the GPU type (sm {sm}, PCI devices "
                             f"{sorted(hex(d) for d in devices)}); pass gpu=... (e.g. 'h100_sxm')")
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
