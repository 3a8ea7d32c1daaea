"""Policies ``ecmp`` (fluid split over all equal-cost shortest fabric paths) and
``ecmp_hash`` (each flow, or each of its sub-flows, pinned to one shortest path by a seeded
hash of its key, hop by hop among the next hops weighted by cables)."""

from __future__ import annotations

import numpy as np

from ._graph_index import no_path
from ._policies import register_policy
from ._shortest_paths import ecmp_hashed


def ecmp(call):
    """One column: the fluid ECMP segment of each flow's pair of switches."""
    return [(call.ecmp(call.src, call.dst), 1.0)]


def ecmp_hash(call):
    """``subflows`` columns of coefficient ``1 / subflows``: sub-flow ``s`` of a flow keyed
    ``k`` takes the path hashed from ``k x subflows + s`` and the seed; equal paths share one
    segment."""
    ix, a, b, subflows = call.index, call.src, call.dst, call.subflows
    if not len(call.keys):          # no flow crosses the fabric (all inside a server or under one switch)
        return [(np.empty(0, dtype=np.int64), 1.0 / subflows)] * subflows
    cg, local = ix.memo("compact-fabric", lambda: ix.compact(call.fabric_nodes))
    cols = []
    for sub in range(subflows):
        key = call.keys.astype(np.int64) * subflows + sub
        paths, path_key, bad = ecmp_hashed(cg, local[a], local[b], key, call.seed)
        if len(bad):
            j = int(bad[0])
            raise no_path(ix, a[j], b[j])
        if path_key is not None:
            _, first, inv = np.unique(path_key, return_index=True, return_inverse=True)
        else:
            _, first, inv = np.unique(paths, axis=0, return_index=True, return_inverse=True)
        up = paths[first].astype(np.int64)
        up = up.reshape(len(first), -1)
        owner = np.repeat(np.arange(len(first)), up.shape[1]).reshape(up.shape)
        ok = up >= 0
        sid = call.store.add(owner[ok], up[ok], np.ones(int(ok.sum())), len(first))
        cols.append((sid + inv.reshape(-1), 1.0 / subflows))
    return cols


register_policy("ecmp", ecmp, collective_pxn=True)
# a flow is hashed by its position in its call (its step's, in a collective)
register_policy("ecmp_hash", ecmp_hash, depends_on_order=True, handles_groups=True, subflows=True,
                collective_pxn=True)
