"""Policy ``shortest``: fluid split over the shortest paths of the whole graph, for any
graph a user built or edited. GPUs and storage hosts are never transit nodes unless the graph
has no switch (a torus of chips); no rail or server rule is applied."""

from __future__ import annotations

import numpy as np

from ._policies import register_policy
from ._shortest_paths import ecmp_fluid


def shortest(call):
    """One column: the fluid split over the graph's shortest paths, GPU to GPU."""
    ix = call.index
    # GPUs and storage hosts are endpoints, never forwarders (a dual-homed storage host carried a third of
    # the GPU traffic between its two leaves)
    transit = ~(ix.is_gpu | (ix.kind == "storage")) if (ix.is_switch | (ix.kind == "nvswitch")).any() \
        else np.ones(ix.nv, bool)
    cg, local = ix.memo("compact-shortest", lambda: ix.compact(np.arange(ix.nv), transit))
    return [(call.paths(call.src, call.dst, lambda a, b: ecmp_fluid(cg, local[a], local[b]), "shortest"), 1.0)]


register_policy("shortest", shortest, whole_path=True)
