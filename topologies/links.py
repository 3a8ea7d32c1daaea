"""Catalogue of link technologies: per-direction bandwidth (bytes/s) and latency (s).

Every figure is one direction of a full-duplex link. Bits are converted to bytes here,
once: "400G" InfiniBand NDR is 400 Gb/s = 50e9 bytes/s per direction.

``latency`` is the one-way latency a message pays to cross the link, including the
forwarding latency of the device at its far end (switch, NVSwitch, PCIe switch); software
overhead (NCCL's per-step and per-hop constants) is *not* included here and belongs to
the collectives layer.

``efficiency`` is the measured fraction of the raw rate that a long transfer achieves
(protocol headers, flow control, NCCL's own bandwidth model), or ``None`` where no
measured figure is known; ``effective_bandwidth`` applies it (1.0 when unknown).
Graph edges carry the *raw* rate; applying the efficiency is the collectives layer's
calibration hook, done once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "LinkTech",
    "get_link",
    "register_link",
    "link_names",
    "GB",
    "Gbit",
]

#: one gigabyte (10**9 bytes), the unit vendors use for NVLink and PCIe rates
GB = 1e9
#: one gigabit per second expressed in bytes/s (network line rates are quoted in bits)
Gbit = 1e9 / 8


@dataclass(frozen=True)
class LinkTech:
    """One link technology.

    Parameters
    ----------
    name : str
        Catalogue key, e.g. ``"ib_ndr"``.
    bandwidth : float
        Raw rate of one direction, bytes/s (> 0).
    latency : float
        One-way latency of one traversal, seconds (>= 0).
    efficiency : float or None
        Measured fraction of ``bandwidth`` reached by long transfers, in (0, 1], or None.
    family : str
        ``"nvlink"``, ``"pcie"``, ``"infiniband"``, ``"roce"``, ``"ethernet"``, ``"cpu"`` or
        any label of the user's.
    source : str
        Where the figures come from.
    transport : str or None
        The network transport NCCL drives this NIC technology with (a name in
        :mod:`topologies.transports`: the latency its plugin reports, the protocols and NVLS
        its shipped settings leave on), or None: NCCL's own verbs / socket transport.

    Examples
    --------
    >>> ndr = get_link("ib_ndr")
    >>> ndr.bandwidth          # 400 Gb/s in bytes/s
    50000000000.0
    >>> round(ndr.effective_bandwidth / 1e9, 1)
    47.0
    >>> my = LinkTech("slingshot_200g", bandwidth=200 * Gbit, latency=0.3e-6, family="ethernet")
    >>> my.bandwidth
    25000000000.0
    """

    name: str
    bandwidth: float
    latency: float
    efficiency: float | None = None
    family: str = "custom"
    source: str = ""
    transport: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"LinkTech name must be a non-empty string, got {self.name!r}")
        if not (isinstance(self.bandwidth, (int, float)) and math.isfinite(self.bandwidth)
                and self.bandwidth > 0):
            raise ValueError(
                f"LinkTech {self.name!r}: bandwidth must be a finite number > 0 bytes/s, "
                f"got {self.bandwidth!r}")
        if not (isinstance(self.latency, (int, float)) and math.isfinite(self.latency)
                and self.latency >= 0):
            raise ValueError(
                f"LinkTech {self.name!r}: latency must be a finite number >= 0 s, "
                f"got {self.latency!r}")
        if self.efficiency is not None and not (0 < self.efficiency <= 1):
            raise ValueError(
                f"LinkTech {self.name!r}: efficiency must be in (0, 1] or None, "
                f"got {self.efficiency!r}")
        if self.transport is not None and not (isinstance(self.transport, str) and self.transport):
            raise ValueError(
                f"LinkTech {self.name!r}: transport must be a transport name or None, "
                f"got {self.transport!r}")

    @property
    def effective_bandwidth(self) -> float:
        """Bandwidth a long transfer reaches, bytes/s (raw rate x efficiency, or raw)."""
        return self.bandwidth * (1.0 if self.efficiency is None else self.efficiency)

    def scaled(self, factor: float, name: str | None = None) -> "LinkTech":
        """A copy carrying ``factor`` times the bandwidth (aggregated lanes or links).

        >>> get_link("ib_ndr").scaled(2).bandwidth / 1e9
        100.0
        """
        return LinkTech(name or f"{self.name}x{factor:g}", self.bandwidth * factor,
                        self.latency, self.efficiency, self.family, self.source, self.transport)


# --- latency figures shared by several entries (documented once) --------------------
# NCCL's tuning model (src/graph/tuning.cc, NCCL 2.30, LL protocol) charges 0.6 us per
# NVLink hop (GPU -> NVSwitch -> GPU) and 1.0 us per PCIe hop (GPU -> PCIe switch -> GPU).
# A hop is two links in our graphs, so each link carries half of it.
_NVLINK_LINK_LATENCY = 0.6e-6 / 2
_PCIE_LINK_LATENCY = 1.0e-6 / 2
# InfiniBand: NVIDIA Quantum / Quantum-2 cut-through switch port-to-port latency is quoted
# at 130 ns (HDR QM8700 datasheet) and "under 150 ns" (NDR QM9700 material); we take 150 ns
# plus 50 ns of propagation for ~10 m of cable (5 ns/m).
_IB_LINK_LATENCY = 0.20e-6
# Ethernet / RoCE: data-centre switch ASICs (Spectrum-class, Tomahawk-class) quote
# 300-800 ns port-to-port; we take 500 ns plus the same 50 ns of cable. An assumption, not a
# measurement: override it with register_link for a specific switch.
_ETH_LINK_LATENCY = 0.55e-6

_CATALOGUE: dict[str, LinkTech] = {}


def _add(tech: LinkTech) -> None:
    _CATALOGUE[tech.name] = tech


# NVLink: per-GPU aggregate of all its links, one direction.
# NVLink 3 (A100 SXM): 12 links x 25 GB/s = 300 GB/s (NVIDIA A100 datasheet, "600 GB/s"
# counts both directions). NCCL models 20 GB/s per link on SM80 (src/graph/topo.h) -> 0.8.
_add(LinkTech("nvlink3", 300 * GB, _NVLINK_LINK_LATENCY, 20.0 / 25.0, "nvlink",
              "A100 datasheet 12 x 25 GB/s; NCCL topo.h SM80_NVLINK_BW 20 GB/s per link"))
# NVLink 4 (H100 SXM): 18 links x 25 GB/s = 450 GB/s (H100 datasheet "900 GB/s" both ways).
# NCCL topo.h models 20.6 GB/s per link (18 x 20.6 = 370.8 GB/s); ring all-reduce busbw of
# ~365-370 GB/s is measured on 8 x H100 (nccl-tests issue threads) -> 20.6 / 25.
_add(LinkTech("nvlink4", 450 * GB, _NVLINK_LINK_LATENCY, 20.6 / 25.0, "nvlink",
              "H100 datasheet 18 x 25 GB/s; NCCL topo.h SM90 20.6 GB/s per link"))
# NVLink 5 (B200): 18 links x 50 GB/s = 900 GB/s (B200 datasheet "1.8 TB/s" both ways).
# NCCL topo.h models 40.1 GB/s per link on SM100 -> 40.1 / 50.
_add(LinkTech("nvlink5", 900 * GB, _NVLINK_LINK_LATENCY, 40.1 / 50.0, "nvlink",
              "B200 datasheet 18 x 50 GB/s; NCCL topo.h SM100 40.1 GB/s per link"))
# PCIe x16: 16 lanes x (16 | 32) GT/s x 128/130 encoding / 8 bits.
# PCIe 4.0 = 31.5 GB/s; NCCL topo.h PCI_BW models 24 GB/s -> 24 / 31.5.
_add(LinkTech("pcie4", 16 * 16e9 * 128 / 130 / 8, _PCIE_LINK_LATENCY, 24.0 / 31.5077, "pcie",
              "PCI-SIG 4.0: 16 GT/s x16, 128b/130b; NCCL topo.h PCI_BW 24 GB/s"))
# PCIe 5.0 = 63.0 GB/s; NCCL models a Gen5 x16 path at 48 GB/s (src/graph/topo.cc) -> 48 / 63.
_add(LinkTech("pcie5", 16 * 32e9 * 128 / 130 / 8, _PCIE_LINK_LATENCY, 48.0 / 63.0154, "pcie",
              "PCI-SIG 5.0: 32 GT/s x16, 128b/130b; NCCL topo.cc 48 GB/s for Gen5 x16"))
# InfiniBand port data rates (IBTA): HDR 200 Gb/s, NDR 400 Gb/s, XDR 800 Gb/s.
# Measured: ~24 GB/s per HDR NIC (NCCL issue threads) -> 0.96; 46-48 GB/s per NDR NIC
# (nccl-tests issue threads), we take the middle, 47 GB/s -> 0.94. XDR: no per-NIC figure is
# published (searched 2026-12-07); it carries the same IB transport and headers as NDR at twice
# the signalling rate, so it takes NDR's measured 0.94 (at the raw rate it ran 6 % ahead of
# NDR's loss, a bias in design's XDR candidates).
_add(LinkTech("ib_hdr", 200 * Gbit, _IB_LINK_LATENCY, 24.0 / 25.0, "infiniband",
              "IBTA HDR 200 Gb/s; ~24 GB/s measured per NIC (NCCL issue threads)"))
_add(LinkTech("ib_ndr", 400 * Gbit, _IB_LINK_LATENCY, 47.0 / 50.0, "infiniband",
              "IBTA NDR 400 Gb/s; 46-48 GB/s measured per NIC (nccl-tests issue threads)"))
_add(LinkTech("ib_xdr", 800 * Gbit, _IB_LINK_LATENCY, 47.0 / 50.0, "infiniband",
              "IBTA XDR 800 Gb/s; NDR's measured 0.94 (the same transport and headers; no XDR figure published)"))
# RoCE v2 over Ethernet (IEEE 802.3 200GBASE / 400GBASE: the MAC's data rate). NCCL drives it
# with the same IB verbs transport as InfiniBand, so it loses what NCCL loses on NDR (the 47 of 50
# GB/s above) less InfiniBand's own headers, plus RoCE's larger ones: a 4096-byte payload carries
# 26 bytes on InfiniBand (LRH 8, BTH 12, ICRC 4, VCRC 2; IBTA vol. 1 ch. 5) and 82 on RoCE v2
# (preamble + SFD 8, inter-frame gap 12, Ethernet header 14, FCS 4 (IEEE 802.3 cl. 3-4), IPv4 20,
# UDP 8, BTH 12, ICRC 4; IBTA RoCEv2 annex A17): 47/50 x (4096/4178) / (4096/4122) = 0.927 of the
# line rate (45.4 of 50 GB/s at 400G). No per-NIC RoCE figure is published; the corpus's RoCE
# sources (OCI, Spectrum-X, GCP A3 Ultra / A4) are mostly held by PCIe or NVLink, not the NIC.
ROCE_EFFICIENCY = 47.0 / 50.0 * (4096 / 4178) / (4096 / 4122)
_add(LinkTech("roce_200g", 200 * Gbit, _ETH_LINK_LATENCY, ROCE_EFFICIENCY, "roce",
              "IEEE 802.3 200 Gb/s Ethernet carrying RoCE v2; NDR's measured 0.94 less RoCE's larger headers"))
_add(LinkTech("roce_400g", 400 * Gbit, _ETH_LINK_LATENCY, ROCE_EFFICIENCY, "roce",
              "IEEE 802.3 400 Gb/s Ethernet carrying RoCE v2 (Llama 3 fabric); NDR's measured 0.94 less RoCE's "
              "larger headers"))
# Plain Ethernet (TCP/IP, no RDMA) at IEEE 802.3 line rates.
# No per-NIC NCCL figure is published for either NCCL's socket transport or a RoCE NIC at 100 Gb/s
# (the corpus maps OCI's 100 Gb/s RoCE ports here); taken no faster than RoCE over the same line,
# ROCE_EFFICIENCY (TCP/IPv4 on the default 1500-byte MTU carries 1448 of 1538 bytes on the wire,
# more overhead than RoCE's; host-staged sockets are slower still: not modelled, an upper bound).
_add(LinkTech("eth_100g", 100 * Gbit, _ETH_LINK_LATENCY, ROCE_EFFICIENCY, "ethernet",
              "IEEE 802.3 100 Gb/s Ethernet; no faster than RoCE over it"))
_add(LinkTech("eth_200g", 200 * Gbit, _ETH_LINK_LATENCY, ROCE_EFFICIENCY, "ethernet",
              "IEEE 802.3 200 Gb/s Ethernet; no faster than RoCE over it"))
_add(LinkTech("eth_400g", 400 * Gbit, _ETH_LINK_LATENCY, ROCE_EFFICIENCY, "ethernet",
              "IEEE 802.3 400 Gb/s Ethernet; no faster than RoCE over it"))
# Cloud and HPC NIC technologies with a transport of their own (topologies/transports.py: the
# latency NCCL's plugin reports, the protocols and NVLS its shipped settings leave on). Rates
# are the vendors' per-card figures; no per-NIC efficiency is published for any of them, so
# none is set (the raw rate).
# AWS EFA: p4d / p5 carry 100 Gb/s EFA cards (EC2 user guide, "network cards": p5.48xlarge 32 x
# 100 Gb/s), p5en 200 Gb/s EFAv3 cards (16 x 200), p6-b200 400 Gb/s EFAv4 cards (8 x 400). The
# aws-ofi-nccl plugin reports 75 us on p4d / p5 and 35 us on p5en / p6 (aws_ofi_p5 / aws_ofi_p5en);
# p4d's cards are EFA's first generation (no RDMA write: the plugin's send / receive protocol, a
# network hop three times p5's; topologies/transports.py), its own technology here.
_add(LinkTech("efa_100g", 100 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "AWS EFA v2 100 Gb/s network card (p5, p5e); aws-ofi-nccl reports 75 us, a hop costs 22 us",
              "aws_ofi_p5"))
_add(LinkTech("efa1_100g", 100 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "AWS EFA (first generation) 100 Gb/s network card (p4d, p4de); aws-ofi-nccl reports 75 us",
              "aws_ofi_p4d"))
_add(LinkTech("efa_200g", 200 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "AWS EFAv3 200 Gb/s network card (p5en); aws-ofi-nccl reports 35 us", "aws_ofi_p5en"))
_add(LinkTech("efa_400g", 400 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "AWS EFAv4 400 Gb/s network card (p6-b200); aws-ofi-nccl reports 35 us", "aws_ofi_p5en"))
# GCP A3 Mega GPU NICs: 8 x 200 Gb/s with GPUDirect-TCPXO (GCP "GPU machine types", A3 Mega),
# run with GCP's Simple profile (gcp_tcpxo).
_add(LinkTech("tcpxo_200g", 200 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "GCP A3 Mega 200 Gb/s GPU NIC, GPUDirect-TCPXO", "gcp_tcpxo"))
# HPE Slingshot 11 (Cassini NIC, 200 Gb/s; HPE Slingshot documentation) through aws-ofi-nccl's
# CXI provider, with the CSCS Alps container hook's NCCL settings (alps_ofi_cxi).
_add(LinkTech("slingshot_200g", 200 * Gbit, _ETH_LINK_LATENCY, None, "ethernet",
              "HPE Slingshot 11 Cassini 200 Gb/s NIC, aws-ofi-nccl CXI provider (Alps settings)", "alps_ofi_cxi"))
# CPU socket-to-socket link of a two-socket host (used by the PCIe-only server):
# Intel UPI 2.0 at 16 GT/s carries 32 GB/s per direction per link (UPI 1.0 at 10.4 GT/s is
# 20.8 GB/s, Intel Xeon Scalable specs; scaled by the transfer rate); we take the three
# links of a common two-socket board. Latency: ~100 ns socket hop, an assumption.
_add(LinkTech("upi2x3", 3 * 32 * GB, 0.1e-6, None, "cpu",
              "Intel UPI 2.0, 16 GT/s, 32 GB/s per link, 3 links between two sockets"))

_BUILTIN = frozenset(_CATALOGUE)


def link_names() -> list[str]:
    """Names of every registered link technology, sorted.

    >>> "ib_ndr" in link_names()
    True
    """
    return sorted(_CATALOGUE)


def get_link(link: "str | LinkTech") -> LinkTech:
    """Look a technology up by name, or pass a :class:`LinkTech` through.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the known ones.

    Examples
    --------
    >>> get_link("nvlink4").bandwidth / 1e9     # GB/s, one direction, per GPU
    450.0
    >>> get_link("ib_ndr") is get_link(get_link("ib_ndr"))
    True
    """
    if isinstance(link, LinkTech):
        return link
    if isinstance(link, str):
        try:
            return _CATALOGUE[link]
        except KeyError:
            raise ValueError(
                f"unknown link technology {link!r}; known: {', '.join(link_names())} "
                f"(or pass a LinkTech, or register_link one)") from None
    raise ValueError(f"link must be a catalogue name or a LinkTech, got {type(link).__name__}")


def register_link(tech: LinkTech, *, overwrite: bool = False) -> LinkTech:
    """Add a user technology to the catalogue so it can be used by name.

    Built-in entries cannot be replaced; a user entry can with ``overwrite=True``.

    >>> t = register_link(LinkTech("doc_800g", 800 * Gbit, 0.2e-6), overwrite=True)
    >>> get_link("doc_800g").bandwidth
    100000000000.0
    """
    if not isinstance(tech, LinkTech):
        raise ValueError(f"tech must be a LinkTech, got {type(tech).__name__}")
    if tech.name in _BUILTIN:
        raise ValueError(f"link technology {tech.name!r} is built in and cannot be replaced; "
                         "register it under another name")
    if tech.name in _CATALOGUE and not overwrite:
        raise ValueError(f"link technology {tech.name!r} is already registered; "
                         "pass overwrite=True to replace it")
    _CATALOGUE[tech.name] = tech
    return tech
