"""One pure schedule function per (op, algorithm) of the built-in algorithms: the algorithm
as a tuple of :class:`~._trees.Step` values. A function takes ``(p, size, layout, chunk)``
(ranks, bytes as nccl-tests counts them, the :class:`~._layout.RankLayout`, the pipeline chunk
in bytes); :mod:`._builtin_algorithms` registers them (:func:`~._algorithms.register_algorithm`),
and :func:`schedule` finds any registered algorithm's."""

from __future__ import annotations


import math
import threading

import numpy as np

from ._algorithms import algorithm_of
from ._trees import Step, StepFlows, double_btree, pipeline, tree_edges

__all__ = ["schedule"]


def _send_recv(p, size, layout, chunk):
    return (Step(1, ((0, 1, size),), 1),)


def _all_to_all_direct(p, size, layout, chunk):
    src = np.repeat(np.arange(p), p - 1)
    dst = np.tile(np.arange(p - 1), p)                  # each rank to every other, in order:
    dst += dst >= src                                   # 0 ... p-2, its own rank skipped
    return (Step(1, StepFlows.from_arrays(src, dst, size / p), 1, grouped=True),)


def _all_to_all_pairwise(p, size, layout, chunk):
    ranks = np.arange(p)
    return tuple(Step(1, StepFlows.from_arrays(ranks, (ranks + s) % p, size / p), 1) for s in range(1, p))


def _halving(p, size):
    """Recursive-halving reduce-scatter (Rabenseifner; p a power of two)."""
    k = p.bit_length() - 1
    return tuple(Step(1, tuple((i, i ^ (p >> (s + 1)), size / 2 ** (s + 1)) for i in range(p)), 1) for s in range(k))


def _doubling(p, size):
    """Recursive-doubling all-gather (p a power of two)."""
    k = p.bit_length() - 1
    return tuple(Step(1, tuple((i, i ^ (1 << s), size / p * 2 ** s) for i in range(p)), 1) for s in range(k))


def _ring(layout, p, size, count):
    rings = layout.rings
    per = size / p / len(rings)
    return (Step(count, tuple((ring[i], ring[(i + 1) % p], per) for ring in rings for i in range(p)), count),)


def _hierarchical(p, size, layout, chunk):
    """Reduce-scatter inside each server (NVLink ring), all-reduce of the shards across
    servers (one ring per local index, i.e. per rail), all-gather inside."""
    groups = layout.groups
    m, n_srv = len(groups[0]), len(groups)
    inter = tuple((groups[x][j], groups[(x + 1) % n_srv][j], size / (m * n_srv))
                  for j in range(m) for x in range(n_srv))
    steps = (Step(2 * (n_srv - 1), inter, 2 * (n_srv - 1)),)
    if m > 1:       # the reduce-scatter and all-gather inside the servers (one flow tuple)
        intra = Step(m - 1, tuple((g[i], g[(i + 1) % m], size / m) for g in groups for i in range(m)), m - 1)
        steps = (intra,) + steps + (intra,)
    return steps


def _nvls(p, size, layout, chunk):
    """In-switch reduction: each GPU sends its buffer and reduced shard up, receives its
    shard and the multicast result, at NVLS efficiency (counted as extra wire bytes)."""
    wire = size * (1 + 1 / p) / layout.nvls.efficiency
    switch = layout.nvls.switch
    return (Step(1, tuple((i, switch, wire) for i in range(p)) + tuple((switch, i, wire) for i in range(p)), 1),)


def _tree_stages(units, channels, sides=None):
    """Pipeline stages of the double binary trees: reduce up the trees, broadcast down
    (``sides``: servers' positions by shared NIC, :func:`~._trees.tree_edges`)."""
    trees = [_with_depth(tree_edges(units, parent, c, sides)) for c in range(channels)
             for parent in double_btree(len(units))]
    D = max(max(depth.values(), default=0) for _, depth in trees)
    stages = [[] for _ in range(2 * D)]
    for tree, depth in trees:
        for child, par in tree:
            d = depth[child]
            stages[D - d].append((child, par))          # reduce, up the tree
            stages[D + d - 1].append((par, child))      # broadcast, down again
    return stages


def _with_depth(tree):
    """The (child, parent) edges and each child's depth below the root."""
    parent = dict(tree)
    depth = {}
    for child in parent:
        d, x = 0, child
        while x in parent:
            x, d = parent[x], d + 1
        depth[child] = d
    return tree, depth


def _tree(p, size, layout, chunk):
    """NCCL's double binary tree all-reduce, each tree carrying half the buffer, pipelined."""
    units = layout.groups if len(layout.groups) > 1 else tuple((i,) for i in range(p))
    half = size / 2 / layout.channels
    k = max(1, math.ceil(half / chunk))
    piece = min(chunk, half)                    # whole chunks, the remainder last (as NCCL)
    sides = layout.sides if len(layout.groups) > 1 else None
    return tuple(pipeline(_tree_stages(units, layout.channels, sides), k, piece, half - (k - 1) * piece))


def _binomial(p, size, reverse):
    steps = []
    for s in range(math.ceil(math.log2(p))):
        span = 1 << s
        flows = tuple((i, i + span, size) for i in range(span) if i + span < p)
        steps.append(Step(1, tuple((b, a, n) for a, b, n in flows) if reverse else flows, 1))
    return tuple(steps[::-1] if reverse else steps)


def _chain(layout, p, size, chunk, reverse):
    """Pipelined ring broadcast (root 0 -> ... along every channel's ring) or reduce (the
    chains reversed): as NCCL splits the buffer over its channels (``layout.rings``, one a
    channel: :func:`~._layout.participants`), each ring carries ``size / channels`` from the
    root, so a broadcast across servers leaves the root's server on every rail the rings enter
    the next server on. The channels together hold one ``chunk`` at a stage, each
    ``chunk / channels`` (the remainder last): the pipeline's fill is one chunk a stage whatever
    the count. NCCL's Simple chunk is 512 KiB a channel (``calcCollChunking``, never shrunk for a
    ring broadcast), but a chain of 24 such chunks a stage on one 8 x A100 node is 2.9x the
    measured 16 MiB broadcast (superbenchmark's ``nccl_broadcast.log``: NCCL runs LL128 or LL
    there, whose lines are forwarded as they land; not modelled), where one chunk a stage is
    within -29 to +7 % of it from 4 B to 8 GiB."""
    rings = layout.rings
    share = size / len(rings)
    each = chunk / len(rings)
    k = max(1, math.ceil(share / each))
    chains = [ring[ring.index(0):] + ring[:ring.index(0)] for ring in rings]   # each from the root
    hops = [[(c[j], c[j + 1]) for c in chains] for j in range(p - 1)]
    if reverse:
        hops = [[(b, a) for a, b in stage] for stage in reversed(hops)]
    piece = min(each, share)                    # whole chunks, the remainder last (as NCCL)
    # the channels pipeline apart: the depth's latency is one channel's chain, the one that
    # crosses between servers most (each stage of some channel's chain crosses on 2+ channels)
    server = {pos: g for g, members in enumerate(layout.groups) for pos in members}
    crossings = [sum(server.get(a) != server.get(b) for a, b in zip(c, c[1:])) for c in chains]
    slowest = int(np.argmax(crossings))
    return tuple(pipeline(hops, k, piece, share - (k - 1) * piece, latency_channel=slowest))


def _ring_all_reduce(p, size, layout, chunk):
    return _ring(layout, p, size, 2 * (p - 1))


def _ring_one_way(p, size, layout, chunk):
    """Ring reduce-scatter or all-gather: ``p - 1`` rounds."""
    return _ring(layout, p, size, p - 1)


def _halving_doubling(p, size, layout, chunk):
    return _halving(p, size) + _doubling(p, size)


def _halving_only(p, size, layout, chunk):
    return _halving(p, size)


def _doubling_only(p, size, layout, chunk):
    return _doubling(p, size)


def _ring_broadcast(p, size, layout, chunk):
    return _chain(layout, p, size, chunk, reverse=False)


def _ring_reduce(p, size, layout, chunk):
    return _chain(layout, p, size, chunk, reverse=True)


def _binomial_broadcast(p, size, layout, chunk):
    return _binomial(p, size, reverse=False)


def _binomial_reduce(p, size, layout, chunk):
    return _binomial(p, size, reverse=True)


#: schedules kept by value (the symmetric groups of a training step, laid out alike, share
#: one), those of at most KEEP_FLOWS flows in all, the last KEEP_SCHEDULES of them
KEEP_FLOWS = 1 << 16
KEEP_SCHEDULES = 512
_KEPT: dict = {}
_KEPT_LOCK = threading.Lock()


def checked_steps(steps, what: str, p: int) -> tuple:
    """A registered schedule's ``steps`` as :class:`~._trees.Step` values, or a ValueError
    naming ``what`` and the step: at least one step, counts integers >= 1, latency counts
    >= 0, each step one or more ``(src, dst, bytes)`` flows between rank positions
    0 ... ``p - 1`` (or node ids) of finite bytes >= 0 (a latency count of -100 gave a
    negative time that "auto" picked; rank -1 was rank ``p - 1``)."""
    try:
        steps = tuple(st if isinstance(st, Step) else Step(*st) for st in steps)
    except TypeError as err:
        raise ValueError(f"{what} must return steps (count, flows, latency_count): {err}") from None
    if not steps:
        raise ValueError(f"{what} returned no steps")
    for j, st in enumerate(steps):
        counts = (st.count, st.latency_count)
        if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in counts) \
                or st.count < 1 or st.latency_count < 0:
            raise ValueError(f"{what}: step {j}'s count must be an integer >= 1 and its latency count >= 0, "
                             f"got {st.count!r}, {st.latency_count!r}")
        if not len(st.flows):
            raise ValueError(f"{what}: step {j} has no flows")
        for a, b, nbytes in st.flows:
            for end in (a, b):
                if isinstance(end, (int, np.integer)) and not isinstance(end, bool) and not 0 <= end < p:
                    raise ValueError(f"{what}: step {j} names rank position {end}, not in 0 ... {p - 1}")
            if not (math.isfinite(nbytes) and nbytes >= 0):
                raise ValueError(f"{what}: step {j} moves {nbytes!r} bytes; a flow's bytes are finite and >= 0")
    return steps


def schedule(op, algorithm, p, size, layout, chunk) -> tuple:
    """The steps of ``algorithm`` for ``op`` on ``p`` ranks laid out as ``layout`` (small
    schedules are kept by their arguments: steps are immutable values).

    >>> from ._layout import RankLayout
    >>> ring = RankLayout(groups=((0, 1, 2),), rings=((0, 1, 2),), channels=1)
    >>> [(s.count, len(s.flows), s.flows[0]) for s in schedule("all_reduce", "ring", 3, 3.0, ring, 1.0)]
    [(4, 3, (0, 1, 1.0))]
    """
    key = (op, algorithm, p, size, layout, chunk)
    chosen = algorithm_of(algorithm)
    kept = _KEPT.get(key)
    # (kept with the Algorithm that made them: one registered again under its name makes its own)
    steps = kept[1] if kept is not None and kept[0] is chosen else None
    if steps is None:
        steps = chosen.schedules[op](p, size, layout, chunk)
        if not chosen.builtin:
            steps = checked_steps(steps, f"algorithm {algorithm!r}'s {op} schedule", p)
        if sum(len(st.flows) for st in steps) <= KEEP_FLOWS:
            with _KEPT_LOCK:
                while len(_KEPT) >= KEEP_SCHEDULES:
                    _KEPT.pop(next(iter(_KEPT)))
                _KEPT[key] = (chosen, steps)
    return steps
