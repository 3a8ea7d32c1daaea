"""NCCL's trees and the pipeline: the binary and double binary trees, tree edges over
servers, and chunks flowing through stages. Schedules are values: a :class:`Step` is
frozen and hashable, so identical steps are found by value."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Step", "StepFlows", "btree", "double_btree", "tree_edges", "pipeline"]


class StepFlows:
    """The flows of a step: ``(src, dst, bytes)`` triples held as arrays (a million-flow
    all-to-all costs three arrays, not a million tuples), compared and hashed by value.
    ``src`` / ``dst`` are rank positions, or node ids (str) for in-switch algorithms.

    >>> f = StepFlows([(0, 1, 2.0), (1, "s0/nvswitch0", 2.0)])
    >>> f == ((0, 1, 2.0), (1, "s0/nvswitch0", 2.0)), f.positions()[1].tolist(), f.has_node_ids
    (True, [1, -1], True)
    >>> list(StepFlows.from_arrays([0, 1], [1, 0], 2.0)), len(f), f[1]
    ([(0, 1, 2.0), (1, 0, 2.0)], 2, (1, 's0/nvswitch0', 2.0))
    """

    __slots__ = ("_src", "_dst", "nbytes", "_names", "_hash")

    def __init__(self, flows=()):
        flows = flows if isinstance(flows, (list, tuple)) else list(flows)
        n = len(flows)
        ends = [[fl[side] for fl in flows] for side in (0, 1)]
        nbytes = np.fromiter((fl[2] for fl in flows), dtype=np.float64, count=n)
        if all(type(x) is int for side in ends for x in side):           # rank positions only
            self._set(np.array(ends[0], dtype=np.int64), np.array(ends[1], dtype=np.int64), nbytes, ())
            return
        src, dst = (np.fromiter((x if _is_position(x) else -1 for x in side), dtype=np.int64, count=n) for side in ends)
        names = tuple((i, side, x) for i, fl in enumerate(flows) for side, x in enumerate(fl[:2])
                      if not _is_position(x))
        self._set(src, dst, nbytes, names)

    def _set(self, src, dst, nbytes, names):
        for a in (src, dst, nbytes):          # values: the hash below must stay true
            a.flags.writeable = False
        self._src, self._dst, self.nbytes, self._names = src, dst, nbytes, names
        # equal flows hash equal; equality itself compares every flow, so the hash reads
        # at most ~1,000 of them (hashing a 16 M-flow step's bytes took a second)
        every = max(len(src) // 1024, 1)
        self._hash = hash((len(src), src[::every].tobytes(), dst[::every].tobytes(), nbytes[::every].tobytes(),
                           names))

    @classmethod
    def from_arrays(cls, src, dst, nbytes) -> "StepFlows":
        """The flows ``(src[i], dst[i], nbytes[i])`` between rank positions (int arrays),
        ``nbytes`` bytes each (an array or one number for all)."""
        flows = cls.__new__(cls)
        src, dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        flows._set(src, dst, np.array(np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)), ())
        return flows

    @property
    def has_node_ids(self) -> bool:
        """Whether an endpoint is a node id (in-switch algorithms) rather than a rank position."""
        return bool(self._names)

    def positions(self) -> tuple:
        """(src, dst) rank positions as int64 arrays, -1 where the endpoint is a node id."""
        return self._src, self._dst

    def __len__(self):
        return len(self.nbytes)

    def _end(self, i, side):
        x = (self._src, self._dst)[side][i]
        if x >= 0 or not self._names:
            return int(x)
        return next(name for j, sd, name in self._names if j == i and sd == side)

    def __getitem__(self, i):
        i = range(len(self))[i]
        return self._end(i, 0), self._end(i, 1), float(self.nbytes[i])

    def __iter__(self):
        if not self._names:
            return zip(self._src.tolist(), self._dst.tolist(), self.nbytes.tolist())
        at = {(j, side): name for j, side, name in self._names}     # one look-up each, not a scan
        return ((s if s >= 0 else at[i, 0], d if d >= 0 else at[i, 1], b)
                for i, (s, d, b) in enumerate(zip(self._src.tolist(), self._dst.tolist(), self.nbytes.tolist())))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if isinstance(other, (tuple, list)):
            other = StepFlows(other)
        if not isinstance(other, StepFlows):
            return NotImplemented
        return self._hash == other._hash and self._names == other._names and \
            np.array_equal(self._src, other._src) and np.array_equal(self._dst, other._dst) and \
            np.array_equal(self.nbytes, other.nbytes)

    def __repr__(self):
        return f"StepFlows({list(self)[:4]!r}{'...' if len(self) > 4 else ''}, n={len(self)})"


def _is_position(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


@dataclass(frozen=True)
class Step:
    """``count`` repetitions of the concurrent ``flows`` (:class:`StepFlows`: ``(src, dst,
    bytes)`` tuples; src / dst are rank positions, or node ids for in-switch algorithms);
    the step latency is paid ``latency_count`` times in all. ``grouped``: the flows are NCCL's
    grouped sends and receives (an all-to-all), each further peer of a rank costing
    :data:`~._nccl.PEER_LATENCY` on top (:func:`~._nccl.peer_latency`). ``latency_flows``:
    the positions of the flows whose slowest hop is the step's latency (default all: one
    channel's hop, where channels pipeline apart, :func:`pipeline`)."""

    count: int
    flows: tuple
    latency_count: int
    grouped: bool = False
    latency_flows: tuple | None = None

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


def tree_edges(groups, parent_of_group, channel, sides=None):
    """(child, parent) rank positions of one tree: the tree over servers (or ranks), each
    server a chain that starts at local GPU ``channel mod m`` (its NIC's rail). ``sides``:
    where servers' GPUs share NICs, per server its positions grouped by NIC (in NIC order);
    the chain then starts at a GPU of NIC ``channel mod n`` (the next of that NIC's GPUs for
    each further round of NICs), as NCCL's search gives channel ``c`` the NIC
    ``nets[c mod netCount]`` and starts it at a GPU local to it, for trees as for rings
    (``src/graph/search.cc``, ``ncclTopoSearchRecNet``).

    >>> tree_edges([(0, 1, 2, 3), (4, 5, 6, 7)], [-1, 0], 1)      # rail 1: GPU 1 of each server
    [(2, 1), (3, 2), (0, 3), (5, 1), (6, 5), (7, 6), (4, 7)]
    >>> nics = [((0, 1), (2, 3)), ((4, 5), (6, 7))]                # two GPUs a NIC: channel 1 on NIC 1
    >>> tree_edges([(0, 1, 2, 3), (4, 5, 6, 7)], [-1, 0], 1, sides=nics)[3]
    (6, 2)
    """
    def first(gi, g):
        if sides is None or len(sides[gi]) < 2:
            return channel % len(g)
        side = sides[gi][channel % len(sides[gi])]
        return g.index(side[(channel // len(sides[gi])) % len(side)])

    chains = [tuple(g[first(gi, g):]) + tuple(g[:first(gi, g)]) for gi, g in enumerate(groups)]
    edges = []
    for gi, chain in enumerate(chains):
        up = parent_of_group[gi]
        if up >= 0:
            edges.append((chain[0], chains[up][0]))
        edges.extend((chain[j], chain[j - 1]) for j in range(1, len(chain)))
    return edges


def pipeline(stages, k, piece, last=None, latency_channel=None):
    """Steps of ``k`` chunks flowing through the stages in order (a chunk crosses stage ``t``
    at pipeline step ``chunk + t``): ``k - 1`` of ``piece`` bytes, then the last of ``last``
    (default ``piece``), as NCCL cuts a buffer: whole chunks, the remainder last (its
    ``realChunkSize = min(chunkSize, divUp(left, nChannels))``). Distinct active-stage ranges
    become one step each; the pipeline pays its depth (number of stages) in step latencies,
    once: NCCL keeps several chunks in flight per channel (NCCL_STEPS = 8), so later chunks'
    latencies overlap the transfers. With ``latency_channel`` (each stage one pair per channel,
    the channels' chunks pipelining apart, as NCCL's channels do), each stage's latency is
    paid once, when the first chunk enters it, at that channel's hop: the depth's latency is
    the sum of one channel's hops (a chain across servers pays its network hops, not the
    slowest hop of any channel at every stage).

    >>> [(s.count, len(s.flows), s.latency_count) for s in pipeline([[(0, 1)], [(1, 2)]], 3, 1.0)]
    [(1, 1, 0), (2, 2, 2), (1, 1, 0)]
    >>> [s.flows.nbytes.tolist() for s in pipeline([[(0, 1)], [(1, 2)]], 2, 4.0, 1.0)]
    [[4.0], [1.0, 4.0], [1.0]]
    >>> [(s.latency_count, s.latency_flows) for s in pipeline([[(0, 1), (5, 6)], [(1, 2), (6, 7)]], 3, 1.0,
    ...                                                       latency_channel=1)]
    [(1, (1,)), (1, (3,)), (0, None)]
    """
    n = len(stages)
    last = piece if last is None else last
    # (first stage, last stage) active, how many steps, whether the first active stage holds
    # the last chunk (every step from the one it enters the pipeline on)
    keys = [((0, s), 1, False) for s in range(min(k, n) - 1)]
    if k >= n:
        if last == piece:
            keys.append(((0, n - 1), k - n + 1, False))
        else:
            keys.extend([((0, n - 1), k - n, False)] * (k > n) + [((0, n - 1), 1, True)])
    else:
        keys.extend(((s - k + 1, s), 1, True) for s in range(k - 1, n))
    keys.extend(((s - k + 1, n - 1), 1, True) for s in range(max(k, n), k + n - 1))
    pairs = [pair for stage in stages for pair in stage]
    start = np.cumsum([0] + [len(stage) for stage in stages])      # each stage's first flow
    if pairs and all(_is_position(a) and _is_position(b) for a, b in pairs):   # as arrays
        src, dst = (np.array([pair[i] for pair in pairs], dtype=np.int64) for i in (0, 1))
        steps = []
        for (lo, hi), c, tail in keys:
            part = slice(start[lo], start[hi + 1])
            nbytes = np.full(start[hi + 1] - start[lo], piece)
            if tail:
                nbytes[:start[lo + 1] - start[lo]] = last
            steps.append(Step(c, StepFlows.from_arrays(src[part], dst[part], nbytes), 0))
    else:
        steps = [Step(c, tuple((a, b, last if tail and t == lo else piece) for t in range(lo, hi + 1)
                               for a, b in stages[t]), 0) for (lo, hi), c, tail in keys]
    if latency_channel is None:
        widest = max(range(len(steps)), key=lambda i: len(steps[i].flows))
        steps[widest] = Step(steps[widest].count, steps[widest].flows, n)
        return steps
    reached = -1                     # the last stage a chunk has entered
    for i, ((lo, hi), _, _) in enumerate(keys):
        if hi > reached:             # the first chunk enters stage hi: its latency, on the channel's hop
            steps[i] = Step(steps[i].count, steps[i].flows, 1,
                            latency_flows=(int(start[hi] - start[lo]) + latency_channel,))
            reached = hi
    return steps
