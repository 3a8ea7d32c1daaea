"""NCCL's trees and the pipeline: the binary and double binary trees, tree edges over
servers, and chunks flowing through stages. Schedules are values: a :class:`Step` is
frozen and hashable, so identical steps are found by value."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Step", "btree", "double_btree", "tree_edges", "pipeline"]


@dataclass(frozen=True)
class Step:
    """``count`` repetitions of the concurrent ``flows`` (a tuple of ``(src, dst, bytes)``;
    src / dst are rank positions, or node ids for in-switch algorithms); the step latency
    is paid ``latency_count`` times in all."""

    count: int
    flows: tuple
    latency_count: int


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
