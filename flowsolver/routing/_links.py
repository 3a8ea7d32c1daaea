"""The links of a cluster graph: the :class:`LinkTable` (capacities, latencies, technology,
tier, hop class) and the :class:`Bottleneck` record of a link that holds flows back."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

import topologies as tp

__all__ = ["Bottleneck", "LinkTable", "HOP_CLASSES", "link_efficiency"]

#: the kinds of hop NCCL prices differently, cheapest first: NVLink, PCIe / host, network
HOP_CLASSES = ("nvlink", "pcie", "network")


class Bottleneck(NamedTuple):
    """A link that holds flows back, the same record on every result: ``index`` into the
    routing's :class:`LinkTable` (graph edge order), its endpoints, its tier and its
    utilisation (load / capacity) when it was found.

    >>> Bottleneck(3, "leaf0", "spine1", "leaf-spine", 1.0).tier
    'leaf-spine'
    """

    index: int
    src: object
    dst: object
    tier: str
    utilization: float


def capacity_array(values: list, edge) -> np.ndarray:
    """The edges' ``capacity`` attributes ``values`` (graph edge order) as float64 bytes/s;
    :class:`topologies.TopologyError` naming the first edge (``edge(i)`` -> ``(u, v)``) whose
    capacity is no finite real number >= 0, as ``topologies.validate`` words it: a string
    ("50" was read as 50 bytes/s), None, a bool, inf, NaN or a negative number.

    >>> capacity_array([1.0, 2], lambda i: ("a", "b")).tolist()
    [1.0, 2.0]
    >>> try:
    ...     capacity_array([1.0, "50"], lambda i: ("a", "b"))
    ... except tp.TopologyError as err:
    ...     print(err)
    edge 'a' -> 'b': capacity must be a finite number >= 0 bytes/s (0 = failed link), got '50'
    """
    def refuse(i):
        u, v = edge(i)
        raise tp.TopologyError(f"edge {u!r} -> {v!r}: capacity must be a finite number >= 0 bytes/s "
                               f"(0 = failed link), got {values[i]!r}")

    if not set(map(type, values)) <= {float, int}:     # one pass; anything else looked at one by one
        for i, c in enumerate(values):
            if isinstance(c, bool) or not isinstance(c, numbers.Real):
                refuse(i)
    try:
        arr = np.array(values, dtype=np.float64)
    except OverflowError:                               # an int beyond float range
        arr = np.array([c if abs(c) < 1e308 else np.inf for c in values], dtype=np.float64)
    ok = (arr >= 0) & (arr < np.inf)                     # NaN fails both
    if not ok.all():
        refuse(int(np.flatnonzero(~ok)[0]))
    return arr


def first_tier(bottleneck: tuple) -> str:
    """Tier of the first (most utilised) :class:`Bottleneck` of a result's tuple, ``""``
    when it is empty: every result's ``bottleneck_tier``.

    >>> first_tier((Bottleneck(0, "a", "b", "leaf-spine", 1.0),)), first_tier(())
    ('leaf-spine', '')
    """
    return bottleneck[0].tier if bottleneck else ""


@dataclass(frozen=True, eq=False)
class LinkTable:
    """The directed links of a cluster graph, in the graph's edge order.

    Link ``l`` is the ``l``-th edge of ``graph.edges()`` (the generator's insertion order,
    kept by ``topologies.save`` / ``load``). Arrays: ``src`` and ``dst`` (node ids),
    ``capacity`` (bytes/s), ``latency`` (s), ``tech``, ``tier`` (layer names, ``""`` where
    the graph has none), ``cables`` and ``hop_class``, the kind of hop NCCL prices
    (:data:`HOP_CLASSES`): ``"network"`` for a link that touches a switch, else
    ``"nvlink"`` for an NVLink technology, else ``"pcie"`` (PCIe and host links).

    >>> import topologies as tp
    >>> links = LinkTable.from_graph(tp.rail_optimized(nodes=2))
    >>> sorted(set(links.hop_class))
    ['network', 'nvlink', 'pcie']
    """

    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    tech: np.ndarray
    tier: np.ndarray
    cables: np.ndarray
    hop_class: np.ndarray
    efficiency: np.ndarray | None = None

    @cached_property
    def hop_rank(self) -> np.ndarray:
        """Position of each link's hop class in ``HOP_CLASSES`` (int64), computed once."""
        rank = {c: i for i, c in enumerate(HOP_CLASSES)}
        return np.array([rank[c] for c in self.hop_class], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.capacity)

    @classmethod
    def from_graph(cls, graph) -> "LinkTable":
        kind = {n: d.get("kind") for n, d in graph.nodes(data=True)}
        src, dst, cap, lat, tech, tier, cables, hop, eff = ([] for _ in range(9))
        classes: dict = {}                 # (tail kind, head kind, tech) -> hop class, worked out once
        for u, v, d in graph.edges(data=True):     # one pass over ~1 M edges on the largest fabrics
            src.append(u)
            dst.append(v)
            g = d.get
            cap.append(g("capacity", 0.0))
            lat.append(g("latency", 0.0))
            t = g("tech", "")
            tech.append(t)
            tier.append(g("tier", ""))
            cables.append(g("cables", 1))
            e = g("efficiency")
            eff.append(np.nan if e is None else e)
            key = (kind[u], kind[v], t)
            c = classes.get(key)
            if c is None:
                c = classes[key] = _hop_class(*key)
            hop.append(c)
        for name, values in (("latency", lat), ("cables", cables)):
            if None in values:           # float(None) / int(None) would raise: so does the array
                raise TypeError(f"edge attribute {name!r} is None on an edge; give a number")
        obj = lambda xs: np.array(xs, dtype=object) if xs else np.empty(0, dtype=object)  # noqa: E731
        return cls(
            src=obj(src), dst=obj(dst),
            capacity=capacity_array(cap, lambda i: (src[i], dst[i])), latency=np.array(lat, dtype=np.float64),
            tech=obj(tech), tier=obj(tier), cables=np.array(cables, dtype=np.int64), hop_class=obj(hop),
            efficiency=_checked_efficiencies(graph, np.array(eff, dtype=np.float64)),
        )

    def effective_capacity(self, efficiency=None) -> np.ndarray:
        """Capacities (bytes/s) times each link technology's efficiency
        (:func:`link_efficiency`: ``efficiency`` overrides, one number or a dict by tech).

        >>> import topologies as tp
        >>> links = LinkTable.from_graph(tp.rail_optimized(nodes=1))
        >>> nv = list(links.tech).index("nvlink4")
        >>> round(float(links.effective_capacity()[nv] / links.capacity[nv]), 3), float(links.effective_capacity(0.5)[nv] / links.capacity[nv])
        (0.824, 0.5)
        """
        kinds, which = self._efficiency_kinds
        factor = np.array([link_efficiency(tech, efficiency, own) for tech, own in kinds], dtype=np.float64)
        return self.capacity * factor[which] if len(which) else self.capacity * 1.0

    @cached_property
    def _efficiency_kinds(self):
        """The distinct (technology, edge efficiency or None) of the links and each link's
        index among them, computed once: an efficiency is then looked up per kind, not per
        link (a 16,384-GPU fabric has ~1 M links and a handful of kinds)."""
        own = self.efficiency if self.efficiency is not None else np.full(len(self.tech), np.nan)
        if not len(self.tech):
            return [], np.empty(0, dtype=np.int64)
        codes: dict = {}            # a dict, not np.unique over strings: a handful of technologies
        tech_code = np.fromiter((codes.setdefault(t, len(codes)) for t in self.tech), np.int64, len(self.tech))
        # each link's own efficiency as a code (NaN, no own efficiency, one code of its own); a
        # one-dimensional unique of tech x efficiency codes (the axis=0 unique of a (links, 3)
        # table took 0.15 s on 139 k links)
        values, own_code = np.unique(own, return_inverse=True, equal_nan=True)
        pairs, which = np.unique(tech_code * len(values) + own_code.reshape(-1), return_inverse=True)
        techs = list(codes)
        kinds = [(techs[int(p) // len(values)], None if np.isnan(e := values[int(p) % len(values)]) else float(e))
                 for p in pairs]
        return kinds, which.reshape(-1)

    def bottleneck(self, index: int, utilization: float) -> Bottleneck:
        """Link ``index`` as a :class:`Bottleneck` record at ``utilization``."""
        i = int(index)
        return Bottleneck(i, self.src[i], self.dst[i], str(self.tier[i]), float(utilization))

    def as_dict(self) -> dict:
        """Columns as a dict of arrays (one row per link)."""
        return dict(src=self.src, dst=self.dst, capacity=self.capacity, latency=self.latency,
                    tech=self.tech, tier=self.tier, cables=self.cables)

    def to_dataframe(self):
        """The table as a pandas DataFrame (needs the ``analysis`` extra)."""
        import pandas as pd

        return pd.DataFrame(self.as_dict())


def _hop_class(kind_u, kind_v, tech) -> str:
    if kind_u == "switch" or kind_v == "switch":
        return "network"
    nvlink = str(tech).startswith("nvlink") or "nvswitch" in (kind_u, kind_v)
    return "nvlink" if nvlink else "pcie"


def _checked_efficiencies(graph, eff: np.ndarray) -> np.ndarray:
    """Each edge's ``efficiency`` attribute (NaN where it has none); a value outside (0, 1]
    is an error naming the edge."""
    bad = ~np.isnan(eff) & ~((eff > 0) & (eff <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        u, v = next(e for j, e in enumerate(graph.edges()) if j == i)
        raise ValueError(f"edge {u!r} -> {v!r}: efficiency must be a fraction in (0, 1], got "
                         f"{float(eff[i])!r}")
    return eff


def link_efficiency(tech, efficiency=None, own=None) -> float:
    """The fraction of ``tech``'s raw rate reached: ``efficiency`` overrides (one number, or
    a dict by tech), else ``own`` (the edge's ``efficiency`` attribute, written by the
    generators from the :class:`topologies.LinkTech` the cable was built with), else the
    ``topologies`` catalogue's (1 for an unknown technology).

    >>> link_efficiency("ib_ndr", {"ib_ndr": 0.9}), link_efficiency("", None), link_efficiency("mine", None, 0.5)
    (0.9, 1.0, 0.5)
    """
    if isinstance(efficiency, dict) and tech in efficiency:
        return float(efficiency[tech])
    if isinstance(efficiency, (int, float)):
        return float(efficiency)
    if own is not None:
        return float(own)
    try:
        eff = tp.get_link(tech).efficiency if tech else None
    except ValueError:
        eff = None
    return 1.0 if eff is None else float(eff)
