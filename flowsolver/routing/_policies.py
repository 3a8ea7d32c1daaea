"""The routing policy registry: a policy is one function plus one :func:`register_policy`
call that declares what its routes depend on, so that :func:`~flowsolver.route` dispatches
through the registry and collectives group their steps from the declaration (no list of
policy names kept anywhere else).

A policy function takes a :class:`PolicyCall` (the flows of one ``route`` call that the
policy decides, as integer node ids, with their sizes and options) and returns its
*columns*: a list of ``(segment ids, coefficient)``, one segment id per flow (``-1``: none)
and a coefficient (a number, or one per flow); a flow's route is the sum over the columns
of ``coefficient x segment``. Segments come from :meth:`PolicyCall.paths` (cached per pair
of nodes), :meth:`PolicyCall.ecmp` or :meth:`PolicyCall.node_paths`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._cache import PairPaths
from ._graph_index import GraphIndex, RoutingError, Segments, no_path, unique_pairs
from ._shortest_paths import ecmp_fluid

__all__ = ["Policy", "PolicyCall", "POLICIES", "register_policy", "policy_of"]


@dataclass(frozen=True)
class Policy:
    """A registered routing policy (see :func:`register_policy` for the fields)."""

    name: str
    function: Callable
    depends_on_load: bool = False
    depends_on_order: bool = False
    per_step_draw: bool = False
    whole_path: bool = False
    handles_groups: bool = False
    subflows: bool = False
    collective_pxn: bool = False

    @property
    def builtin(self) -> bool:
        """Whether the library registered it (a user's policy's columns are checked)."""
        return _BUILTIN.get(self.name) is self

    @property
    def per_call(self) -> bool:
        """Whether a flow's route depends on the other flows of its call (their order, the
        call's random draws or its load): the steps of a collective routed together must
        then be routed as one call each (``route(..., groups=)``), and routes cannot be
        shared between steps that have the same endpoints but other flows around them."""
        return self.depends_on_load or self.depends_on_order or self.per_step_draw


#: name -> Policy, in registration order (tests restore it around each test: conftest.py)
_REGISTRY: dict = {}
#: name -> the library's own Policy (its routes are trusted; a registered one's columns are checked)
_BUILTIN: dict = {}


def mark_builtin() -> None:
    """Record the policies registered so far as the library's (the routing package calls it
    once its own are registered)."""
    _BUILTIN.update(_REGISTRY)


class _PolicyNames(Sequence):
    """The registered policy names, read-only and always current (a tuple's behaviour:
    ``in``, iteration, indexing, ``len``, equality with a tuple or list of names)."""

    def __getitem__(self, i):
        return tuple(_REGISTRY)[i]

    def __len__(self):
        return len(_REGISTRY)

    def __contains__(self, name):
        return isinstance(name, str) and name in _REGISTRY

    def __iter__(self):
        return iter(tuple(_REGISTRY))

    def __eq__(self, other):
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None

    def __repr__(self):
        return repr(tuple(_REGISTRY))


#: the names of the registered routing policies (a read-only view of the registry)
POLICIES = _PolicyNames()


def register_policy(name: str, function: Callable, *, depends_on_load: bool = False, depends_on_order: bool = False,
                    per_step_draw: bool = False, whole_path: bool = False, handles_groups: bool = False,
                    subflows: bool = False, collective_pxn: bool = False) -> Policy:
    """Register ``function`` as routing policy ``name`` for :func:`~flowsolver.route`,
    collectives, training steps and sweeps (``policy=name``).

    ``function(call)`` gets a :class:`PolicyCall` and returns the route's columns: a list of
    ``(segment ids, coefficient)``, one segment id per flow of the call (``-1`` where none)
    and a coefficient (a number, or an array of one per flow).

    Declarations (what collectives and the routing cache need to know; declare each one
    that holds, else a collective's steps may be routed together wrongly):

    depends_on_load
        A flow's route depends on the sizes of the call's flows or the link capacities
        (UGAL weighs load / capacity): a collective routes each step as its own call, and a
        kept routing is reused only for the same sizes.
    depends_on_order
        A flow's route depends on its position among the call's flows (ECMP hashing keys
        a flow by its index): each step routed as its own call, with its own positions.
    per_step_draw
        The policy draws random choices once per call (Valiant's intermediate routers):
        each step routed as its own call, with its own draws.
    whole_path
        ``call.src`` / ``call.dst`` are the GPUs and the columns are their whole paths over
        the graph (no server rule: no NIC, rail or PXN); otherwise (the default) they are
        the switches where the flows enter and leave the fabric, and the columns the
        fabric part, between the way out of the sending server and the way into the
        receiving one.
    handles_groups
        The function itself routes each group of ``call.groups`` as its own call
        (vectorised); otherwise ``route(..., groups=)`` calls it once per group.
    subflows
        The policy takes the ``subflows`` option (``call.subflows``; 1 for every other).
    collective_pxn
        Collectives pass their ``pxn`` option (NCCL's PXN, on by default) to ``route``
        under this policy (others route with ``pxn=False``).

    Returns the :class:`Policy` record; a name already registered is replaced.

    >>> import numpy as np, topologies as tp
    >>> from flowsolver import Flows, route
    >>> def first_next_hop(call):      # fluid ECMP, as a policy of its own
    ...     return [(call.ecmp(call.src, call.dst), 1.0)]
    >>> _ = register_policy("my_ecmp", first_next_hop)
    >>> rm = route(tp.fat_tree(4), Flows([0], [15], 1e6), policy="my_ecmp")
    >>> sorted(set(np.round(rm.column(0)[1], 4).tolist()))
    [0.25, 0.5, 1.0]
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    if not callable(function):
        raise TypeError(f"function must be callable (it gets a PolicyCall), got {type(function).__name__}")
    flags = dict(depends_on_load=depends_on_load, depends_on_order=depends_on_order, per_step_draw=per_step_draw,
                 whole_path=whole_path, handles_groups=handles_groups, subflows=subflows,
                 collective_pxn=collective_pxn)
    for flag, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{flag} must be True or False, got {value!r}")
    policy = Policy(name, function, **{k: bool(v) for k, v in flags.items()})
    _REGISTRY[name] = policy
    return policy


def policy_of(name) -> Policy:
    """The registered :class:`Policy` called ``name``, else the ValueError ``route`` raises."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}") from None


@dataclass
class PolicyCall:
    """What a policy function decides: the flows of one ``route`` call that need its rule.

    Attributes: ``index`` (the graph's :class:`GraphIndex`: ``index.graph``, ``index.nodes``,
    ``index.capacity`` (bytes/s), ``index.name(i)``), ``src`` / ``dst`` (int64 node ids per
    flow: the fabric's entry and exit switches, or the GPUs for a ``whole_path`` policy),
    ``sizes`` (bytes per flow), ``keys`` (what a hashing policy keys each flow by: its
    position in its call), ``groups`` (each flow's group, routed as its own call, or None),
    ``seed``, ``subflows``, and ``fabric_nodes`` (the nodes a fabric path may use).
    """

    index: GraphIndex
    store: Segments
    src: np.ndarray
    dst: np.ndarray
    sizes: np.ndarray
    keys: np.ndarray
    groups: np.ndarray | None
    seed: int
    subflows: int
    fabric_nodes: np.ndarray | None

    @property
    def graph(self):
        """The cluster graph."""
        return self.index.graph

    def memo(self, key, build):
        """``build()`` once per graph while it is unchanged (tables a policy derives from it)."""
        return self.index.memo(key, build)

    def paths(self, a, b, compute, rule: str, what: str = "route") -> np.ndarray:
        """One segment per distinct pair ``(a[i], b[i])``; the segment id of every pair.

        ``compute(x, y)`` returns ``(pair, link, frac, missing)`` entries for the pairs no
        earlier ``route`` on this graph computed under ``rule`` (a name of the rule, the key
        of the kept paths): entry ``k`` puts fraction ``frac[k]`` of pair ``pair[k]``'s flow
        on link ``link[k]``; ``missing`` lists the pairs without a path (a
        :class:`RoutingError` naming the first)."""
        ix = self.index
        ua, ub, inv = unique_pairs(a, b, ix.nv)
        uniq = ua * ix.nv + ub

        def checked(x, y):
            pair, link, frac, *rest = compute(x, y)
            if rest and len(rest[0]):
                j = int(rest[0][0])
                raise no_path(ix, x[j], y[j], what)
            return pair, link, frac

        pair, link, frac = ix.memo(("paths", rule), PairPaths).entries(uniq, ua, ub, checked)
        first = self.store.add(pair, link, frac, len(uniq))
        return first + inv.reshape(-1)

    def ecmp(self, a, b) -> np.ndarray:
        """Segments of the fluid split over the shortest fabric paths from ``a`` to ``b``
        (each switch splits evenly over its next hops, by parallel cables), cached."""
        cg, local = self.index.memo("compact-fabric", lambda: self.index.compact(self.fabric_nodes))
        return self.paths(a, b, lambda x, y: ecmp_fluid(cg, local[x], local[y]), "ecmp")

    def node_paths(self, paths) -> np.ndarray:
        """One segment per flow from explicit paths: ``paths[i]`` a sequence of node ids of
        the graph from the flow's ``src`` to its ``dst`` (``index.nodes[call.src[i]]`` ...),
        or a list of ``(fraction, nodes)`` splitting the flow over several. A hop with no
        working link raises :class:`RoutingError`; parallel cables count as one link (the
        first)."""
        ix = self.index
        owner, u, v, frac = [], [], [], []
        for i, p in enumerate(paths):
            for share, nodes in (p if len(p) and isinstance(p[0], tuple) else [(1.0, p)]):
                try:
                    ids = [ix.idx[n] for n in nodes]
                except (KeyError, TypeError):
                    raise RoutingError(f"paths[{i}] holds a node that is not in the graph: {list(nodes)!r}") from None
                owner += [i] * (len(ids) - 1)
                u += ids[:-1]
                v += ids[1:]
                frac += [float(share)] * (len(ids) - 1)
        link = ix.working_link_ids(np.array(u, dtype=np.int64), np.array(v, dtype=np.int64),
                                   lambda j: f"paths[{owner[j]}]")
        first = self.store.add(owner, link, frac, len(paths))
        return first + np.arange(len(paths), dtype=np.int64)
