"""NCCL-style collectives on a cluster graph: completion time, algbw, busbw, bottlenecks.

Time model
----------
An algorithm is a sequence of steps; a step is a set of concurrent flows. A step's time is

    latency + transfer,

* ``transfer``: all flows of the step start together and share the links max-min fairly;
  a flow that finishes releases its bandwidth to the others (:func:`completion_times`);
  the step ends with its last flow. Link capacities are the raw rates times each
  technology's measured efficiency from the catalogue (1 where none is known, or where the
  graph has no ``tech``); ``efficiency=`` overrides it (one number, or a dict by tech):
  this is the calibration hook, applied once here and nowhere else.
* ``latency``: NCCL's per-hop software latency for the slowest kind of hop in the step
  (NVLink, PCIe or network; NCCL 2.30 src/graph/tuning.cc, Simple protocol by default) plus
  the largest path latency of the step's flows (sum of link latencies along the path,
  fluid-weighted). ``step_latency=`` replaces it by a fixed alpha per step.

A collective adds NCCL's base latency once (``base_latency=`` overrides). Identical steps
(a ring's 2(p-1) steps, say) are solved once. Sizes follow nccl-tests: all-reduce the
per-rank buffer, all-gather / reduce-scatter the full array, all-to-all the per-rank buffer
(``size / p`` to each peer, the self chunk stays local), broadcast / reduce / send-recv the
message. ``busbw = algbw x factor`` with nccl-tests' factors.

Algorithms in this module: ``ring`` (all-reduce, reduce-scatter, all-gather, and pipelined
broadcast / reduce in ``chunk`` pieces), ``halving_doubling`` (Rabenseifner: recursive
halving reduce-scatter then recursive doubling all-gather, power-of-two ranks),
``direct`` and ``pairwise`` (all-to-all),
``binomial`` (broadcast, reduce), ``direct`` (send/recv). A ring uses ``channels`` rings
(default: the NIC count of a server when the ranks span several servers, else 1). Ring
``c`` visits the GPUs of the ``k``-th server starting from local GPU ``(c - k) mod m``, so it
leaves a server from the GPU whose rail the next server is entered on: every cross-server
hop but the wrap-around stays on one rail, and each GPU sends once per channel. Hops that
do change rail are routed with PXN (over NVLink to the right rail first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import topologies as tp

from .routing import route
from .solver import max_min_fair
from .timing import completion_times
from .traffic import Flows

__all__ = ["collective", "concurrent", "CollectiveResult", "ConcurrentResult", "CollectiveStep", "OPS", "ALGORITHMS",
           "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "send_recv")
ALGORITHMS = {
    "all_reduce": ("ring", "halving_doubling"),
    "reduce_scatter": ("ring", "halving_doubling"),
    "all_gather": ("ring", "halving_doubling"),
    "all_to_all": ("pairwise", "direct"),
    "broadcast": ("ring", "binomial"),
    "reduce": ("ring", "binomial"),
    "send_recv": ("direct",),
}
PROTOCOLS = ("LL", "LL128", "Simple")
# NCCL 2.30 src/graph/tuning.cc (../shared/REFERENCE.md), microseconds, (LL, LL128, Simple)
NCCL_BASE_LATENCY = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4)}
NCCL_HOP_LATENCY = {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7), "network": (2.7, 4.0, 14.0)}


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' bus-bandwidth factor.

    >>> busbw_factor("all_reduce", 8)
    1.75
    """
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (p - 1) / p
    return 1.0


@dataclass(frozen=True)
class CollectiveStep:
    """One distinct step: ``count`` identical steps of ``flows`` flows of ``bytes`` each.

    ``transfer`` and ``latency`` are seconds per step; ``bottleneck`` lists the saturated
    links that are the max-min bottleneck of some flow of the step, as ``(src, dst, tier,
    utilization)``, the link whose flows would take longest at the step's first rates first
    (the links that set the step time).
    """

    count: int
    flows: int
    bytes: float
    transfer: float
    latency: float
    bottleneck: tuple

    @property
    def time(self) -> float:
        """Seconds for all ``count`` steps."""
        return self.count * (self.transfer + self.latency)


@dataclass(frozen=True)
class CollectiveResult:
    """Result of :func:`collective`.

    ``time`` seconds; ``algbw = size / time`` and ``busbw`` bytes/s (nccl-tests);
    ``steps`` the distinct steps; ``link_utilization`` per link (graph edge order), the
    time-weighted mean over the transfers; ``candidates`` the time of every algorithm tried.
    """

    op: str
    algorithm: str
    size: float
    ranks: int
    time: float
    algbw: float
    busbw: float
    steps: tuple
    link_utilization: np.ndarray
    links: object
    candidates: dict = field(default_factory=dict)

    def to_dataframe(self):
        """The steps as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame([dict(count=s.count, flows=s.flows, bytes=s.bytes, transfer=s.transfer,
                                  latency=s.latency, time=s.time,
                                  bottleneck_tier=s.bottleneck[0][2] if s.bottleneck else "",
                                  bottleneck=" ".join(f"{u}->{v}" for u, v, _, _ in s.bottleneck[:3]))
                             for s in self.steps])


# --------------------------------------------------------------------------- steps
def _ring_orders(graph, ranks, channels):
    """Ring orders (positions into ``ranks``), one per channel."""
    nodes = tp.gpus(graph)
    servers, order = {}, []
    for pos, r in enumerate(ranks):
        s = graph.nodes[nodes[r]].get("server", r)
        if s not in servers:
            servers[s] = []
            order.append(s)
        servers[s].append(pos)
    rings = []
    for c in range(channels):
        ring = []
        for idx, s in enumerate(order):
            members = servers[s]
            k = (c - idx) % len(members)       # enter server idx on the rail the last one left by
            ring.extend(members[k:] + members[:k])
        rings.append(ring)
    return rings


def _steps(op, algorithm, p, size, rings, chunk):
    """Distinct steps as (count, [(src_pos, dst_pos, bytes), ...])."""
    if op == "send_recv":
        return [(1, [(0, 1, size)])]
    if op == "all_to_all":
        per = size / p
        if algorithm == "direct":
            return [(1, [(i, j, per) for i in range(p) for j in range(p) if i != j])]
        return [(1, [(i, (i + s) % p, per) for i in range(p)]) for s in range(1, p)]
    if algorithm == "halving_doubling":    # Rabenseifner; p is a power of two
        k = p.bit_length() - 1
        halving = [(1, [(i, i ^ (p >> (s + 1)), size / 2 ** (s + 1)) for i in range(p)]) for s in range(k)]
        doubling = [(1, [(i, i ^ (1 << s), size / p * 2 ** s) for i in range(p)]) for s in range(k)]
        return {"reduce_scatter": halving, "all_gather": doubling}.get(op, halving + doubling)
    if algorithm == "ring" and op in ("all_reduce", "reduce_scatter", "all_gather"):
        per = size / p / len(rings)
        flows = [(ring[i], ring[(i + 1) % p], per) for ring in rings for i in range(p)]
        return [(2 * (p - 1) if op == "all_reduce" else p - 1, flows)]
    if algorithm == "binomial":
        steps = []
        for s in range(math.ceil(math.log2(p))):
            span = 1 << s
            flows = [(i, i + span, size) for i in range(span) if i + span < p]
            steps.append((1, flows if op == "broadcast" else [(b, a, n) for a, b, n in flows]))
        return steps if op == "broadcast" else steps[::-1]
    # pipelined ring broadcast / reduce: the chain root -> ... in `chunk` pieces
    k = max(1, math.ceil(size / chunk))
    piece = size / k
    chain = rings[0]
    hops = [(chain[j], chain[j + 1]) for j in range(p - 1)]
    if op == "reduce":
        hops = [(b, a) for a, b in reversed(hops)]
    counts: dict = {}
    for s in range(k + p - 2):
        active = tuple(j for j in range(p - 1) if 0 <= s - j < k)
        counts[active] = counts.get(active, 0) + 1
    return [(n, [(hops[j][0], hops[j][1], piece) for j in active]) for active, n in counts.items()]


# --------------------------------------------------------------------------- timing
def _effective_capacity(rm, efficiency):
    cap = rm.capacity.copy()
    for i, tech in enumerate(rm.links.tech):
        if isinstance(efficiency, dict) and tech in efficiency:
            cap[i] *= efficiency[tech]
        elif isinstance(efficiency, (int, float)):
            cap[i] *= efficiency
        else:
            try:
                eff = tp.get_link(tech).efficiency if tech else None
            except ValueError:
                eff = None
            cap[i] *= 1.0 if eff is None else eff
    return cap


def _path_latency(rm) -> np.ndarray:
    """Per flow: sum over its links of fraction x latency (s), from the factored matrix."""
    owner = np.repeat(np.arange(rm.n_segments), np.diff(rm.seg_ptr))
    seg_latency = np.bincount(owner, weights=rm.seg_frac * rm.links.latency[rm.seg_link],
                              minlength=rm.n_segments)
    used = rm.flow_seg >= 0
    coef = 1.0 if rm.flow_coef is None else rm.flow_coef
    return np.where(used, seg_latency[np.maximum(rm.flow_seg, 0)] * coef, 0.0).sum(axis=1)


def _link_classes(graph, rm):
    """Per link: 2 network (touches a switch), 1 PCIe / host, 0 NVLink."""
    kind = {n: d.get("kind") for n, d in graph.nodes(data=True)}
    net = np.array([kind[u] == "switch" or kind[v] == "switch" for u, v in zip(rm.links.src, rm.links.dst)])
    nvl = np.array([str(t).startswith("nvlink") for t in rm.links.tech])
    return np.where(net, 2, np.where(nvl, 0, 1))


def _route_step(graph, ranks, flows_pos, policy, routing_options):
    """The step's flows (rank positions) routed; also their sizes (bytes)."""
    src = np.array([ranks[a] for a, _, _ in flows_pos])
    dst = np.array([ranks[b] for _, b, _ in flows_pos])
    size = np.array([n for _, _, n in flows_pos], dtype=np.float64)
    return route(graph, Flows(src, dst, size), policy=policy, **routing_options), size


def _step_latency(graph, rm, protocol, step_latency) -> float:
    """NCCL per-hop latency of the step's slowest hop class + its largest path latency (s)."""
    if step_latency is not None:
        return float(step_latency)
    classes = _link_classes(graph, rm)
    used = np.flatnonzero(rm.link_loads(np.ones(rm.n_flows)) > 0)
    worst = ("nvlink", "pcie", "network")[int(classes[used].max()) if used.size else 0]
    hop = NCCL_HOP_LATENCY[worst][PROTOCOLS.index(protocol)] * 1e-6
    return hop + float(_path_latency(rm).max(initial=0.0))


def _solve_step(graph, ranks, flows_pos, policy, routing_options, efficiency, protocol, step_latency):
    rm, size = _route_step(graph, ranks, flows_pos, policy, routing_options)
    cap = _effective_capacity(rm, efficiency)
    transfer = float(completion_times(rm, size, cap).makespan)
    alloc = max_min_fair(rm, cap)
    util = np.asarray(alloc.utilization, dtype=np.float64)
    # critical links: those holding the flows that would take longest at the first rates
    with np.errstate(divide="ignore"):
        flow_time = np.where(alloc.rates > 0, size / alloc.rates, np.inf)
    held = alloc.bottleneck >= 0
    critical = np.full(rm.n_links, -1.0)
    np.maximum.at(critical, alloc.bottleneck[held], flow_time[held])
    hot = np.flatnonzero(critical >= 0)
    hot = hot[np.argsort(-critical[hot], kind="stable")]
    bottleneck = tuple((rm.links.src[l], rm.links.dst[l], rm.links.tier[l], float(util[l])) for l in hot[:8])
    return transfer, _step_latency(graph, rm, protocol, step_latency), util, bottleneck, rm


def _routing_options(routing, routing_options, pxn) -> dict:
    options = dict(routing_options or {})
    if routing in ("ecmp", "ecmp_hash"):
        options.setdefault("pxn", pxn)
    return options


def _base_latency(protocol, base_latency) -> float:
    if base_latency is not None:
        return float(base_latency)
    return NCCL_BASE_LATENCY["ring"][PROTOCOLS.index(protocol)] * 1e-6


def _participants(graph, op, ranks, channels):
    """Checked ranks and the ring orders of ``channels`` channels (default: the NICs of a
    server when the ranks span several servers, else 1)."""
    nodes = tp.gpus(graph)
    n_gpu = len(nodes)
    ranks = list(range(n_gpu)) if ranks is None else [int(r) for r in ranks]
    if len(ranks) < 2 or len(set(ranks)) != len(ranks) or min(ranks) < 0 or max(ranks) >= n_gpu:
        raise ValueError(f"ranks must be at least 2 distinct GPU ranks in 0 ... {n_gpu - 1}, got {ranks[:8]}")
    if op == "send_recv":
        ranks = ranks[:2]
    if channels is None:
        first = graph.nodes[nodes[ranks[0]]].get("server")
        servers = {graph.nodes[nodes[r]].get("server", r) for r in ranks}
        nics = [d for _, d in graph.nodes(data=True)
                if d.get("kind") == "nic" and d.get("role") == "compute" and d.get("server") == first]
        channels = max(1, len(nics)) if len(servers) > 1 else 1
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ValueError(f"channels must be an integer >= 1, got {channels!r}")
    return ranks, _ring_orders(graph, ranks, channels)


def collective(graph, op: str, size: float, *, ranks=None, algorithm: str = "auto",
               routing: str = "ecmp", routing_options: dict | None = None, channels: int | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = 4 * 2**20,
               efficiency=None, step_latency: float | None = None,
               base_latency: float | None = None) -> CollectiveResult:
    """Time a collective on a cluster graph.

    Parameters
    ----------
    graph : networkx.DiGraph
    op : str
        One of ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``,
        ``broadcast``, ``reduce``, ``send_recv``.
    size : float
        Bytes, as nccl-tests counts them for ``op`` (see the module docstring).
    ranks : sequence of int, optional
        GPU ranks taking part, in order (placement); default every GPU. The first rank is
        the root of broadcast / reduce and the sender of send/recv.
    algorithm : str
        ``"auto"`` (solve every algorithm of ``ALGORITHMS[op]`` on this topology and keep the
        fastest) or one of them.
    routing, routing_options, pxn
        Routing policy and its options (``subflows``, ``seed``); PXN for cross-rail hops.
    channels : int, optional
        Rings run side by side (default: NICs per server when the ranks span servers, else 1).
    protocol : {"LL", "LL128", "Simple"}
        NCCL protocol whose latency constants are used.
    chunk : float
        Pipeline chunk of the ring broadcast / reduce, bytes.
    efficiency : float or dict, optional
        Fraction of the raw link rate reached (all links, or by tech); default the catalogue's.
    step_latency, base_latency : float, optional
        Override the per-step latency (alpha, s) and the per-collective base latency (s).

    Examples
    --------
    >>> import topologies as tp
    >>> r = collective(tp.rail_optimized(nodes=1), "all_reduce", 2**32, algorithm="ring")
    >>> round(r.busbw / 1e9)                     # NVLink 4 at NCCL's 20.6 GB/s per link
    370
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    allowed = ALGORITHMS[op]
    if algorithm != "auto" and algorithm not in allowed:
        raise ValueError(f"algorithm for {op} must be 'auto' or one of {', '.join(allowed)}, got {algorithm!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if not (isinstance(size, (int, float, np.floating)) and math.isfinite(size) and size > 0):
        raise ValueError(f"size must be a finite number of bytes > 0, got {size!r}")
    if not (chunk > 0):
        raise ValueError(f"chunk must be > 0 bytes, got {chunk!r}")
    ranks, rings = _participants(graph, op, ranks, channels)
    p = len(ranks)
    options = _routing_options(routing, routing_options, pxn)
    base = _base_latency(protocol, base_latency)
    power_of_two = p & (p - 1) == 0
    if algorithm == "halving_doubling" and not power_of_two:
        raise ValueError(f"algorithm 'halving_doubling' needs a power-of-two number of ranks, got {p}")
    results = {}
    for alg in (allowed if algorithm == "auto" else (algorithm,)):
        if alg == "halving_doubling" and not power_of_two:
            continue
        steps, util_time, busy = [], None, 0.0
        total = base
        for count, flows_pos in _steps(op, alg, p, float(size), rings, float(chunk)):
            transfer, latency, util, bottleneck, rm = _solve_step(
                graph, ranks, flows_pos, routing, options, efficiency, protocol, step_latency)
            steps.append(CollectiveStep(count=count, flows=len(flows_pos), bytes=flows_pos[0][2],
                                        transfer=transfer, latency=latency, bottleneck=bottleneck))
            total += count * (transfer + latency)
            weight = count * transfer
            util_time = util * weight if util_time is None else util_time + util * weight
            busy += weight
            links = rm.links
        results[alg] = (total, tuple(steps), util_time / busy if busy > 0 else util_time, links)
    best = min(results, key=lambda a: results[a][0])
    total, steps, util, links = results[best]
    algbw = float(size) / total
    return CollectiveResult(op=op, algorithm=best, size=float(size), ranks=p, time=total, algbw=algbw,
                            busbw=algbw * busbw_factor(op, p), steps=steps, link_utilization=util,
                            links=links, candidates={a: r[0] for a, r in results.items()})


# --------------------------------------------------------------------------- concurrency
@dataclass(frozen=True)
class ConcurrentResult:
    """Result of :func:`concurrent`: per collective, its time alone and together (s) and
    the slowdown (together / alone); ``makespan`` is when the last one finished."""

    alone: tuple
    together: tuple
    slowdown: tuple
    makespan: float
    algorithms: tuple


def _concat(matrices):
    """One RoutingMatrix holding the flows of several (same graph), in order."""
    from .routing import RoutingMatrix

    K = max(m.slots for m in matrices)
    seg_off = np.cumsum([0] + [m.n_segments for m in matrices])
    ent_off = np.cumsum([0] + [len(m.seg_link) for m in matrices])
    ptr = np.concatenate([[0]] + [m.seg_ptr[1:] + ent_off[i] for i, m in enumerate(matrices)])
    slots, coefs = [], []
    for i, m in enumerate(matrices):
        s = np.full((m.n_flows, K), -1, dtype=np.int64)
        s[:, :m.slots] = np.where(m.flow_seg >= 0, m.flow_seg + seg_off[i], -1)
        c = np.zeros((m.n_flows, K))
        c[:, :m.slots] = 1.0 if m.flow_coef is None else m.flow_coef
        slots.append(s)
        coefs.append(c)
    first = matrices[0]
    return RoutingMatrix(seg_ptr=ptr, seg_link=np.concatenate([m.seg_link for m in matrices]),
                         seg_frac=np.concatenate([m.seg_frac for m in matrices]),
                         flow_seg=np.concatenate(slots).astype(np.int32), flow_coef=np.concatenate(coefs),
                         capacity=first.capacity, weights=np.concatenate([m.weights for m in matrices]),
                         demands=np.concatenate([m.demands for m in matrices]), links=first.links)


def _timeline(graph, plans, options):
    """Event-driven run of several step sequences sharing the fabric; finish time of each."""
    routing, routing_options, efficiency, protocol, step_latency = options
    cache = {}

    def prepared(i, j):
        ranks, steps, _ = plans[i]
        key = (i, id(steps[j]))        # repeated steps are one list object: routed once
        if key not in cache:
            rm, sizes = _route_step(graph, ranks, steps[j], routing, routing_options)
            cache[key] = (rm, sizes, _step_latency(graph, rm, protocol, step_latency))
        return cache[key]

    n = len(plans)
    step = [0] * n
    # latency left before the current step's transfer (the base latency, then each step's own)
    wait = [plans[i][2] + prepared(i, 0)[2] for i in range(n)]
    remaining = [None] * n
    finish = [np.inf] * n
    clock = 0.0
    cap = None
    for _ in range(10 ** 7):
        live = [i for i in range(n) if finish[i] == np.inf]
        if not live:
            break
        for i in live:
            if remaining[i] is None and wait[i] <= 0:
                rm, sizes, _ = prepared(i, step[i])
                remaining[i] = sizes.copy()
        moving = [i for i in live if remaining[i] is not None]
        dt = min([wait[i] for i in live if remaining[i] is None] + [np.inf])
        rates = {}
        if moving:
            mats = [prepared(i, step[i])[0] for i in moving]
            rm = _concat(mats)
            if cap is None:
                cap = _effective_capacity(rm, efficiency)
            left = np.concatenate([remaining[i] for i in moving])
            alloc = max_min_fair(rm, cap, demands=np.where(left > 0, np.inf, 0.0))
            r = np.asarray(alloc.rates, dtype=np.float64)
            off = 0
            for i in moving:
                k = len(remaining[i])
                rates[i] = r[off:off + k]
                off += k
                going = remaining[i] > 0
                if going.any():
                    dt = min(dt, float((remaining[i][going] / rates[i][going]).min()))
        if not np.isfinite(dt):
            raise ValueError("a collective can make no progress (a flow crosses failed links only)")
        clock += dt
        for i in live:
            if remaining[i] is None:
                wait[i] -= dt
                continue
            remaining[i] = np.where(remaining[i] > 0, remaining[i] - rates[i] * dt, 0.0)
            remaining[i][remaining[i] <= 1e-9 * np.maximum(prepared(i, step[i])[1], 1.0)] = 0.0
            if not remaining[i].any():
                remaining[i] = None
                step[i] += 1
                if step[i] == len(plans[i][1]):
                    finish[i] = clock
                else:
                    wait[i] = prepared(i, step[i])[2]
    return finish


def concurrent(graph, collectives, *, routing: str = "ecmp", routing_options: dict | None = None,
               pxn: bool = True, protocol: str = "Simple", chunk: float = 4 * 2**20, efficiency=None,
               step_latency: float | None = None, base_latency: float | None = None) -> ConcurrentResult:
    """Run several collectives at once on one fabric and report how much each slowed.

    ``collectives`` is a list of dicts with the keys of :func:`collective` (``op``, ``size``,
    ``ranks``, ``algorithm``, ``channels``); ``"auto"`` is resolved by timing each alone.
    Every collective runs its steps in order (latency, then the step's flows); between events
    (a flow finishing, a latency elapsing) all active flows of all collectives share the links
    max-min fairly.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> r = concurrent(g, [dict(op="all_reduce", size=2**28, ranks=range(8), algorithm="ring"),
    ...                    dict(op="all_reduce", size=2**28, ranks=range(8, 16), algorithm="ring")])
    >>> [round(s, 3) for s in r.slowdown]        # one server each: they do not meet
    [1.0, 1.0]
    """
    if not collectives:
        raise ValueError("collectives must be a non-empty list of dicts")
    options = _routing_options(routing, routing_options, pxn)
    base = _base_latency(protocol, base_latency)
    plans, algorithms = [], []
    for spec in collectives:
        spec = dict(spec)
        unknown = set(spec) - {"op", "size", "ranks", "algorithm", "channels"}
        if unknown or "op" not in spec or "size" not in spec:
            raise ValueError(f"each collective needs 'op' and 'size' (optional 'ranks', 'algorithm', "
                             f"'channels'), got keys {sorted(spec)}")
        algorithm = spec.get("algorithm", "auto")
        if algorithm == "auto":   # the fastest alone (collective() also checks every argument)
            algorithm = collective(graph, spec["op"], spec["size"], ranks=spec.get("ranks"),
                                   routing=routing, routing_options=routing_options,
                                   channels=spec.get("channels"), pxn=pxn, protocol=protocol, chunk=chunk,
                                   efficiency=efficiency, step_latency=step_latency,
                                   base_latency=base_latency).algorithm
        elif spec["op"] not in ALGORITHMS or algorithm not in ALGORITHMS[spec["op"]]:
            raise ValueError(f"op must be one of {', '.join(OPS)} and algorithm one of its "
                             f"ALGORITHMS entry, got {spec['op']!r} / {algorithm!r}")
        ranks, rings = _participants(graph, spec["op"], spec.get("ranks"), spec.get("channels"))
        sequence = []
        for count, flows_pos in _steps(spec["op"], algorithm, len(ranks), float(spec["size"]), rings,
                                       float(chunk)):
            sequence.extend([flows_pos] * count)
        plans.append((ranks, sequence, base))
        algorithms.append(algorithm)
    opts = (routing, options, efficiency, protocol, step_latency)
    alone_t = [_timeline(graph, [plan], opts)[0] for plan in plans]
    together = _timeline(graph, plans, opts)
    return ConcurrentResult(alone=tuple(alone_t), together=tuple(together),
                            slowdown=tuple(t / a for t, a in zip(together, alone_t)),
                            makespan=max(together), algorithms=tuple(algorithms))
