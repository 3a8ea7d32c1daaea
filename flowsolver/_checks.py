"""Argument checks shared by the collective, training and sweep entry points: integers,
numbers and GPU ranks as users pass them (Python or NumPy scalars, rank integers or GPU node
ids), each failure a ``ValueError`` that names the parameter and what it allows."""

from __future__ import annotations

import contextlib
import math
import numbers
import sys
import threading
import warnings

import numpy as np

import topologies as tp


def _plain(value):
    """A NumPy scalar as the Python value (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def integer(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as a Python int >= ``minimum`` (and <= ``maximum`` if given; NumPy integers
    accepted, bools refused).

    >>> integer("tp", np.int64(8))
    8
    >>> integer("tp", 2.0)
    Traceback (most recent call last):
    ...
    ValueError: tp must be an integer >= 1, got 2.0
    >>> integer("max_rounds", 2**31, maximum=2**31 - 1)
    Traceback (most recent call last):
    ...
    ValueError: max_rounds must be an integer in 1 ... 2147483647, got 2147483648
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum \
            or (maximum is not None and value > maximum):
        allowed = f">= {minimum}" if maximum is None else f"in {minimum} ... {maximum}"
        raise ValueError(f"{name} must be an integer {allowed}, got {_plain(value)!r}")
    return int(value)


def positive_number(name: str, value, unit: str = "") -> float:
    """``value`` as a finite Python float > 0 (NumPy scalars accepted).

    >>> positive_number("size", np.int64(1024), "bytes")
    1024.0
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    try:
        number = float(value) if ok else math.nan
    except OverflowError:                  # an int beyond float64 (10**400)
        number = math.inf
    if not math.isfinite(number) or number <= 0:
        what = f"a finite number of {unit} > 0" if unit else "a finite number > 0"
        raise ValueError(f"{name} must be {what}, got {_plain(value)!r}")
    return number


def fraction(name: str, value, *, zero_ok: bool) -> float:
    """``value`` as a Python float in [0, 1] (``zero_ok``) or (0, 1] (NumPy scalars accepted).

    >>> fraction("mfu", np.float32(0.5), zero_ok=False)
    0.5
    >>> fraction("dp_overlap", 1.5, zero_ok=True)
    Traceback (most recent call last):
    ...
    ValueError: dp_overlap must be in [0, 1], got 1.5
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and \
        (0.0 <= value <= 1.0 if zero_ok else 0.0 < value <= 1.0)
    if not ok:
        raise ValueError(f"{name} must be in {'[0, 1]' if zero_ok else '(0, 1]'}, got {_plain(value)!r}")
    return float(value)


def rank_indices(graph, ranks, name: str = "ranks", nodes=None) -> list[int]:
    """GPU ranks (positions in ``topologies.gpus(graph)``) from rank integers (Python or
    NumPy) or GPU node ids, as ``topologies.gpus`` returns them.

    >>> g = tp.fat_tree(4)
    >>> rank_indices(g, tp.gpus(g)[:2]), rank_indices(g, np.arange(2))
    ([0, 1], [0, 1])
    """
    nodes = tp.gpus(graph) if nodes is None else nodes       # the caller may know them already
    if type(ranks) in (list, tuple) and ranks and set(map(type, ranks)) == {int} \
            and 0 <= min(ranks) and max(ranks) < len(nodes):
        return list(ranks)                                    # plain ranks, all in range (no error to name)
    index = None                                              # node id -> rank, when one is met
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise ValueError(f"{name} must be a sequence of GPU ranks or GPU node ids, got {ranks!r}")
    out = []
    for i, r in enumerate(ranks):
        r = _plain(r)
        if isinstance(r, bool):
            raise ValueError(f"{name}[{i}] must be a GPU rank or a GPU node id, got {r!r}")
        if isinstance(r, int):
            if not 0 <= r < len(nodes):
                raise ValueError(f"{name}[{i}] = {r} is not a GPU rank of this graph (0 ... {len(nodes) - 1})")
            out.append(r)
            continue
        if index is None:
            index = {v: k for k, v in enumerate(nodes)}
        try:
            out.append(index[r])
        except (KeyError, TypeError):
            raise ValueError(f"{name}[{i}] must be a GPU rank (0 ... {len(nodes) - 1}) or a GPU node id of the "
                             f"graph (like {nodes[0]!r}), got {r!r}") from None
    return out


def distinct_ranks(graph, ranks, name: str = "ranks", nodes=None) -> list[int]:
    """:func:`rank_indices` of a job's GPUs, at least one and none twice (a GPU counted twice
    would double its bytes or its parts).

    >>> distinct_ranks(tp.fat_tree(4), [0, 2])
    [0, 2]
    >>> distinct_ranks(tp.fat_tree(4), [0, 0])
    Traceback (most recent call last):
    ...
    ValueError: ranks must hold distinct GPU ranks, got rank 0 twice
    """
    out = rank_indices(graph, ranks, name, nodes)
    if not out:
        raise ValueError(f"{name} must hold at least one GPU rank, got none")
    seen = set()
    for r in out:
        if r in seen:
            raise ValueError(f"{name} must hold distinct GPU ranks, got rank {r} twice")
        seen.add(r)
    return out


class _Pins(threading.local):
    """id(graph) -> ``(routing index, checked)`` of the enclosing "graph not edited here"
    block of this thread (:func:`flowsolver.routing.unchanged`): a block belongs to the
    thread that opened it; another thread's block on the same graph must neither see nor
    undo it."""

    def __init__(self):
        self.by_graph: dict = {}
        self.scratch: dict = {}         # id(graph) -> what the outermost block remembers (block_memo)


#: the one registry of graphs pinned by an ``unchanged`` block (this thread's)
PINS = _Pins()


@contextlib.contextmanager
def pinned(graph, index, checked: bool):
    """Pin ``graph`` for this thread: its routing ``index`` is used without looking at the
    graph again, and with ``checked`` (the caller ran :func:`checked_graph` on it) the calls
    inside skip the check (an enclosing block's ``checked`` is kept). The block behind
    :func:`flowsolver.routing.unchanged`."""
    key = id(graph)
    table = PINS.by_graph
    outer = table.get(key)
    table[key] = (index, bool(checked) or (outer is not None and outer[1]))
    if outer is None:
        PINS.scratch[key] = {}
    try:
        yield index
    finally:
        if outer is None:
            table.pop(key, None)
            PINS.scratch.pop(key, None)
        else:
            table[key] = outer


def block_memo(graph, key, build):
    """``build()`` once per outermost :func:`pinned` block on ``graph`` (this thread's): what
    reads node attributes the routing index does not watch (a GPU's type, its host's CPU), so
    it may not outlive the block, in which the graph is not edited; outside a block, each time.

    >>> g = object()
    >>> with pinned(g, None, False):
    ...     block_memo(g, "k", list) is block_memo(g, "k", list)
    True
    >>> block_memo(g, "k", list) is block_memo(g, "k", list)
    False
    """
    memo = PINS.scratch.get(id(graph))
    if memo is None:
        return build()
    try:
        return memo[key]
    except KeyError:
        return memo.setdefault(key, build())


def checked_graph(graph):
    """Run ``topologies.validate`` on a graph built or edited by hand (no generator
    record, or a fingerprint that no longer matches): an invalid graph gets validate's
    message rather than a confusing one from deeper down. Generated, unedited graphs are
    trusted (validate walks every node and edge in Python), and so is a graph inside a
    ``flowsolver.routing.unchanged(graph, checked=True)`` block."""
    pin = PINS.by_graph.get(id(graph))
    if pin is not None and pin[1]:
        return graph
    return tp.validate_edited(graph)


def warn_at_caller(message: str, category=UserWarning) -> None:
    """``warnings.warn(message, category)`` pointed at the first frame outside the flowsolver
    package (the user's line, however deep the library's own calls are)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("flowsolver."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
