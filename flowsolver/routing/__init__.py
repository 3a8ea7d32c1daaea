"""Routing: a cluster graph + flows + a policy -> a sparse RoutingMatrix.

Policies
--------
``"ecmp"``
    Fluid split over all equal-cost shortest paths: every switch splits what it forwards
    evenly over its next hops on a shortest path, in proportion to their parallel cables
    (ideal packet spraying / adaptive routing).
``"ecmp_hash"``
    Each flow - or each of its ``subflows`` sub-flows, which carry equal shares (NCCL opens
    several connections per GPU pair; Llama 3 used 16) - is pinned to one shortest path,
    chosen hop by hop by a seeded hash among the next hops (weighted by cables), so hash
    collisions show up as uneven link loads.
``"dor"``
    Dimension-order routing on a ``topologies.torus``: dimensions corrected in order, the
    shorter way round, the + direction at a tie.
``"minimal"``, ``"valiant"``, ``"ugal"``
    DragonFly: minimal = one global hop, fluid over the working global cables between the
    two groups; valiant = to the router of a random third group where a random global cable
    from the source's group lands, over the cables of the source's group that land on it
    (Kim et al. 2008's VAL: a random intermediate group, at most 3 local hops, no router
    twice), then minimal to the destination; ugal = per flow, minimal or valiant by the UGAL-G rule (queue x
    hops, with link load / capacity as the queue) in the fluid limit: from all-minimal, a
    damped best response over a few rounds, each flow taking the path of the smaller
    (max load / capacity on the path) x (hops) under the current loads.
``"shortest"``
    Generic: fluid split over the shortest paths of the whole graph, for any graph a user
    built or edited. GPUs are never transit nodes unless the graph has no switch (a torus of
    chips). No rail or server rule is applied.

Paths
-----
On switched fabrics every policy but ``shortest`` cuts a path into the sending GPU's path
to its NIC, the fabric path between the two NICs' switches, and the receiving NIC's path
to its GPU (see :mod:`._graph_index`). Traffic between GPUs of one server stays inside the
server (NVSwitch, or PCIe on the PCIe server) and never leaves through a NIC. Traffic
leaving a server uses the NIC of the sending GPU's rail; with ``pxn=True`` it first moves
inside the server to the GPU on the receiving GPU's rail (NCCL's PXN) and leaves through
that rail, unless no working path inside the server leads there (that GPU or its links
failed: NCCL has no proxy on it), when it leaves by its own rail's NIC. A GPU whose own NIC has
no working uplink uses the working NIC of the next rail of its server. Links of capacity 0 or removed are never used; a pair left without a path
raises :class:`RoutingError` naming it.

Adding a policy
---------------
A policy is one function and one :func:`register_policy` call (see :mod:`._policies`):
the function gets a :class:`PolicyCall` and returns its columns of segments; the
registration declares whether its routes depend on load, on the order of the flows in the
call, or on draws made once per call, and collectives group their steps from that.

Modules: ``_route`` (:func:`route`), ``_policies`` (the registry, :class:`PolicyCall`),
``_policy_ecmp`` / ``_policy_dor`` / ``_policy_dragonfly`` / ``_policy_shortest`` (the
built-in policies), ``_graph_index`` (the graph's integer index, segments, server parts,
:func:`unchanged`), ``_cache`` (what is kept per graph), ``_endpoints`` (the GPU-NIC-switch
parts), ``_shortest_paths`` (fluid and hashed ECMP), ``_fabric`` (DOR and DragonFly
tables), ``_links``, ``_matrix``, ``_keys``.
"""

from __future__ import annotations

from ._cache import clear_route_cache, path_computations
from ._graph_index import GraphIndex, RoutingError, gpu_nodes, graph_memo, unchanged, unique_pairs
from ._keys import ranges  # noqa: F401 (for the solver, not in __all__)
from ._links import HOP_CLASSES, Bottleneck, LinkTable, first_tier, link_efficiency
from ._matrix import MergedRouting, RoutingMatrix, checked_fractions  # noqa: F401 (checked_fractions: for the solver)
from ._matrix_check import checked_matrix  # noqa: F401 (for the solver)
from ._policies import POLICIES, Policy, PolicyCall, policy_of, register_policy
# the built-in policies register themselves, in this order (POLICIES' order)
from . import _policy_ecmp, _policy_dor, _policy_dragonfly, _policy_shortest  # noqa: F401,E402
from ._policies import mark_builtin  # noqa: E402
mark_builtin()
from ._route import route

__all__ = ["route", "path_computations", "clear_route_cache", "unchanged", "graph_memo", "unique_pairs", "gpu_nodes",
           "RoutingMatrix", "LinkTable", "Bottleneck", "MergedRouting", "RoutingError", "POLICIES", "HOP_CLASSES",
           "link_efficiency", "first_tier", "register_policy", "policy_of", "Policy", "PolicyCall"]
