"""Policy ``shortest``: fluid split over the shortest paths of the whole graph, for any
graph a user built or edited. GPUs and storage hosts are never transit nodes unless the graph
has no switch (a torus of chips); nor is a server's NIC or other part (PCIe switch, CPU, its
NVSwitch) between two nodes outside the server: traffic enters a server only to end there. No
rail or server rule is applied beyond that."""

from __future__ import annotations

import numpy as np

from ._policies import register_policy
from ._shortest_paths import CompactGraph, ecmp_fluid


def shortest(call):
    """One column: the fluid split over the graph's shortest paths, GPU to GPU."""
    ix = call.index
    if (ix.is_switch | (ix.kind == "nvswitch")).any():
        cg, up, down = ix.memo("compact-shortest-hosts", lambda: _host_layers(ix))
    else:       # no switch (a torus of chips): every node forwards
        cg, up = ix.memo("compact-shortest", lambda: ix.compact(np.arange(ix.nv), np.ones(ix.nv, bool)))
        down = up
    return [(call.paths(call.src, call.dst, lambda a, b: ecmp_fluid(cg, up[a], down[b]), "shortest"), 1.0)]


def _host_layers(ix):
    """The graph for ``shortest`` with each server's parts (nodes with an integer ``server``
    attribute: GPUs, NICs, PCIe switches, CPUs, its NVSwitch) in two copies, a way out and a
    way in, so that no path passes through a server it neither starts nor ends in.

    A link inside a server joins the out copies, the in copies, and out to in (a path inside
    one server); a link from a server to a switch leaves from the out copy only, a link into a
    server (from a switch or another server) arrives at the in copy only, and nothing leaves
    an in copy for outside its server. A source is its out copy, a destination its in copy;
    GPUs and storage hosts stay endpoints only. A dual-homed NIC, with a port on two leaves,
    carried half the traffic between them (adv21b F4): no RDMA NIC forwards between its ports.

    Returns ``(CompactGraph, out id of each node, in id of each node)`` (one id for a node
    outside every server)."""
    nv = ix.nv
    server = np.array([d["server"] if isinstance(d.get("server"), (int, np.integer)) and not isinstance(
        d.get("server"), bool) else -1 for d in (ix.graph.nodes[n] for n in ix.nodes)], dtype=np.int64)
    inside = server >= 0
    out_id = np.arange(nv, dtype=np.int64)
    in_id = out_id.copy()
    in_id[inside] = nv + np.arange(int(inside.sum()))
    endpoint = ix.is_gpu | (ix.kind == "storage")
    links = np.flatnonzero(ix.usable)
    t, h = ix.tail[links], ix.head[links]
    same = inside[t] & inside[h] & (server[t] == server[h])
    # (tail copy, head copy, links) of each kind of link
    parts = [(out_id[t[same]], out_id[h[same]], links[same]),       # inside a server: out -> out,
             (in_id[t[same]], in_id[h[same]], links[same]),         # in -> in,
             (out_id[t[same]], in_id[h[same]], links[same]),        # out -> in (a path inside it)
             (out_id[t[~same]], in_id[h[~same]], links[~same])]     # anything else: out (or a switch) -> in
    tail = np.concatenate([p[0] for p in parts])
    head = np.concatenate([p[1] for p in parts])
    link = np.concatenate([p[2] for p in parts])
    total = nv + int(inside.sum())
    transit = np.ones(total, dtype=bool)
    transit[out_id[endpoint]] = False
    transit[in_id[endpoint]] = False
    cg = CompactGraph(total, tail, head, ix.cables[link], link, transit)
    return cg, out_id, in_id


register_policy("shortest", shortest, whole_path=True)
