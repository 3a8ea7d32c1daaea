"""RoutingMatrix: the sparse links x flows matrix, stored in factored form."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..traffic import Flows
from ._keys import GroupCopies, ranges
from ._links import LinkTable


def checked_fractions(matrix):
    """``matrix`` (sparse or array-like, links x flows) as float64 CSC, duplicates summed;
    ValueError unless every entry is a finite real number >= 0 (complex lost its imaginary
    part, NaN or inf gave rates with status ok)."""
    import scipy.sparse as sp   # on first use: `import flowsolver` and the command line start without SciPy
    dtype = matrix.dtype if sp.issparse(matrix) else np.asarray(matrix).dtype
    if dtype.kind not in "fiub":
        raise ValueError(f"routing fractions must be real numbers >= 0, got dtype {dtype}")
    csc = sp.csc_matrix(matrix, dtype=np.float64)
    csc.sum_duplicates()
    if csc.nnz and not (np.isfinite(csc.data).all() and (csc.data >= 0).all()):
        has = "negative entries" if np.isfinite(csc.data).all() else "NaN or inf"
        raise ValueError(f"routing fractions must be finite numbers >= 0 (the matrix has {has})")
    return csc


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

    A routing matrix is immutable: the solver keeps what it works out from one (its layout,
    the flows crossing finite links, the spread of its fractions) per matrix object, so its
    arrays must not be changed in place after it is built; derive a new matrix instead (pass
    other capacities, weights or demands to the solver).

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
        import scipy.sparse as sp   # on first use: `import flowsolver` and the command line start without SciPy
        lengths = np.diff(self.seg_ptr)
        per_slot = [lengths[self.flow_seg[:, k][self.flow_seg[:, k] >= 0]].sum() for k in range(self.slots)]
        total = int(np.sum(per_slot))
        # filled in place, with the index type scipy would convert them to (no second copy)
        small = max(self.n_links, self.n_flows, total) < np.iinfo(np.int32).max
        rows = np.empty(total, dtype=np.int32 if small else np.int64)
        cols = np.empty(total, dtype=rows.dtype)
        vals = np.empty(total, dtype=np.float64)
        at = 0
        for k in range(self.slots):
            segs = self.flow_seg[:, k]
            flows = np.flatnonzero(segs >= 0)
            s = segs[flows]
            counts = lengths[s]
            idx = ranges(self.seg_ptr[s], counts)
            end = at + len(idx)
            rows[at:end] = self.seg_link[idx]
            cols[at:end] = np.repeat(flows, counts)
            coef = 1.0 if self.flow_coef is None else np.repeat(self.flow_coef[flows, k], counts)
            vals[at:end] = self.seg_frac[idx] * coef
            at = end
        m = sp.coo_matrix((vals, (rows, cols)), shape=(self.n_links, self.n_flows))
        del rows, cols, vals
        if format in ("csc", "csr"):      # the conversion sums duplicates (in C, 3x faster than on COO)
            return m.asformat(format)
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
        return self._segments_to_links(seg_amount)

    def subset_loads_sparse(self, flows, amounts):
        """The loads of the flows ``flows`` alone carrying ``amounts`` (bytes/s), as ``(links,
        loads)``: the links they cross, in link order, and :meth:`link_loads` read over those
        flows' segments only (no pass over the whole matrix: the cost follows the flows given).

        Examples
        --------
        >>> rm = RoutingMatrix.from_scipy([[1.0, 1.0, 0.0], [0.0, 0.5, 1.0], [0.0, 0.0, 0.0]])
        >>> [a.tolist() for a in rm.subset_loads_sparse([1], [4.0])]
        [[0, 1], [4.0, 2.0]]
        """
        flows = np.asarray(flows, dtype=np.int64)
        segs = self.flow_seg[flows]
        ok = segs >= 0
        per_slot = np.broadcast_to(np.asarray(amounts, dtype=np.float64)[:, None], segs.shape)
        if self.flow_coef is not None:
            per_slot = per_slot * self.flow_coef[flows]
        used, inv = np.unique(segs[ok], return_inverse=True)
        seg_amount = np.bincount(inv.reshape(-1), weights=per_slot[ok], minlength=len(used))
        lengths = np.diff(self.seg_ptr)[used]
        entries = ranges(self.seg_ptr[used], lengths)
        links, at = np.unique(self.seg_link[entries], return_inverse=True)
        loads = np.bincount(at.reshape(-1), weights=self.seg_frac[entries] * np.repeat(seg_amount, lengths),
                            minlength=len(links))
        return links.astype(np.int64), loads

    def _segments_to_links(self, seg_amount) -> np.ndarray:
        """Per-segment amounts -> per-link sums over the segments' entries."""
        return np.bincount(self.seg_link, weights=self.seg_frac * seg_amount[self.entry_segment],
                           minlength=self.n_links)

    def path_latency(self) -> np.ndarray:
        """Per flow: the sum over its links of fraction x link latency (s), fluid-weighted,
        from the factored matrix (needs ``links``).

        >>> import networkx as nx
        >>> g = nx.DiGraph([("a", "b", {"latency": 1e-6}), ("b", "c", {"latency": 2e-6})])
        >>> rm = replace(RoutingMatrix.from_scipy([[1.0, 0.5], [1.0, 0.0]]), links=LinkTable.from_graph(g))
        >>> [round(float(t) * 1e6, 9) for t in rm.path_latency()]     # us: 1 + 2; half of 1
        [3.0, 0.5]
        """
        if self.links is None:
            raise ValueError("path_latency needs a RoutingMatrix with links (a LinkTable)")
        seg_latency = np.bincount(self.entry_segment, weights=self.seg_frac * self.links.latency[self.seg_link],
                                  minlength=self.n_segments + 1)        # slot -1 reads the extra 0
        return self.per_flow_sum(seg_latency)

    def per_flow_sum(self, per_segment) -> np.ndarray:
        """Per flow: the sum over its slots of coefficient x ``per_segment[segment]``
        (``per_segment`` has one extra last entry, 0, that unused slots (-1) read), column
        by column: no (flows, slots) temporary."""
        out = np.zeros(self.n_flows)
        for k in range(self.slots):
            col = per_segment[self.flow_seg[:, k]]
            out += col if self.flow_coef is None else col * self.flow_coef[:, k]
        return out

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
        """Wrap any scipy.sparse (links x flows) matrix of non-negative fractions
        (:func:`checked_fractions`); every column becomes its own segment."""
        csc = checked_fractions(matrix)
        n_links, n_flows = csc.shape
        return cls(seg_ptr=csc.indptr.astype(np.int64), seg_link=csc.indices.astype(np.int32), seg_frac=csc.data.copy(),
                   flow_seg=np.arange(n_flows, dtype=np.int32)[:, None], flow_coef=None,
                   capacity=np.full(n_links, np.inf) if capacity is None else np.asarray(capacity, dtype=np.float64),
                   weights=np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64),
                   demands=np.full(n_flows, np.inf) if demands is None else np.asarray(demands, dtype=np.float64))

    @classmethod
    def one_hop(cls, graph, pairs, policy: str = "one_hop", *, links: LinkTable | None = None,
                edge_index: dict | None = None) -> "RoutingMatrix":
        """One flow per ``(u, v)`` in ``pairs`` (node ids), each carried by the one link
        ``u -> v`` of ``graph`` (e.g. a GPU's link to an NVSwitch that reduces in-switch).
        ``links`` (the graph's :class:`LinkTable`) and ``edge_index`` (``(u, v)`` -> edge
        position) may be passed when the caller keeps them for an unchanged graph.

        Examples
        --------
        >>> import networkx as nx
        >>> g = nx.DiGraph([("a", "s"), ("s", "a")])
        >>> rm = RoutingMatrix.one_hop(g, [("s", "a"), ("a", "s")])
        >>> [rm.column(f)[0].tolist() for f in range(rm.n_flows)]
        [[1], [0]]
        """
        import scipy.sparse as sp   # on first use: `import flowsolver` and the command line start without SciPy
        index = {(u, v): i for i, (u, v) in enumerate(graph.edges())} if edge_index is None else edge_index
        try:
            rows = [index[(u, v)] for u, v in pairs]
        except KeyError as err:
            raise ValueError(f"pairs must be links of the graph: no link {err.args[0]}") from None
        links = LinkTable.from_graph(graph) if links is None else links
        matrix = sp.csc_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(len(links), len(rows)))
        return replace(cls.from_scipy(matrix, capacity=links.capacity), links=links, policy=policy)

    @classmethod
    def stack(cls, matrices, separate_links: bool = False):
        """One matrix holding the flows of several, in order (their weights and demands
        too). By default the matrices share the links (the first's capacities and link
        table: routings of one graph). With ``separate_links`` each gets its own copy of
        the links it uses (block diagonal: independent problems solved together); returns
        then ``(matrix, used)``, ``used[i]`` the original index of matrix ``i``'s links.

        >>> a = RoutingMatrix.from_scipy(np.array([[1.0], [0.5]]), capacity=[1.0, 2.0])
        >>> b = RoutingMatrix.from_scipy(np.array([[0.0], [1.0]]), capacity=[1.0, 2.0])
        >>> RoutingMatrix.stack([a, b]).to_scipy().toarray().tolist()
        [[1.0, 0.0], [0.5, 1.0]]
        >>> block, used = RoutingMatrix.stack([a, b], separate_links=True)
        >>> block.to_scipy().toarray().tolist(), block.capacity.tolist(), [u.tolist() for u in used]
        ([[1.0, 0.0], [0.5, 0.0], [0.0, 1.0]], [1.0, 2.0, 2.0], [[0, 1], [1]])
        """
        matrices = list(matrices)
        if separate_links:
            counts = [m.n_flows for m in matrices]
            return cls.stack(matrices).separate(np.repeat(np.arange(len(matrices)), counts), len(matrices))
        K = max(m.slots for m in matrices)
        seg_off = np.cumsum([0] + [m.n_segments for m in matrices])
        ent_off = np.cumsum([0] + [len(m.seg_link) for m in matrices])
        flow_off = np.cumsum([0] + [m.n_flows for m in matrices])
        ptr = np.concatenate([[0]] + [m.seg_ptr[1:] + ent_off[i] for i, m in enumerate(matrices)])
        flow_seg = np.full((flow_off[-1], K), -1, dtype=np.int32)      # padded once to K slots
        unit = all(m.flow_coef is None for m in matrices)
        flow_coef = None if unit else np.zeros((flow_off[-1], K))
        for i, m in enumerate(matrices):
            rows = slice(flow_off[i], flow_off[i + 1])
            flow_seg[rows, :m.slots] = np.where(m.flow_seg >= 0, m.flow_seg + seg_off[i], -1)
            if not unit:
                flow_coef[rows, :m.slots] = 1.0 if m.flow_coef is None else m.flow_coef
        first, policy = matrices[0], "+".join(sorted({m.policy for m in matrices}))     # theirs (review27 M1)
        return cls(seg_ptr=ptr, seg_link=np.concatenate([m.seg_link for m in matrices]),
                   seg_frac=np.concatenate([m.seg_frac for m in matrices]), flow_seg=flow_seg, flow_coef=flow_coef,
                   capacity=first.capacity, weights=np.concatenate([m.weights for m in matrices]),
                   demands=np.concatenate([m.demands for m in matrices]), links=first.links, policy=policy)

    def flow_rows(self, start: int, stop: int) -> "RoutingMatrix":
        """The flows ``start ... stop-1`` on the same links and segments (views, no copy):
        one step of several routed together.

        >>> rm = RoutingMatrix.from_scipy(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), capacity=[1.0, 2.0])
        >>> rm.flow_rows(1, 3).to_scipy().toarray().tolist()
        [[0.0, 1.0], [1.0, 1.0]]
        """
        return self.take_flows(slice(int(start), int(stop)))

    def take_flows(self, rows) -> "RoutingMatrix":
        """The flows ``rows`` (a slice, or an index or bool array) on the same links and
        segments.

        >>> rm = RoutingMatrix.from_scipy(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), capacity=[1.0, 2.0])
        >>> rm.take_flows(np.array([2, 0])).to_scipy().toarray().tolist()
        [[1.0, 1.0], [1.0, 0.0]]
        """
        pick = lambda a: None if a is None else a[rows]  # noqa: E731
        return replace(self, flow_seg=self.flow_seg[rows], flow_coef=pick(self.flow_coef), weights=self.weights[rows],
                       demands=self.demands[rows], flows=None, flow_src=pick(self.flow_src),
                       flow_dst=pick(self.flow_dst))

    def separate(self, groups, n_groups: int | None = None):
        """Each group of flows on its own copy of the links it uses (block diagonal:
        independent problems solved together, e.g. the steps of a collective routed in one
        call). ``groups``: int per flow, 0 ... G-1. Returns ``(block, used)``: the block's
        links are group 0's used links in link order, then group 1's, ...; ``used[g]`` their
        original indices. Built without a per-group loop (links numbered through a mask
        over groups x links when that is small, else a sort).

        >>> rm = RoutingMatrix.from_scipy(np.array([[1.0, 1.0], [0.5, 0.0]]), capacity=[1.0, 2.0])
        >>> block, used = rm.separate([0, 1])
        >>> block.to_scipy().toarray().tolist(), block.capacity.tolist(), [u.tolist() for u in used]
        ([[1.0, 0.0], [0.5, 0.0], [0.0, 1.0]], [1.0, 2.0, 1.0], [[0, 1], [0]])
        """
        groups = np.asarray(groups, dtype=np.int64)
        if groups.shape != (self.n_flows,):
            raise ValueError(f"groups must give one int per flow ({self.n_flows}), got shape {groups.shape}")
        G = int(groups.max(initial=-1)) + 1 if n_groups is None else int(n_groups)
        valid = self.flow_seg >= 0
        copies = GroupCopies(self.seg_ptr, self.seg_link, (groups[:, None] * self.n_segments + self.flow_seg)[valid],
                             G, self.n_segments, self.n_links)
        flow_seg = np.full(self.flow_seg.shape, -1, dtype=np.int32)
        flow_seg[valid] = copies.key_segment
        used = np.split(copies.link, np.searchsorted(copies.link_group, np.arange(1, G)))
        block = RoutingMatrix(seg_ptr=copies.seg_ptr, seg_link=copies.seg_link.astype(np.int32),
                              seg_frac=self.seg_frac[copies.entries], flow_seg=flow_seg, flow_coef=self.flow_coef,
                              capacity=self.capacity[copies.link], weights=self.weights, demands=self.demands)
        return block, used

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
    """A routing matrix whose identical flows were merged; maps results back. ``routing`` has
    one flow per class; ``inverse[f]`` is original flow ``f``'s class, ``counts[c]`` class
    ``c``'s flows. :func:`~flowsolver.max_min_fair` reads its weights and demands per class:
    a class's total (:meth:`RoutingMatrix.merge_identical` sums them)."""

    routing: RoutingMatrix
    inverse: np.ndarray
    counts: np.ndarray

    def expand(self, merged_rates) -> np.ndarray:
        """Per-original-flow rates from the merged flows' rates (each class split evenly)."""
        merged_rates = np.asarray(merged_rates)
        return merged_rates[..., self.inverse] / self.counts[self.inverse]
