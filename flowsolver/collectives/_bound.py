"""A lower bound on a candidate algorithm's time that needs no routing: lets ``"auto"``
skip the candidates that cannot win."""

from __future__ import annotations

import numpy as np

from ..routing import GraphIndex, LinkTable, graph_memo
from ._nccl import min_hop_latency

__all__ = ["Capacities", "lower_bound"]


def _edge_arrays(graph, efficiency):
    """Per link of ``graph`` (its routing index's order): tail and head node indices and
    effective capacity (bytes/s); per node: whether it is a GPU and its server attribute
    as an integer code (-1: none, or a node of another network)."""
    ix = GraphIndex.of(graph)
    cap = graph_memo(graph, "links", lambda: LinkTable.from_graph(graph)).effective_capacity(efficiency)

    def server_codes():        # nodes of another network (storage, front end) belong to no server
        raw = [None if "network" in graph.nodes[n] else graph.nodes[n].get("server") for n in ix.nodes]
        code: dict = {}
        return np.array([-1 if x is None else code.setdefault(x, len(code)) for x in raw], dtype=np.int64)

    return ix, cap, graph_memo(graph, "server-codes", server_codes)


class Capacities:
    """Per rank position: its GPU's send / receive capacity and its server's (bytes/s, the
    links' capacities times their efficiency, ``efficiency`` overriding the catalogue's).

    A GPU sends at most, over each of its links, that link's capacity, or, when the link
    leads to a non-GPU hop (a NIC, PCIe switch or NVSwitch), the smaller of it and what
    that hop can pass on to nodes other than the GPU (receiving: the same on the reversed
    links). A server's bytes to others cross the links from its nodes (those with its
    server attribute, outside storage and front-end networks) to nodes outside it.
    Computed over the link arrays at once."""

    def __init__(self, graph, ranks, efficiency):
        ix, c, code = _edge_arrays(graph, efficiency)
        t, h = ix.tail, ix.head
        back = ix.memo("reverse-links", lambda: ix.link_ids(h, t))      # each link's reverse (-1: none)
        c_back = np.where(back >= 0, c[np.maximum(back, 0)], 0.0)
        out_sum = np.bincount(t, weights=c, minlength=ix.nv)
        in_sum = np.bincount(h, weights=c, minlength=ix.nv)
        send = np.bincount(t, weights=np.where(ix.is_gpu[h], c, np.minimum(c, out_sum[h] - c_back)), minlength=ix.nv)
        receive = np.bincount(h, weights=np.where(ix.is_gpu[t], c, np.minimum(c, in_sum[t] - c_back)),
                              minlength=ix.nv)
        order = sorted(set(ranks))
        gpu = ix.gpu_by_rank[np.asarray(order, dtype=np.int64)]
        servers, rank_srv = np.unique(code[gpu][code[gpu] >= 0], return_inverse=True)
        srv_of_rank = np.full(len(order), -1, dtype=np.int64)
        srv_of_rank[code[gpu] >= 0] = rank_srv
        ct, ch = code[t], code[h]
        leaves = (ct >= 0) & (ct != ch)
        enters = (ch >= 0) & (ct != ch)
        out = np.bincount(ct[leaves], weights=c[leaves], minlength=int(code.max(initial=-1)) + 1)
        into = np.bincount(ch[enters], weights=c[enters], minlength=int(code.max(initial=-1)) + 1)
        where = {r: i for i, r in enumerate(order)}
        self.pos_rank = np.array([where[r] for r in ranks] + [-1])          # index -1: not a GPU end
        self.rank_srv = np.append(srv_of_rank, -1)
        self.caps = [send[gpu], receive[gpu], out[servers], into[servers]]

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


def lower_bound(capacities: Capacities, steps, options, model=None) -> float:
    """A time (s) the candidate cannot beat, without routing. In every step each GPU sends
    and receives its bytes through at most its links' effective capacity (each link
    counted at most at the capacity of the hop after it, unless that is a GPU: a GPU behind
    one NIC sends at the NIC's rate), each server's bytes to other servers leave through at
    most the effective capacity of the links leaving the server, and every step pays at
    least the smallest NCCL hop latency (or ``step_latency``), times a calibration ``model``'s
    latency scale where that is below 1."""
    latency = float(options.step_latency) if options.step_latency is not None else min_hop_latency(options.step_protocol)
    lat, moved = options.base, 0.0
    for st in steps:
        paid = st.count if st.latency_count is None else st.latency_count
        moved += st.count * capacities.transfer(st.flows)
        lat += paid * latency
    # a calibration's scale on the latencies, where it shortens them (the times it bounds take it)
    return moved + lat * (1.0 if model is None else min(1.0, model.latency_scale))
