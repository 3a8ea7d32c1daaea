"""Component failure and degradation processes, with default rates from the Llama 3 paper.

A :class:`Component` is one kind of thing that goes wrong on a cluster and what it does to a
synchronous training job:

- ``effect="interrupt"``: the job stops (every rank waits on the failed one) and restarts
  from its last checkpoint (GPU, HBM, NIC, network switch or cable, host, software); without
  hot spares a hardware one (``hardware=True``: every kind but ``software`` unless it says
  otherwise) also waits for its repair;
- ``effect="degrade"``: a link keeps running at ``factor`` of its rate for ``duration``
  seconds (a cable that trains down to half its lanes, a flapping optic); the fabric is
  re-solved with that link slower;
- ``effect="straggler"``: a GPU computes at ``factor`` of its speed for ``duration`` seconds
  (thermal throttling, a slow clock); a synchronous step waits for it.

Rates are per unit (per GPU, per NIC, per host, per fabric link) per second; a job's rate is
the unit rate times the units it holds. Poisson processes throughout (exponential times
between events), the model behind Young's and Daly's checkpoint intervals.

Default interruption rates: Llama 3 405B pre-training, 16,384 H100 GPUs (2,048 servers of
8 GPUs and 8 NICs), 419 unexpected interruptions in a 54-day window (Dubey et al., "The
Llama 3 Herd of Models", arXiv:2407.21783, 2024, Section 3.3.4, Table 5). Table 5's rows,
grouped into the kinds below (counts in 54 days): faulty GPU 148, GPU SRAM 19, GPU system
processor 17, silent data corruption 6, GPU thermal interface and sensor 6 (-> ``gpu``,
196); GPU HBM3 memory 72 (-> ``hbm``); NIC 7 (-> ``nic``); network switch/cable 35 (->
``network``); host maintenance 32, SSD 3, power supply 3, server chassis 2, IO expansion
board 2, CPU 2, system memory 2 (-> ``host``, 46); software bug 54, dependency 2, NCCL
watchdog timeouts 7 (-> ``software``, 63). 196 + 72 + 7 + 35 + 46 + 63 = 419. The table's
percentage column does not match its counts exactly (148 of 419 is 35.3 %, printed 30.1 %);
the counts are used here. The paper gives counts per job, not per component: the GPU, HBM,
software and network rows are divided by the job's 16,384 GPUs, NIC by its 16,384 NICs,
host by its 2,048 servers. The paper does not split switches from cables, nor give rates for
degraded links or stragglers: those processes have no default rate (``rate=0``; give your
own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import networkx as nx

from .. import _checks

__all__ = ["Component", "default_components", "job_units", "replicas_per_unit", "LLAMA3_DAYS", "LLAMA3_GPUS",
           "LLAMA3_COUNTS", "LLAMA3_PLANNED", "FALCON_FAILSLOW_SECONDS", "EFFECTS", "UNITS"]

EFFECTS = ("interrupt", "degrade", "straggler")
#: what a component's rate is counted per: the job's GPUs, NICs, servers, or the fabric's links
UNITS = ("gpu", "nic", "host", "link")

# Llama 3 paper: Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783 (July 2024),
# https://arxiv.org/abs/2407.21783, Section 3.3.4, Table 5 (root causes of the unexpected
# interruptions in a 54-day window of Llama 3 405B pre-training): 466 interruptions, 47 of
# them planned, 419 unexpected, on 16,384 H100 (servers of 8 GPUs, one 400 Gbps NIC a GPU).
# Table 5's rows (component | category | count | %) as reproduced verbatim in G. Lockwood,
# "Component reliability" (https://glennklockwood.com/garden/component-reliability, read
# 2026-12): "Faulty GPU | GPU | 148 | 30.1%", "GPU HBM3 Memory | GPU | 72 | 17.2%",
# "Software Bug | Dependency | 54 | 12.9%", "Network Switch/Cable | Network | 35 | 8.4%",
# "Host Maintenance | Unplanned Maintenance | 32 | 7.6%", "GPU SRAM Memory | GPU | 19 | 4.5%",
# "GPU System Processor | GPU | 17 | 4.1%", "NIC | Host | 7 | 1.7%", "NCCL Watchdog Timeouts |
# Unknown | 7 | 1.7%", "Silent Data Corruption | GPU | 6 | 1.4%", "GPU Thermal Interface +
# Sensor | GPU | 6 | 1.4%", "SSD | Host | 3 | 0.7%", "Power Supply | Host | 3 | 0.7%", "Server
# Chassis | Host | 2 | 0.5%", "IO Expansion Board | Host | 2 | 0.5%", "Dependency | Dependency |
# 2 | 0.5%", "CPU | Host | 2 | 0.5%", "System Memory | Host | 2 | 0.5%". The five largest GPU and
# network rows again in DatacenterDynamics (2024-07, https://direct.datacenterdynamics.com/en/
# news/meta-report-details-hundreds-of-gpu-and-hbm3-related-interruptions-to-llama-3-training-
# run): "a faulty GPU caused 148 interruptions, accounting for 30.1 percent", "network switch
# and cable problems caused 35, or 8.4 percent".
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16384
LLAMA3_HOSTS = 2048         # 8 GPUs a server
LLAMA3_NICS = 16384         # one NIC a GPU
#: Table 5's counts grouped by kind (see the module docstring for the rows of each)
LLAMA3_COUNTS = {
    "gpu": 148 + 19 + 17 + 6 + 6,      # faulty GPU 148, SRAM 19, system processor 17, SDC 6, thermal 6
    "hbm": 72,                         # GPU HBM3 memory
    "nic": 7,
    "network": 35,                     # network switch/cable
    "host": 32 + 3 + 3 + 2 + 2 + 2 + 2,   # maintenance, SSD, power, chassis, IO board, CPU 2, memory
    "software": 54 + 2 + 7}            # software bug, dependency, NCCL watchdog timeouts
#: planned interruptions in the same window; not in the defaults (maintenance is scheduled
#: and the job checkpoints first); counted as failures they bound their cost from above
LLAMA3_PLANNED = 47

# Degraded links and stragglers: no published per-cable or per-GPU rate was found (searched,
# 2026-12: the Llama 3 paper; Kokolis et al., "Revisiting Reliability in Large-Scale Machine
# Learning Research Clusters", HPCA 2025, https://arxiv.org/abs/2410.21680, whose tables
# could not be read from here; Jiang et al., "MegaScale", NSDI 2024; Alibaba's HPN, SIGCOMM
# 2024). What was found bounds them without giving a rate: Wu et al., "FALCON: Pinpointing
# and Mitigating Stragglers for Large-Scale Hybrid-Parallel Training",
# https://arxiv.org/abs/2410.12588, abstract, a >10,000-GPU production cluster: fail-slows
# "lasting from tens of seconds to nearly ten hours, and collectively delaying the average
# job completion time by 1.34x" (durations); Meta's OCP 2024 talk "Enhancing Optical Link
# Reliability for AI Infrastructure" (He, Jiao, Wang; slides mirrored at
# https://www.sgpjbg.com/baogao/1011814.html): "Link reliability is one of the top 4 major
# contributors of AI job interruptions" (no rate). So the degradation and straggler
# processes have no default: give your own rate and say it is an assumption.
FALCON_FAILSLOW_SECONDS = (10.0, 10 * 3600.0)   # "tens of seconds to nearly ten hours"
_LLAMA3_UNITS = {"gpu": ("gpu", LLAMA3_GPUS), "hbm": ("gpu", LLAMA3_GPUS), "nic": ("nic", LLAMA3_NICS),
                 "network": ("gpu", LLAMA3_GPUS), "host": ("host", LLAMA3_HOSTS),
                 "software": ("gpu", LLAMA3_GPUS)}
_DAY = 86400.0


@dataclass(frozen=True)
class Component:
    """One failure or degradation process (see the module docstring).

    Parameters
    ----------
    kind : str
        A name (``"gpu"``, ``"hbm"``, ``"optical_link"``, ...): the key losses are reported by.
    effect : {"interrupt", "degrade", "straggler"}
    rate : float
        Events per unit per second (>= 0).
    unit : {"gpu", "nic", "host", "link"}
        What the rate is counted per. ``"link"``: the fabric links that ``links`` selects.
    duration : float
        Seconds a degradation or straggler lasts (> 0; ignored for interruptions).
    factor : float
        Fraction of its rate a degraded link keeps, or of its speed a straggler GPU keeps,
        in (0, 1].
    links : str, optional
        For ``effect="degrade"``: the links it hits, a ``tier`` of the graph's edges
        (``"leaf-spine"``, ``"access"``, ...). Both directions of a cable degrade together.
    hardware : bool, optional
        For ``effect="interrupt"``: whether a failure takes hardware out, so that without hot
        spares the job waits ``repair_time`` for it (or shrinks by the replicas on it); False
        for a software failure, which only restarts. Default (None): False for the kind named
        ``"software"``, True for every other kind; read back as the bool it resolved to.

    >>> c = Component("optical_link", "degrade", rate=1e-7, unit="link", duration=3600.0, factor=0.5,
    ...               links="leaf-spine")
    >>> c.per_day
    0.00864
    >>> Component("nccl_timeout", "interrupt", rate=1e-8, hardware=False).hardware   # a software kind
    False
    """

    kind: str
    effect: str
    rate: float
    unit: str = "gpu"
    duration: float = 0.0
    factor: float = 1.0
    links: str | None = None
    hardware: bool | None = None

    def __post_init__(self):
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"Component: kind must be a non-empty string, got {self.kind!r}")
        if self.effect not in EFFECTS:
            raise ValueError(f"Component {self.kind!r}: effect must be one of {', '.join(EFFECTS)}, "
                             f"got {self.effect!r}")
        if self.unit not in UNITS:
            raise ValueError(f"Component {self.kind!r}: unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not math.isfinite(self.rate) \
                or self.rate < 0:
            raise ValueError(f"Component {self.kind!r}: rate must be a finite number >= 0 (events per unit per "
                             f"second), got {self.rate!r}")
        if self.effect != "interrupt":
            if not (isinstance(self.duration, (int, float)) and math.isfinite(self.duration)
                    and self.duration > 0):
                raise ValueError(f"Component {self.kind!r}: duration must be a finite number of seconds > 0 "
                                 f"for a {self.effect}, got {self.duration!r}")
            if not (isinstance(self.factor, (int, float)) and 0 < self.factor <= 1):
                raise ValueError(f"Component {self.kind!r}: factor must be in (0, 1] (the fraction of the rate "
                                 f"kept), got {self.factor!r}")
        if self.hardware is None:       # the frozen field resolved once: a software failure never waits
            object.__setattr__(self, "hardware", self.kind != "software")
        elif not isinstance(self.hardware, bool):
            raise ValueError(f"Component {self.kind!r}: hardware must be True (a failure waits for a repair "
                             f"without spares) or False (software: it only restarts), got {self.hardware!r}")
        if self.effect == "degrade" and (self.unit != "link" or not isinstance(self.links, str)):
            raise ValueError(f"Component {self.kind!r}: a degradation needs unit='link' and links= a tier name")
        if self.effect == "straggler" and self.unit != "gpu":
            raise ValueError(f"Component {self.kind!r}: a straggler is a GPU (unit='gpu'); a slow NIC is a "
                             "degradation of its links (effect='degrade', links='access')")

    @property
    def per_day(self) -> float:
        """Events per unit per day."""
        return self.rate * _DAY

    def with_rate(self, rate: float) -> "Component":
        """A copy with another rate (events per unit per second)."""
        return replace(self, rate=float(rate))


def default_components(**overrides) -> dict:
    """The interruption processes of the Llama 3 paper's Table 5 (see the module docstring),
    keyed by kind, with any of them replaced or new ones added: ``kind=Component(...)``,
    ``kind=rate`` (events per unit per second, same unit and effect) or ``kind=None``
    (removed).

    >>> comps = default_components()
    >>> sorted(comps)
    ['gpu', 'hbm', 'host', 'network', 'nic', 'software']
    >>> round(comps["hbm"].per_day * 16384 * 54)                 # Table 5: 72 in 54 days
    72
    >>> round(sum(c.per_day for c in comps.values() if c.unit == "gpu") * 16384 * 54
    ...       + comps["nic"].per_day * 16384 * 54 + comps["host"].per_day * 2048 * 54)
    419
    """
    out = {}
    for kind, count in LLAMA3_COUNTS.items():
        unit, units = _LLAMA3_UNITS[kind]
        out[kind] = Component(kind, "interrupt", rate=count / (LLAMA3_DAYS * _DAY * units), unit=unit)
    for kind, value in overrides.items():
        if value is None:
            out.pop(kind, None)
        elif isinstance(value, Component):
            if value.kind != kind:
                raise ValueError(f"default_components: {kind}= got a Component of kind {value.kind!r}")
            out[kind] = value
        elif kind in out and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[kind] = out[kind].with_rate(value)
        else:
            raise ValueError(f"default_components: {kind}= must be a Component, None, or a rate for one of "
                             f"{', '.join(LLAMA3_COUNTS)}; got {value!r}")
    return out


def _host_of(d: dict, node):
    """The host a GPU (node data ``d``) sits on: its server, or ``(server, tray)`` where the
    server's GPUs sit on compute trays (a GB200 NVL72 rack: 18 trays of 4 GPUs, each tray
    its own CPUs, memory and SSDs: the parts Table 5's host rows fail)."""
    server = d.get("server", node)
    return server if d.get("tray") is None else (server, d["tray"])


def _nic_hosts(graph: nx.DiGraph, servers) -> dict:
    """The compute NICs (not front-end) of ``servers``: NIC -> (server, its GPUs' local
    indexes, its host). NIC ``j`` of ``n`` serves its server's GPUs of local index ``j g / n``
    to ``(j + 1) g / n - 1`` (one GPU each on an 8-NIC DGX) and sits on their host (their
    tray)."""
    import topologies as tp

    gpus: dict = {}                                   # server -> local index -> host
    for node in tp.gpus(graph):
        d = graph.nodes[node]
        if d.get("server", node) in servers:
            gpus.setdefault(d.get("server", node), {})[d.get("local_rank", 0)] = _host_of(d, node)
    names: dict = {}
    for n, d in graph.nodes(data=True):
        if d.get("kind") == "nic" and d.get("role") != "frontend" and d.get("server") in servers:
            names.setdefault(d["server"], []).append(n)
    out = {}
    for server, nics in names.items():
        ids = sorted(gpus.get(server, {}))
        block = -(-len(ids) // len(nics)) if ids else 0
        for j, nic in enumerate(nics):
            served = ids[j * block:(j + 1) * block]
            out[nic] = (server, served, gpus[server][served[0]] if served else server)
    return out


def job_units(graph: nx.DiGraph, ranks=None) -> dict:
    """How many GPUs, NICs and hosts a job holds, and the fabric links per tier.

    ``ranks``: the job's GPU ranks (default all). A host is a server, or a compute tray where
    the server's GPUs sit on trays (``ServerModel.gpus_per_tray``: a GB200 NVL72 rack is 18
    hosts of 4 GPUs); NICs are the compute NICs (not front-end) of the job's hosts; ``link``
    maps each edge ``tier`` to its physical cables (a pair of opposite edges bundling
    ``cables`` parallel cables counts that many).

    >>> import topologies as tp
    >>> u = job_units(tp.rail_optimized(4))            # 8 leaves x 1 spine, 4 cables each
    >>> u["gpu"], u["nic"], u["host"], u["link"]["leaf-spine"]
    (32, 32, 4, 32)
    >>> u = job_units(tp.nvl72_cluster(2))             # 2 racks of 18 trays of 4 GPUs
    >>> u["gpu"], u["nic"], u["host"]
    (144, 144, 36)
    """
    import topologies as tp

    gpus = tp.gpus(graph)
    chosen = gpus if ranks is None else [gpus[r] for r in _checks.distinct_ranks(graph, ranks, nodes=gpus)]
    hosts = {_host_of(graph.nodes[g], g) for g in chosen}
    servers = {graph.nodes[g].get("server", g) for g in chosen}
    nics = sum(1 for _, _, host in _nic_hosts(graph, servers).values() if host in hosts)
    tiers: dict = {}
    for u, v, d in graph.edges(data=True):
        if (v, u) in graph.edges and str(u) > str(v):
            continue                              # count a full-duplex cable once
        tiers[d.get("tier")] = tiers.get(d.get("tier"), 0) + int(d.get("cables", 1))   # a bundle: its cables
    return {"gpu": len(chosen), "nic": nics, "host": len(hosts), "link": tiers}


def replicas_per_unit(graph: nx.DiGraph, replica_of: dict) -> dict:
    """For each unit a failure takes out (``"gpu"``, ``"host"``, ``"nic"``), the data-parallel
    replicas each of the job's units holds a GPU of: what one failure of it stops when the job
    shrinks. ``replica_of``: the job's GPU ranks -> their replica. A host is a server or a
    compute tray (see :func:`job_units`: a tray failure stops the replicas on its GPUs, not
    its rack's). A NIC serves its server's GPUs in consecutive blocks (NIC ``j`` of ``n`` the
    GPUs of local index ``j g / n`` to ``(j + 1) g / n - 1``, one GPU each on an 8-NIC DGX); a
    NIC of the job's hosts serving none of the job's GPUs counts one.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(2)                       # 16 GPUs, dp = 16: a replica a GPU
    >>> u = replicas_per_unit(g, {r: r for r in range(16)})
    >>> u["gpu"].tolist()[:3], u["host"].tolist(), u["nic"].tolist()[:3]
    ([1, 1, 1], [8, 8], [1, 1, 1])
    """
    import numpy as np
    import topologies as tp

    gpus = tp.gpus(graph)
    by_server: dict = {}                              # server -> local index -> replica
    by_host: dict = {}                                # host -> its replicas
    for rank, replica in replica_of.items():
        d = graph.nodes[gpus[rank]]
        by_server.setdefault(d.get("server", gpus[rank]), {})[d.get("local_rank", 0)] = replica
        by_host.setdefault(_host_of(d, gpus[rank]), set()).add(replica)
    per_nic = []
    for server, served, host in _nic_hosts(graph, set(by_server)).values():
        if host in by_host:
            held = {by_server[server][i] for i in served if i in by_server[server]}
            per_nic.append(max(1, len(held)))
    return {"gpu": np.ones(len(replica_of), np.int64),
            "host": np.array([len(v) for v in by_host.values()], np.int64),
            "nic": np.array(per_nic or [1], np.int64)}
