"""KV-cache transfers from prefill to decode instances as flows on the fabric.

A request's KV cache sits on the ``min(tp, kv_heads) x pp`` GPUs of the prefill attention rank
that computed it (each holds its stages' layers and its share of the KV heads; a prefill step's
requests are dealt whole to the instance's ``ep`` attention ranks,
:func:`flowsolver.serving._steps.deal_longest_first`, and the ranks send in parallel); it is sent to
the matching GPUs of a decode attention rank: ``n = max(shards_prefill, shards_decode)`` flows
of ``bytes / n`` each, source ``i n_p / n`` and destination ``i n_d / n`` (shard ``i``).

The transfers of several prefill instances overlap on the fabric. For ``k`` in 1, 2, 4, ...
up to the prefill instances, the first ``k`` prefill instances each send one request's shards
to decode instance ``p mod D`` at once, the requests reaching one decode instance spread over
its attention ranks in turn (as the event loop places them, :func:`kv_flows`); every flow's
completion time is solved with max-min fair sharing, re-solved as flows finish (:func:`flowsolver.completion_times`, on the
catalogue's effective link capacities, as :func:`flowsolver.concurrent` solves them), beside
the pools' own communication as background flows capped at their average rates (see
:func:`flowsolver.serving._serve.background_flows`). A prefill step's transfer, started while
``m`` distinct prefill instances send (itself included), moves at the rate of the smallest wave
``k >= m``, scaled by its bytes (the rates are held from its start; path latencies, µs, are left
out next to transfers of MB). Several transfers of one instance never add up: the event loop
(:mod:`flowsolver.serving._events`) queues each attention rank's caches first in first out, a
step's requests one after another and a later step's after them, since they leave from the same
GPUs and NICs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["KvTransfer", "kv_flows", "kv_transfer"]


def shard_ranks(layout, instance: int, kv_heads: int, rank: int = 0) -> list:
    """GPU ranks holding the KV shards of attention rank ``rank`` of ``instance``: TP indices
    below ``min(tp, kv_heads)`` of every stage."""
    inst = layout.instance_ranks(instance)
    shards = min(layout.tp, kv_heads)
    return [inst[t + layout.tp * q + layout.tp * layout.pp * rank] for q in range(layout.pp) for t in range(shards)]


def kv_flows(prefill, decode, kv_heads: int, pairs) -> tuple:
    """``(src, dst, owner)`` arrays of the shard flows of one request per attention rank of the
    prefill instance, for each (prefill instance, decode instance) pair of ``pairs``; ``owner``
    is the pair's index. The requests sent to one decode instance land on its attention ranks in
    turn, the ``c``-th (counted over ``pairs`` in order, each prefill rank one request) on rank
    ``c mod ep``: the event loop reserves each request's cache on the decode rank with the
    fewest tokens reserved (:func:`flowsolver.serving._events.simulate`), which for requests of
    one length goes round the ranks; so concurrent transfers into a wide-EP decode instance go to
    different decode GPUs (and NICs), not all to its first rank.

    >>> from flowsolver.serving._steps import InstanceLayout
    >>> p, d = InstanceLayout(2, 1, 1, (0, 1)), InstanceLayout(1, 1, 1, (8, 9))
    >>> [a.tolist() for a in kv_flows(p, d, 8, [(0, 1)])]
    [[0, 1], [9, 9], [0, 0]]
    >>> p, d = InstanceLayout(1, 1, 1, (0, 1)), InstanceLayout(1, 1, 2, (8, 9))
    >>> [a.tolist() for a in kv_flows(p, d, 8, [(0, 0), (1, 0)])]     # two senders, two decode ranks
    [[0, 1], [8, 9], [0, 1]]
    """
    src, dst, owner = [], [], []
    landed = {}                                  # requests placed so far on each decode instance
    for j, (a, b) in enumerate(pairs):
        for r in range(prefill.ep):
            c = landed.get(b, 0)
            landed[b] = c + 1
            s, t = shard_ranks(prefill, a, kv_heads, r), shard_ranks(decode, b, kv_heads, c % decode.ep)
            n = max(len(s), len(t))
            for i in range(n):
                src.append(s[i * len(s) // n])
                dst.append(t[i * len(t) // n])
                owner.append(j)
    return np.array(src), np.array(dst), np.array(owner)


@dataclass(frozen=True)
class KvTransfer:
    """Seconds per byte of a request's KV transfer by concurrency wave.

    ``waves[j]`` prefill instances send at once, each one request from each of its ``ranks``
    attention ranks; ``seconds_per_byte[j]`` (the slowest sender of that wave's time over one
    request's bytes), ``shards`` flows per request, ``bottleneck`` the links that held the
    largest wave's flows (:class:`flowsolver.routing.Bottleneck`)."""

    waves: np.ndarray
    seconds_per_byte: np.ndarray
    shards: int
    bottleneck: tuple
    ranks: int = 1

    def seconds(self, nbytes: float, in_flight: int) -> float:
        """Seconds one attention rank takes to send ``nbytes`` of KV cache while ``in_flight``
        distinct prefill instances send (itself included; every rank of each sending at once,
        one transfer a rank: a rank's transfers queue, they never add up)."""
        j = min(int(np.searchsorted(self.waves, max(in_flight, 1))), len(self.waves) - 1)
        return nbytes * float(self.seconds_per_byte[j])


def wave_finish(graph, src, dst, sizes, *, policy: str = "ecmp", pxn: bool = True, efficiency=None,
                background=None):
    """Completion time (s) of every flow ``src -> dst`` of ``sizes`` bytes started together,
    max-min fair, re-solved as flows finish; and the initial allocation's bottleneck links.
    ``background``: ``(src, dst, rate)`` flows that run all along at most at ``rate`` bytes/s
    each (the other traffic of the pools), sharing the links with these.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> alone, _ = wave_finish(g, [0], [8], [2.0 ** 20])
    >>> shared, _ = wave_finish(g, [0], [8], [2.0 ** 20], background=([0], [8], [0.25 * 2.0 ** 20 / alone[0]]))
    >>> round(float(shared[0] / alone[0]), 6)          # a quarter of the link taken: 1 / 0.75
    1.333333
    """
    from ..routing import route
    from ..timing import completion_times
    from ..traffic import Flows

    src, dst = np.asarray(src), np.asarray(dst)
    sizes = np.asarray(sizes, dtype=np.float64)
    n = len(src)
    demands = np.full(n, np.inf)
    if background is not None and len(background[0]):
        b_src, b_dst, b_rate = (np.asarray(a) for a in background)
        # the background never finishes within the transfers: a size no transfer outlasts
        endless = 1e6 * max(float(sizes.max()), 1.0) * max(float(np.max(b_rate)), 1.0)
        src, dst = np.concatenate([src, b_src]), np.concatenate([dst, b_dst])
        sizes = np.concatenate([sizes, np.full(len(b_src), endless)])
        demands = np.concatenate([demands, np.asarray(b_rate, dtype=np.float64)])
    rm = route(graph, Flows(src, dst, sizes), policy, pxn=pxn)
    cap = rm.links.effective_capacity(efficiency)
    done = completion_times(rm, sizes, cap, demands=demands, max_events=n + 1)
    bottleneck = ()
    if done.initial is not None:
        util = np.asarray(done.initial.utilization)
        idx = sorted({int(b) for b in np.asarray(done.initial.bottleneck)[:n] if b >= 0}, key=lambda i: -util[i])
        bottleneck = tuple(rm.links.bottleneck(i, util[i]) for i in idx[:8])
    return np.asarray(done.finish, dtype=np.float64)[:n], bottleneck


def kv_transfer(graph, prefill, decode, kv_heads: int, *, policy: str = "ecmp", pxn: bool = True,
                efficiency=None, background=None) -> KvTransfer:
    """Solve the KV-transfer waves of a disaggregated pool pair (see the module), beside the
    ``background`` flows ``(src, dst, rate)`` of the pools' own communication."""
    P, D = prefill.instances, decode.instances
    waves = sorted({min(2 ** i, P) for i in range(int(np.ceil(np.log2(max(P, 1)))) + 1)} | {P})
    per_byte, bottleneck, shards = [], (), 1
    reference = 2.0 ** 20                  # bytes per shard flow in the solve (times scale with bytes)
    for k in waves:
        src, dst, owner = kv_flows(prefill, decode, kv_heads, [(p, p % D) for p in range(k)])
        shards = int(np.sum(owner == 0)) // prefill.ep
        finish, neck = wave_finish(graph, src, dst, np.full(len(src), reference), policy=policy, pxn=pxn,
                                   efficiency=efficiency, background=background)
        per_byte.append(float(np.max(finish)) / (reference * shards))
        bottleneck = neck
    return KvTransfer(waves=np.array(waves), seconds_per_byte=np.array(per_byte), shards=shards,
                      bottleneck=bottleneck, ranks=prefill.ep)
