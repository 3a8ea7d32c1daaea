"""Catalogue of network transports: how NCCL drives a NIC technology (units: seconds).

A link technology (:mod:`.links`) says how fast a cable is; its *transport* says what NCCL's
network plugin for it tells NCCL and what NCCL settings the platform ships with it:

* ``net_latency``: the latency (s) the plugin reports to NCCL (``ncclNetProperties_t.latency``).
  NCCL adds it to every network hop of its latency model, twice for the Simple protocol
  (the flush; NCCL 2.30 ``src/graph/tuning.cc``: ``interLat = hwLat[NET] + latencyInter``,
  ``if (p == SIMPLE) interLat += latencyInter``), so it is part of what NCCL *chooses* by.
  Nothing in NCCL waits for it: it is a number the plugin tells the tuner.
* ``hop_latency``: what a network hop *costs* beyond NCCL's own network constants (s; the same
  per hop, twice for Simple), measured on the platform; None where no measurement separates it
  from the reported figure, which then stands for it. aws-ofi-nccl reports 75 us on p4d and on
  p5 alike, a figure chosen for the tuner's choices; the measured floors of a 2 x 8 all-reduce
  are ~175 us on p4d and ~70 us on p5 (below).
* ``protocols``: the protocols the transport's recommended NCCL environment leaves on
  (``NCCL_PROTO``);
* ``nvls``: whether that environment leaves NVLS on (``NCCL_NVLS_ENABLE``): off, no NVLS
  inside a node and no NVLSTree across nodes.
* ``rendezvous_above`` / ``rendezvous_cost``: a transport whose messages above a size move by
  a *rendezvous*, the payload pulled from the sender by a Get once the receiver has matched the
  message's header, takes a network round trip more for each such message than one written
  straight into a buffer the receiver posted (NCCL's InfiniBand verbs: an RDMA write after the
  receiver's clear-to-send). NCCL's kernels wait for each step's message, so a chunk step of a
  ring or tree across nodes whose message is larger than ``rendezvous_above`` (bytes) takes
  ``rendezvous_cost`` (s) more (:func:`flowsolver.collectives._pipeline.pipeline_time`). NCCL's
  tuner does not know of it: it chooses as before. None (the default): no rendezvous.

The latencies apply to communicators that cross nodes; the NCCL settings (``protocols``, ``nvls``)
are the job's environment and apply to every communicator, one node's too. A link technology without a transport uses :data:`DEFAULT_TRANSPORT`
(NCCL's own InfiniBand / RoCE verbs and socket transports, which report no latency and
change no setting).

>>> get_transport("aws_ofi_p5").net_latency * 1e6
75.0
>>> get_transport("gcp_tcpxo").protocols, get_transport("gcp_tcpxo").nvls
(('Simple',), False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Transport", "get_transport", "register_transport", "transport_names", "DEFAULT_TRANSPORT"]

_PROTOCOLS = ("LL", "LL128", "Simple")


@dataclass(frozen=True)
class Transport:
    """One network transport: what NCCL's plugin reports and the NCCL settings shipped with it.

    Parameters
    ----------
    name : str
        Catalogue key.
    net_latency : float
        Latency the network plugin reports to NCCL, seconds (>= 0); NCCL's tuner adds it to
        each network hop (twice for Simple) when it chooses an algorithm and protocol.
    protocols : tuple of str
        NCCL protocols left on (a non-empty subset of ``("LL", "LL128", "Simple")``).
    nvls : bool
        Whether NVLS (and NVLSTree across nodes) stays on.
    source : str
        Where the figures come from.
    hop_latency : float or None
        What a network hop costs beyond NCCL's network constants, seconds (>= 0; twice for
        Simple), as measured on the platform; None (default): ``net_latency`` stands for it.
    rendezvous_above : float or None
        Messages larger than this (bytes, >= 0) go by the transport's rendezvous (a Get of the
        payload once the header is matched); None (default): none does.
    rendezvous_cost : float
        What a rendezvous message takes beyond a message written straight into the
        receiver's buffer, seconds (>= 0): the Get's network round trip.

    Examples
    --------
    >>> t = Transport("my_plugin", net_latency=20e-6, protocols=("LL", "Simple"))
    >>> round(t.net_latency * 1e6), t.nvls, round(t.hop_cost * 1e6)
    (20, True, 20)
    >>> round(Transport("told_75_costs_23", 75e-6, hop_latency=23e-6).hop_cost * 1e6)
    23
    >>> t = Transport("pulls_above_16k", rendezvous_above=16384, rendezvous_cost=5e-6)
    >>> t.rendezvous_above, round(t.rendezvous_cost * 1e6, 6)
    (16384, 5.0)
    """

    name: str
    net_latency: float = 0.0
    protocols: tuple = _PROTOCOLS
    nvls: bool = True
    source: str = ""
    hop_latency: float | None = None
    rendezvous_above: float | None = None
    rendezvous_cost: float = 0.0

    @property
    def hop_cost(self) -> float:
        """What one network hop costs beyond NCCL's constants (s): :attr:`hop_latency`, or the
        reported :attr:`net_latency` where none is measured."""
        return self.net_latency if self.hop_latency is None else self.hop_latency

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Transport name must be a non-empty string, got {self.name!r}")
        for field, value, none, unit in (("net_latency", self.net_latency, False, "s"),
                                         ("hop_latency", self.hop_latency, True, "s"),
                                         ("rendezvous_above", self.rendezvous_above, True, "bytes"),
                                         ("rendezvous_cost", self.rendezvous_cost, False, "s")):
            if none and value is None:
                continue
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and value >= 0):
                raise ValueError(f"Transport {self.name!r}: {field} must be {'None or ' if none else ''}a finite "
                                 f"number >= 0 {unit}, got {value!r}")
        protocols = tuple(self.protocols)
        if not protocols or any(p not in _PROTOCOLS for p in protocols):
            raise ValueError(f"Transport {self.name!r}: protocols must be a non-empty subset of "
                             f"{', '.join(_PROTOCOLS)}, got {self.protocols!r}")
        object.__setattr__(self, "protocols", tuple(p for p in _PROTOCOLS if p in protocols))
        if not isinstance(self.nvls, bool):
            raise ValueError(f"Transport {self.name!r}: nvls must be True or False, got {self.nvls!r}")


_CATALOGUE: dict[str, Transport] = {}


def _add(t: Transport) -> None:
    _CATALOGUE[t.name] = t


# NCCL's own transports: net_ib.cc (InfiniBand and RoCE verbs) and net_socket.cc report
# ``props->latency = 0`` ("Not set", NCCL 2.30) and change no setting: NCCL's constants as they are.
_add(Transport("nccl_builtin", 0.0, source="NCCL 2.30 src/transport/net_ib.cc, net_socket.cc: props->latency = 0"))
# AWS EFA through the aws-ofi-nccl plugin: the plugin reports a per-platform internode latency
# (src/platform-aws.cpp, aws/aws-ofi-nccl @ 5b1f6dd46217d3d05f9dcd25976c1cf89a7f8e0a, 2026):
# 75 us on p4d / p4de / p5 / p5e (EFA v1 / v2, 100 Gb/s cards), 35 us on p5en / p6-b200 /
# p6-b300 and later P instances (EFA v3 / v4, 200 and 400 Gb/s cards); "empirical testing on P5
# had shown that NCCL's internal tuner choices work better with this value". Release v1.7.3-aws
# (src/platform-aws.c @6de215f8, 2023) already reports 75 us on p5.48xlarge.
# What a hop costs is the platform's: on p4d (first-generation EFA, whose cards have no RDMA
# write: the plugin's send / receive protocol) a 2 x 8 all-reduce's floor is 175-179 us at
# 8-512 B (aws-efa-eks, NCCL 2.9.9, tree LL: 6.8 + 2 x (7 x 0.6 + 5.0 + 75) = 175.2 us), so the
# reported 75 us stands for it; on p5 (EFA v2, RDMA write) the same all-reduce's floor is 69.4 us
# (the median of the 16 out-of- and in-place times at 8 B-1 KiB of awsome-distributed-training's
# p5 log, shared/data nccl-tests/aws_2xp5_H100_allreduce_8B-16G: 6.8 + 2 x (4.2 + 5.0 + X) =
# 69.37 -> X = 22.1 us a hop), a third of the reported figure.
_add(Transport("aws_ofi_p4d", 75e-6,
               source="aws-ofi-nccl src/platform-aws.cpp @5b1f6dd: latency 75.0 us for p4d, p4de (a hop's cost: "
                      "the same, aws-efa-eks p4d floor 175-179 us)"))
_add(Transport("aws_ofi_p5", 75e-6, hop_latency=22.1e-6,
               source="aws-ofi-nccl src/platform-aws.cpp @5b1f6dd: latency 75.0 us for p5, p5e; a hop costs "
                      "22.1 us (awsome-distributed-training p5 log, 8 B-1 KiB floor 69.4 us)"))
_add(Transport("aws_ofi_p5en", 35e-6,
               source="aws-ofi-nccl src/platform-aws.cpp @5b1f6dd: latency 35.0 us for p5en, p6-b200, p6-b300"))
# GCP GPUDirect-TCPXO (A3 Mega): the FasTrak plugin reports latency 0 (tcpdirect_plugin/
# fastrak_offload/nccl_shim.cc, google/nccl-plugin-gpudirect-tcpxo @0906f674), and the
# recommended environment (tcpxo_scripts/nccl-env-profile-simple.sh @4b70770d, 2026-03) runs
# NCCL_PROTO=Simple with NCCL_NVLS_ENABLE=0 (rings and trees of Simple only).
_add(Transport("gcp_tcpxo", 0.0, ("Simple",), nvls=False,
               source="google/nccl-plugin-gpudirect-tcpxo nccl_shim.cc @0906f674 (latency 0); "
                      "tcpxo_scripts/nccl-env-profile-simple.sh @4b70770d (NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0)"))
# The same stack with GCP's earlier profile (tcpxo_scripts/nccl-env-profile.sh @8f816be3, 2025-08,
# the one dstack's A3 Mega example sources as nccl-env-profile-ll128.sh): NCCL_PROTO=Simple,LL128,
# NVLS left on (it sets NCCL_NVLSTREE_MAX_CHUNKSIZE).
_add(Transport("gcp_tcpxo_ll128", 0.0, ("LL128", "Simple"),
               source="google/nccl-plugin-gpudirect-tcpxo tcpxo_scripts/nccl-env-profile.sh @8f816be3 "
                      "(NCCL_PROTO=Simple,LL128)"))
# HPE Slingshot 11 through aws-ofi-nccl's libfabric CXI provider on CSCS Alps: no platform
# latency off AWS (aws-ofi-nccl include/nccl_ofi_param.h: NET_LATENCY "Defaults to 0, unless the
# configured platform sets a specific value"); the Alps container hook's NCCL environment sets
# NCCL_PROTO="^LL128" (eth-cscs/cscs-docs docs/clusters/daint.md and docs/running/vetnode.md
# @80abed13, 2026).
#
# Its messages: aws-ofi-nccl's send / receive protocol posts each NCCL step as one tagged send
# with no clear-to-send from the receiver (v1.6.0 has no other; later releases default to it,
# include/nccl_ofi_param.h @2daf7d30 'OFI_NCCL_PARAM(PROTOCOL, protocol, "PROTOCOL",
# PROTOCOL::SENDRECV)', the RDMA protocol being chosen by the AWS platform code), and
# libfabric's CXI provider moves a long message by rendezvous (ofiwg/libfabric man/fi_cxi.7.md
# @af8ddbe9: "Long messages are transferred using a rendezvous protocol" ... "Once the header is
# matched to a Receive operation, the remainder of the payload is pulled from the source using
# an RDMA Get operation"; "A Send with length less than or equal to FI_CXI_RDZV_THRESHOLD plus
# FI_CXI_RDZV_GET_MIN will be performed using the eager protocol"; defaults prov/cxi/include/
# cxip.h CXIP_RDZV_THRESHOLD 16384, prov/cxi/src/cxip_info.c ".rdzv_get_min = 2049"): a step's
# message above 16,384 + 2,049 bytes waits for the Get's round trip. Its cost: two network hops
# at NCCL's own figure for one (tuning.cc hwLat[NET][ring][LL], 2.7 us: the lightest protocol's,
# no fence or flush), 5.4 us. Not fitted to any curve. The Alps environment leaves the
# thresholds at their defaults (cscs-docs docs/software/communication/nccl_env_vars @1660b1ee).
CXI_RENDEZVOUS_ABOVE = 16384 + 2049
CXI_RENDEZVOUS_COST = 2 * 2.7e-6
_add(Transport("alps_ofi_cxi", 0.0, ("LL", "Simple"), rendezvous_above=CXI_RENDEZVOUS_ABOVE,
               rendezvous_cost=CXI_RENDEZVOUS_COST,
               source="aws-ofi-nccl nccl_ofi_param.h (NET_LATENCY default 0); cscs-docs daint.md @80abed13 "
                      "(NCCL_PROTO=^LL128); libfabric fi_cxi.7 (rendezvous above 16384 + 2049 bytes)"))
# The same stack with NCCL's protocols as they are (no NCCL_PROTO; ALCF Polaris, NERSC Perlmutter,
# NREL Kestrel: the CXI defaults, FI_CXI_RDZV_* unset).
_add(Transport("ofi_cxi", 0.0, rendezvous_above=CXI_RENDEZVOUS_ABOVE, rendezvous_cost=CXI_RENDEZVOUS_COST,
               source="aws-ofi-nccl over libfabric CXI, all protocols; fi_cxi.7 (rendezvous above 16384 + 2049 "
                      "bytes, a Get's round trip: 2 x NCCL's 2.7 us network hop)"))
# HPE's NCCL environment for Slingshot (ccl_env.sh; NRIS Olivia's NCCL module, the Isambard
# guide): FI_CXI_RDZV_THRESHOLD=0 FI_CXI_RDZV_GET_MIN=0 FI_CXI_RDZV_EAGER_SIZE=0 with
# FI_CXI_RDZV_PROTO=alt_read: every message but the smallest (the provider raises a threshold
# below its inject size to it, cxip_info.c) by rendezvous; taken as every message.
_add(Transport("ofi_cxi_rdzv_all", 0.0, rendezvous_above=0.0, rendezvous_cost=CXI_RENDEZVOUS_COST,
               source="HPE ccl_env.sh (FI_CXI_RDZV_THRESHOLD=0, FI_CXI_RDZV_GET_MIN=0, FI_CXI_RDZV_EAGER_SIZE=0); "
                      "fi_cxi.7"))

#: the transport of a link technology that names none: NCCL's own (no reported latency)
DEFAULT_TRANSPORT = _CATALOGUE["nccl_builtin"]
_BUILTIN = frozenset(_CATALOGUE)


def transport_names() -> list[str]:
    """Names of every registered transport, sorted.

    >>> "aws_ofi_p5en" in transport_names()
    True
    """
    return sorted(_CATALOGUE)


def get_transport(transport: "str | Transport | None") -> Transport:
    """Look a transport up by name, pass a :class:`Transport` through; None gives
    :data:`DEFAULT_TRANSPORT`.

    >>> get_transport(None).name
    'nccl_builtin'
    """
    if transport is None:
        return DEFAULT_TRANSPORT
    if isinstance(transport, Transport):
        return transport
    if isinstance(transport, str):
        try:
            return _CATALOGUE[transport]
        except KeyError:
            raise ValueError(f"unknown transport {transport!r}; known: {', '.join(transport_names())} "
                             "(or pass a Transport, or register_transport one)") from None
    raise ValueError(f"transport must be a catalogue name or a Transport, got {type(transport).__name__}")


def register_transport(transport: Transport, *, overwrite: bool = False) -> Transport:
    """Add a user transport to the catalogue so link technologies can name it.

    >>> t = register_transport(Transport("doc_plugin", 10e-6), overwrite=True)
    >>> get_transport("doc_plugin").net_latency
    1e-05
    """
    if not isinstance(transport, Transport):
        raise ValueError(f"transport must be a Transport, got {type(transport).__name__}")
    if transport.name in _BUILTIN:
        raise ValueError(f"transport {transport.name!r} is built in and cannot be replaced; register it under "
                         "another name")
    if transport.name in _CATALOGUE and not overwrite:
        raise ValueError(f"transport {transport.name!r} is already registered; pass overwrite=True to replace it")
    _CATALOGUE[transport.name] = transport
    return transport
