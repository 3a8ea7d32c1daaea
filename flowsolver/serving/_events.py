"""The discrete-event simulation of a request stream on serving instances with continuous batching.

Each instance steps on its own clock. At a step boundary an instance that prefills (a co-located
instance, or one of the prefill pool) takes waiting requests first come first served while their
prompt tokens fit ``token_budget`` (the first always goes, however long), its sequences stay
within its pool's ``max_seqs`` and the KV cache reserved for them within its pool's
``kv_capacity`` tokens an attention rank (each request's cache whole on one rank, the one with
the fewest tokens reserved; co-located: prompt + output, so no request is ever preempted; a
prefill pool's instance: the step's prompts, released at the step's end): a prefill step (vLLM's
default, prefill first, no chunking). Otherwise it runs a decode step of every running
sequence: one token each. A request's first token comes at the end of its prefill step.
Disaggregated, it then ships its KV cache to the decode instance with the fewest reserved
tokens (``kv_seconds(bytes, in flight)``) and joins that instance's batch at its next step
boundary when it fits the decode pool's own sequences and KV cache (prompt + output). The
requests of one prefill step are dealt to its attention ranks whole, longest first, each to the
rank with the fewest prompt tokens so far (:func:`flowsolver.serving._steps.deal_longest_first`,
the dealing the step's time assumes). Each attention rank of a prefill instance sends the caches
of its requests one after another, first in first out across its steps (a step's transfer waits
for the transfers of the steps before it on that rank: they leave from the same GPUs and NICs,
so the bytes a rank sends never exceed its rate), at the rate of the number of distinct prefill
instances sending at the step's end (itself included).

The cost per event is small: a step's time is a function of the batch size and the context it
holds, evaluated from tables built once (``prefill_time``, ``decode_time``); a decode step
touches no request but those finishing at it (bucketed by the step they finish at).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ._steps import deal_longest_first

__all__ = ["Trace", "simulate"]

_ARRIVE, _STEP, _KV = 0, 1, 2


@dataclass
class Trace:
    """Per request (seconds; NaN where the request had not finished when the run stopped):
    ``first_token``, ``finish``, ``ttft_network`` (communication of its prefill step),
    ``decode_network`` (communication of its decode steps, plus its KV transfer), ``kv_seconds``
    (its KV transfer), ``tokens_in_window`` (output tokens produced up to ``window`` s), ``events``."""

    first_token: np.ndarray
    finish: np.ndarray
    ttft_network: np.ndarray
    decode_network: np.ndarray
    kv_seconds: np.ndarray
    tokens_in_window: int
    events: int


class _Instance:
    __slots__ = ("queue", "busy", "running", "context", "held", "step", "finishing", "comm", "batch",
                 "outstanding", "pending")

    def __init__(self, ranks: int):
        self.queue = []          # waiting request ids (FCFS), read from self.pending index on
        self.pending = 0
        self.busy = False
        self.running = 0         # sequences decoding
        self.context = 0.0       # KV tokens they hold
        self.held = [0.0] * ranks    # KV tokens reserved on each attention rank (whole requests)
        self.step = 0            # decode steps run
        self.finishing = {}      # decode step -> request ids finishing at it
        self.comm = 0.0          # communication seconds of the decode steps run
        self.batch = None        # the prefill step's requests
        self.outstanding = 0


def simulate(arrival, prompt, output, *, prefill_instances: int, decode_instances: int, max_seqs: int,
             token_budget: int, kv_capacity: float, prefill_time, decode_time, kv_seconds=None,
             kv_bytes_per_token: float = 0.0, kv_ranks: int = 1, window: float = np.inf,
             max_events: int | None = None, decode_max_seqs: int | None = None,
             decode_kv_capacity: float | None = None, decode_ranks: int | None = None) -> Trace:
    """Run the requests (``arrival`` s, sorted; ``prompt`` / ``output`` tokens) to completion.

    ``max_seqs`` (sequences of an instance) and ``kv_capacity`` (tokens one of its ``kv_ranks``
    attention ranks holds) bound the instances that prefill; ``decode_max_seqs``,
    ``decode_kv_capacity`` and ``decode_ranks`` (default the same) those of the decode pool: each
    pool admits against its own. A request's KV cache sits whole on one attention rank: the rank
    of its instance with the fewest tokens reserved, and it is admitted only when it fits there.
    ``decode_instances == 0``: co-located, ``prefill_instances`` instances do both (reserving
    prompt + output). Otherwise disaggregated: a prefill instance reserves the prompts of its
    step and releases them at the step's end, a decode instance reserves prompt + output while
    the request decodes; ``kv_seconds(bytes, in_flight)`` is the time one of a prefill
    instance's ``kv_ranks`` attention ranks takes to send ``bytes`` while ``in_flight`` distinct
    prefill instances send (linear in ``bytes``); each rank sends first in first out (a transfer
    starts when the rank's earlier ones are done); a prefill step's requests are dealt to its ranks as its
    time assumes (:func:`flowsolver.serving._steps.deal_longest_first`). ``prefill_time(lengths)``
    (the step's prompt lengths, tokens) and ``decode_time(sequences, context_tokens)`` return
    ``(seconds, communication seconds)`` of one instance's step.

    >>> t = simulate([0.0], [4], [3], prefill_instances=1, decode_instances=0, max_seqs=8, token_budget=16,
    ...              kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0), decode_time=lambda b, k: (0.5, 0.1))
    >>> float(t.first_token[0]), float(t.finish[0]), round(float(t.decode_network[0]), 9)
    (1.0, 2.0, 0.2)
    """
    arrival = np.asarray(arrival, dtype=np.float64)
    prompt = np.asarray(prompt, dtype=np.int64)
    output = np.asarray(output, dtype=np.int64)
    n = len(arrival)
    colocated = decode_instances == 0
    pre = [_Instance(kv_ranks) for _ in range(prefill_instances)]
    dec = pre if colocated else [_Instance(decode_ranks or kv_ranks) for _ in range(decode_instances)]
    dec_seqs = max_seqs if colocated or decode_max_seqs is None else decode_max_seqs
    dec_capacity = kv_capacity if colocated or decode_kv_capacity is None else decode_kv_capacity
    pre_load = np.zeros(len(pre))
    dec_reserved = np.zeros(len(dec))
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    ttft_net = np.full(n, np.nan)
    dec_net = np.zeros(n)
    kv_s = np.zeros(n)
    joined_comm = np.zeros(n)
    need = (prompt + output).astype(np.float64)
    held = need if colocated else prompt.astype(np.float64)     # what a prefilling instance reserves
    where = np.zeros(n, dtype=np.int64)                         # the attention rank holding each one's KV
    heap = [(float(a), 0, _ARRIVE, i) for i, a in enumerate(arrival)]
    heapq.heapify(heap)
    seq = n
    state = dict(tokens=0, events=0)
    # when each attention rank of each prefill instance is done sending the KV caches queued on it.
    # First in first out, by reasoning rather than a measured connector: a KV connector (NIXL,
    # Mooncake's transfer engine) moves a request's cache as RDMA reads / writes between the two
    # instances' GPUs, and whatever order it posts them in, the rank's GPUs and NICs carry them at
    # most at the rank's rate. Sent one after another (as a step's requests already were), the
    # link drains at that rate, the last byte leaves when it would under any work-conserving
    # sharing, and each cache arrives as early as it can; a connector that keeps several requests'
    # transfers outstanding and lets the NIC interleave them (processor sharing) ends the last one
    # at the same time but the earlier ones later: not modelled.
    kv_free = [[-np.inf] * kv_ranks for _ in range(0 if colocated else prefill_instances)]
    limit = max_events if max_events is not None else 50 * (n + int(output.sum())) + 100
    arrived = set()     # prefill instances given requests at the current arrival time, not yet started

    def place(inst, i, tokens, capacity) -> bool:
        """Reserve ``tokens`` for request ``i`` on the rank of ``inst`` with the fewest reserved
        (the first of them), if they fit there (then they fit nowhere else either)."""
        r = min(range(len(inst.held)), key=inst.held.__getitem__)
        if inst.held[r] + tokens > capacity:
            return False
        inst.held[r] += tokens
        where[i] = r
        return True

    def push(t, kind, x):
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, x))

    def start(t, k, inst, is_pre):
        """Start the next step of instance ``inst`` (index ``k``) at ``t`` if it has work."""
        if inst.busy:
            return
        if is_pre and inst.pending < len(inst.queue):
            tokens, take = 0, []
            while inst.pending < len(inst.queue):
                i = inst.queue[inst.pending]
                seqs = len(take) + (inst.running if colocated else 0)
                if (seqs + 1 > max_seqs or (take and tokens + prompt[i] > token_budget)
                        or not place(inst, i, held[i], kv_capacity)):
                    break
                inst.pending += 1
                take.append(i)
                tokens += int(prompt[i])
            if take:
                seconds, comm = prefill_time(prompt[take])
                inst.busy, inst.batch = True, (take, comm)
                push(t + seconds, _STEP, (k, True))
                return
        if colocated or not is_pre:
            _admit_decode(t, inst)
            if inst.running:
                seconds, comm = decode_time(inst.running, inst.context)
                inst.busy, inst.batch = True, None
                inst.comm += comm
                push(t + seconds, _STEP, (k, False))

    def _admit_decode(t, inst):
        """Disaggregated: KV-received requests join the batch while they fit."""
        if colocated:
            return
        while inst.pending < len(inst.queue):
            i = inst.queue[inst.pending]
            if inst.running + 1 > dec_seqs or not place(inst, i, need[i], dec_capacity):
                return
            inst.pending += 1
            _join(inst, i)

    def _join(inst, i):
        remaining = int(output[i]) - 1
        if remaining <= 0:
            finish[i] = first[i]
            inst.held[where[i]] -= need[i]
            return
        inst.running += 1
        inst.context += float(prompt[i])
        joined_comm[i] = inst.comm
        inst.finishing.setdefault(inst.step + remaining, []).append(i)

    while heap:
        t, _, kind, x = heapq.heappop(heap)
        state["events"] += 1
        if state["events"] > limit:
            raise RuntimeError(f"serving simulation exceeded {limit} events")
        if kind == _ARRIVE:
            k = int(np.argmin(pre_load))
            pre_load[k] += 1
            pre[k].queue.append(x)
            arrived.add(k)
            if heap and heap[0][0] == t and heap[0][2] == _ARRIVE:
                continue        # requests arriving together are scheduled together (a static batch)
            for k in sorted(arrived):
                start(t, k, pre[k], True)
            arrived.clear()
        elif kind == _KV:
            i, k = x
            inst = dec[k]
            inst.queue.append(i)
            if not inst.busy:
                start(t, k, inst, False)
        else:
            k, was_prefill = x
            is_pre_pool = colocated or was_prefill
            inst = (pre if is_pre_pool else dec)[k]
            inst.busy = False
            if was_prefill:
                take, comm = inst.batch
                sends = [] if colocated else [i for i in take if output[i] > 1]
                if sends:                # its requests queue on the ranks they were prefilled on
                    # the distinct prefill instances sending now: this one and those still sending
                    sending = 1 + sum(1 for j, free in enumerate(kv_free) if j != k and max(free) > t)
                    per_byte = kv_seconds(1.0, sending)
                    free = kv_free[k]
                    rank_of = deal_longest_first(prompt[take], kv_ranks)     # where each was prefilled
                for j, i in enumerate(take):
                    first[i] = t
                    ttft_net[i] = comm
                    if t <= window:
                        state["tokens"] += 1
                    if colocated:
                        _join(inst, i)
                        if output[i] <= 1:
                            pre_load[k] -= 1
                    else:
                        inst.held[where[i]] -= held[i]
                        pre_load[k] -= 1
                        if output[i] <= 1:
                            finish[i] = t
                            continue
                        d = int(np.argmin(dec_reserved))
                        dec_reserved[d] += need[i]
                        rank = int(rank_of[j])
                        free[rank] = max(free[rank], t) + kv_bytes_per_token * float(prompt[i]) * per_byte
                        kv_s[i] = free[rank] - t         # queued behind the rank's earlier caches, then sent
                        dec_net[i] += kv_s[i]
                        push(free[rank], _KV, (i, d))
            else:
                if t <= window:
                    state["tokens"] += inst.running
                inst.context += inst.running
                inst.step += 1
                for i in inst.finishing.pop(inst.step, ()):
                    finish[i] = t
                    dec_net[i] += inst.comm - joined_comm[i]
                    inst.running -= 1
                    inst.context -= float(prompt[i]) + float(output[i]) - 1
                    inst.held[where[i]] -= need[i]
                    if colocated:
                        pre_load[k] -= 1
                    else:
                        dec_reserved[k] -= need[i]
            start(t, k, inst, is_pre_pool)
    return Trace(first_token=first, finish=finish, ttft_network=ttft_net, decode_network=dec_net, kv_seconds=kv_s,
                 tokens_in_window=state["tokens"], events=state["events"])
