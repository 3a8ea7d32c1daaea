"""NCCL's trees and the pipeline: the binary and double binary trees, tree edges over
servers, and chunks flowing through stages. Schedules are values: a :class:`Step` is
frozen and hashable, so identical steps are found by value."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Step", "StepFlows", "btree", "double_btree", "tree_edges", "pipeline"]


class StepFlows(tuple):
    """The flows of a step: a tuple of ``(src, dst, bytes)``, compared by value, that
    hashes its million entries once (a plain tuple hashes them at every lookup) and keeps
    its endpoints and sizes as arrays.

    >>> f = StepFlows([(0, 1, 2.0), (1, "s0/nvswitch0", 2.0)])
    >>> f == ((0, 1, 2.0), (1, "s0/nvswitch0", 2.0)), f.positions()[1].tolist(), f.has_node_ids
    (True, [1, -1], True)
    """

    @classmethod
    def from_arrays(cls, src, dst, nbytes) -> "StepFlows":
        """The flows ``(src[i], dst[i], nbytes[i])`` of rank positions (int arrays) and bytes,
        their arrays kept as given (no per-flow Python work after the tuple is built).

        >>> f = StepFlows.from_arrays([0, 1], [1, 0], [2.0, 2.0])
        >>> f[1], f.has_node_ids, f.positions()[1].tolist()
        ((1, 0, 2.0), False, [1, 0])
        """
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)
        flows = cls(zip(src.tolist(), dst.tolist(), nbytes.tolist()))
        flows.__dict__.update(has_node_ids=False, nbytes=nbytes.copy(), _positions=(src, dst))
        return flows

    def __hash__(self):
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = self.__dict__["_hash"] = tuple.__hash__(self)
            return value

    @cached_property
    def has_node_ids(self) -> bool:
        """Whether an endpoint is a node id (in-switch algorithms) rather than a rank position."""
        return any(isinstance(a, str) or isinstance(b, str) for a, b, _ in self)

    @cached_property
    def nbytes(self) -> np.ndarray:
        """Bytes of each flow."""
        return np.fromiter((n for _, _, n in self), dtype=np.float64, count=len(self))

    def positions(self) -> tuple:
        """(src, dst) rank positions as int64 arrays, -1 where the endpoint is a node id."""
        if "_positions" not in self.__dict__:
            pos = lambda x: x if isinstance(x, int) else -1  # noqa: E731
            self.__dict__["_positions"] = (np.fromiter((pos(a) for a, _, _ in self), dtype=np.int64, count=len(self)),
                                          np.fromiter((pos(b) for _, b, _ in self), dtype=np.int64, count=len(self)))
        return self.__dict__["_positions"]


@dataclass(frozen=True)
class Step:
    """``count`` repetitions of the concurrent ``flows`` (:class:`StepFlows`: ``(src, dst,
    bytes)`` tuples; src / dst are rank positions, or node ids for in-switch algorithms);
    the step latency is paid ``latency_count`` times in all."""

    count: int
    flows: tuple
    latency_count: int

    def __post_init__(self):
        if not isinstance(self.flows, StepFlows):
            object.__setattr__(self, "flows", StepFlows(self.flows))


def btree(u):
    """NCCL's binary tree over 0 ... u-1 (parent per node, -1 at the root 0): a node's
    parent clears its lowest set bit and sets the next, so odd nodes are leaves.

    >>> btree(6)
    [-1, 2, 4, 2, 0, 4]
    """
    parent = [-1] * u
    for r in range(1, u):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parent[r] = up if up < u else r ^ bit
    return parent


def double_btree(u):
    """The two trees of NCCL's double binary tree: the second is the first mirrored (even u)
    or shifted by one (odd u), so a node inner in one tree is a leaf in the other.

    >>> double_btree(4)
    ([-1, 2, 0, 2], [1, 3, 1, -1])
    """
    first = btree(u)
    if u % 2 == 0:
        to, back = (lambda x: u - 1 - x), (lambda y: u - 1 - y)
    else:
        to, back = (lambda x: (x + 1) % u), (lambda y: (y - 1) % u)
    second = [back(first[to(x)]) if first[to(x)] >= 0 else -1 for x in range(u)]
    return first, second


def tree_edges(groups, parent_of_group, channel):
    """(child, parent) rank positions of one tree: the tree over servers (or ranks), each
    server a chain that starts at local GPU ``channel mod m`` (its NIC's rail)."""
    chains = [tuple(g[channel % len(g):]) + tuple(g[:channel % len(g)]) for g in groups]
    edges = []
    for gi, chain in enumerate(chains):
        up = parent_of_group[gi]
        if up >= 0:
            edges.append((chain[0], chains[up][0]))
        edges.extend((chain[j], chain[j - 1]) for j in range(1, len(chain)))
    return edges


def pipeline(stages, k, piece):
    """Steps of ``k`` chunks of ``piece`` bytes flowing through the stages in order (a chunk
    crosses stage ``t`` at pipeline step ``chunk + t``). Distinct active-stage ranges become
    one step each; the pipeline pays its depth (number of stages) in step latencies, once:
    NCCL keeps several chunks in flight per channel (NCCL_STEPS = 8), so later chunks'
    latencies overlap the transfers.

    >>> [(s.count, len(s.flows), s.latency_count) for s in pipeline([[(0, 1)], [(1, 2)]], 3, 1.0)]
    [(1, 1, 0), (2, 2, 2), (1, 1, 0)]
    """
    n = len(stages)
    keys = [((0, s), 1) for s in range(min(k, n) - 1)]
    if k >= n:
        keys.append(((0, n - 1), k - n + 1))
    else:
        keys.extend(((s - k + 1, s), 1) for s in range(k - 1, n))
    keys.extend(((s - k + 1, n - 1), 1) for s in range(max(k, n), k + n - 1))
    steps = [Step(c, tuple((a, b, piece) for t in range(lo, hi + 1) for a, b in stages[t]), 0) for (lo, hi), c in keys]
    widest = max(range(len(steps)), key=lambda i: len(steps[i].flows))
    steps[widest] = Step(steps[widest].count, steps[widest].flows, n)
    return steps
