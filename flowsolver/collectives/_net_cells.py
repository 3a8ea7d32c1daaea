"""What NCCL's view of a communicator's NICs is made of, for the derivatives of a collective's
time (:func:`net_cells`): the cables its GPUs' nearest compute NICs send into the fabric on."""

from __future__ import annotations

from functools import cache

__all__ = ["net_cells", "lazy_net_cells"]


def net_cells(graph, rank_groups) -> tuple:
    """What NCCL's view of the NICs (``hw.net_bw``: :func:`~._nccl_timing._network_bound`, NVLSTree's network
    levels, :func:`~._nccl_timing._graph_busbw`) is made of, for its derivative: one cell per rank group and
    server, each ``((link index, weight), ...)`` of the cables its GPUs' nearest compute NICs send
    into the fabric on (graph edge order), ``weight`` one over the groups nearest that NIC, so
    ``net_bw`` is the least cell's sum of weight x effective capacity (``describe``'s least
    server egress; ``sharing_nics``' least share where groups share NICs). () on one server.

    >>> import topologies as tp
    >>> cells = net_cells(tp.rail_optimized(nodes=2), [list(range(16))])
    >>> len(cells), [len(c) for c in cells], cells[0][0][1]        # 8 NDR cables a server, each wholly the group's
    (2, [8, 8], 1.0)
    """
    from ..routing import gpu_nodes
    from ._layout import edge_index, near_nics_of

    nodes = gpu_nodes(graph)
    kinds = graph.nodes
    rank_groups = [range(len(nodes)) if g is None else g for g in rank_groups]     # None: every GPU
    servers = {kinds[nodes[r]].get("server") for g in rank_groups for r in g}
    if len(servers) < 2:
        return ()
    index = edge_index(graph)
    users, cells = {}, {}
    for k, group in enumerate(rank_groups):
        gpus = [nodes[r] for r in group]
        for gpu, nics in zip(gpus, near_nics_of(graph, gpus)):
            for nic in nics:
                users.setdefault(nic, set()).add(k)
                cells.setdefault((k, kinds[gpu].get("server")), dict())[nic] = None
    out = []
    for nics in cells.values():
        out.append(tuple((index[(nic, v)], 1.0 / len(users[nic])) for nic in nics
                         if kinds[nic].get("role", "compute") == "compute"
                         for v in graph.successors(nic) if kinds[v].get("kind") == "switch"))
    return tuple(out)


def lazy_net_cells(graph, rank_groups):
    """A function of no arguments giving :func:`net_cells` of ``graph`` and ``rank_groups``,
    computed on its first call only (a derivative asks for it; 20-60 ms on 1,024 ranks, which
    every timed collective would pay otherwise)."""
    return cache(lambda: net_cells(graph, rank_groups))
