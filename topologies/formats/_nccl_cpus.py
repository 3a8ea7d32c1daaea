"""An NCCL topology file's host CPU: its kind (``"intel"``, ``"amd"``, ``"arm"``) and, for Intel,
its make, read from the ``<cpu arch vendor familyid modelid>`` attributes as NCCL reads them
(units: none; used by :mod:`.nccl`).

NCCL's source is cited at master 5067397c (github.com/NVIDIA/nccl): ``src/graph/topo.cc``
``ncclTopoAddCpu`` (lines 739-751) reads ``arch``, then for ``x86_64`` the ``vendor``, then for
``GenuineIntel`` ``familyid`` and ``modelid`` (``xmlGetAttrInt``, ``src/graph/xml.h:112-117``:
``strtol(str, NULL, 0)``, so decimal, ``0x`` hex or ``0`` octal; NCCL's own dumps write decimal,
``xml.cc:555-558``) and takes the make by family 6 and model id thresholds. ``topo.cc:60-82``
``ncclTopoGetInterCpuBw`` prices the socket link by that make (the collectives' ``INTER_CPU_GBS``).
"""

from __future__ import annotations

import re

from ..servers import CPU_MAKES

# topo.cc:748-751: family 6 and model id >= 0xCF: Emerald Rapids (ERP); >= 0x8F: Sapphire Rapids
# (SRP); >= 0x55: Skylake (SKL); any other Intel family or model: Broadwell (BDW), NCCL's default
_INTEL_MODELS = ((0xCF, "emerald_rapids"), (0x8F, "sapphire_rapids"), (0x55, "skylake"))
# what strtol(str, NULL, 0) reads (xml.h:115): hex after 0x, octal after a leading 0, else decimal
# (at most 9 digits here: family and model ids are a byte or two)
_STRTOL = re.compile(r"\s*(?:0[xX](?P<hex>[0-9a-fA-F]{1,8})|(?P<oct>0[0-7]{0,9})|(?P<dec>[1-9][0-9]{0,8}))\s*")


def cpu_kind(cpus, notes) -> str:
    """The host's kind for NCCL's tuner from the ``<cpu>`` nodes' ``arch`` and ``vendor``
    (NCCL's topo.cc reads the same attributes, kvDictCpuArch / kvDictCpuVendor, lines 704-711):
    ``"arm"``, ``"amd"`` or ``"intel"``; a file that names neither is taken as Intel, said in
    ``notes``."""
    kinds = set()
    for a in cpus:
        arch, vendor = str(a.get("arch") or "").lower(), str(a.get("vendor") or "")
        kinds.add("arm" if arch in ("arm64", "aarch64") else "amd" if vendor == "AuthenticAMD"
                  else "intel" if vendor == "GenuineIntel" else None)
    kinds.discard(None)
    if len(kinds) != 1:
        notes.append("host CPU vendor " + ("not in the file" if not kinds else f"mixed ({sorted(kinds)})")
                     + ": taken as Intel")
        return "intel"
    return kinds.pop()


def _id(where, cpu, attr) -> int | None:
    """The ``familyid`` / ``modelid`` of a ``<cpu>`` node as strtol reads it, None when absent."""
    text = cpu.get(attr)
    if text is None:
        return None
    match = _STRTOL.fullmatch(str(text))
    if match is None:
        loc = f'<cpu numaid="{cpu["numaid"]}">' if cpu.get("numaid") is not None else f"<cpu> #{cpu['socket'] + 1}"
        shown = repr(str(text))
        raise ValueError(f"{where}: {loc}: {attr} must be a non-negative integer (decimal, or hex "
                         f"after 0x, as NCCL writes it), got {shown if len(shown) <= 42 else shown[:40] + '...'}")
    if match["hex"] is not None:
        return int(match["hex"], 16)
    return int(match["oct"], 8) if match["oct"] is not None else int(match["dec"])


def intel_make(family: int, model: int) -> str:
    """NCCL's make of an Intel CPU of CPUID ``family`` and ``model`` (topo.cc:748-751).

    >>> intel_make(6, 143), intel_make(6, 0xCF), intel_make(6, 0x6A), intel_make(6, 0x4F), intel_make(15, 0xCF)
    ('sapphire_rapids', 'emerald_rapids', 'skylake', 'broadwell', 'broadwell')
    """
    if family == 6:
        for least, make in _INTEL_MODELS:
            if model >= least:
                return make
    return "broadwell"


def cpu_make(where, cpus, kind: str, notes) -> str | None:
    """The Intel host's make (one of ``CPU_MAKES["intel"]``) from its ``<cpu>`` nodes'
    ``familyid`` and ``modelid`` (which are replaced on the nodes by the integers read); None for
    another kind, or where the file gives no ids (said in ``notes``: NCCL would read the host
    it runs on). Sockets of different makes: the oldest (the slowest socket link to NCCL, which
    prices each direction by the sending socket's make, topo.cc:278), said in ``notes``."""
    ids = []
    for cpu in cpus:
        family, model = _id(where, cpu, "familyid"), _id(where, cpu, "modelid")
        cpu.update({k: v for k, v in (("familyid", family), ("modelid", model)) if v is not None})
        intel = str(cpu.get("vendor") or "") == "GenuineIntel" and str(cpu.get("arch") or "x86_64").lower() == "x86_64"
        if intel:
            ids.append((family, model))
    if kind != "intel" or not ids:
        return None
    if any(None in pair for pair in ids):
        notes.append("Intel CPU make not in the file (no familyid / modelid on a <cpu>): not known "
                     "(NCCL's default, Broadwell's socket link)")
        return None
    makes = {intel_make(f, m) for f, m in ids}
    order = CPU_MAKES["intel"]
    make = min(makes, key=order.index)
    read = ", ".join(f"familyid {f} modelid {m} ({m:#x})" for f, m in sorted(set(ids)))
    mixed = f"; sockets of makes {sorted(makes, key=order.index)}: the oldest taken" if len(makes) > 1 else ""
    notes.append(f"CPU make {make} ({read}: NCCL's topo.cc rules){mixed}")
    return make
