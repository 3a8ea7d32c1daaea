"""Rank groups run at once in lockstep: the groups nccl-tests' tests run (:func:`row_groups`:
one group of every rank; ``sendrecv_perf``'s ring shift, one pair a rank) and every group's
schedule merged step for step into one (:func:`merged`)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..routing import gpu_nodes
from ._trees import Step, StepFlows

__all__ = ["merged", "row_groups"]


def row_groups(graph, op, ranks) -> list:
    """The rank groups, run at once in lockstep, that nccl-tests' test of ``op`` runs on the
    GPU ``ranks`` (in communicator rank order; None: every GPU of ``graph``): ``[ranks]``, but
    for ``send_recv`` a ring shift: nccl-tests' ``sendrecv_perf`` has every rank ``r`` send to
    ``(r + 1) mod n`` and receive from ``(r - 1) mod n`` in one group call (``src/sendrecv.cu``,
    ``SendRecvRunColl``), so a row's time is its slowest pair's with every other pair's flows on
    the links. Each pair is a group of its two ranks first, then the rest of the communicator
    (NCCL sizes a peer's channels by the whole communicator, :func:`~._p2p.p2p_comm`).

    >>> import topologies as tp
    >>> row_groups(tp.rail_optimized(nodes=1), "send_recv", [0, 1, 2])
    [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    """
    if op != "send_recv":
        return [ranks]
    nodes = gpu_nodes(graph)
    ranks = list(range(len(nodes))) if ranks is None else _checks.rank_indices(graph, ranks, nodes=nodes)
    n = len(ranks)
    return [[ranks[i], ranks[(i + 1) % n]] + [r for j, r in enumerate(ranks) if j not in (i, (i + 1) % n)]
            for i in range(n)]



def merged(per_group, p):
    """Step ``j`` of every group as one step, the positions of group ``g`` offset by ``g p``;
    None where the groups' schedules do not align step for step (groups laid out unlike: a
    tree of 2 x 4 GPUs has 15 steps, of 1 x 8 11; or other repetition counts)."""
    shape = {tuple((st.count, st.latency_count) for st in steps) for steps in per_group}
    if len(shape) > 1:
        return None
    merged, cache = [], {}
    for parts in zip(*per_group):
        key = tuple(st.flows for st in parts)
        if key in cache:
            pass
        elif not any(st.flows.has_node_ids for st in parts):       # positions offset as arrays
            pos = [st.flows.positions() for st in parts]
            cache[key] = StepFlows.from_arrays(np.concatenate([a + g * p for g, (a, _) in enumerate(pos)]),
                                               np.concatenate([b + g * p for g, (_, b) in enumerate(pos)]),
                                               np.concatenate([st.flows.nbytes for st in parts]))
        else:
            cache[key] = tuple((x + g * p if isinstance(x, int) else x, y + g * p if isinstance(y, int) else y, n)
                               for g, st in enumerate(parts) for x, y, n in st.flows)
        merged.append(Step(parts[0].count, cache[key], parts[0].latency_count, parts[0].grouped,
                           _merged_latency_flows(parts)))
    return tuple(merged)


def _merged_latency_flows(parts):
    """The flows whose hops set a merged step's latency: every group's own (each group laid out
    apart pays its own channel's chain; the groups' flows concatenated in order), or None
    (every flow) when no group names its own."""
    if all(st.latency_flows is None for st in parts):
        return None
    out, offset = [], 0
    for st in parts:
        own = range(len(st.flows)) if st.latency_flows is None else st.latency_flows
        out.extend(offset + i for i in own)
        offset += len(st.flows)
    return tuple(out)
