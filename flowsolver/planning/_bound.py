"""A lower bound on a layout's step without solving the network: its collectives timed at the
bytes that must cross into the servers over the servers' external capacity (a cut bound), the
step composed from them.

Every collective of a kind runs at once on all its groups; whatever the algorithm, route or
protocol, the bytes a server must receive from outside it cross the links into the server,
which carry at most their capacity. Per group of ``n`` ranks with ``k`` in a server (``0 < k
< n``), at nccl-tests sizes ``S``, the server must receive at least:

* all-gather (``S`` the gathered total): the ``n - k`` outside shards, ``(n - k) S / n``;
* reduce-scatter (``S`` each rank's input): one reduced shard per local rank, ``k S / n``;
* all-reduce: the reduced result, ``S``;
* all-to-all (``S`` each rank's send buffer): ``S / n`` from every outside rank to every
  local one, ``k (n - k) S / n``;
* send / receive of ``S`` between servers: ``S``.

Summed over the servers and divided by the summed capacity of the links that enter them,
that is a lower bound on the kind's time (the latencies, protocol overheads and link
efficiencies only add). The same cut around one GPU (every GPU of a kind takes part alike)
gives a second bound, the bytes a GPU must receive over the capacity of the links into it
(NVLink and PCIe): all-gather and all-to-all ``(n - 1) S / n``, reduce-scatter ``S / n`` (an
in-switch reduction hands each rank its reduced shard once), all-reduce ``S``, a send ``S``. The
larger of the two is the bound.

A send / receive (PP's stage-boundary sends, CP's ring steps) is timed exactly as one step of
one flow per pair, all pairs at once: besides the cuts it cannot beat what the collectives'
own candidate bound (``lower_bound`` of its ``_bound`` module, which ``"auto"``
prunes by) gives its one step: NCCL's Simple base latency and Simple's smallest hop latency
(or the options' ``base_latency`` and ``step_latency``) plus the transfer through each GPU's
and each server's links at their efficiencies. Simple whatever the options' ``protocol``:
NCCL_PROTO does not govern sends, and the exact step times every send and all-to-all as
Simple (an LL128 floor, 15.9 us, was above the exact NVLink send's 11.8 us). That latency
is most of a ring-attention step, and what the attention block cannot hide of it is the
exposed CP communication; left out when the options carry a calibration ``model`` (which
rescales latencies). :func:`flowsolver.training.compose` of
those times never exceeds the exact step: every exposed term grows with the per-call times
(checked against exact steps in tests/planning/).

A TP collective (an all-reduce, or with sequence parallelism a reduce-scatter and the
all-gather timed with the algorithm the reduce-scatter picks; a mixture of experts' ``etp``
pair, on the TP groups, likewise) also cannot beat the least, over
the (algorithm, protocol) entries its pick can land on, of each entry's own floor
(:func:`flowsolver.collectives.kind_floors`): NCCL's formula for the entry (its latency, the
bandwidth it grants the graph's bus bandwidth, the kernels' chunk pipeline) on the least
transfer of the ring's steps, and of the algorithm's own, through the first group's GPUs and
servers; an entry timed by the per-step model (``step_latency`` given), the candidates' own
pruning bound. It holds under every protocol and collective option (a calibration included:
the floor is its formula), whatever NCCL picks, since every entry's time only grows with
those transfers. The TP phase exposes ``t - tp_overlap x min(t, gemm)`` of a call of ``t``
seconds, which grows with ``t``, and ETP's are exposed whole: the composed step stays below the
exact one.
"""

from __future__ import annotations

import numpy as np

import topologies as tp_

from ..collectives import (NCCL_BASE_LATENCY, NCCL_HOP_LATENCY, PROTOCOLS, Capacities, StepFlows,
                           checked_collective_options, kind_floors)
from ..training import CommProfile, CommTiming, step_collectives

__all__ = ["CutBound", "layout_groups"]


_OPS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


def layout_groups(key, kind: str) -> np.ndarray:
    """The rank groups of ``kind`` (``tp``, ``cp``, ``pp``, ``ep``, ``dp``, ``dp_experts``, or
    ``cp_step``: the CP rings' neighbour pairs) of the layout ``key`` = (tp, cp, pp, dp, ep,
    order) at the identity placement, one group per row, in the order of
    :meth:`flowsolver.training.ParallelLayout.groups` (tests check they are the same).

    >>> layout_groups((2, 1, 2, 2, 1, ("tp", "cp", "dp", "pp")), "dp").tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
    """
    tp, cp, pp, dp, ep, order = key
    size = dict(tp=tp, cp=cp, dp=dp, pp=pp)
    # the logical rank of every (stage, dp, cp, tp) index: the order's strides, fastest first
    stride, strides = 1, {}
    for name in order:
        strides[name] = stride
        stride *= size[name]
    q, d, c, t = np.ix_(np.arange(pp), np.arange(dp), np.arange(cp), np.arange(tp))
    ranks = q * strides["pp"] + d * strides["dp"] + c * strides["cp"] + t * strides["tp"]    # (pp, dp, cp, tp)
    if kind == "tp":
        return ranks.reshape(-1, tp)
    if kind in ("cp", "cp_step"):
        rings = ranks.transpose(0, 1, 3, 2).reshape(-1, cp)
        return rings if kind == "cp" else np.stack([rings.ravel(), np.roll(rings, -1, axis=1).ravel()], axis=1)
    if kind == "pp":            # (stage q, q + 1) of one (dp, cp, tp), stage outermost
        return np.stack([ranks[:-1].reshape(-1), ranks[1:].reshape(-1)], axis=1)
    if kind in ("ep", "dp_experts"):    # the dp x cp ranks of one (stage, tp) in rank order, runs of ep
        cp_first = order.index("cp") < order.index("dp")
        folded = ranks.transpose(0, 3, 1, 2) if cp_first else ranks.transpose(0, 3, 2, 1)
        by_expert = folded.reshape(pp, tp, dp * cp // ep, ep)
        if kind == "ep":
            return by_expert.reshape(-1, ep)
        return by_expert.transpose(0, 1, 3, 2).reshape(-1, dp * cp // ep)
    if kind == "dp":
        return ranks.transpose(0, 3, 1, 2).reshape(-1, dp * cp)
    raise ValueError(f"unknown group kind {kind!r}")


def _coefficients(groups: np.ndarray, server_of: np.ndarray, ops) -> dict:
    """Bytes into all servers together per byte of each op's size, over ``groups``."""
    n = groups.shape[1]
    servers = server_of[groups]
    if "send_recv" in ops:
        return {"send_recv": float(np.count_nonzero(servers[:, 0] != servers[:, 1]))}
    row = np.repeat(np.arange(len(groups)), n)
    _, k = np.unique(row * (int(server_of.max()) + 1) + servers.ravel(), return_counts=True)
    k = k[k < n].astype(np.float64)         # servers of groups that cross the servers
    return {"all_gather": float(np.sum((n - k) / n)), "reduce_scatter": float(np.sum(k / n)),
            "all_reduce": float(len(k)), "all_to_all": float(np.sum(k * (n - k) / n))}


# bytes one GPU must receive per byte of the op's size, groups of n ranks (module docstring)
_GPU_SHARE = {"all_gather": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: 1 / n, "all_reduce": lambda n: 1.0, "send_recv": lambda n: 1.0}


# the collectives given a floor of their own (name -> the key of ``algorithms`` that times
# them); sends have theirs (send_floor) and CP's all-gather is not what its exposure reads
_FLOORED = {"tp": "tp", "etp": "tp", "ep": "ep", "dp": "dp", "dp_gather": "dp", "dp_reduce": "dp", "dp_experts": "dp"}


# ops NCCL runs as point-to-point sends, Simple whatever NCCL_PROTO says (collectives' _sends_simple)
_SENDS = ("send_recv", "all_to_all")


class CutBound:
    """The cut bound of every collective of a layout on ``graph`` (its GPUs in
    ``topologies.gpus`` order, the identity placement); group lists and coefficients are
    remembered per layout's degrees and order, so many layouts share them.

    ``capacity``: bytes/s of all links that enter a server from outside (0 when the graph's
    nodes carry no ``server``: then every bound is 0, still a bound). ``collective_options``:
    the training step's (what the exact solves run with: efficiencies, protocol, latencies);
    they set the send / receive floor (module docstring)."""

    def __init__(self, graph, collective_options=None, algorithms=None):
        nodes = graph.nodes
        servers = [nodes[v].get("server") for v in tp_.gpus(graph)]
        if any(s is None or not isinstance(s, int) for s in servers):
            self.server_of = np.arange(len(servers))
            self.capacity = 0.0
        else:
            self.server_of = np.asarray(servers)
            self.capacity = float(sum(d.get("capacity", 0.0) for u, v, d in graph.edges(data=True)
                                      if nodes[v].get("server") is not None
                                      and nodes[u].get("server") != nodes[v].get("server")))
        into = {v: 0.0 for v in tp_.gpus(graph)}
        for _, v, d in graph.in_edges(list(into), data=True):
            into[v] += d.get("capacity", 0.0)
        self.gpu_capacity = min(into.values()) if into else 0.0
        self._coefficients: dict = {}
        self.send_latency, self._capacities = self._send_floor(graph, collective_options)
        self._graph = graph
        self._options = checked_collective_options(collective_options, graph)
        # the step's algorithm per kind (training_step's defaults: "auto", CP's ring)
        self._algorithms = {"tp": "auto", "ep": "auto", "dp": "auto", **dict(algorithms or {})}
        self._floors: dict = {}
        self._first_groups: dict = {}
        self._interned: dict = {}

    def _kind_floors(self, op: str, size: float, group: tuple, algorithm: str) -> dict:
        """``{algorithm: seconds}``: the least time of each algorithm the pick of ``op`` of
        ``size`` bytes on groups laid out as ``group`` (their first) can land on, over its
        protocols (:func:`flowsolver.collectives.kind_floors`), remembered; ``{}`` where the
        kind cannot run (the exact solve then fails: no floor is claimed). ``group``: one
        of ``_interned``'s tuples (remembered by identity, not hashed again)."""
        key = (op, float(size), id(group), algorithm)
        if key not in self._floors:
            # an all-to-all runs Simple whatever the protocol (NCCL_PROTO does not govern its
            # sends; the exact step's _sends_simple): its floor is Simple's (kind_floors refuses
            # LL / LL128 for it, which left EP without a floor under those protocols)
            options = dict(self._options, protocol="Simple") if op in _SENDS else self._options
            try:
                floors = kind_floors(self._graph, op, size, list(group), algorithm, **options)
            except ValueError:
                floors = {}
            least: dict = {}
            for (name, _), seconds in floors.items():
                least[name] = min(seconds, least.get(name, np.inf))
            self._floors[key] = least
        return self._floors[key]

    def floor(self, op: str, size: float, key, kind: str, algorithm: str, gather_size: float | None = None) -> tuple:
        """``(per_call, gather)`` (s): floors under the collective ``op`` of ``size`` bytes on
        the groups of ``kind`` of the layout ``key`` timed with ``algorithm`` (or ``"auto"``)
        and, given ``gather_size``, under the all-gather of those bytes solved with the
        algorithm it picks (the least over the algorithms it may pick); ``(0, 0)`` where
        none is known."""
        group = self._first_groups.get((key, kind))
        if group is None:       # one tuple per distinct group (a key hashes it once)
            group = tuple(layout_groups(key, kind)[0].tolist())
            group = self._first_groups[(key, kind)] = self._interned.setdefault(group, group)
        picks = self._kind_floors(op, size, group, algorithm)
        if not picks:
            return 0.0, 0.0
        per_call = min(picks.values())
        if gather_size is None:
            return per_call, 0.0
        gathers = []
        for name in picks:
            found = self._kind_floors("all_gather", gather_size, group, name)
            gathers.append(found.get(name, 0.0))
        return per_call, min(gathers)

    @staticmethod
    def _send_floor(graph, collective_options) -> tuple:
        """(s, Capacities or None): the latency every send / receive pays at least and the
        GPUs' and servers' capacities at the links' efficiencies; (0, None) under a
        calibration model."""
        options = checked_collective_options(collective_options, graph)
        if options.get("model") is not None:
            return 0.0, None
        # NCCL's ring base latency and its least hop latency (the collectives' own per-step
        # floor, min_hop_latency) of Simple, whatever the options' protocol: NCCL_PROTO does
        # not govern sends, and the exact step times every send Simple (collectives'
        # _sends_simple); or the options' overrides, which the exact sends take
        simple = PROTOCOLS.index("Simple")
        base, hop = options.get("base_latency"), options.get("step_latency")
        latency = ((NCCL_BASE_LATENCY["ring"][simple] * 1e-6 if base is None else float(base))
                   + (min(h[simple] for h in NCCL_HOP_LATENCY.values()) * 1e-6 if hop is None else float(hop)))
        return latency, Capacities(graph, list(range(len(tp_.gpus(graph)))), options.get("efficiency"))

    def _shape(self, key, kind) -> tuple:
        """(groups, ranks per group, coefficient per op) of a kind of a layout, remembered
        (the groups themselves are not kept)."""
        if (key, kind) not in self._coefficients:
            groups = layout_groups(key, kind)
            ops = ("send_recv",) if kind in ("pp", "cp_step") else _OPS
            coefficients = _coefficients(groups, self.server_of, ops)
            if "send_recv" in ops and self._capacities is not None and len(groups):
                # seconds per byte of the one step's transfer, every pair at once (linear in the bytes)
                flows = StepFlows.from_arrays(groups[:, 0], groups[:, 1], 1.0)
                coefficients["send_step"] = self._capacities.transfer(flows)
            self._coefficients[(key, kind)] = (groups.shape[0], groups.shape[1], coefficients)
        return self._coefficients[(key, kind)]

    def seconds(self, op: str, size: float, key, kind: str) -> float:
        """Lower bound (s) of ``op`` of ``size`` bytes on the groups of ``kind`` of the layout
        ``key`` = (tp, cp, pp, dp, ep, order): the larger of the server and the GPU cut."""
        _, n, coefficients = self._shape(key, kind)
        server = coefficients[op] * size / self.capacity if self.capacity else 0.0
        gpu = _GPU_SHARE[op](n) * size / self.gpu_capacity if self.gpu_capacity and n > 1 else 0.0
        if op == "send_recv" and "send_step" in coefficients:
            return max(server, gpu, self.send_latency + coefficients["send_step"] * size)
        return max(server, gpu)

    def profile(self, spec, lay, *, gpu, top_k, capacity_factor, reduce_bytes, gather_bytes, degrees) -> CommProfile:
        """A :class:`CommProfile` of ``lay`` (a :class:`flowsolver.planning.Layout`) whose
        per-call times are the cut bounds; ``degrees`` is what compose reads of the layout."""
        key = (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.order)
        kinds = {"tp": "tp", "etp": "tp", "cp": "cp", "cp_step": "cp_step", "pp": "pp", "ep": "ep", "dp": "dp",
                 "dp_gather": "dp", "dp_reduce": "dp", "dp_experts": "dp_experts"}
        comms = {}
        for name, _, op, size, _ in step_collectives(spec, degrees, lay.micro_batch, lay.zero, lay.sequence_parallel,
                                                     top_k, capacity_factor, reduce_bytes, gather_bytes,
                                                     groups=lambda kind: kind):
            kind = kinds[name]
            per_call = self.seconds(op, size, key, kind)
            gather, scattered = 0.0, op == "reduce_scatter" and name != "dp_reduce"
            if scattered:
                gather_size = size * (gather_bytes / reduce_bytes if name.startswith("dp") else 1.0)
                gather = self.seconds("all_gather", gather_size, key, kind)
            if name in _FLOORED:    # NCCL's own formula on the least transfers (module docstring)
                floor, gather_floor = self.floor(op, size, key, kind, self._algorithms[_FLOORED[name]],
                                                 gather_size if scattered else None)
                per_call, gather = max(per_call, floor), max(gather, gather_floor)
            count, ranks, _ = self._shape(key, kind)
            comms[name] = CommTiming(name=name, op=op, algorithm="bound", bytes=size, per_call=per_call,
                                     groups=count, group_size=ranks, gather=gather)
        return CommProfile(model=spec, layout=degrees, micro_batch=lay.micro_batch, zero=lay.zero, gpu=gpu,
                           comms=comms, sequence_parallel=lay.sequence_parallel, top_k=top_k,
                           capacity_factor=capacity_factor, reduce_bytes=reduce_bytes, gather_bytes=gather_bytes)
