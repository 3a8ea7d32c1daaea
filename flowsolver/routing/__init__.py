"""Routing: a cluster graph + flows + a policy -> a sparse RoutingMatrix.

Policies
--------
``"ecmp"``
    Fluid split over all equal-cost shortest paths: every switch splits what it forwards
    evenly over its next hops on a shortest path, in proportion to their parallel cables
    (ideal packet spraying / adaptive routing).
``"ecmp_hash"``
    Each flow - or each of its ``subflows`` sub-flows, which carry equal shares (NCCL opens
    several connections per GPU pair; Llama 3 used 16) - is pinned to one shortest path,
    chosen hop by hop by a seeded hash among the next hops (weighted by cables), so hash
    collisions show up as uneven link loads.
``"dor"``
    Dimension-order routing on a ``topologies.torus``: dimensions corrected in order, the
    shorter way round, the + direction at a tie.
``"minimal"``, ``"valiant"``, ``"ugal"``
    DragonFly: minimal = one global hop, fluid over the working global cables between the
    two groups; valiant = minimal to a random router of a random third group, then minimal
    to the destination; ugal = per flow, minimal or valiant by the UGAL-G rule (queue x
    hops, with link load / capacity as the queue) in the fluid limit: from all-minimal, a
    damped best response over a few rounds, each flow taking the path of the smaller
    (max load / capacity on the path) x (hops) under the current loads.
``"shortest"``
    Generic: fluid split over the shortest paths of the whole graph, for any graph a user
    built or edited. GPUs are never transit nodes unless the graph has no switch (a torus of
    chips). No rail or server rule is applied.

Paths
-----
On switched fabrics every policy but ``shortest`` cuts a path into the sending GPU's path
to its NIC, the fabric path between the two NICs' switches, and the receiving NIC's path
to its GPU (see :mod:`._graph_index`). Traffic between GPUs of one server stays inside the
server (NVSwitch, or PCIe on the PCIe server) and never leaves through a NIC. Traffic
leaving a server uses the NIC of the sending GPU's rail; with ``pxn=True`` it first moves
inside the server to the GPU on the receiving GPU's rail (NCCL's PXN) and leaves through
that rail. A GPU whose own NIC has no working uplink uses the working NIC of the next rail
of its server. Links of capacity 0 or removed are never used; a pair left without a path
raises :class:`RoutingError` naming it.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..traffic import Flows
from ._shortest_paths import ecmp_fluid, ecmp_hashed
from ._fabric import DragonflyTables, SizedDraws, dor_paths
from ._links import HOP_CLASSES, Bottleneck, LinkTable, first_tier, link_efficiency
from ._keys import GroupCopies
from ._matrix import MergedRouting, RoutingMatrix
from ._cache import PairPaths, clear_route_cache, path_computations
from ._endpoints import endpoint_parts
from ._graph_index import GraphIndex, RoutingError, Segments, gpu_nodes, graph_memo, unchanged, unique_pairs

__all__ = ["route", "path_computations", "clear_route_cache", "unchanged", "graph_memo", "unique_pairs", "gpu_nodes", "RoutingMatrix", "LinkTable", "Bottleneck", "MergedRouting", "RoutingError", "POLICIES", "HOP_CLASSES",
           "link_efficiency", "first_tier"]

POLICIES = ("ecmp", "ecmp_hash", "dor", "minimal", "valiant", "ugal", "shortest")


def route(graph, flows: Flows, policy: str = "ecmp", *, subflows: int = 1, seed: int = 0,
          pxn: bool = False, hash_keys=None, groups=None) -> RoutingMatrix:
    """Compile ``flows`` on ``graph`` into a :class:`RoutingMatrix` under ``policy``.

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster graph (``topologies`` generators, or built/edited by hand).
    flows : Flows
        Endpoints as GPU ranks (``topologies.gpus`` order) or node ids.
    policy : str
        One of ``ecmp``, ``ecmp_hash``, ``dor``, ``minimal``, ``valiant``, ``ugal``, ``shortest``.
    subflows : int
        Sub-flows per flow for ``ecmp_hash`` (>= 1).
    seed : int
        Seed of the ``ecmp_hash`` hash and of the Valiant / UGAL intermediate choice.
    pxn : bool
        Cross-rail traffic moves to the destination rail inside the sending server first.
    hash_keys : array of int (flows,), optional
        What ``ecmp_hash`` hashes for each flow instead of its index in ``flows``: flows
        routed together that must take the paths they would take routed apart (the steps
        of a collective, each flow keyed by its index in its own step).
    groups : array of int (flows,), optional
        Flows routed together that must be routed as if each group were its own call
        (the steps of a collective): ``ecmp_hash`` hashes a flow's index in its group
        (unless ``hash_keys`` says otherwise), ``valiant`` and ``ugal`` draw a flow's
        intermediate router as its group's call would, and ``ugal`` weighs each group's
        own load. The routes equal those of one call per group, stacked.

    Notes
    -----
    Routing is compiled once per graph: its integer index, link table, server parts and
    every fabric path computed (per pair of attach switches, per rule) are kept with the
    graph and reused by later calls, so the steps of a collective, the candidates of
    ``"auto"`` and the groups of a training step route only the pairs not seen before.
    A graph edited in place
    (any node or edge added or removed, any attribute of an edge, the kind, server, rail,
    role or group of a node) gets a fresh cache, whatever the edit leaves equal (a failure
    moved to another cable of the same capacity); for an edit of another node attribute
    call :func:`clear_route_cache`. A cached route is identical to a fresh one.

    Examples
    --------
    >>> import topologies as tp
    >>> g = tp.fat_tree(4)
    >>> rm = route(g, Flows([0], [15], 1e6))
    >>> links, fracs = rm.column(0)
    >>> sorted(set(np.round(fracs, 4).tolist()))   # 2 uplinks of 1/2, 4 core links of 1/4, ...
    [0.25, 0.5, 1.0]
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if not isinstance(flows, Flows):
        raise ValueError(f"flows must be a flowsolver.Flows, got {type(flows).__name__}")
    subflows = _checks.integer("subflows", subflows)
    if subflows != 1 and policy != "ecmp_hash":
        raise ValueError(f"subflows applies to policy 'ecmp_hash' only (policy is {policy!r})")
    hash_keys = _per_flow_keys("hash_keys", hash_keys, len(flows))
    groups = _per_flow_keys("groups", groups, len(flows))
    if groups is not None:
        if len(groups) and groups.max() >= len(groups):    # sparse ids: numbered 0 ... G-1 in order
            groups = np.unique(groups, return_inverse=True)[1].reshape(-1)
        if hash_keys is None and policy == "ecmp_hash":
            hash_keys = _positions(groups)[0]
    ix = GraphIndex.of(graph)
    src = ix.resolve(flows.src, "src")
    dst = ix.resolve(flows.dst, "dst")
    store = Segments()
    n = len(flows)
    if policy == "shortest":
        slots, coef = _shortest(ix, store, src, dst)
    else:
        slots, coef = _structured(ix, store, src, dst, policy, subflows, seed, pxn, flows, hash_keys, groups)
    ptr, link, frac = store.finish()
    return RoutingMatrix(
        seg_ptr=ptr, seg_link=link, seg_frac=frac, flow_seg=slots.astype(np.int32, copy=False),
        flow_coef=coef, capacity=ix.capacity.copy(), weights=flows.weights.copy(),
        demands=flows.demands.copy(), links=ix.memo("links", lambda: LinkTable.from_graph(graph)), flows=flows,
        flow_src=src, flow_dst=dst, node_names=ix.nodes, policy=policy,
        options=dict(subflows=subflows, seed=seed, pxn=pxn, flows=n))


# --------------------------------------------------------------------------- helpers
def _pair_segments(store, a, b, paths, ix, rule, what="route"):
    """One segment per distinct pair (a[i], b[i]); ``paths(ua, ub)`` returns entries, for
    the pairs that no earlier route() on this graph computed under ``rule`` (the others
    come from the index's cache). Returns the segment id of every input pair."""
    ua, ub, inv = unique_pairs(a, b, ix.nv)
    uniq = ua * ix.nv + ub

    def compute(x, y):
        pair, link, frac, *rest = paths(x, y)
        if rest and len(rest[0]):
            j = int(rest[0][0])
            raise RoutingError(f"no path from {ix.name(x[j])} to {ix.name(y[j])} ({what}); "
                               "the links between them are missing or failed")
        return pair, link, frac

    pair, link, frac = ix.memo(("paths", rule), PairPaths).entries(uniq, ua, ub, compute)
    first = store.add(pair, link, frac, len(uniq))
    return first + inv.reshape(-1)


def _shortest(ix, store, src, dst):
    transit = ~ix.is_gpu if (ix.is_switch | (ix.kind == "nvswitch")).any() else np.ones(ix.nv, bool)
    cg, local = ix.memo("compact-shortest", lambda: ix.compact(np.arange(ix.nv), transit))
    seg = _pair_segments(store, src, dst, lambda a, b: ecmp_fluid(cg, local[a], local[b]), ix, "shortest")
    return seg[:, None], None


def _structured(ix, store, src, dst, policy, subflows, seed, pxn, flows, hash_keys=None, groups=None):
    """Slots (flows, K) and coefficients of every flow: its way out of the source server,
    the fabric part under ``policy``, its way into the destination server."""
    ends = endpoint_parts(ix, store, src, dst, pxn)
    attach_s, attach_d, up, down, intra, intra_seg, fabric_nodes = ends
    inter = np.flatnonzero(~intra & (attach_s != attach_d))
    keys = inter if hash_keys is None else hash_keys[inter]
    cols = _fabric_columns(ix, store, attach_s[inter], attach_d[inter], inter, policy, subflows, seed, flows,
                           fabric_nodes, keys, None if groups is None else groups[inter])
    return _slots(len(src), intra, intra_seg, up, down, inter, cols)


def _per_flow_keys(name, keys, n):
    """``keys`` as an int64 array of one integer >= 0 per flow (None stays None), else a
    ValueError naming ``name`` and what is wrong."""
    if keys is None:
        return None
    keys = np.asarray(keys)
    if keys.shape != (n,):
        raise ValueError(f"{name} must be one integer >= 0 per flow ({n}), got shape {keys.shape}")
    if not np.issubdtype(keys.dtype, np.integer):
        raise ValueError(f"{name} must be one integer >= 0 per flow, got dtype {keys.dtype}")
    if (keys < 0).any():
        raise ValueError(f"{name} must be one integer >= 0 per flow, got {int(keys.min())}")
    return keys.astype(np.int64, copy=False)


def _positions(groups):
    """Per element of ``groups``: its position among the elements of its group (in order)
    and the size of its group.

    >>> [a.tolist() for a in _positions(np.array([1, 0, 1, 1, 0]))]
    [[0, 0, 1, 2, 1], [3, 2, 3, 3, 2]]
    """
    groups = np.asarray(groups, dtype=np.int64)
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups)
    starts = np.cumsum(sizes) - sizes
    pos = np.empty(len(groups), dtype=np.int64)
    pos[order] = np.arange(len(groups)) - starts[groups[order]]
    return pos, sizes[groups]


def _fabric_columns(ix, store, a, b, inter, policy, subflows, seed, flows, fabric_nodes, keys, groups=None):
    """The fabric part of the flows ``inter`` (from fabric node ``a`` to ``b``) under
    ``policy``: a list of (segment ids, coefficient), one per fabric slot (``keys``: what
    ecmp_hash hashes per flow; ``groups``: each flow's group, routed as its own call)."""
    if policy in ("ecmp", "ecmp_hash"):
        cg, local = ix.memo("compact-fabric", lambda: ix.compact(fabric_nodes))
        if policy == "ecmp":
            return [(_pair_segments(store, a, b, lambda x, y: ecmp_fluid(cg, local[x], local[y]), ix, "ecmp"), 1.0)]
        return _hashed(ix, store, cg, local, a, b, keys, subflows, seed)
    if policy == "dor":
        return [(_pair_segments(store, a, b, lambda x, y: dor_paths(ix, x, y), ix, "dor"), 1.0)]
    df = ix.memo("dragonfly", lambda: DragonflyTables(ix))
    minimal = lambda x, y: _pair_segments(store, x, y, df.minimal, ix, "minimal")  # noqa: E731
    seg_min = minimal(a, b)
    if policy == "minimal":
        return [(seg_min, 1.0)]
    within = None if groups is None else _positions(groups)
    mid = df.intermediate(a, b, seed, within)
    has = mid >= 0
    s1 = seg_min.copy()
    s2 = np.full(len(a), -1, dtype=np.int64)
    if has.any():
        s1[has] = minimal(a[has], mid[has])
        s2[has] = minimal(mid[has], b[has])
    if policy == "ugal":
        use_min = _ugal_choice(ix, store, flows.sizes[inter], seg_min, s1, s2, seed, groups=groups, within=within)
        s1 = np.where(use_min, seg_min, s1)
        s2 = np.where(use_min, -1, s2)
    return [(s1, 1.0), (s2, 1.0)]


def _slots(n, intra, intra_seg, up, down, inter, cols):
    """The (flows, K) slot table (int32) and its coefficients (None when all are 1): the way
    out, the fabric columns, the way in; unused columns dropped."""
    K = 2 + len(cols)
    has_intra = intra_seg is not None and bool(intra.any())
    columns = [np.where(intra, intra_seg, up) if has_intra else up]
    fabric = []
    for seg, _ in cols:
        col = np.full(n, -1, dtype=np.int32)
        col[inter] = seg
        fabric.append(col)
    columns += fabric + [np.where(intra, -1, down) if has_intra else down]
    keep = [True] + [bool((c >= 0).any()) for c in columns[1:]]
    slots = np.empty((n, sum(keep)), dtype=np.int32)
    for j, c in enumerate(c for c, k in zip(columns, keep) if k):
        slots[:, j] = c
    if not any(c != 1.0 for _, c in cols):
        return slots, None
    coef = np.ones((n, K))
    for j, (_, c) in enumerate(cols):
        coef[inter, 1 + j] = c
    return slots, coef[:, keep]


def _hashed(ix, store, cg, local, a, b, rows, subflows, seed):
    """Fabric slots of ecmp_hash: one hashed path per (flow, sub-flow), deduplicated."""
    if not len(rows):          # no flow crosses the fabric (all inside a server or under one switch)
        return [(np.empty(0, dtype=np.int64), 1.0 / subflows)] * subflows
    cols = []
    for sub in range(subflows):
        key = rows.astype(np.int64) * subflows + sub
        paths, path_key, bad = ecmp_hashed(cg, local[a], local[b], key, seed)
        if len(bad):
            j = int(bad[0])
            raise RoutingError(f"no path from {ix.name(a[j])} to {ix.name(b[j])} (route); "
                               "the links between them are missing or failed")
        if path_key is not None:
            _, first, inv = np.unique(path_key, return_index=True, return_inverse=True)
        else:
            _, first, inv = np.unique(paths, axis=0, return_index=True, return_inverse=True)
        up = paths[first].astype(np.int64)
        up = up.reshape(len(first), -1)
        owner = np.repeat(np.arange(len(first)), up.shape[1]).reshape(up.shape)
        ok = up >= 0
        sid = store.add(owner[ok], up[ok], np.ones(int(ok.sum())), len(first))
        cols.append((sid + inv.reshape(-1), 1.0 / subflows))
    return cols


def _ugal_choice(ix, store, sizes, seg_min, s1, s2, seed=0, rounds=12, groups=None, within=None):
    """UGAL-G in the fluid limit (see the module docstring): True where minimal wins.

    Starting from all-minimal, each round every flow compares, on the current loads,
    (max load / capacity over its minimal path) x (its hops) with the same for its Valiant
    path; each flow that would gain by switching switches with probability 1/2 (damped
    best response, seeded), for ``rounds`` rounds. ``groups``: each flow's group, played
    as its own call (its own loads, its own draws, its own last round); the loads are kept
    per group on each group's copy of the links it uses (``within``: its
    :func:`_positions`, when known).
    """
    n = len(seg_min)
    groups = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    draws = SizedDraws(seed, *(_positions(groups) if within is None else within))
    ptr, link, frac = store.finish()
    S = len(ptr) - 1
    lists = (seg_min, s1, s2)
    used = np.concatenate([groups[c >= 0] * S + c[c >= 0] for c in lists])
    copies = GroupCopies(ptr, link, used, int(groups.max(initial=-1)) + 1, S, len(ix.capacity))
    ends = np.cumsum([0] + [int((c >= 0).sum()) for c in lists])
    copy_of = []
    for k, c in enumerate(lists):        # each flow's copy of each of its segments, -1 where none
        col = np.full(n, -1, dtype=np.int64)
        col[c >= 0] = copies.key_segment[ends[k]:ends[k + 1]]
        copy_of.append(col)
    seg_min, s1, s2 = copy_of
    n_seg, owner = len(copies.segment), np.repeat(np.arange(len(copies.segment)), np.diff(copies.seg_ptr))
    link, frac = copies.seg_link, frac[copies.entries]
    cap = np.where(ix.capacity > 0, ix.capacity, np.inf)[copies.link]
    amount = np.where(sizes > 0, sizes, 1.0)         # all 1 in a group whose sizes are all 0
    seg_hops = np.bincount(owner, weights=frac, minlength=n_seg)
    has_val = s2 >= 0
    use_min = np.ones(n, dtype=bool)

    def cost(segs_list, q):
        seg_q = np.zeros(n_seg)
        np.maximum.at(seg_q, owner, q[link])
        worst = np.zeros(n)
        hops = np.zeros(n)
        for segs in segs_list:
            ok = segs >= 0
            worst[ok] = np.maximum(worst[ok], seg_q[segs[ok]])
            hops[ok] += seg_hops[segs[ok]]
        return worst * hops

    for _ in range(rounds):
        seg_amount = np.zeros(n_seg)
        for segs, on in ((seg_min, use_min), (s1, ~use_min), (s2, ~use_min)):
            ok = (segs >= 0) & on
            seg_amount += np.bincount(segs[ok], weights=amount[ok], minlength=n_seg)
        q = np.bincount(link, weights=frac * seg_amount[owner], minlength=len(cap)) / cap
        c_min, c_val = cost([seg_min], q), cost([s1, s2], q)
        want = has_val & np.where(use_min, c_val < c_min, c_min < c_val)
        if not want.any():       # a group none of whose flows would switch has played its last round
            break
        flip = want & (draws.take(lambda rng, m: rng.random(m)) < 0.5)
        use_min ^= flip
    return use_min | ~has_val
