"""The endpoint side of a route on a switched fabric: which NIC a GPU's traffic leaves or
enters by (its rail's, the next working one, or with PXN the other end's rail), the
fabric switch it attaches at, and the segment between the GPU (or a non-GPU endpoint such
as a storage node) and that switch."""

from __future__ import annotations

import numpy as np

from ._graph_index import RoutingError, ServerParts, unique_pairs

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
    """Compute NICs of each server: node, uplink, downlink and switch per (server, rail)."""
    nic = np.flatnonzero((ix.kind == "nic") & (ix.server >= 0) & (ix.rail >= 0))
    n_srv = int(ix.server.max()) + 1 if len(ix.server) else 0
    rails = int(ix.rail[nic].max()) + 1 if nic.size else 0
    table = np.full((max(n_srv, 1), max(rails, 1)), -1, dtype=np.int64)
    up = np.full(ix.nv, -1, dtype=np.int64)
    down = np.full(ix.nv, -1, dtype=np.int64)
    switch = np.full(ix.nv, -1, dtype=np.int64)
    # the NIC's uplink: a usable edge to a switch with a usable reverse
    cand = np.flatnonzero(ix.usable & (ix.kind[ix.tail] == "nic") & ix.is_switch[ix.head])
    rev = ix.link_ids(ix.head[cand], ix.tail[cand])
    cand = cand[(rev >= 0) & ix.usable[np.maximum(rev, 0)]]
    rev = ix.link_ids(ix.head[cand], ix.tail[cand])
    up[ix.tail[cand]] = cand
    down[ix.tail[cand]] = rev
    switch[ix.tail[cand]] = ix.head[cand]
    working = nic[up[nic] >= 0]
    table[ix.server[working], ix.rail[working]] = working
    return table, up, down, switch


def endpoint_parts(ix, store, src, dst, pxn):
    """(attach_s, attach_d, up, down, intra, intra_seg, fabric_nodes): the fabric node each
    flow enters and leaves at, the segments from its source to there and from there to its
    destination, which flows stay inside one server (and their segment), and the nodes of
    the fabric."""
    n = len(src)
    if not ix.is_switch.any():   # no switch: GPUs (chips) are the fabric
        none = np.full(n, -1, dtype=np.int64)
        return src, dst, none, none.copy(), np.zeros(n, dtype=bool), None, np.arange(ix.nv)
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
    attach_s, up = _endpoint_side(ix, store, parts, nics, "src", src, dst, inter, pxn)
    attach_d, down = _endpoint_side(ix, store, parts, nics, "dst", dst, src, inter, pxn)
    return attach_s, attach_d, up, down, intra, intra_seg, np.flatnonzero(ix.is_switch)


def _placed_gpu_server(ix):
    """Per node: its server for a GPU placed in one, else -1."""
    return ix.memo("placed-gpu-server", lambda: np.where(ix.is_gpu & (ix.server >= 0), ix.server, -1))


def _endpoint_side(ix, store, parts, nics, side, ends, others, inter, pxn):
    """For the flows ``inter`` leaving the server of ``ends`` (``side="src"``) or entering it
    (``"dst"``): the fabric node they attach at and the segment between it and the GPU or
    non-GPU endpoint (-1 elsewhere).

    A GPU endpoint's NIC, and so its segment and attach node, depend only on the GPU and
    (with ``pxn``, on the source side) the rail of the GPU at the other end: they are
    worked out once per distinct such key and read back per flow."""
    table, nic_up, nic_down, nic_switch = nics
    n = len(ends)
    attach = np.full(n, -1, dtype=np.int64)
    seg = np.full(n, -1, dtype=np.int32)
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
            if dead.any():
                nic[dead] = _pick_nic(ix, table, ix.server[node[dead]], ix.rail[node[dead]], node[dead])
        ug, un, inv = unique_pairs(node, nic, ix.nv)
        if side == "src":
            ids = parts.segments(store, ix.server[ug], ug, un, extra_link=nic_up[un])
        else:
            ids = parts.segments(store, ix.server[ug], un, ug, extra_link=nic_down[un])
        key_seg = np.full(len(seen), -1, dtype=np.int32)
        key_attach = np.full(len(seen), -1, dtype=np.int64)
        key_seg[keys] = ids[inv.reshape(-1)]
        key_attach[keys] = nic_switch[nic]
        seg[rows_g] = key_seg[key]
        attach[rows_g] = key_attach[key]
    rows_o = inter[~gpu]
    for node in np.unique(ends[rows_o]) if rows_o.size else ():
        sw, up_l, down_l = _attach_other(ix, int(node))
        links = up_l if side == "src" else down_l
        sid = store.add(np.zeros(len(links)), links, np.ones(len(links)), 1)
        sel = rows_o[ends[rows_o] == node]
        seg[sel] = sid
        attach[sel] = sw
    return attach, seg


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
