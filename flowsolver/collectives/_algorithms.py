"""The collective algorithm registry: an algorithm is one module (its schedule functions)
plus one :func:`register_algorithm` call that says which ops it runs, how their steps are
built, where it can run, and whether NCCL runs it and NCCL's cost model times it.
``ALGORITHMS`` and ``NCCL_ALGORITHMS`` are read-only views of the registry; collectives,
``"auto"``, the command line and the checks of ``algorithm=`` all read it.

A schedule function takes ``(p, size, layout, chunk)`` (ranks, bytes as nccl-tests counts
them, the rank :class:`~._layout.RankLayout`: its ``groups`` (ranks per server), ``rings``
and ``channels``, and the pipeline chunk in bytes) and returns the algorithm as a sequence
of steps ``(count, flows, latency_count)`` (or :class:`~._trees.Step` values): ``count``
identical rounds of the concurrent ``flows``, each ``(src position, dst position, bytes)``,
whose per-step latency is paid ``latency_count`` times in all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from ._nccl import OPS
from ._nccl_model import TUNER_ALGORITHMS as _NCCL_MODEL_ALGORITHMS   # those with NCCL tuning constants

__all__ = ["Algorithm", "ALGORITHMS", "NCCL_ALGORITHMS", "TUNED_OPS", "register_algorithm", "algorithm_of"]

#: the ops NCCL's cost model times (with ``tuner=True``)
TUNED_OPS = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class Algorithm:
    """A registered collective algorithm (see :func:`register_algorithm` for the fields)."""

    name: str
    schedules: Mapping = field(default_factory=dict)
    nccl_ops: tuple = ()
    unavailable: Callable | None = None
    reads_nvswitch: bool = False
    nccl_model: bool = False

    @property
    def builtin(self) -> bool:
        """Whether the library registered it (its schedules are trusted; a user's are checked)."""
        return _BUILTIN.get(self.name) is self

    def derived(self, op) -> bool:
        """Whether ``op`` has no schedule of its own: NCCL's cost model times it from the
        ring's flow solve (the graph's bus bandwidth)."""
        return op in self.schedules and self.schedules[op] is None

    def why_unavailable(self, p: int, layout) -> str | None:
        """Why the algorithm cannot run on ``p`` ranks laid out as ``layout``, or None."""
        return None if self.unavailable is None else self.unavailable(p, layout)


#: name -> Algorithm, in registration order (tests restore it around each test: conftest.py)
_REGISTRY: dict = {}
#: name -> the library's own Algorithm (a user's algorithm of the same schedule functions is not)
_BUILTIN: dict = {}


class _ByOp(Mapping):
    """op -> the names of the registered algorithms that run it (``nccl``: that NCCL runs),
    in registration order; read-only and always current (a dict of tuples' behaviour)."""

    def __init__(self, nccl: bool):
        self._nccl = nccl

    def _names(self, op):
        return tuple(a.name for a in _REGISTRY.values() if op in (a.nccl_ops if self._nccl else a.schedules))

    def __getitem__(self, op):
        if op not in OPS:
            raise KeyError(op)
        return self._names(op)

    def __iter__(self):
        return iter(OPS)

    def __len__(self):
        return len(OPS)

    def __eq__(self, other):
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None

    def __repr__(self):
        return repr(dict(self.items()))


#: op -> the algorithms that run it (``collective(..., algorithm=)``)
ALGORITHMS = _ByOp(nccl=False)
#: op -> the algorithms NCCL itself runs for it (NCCL 2.30: Ring, Tree, NVLS, NVLSTree, PAT;
#: all-to-all and send/recv are its point-to-point transfers, all peers at once; CollNet is
#: left out: no fabric here has in-network reduction); ``"auto"`` picks among these
NCCL_ALGORITHMS = _ByOp(nccl=True)


def register_algorithm(name: str, schedules: Mapping, *, nccl_ops=(), unavailable: Callable | None = None,
                       reads_nvswitch: bool = False, nccl_model: bool = False) -> Algorithm:
    """Register collective algorithm ``name`` for :func:`~flowsolver.collective`,
    :func:`~flowsolver.concurrent`, training steps and ``"auto"`` (with ``candidates="all"``,
    or ``tuner=False``, a registered algorithm competes in ``"auto"``).

    schedules
        op -> schedule function ``(p, size, layout, chunk) -> steps`` (see the module
        docstring), for each op in :data:`~flowsolver.OPS` the algorithm runs; ``None`` for
        an op NCCL's cost model times from the ring's flow solve (no schedule of its own;
        needs ``nccl_model``).
    nccl_ops
        The ops NCCL itself runs the algorithm for (``NCCL_ALGORITHMS``).
    unavailable
        ``(p, layout) -> str | None``: why it cannot run on ``p`` ranks laid out as
        ``layout`` (the error's words after "algorithm 'name'"), or None where it can.
    reads_nvswitch
        Its schedules read the layout's NVSwitch domain (``layout.nvls``, NVLS); others get
        a layout without it (so groups laid out alike share one schedule).
    nccl_model
        NCCL's tuning model (:mod:`._nccl_model`) has its constants: with ``tuner=True`` it
        is timed by NCCL's cost model for all-reduce, all-gather and reduce-scatter. Only
        NCCL's own algorithms (ring, tree, nvls, nvls_tree, pat) have them.

    Returns the :class:`Algorithm`; a name already registered is replaced.

    >>> def star(p, size, layout, chunk):     # every rank sends its buffer to rank 0, then back
    ...     return ((1, [(i, 0, size) for i in range(1, p)], 1),
    ...             (1, [(0, i, size) for i in range(1, p)], 1))
    >>> _ = register_algorithm("star", {"all_reduce": star})
    >>> "star" in ALGORITHMS["all_reduce"]
    True
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    if name == "auto":
        raise ValueError("name 'auto' is reserved (NCCL's choice)")
    if not isinstance(schedules, Mapping) or not schedules:
        raise ValueError(f"schedules must be a non-empty dict op -> schedule function, got {schedules!r}")
    for op, fn in schedules.items():
        if op not in OPS:
            raise ValueError(f"schedules: op must be one of {', '.join(OPS)}, got {op!r}")
        if fn is None and not nccl_model:
            raise ValueError(f"schedules[{op!r}] is None (timed from the ring's flow solve), which needs nccl_model=True")
        if fn is not None and not callable(fn):
            raise TypeError(f"schedules[{op!r}] must be a schedule function or None, got {type(fn).__name__}")
    nccl_ops = tuple(nccl_ops)
    if set(nccl_ops) - set(schedules):
        raise ValueError(f"nccl_ops must be among the ops of schedules ({', '.join(schedules)}), got {nccl_ops!r}")
    if nccl_model and name not in _NCCL_MODEL_ALGORITHMS:
        raise ValueError(f"nccl_model=True needs NCCL's tuning constants, which exist for "
                         f"{', '.join(_NCCL_MODEL_ALGORITHMS)} only, got {name!r}")
    if unavailable is not None and not callable(unavailable):
        raise TypeError(f"unavailable must be None or a function (p, layout) -> str | None, got {unavailable!r}")
    if name in _REGISTRY and _REGISTRY[name].builtin:       # it vanished from the ops and NCCL's list
        raise ValueError(f"name {name!r} is a built-in algorithm: register yours under another name")
    algorithm = Algorithm(name, dict(schedules), nccl_ops, unavailable, bool(reads_nvswitch), bool(nccl_model))
    _REGISTRY[name] = algorithm
    return algorithm


def mark_builtin() -> None:
    """Record the algorithms registered so far as the library's (``_builtin_algorithms`` calls
    it once they are registered)."""
    _BUILTIN.update(_REGISTRY)


def algorithm_of(name) -> Algorithm:
    """The registered :class:`Algorithm` called ``name`` (a KeyError naming the known ones)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise KeyError(f"no collective algorithm {name!r} (registered: {', '.join(_REGISTRY)})") from None


def nccl_model_algorithms() -> tuple:
    """The registered algorithms NCCL's cost model times."""
    return tuple(a.name for a in _REGISTRY.values() if a.nccl_model)
