"""A priced bill of materials for a cluster graph's network: switches by model, NICs,
transceivers and cables by reach, NVSwitch trays; prices (USD) and power (W) from a catalogue
whose every entry names where its figures come from.

What is counted
---------------
* **Switches**: one box per ``kind="switch"`` node of the compute fabric, the model chosen by
  the technology family and port rate of its cables and the ports it uses: the slowest, then
  cheapest, catalogue switch with enough ports (InfiniBand NDR, <= 64 ports: Quantum-2 QM9700;
  more: Quantum-X800 Q3400 at NDR; 400G Ethernet: Spectrum-4 SN5600, ...).
  A logical switch with more ports in use than the box has is counted as
  ``ceil(ports / box ports)`` boxes and the bill carries a warning (a real design would need
  a chassis switch or another tier).
* **NICs**: one per ``kind="nic"`` node of the compute fabric, by its total rate over all
  its fabric ports (two 400G ports, as a dual-port or two-plane NIC: an 800G NIC).
* **Links** (one per physical cable; a graph edge with ``cables=n`` is n links), by reach:
  ``"copper"`` (passive DAC inside a rack: no transceivers, ~0 W) or ``"optical"``
  (transceivers at both ends plus a fibre). Which layers stay in a rack is per edge ``tier``
  (:data:`DEFAULT_REACH`; ``reach=`` overrides): the access cables of a rail-optimised fabric
  are optical (a leaf serves a rail across the racks of a scalable unit; NVIDIA's DGX SuperPOD
  racks its leaves apart), those of a top-of-rack fabric (leaf-spine, fat-tree edge, DragonFly
  router, torus) copper; every switch-to-switch layer is optical except DragonFly's intra-group
  ``"local"`` and a torus's neighbour links.
* **Transceivers** at an optical link's ends: on a switch, twin-port OSFP modules carrying
  two 400G links each (800G twin-port OSFP on Quantum-2 and Spectrum-4), counted per switch
  and cable layer as ``ceil(optical ports / 2)``; other rates one module per link; on a server, one single-port
  module per NIC port, or twin-port modules where the server's NICs share OSFP cages (DGX H100
  and B200: 8 NICs behind 4 twin-port cages, :data:`SERVER_NIC_CAGES`).
* **NVSwitch trays** of rack-scale NVLink domains (GB200 NVL72: 9 per rack). NVSwitch chips
  inside an 8-GPU server are part of the server and not billed.

GPUs, servers, racks, storage and front-end networks are not billed (``compute_fabric``).

Prices and power
----------------
Every :class:`Part` carries ``price_source`` and ``power_source``: a datasheet or list price
with its date where one is public, else the word "estimate" and the basis of the number.
Few list prices are public: the Quantum-2 switch, the twin-port 800G OSFP (a lower bound
derived from a published fabric total), the 800G DR8 OSFP, the 400G OSFP and the BlueField-3
carry published reseller or survey figures (address, date and the figure quoted);
the others are estimates flagged ``price_estimate=True`` and marked ``*`` in
:meth:`Bill.format` (:attr:`Bill.estimated_share`: the part of the price they make). Pass your quotes with ``prices={"quantum2_qm9700": 21500.0, ...}``
(USD per unit) and your measured power with ``power={...}`` (W per unit), or add parts with
:func:`topologies.register_part` (the catalogue: :mod:`topologies.parts`).

>>> from topologies import rail_optimized
>>> b = bill(rail_optimized(32))
>>> b.count("quantum2_qm9700"), b.count("connectx7_400g")   # 8 leaves + 4 spines; 256 NICs
(12, 256)
>>> round(b.price / b.gpus) == round(b.price_per_gpu)
True
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import networkx as nx

from ._graph import SERVER_TIERS, compute_fabric
from ._validate import validate_edited
from .links import Gbit, get_link
from .parts import Part, _rate_part, _switch_part, get_part

__all__ = ["Bill", "BillLine", "bill", "tally", "price_tally", "DEFAULT_REACH", "SERVER_NIC_CAGES"]

#: transceiver modules' links per server-side OSFP cage, by server model (DGX H100 and B200:
#: "the compute fabric ports ... use a two-port transceiver to access all eight GPUs", NVIDIA
#: DGX SuperPOD H100 reference architecture, "Network Fabrics", Figure 4; read 2026-12-04;
#: DGX H200: "Four OSFP ports serving eight single-port NVIDIA ConnectX-7", as the DGX H100, DGX
#: BasePOD reference architecture, "Core Components"; read 2026-12-06)
SERVER_NIC_CAGES = {"dgx_h100": 2, "dgx_h200": 2, "dgx_b200": 2}

#: the reach of each cable layer (edge ``tier``) when ``reach=`` does not say: "copper" or
#: "optical"; the access layer depends on the family (see the module docstring)
DEFAULT_REACH = {
    "access": "copper", "leaf-spine": "optical", "spine-core": "optical", "edge-agg": "optical",
    "agg-core": "optical", "local": "copper", "global": "optical", "torus": "copper",
}
_ACCESS_BEYOND_RACK = {"rail_optimized", "rail_only", "multi_plane", "nvl72_cluster"}

#: NVSwitch trays per rack-scale NVLink domain (GB200 NVL72 specification: 9 trays, 18 chips)
_TRAYS_PER_DOMAIN = {72: 9}


@dataclass(frozen=True)
class BillLine:
    """One line of a bill: ``count`` units of ``part`` in layer ``tier``."""

    item: str
    part: Part
    count: int
    tier: str

    @property
    def price(self) -> float:
        """USD."""
        return self.count * self.part.price

    @property
    def power(self) -> float:
        """Watts."""
        return self.count * self.part.power


@dataclass
class Bill:
    """A network bill of materials. ``price`` in USD, ``power`` in W.

    ``lines`` are grouped by item and tier; ``links`` counts physical cables by
    ``(tier, reach, rate in Gb/s)``; ``warnings`` says where the graph did not map cleanly
    onto catalogue parts.
    """

    lines: list
    gpus: int
    links: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def price(self) -> float:
        return float(sum(line.price for line in self.lines))

    @property
    def power(self) -> float:
        return float(sum(line.power for line in self.lines))

    @property
    def price_per_gpu(self) -> float:
        return self.price / self.gpus if self.gpus else float("nan")

    @property
    def power_per_gpu(self) -> float:
        return self.power / self.gpus if self.gpus else float("nan")

    @property
    def estimated(self) -> bool:
        """True when any line's price or power is an estimate rather than a published figure."""
        return any(line.part.price_estimate or line.part.power_estimate for line in self.lines if line.count)

    @property
    def estimated_share(self) -> float:
        """Fraction of the price (0-1) whose unit prices are estimates, not published figures."""
        total = self.price
        return sum(l.price for l in self.lines if l.part.price_estimate) / total if total else 0.0

    def count(self, part: str) -> int:
        """Units of catalogue part ``part`` on the bill."""
        return sum(line.count for line in self.lines if line.part.name == part)

    def by_tier(self) -> dict:
        """``{tier: {"price": USD, "power": W}}``."""
        out = defaultdict(lambda: {"price": 0.0, "power": 0.0})
        for line in self.lines:
            out[line.tier]["price"] += line.price
            out[line.tier]["power"] += line.power
        return dict(out)

    def by_category(self) -> dict:
        """``{category: {"count": n, "price": USD, "power": W}}``."""
        out = defaultdict(lambda: {"count": 0, "price": 0.0, "power": 0.0})
        for line in self.lines:
            row = out[line.part.category]
            row["count"] += line.count
            row["price"] += line.price
            row["power"] += line.power
        return dict(out)

    def to_rows(self) -> list[dict]:
        """One JSON-friendly dict per line."""
        return [dict(item=l.item, part=l.part.name, category=l.part.category, tier=l.tier, count=l.count,
                     unit_price=l.part.price, unit_power=l.part.power, price=l.price, power=l.power,
                     price_source=l.part.price_source, power_source=l.part.power_source,
                     price_estimated=l.part.price_estimate, power_estimated=l.part.power_estimate)
                for l in self.lines]

    def format(self) -> str:
        """A text table (USD, kW); ``*`` after a figure that is an estimate (no published source)."""
        rows = [f"{'item':34s} {'tier':12s} {'count':>8s} {'USD':>15s} {'kW':>10s}"]
        for l in sorted(self.lines, key=lambda l: (l.part.category, l.tier, l.item)):
            rows.append(f"{l.item:34s} {l.tier:12s} {l.count:8d} {l.price:14,.0f}{'*' if l.part.price_estimate else ' '}"
                        f" {l.power / 1e3:9.2f}{'*' if l.part.power_estimate else ''}")
        rows.append(f"{'total':34s} {'':12s} {'':8s} {self.price:14,.0f}  {self.power / 1e3:9.2f}")
        rows.append(f"per GPU ({self.gpus}): {self.price_per_gpu:,.0f} USD, {self.power_per_gpu:,.1f} W"
                    + (f"  [* estimates: {self.estimated_share:.0%} of the price; see price_source / power_source]"
                       if self.estimated else ""))
        rows.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(rows)


_INSIDE_SERVER = SERVER_TIERS


def _edge_tech(d: dict, cables: int):
    """(technology family, bytes/s of one cable) of a graph edge."""
    try:
        tech = get_link(d.get("tech"))
        return tech.family, tech.bandwidth
    except ValueError:
        return "custom", float(d.get("capacity", 0.0)) / max(cables, 1)


_OPTICS = {"multimode": ("osfp_800g_twin", "osfp_400g"), "singlemode": ("osfp_800g_twin_dr", "osfp_400g_dr")}


def bill(g: nx.DiGraph, *, prices: dict | None = None, power: dict | None = None, reach: dict | None = None,
         switch_part: "str | Part | None" = None, nic_part: "str | Part | None" = None,
         optics: str = "multimode") -> Bill:
    """The network bill of materials of cluster graph ``g`` (see the module docstring).

    Parameters
    ----------
    g : networkx.DiGraph
        A cluster graph (generated or loaded).
    prices, power : dict, optional
        ``{part name: USD}`` and ``{part name: W}`` overriding the catalogue per unit.
    reach : dict, optional
        ``{edge tier: "copper" | "optical"}`` overriding :data:`DEFAULT_REACH` (and the
        family's access rule).
    switch_part, nic_part : str or Part, optional
        Bill every switch (NIC) as this part instead of choosing by technology.
    optics : {"multimode", "singlemode"}
        400G optics family: multimode SR (50 m, cheaper) or single-mode DR (500 m).

    Returns
    -------
    Bill

    Examples
    --------
    >>> from topologies import leaf_spine
    >>> b = bill(leaf_spine(2, 1, 4))                      # 8 hosts, 2 leaves, 1 spine (NDR)
    >>> b.count("quantum2_qm9700"), b.count("dac"), b.count("osfp_800g_twin")
    (3, 8, 8)
    >>> b.links[("leaf-spine", "optical", 400)]
    8
    """
    return price_tally(tally(g, reach=reach, switch_part=switch_part, nic_part=nic_part), optics=optics,
                       prices=prices, power=power)


def price_tally(counted: dict, *, optics: str = "multimode", prices: dict | None = None,
                power: dict | None = None) -> Bill:
    """The :class:`Bill` of a :func:`tally` (what :func:`bill` does after counting): one tally
    priced under several optics or price lists without walking the graph again.

    >>> from topologies import fat_tree
    >>> t = tally(fat_tree(4))
    >>> price_tally(t).price < price_tally(t, optics="singlemode").price
    True
    """
    if optics not in _OPTICS:
        raise ValueError(f"optics must be one of {', '.join(_OPTICS)}, got {optics!r}")
    names = {"@twin": _OPTICS[optics][0], "@single": _OPTICS[optics][1]}
    prices, power = dict(prices or {}), dict(power or {})
    for name, table in (("prices", prices), ("power", power)):
        for key, value in table.items():
            get_part(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name}[{key!r}] must be a number >= 0, got {value!r}")
    lines = []
    for (item, name, tier), n in sorted(counted["counts"].items()):
        name = names.get(name, name)
        part = get_part(name)
        if name in prices or name in power:
            part = replace(part, price=float(prices.get(name, part.price)),
                           price_source="user" if name in prices else part.price_source,
                           power=float(power.get(name, part.power)),
                           power_source="user" if name in power else part.power_source)
        lines.append(BillLine(item.format(name), part, int(n), tier))
    return Bill(lines=lines, gpus=counted["gpus"], links=dict(counted["links"]), warnings=list(counted["warnings"]))


def _of_category(name: str, part: Part, want: str) -> Part:
    """``part`` if it is a ``want`` (a NIC billed as every switch priced the switches as NICs)."""
    if part.category != want:
        raise ValueError(f"{name} must be a {want} part, got {part.name!r} (a {part.category})")
    return part


def tally(g: nx.DiGraph, *, reach: dict | None = None, switch_part: "str | Part | None" = None,
          nic_part: "str | Part | None" = None) -> dict:
    """What :func:`bill` counts on ``g`` before pricing: ``{"counts": {(item, part, tier): n},
    "links": ..., "warnings": [...], "gpus": n}`` (400G optics as ``"@twin"`` / ``"@single"``,
    chosen by :func:`price_tally`'s ``optics``).

    >>> from topologies import fat_tree
    >>> tally(fat_tree(4))["gpus"]
    16
    """
    validate_edited(g)                      # edited by hand: a cable count of -1 or 2.5 is no bill
    core = compute_fabric(g)
    reach_of = dict(DEFAULT_REACH)
    if g.graph.get("generator") in _ACCESS_BEYOND_RACK:
        reach_of["access"] = "optical"
    tiers = ({d.get("tier", "unspecified") for *_, d in core.edges(data=True)} | set(DEFAULT_REACH)) \
        - set(_INSIDE_SERVER)
    for tier, medium in (reach or {}).items():
        if medium not in ("copper", "optical"):
            raise ValueError(f"reach[{tier!r}] must be 'copper' or 'optical', got {medium!r}")
        if tier not in tiers:               # "leaf_spine" for "leaf-spine" would be ignored
            why = ("is inside a server (no cable the bill counts)" if tier in _INSIDE_SERVER else
                   "is not billed (the storage and front-end networks are not)" if tier in ("storage", "frontend")
                   else "is no cable tier of this graph")
            raise ValueError(f"reach: {tier!r} {why}; the billed tiers: {', '.join(sorted(tiers))}")
        reach_of[tier] = medium
    forced_switch, forced_nic = (None if part is None else _of_category(name, get_part(part), want)
                                 for name, part, want in (("switch_part", switch_part, "switch"),
                                                          ("nic_part", nic_part, "nic")))

    kind = {n: d.get("kind") for n, d in core.nodes(data=True)}
    warnings: list[str] = []
    counts: Counter = Counter()          # (item, part name, tier) -> units
    links: Counter = Counter()
    optical_ports: Counter = Counter()   # (switch, tier, rate) -> optical links at it
    server_optics: Counter = Counter()   # (server, rate) -> optical NIC ports
    switch_rate: dict = {}
    switch_family: dict = {}
    switch_ports: Counter = Counter()
    techs: dict = {}                     # (tech, capacity, cables) -> (family, rate of one cable)
    cabled: Counter = Counter()          # (tier, medium, rate) -> physical cables
    for u, nbrs in core.adj.items():
        ku = kind.get(u)
        for v, d in nbrs.items():
            tier = d.get("tier", "unspecified")
            if tier in _INSIDE_SERVER:
                continue
            kv = kind.get(v)
            n = d.get("cables", 1)
            key = (d.get("tech"), d.get("capacity"), n)
            if key not in techs:
                techs[key] = _edge_tech(d, int(n))
            family, rate = techs[key]
            n = int(n)
            if ku == "switch":
                switch_ports[u] += n
                if rate > switch_rate.get(u, 0.0):
                    switch_rate[u] = rate
                switch_family.setdefault(u, family)
            # each cable once: from its endpoint side, or from the smaller name between peers
            if ku == "switch" and kv != "switch":
                continue
            if (ku == "switch") == (kv == "switch") and not str(u) < str(v):
                continue
            medium = reach_of.get(tier, "optical")
            cabled[(tier, medium, rate)] += n
            if medium == "optical":
                for end in (u, v):
                    if kind[end] == "switch":
                        optical_ports[(end, tier, rate)] += n
                    else:
                        server_optics[(core.nodes[end].get("server", end), rate, tier)] += n
    for (tier, medium, rate), n in cabled.items():
        links[(tier, medium, round(rate / Gbit))] += n
        cable = "dac" if medium == "copper" else "fiber_mpo"
        counts[(f"{'DAC' if medium == 'copper' else 'fibre'} {rate / Gbit:g}G", cable, tier)] += n
    # switches
    oversized = defaultdict(list)       # (ports, part, boxes) -> switches
    for sw, ports in switch_ports.items():
        role = core.nodes[sw].get("role", "switch")
        part = forced_switch or _switch_part(switch_family[sw], switch_rate[sw], ports)
        boxes = 1
        if ports > part.ports:
            boxes = math.ceil(ports / part.ports)
            oversized[(ports, part.name, part.ports, boxes)].append(sw)
        counts[(f"switch {part.name}", part.name, role)] += boxes
    for (ports, name, has, boxes), sws in oversized.items():
        who = f"switch {sws[0]!r} uses" if len(sws) == 1 else \
            f"{len(sws)} switches ({', '.join(map(repr, sws[:3]))}{', ...' if len(sws) > 3 else ''}) use"
        warnings.append(f"{who} {ports} ports, more than the {has} of a {name}: counted as {boxes} boxes"
                        + ("" if len(sws) == 1 else " each"))
    # NICs cabled to the fabric
    for n, d in core.nodes(data=True):
        if d.get("kind") != "nic":
            continue
        # the NIC's bandwidth: all its fabric ports (a dual-port or multi-plane NIC is one faster NIC)
        rates = [techs[(e.get("tech"), e.get("capacity"), e.get("cables", 1))][1] * int(e.get("cables", 1))
                 for v, e in core[n].items() if e.get("tier", "unspecified") not in _INSIDE_SERVER]
        if rates:
            part = forced_nic or _rate_part("nic", sum(rates))
            counts[(f"NIC {part.name}", part.name, "nic")] += 1
    # transceivers: switch side, twin-port modules where the rate has them
    # (at the rate of the tier's own cables: a leaf's 400G uplinks were billed at its 800G
    # downlinks' optics, and their other end at 400G twin-port modules)
    for (sw, tier, rate), ports in optical_ports.items():
        part = _rate_part("transceiver", rate)
        name, per = (part.name, part.ports) if rate != 400 * Gbit else ("@twin", 2)
        counts[("transceiver {}", name, tier)] += math.ceil(ports / per)
    # transceivers: server side
    server_model = (g.graph.get("params", {}).get("server") or {}).get("name")
    cage = SERVER_NIC_CAGES.get(server_model, 1)
    per_server = defaultdict(int)
    for (server, rate, tier), ports in server_optics.items():
        if rate == 400 * Gbit and cage == 2:
            per_server[("@twin", tier)] += math.ceil(ports / 2)
        else:
            name = "@single" if rate == 400 * Gbit else _rate_part("transceiver", rate).name
            per_server[(name, tier)] += ports
    for (name, tier), n in per_server.items():
        counts[("transceiver {} (server)", name, tier)] += n
    # NVSwitch trays of rack-scale NVLink domains (servers whose GPUs sit in compute trays)
    gpus_by_server, tray_servers = Counter(), set()
    for _, d in core.nodes(data=True):
        if d.get("kind") == "gpu":
            gpus_by_server[d.get("server")] += 1
            if d.get("tray") is not None:
                tray_servers.add(d.get("server"))
    for server in tray_servers:
        trays = _TRAYS_PER_DOMAIN.get(gpus_by_server[server])
        if trays:
            counts[("NVLink switch tray", "nvlink_switch_tray", "nvlink")] += trays
        else:
            warnings.append(f"server {server!r}: no NVSwitch tray count known for a {gpus_by_server[server]}"
                            "-GPU NVLink domain; its trays are not billed")
    # a cloud or HPC NIC technology (its own network transport: EFA, TCPXO, Slingshot) has no parts in
    # the catalogue: billed as generic parts of its family and rate, which the bill says (newuser26 #2:
    # Slingshot and TCPXO fabrics came out as Spectrum-4 and ConnectX-6 without a word)
    if forced_switch is None or forced_nic is None:
        for tech in sorted({t for t, _, _ in techs if isinstance(t, str)}):
            try:
                link = get_link(tech)
            except ValueError:
                continue
            if link.transport is not None:
                warnings.append(f"{tech}: no parts of its own in the catalogue (network transport {link.transport}); billed "
                                f"as generic {link.family} parts at {link.bandwidth / Gbit:g}G (switch_part=, "
                                "nic_part= or prices= name others)")
    return dict(counts=dict(counts), links=dict(links), warnings=warnings, gpus=sum(gpus_by_server.values()))
