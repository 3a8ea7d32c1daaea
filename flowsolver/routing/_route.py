"""``route()``: a graph, flows and a registered policy compiled into a :class:`RoutingMatrix`
(the way out of the sending server, the policy's fabric part, the way into the receiving
one; or the policy's whole path for a ``whole_path`` policy)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import _checks
from ..traffic import Flows
from ._endpoints import endpoint_parts, uplink_pairs
from ._graph_index import GraphIndex, Segments
from ._keys import positions
from ._links import LinkTable
from ._matrix import RoutingMatrix
from ._policies import POLICIES, PolicyCall, policy_of

__all__ = ["route"]


def route(graph, flows: Flows, policy: str = "ecmp", *, subflows: int = 1, seed: int = 0,
          pxn: bool = False, hash_keys=None, groups=None, relays=None) -> RoutingMatrix:
    """Compile ``flows`` on ``graph`` into a :class:`RoutingMatrix` under ``policy``.

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster graph (``topologies`` generators, or built/edited by hand).
    flows : Flows
        Endpoints as GPU ranks (``topologies.gpus`` order) or node ids.
    policy : str
        One of :data:`POLICIES`: ``ecmp``, ``ecmp_hash``, ``dor``, ``minimal``, ``valiant``,
        ``ugal``, ``shortest`` and those added with :func:`register_policy`.
    subflows : int
        Sub-flows per flow for ``ecmp_hash`` (>= 1).
    seed : int
        Seed of the ``ecmp_hash`` hash and of the Valiant / UGAL intermediate choice.
    pxn : bool
        Cross-rail traffic moves to the destination rail inside the sending server first.
    relays : sequence of GPU ranks or node ids, optional
        With ``pxn``, the GPUs a cross-rail flow may be relayed through (NCCL's communicator:
        its topology holds only the communicator's GPUs, so PXN relays through the NIC's local
        GPU only where that GPU is one of them, ``src/graph/paths.cc`` ``ncclTopoGetLocalGpu``
        in the PXN loop); a flow whose relay is not one leaves by its own rail's NIC.
        ``None``: every GPU may relay.
    hash_keys : array of int (flows,), optional
        What ``ecmp_hash`` hashes for each flow instead of its index in ``flows``: flows
        routed together that must take the paths they would take routed apart (the steps
        of a collective, each flow keyed by its index in its own step).
    groups : array of int (flows,), optional
        Flows routed together that must be routed as if each group were its own call
        (the steps of a collective): ``ecmp_hash`` hashes a flow's index in its group
        (unless ``hash_keys`` says otherwise), ``valiant`` and ``ugal`` draw a flow's
        intermediate router as its group's call would, and ``ugal`` weighs each group's
        own load. The routes equal those of one call per group, stacked (a policy whose
        registration declares no dependence on its call routes the same either way).

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
    chosen = policy_of(policy)
    if not isinstance(flows, Flows):
        raise ValueError(f"flows must be a flowsolver.Flows, got {type(flows).__name__}")
    subflows = _checks.integer("subflows", subflows)
    seed = _checks.integer("seed", seed, minimum=0, maximum=2**63 - 1)    # (1.5 and 2**70 were taken, or overflowed)
    if not isinstance(pxn, (bool, np.bool_)):
        raise ValueError(f"pxn must be True or False, got {pxn!r}")
    if relays is not None and not pxn:
        raise ValueError("relays names the GPUs PXN may relay through: it needs pxn=True")
    if not getattr(graph, "is_directed", lambda: False)():
        raise ValueError(f"graph must be a networkx.DiGraph (a cluster graph: topologies' generators), "
                         f"got {type(graph).__name__}")
    if subflows != 1 and not chosen.subflows:
        takes = [p for p in POLICIES if policy_of(p).subflows]
        raise ValueError(f"subflows applies to {'policy' if len(takes) == 1 else 'policies'} "
                         f"{', '.join(map(repr, takes))} only (policy is {policy!r})")
    hash_keys = _per_flow_keys("hash_keys", hash_keys, len(flows))
    groups = _per_flow_keys("groups", groups, len(flows))
    if groups is not None:
        if len(groups) and groups.max() >= len(groups):    # sparse ids: numbered 0 ... G-1 in order
            groups = np.unique(groups, return_inverse=True)[1].reshape(-1)
        if hash_keys is None and chosen.depends_on_order:
            hash_keys = positions(groups)[0]
    ix = GraphIndex.of(graph)
    src = ix.resolve(flows.src, "src")
    dst = ix.resolve(flows.dst, "dst")
    relay = None
    if relays is not None:      # a mask over the nodes: the GPUs a PXN relay may be
        relay = np.zeros(ix.nv, dtype=bool)
        if isinstance(relays, (str, bytes)) or not hasattr(relays, "__iter__"):
            raise ValueError(f"relays must be a sequence of GPU ranks or GPU node ids (the GPUs PXN may relay "
                             f"through), got {relays!r}")
        given = list(relays)
        for r in given:         # GPU ranks or GPU node ids; a bool or a float is no rank
            if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer, str)):
                raise ValueError(f"relays must be GPU ranks or GPU node ids, got {r!r}")
        if given:
            kinds = {isinstance(r, (int, np.integer)) for r in given}
            nodes = ix.resolve(np.asarray(given, dtype=np.int64 if kinds == {True} else object), "relays",
                               listed=True)
            if not ix.is_gpu[nodes].all():
                bad = given[int(np.flatnonzero(~ix.is_gpu[nodes])[0])]
                raise ValueError(f"relays must be GPU ranks or GPU node ids: {bad!r} is not a GPU")
            relay[nodes] = True
    if (same := np.flatnonzero(src == dst)).size:      # a rank and its GPU's node id: one node
        f = int(same[0])
        given = [getattr(x, "item", lambda x=x: x)() for x in (flows.src[f], flows.dst[f])]
        raise ValueError(f"flow {f} has src == dst ({ix.nodes[src[f]]!r}, given as {given[0]!r} and "
                         f"{given[1]!r}); a flow needs two distinct endpoints")
    store = Segments()
    n = len(flows)
    if chosen.whole_path:
        call = PolicyCall(ix, store, src, dst, flows.sizes, np.arange(n) if hash_keys is None else hash_keys,
                          groups, seed, subflows, None)
        slots, coef = _whole_path_slots(n, _columns(chosen, call))
    else:
        slots, coef = _structured(ix, store, src, dst, chosen, subflows, seed, pxn, flows, hash_keys, groups, relay)
    ptr, link, frac = store.finish()
    rm = RoutingMatrix(
        seg_ptr=ptr, seg_link=link, seg_frac=frac, flow_seg=slots.astype(np.int32, copy=False),
        flow_coef=coef, capacity=ix.capacity.copy(), weights=flows.weights.copy(),
        demands=flows.demands.copy(), links=ix.memo("links", lambda: LinkTable.from_graph(graph)), flows=flows,
        flow_src=src, flow_dst=dst, node_names=ix.nodes, policy=policy,
        options=dict(subflows=subflows, seed=seed, pxn=pxn, flows=n))
    if not chosen.builtin:
        _check_conserved(rm, ix, chosen.name)           # a policy registered from outside: its columns checked
    return rm


def _structured(ix, store, src, dst, chosen, subflows, seed, pxn, flows, hash_keys=None, groups=None, relay=None):
    """Slots (flows, K) and coefficients of every flow: its way out of the source server,
    the fabric part under the ``chosen`` policy, its way into the destination server (once
    per pair of uplinks it is split over, where a NIC has several: :func:`uplink_pairs`)."""
    attach_s, attach_d, up, down, intra, intra_seg, fabric_nodes = endpoint_parts(ix, store, src, dst, pxn, relay)
    keys = np.arange(len(src)) if hash_keys is None else hash_keys
    pairs = uplink_pairs(ix, attach_s, attach_d, up, down, keys, seed, chosen.depends_on_order,
                         subflows if chosen.subflows else 1, fabric_nodes)
    crossing = ~intra[pairs.flow] & (pairs.a != pairs.b)
    whole = np.flatnonzero(crossing & (pairs.sub < 0))
    own = np.flatnonzero(crossing & (pairs.sub >= 0))     # a hashed sub-flow on its own pair: routed as one

    def call(rows, k, row_keys):
        f = pairs.flow[rows]
        sizes = flows.sizes[f] if pairs.share is None else flows.sizes[f] * pairs.share[rows]
        return _columns(chosen, PolicyCall(ix, store, pairs.a[rows], pairs.b[rows], sizes, row_keys,
                                           None if groups is None else groups[f], seed, k, fabric_nodes))

    cols = call(whole, subflows, keys[pairs.flow[whole]])
    if own.size:    # sub-flow s keyed k x subflows + s: the path it takes among a flow's sub-flows
        cols = _stacked(cols, len(whole), call(own, 1, keys[pairs.flow[own]] * subflows + pairs.sub[own]), len(own))
    return _slots(len(src), intra, intra_seg, pairs, np.concatenate([whole, own]), cols)


def _stacked(first, n_first, second, n_second) -> list:
    """Columns of two policy calls over rows ``0 ... n_first - 1`` and the ``n_second`` rows
    after them (-1 where a call has fewer columns)."""
    out = []
    for j in range(max(len(first), len(second))):
        parts = [(cols[j][0], cols[j][1]) if j < len(cols) else (np.full(n, -1, dtype=np.int64), 1.0)
                 for cols, n in ((first, n_first), (second, n_second))]
        seg = np.concatenate([np.asarray(seg, dtype=np.int64) for seg, _ in parts])
        coef = np.concatenate([np.broadcast_to(np.asarray(c, dtype=np.float64), (n,))
                               for (_, c), n in zip(parts, (n_first, n_second))])
        out.append((seg, coef))
    return out


def _columns(chosen, call) -> list:
    """The policy's columns for ``call``: one call of its function, or one per group when
    its routes depend on the call and it does not route the groups apart itself."""
    if call.groups is None or chosen.handles_groups or not chosen.per_call:
        return _checked_columns(chosen, call, chosen.function(call))
    order = np.argsort(call.groups, kind="stable")
    cuts = np.flatnonzero(np.diff(call.groups[order])) + 1
    parts = []
    for rows in np.split(order, cuts) if len(order) else []:
        sub = replace(call, src=call.src[rows], dst=call.dst[rows], sizes=call.sizes[rows], keys=call.keys[rows],
                      groups=None)
        parts.append((rows, _checked_columns(chosen, sub, chosen.function(sub))))
    n = len(call.src)
    out = []
    for j in range(max((len(cols) for _, cols in parts), default=0)):
        seg, coef = np.full(n, -1, dtype=np.int64), np.ones(n)
        for rows, cols in parts:
            if j < len(cols):
                seg[rows] = cols[j][0]
                coef[rows] = cols[j][1]
        out.append((seg, coef))
    return out


def _checked_columns(chosen, call, cols) -> list:
    """``cols`` as a policy function must return them, else a ValueError naming the policy."""
    n = len(call.src)
    try:
        cols = [(np.asarray(seg, dtype=np.int64).reshape(-1), c) for seg, c in cols]
    except (TypeError, ValueError):
        raise ValueError(f"policy {chosen.name!r} must return a list of (segment ids, coefficient) columns, "
                         f"got {cols!r:.200}") from None
    for seg, c in cols:
        if len(seg) != n or np.shape(c) not in ((), (n,)):
            raise ValueError(f"policy {chosen.name!r} returned a column of {len(seg)} segment ids and coefficient "
                             f"shape {np.shape(c)} for {n} flows")
        if len(seg) and (seg.min() < -1 or seg.max() >= call.store.count):
            bad = int(seg[(seg < -1) | (seg >= call.store.count)][0])
            raise ValueError(f"policy {chosen.name!r} returned segment ids outside -1 ... {call.store.count - 1} "
                             f"(the segments it added; -1: none), e.g. {bad}")
        coef = np.asarray(c, dtype=np.float64)
        if not (np.all(np.isfinite(coef)) and np.all(coef > 0)):
            raise ValueError(f"policy {chosen.name!r} returned a coefficient that is not a finite number > 0: "
                             f"{coef.ravel()[~(np.isfinite(coef.ravel()) & (coef.ravel() > 0))][0]!r}")
    return cols


def _check_conserved(rm, ix, name) -> None:
    """ValueError unless every flow of ``rm`` is conserved at every node: it leaves its source
    and enters its destination whole and what enters another node leaves it (what a
    registered policy's columns must add up to: a coefficient of 0.5 routed half a flow
    through the fabric, a policy without columns none of it, and the solver rated the whole)."""
    A = rm.to_scipy().tocoo()
    n = np.int64(rm.n_flows)
    flow = np.arange(n)
    keys = np.concatenate([ix.head[A.row] * n + A.col, ix.tail[A.row] * n + A.col,
                           rm.flow_src.astype(np.int64) * n + flow, rm.flow_dst.astype(np.int64) * n + flow])
    net = np.concatenate([A.data, -A.data, np.ones(n), -np.ones(n)])     # in - out + (1 at the source, -1 at the end)
    uniq, inverse = np.unique(keys, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=net, minlength=len(uniq))
    if (bad := np.flatnonzero(np.abs(total) > 1e-9)).size:
        node, f = divmod(int(uniq[bad[0]]), int(n))
        flow_net = total[bad[0]] - (node == rm.flow_src[f]) + (node == rm.flow_dst[f])
        raise ValueError(f"policy {name!r}: flow {f} ({ix.nodes[rm.flow_src[f]]} -> {ix.nodes[rm.flow_dst[f]]}) is "
                         f"not conserved at {ix.nodes[node]} (in - out = {flow_net:.6g}): its columns' segments and "
                         "coefficients must route each flow whole, from its source to its destination")


def _whole_path_slots(n, cols):
    """Slots (flows, K) and coefficients (None when all 1) of whole-path columns."""
    if not cols:
        return np.full((n, 1), -1, dtype=np.int64), None
    slots = np.stack([seg for seg, _ in cols], axis=1)
    if not any(np.any(np.asarray(c) != 1.0) for _, c in cols):
        return slots, None
    return slots, np.stack([np.broadcast_to(np.asarray(c, dtype=np.float64), (n,)) for _, c in cols], axis=1)


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


def _slots(n, intra, intra_seg, pairs, inter, cols):
    """The (flows, K) slot table (int32) and its coefficients (None when all are 1): per pair
    of uplinks of a flow (one, unless a NIC has several), the way out, the fabric columns,
    the way in, scaled by the pair's share; unused columns dropped."""
    flow, block, up, down, share = pairs.flow, pairs.block, pairs.up, pairs.down, pairs.share
    has_intra = intra_seg is not None and bool(intra.any())
    plain = not any(np.any(np.asarray(c) != 1.0) for _, c in cols) and share is None
    at = np.full(len(flow), -1, dtype=np.int64)        # each row's place in the policy's columns (-1: none)
    at[inter] = np.arange(len(inter))
    columns, coefs = [], []
    for p in range(int(block.max()) + 1 if len(block) else 1):
        rows = np.flatnonzero(block == p)
        weight = None
        if not plain:           # coefficients only where some differ from 1 (none on the common path)
            weight = np.ones(n)
            if share is not None:
                weight[flow[rows]] = share[rows]
        mine = rows[at[rows] >= 0]
        out = np.full(n, -1, dtype=np.int32)
        out[flow[rows]] = up[rows]
        if p == 0 and has_intra:
            out = np.where(intra, intra_seg, out)
        columns.append(out)
        coefs.append(weight)
        for seg, c in cols:
            col = np.full(n, -1, dtype=np.int32)
            col[flow[mine]] = np.asarray(seg)[at[mine]]
            columns.append(col)
            if not plain:
                coef = weight.copy()
                coef[flow[mine]] *= np.broadcast_to(np.asarray(c, dtype=np.float64), (len(inter),))[at[mine]]
            coefs.append(None if plain else coef)
        out = np.full(n, -1, dtype=np.int32)
        out[flow[rows]] = down[rows]
        columns.append(np.where(intra, -1, out) if has_intra else out)
        coefs.append(weight)
    keep = [True] + [bool((c >= 0).any()) for c in columns[1:]]
    slots = np.empty((n, sum(keep)), dtype=np.int32)
    for j, c in enumerate(c for c, k in zip(columns, keep) if k):
        slots[:, j] = c
    if plain:
        return slots, None
    return slots, np.stack([c for c, k in zip(coefs, keep) if k], axis=1)
