"""RoutingMatrix: the sparse links x flows matrix, stored in factored form."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..traffic import Flows


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


@dataclass(frozen=True, eq=False)
class LinkTable:
    """The directed links of a cluster graph, in the graph's edge order.

    Link ``l`` is the ``l``-th edge of ``graph.edges()`` (the generator's insertion order,
    kept by ``topologies.save`` / ``load``). Arrays: ``src`` and ``dst`` (node ids),
    ``capacity`` (bytes/s), ``latency`` (s), ``tech``, ``tier`` (layer names, ``""`` where
    the graph has none) and ``cables``.
    """

    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    tech: np.ndarray
    tier: np.ndarray
    cables: np.ndarray

    def __len__(self) -> int:
        return len(self.capacity)

    @classmethod
    def from_graph(cls, graph) -> "LinkTable":
        edges = list(graph.edges(data=True))
        obj = lambda xs: np.array(xs, dtype=object) if xs else np.empty(0, dtype=object)  # noqa: E731
        return cls(
            src=obj([u for u, _, _ in edges]),
            dst=obj([v for _, v, _ in edges]),
            capacity=np.array([float(d.get("capacity", 0.0)) for *_, d in edges], dtype=np.float64),
            latency=np.array([float(d.get("latency", 0.0)) for *_, d in edges], dtype=np.float64),
            tech=obj([d.get("tech", "") for *_, d in edges]),
            tier=obj([d.get("tier", "") for *_, d in edges]),
            cables=np.array([int(d.get("cables", 1)) for *_, d in edges], dtype=np.int64),
        )

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


@dataclass(frozen=True, eq=False)
class RoutingMatrix:
    """Sparse links x flows routing matrix, factored into shared *segments*.

    Entry ``(l, f)`` of the matrix is the fraction of flow ``f``'s rate carried by link
    ``l``. The matrix is stored as ``A = sum_k coef[:, k] * S[:, seg[:, k]]``: a segment is a
    sparse column (``seg_link``, ``seg_frac`` in CSR order, ``seg_ptr``) shared by many
    flows - a GPU's path to its NIC, the fabric path between two leaf switches - and each
    flow sums up to ``K`` of them (``flow_seg``, ``-1`` for an empty slot, weighted by
    ``flow_coef``, all ones when ``None``). On ECMP-routed Clos fabrics this keeps the
    storage near ``3 x flows`` instead of ``hops x paths x flows``.

    Attributes
    ----------
    links : LinkTable
    capacity : ndarray
        Per-link capacity, bytes/s (the solver's default).
    weights, demands : ndarray
        Per-flow max-min weight and rate cap (bytes/s, inf for none).
    flows : Flows or None
    flow_src, flow_dst : ndarray or None
        Graph node indices (``list(graph.nodes)`` order) of each flow's endpoints.
    policy : str
    options : dict

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> m = sp.csc_matrix([[1.0, 0.5], [0.0, 0.5]])
    >>> rm = RoutingMatrix.from_scipy(m, capacity=[10.0, 10.0])
    >>> rm.n_links, rm.n_flows, rm.nnz
    (2, 2, 5)
    >>> (rm.to_scipy() != m).nnz
    0
    """

    seg_ptr: np.ndarray
    seg_link: np.ndarray
    seg_frac: np.ndarray
    flow_seg: np.ndarray
    flow_coef: np.ndarray | None
    capacity: np.ndarray
    weights: np.ndarray
    demands: np.ndarray
    links: LinkTable | None = None
    flows: Flows | None = None
    flow_src: np.ndarray | None = None
    flow_dst: np.ndarray | None = None
    node_names: list | None = None
    policy: str = "matrix"
    options: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ sizes
    @property
    def n_links(self) -> int:
        return len(self.capacity)

    @property
    def n_flows(self) -> int:
        return self.flow_seg.shape[0]

    @property
    def n_segments(self) -> int:
        return len(self.seg_ptr) - 1

    @cached_property
    def entry_segment(self) -> np.ndarray:
        """The segment that owns each entry of ``seg_link`` / ``seg_frac`` (int64), computed
        once per matrix.

        >>> m = RoutingMatrix.from_scipy(np.array([[1.0, 0.0], [1.0, 1.0]]))
        >>> m.entry_segment.tolist()
        [0, 0, 1]
        """
        return np.repeat(np.arange(self.n_segments, dtype=np.int64), np.diff(self.seg_ptr))

    @property
    def slots(self) -> int:
        """K: segments per flow (columns of ``flow_seg``)."""
        return self.flow_seg.shape[1]

    @property
    def nnz(self) -> int:
        """Stored entries: segment entries plus used flow slots."""
        return int(len(self.seg_link) + np.count_nonzero(self.flow_seg >= 0))

    @property
    def expanded_nnz(self) -> int:
        """Entries of the unfactored matrix (before duplicates within a column are summed)."""
        lengths = np.diff(self.seg_ptr)
        used = self.flow_seg[self.flow_seg >= 0]
        return int(lengths[used].sum())

    @property
    def nbytes(self) -> int:
        """Memory of the routing arrays, bytes."""
        arrays = [self.seg_ptr, self.seg_link, self.seg_frac, self.flow_seg, self.capacity,
                  self.weights, self.demands]
        if self.flow_coef is not None:
            arrays.append(self.flow_coef)
        return int(sum(a.nbytes for a in arrays))

    def summary(self) -> dict:
        """Sizes and memory, for reports and benchmarks."""
        return dict(links=self.n_links, flows=self.n_flows, segments=self.n_segments,
                    slots=self.slots, nnz=self.nnz, expanded_nnz=self.expanded_nnz,
                    megabytes=self.nbytes / 1e6, policy=self.policy)

    # ------------------------------------------------------------------ views
    def column(self, f: int):
        """Links and fractions of flow ``f`` (duplicates summed), sorted by link."""
        links, fracs = [], []
        for k in range(self.slots):
            s = self.flow_seg[f, k]
            if s < 0:
                continue
            c = 1.0 if self.flow_coef is None else self.flow_coef[f, k]
            a, b = self.seg_ptr[s], self.seg_ptr[s + 1]
            links.append(self.seg_link[a:b])
            fracs.append(self.seg_frac[a:b] * c)
        if not links:
            return np.empty(0, dtype=np.int64), np.empty(0)
        links, fracs = np.concatenate(links), np.concatenate(fracs)
        uniq, inv = np.unique(links, return_inverse=True)
        return uniq, np.bincount(inv, weights=fracs, minlength=len(uniq))

    def to_scipy(self, format: str = "csc") -> sp.spmatrix:
        """The matrix as scipy.sparse (links x flows); duplicates within a column summed.

        Materialises every entry: check ``expanded_nnz`` first on large instances.
        """
        rows, cols, vals = [], [], []
        lengths = np.diff(self.seg_ptr)
        for k in range(self.slots):
            segs = self.flow_seg[:, k]
            flows = np.flatnonzero(segs >= 0)
            s = segs[flows]
            counts = lengths[s]
            idx = _ranges(self.seg_ptr[s], counts)
            rows.append(self.seg_link[idx])
            cols.append(np.repeat(flows, counts))
            coef = 1.0 if self.flow_coef is None else np.repeat(self.flow_coef[flows, k], counts)
            vals.append(self.seg_frac[idx] * coef)
        m = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(self.n_links, self.n_flows))
        m.sum_duplicates()
        return m.asformat(format)

    def link_loads(self, per_flow) -> np.ndarray:
        """``A @ per_flow`` (e.g. rates -> link load in bytes/s) without expanding A."""
        per_flow = np.asarray(per_flow, dtype=np.float64)
        seg_amount = np.zeros(self.n_segments)
        for k in range(self.slots):
            segs = self.flow_seg[:, k]
            ok = segs >= 0
            amount = per_flow[ok] if self.flow_coef is None else per_flow[ok] * self.flow_coef[ok, k]
            seg_amount += np.bincount(segs[ok], weights=amount, minlength=self.n_segments)
        return np.bincount(self.seg_link, weights=self.seg_frac * seg_amount[self.entry_segment],
                           minlength=self.n_links)

    # ------------------------------------------------------------------ builders
    def _canonical_segments(self) -> np.ndarray:
        """Map every segment to the first segment with the same links and fractions."""
        links = self.seg_link.astype(np.int64).tobytes()
        fracs = self.seg_frac.tobytes()
        first: dict = {}
        out = np.empty(self.n_segments, dtype=np.int64)
        ptr = self.seg_ptr
        for s in range(self.n_segments):
            a, b = int(ptr[s]), int(ptr[s + 1])
            out[s] = first.setdefault((links[8 * a:8 * b], fracs[8 * a:8 * b]), s)
        return out

    @classmethod
    def from_scipy(cls, matrix, capacity=None, *, weights=None, demands=None) -> "RoutingMatrix":
        """Wrap any scipy.sparse (links x flows) matrix of non-negative fractions; every
        column becomes its own segment."""
        csc = sp.csc_matrix(matrix, dtype=np.float64)
        csc.sum_duplicates()
        if csc.nnz and (csc.data < 0).any():
            raise ValueError("routing fractions must be >= 0 (the matrix has negative entries)")
        n_links, n_flows = csc.shape
        cap = np.full(n_links, np.inf) if capacity is None else np.asarray(capacity, dtype=np.float64)
        return cls(seg_ptr=csc.indptr.astype(np.int64), seg_link=csc.indices.astype(np.int32),
                   seg_frac=csc.data.copy(), flow_seg=np.arange(n_flows, dtype=np.int32)[:, None],
                   flow_coef=None, capacity=cap,
                   weights=np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64),
                   demands=np.full(n_flows, np.inf) if demands is None else np.asarray(demands, dtype=np.float64))

    def merge_identical(self) -> "MergedRouting":
        """Merge flows with identical columns, weights and caps into one weighted flow each.

        Exact for max-min fairness: ``m`` identical flows always get equal rates, and one
        variable of weight ``m w`` and cap ``m d`` gets their sum. The result maps rates back.
        Columns are compared segment by segment (same links and fractions in each slot).

        >>> import scipy.sparse as sp
        >>> rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 1.0, 0.5]]), capacity=[3.0])
        >>> m = rm.merge_identical()
        >>> m.routing.n_flows, m.counts.tolist(), m.inverse.tolist()
        (2, [2, 1], [0, 0, 1])
        >>> m.expand([4.0, 1.0]).tolist()       # class rates -> per-flow rates
        [2.0, 2.0, 1.0]
        """
        coef = np.ones(self.flow_seg.shape) if self.flow_coef is None else self.flow_coef
        canon = self._canonical_segments()
        seg = np.where(self.flow_seg >= 0, canon[np.maximum(self.flow_seg, 0)], -1)
        key = np.column_stack([seg.astype(np.float64), coef, self.weights, self.demands])
        uniq, first, inverse, counts = np.unique(key, axis=0, return_index=True, return_inverse=True,
                                                 return_counts=True)
        inverse = inverse.reshape(-1)
        merged = RoutingMatrix(
            seg_ptr=self.seg_ptr, seg_link=self.seg_link, seg_frac=self.seg_frac,
            flow_seg=self.flow_seg[first], flow_coef=None if self.flow_coef is None else self.flow_coef[first],
            capacity=self.capacity, weights=self.weights[first] * counts,
            demands=self.demands[first] * counts, links=self.links, flows=None,
            policy=self.policy, options=dict(self.options, merged=True), node_names=self.node_names)
        return MergedRouting(merged, inverse, counts)


@dataclass(frozen=True, eq=False)
class MergedRouting:
    """A routing matrix whose identical flows were merged; maps results back.

    ``routing`` has one flow per class; ``inverse[f]`` is the class of original flow ``f``
    and ``counts[c]`` the number of flows in class ``c``.
    """

    routing: RoutingMatrix
    inverse: np.ndarray
    counts: np.ndarray

    def expand(self, merged_rates) -> np.ndarray:
        """Per-original-flow rates from the merged flows' rates (each class split evenly)."""
        merged_rates = np.asarray(merged_rates)
        return merged_rates[..., self.inverse] / self.counts[self.inverse]


def _ranges(starts, counts) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` for each (s, c), vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    nz = counts > 0
    starts, counts = starts[nz], counts[nz]
    out = np.ones(total, dtype=np.int64)
    ends = np.cumsum(counts)
    out[0] = starts[0]
    out[ends[:-1]] = starts[1:] - (starts[:-1] + counts[:-1] - 1)
    return np.cumsum(out)
