"""Degraded fabrics as views of one graph, and a workload's step times on them from the
healthy run's solved transfers (used by :mod:`flowsolver.reliability._fabric`)."""

from __future__ import annotations

import numpy as np


def _capacities(graph, table_capacity, changes_per_state, index=None) -> np.ndarray:
    """Raw link capacities (graph edge order) of each state: (states, links); ``index``:
    edge -> position, when already built."""
    index = {e: i for i, e in enumerate(graph.edges())} if index is None else index
    caps = np.repeat(np.asarray(table_capacity, dtype=np.float64)[None, :], len(changes_per_state), axis=0)
    for k, changes in enumerate(changes_per_state):
        for (u, v), factor in changes:
            for e in ((u, v), (v, u)):
                if e in index:
                    caps[k, index[e]] *= factor
    return caps


def _peak_loads(result) -> np.ndarray:
    """Per link (graph edge order), the most load (bytes/s) a solved collective's steps put
    on it at any event of their healthy run; inf on the NVLink link NCCL's cost model reads
    (its rate enters the time directly), and on every link a step crosses where the run has
    too many events to keep (then any slower link it uses counts)."""
    from ..timing import completion_times

    der = result.solved_on
    peak = np.zeros(len(der.raw))
    eff = np.asarray(der.effective, dtype=np.float64)
    parts = list(der.steps) + (list(der.tuned.ring) + list(der.tuned.own) if der.tuned is not None else [])
    seen = set()
    for rm, sizes, _ in parts:
        if (id(rm), id(sizes)) in seen:
            continue
        seen.add((id(rm), id(sizes)))
        done = completion_times(rm, sizes, eff, keep_phases=True)
        if not done.phases:
            crosses = np.asarray(rm.link_loads(np.ones(rm.n_flows)))[:len(peak)] > 0
            peak = np.where(crosses, np.inf, peak)
            continue
        for _, alloc, _, _ in done.phases:
            peak = np.maximum(peak, np.asarray(alloc.link_load, dtype=np.float64)[:len(peak)])
    if der.tuned is not None and der.tuned.nvlinks():
        peak[list(der.tuned.nvlinks())] = np.inf
    if der.p2p is not None and der.p2p[0] > der.p2p[1]:     # a send its P2P channels slowed: lighter loads
        peak = peak * (der.p2p[1] / der.p2p[0])
    return peak


def steps_times(result, raw_caps) -> np.ndarray:
    """The time (s) of a solved collective (``result``, a :class:`CollectiveResult` on the
    healthy graph) on other raw link capacities (``raw_caps``, (states, links), graph edge
    order): every distinct step of its algorithm re-solved on them, all states in one batched
    call per step, with the algorithm, protocol, channels and latencies it had (what NCCL,
    which tunes once when it starts, keeps when a link slows mid-run); where NCCL's cost
    model set the time, its formula on the re-solved transfers. The same time
    :func:`flowsolver.collective` gives on the degraded graph with that algorithm and
    protocol pinned, where NCCL's own view of the hardware (its NVLink and NIC rates) is
    unchanged."""
    from ..timing import completion_times

    der = result.solved_on
    raw = np.asarray(der.raw, dtype=np.float64)
    ratio = np.where(raw > 0, der.effective / np.where(raw > 0, raw, 1.0), 0.0)
    eff = np.asarray(raw_caps, dtype=np.float64) * ratio[None, :]
    batch = np.vstack([np.asarray(der.effective, dtype=np.float64)[None, :], eff])     # row 0: as solved
    memo = {}

    def transfer(rm, sizes):
        key = (id(rm), id(sizes))
        if key not in memo:
            done = completion_times(rm, sizes, batch)
            finish = np.atleast_2d(done.finish)
            stalled = np.atleast_2d(done.stalled).any(axis=1)
            memo[key] = np.where(stalled, np.inf, finish.max(axis=1, initial=0.0))
        return memo[key]

    if der.tuned is None:
        moved = sum(count * transfer(rm, sizes) for rm, sizes, count in der.steps)
        if der.p2p is not None:         # a send / receive: no faster than its P2P channels allow
            moved = np.maximum(moved, der.p2p[0])
        return result.time + (moved[1:] - moved[0])
    tf = der.tuned
    ring = sum(m * transfer(rm, sizes) for rm, sizes, m in tf.ring)
    own = sum(m * transfer(rm, sizes) for rm, sizes, m in tf.own)
    # NCCL's NVLink rate: the slowest of the ranks' NVLinks in each state
    nvlink = batch[:, list(tf.nvlinks())].min(axis=1) if tf.nvlinks() else np.full(len(batch), tf.values[2])
    out = np.array([float(tf.formula(float(a), float(b), float(c))) for a, b, c in zip(ring, own, nvlink)])
    return out[1:] + (result.time - out[0])


def _owned_copy(view):
    """A full copy of a degraded view (what a user's callable may keep or edit)."""
    h = view.__class__()
    h.graph.update(view.graph)
    h.add_nodes_from((n, dict(d)) for n, d in view._node.items())
    h.add_edges_from((u, v, dict(d)) for u, nbrs in view._succ.items() for v, d in nbrs.items())
    return h


def _degraded_view(graph, changes):
    """A graph like ``graph`` with each ``((u, v), factor)`` of ``changes`` at ``factor`` of its
    capacity (both directions), sharing every node and unchanged edge attribute dict with
    ``graph`` (what :func:`topologies.degrade_links` gives, without copying a large graph's
    attributes for every state; for reading only: it is never handed to the user)."""
    h = graph.__class__()
    h.graph.update(graph.graph)
    h._node = graph._node
    h._succ = h._adj = {u: dict(nbrs) for u, nbrs in graph._succ.items()}
    h._pred = {v: dict(nbrs) for v, nbrs in graph._pred.items()}
    for (u, v), factor in changes:
        for a, b in ((u, v), (v, u)):
            if b in h._succ.get(a, ()):
                d = dict(h._succ[a][b])
                d["capacity"] = float(d["capacity"] * factor)
                h._succ[a][b] = h._pred[b][a] = d
    h.graph["degraded"] = [cable for cable, _ in changes]
    return h
