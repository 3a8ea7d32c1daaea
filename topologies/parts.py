"""The parts catalogue of :func:`topologies.bill`: switches, NICs, transceivers, cables and
NVSwitch trays with their price (USD) and power (W), every figure naming where it comes from;
:func:`register_part` adds a user's own, and the bill's automatic choices (a switch by family,
rate and ports; a NIC or transceiver by rate) pick among all registered parts.

>>> get_part("quantum2_qm9700").ports, "quantum2_qm9700" in part_names()
(64, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .links import Gbit

__all__ = ["CATALOGUE_DATE", "Part", "get_part", "largest_switch", "part_names", "register_part"]

CATALOGUE_DATE = "2026-12-04"


@dataclass(frozen=True)
class Part:
    """One orderable part.

    Parameters
    ----------
    name : str
        Catalogue key.
    category : str
        ``"switch"``, ``"nic"``, ``"transceiver"``, ``"cable"``, ``"nvswitch_tray"`` or
        ``"server"`` (a GPU server, never on a network bill: for cost per token).
    price : float
        USD per unit (>= 0).
    power : float
        Watts per unit (>= 0), typical draw.
    price_source, power_source : str
        Where each figure comes from: the address, the source's date, the date read and the
        figure as published ("a-b" ranges: the midpoint is used); "estimate (date): <basis>"
        where no public figure was found (``price_estimate`` / ``power_estimate`` true).
    ports : int
        Switch ports at ``port_rate`` (a switch), links carried (a transceiver or cable), 0 else.
    port_rate : float
        Bytes/s of one port, one direction.
    family : str
        Technology family of the links it serves (``"infiniband"``, ``"ethernet"``, ...).

    Examples
    --------
    >>> get_part("quantum2_qm9700").ports, get_part("quantum2_qm9700").port_rate / Gbit
    (64, 400.0)
    """

    name: str
    category: str
    price: float
    power: float
    price_source: str
    power_source: str
    ports: int = 0
    port_rate: float = 0.0
    family: str = ""

    def __post_init__(self):
        for key in ("price", "power"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"Part {self.name!r}: {key} must be a finite number >= 0, got {value!r}")
        if not self.price_source or not self.power_source:
            raise ValueError(f"Part {self.name!r}: price_source and power_source must say where the "
                             "figures come from (a document and date, or 'estimate: <basis>')")

    @property
    def price_estimate(self) -> bool:
        return self.price_source.startswith("estimate")

    @property
    def power_estimate(self) -> bool:
        return self.power_source.startswith("estimate")

    @property
    def estimated(self) -> bool:
        """True when the price or the power is an estimate rather than a published figure."""
        return self.price_estimate or self.power_estimate


_EST_PRICE = (f"estimate ({CATALOGUE_DATE}): no vendor list price is published; order of magnitude "
              "of reseller quotes for this class of part; pass prices= with your quote")
_H100_COST_TABLE = ("https://docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc "
                    "(H100 cluster cost table, 'Prices and projections were all done as per: Aug 2024'; "
                    "read 2026-12-04)")
_QM9700_PRICE = (f"{_H100_COST_TABLE}: \"64 Port 400Gbps Infiniband Switch, is assumed to $36k. This is based "
                 "on the FS.com varient\" (reseller price; NVIDIA's own 'approx 50k')")
#: ~USD per 800G twin-port single-mode DR8 OSFP: "800G OSFP-DR8: $1,100-1,400 (volume pricing for
#: 1000+ units)" (luxoptx.com, "800G Optical Module Cost Analysis: TCO Optimization for AI Data
#: Centers", undated, read 2026-12-04); the midpoint is used
_DR8_PRICE = ("https://luxoptx.com/blogs/news/800g-optical-module-cost-analysis-tco-optimization-for-ai-data-centers "
              "(undated; read 2026-12-04): \"800G OSFP-DR8: $1,100-1,400 (volume pricing for 1000+ units)\"; "
              "midpoint 1,250")
#: ~USD per 400G OSFP module: "OSFP transceivers ($500-1000 each)" (infra-economics.com, a cost
#: breakdown of a 10,000-GPU H100 InfiniBand facility, undated, read 2026-12-04); midpoint used
_OSFP400_PRICE = ("https://www.infra-economics.com/ (undated; read 2026-12-04): \"OSFP transceivers "
                  "($500-1000 each)\"; midpoint 750")
#: ~USD per BlueField-3 card: "Street price (early-to-mid 2026) is roughly $2,000-3,000 per card
#: depending on SKU and channel" (yobitel.com knowledge base, read 2026-12-04); midpoint used
_BF3_PRICE = ("https://yobitel.com/knowledge-base/bluefield-3-dpu (early-to-mid 2026; read 2026-12-04): "
              "\"Street price ... is roughly $2,000-3,000 per card\"; midpoint 2,500")
_TWIN_PRICE = ("https://ascentoptics.com/blog/osfp-nvidia-infiniband-ndr/ (2026-05-14; read 2026-12-04): "
               "\"128 NVIDIA DGX H100 servers ... At NVIDIA list pricing, the transceivers alone exceeded "
               "$1.5 million\"; / 2,048 twin-port modules in that fabric = 732 (a derived lower bound)")
_EST_SWITCH_POWER = (f"estimate ({CATALOGUE_DATE}): a 51.2 Tb/s single-ASIC 1U system without optics "
                     "(optics are billed as transceivers); pass power= with the datasheet figure")

_PARTS: dict[str, Part] = {}


def _add(part: Part) -> None:
    _PARTS[part.name] = part


# --- switches ------------------------------------------------------------------------
# Quantum-2 QM9700: 64 NDR ports (32 twin-port OSFP cages), QM97xx user manual "Interfaces"
# (docs.nvidia.com/networking/display/QM97X0PUB, read 2026-12-04).
# Price: a public cost table of H100 clusters (Aug 2024), row 18: "64 Port 400Gbps Infiniband
# Switch, is assumed to $36k. This is based on the FS.com varient which is cheaper then the
# nvidia official varient (approx 50k)"; a second table (infra-economics.com, undated) gives
# "QM9700 switches @ $35k avg". Reseller price, not NVIDIA's list price (~50k by the same table).
_add(Part("quantum2_qm9700", "switch", 36000.0, 750.0, _QM9700_PRICE, _EST_SWITCH_POWER,
          ports=64, port_rate=400 * Gbit, family="infiniband"))
# Quantum QM8700: 40 HDR ports (NVIDIA QM8700 user manual).
_add(Part("quantum_qm8700", "switch", 15000.0, 450.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 16 Tb/s 1U HDR system without optics",
          ports=40, port_rate=200 * Gbit, family="infiniband"))
# Quantum-X800 Q3400: 144 XDR 800G ports (NVIDIA Quantum-X800 announcement, GTC 2024).
_add(Part("quantum_x800_q3400", "switch", 120000.0, 3000.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 115 Tb/s multi-ASIC system without optics",
          ports=144, port_rate=800 * Gbit, family="infiniband"))
# Spectrum-4 SN5600: 64 x 800GbE or 128 x 400GbE (SN5000 user manual, "Data Interfaces",
# docs.nvidia.com/networking/display/sn5000, read 2026-12-04); billed here at 400G.
_add(Part("spectrum4_sn5600", "switch", 40000.0, 1000.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 51.2 Tb/s 2U Ethernet system without optics",
          ports=128, port_rate=400 * Gbit, family="ethernet"))
# Spectrum-4 SN5400: 64 x 400GbE (SN5000 user manual, "Data Interfaces"): 25.6 Tb/s, so its
# ports run at 400G (the bill picks it for 400G Ethernet switches of up to 64 ports, the
# 128-port SN5600 beyond).
_add(Part("spectrum4_sn5400", "switch", 30000.0, 750.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 25.6 Tb/s 2U Ethernet system without optics",
          ports=64, port_rate=400 * Gbit, family="ethernet"))
# A 100GbE 64-port switch (Spectrum-3 SN4600C class, 64 x 100GbE; mlxsw release notes list).
_add(Part("spectrum3_sn4600c", "switch", 15000.0, 400.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 12.8 Tb/s 2U Ethernet system without optics",
          ports=64, port_rate=100 * Gbit, family="ethernet"))
# --- NICs ----------------------------------------------------------------------------
_add(Part("connectx7_400g", "nic", 2200.0, 25.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): single-port 400G PCIe Gen5 adapter without its transceiver",
          ports=1, port_rate=400 * Gbit))
_add(Part("connectx6_200g", "nic", 1500.0, 20.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): single-port 200G PCIe Gen4 adapter without its transceiver",
          ports=1, port_rate=200 * Gbit))
_add(Part("connectx8_800g", "nic", 3000.0, 30.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): 800G PCIe Gen6 adapter without its transceiver",
          ports=1, port_rate=800 * Gbit))
# BlueField-3 DPU with one 400G port (InfiniBand NDR or 400GbE); its power is an estimate.
# Chosen only by name (nic_part="bluefield3_400g"): the automatic choice keeps the ConnectX-7.
_add(Part("bluefield3_400g", "nic", 2500.0, 75.0, _BF3_PRICE,
          f"estimate ({CATALOGUE_DATE}): a 400G DPU with its 16 Arm cores under load",
          ports=1, port_rate=400 * Gbit))
_add(Part("nic_100g", "nic", 800.0, 15.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): 100GbE adapter without its transceiver",
          ports=1, port_rate=100 * Gbit))
# --- transceivers ----------------------------------------------------------------------
# Twin-port 800G OSFP (2 x 400G links): 17 W - "Twin port OSFP single mode transceivers remain
# at 17 Watts for all configurations" (NVIDIA MMS4X00-NM product specification, "Application
# Overview"); the QM97xx cages are Class 8 (17 W) (QM97xx user manual, "Interfaces"). Read 2026-12-04.
# Price: "128 NVIDIA DGX H100 servers (1,024 H100 GPUs) interconnected via NVIDIA Quantum-2
# InfiniBand NDR switches. At NVIDIA list pricing, the transceivers alone exceeded $1.5 million"
# (ascentoptics.com, "OSFP NVIDIA InfiniBand: ConnectX-7 & Quantum-2 Guide", 2026-05-14); that
# fabric has 2,048 twin-port modules (tests/topologies/test_bill.py counts them: 512 + 512 + 1,024), so a
# module costs more than 1.5e6 / 2048 = 732 USD at list: a derived lower bound.
_add(Part("osfp_800g_twin", "transceiver", 732.0, 17.0, _TWIN_PRICE,
          "NVIDIA MMS4X00-NM / QM97xx user manual: twin-port OSFP at 17 W (read 2026-12-04)",
          ports=2, port_rate=400 * Gbit))
# Single-mode twin-port DR8 (500 m): 17 W, "remain at 17 Watts for all configurations"
# (NVIDIA MMS4X00-NM product specification, "Application Overview", read 2026-12-04).
_add(Part("osfp_800g_twin_dr", "transceiver", 1250.0, 17.0, _DR8_PRICE,
          "NVIDIA MMS4X00-NM specification: twin-port single-mode OSFP at 17 W (read 2026-12-04)",
          ports=2, port_rate=400 * Gbit))
# Single-mode 400G OSFP DR4 on a ConnectX-7: 9 W (NVIDIA MMS4X00-NS400 specification, "Overview").
_add(Part("osfp_400g_dr", "transceiver", 1000.0, 9.0, _EST_PRICE,
          "NVIDIA MMS4X00-NS400 specification: 9 W at 400G (read 2026-12-04)",
          ports=1, port_rate=400 * Gbit))
# Single-port 400G OSFP on a ConnectX-7: 8 W typical, 9 W max in 400G mode (NVIDIA
# MMA4Z00-NS400-T product specification, "Connectivity Scenarios", read 2026-12-04).
_add(Part("osfp_400g", "transceiver", 750.0, 8.0, _OSFP400_PRICE,
          "NVIDIA MMA4Z00-NS400-T specification: 8 W typical at 400G (read 2026-12-04)",
          ports=1, port_rate=400 * Gbit))
# Generic transceivers for the other rates (one link each).
for _rate, _price, _w in ((200, 500.0, 6.0), (800, 1500.0, 17.0), (100, 150.0, 3.5)):
    _add(Part(f"optics_{_rate}g", "transceiver", _price, _w, _EST_PRICE,
              f"estimate ({CATALOGUE_DATE}): one {_rate}G pluggable optical module",
              ports=1, port_rate=_rate * Gbit))
# --- cables ----------------------------------------------------------------------------
# Passive copper: "near zero power" (NVIDIA MCP7Y00 DAC specification, "Introduction");
# 0.1 W max (MCP7Y70 specification, "Specifications"). Read 2026-12-04.
_add(Part("dac", "cable", 150.0, 0.1, _EST_PRICE,
          "NVIDIA MCP7Y70 DAC specification: 0.1 W max per cable end set (read 2026-12-04)", ports=1))
_add(Part("fiber_mpo", "cable", 100.0, 0.0, _EST_PRICE,
          "passive fibre: no power (a glass cable)", ports=1))
# --- NVSwitch trays ----------------------------------------------------------------------
# GB200 NVL72: 9 NVLink switch trays per 72-GPU rack (NVIDIA GB200 NVL72 specification).
_add(Part("nvlink_switch_tray", "nvswitch_tray", 40000.0, 1000.0, _EST_PRICE,
          f"estimate ({CATALOGUE_DATE}): one tray of 2 NVLink 5 switch chips, liquid cooled",
          ports=0))

# --- GPU servers (not on a network bill; for cost per token with flowsolver.design) --------
# An 8 x H100 SXM server with its 8 x 400G NICs: "H100 price is assumed to be of USD $310k. This
# includes the infiniband cards. For full 3.2Tbps interconnect (8 x 400Gbps)", citing a Thinkmate
# quote of USD 317k (the Aug 2024 cost table above). Power: NVIDIA DGX H100 datasheet, "System
# power usage ~10.2kW max".
_add(Part("hgx_h100_server", "server", 310000.0, 10200.0,
          f"{_H100_COST_TABLE}: \"H100 price is assumed to be of USD $310k. This includes the infiniband "
          "cards\" (per 8-GPU server)",
          "NVIDIA DGX H100 datasheet: 'System power usage ~10.2kW max' (read 2026-12-04)",
          ports=8))

_BUILTIN = frozenset(_PARTS)


def part_names() -> list[str]:
    """Catalogue keys, sorted.

    >>> "osfp_800g_twin" in part_names()
    True
    """
    return sorted(_PARTS)


def get_part(name: "str | Part") -> Part:
    """A catalogue part by name (or a Part passed through).

    >>> get_part("dac").category
    'cable'
    """
    if isinstance(name, Part):
        return name
    try:
        return _PARTS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown part {name!r}; known: {', '.join(part_names())} "
                         "(or register_part one)") from None


def register_part(part: Part, *, overwrite: bool = False) -> Part:
    """Add a user part (a switch, NIC, transceiver ...) so that bills can use it by name.

    >>> p = register_part(Part("doc_switch", "switch", 1.0, 1.0, "my quote 2026-12", "my lab",
    ...                        ports=32, port_rate=100 * Gbit, family="ethernet"), overwrite=True)
    >>> get_part("doc_switch").ports
    32
    >>> unregister_part("doc_switch").name          # bills choose from the built-in parts again
    'doc_switch'
    """
    if not isinstance(part, Part):
        raise ValueError(f"part must be a Part, got {type(part).__name__}")
    if part.name in _BUILTIN:
        raise ValueError(f"part {part.name!r} is built in; register it under another name")
    if part.name in _PARTS and not overwrite:
        raise ValueError(f"part {part.name!r} is already registered; pass overwrite=True")
    _PARTS[part.name] = part
    _RATE_PART.clear()
    return part


def unregister_part(name: str) -> Part:
    """Remove a part :func:`register_part` added (a bill no longer chooses it, a name no longer
    finds it); returns it. Built-in parts stay.

    >>> _ = register_part(Part("doc_nic", "nic", 1.0, 1.0, "my quote 2026-12", "my lab"), overwrite=True)
    >>> unregister_part("doc_nic").price, "doc_nic" in part_names()
    (1.0, False)
    """
    if name in _BUILTIN:
        raise ValueError(f"part {name!r} is built in: only parts added with register_part can be removed")
    if name not in _PARTS:
        registered = sorted(set(_PARTS) - _BUILTIN)
        raise ValueError(f"part {name!r} is not registered; registered: {', '.join(registered) or 'none'}")
    _RATE_PART.clear()
    return _PARTS.pop(name)


def _switch_part(family: str, rate: float, ports: int) -> Part:
    """The catalogue switch for ``ports`` ports of ``rate`` bytes/s in ``family``: the slowest
    (then cheapest) whose ports suffice, else the one with the most ports."""
    fits = _switches(family, rate)
    if not fits:
        raise ValueError(f"no catalogue switch for {family} links of {rate / Gbit:g} Gb/s; "
                         "register_part one or pass switch_part=")
    enough = [p for p in fits if p.ports >= ports]
    if enough:
        return min(enough, key=lambda p: (p.port_rate, p.price, p.name))
    return largest_switch(family, rate)


def _switches(family: str, rate: float) -> list:
    """The catalogue switches of ``family`` (RoCE's are Ethernet's) with ports of at least ``rate``."""
    fam = "ethernet" if family in ("roce", "ethernet") else family
    return [p for p in _PARTS.values() if p.category == "switch" and p.family == fam and p.port_rate >= rate]


def largest_switch(family: str, rate: float) -> Part | None:
    """The catalogue switch of ``family`` with ports of at least ``rate`` bytes/s that has the
    most ports (what :func:`_switch_part` falls back to), or None where there is none: a
    logical switch of more ports is no one box.

    >>> largest_switch("infiniband", 400 * Gbit).ports
    144
    """
    return max(_switches(family, rate), key=lambda p: (p.ports, -p.price), default=None)


_RATE_PART: dict = {}     # (category, rate) -> part; emptied when a part is registered


def _rate_part(category: str, rate: float) -> Part:
    """The slowest part of ``category`` whose port rate is at least ``rate``."""
    key = (category, rate)
    if key not in _RATE_PART:
        _RATE_PART[key] = _find_rate_part(category, rate)
    return _RATE_PART[key]


def _find_rate_part(category: str, rate: float) -> Part:
    best = None
    for part in _PARTS.values():
        if part.category == category and part.port_rate >= rate and (
                best is None or part.port_rate < best.port_rate or
                (part.port_rate == best.port_rate and part.ports < best.ports)):
            best = part
    if best is None:
        raise ValueError(f"no catalogue {category} for {rate / Gbit:g} Gb/s; register_part one")
    return best
