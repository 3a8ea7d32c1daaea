"""The rings NCCL's search packs on one node of GPUs joined pairwise by NVLink without an
NVSwitch: which directed Hamiltonian cycles, and how many channels of each, where
:func:`~._channels.mesh_ring_channels` gives only their count.

NCCL's ring search (src/graph/search.cc ncclTopoCompute, master 5067397c) settles on one speed
``s`` a channel (GB/s) and keeps as many rings as the arcs carry at it, an arc of ``bw`` GB/s
taking ``floor(bw / s)`` of them (followPath, search.cc:81); ``ncclTopoDupChannels`` may then
copy every ring once (search.cc:1036-1047). On a uniform mesh every cycle is one ring; an arc
slower than ``s`` (a degraded pair, or a failed one at 0) carries none, and the rings are the
cycles that avoid it. Units: GB/s as NCCL's search counts them.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import permutations


from ._channels import _INTRA_SPEEDS, _SM80_INTRA, directed_cycles, mesh_ring_channels

__all__ = ["packed_cycles", "mesh_rings"]


def packed_cycles(cycles, capacity: dict) -> tuple:
    """The most rings of ``cycles`` (each a tuple of arcs) whose arcs' uses stay within
    ``capacity`` (arc -> rings it carries), as one cycle per ring: round by round through
    ``cycles`` in their order, one more ring of every cycle that still fits (on a uniform mesh
    every cycle once a round, as NCCL's search spreads its channels over the pairs, the next
    GPU chosen by the bandwidth left, search.cc ncclTopoSearchNextGpuSort), else where those
    rounds fall short of the most, the first packing of the most a backtracking search finds
    (as ``_packed`` counts them).

    >>> arcs = lambda c: tuple((c[i], c[(i + 1) % len(c)]) for i in range(len(c)))
    >>> cycles = [arcs((0, *p)) for p in permutations(range(1, 4))]
    >>> both = {(a, b): 2 for a in range(4) for b in range(4) if a != b}
    >>> len(packed_cycles(cycles, both))          # every cycle of K4 once: each arc in two
    6
    >>> both[0, 1] = both[1, 0] = 0               # pair 0-1 down: the two cycles that avoid it, twice
    >>> sorted({c[0][1] * 10 + c[1][1] for c in packed_cycles(cycles, both)})
    [21, 31]
    """
    room = dict(capacity)
    rings: list = []
    while True:
        grown = False
        for c in cycles:
            if all(room[a] > 0 for a in c):
                for a in c:
                    room[a] -= 1
                rings.append(c)
                grown = True
        if not grown:
            break
    nodes = {a for c in cycles for arc in c for a in arc}
    # every ring leaves and enters each GPU once: no more than its arcs carry either way
    bound = min(min(sum(k for (a, b), k in capacity.items() if a == n),
                    sum(k for (a, b), k in capacity.items() if b == n)) for n in nodes) if nodes else 0
    if len(rings) >= bound:
        return tuple(rings)
    best = _most(cycles, capacity)
    if len(rings) >= best[0]:
        return tuple(rings)
    return tuple(c for c, k in zip(cycles, best[1]) for _ in range(k))


def _most(cycles, capacity) -> tuple:
    """``(rings, uses of each cycle)`` of the most rings of ``cycles`` within ``capacity``, the
    first such packing of a backtracking search, each cycle taken as often as it fits first."""
    best = [0, (0,) * len(cycles)]
    uses = [0] * len(cycles)

    def grow(i, used, room):
        if used > best[0]:
            best[0], best[1] = used, tuple(uses)
        if i == len(cycles):
            return
        for k in range(min(room[a] for a in cycles[i]), -1, -1):
            for a in cycles[i]:
                room[a] -= k
            uses[i] = k
            grow(i + 1, used + k, room)
            uses[i] = 0
            for a in cycles[i]:
                room[a] += k
    grow(0, 0, dict(capacity))
    return best[0], best[1]


def mesh_rings(pair_gbs: dict, gpus: int, generation: str | None) -> tuple:
    """NCCL's rings on one node of ``gpus`` GPUs joined pairwise by NVLink without an NVSwitch,
    ``pair_gbs`` NCCL's bandwidth of each directed pair (indices, GB/s; 0 for a failed pair), as
    GPU index tuples from GPU 0, one a ring of its search before the copy ``ncclTopoDupChannels``
    adds (:func:`~._channels.mesh_ring_channels` counts both): the packing
    (:func:`packed_cycles`) at the speed of the search, the fastest of the generation's whose
    rings, or twice them, are that count. () where the search finds no ring.

    >>> a100 = {(a, b): 80.0 for a in range(4) for b in range(4) if a != b}
    >>> mesh_rings(a100, 4, "ampere")
    ((0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1))
    >>> a100[0, 1] = a100[1, 0] = 20.0            # pair 0-1 trained down to 1 of its 4 links
    >>> mesh_rings(a100, 4, "ampere")
    ((0, 2, 1, 3), (0, 3, 1, 2), (0, 2, 1, 3), (0, 3, 1, 2))
    """
    return _mesh_rings(tuple(sorted((k, round(float(v), 3)) for k, v in pair_gbs.items())), int(gpus),
                       generation)


@lru_cache(maxsize=256)
def _mesh_rings(pairs: tuple, gpus: int, generation) -> tuple:
    pair_gbs = dict(pairs)
    orders, cycles = directed_cycles(gpus)
    order_of = dict(zip(cycles, orders))
    count = mesh_ring_channels(pair_gbs, gpus, generation)
    for speed in _INTRA_SPEEDS.get(generation or "", _SM80_INTRA):
        # SUB_ROUND keeps a thousandth (search.cc:79), as mesh_ring_channels counts
        rings = packed_cycles(cycles, {a: int(math.floor(bw / speed + 1e-6)) for a, bw in pair_gbs.items()})
        if rings and len(rings) in (count, count / 2):
            return tuple(order_of[c] for c in rings)
    return ()
