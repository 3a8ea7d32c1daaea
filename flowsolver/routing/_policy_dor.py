"""Policy ``dor``: dimension-order routing on a ``topologies.torus`` (dimensions corrected
in order, the shorter way round, the + direction at a tie). A flow whose path needs a failed
(capacity 0) or missing link is refused with a ``RoutingError`` naming policy ``'shortest'``:
``dor`` never routes around a failure (``ecmp`` and ``shortest`` do)."""

from __future__ import annotations

from ._fabric import dor_paths
from ._policies import register_policy


def dor(call):
    """One column: each flow's dimension-order path between its routers."""
    return [(call.paths(call.src, call.dst, lambda x, y: dor_paths(call.index, x, y), "dor"), 1.0)]


register_policy("dor", dor)
