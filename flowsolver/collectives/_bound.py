"""A lower bound on a candidate algorithm's time that needs no routing: lets ``"auto"``
skip the candidates that cannot win."""

from __future__ import annotations

import numpy as np

from ..routing import gpu_nodes, link_efficiency
from ._nccl import min_hop_latency

__all__ = ["Capacities", "lower_bound"]


def _two_hop(g, v, cap):
    """What GPU ``v`` can send (``g`` the graph) or receive (``g`` its reverse view)."""
    total = 0.0
    for _, u, d in g.out_edges(v, data=True):
        beyond = sum(cap(e) for _, w, e in g.out_edges(u, data=True) if w != v)
        # bytes through a NIC, PCIe or NVSwitch hop must go on (a GPU may be the end)
        total += cap(d) if g.nodes[u].get("kind") == "gpu" else min(cap(d), beyond)
    return total


def _server_io(graph, inside, s_id, cap):
    """Effective capacity out of and into the server ``s_id`` that holds the nodes ``inside``
    (a set, grown to the server's nodes)."""
    todo = list(inside)
    while todo:                           # the server's nodes: neighbours with its id
        v = todo.pop()
        for w in graph.successors(v):
            if w not in inside and graph.nodes[w].get("server") == s_id:
                inside.add(w)
                todo.append(w)
    out = sum(cap(d) for v in inside for _, w, d in graph.out_edges(v, data=True) if w not in inside)
    into = sum(cap(d) for v in inside for w, _, d in graph.in_edges(v, data=True) if w not in inside)
    return out, into


class Capacities:
    """Per rank position: its GPU's send / receive capacity and its server's (bytes/s, the
    links' capacities times their efficiency, ``efficiency`` overriding the catalogue's)."""

    def __init__(self, graph, ranks, efficiency):
        nodes = gpu_nodes(graph)
        cap = lambda d: d.get("capacity", 0.0) * link_efficiency(d.get("tech", ""), efficiency, d.get("efficiency"))  # noqa: E731
        reverse = graph.reverse(copy=False)
        order = sorted(set(ranks))
        server = {r: graph.nodes[nodes[r]].get("server") for r in set(ranks)}
        servers = sorted({s for s in server.values() if s is not None}, key=str)
        members: dict = {}
        for r, s_id in server.items():
            members.setdefault(s_id, set()).add(nodes[r])
        io = {s_id: _server_io(graph, members[s_id], s_id, cap) for s_id in servers}
        where = {r: i for i, r in enumerate(order)}
        s_index = {s_id: i for i, s_id in enumerate(servers)}
        self.pos_rank = np.array([where[r] for r in ranks] + [-1])          # index -1: not a GPU end
        self.rank_srv = np.array([s_index.get(server[r], -1) for r in order] + [-1])
        self.caps = [np.array([_two_hop(graph, nodes[r], cap) for r in order]),
                     np.array([_two_hop(reverse, nodes[r], cap) for r in order]),
                     np.array([io[s_id][0] for s_id in servers]), np.array([io[s_id][1] for s_id in servers])]

    def transfer(self, flows) -> float:
        """The least transfer time (s) of a step's flows through these capacities."""
        src, dst = flows.positions()
        x, y, n = self.pos_rank[src], self.pos_rank[dst], flows.nbytes
        sx, sy = self.rank_srv[x], self.rank_srv[y]
        cross = (sx >= 0) & (sy >= 0) & (sx != sy)
        transfer = 0.0
        for (mask, key), c in zip([(x >= 0, x), (y >= 0, y), (cross, sx), (cross, sy)], self.caps):
            if mask.any():
                amount = np.bincount(key[mask], weights=n[mask], minlength=len(c))
                with np.errstate(divide="ignore", invalid="ignore"):
                    need = np.where(amount > 0, amount / c, 0.0)
                transfer = max(transfer, float(need.max()))
        return transfer


def lower_bound(capacities: Capacities, steps, options) -> float:
    """A time (s) the candidate cannot beat, without routing. In every step each GPU sends
    and receives its bytes through at most its links' effective capacity (each link
    counted at most at the capacity of the hop after it, unless that is a GPU: a GPU behind
    one NIC sends at the NIC's rate), each server's bytes to other servers leave through at
    most the effective capacity of the links leaving the server, and every step pays at
    least the smallest NCCL hop latency (or ``step_latency``)."""
    latency = float(options.step_latency) if options.step_latency is not None else min_hop_latency(options.step_protocol)
    total = options.base
    for st in steps:
        paid = st.count if st.latency_count is None else st.latency_count
        total += st.count * capacities.transfer(st.flows) + paid * latency
    return total
