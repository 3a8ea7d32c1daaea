"""Private helpers shared by the generators: cables, graph records, port spreading."""

from __future__ import annotations

import math
import numbers

import networkx as nx

from .links import LinkTech, get_link

#: node kinds the schema knows (validate() accepts these and no others)
NODE_KINDS = ("gpu", "nic", "nvswitch", "pcie_switch", "cpu", "switch", "storage")


def add_cable(g: nx.DiGraph, u, v, tech: LinkTech, *, tier: str, cables: int = 1,
              bandwidth: float | None = None) -> None:
    """Add a full-duplex cable (two directed edges) of ``cables`` parallel links.

    Parallel cables between one pair are one directed edge per direction whose
    ``capacity`` is their sum and whose ``cables`` attribute counts them.
    """
    rate = tech.bandwidth if bandwidth is None else bandwidth
    attrs = dict(capacity=float(rate * cables), latency=float(tech.latency), tech=tech.name,
                 tier=tier, cables=int(cables))
    if tech.efficiency is not None:     # the technology's own, kept when it is not registered by name
        attrs["efficiency"] = float(tech.efficiency)
    if tech.transport is not None:      # likewise the transport NCCL drives the NIC with
        attrs["transport"] = tech.transport
    g.add_edge(u, v, **attrs)
    g.add_edge(v, u, **attrs)


def slower(a: LinkTech, b: LinkTech) -> LinkTech:
    """The slower of two technologies: a port runs at the rate both ends support."""
    return a if a.bandwidth <= b.bandwidth else b


def spread(count: int, targets: int, offset: int = 0) -> list[int]:
    """Spread ``count`` cables over ``targets`` as evenly as possible.

    Every target gets ``count // targets``; the ``count % targets`` extra cables go to
    consecutive targets starting at ``offset`` (so successive callers with successive
    offsets balance the extras across targets).
    """
    base, extra = divmod(count, targets)
    out = [base] * targets
    for t in range(extra):
        out[(offset + t) % targets] += 1
    return out


def cable_spread(g, node, targets, count, index, tech, tier) -> bool:
    """Cable ``count`` uplinks of ``node`` to ``targets`` as evenly as possible, the
    extras starting at ``index * (count mod len(targets))`` so that successive nodes
    balance them; returns whether the spread is uniform."""
    for target, n in zip(targets, spread(count, len(targets), offset=index * (count % len(targets)))):
        if n:
            add_cable(g, node, target, tech, tier=tier, cables=n)
    return count % len(targets) == 0


def check_int(name: str, value, minimum: int, allowed: str | None = None) -> int:
    """Return ``value`` as int if it is an integer >= minimum, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) and not (
            hasattr(value, "__index__")):
        raise ValueError(f"{name} must be an integer >= {minimum}"
                         f"{' (' + allowed + ')' if allowed else ''}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}"
                         f"{' (' + allowed + ')' if allowed else ''}, got {value}")
    return value


#: cable tiers inside a server: no cable a bill counts, and a rate set by the server (the GPU
#: generation's NVLink, the PCIe generation), not by the network
SERVER_TIERS = ("nvlink", "pcie", "cpu")

#: the most parts a generator builds (switches, endpoints and cables): a built graph takes about
#: 0.4 KB a part (rail_optimized(2048), 16,384 GPUs in 175,360 nodes and directed edges, raised this
#: process's peak by 70 MB), so 2**24 parts is about 7 GB; checked before anything is allocated
MAX_PARTS = 1 << 24


def check_scale(family: str, parts: int, sizes: str) -> None:
    """ValueError when ``family`` sized as ``sizes`` would build more than :data:`MAX_PARTS`
    switches, endpoints and cable directions (``parts``, counted from the size alone)."""
    if parts > MAX_PARTS:
        raise ValueError(f"{family} with {sizes} would build about {parts:,} switches, endpoints and cable "
                         f"directions, more than the {MAX_PARTS:,} (about 7 GB) a generator builds: choose a "
                         "smaller size")


def check_ratio(name: str, value) -> float:
    """Return an oversubscription ratio (a finite number >= 1) or raise ValueError (a bool or a
    string is not a ratio: True read as 1, "2" as 2)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number >= 1 (1 = non-blocking), got {value!r}")
    try:
        ratio = float(value)
    except OverflowError:                   # an int beyond float range
        ratio = math.inf
    if not ratio >= 1 or ratio == math.inf:
        raise ValueError(f"{name} must be a finite number >= 1 (1 = non-blocking), got {value!r}")
    return ratio


def uplinks_for(down: float, ratio: float) -> int:
    """The fewest whole uplinks (at least one) that carry ``down`` (in uplinks' worth) at
    oversubscription ``ratio`` or less: ``ceil(down / ratio)``, to a relative 1e-9 so that a
    float's last bit adds no cable (11 down at 1.1: 10 uplinks, not ceil(10.000000000000002)).

    >>> uplinks_for(4, 3.0), uplinks_for(5, 2.0), uplinks_for(11, 1.1), uplinks_for(1, 4.0)
    (2, 3, 10, 1)
    """
    need = down / ratio
    return max(1, math.ceil(need * (1 - 1e-9)))


def compute_fabric(g: nx.DiGraph) -> nx.DiGraph:
    """The graph without storage and front-end parts (nodes with a ``network`` attribute)."""
    drop = {n for n, d in g.nodes(data=True) if "network" in d}
    if not drop:
        return g
    return g.subgraph([n for n in g if n not in drop])


#: the fingerprint's items up to its edges' hash: what :func:`edited` compares on every check
CHEAP_ITEMS = 8


def fingerprint(g: nx.DiGraph, *, hashed: bool = True) -> list:
    """Nodes, edges, total capacity, latency and cables of the compute fabric, the family's
    formulas recorded beside them (bisection bandwidth, diameter), the capacities' sum of
    squares, the efficiencies' count and sum and the technologies' counts, and (``hashed``) a
    hash of every edge: tells describe() and the checks whether a graph was edited since it
    was generated (an edited latency or cable count is validated again: a negative latency made
    collectives faster; a file's edited bisection was reported as the formula's). The checks
    before every call compare the first :data:`CHEAP_ITEMS` (sums: 0.14 s on 16,384 GPUs), which
    a capacity moved between links, a NaN efficiency or a technology edited changes (adv24 F4);
    describe(), whose formulas a capacity-preserving edit would mislead, compares the hash too."""
    formulas = [repr(g.graph.get("bisection_bandwidth")), repr(g.graph.get("network_diameter"))]
    core = compute_fabric(g)
    caps, lats, cables, effs, techs = [], [], [], [], {}
    absent = _ABSENT
    try:        # fsum: exactly rounded, so the same in any edge order (a subgraph's order follows hashing)
        for _, _, d in core.edges(data=True):           # one pass: 0.13 s for 139,264 links
            get = d.get
            caps.append(get("capacity", 0.0))
            lats.append(get("latency", 0.0))
            cables.append(get("cables", 1))
            e = get("efficiency", absent)
            if e is not absent:
                effs.append(e)
            t = get("tech", absent)
            techs[t] = techs.get(t, 0) + 1              # (an unhashable technology: edited, below)
        sums = [math.fsum(caps), math.fsum(lats), math.fsum(cables)]
        extra = repr((math.fsum(c * c for c in caps), len(effs), math.fsum(e for e in effs if e is not None),
                      sum(e is None for e in effs), sorted((repr(t), n) for t, n in techs.items())))
        out = [core.number_of_nodes(), core.number_of_edges(), round(sums[0], 3), repr(sums[1]), repr(sums[2]),
               *formulas, extra]
        return out + [_edge_hash(core)] if hashed else out
    except (TypeError, ValueError):         # a value that is no number: matches no recorded fingerprint
        return [core.number_of_nodes(), core.number_of_edges(), None]


def edited(g: nx.DiGraph, *, hashed: bool = False) -> bool:
    """Whether ``g`` is not a generator's unedited graph: no generator record, or a fingerprint
    other than the one recorded (its first :data:`CHEAP_ITEMS`, or all of it with ``hashed``)."""
    meta = getattr(g, "graph", None)
    if meta is None or meta.get("generator") is None:
        return True
    stored = meta.get("fingerprint")
    if not isinstance(stored, list):
        return True
    now = fingerprint(g, hashed=hashed)
    return stored != now if hashed else stored[:CHEAP_ITEMS] != now[:CHEAP_ITEMS]


#: an attribute not on an edge (hashed apart from None)
_ABSENT = type("_Absent", (), {"__repr__": lambda self: "<absent>"})()


def _mixed(x):
    """A 64-bit finaliser (splitmix64's) of each uint64 in ``x``: nearby inputs, far outputs."""
    import numpy as np

    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _edge_hash(core: nx.DiGraph) -> str:
    """A hash of every edge of ``core``: its endpoints' names with its capacity, latency, cables,
    efficiency and technology, each edge hashed alone and summed (the same in any edge order, in
    any process: names and strings by CRC-32, numbers by their float bits). What a generated graph's
    counts and totals miss (adv24 F4): half of the leaf-spine capacity moved to one NVLink edge kept
    every total, and describe() reported the family's bisection; a NaN efficiency or a
    technology of None was not validated again."""
    import zlib

    import numpy as np

    name = {n: zlib.crc32(repr(n).encode()) for n in core}
    techs: dict = {}
    rows = [(name[u], name[v], d.get("capacity", 0.0), d.get("latency", 0.0), d.get("cables", 1),
             d.get("efficiency", _ABSENT), d.get("tech", _ABSENT)) for u, v, d in core.edges(data=True)]
    if not rows:
        return "0"
    u, v, cap, lat, cables, eff, tech = zip(*rows)
    tech = [techs[t] if t in techs else techs.setdefault(t, zlib.crc32(repr(t).encode())) for t in tech]
    # an efficiency absent, None or NaN hash apart (a NaN written where none was is an edit)
    flags = np.array([0.0 if e is _ABSENT else 1.0 if e is None else 2.0 for e in eff])
    floats = np.array([cap, lat, cables, [0.0 if e is _ABSENT or e is None else e for e in eff], flags],
                      dtype=np.float64)
    bits = floats.view(np.uint64)
    h = _mixed(np.array(u, dtype=np.uint64) | (np.array(v, dtype=np.uint64) << np.uint64(32)))
    for column in (*bits, np.array(tech, dtype=np.uint64)):
        h = _mixed(h ^ column)
    return f"{int(h.sum(dtype=np.uint64)):016x}"      # (uint64 sums wrap: any edge order gives it)


def finish(g: nx.DiGraph, generator: str, params: dict, *, bisection: float | None,
           bisection_method: str, network_diameter: int | None, bisection_cut: list | None = None) -> nx.DiGraph:
    """Record the generator, its parameters and the family's formulas on the graph;
    ``bisection_cut``: the GPU ranks on one side of the formula's cut, where that is not the
    server halves (an edited graph's bisection is then the smaller max flow of the two cuts)."""
    g.graph["generator"] = generator
    g.graph["params"] = params
    g.graph["bisection_bandwidth"] = None if bisection is None else float(bisection)
    g.graph["bisection_method"] = bisection_method
    if bisection_cut is not None:
        g.graph["bisection_cut"] = [int(r) for r in bisection_cut]
    g.graph["network_diameter"] = network_diameter
    g.graph["fingerprint"] = fingerprint(g)
    return g


def resolve_link(name: str, link) -> LinkTech:
    """get_link with the parameter's name in the message."""
    try:
        return get_link(link)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None
