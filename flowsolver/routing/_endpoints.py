"""The endpoint side of a route on a switched fabric: which NIC a GPU's traffic leaves or
enters by (its rail's, the next working one, or with PXN the other end's rail), the
fabric switch it attaches at, and the segment between the GPU (or a non-GPU endpoint such
as a storage node) and that switch; for a NIC of several fabric uplinks (a port per plane,
a dual-ToR NIC), one of each per uplink, and the pairs of uplinks a flow is split over
(:func:`uplink_pairs`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._graph_index import RoutingError, ServerParts, unique_pairs
from ._keys import ranges
from ._shortest_paths import mix64

def _attach_other(ix, node):
    """(switch, up links, down links) of a non-GPU endpoint: cabled to a switch, or
    through a NIC that is."""
    g = ix.graph
    name = ix.nodes[node]

    def usable(u, v):
        return g.has_edge(u, v) and g.has_edge(v, u) and g[u][v].get("capacity", 0) > 0 \
            and g[v][u].get("capacity", 0) > 0

    if g.nodes[name].get("kind") == "switch":          # a switch is its own attachment: no links to add
        empty = ix.link_ids([], [])
        return node, empty, empty
    switches = [v for v in g.successors(name) if g.nodes[v].get("kind") == "switch" and usable(name, v)]
    if len(switches) > 1:       # one attachment an endpoint: the first switch would force paths through it
        named = ", ".join(map(str, switches[:4]))
        raise RoutingError(f"endpoint {name!r} is cabled to {len(switches)} switches ({named}): this policy "
                           "attaches an endpoint that is not a GPU at one switch; route it with "
                           "policy='shortest', or cable it to one switch")
    for v in switches:
        return ix.idx[v], ix.link_ids([node], [ix.idx[v]]), ix.link_ids([ix.idx[v]], [node])
    for v in g.successors(name):
        if g.nodes[v].get("kind") == "nic" and usable(name, v):
            for w in g.successors(v):
                if g.nodes[w].get("kind") == "switch" and usable(v, w):
                    a, b, c = node, ix.idx[v], ix.idx[w]
                    return c, ix.link_ids([a, b], [b, c]), ix.link_ids([c, b], [b, a])
    raise RoutingError(f"endpoint {name!r} has no working link to a switch (directly or through a NIC)")


def _nic_table(ix):
    """Compute NICs of each server: node per (server, rail), and per NIC its uplinks,
    downlinks and switches, one column per fabric uplink (a NIC of several planes, or a
    SimAI dual-ToR NIC, has several; -1 pads), in link order."""
    nic = np.flatnonzero((ix.kind == "nic") & (ix.server >= 0) & (ix.rail >= 0))
    n_srv = int(ix.server.max()) + 1 if len(ix.server) else 0
    rails = int(ix.rail[nic].max()) + 1 if nic.size else 0
    table = np.full((max(n_srv, 1), max(rails, 1)), -1, dtype=np.int64)
    # the NIC's uplinks: usable edges to a switch with a usable reverse
    cand = np.flatnonzero(ix.usable & (ix.kind[ix.tail] == "nic") & ix.is_switch[ix.head])
    rev = ix.link_ids(ix.head[cand], ix.tail[cand])
    cand = cand[(rev >= 0) & ix.usable[np.maximum(rev, 0)]]
    cand = cand[np.argsort(ix.tail[cand], kind="stable")]
    owner = ix.tail[cand]
    count = np.bincount(owner, minlength=ix.nv)
    col = np.arange(len(cand)) - (np.cumsum(count) - count)[owner]     # the uplink's place among its NIC's
    up = np.full((ix.nv, max(int(count.max()) if len(cand) else 1, 1)), -1, dtype=np.int64)
    down, switch = up.copy(), up.copy()
    up[owner, col] = cand
    down[owner, col] = ix.link_ids(ix.head[cand], owner)
    switch[owner, col] = ix.head[cand]
    working = nic[up[nic, 0] >= 0]
    table[ix.server[working], ix.rail[working]] = working
    return table, up, down, switch


def endpoint_parts(ix, store, src, dst, pxn, relay=None):
    """(attach_s, attach_d, up, down, intra, intra_seg, fabric_nodes): the fabric node each
    flow enters and leaves at, the segments from its source to there and from there to its
    destination (flows x uplinks: one column per fabric uplink of the NIC, -1 padded; see
    :func:`uplink_pairs`), which flows stay inside one server (and their segment), and the
    nodes of the fabric. ``relay``: a mask over the nodes of the GPUs PXN may relay through
    (None: every GPU)."""
    n = len(src)
    if not ix.is_switch.any():   # no switch: GPUs (chips) are the fabric
        none = np.full((n, 1), -1, dtype=np.int64)
        return src[:, None], dst[:, None], none, none.copy(), np.zeros(n, dtype=bool), None, np.arange(ix.nv)
    parts = ix.memo("parts", lambda: ServerParts(ix))
    server_of = _placed_gpu_server(ix)
    in_server = server_of[src]
    intra = (in_server >= 0) & (in_server == server_of[dst])
    intra_seg = np.full(n, -1, dtype=np.int32)
    if intra.any():
        rows = np.flatnonzero(intra)
        ua, ub, inv = unique_pairs(src[rows], dst[rows], ix.nv)
        intra_seg[rows] = parts.segments(store, ix.server[ua], ua, ub)[inv.reshape(-1)]
    nics = ix.memo("nics", lambda: _nic_table(ix))
    inter = np.flatnonzero(~intra)
    attach_s, up = _endpoint_side(ix, store, parts, nics, "src", src, dst, inter, pxn, relay)
    attach_d, down = _endpoint_side(ix, store, parts, nics, "dst", dst, src, inter, pxn)
    return attach_s, attach_d, up, down, intra, intra_seg, np.flatnonzero(ix.is_switch)


def _placed_gpu_server(ix):
    """Per node: its server for a GPU placed in one, else -1."""
    return ix.memo("placed-gpu-server", lambda: np.where(ix.is_gpu & (ix.server >= 0), ix.server, -1))


def _endpoint_side(ix, store, parts, nics, side, ends, others, inter, pxn, relay=None):
    """For the flows ``inter`` leaving the server of ``ends`` (``side="src"``) or entering it
    (``"dst"``): the fabric node they attach at and the segment between it and the GPU or
    non-GPU endpoint, one column per uplink of the NIC (flows x uplinks; -1 elsewhere).

    A GPU endpoint's NIC, and so its segment and attach node, depend only on the GPU and
    (with ``pxn``, on the source side) the rail of the GPU at the other end: they are
    worked out once per distinct such key and read back per flow."""
    table, nic_up, nic_down, nic_switch = nics
    n, width_u = len(ends), nic_up.shape[1]
    attach = np.full((n, width_u), -1, dtype=np.int64)
    seg = np.full((n, width_u), -1, dtype=np.int32)
    e = ends[inter]
    gpu = _placed_gpu_server(ix)[e] >= 0
    every = bool(gpu.all())
    rows_g = inter if every else inter[gpu]
    if rows_g.size:
        eg = e if every else e[gpu]
        width = table.shape[1] + 1 if side == "src" and pxn else 1
        key = eg
        if width > 1:   # the other end's rail (as _pick_nic reads it, modulo the NIC rails) + 1; 0: own rail
            rails = table.shape[1]
            rail_of = ix.memo(("gpu-rail", rails), lambda: np.where(ix.is_gpu & (ix.rail >= 0), ix.rail % rails, -1))
            key = eg * width + (rail_of[others[rows_g]] + 1)
        seen = np.zeros(ix.nv * width, dtype=bool)
        seen[key] = True
        keys = np.flatnonzero(seen)
        node, forced = keys // width, keys % width - 1
        rail = np.where(forced >= 0, forced, ix.rail[node])
        nic = _pick_nic(ix, table, ix.server[node], rail, node)
        if (forced >= 0).any():
            # PXN first moves the data to the GPU of the other end's rail: where no working path
            # inside the server leads to that NIC (the GPU or its links failed), NCCL has no
            # proxy there and the GPU sends through its own rail's NIC, as without PXN
            dead = _no_path(parts, ix.server[node], node, nic) & (forced >= 0)
            # PXN relays through a GPU local to the NIC (its PCIe path through switches alone, PXB
            # at most: src/graph/paths.cc, the PXN loop): a NIC on the CPU's root ports has none,
            # and the GPU sends through its own rail's NIC
            dead |= (forced >= 0) & ~_has_local_gpu(ix)[nic]
            if relay is not None:
                # NCCL's topology holds the communicator's GPUs only: PXN relays through the
                # NIC's local GPU where one of them sits on that rail (src/graph/paths.cc,
                # ncclTopoGetLocalGpu in the PXN loop), else the GPU sends by its own rail
                dead |= (forced >= 0) & ~_relay_on_rail(ix, relay, table.shape[1], ix.server[node], forced)
            if dead.any():
                nic[dead] = _pick_nic(ix, table, ix.server[node[dead]], ix.rail[node[dead]], node[dead])
        ug, un, inv = unique_pairs(node, nic, ix.nv)
        inv = inv.reshape(-1)
        key_seg = np.full((len(seen), width_u), -1, dtype=np.int32)
        key_attach = np.full((len(seen), width_u), -1, dtype=np.int64)
        for u in range(width_u):         # one segment per (GPU, NIC, uplink): the NIC's u-th uplink
            has = np.flatnonzero(nic_up[un, u] >= 0)
            if not has.size:
                continue
            ga, na = ug[has], un[has]
            if side == "src":
                ids = parts.segments(store, ix.server[ga], ga, na, extra_link=nic_up[na, u])
            else:
                ids = parts.segments(store, ix.server[ga], na, ga, extra_link=nic_down[na, u])
            pair_seg = np.full(len(ug), -1, dtype=np.int64)
            pair_seg[has] = ids
            key_seg[keys, u] = pair_seg[inv]
            key_attach[keys, u] = nic_switch[nic, u]
        seg[rows_g] = key_seg[key]
        attach[rows_g] = key_attach[key]
    rows_o = inter[~gpu]
    for node in np.unique(ends[rows_o]) if rows_o.size else ():
        sw, up_l, down_l = _attach_other(ix, int(node))
        links = up_l if side == "src" else down_l
        sid = store.add(np.zeros(len(links)), links, np.ones(len(links)), 1)
        sel = rows_o[ends[rows_o] == node]
        seg[sel, 0] = sid
        attach[sel, 0] = sw
    return attach, seg


def _has_local_gpu(ix):
    """Per node: whether it is a NIC a PXN relay can use: one a GPU reaches through PCIe
    switches alone (its own link, or a switch both hang under), or through the CPU that GPU
    meets over C2C (a Grace GPU's ``c2c``: NCCL's P2C, relayed from NCCL 2.28, paths.cc); not a
    NIC on a CPU's root ports that every GPU reaches over PCIe through the CPU (PHB / SYS)."""
    def build():
        g = ix.graph
        out = np.zeros(ix.nv, dtype=bool)
        for i in np.flatnonzero(ix.kind == "nic"):
            seen, level = {ix.nodes[i]}, [(ix.nodes[i], False)]
            while level and not out[i]:
                nxt = []
                for u, past_cpu in level:
                    for v in (*g.successors(u), *g.predecessors(u)):
                        k = g.nodes[v].get("kind")
                        if k == "gpu" and (not past_cpu or g.nodes[v].get("c2c")):
                            out[i] = True
                        elif (k == "pcie_switch" or k == "cpu" and not past_cpu) and v not in seen:
                            seen.add(v)
                            nxt.append((v, past_cpu or k == "cpu"))
                level = nxt
        return out
    return ix.memo("nic-local-gpu", build)


def _relay_on_rail(ix, relay, rails, server, rail):
    """Per ``(server[i], rail[i])``: whether a GPU of ``relay`` (a node mask) in that server
    sits on that rail (modulo the NIC rails, as the NIC is picked)."""
    gpu = np.flatnonzero(relay & ix.is_gpu & (ix.server >= 0) & (ix.rail >= 0))
    n_srv = int(max(ix.server.max(), 0)) + 1
    has = np.zeros((n_srv, rails), dtype=bool)
    has[ix.server[gpu], ix.rail[gpu] % rails] = True
    return has[server, np.where(rail >= 0, rail, 0) % rails]


def _no_path(parts, server, a, b):
    """Mask of the pairs ``a[i] -> b[i]`` (distinct nodes of ``server[i]``) that no working
    path inside their server joins (each pair's paths computed once, as the segments' are)."""
    out = np.zeros(len(a), dtype=bool)
    sig = parts.sig_of[server]
    for s in np.unique(sig):
        rows = np.flatnonzero(sig == s)
        pairs, inv = np.unique(np.stack([parts.local_of[a[rows]], parts.local_of[b[rows]]], axis=1), axis=0,
                               return_inverse=True)
        bad = parts.template_paths(int(s), pairs[:, 0], pairs[:, 1])[3]
        if len(bad):
            dead = np.zeros(len(pairs), dtype=bool)
            dead[bad] = True
            out[rows] = dead[inv.reshape(-1)]
    return out


def _pick_nic(ix, table, server, rail, gpus):
    """The NIC of (server, rail) if it works, else the working NIC of the next rail."""
    rails = table.shape[1]
    rail = np.where(rail >= 0, rail, 0) % rails
    nic = table[server, rail]
    missing = np.flatnonzero(nic < 0)
    for i in missing:
        row = table[server[i]]
        order = (rail[i] + np.arange(rails)) % rails
        ok = order[row[order] >= 0]
        if not ok.size:
            raise RoutingError(f"GPU {ix.name(gpus[i])} has no NIC with a working uplink in its server")
        nic[i] = row[ok[0]]
    return nic


#: salt of the hash that pins a flow to one (uplink, downlink) pair of multi-uplink NICs
_PAIR_SALT = 0x75706C696E6B


class Pairs(NamedTuple):
    """One row per (flow, pair of uplinks) a flow is split over: the flow, the pair's place
    among its flow's (``block``), its attach switches ``a`` / ``b`` and segments ``up`` /
    ``down``, its share of the flow (``share``; None when every flow has one pair) and, for a
    hashed sub-flow of its own, the sub-flow (``sub``; -1: the row carries every sub-flow)."""

    flow: np.ndarray
    block: np.ndarray
    a: np.ndarray
    b: np.ndarray
    up: np.ndarray
    down: np.ndarray
    share: np.ndarray | None
    sub: np.ndarray


def uplink_pairs(ix, attach_s, attach_d, up, down, keys, seed, hashed, subflows, fabric_nodes) -> Pairs:
    """The (source uplink, destination downlink) pairs each flow is split over, as ECMP
    splits at a NIC of several fabric uplinks (the ports of a multi-plane NIC, a dual-ToR
    NIC): the NIC sends an equal share on each uplink whose switch is nearest (in fabric
    hops) to one of the destination NIC's switches, and the traffic of an uplink leaves the
    fabric in equal shares at each of the destination's switches nearest to it. With
    ``hashed`` (a policy that pins a flow by its key) each of a flow's ``subflows`` sub-flows
    takes one pair, drawn with those shares by a seeded hash of ``key x subflows + s`` (the
    key its fabric path is hashed from), and is a row of its own. A flow with one uplink at
    each end keeps its one pair (one row, as without this split)."""
    n = len(attach_s)
    if attach_s.shape[1] == 1 and attach_d.shape[1] == 1:
        none = np.full(n, -1, dtype=np.int64)
        return Pairs(np.arange(n), np.zeros(n, dtype=np.int64), attach_s[:, 0], attach_d[:, 0], up[:, 0], down[:, 0],
                     None, none)
    us, inv_s = _numbered_rows(attach_s, ix.nv)
    ud, inv_d = _numbered_rows(attach_d, ix.nv)
    cs, cd, combo = unique_pairs(inv_s, inv_d, max(len(us), len(ud)))
    weight = _pair_weights(ix, us[cs], ud[cd], fabric_nodes)            # (combos, Us, Ud)
    c, i, j = np.nonzero(weight > 0)                                     # per combo, in (i, j) order
    w = weight[c, i, j]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(c, minlength=len(cs)))])
    counts = ptr[combo + 1] - ptr[combo]
    sub = np.full(n, -1, dtype=np.int64)
    if hashed:
        # a flow of one pair stays one row; one of several: a row per sub-flow, on its drawn pair
        draws = np.where(counts > 1, subflows, 1)
        flow = np.repeat(np.arange(n), draws)
        sub = np.where(counts[flow] > 1, ranges(np.zeros(n, dtype=np.int64), draws), -1)
        hash_key = keys[flow].astype(np.int64) * subflows + np.maximum(sub, 0)
        u = (mix64(hash_key, seed, _PAIR_SALT) >> np.uint64(11)).astype(np.float64) / 2.0**53   # in [0, 1)
        cum = np.cumsum(w)
        lo, hi = ptr[combo[flow]], ptr[combo[flow] + 1]
        start = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0.0)
        entry = np.clip(np.searchsorted(cum, start + u * (cum[hi - 1] - start), side="right"), lo, hi - 1)
        share = np.where(sub >= 0, 1.0 / subflows, 1.0)
        block = np.maximum(sub, 0)
    else:
        flow = np.repeat(np.arange(n), counts)
        entry = ranges(ptr[combo], counts)
        share = w[entry]
        block = entry - ptr[combo[flow]]
        sub = np.full(len(flow), -1, dtype=np.int64)
    ei, ej = i[entry], j[entry]
    return Pairs(flow, block, attach_s[flow, ei], attach_d[flow, ej], up[flow, ei], down[flow, ej], share, sub)


def _numbered_rows(rows, nv):
    """``np.unique(rows, axis=0, return_inverse=True)`` for rows of node ids (-1 pads), the
    rows numbered a column at a time by :func:`unique_pairs` (no sort of whole rows: a
    million-flow all-to-all has few distinct rows)."""
    ident = np.zeros(len(rows), dtype=np.int64)
    for u in range(rows.shape[1]):
        _, _, ident = unique_pairs(ident, rows[:, u] + 1, max(nv + 1, int(ident.max(initial=0)) + 1))
    first = np.zeros(int(ident.max(initial=-1)) + 1, dtype=np.int64)
    first[ident[::-1]] = np.arange(len(ident))[::-1]          # each number's first row
    return rows[first], ident


def _pair_weights(ix, S, D, fabric_nodes):
    """Shares (combos x Us x Ud) of the pairs of source switches ``S[c]`` and destination
    switches ``D[c]`` (-1 padded; valid ones first): see :func:`uplink_pairs`. A combination
    with one switch a side, or no pair joined by the fabric, takes its first pair whole (the
    policy reports a missing path)."""
    C, Us, Ud = len(S), S.shape[1], D.shape[1]
    weight = np.zeros((C, Us, Ud))
    weight[:, 0, 0] = 1.0
    multi = np.flatnonzero(((S >= 0).sum(axis=1) > 1) | ((D >= 0).sum(axis=1) > 1))
    if not multi.size:
        return weight
    cg, local = ix.memo("compact-fabric", lambda: ix.compact(fabric_nodes))
    Sm, Dm = S[multi], D[multi]
    targets = np.unique(Dm[Dm >= 0])
    hops = cg.distances_to_all(local[targets])                   # (targets, fabric nodes): hops to each
    row = np.full(ix.nv, -1, dtype=np.int64)
    row[targets] = np.arange(len(targets))
    dist = hops[row[np.maximum(Dm, 0)][:, None, :], local[np.maximum(Sm, 0)][:, :, None]]
    far = np.iinfo(np.int64).max
    dist = np.where((Sm >= 0)[:, :, None] & (Dm >= 0)[:, None, :] & (dist >= 0), dist, far)
    best = dist.min(axis=(1, 2))
    near = (dist == best[:, None, None]) & (best < far)[:, None, None]
    per_up = near.sum(axis=2, keepdims=True)
    ups = (per_up > 0).sum(axis=1, keepdims=True)
    shares = np.where(near, 1.0 / np.maximum(per_up, 1) / np.maximum(ups, 1), 0.0)
    joined = best < far
    weight[multi[joined]] = shares[joined]
    return weight
