"""What each communication of a replay costs on the fabric, and how concurrent ones share it.

Every distinct communication (op, bytes, GPU ranks) is timed once alone by
:func:`flowsolver.collective` (NCCL's algorithms, routing, latencies): its latency part
``latency`` (seconds no bandwidth can shorten) and its transfer part ``transfer``, and the
bytes it puts on every link (its solved steps' flows routed, :func:`_mean_utilization`), spread
evenly over the transfer: NCCL's rings and trees are pipelines, each hop moving the
collective's bytes at its pace, not a hop running ahead at its link's full rate. While several
run at once, each is one fluid job loading every link in proportion to its bytes there; the jobs share the links max-min fairly in bandwidth, each
counting as one flow on its busiest link (so a small collective beside a large one gets an
equal share, as their flows would), and a job progresses at its bandwidth over its bytes
on that link. Alone a job progresses at ``1 / transfer``, so a communication that meets
no other takes exactly its :func:`flowsolver.collective` time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

import topologies as tp_

from ..collectives import OPS, check_algorithm, collective
from ..solver import max_min_fair

__all__ = ["CommCost", "CostModel"]


@dataclass(frozen=True)
class CommCost:
    """One communication alone: ``latency`` and ``transfer`` seconds (``time`` their sum),
    the ``algorithm``, and its load column: ``links`` (graph edge indexes) and ``load`` (bytes
    per completed communication on each, scaled so that alone it progresses at 1 / transfer)."""

    op: str
    bytes: float
    ranks: tuple
    algorithm: str
    latency: float
    transfer: float
    links: np.ndarray
    load: np.ndarray

    @property
    def time(self) -> float:
        """Seconds alone."""
        return self.latency + self.transfer


def _checked_algorithms(algorithms) -> dict:
    """``replay``'s ``algorithms`` (op -> algorithm name) checked: a dict whose keys are ops and
    whose values run them ({"allreduce": "ring"} ran NCCL's choice instead, unseen)."""
    if algorithms is None:
        return {}
    if not isinstance(algorithms, dict):
        raise ValueError(f"algorithms must be a dict op -> algorithm (e.g. {{'all_reduce': 'ring'}}), "
                         f"got {algorithms!r}")
    for op, name in algorithms.items():
        if op not in OPS:
            raise ValueError(f"algorithms: {op!r} is not an op; ops: {', '.join(OPS)}")
        check_algorithm(op, name, label=f"algorithms[{op!r}]")
    return dict(algorithms)


class CostModel:
    """Per-signature :class:`CommCost` (timed once) and the rates of any set of them running
    together (solved once per distinct set)."""

    def __init__(self, graph, algorithms: dict | None, options: dict):
        self.graph, self.algorithms, self.options = graph, _checked_algorithms(algorithms), dict(options)
        self.costs, self.index, self._rates = [], {}, {}
        self.servers, self.templates = None, {}
        self.capacity = None
        self.link_table = None

    def signature(self, op: str, size: float, ranks: tuple) -> int:
        """Index of the :class:`CommCost` of ``op`` on ``size`` bytes among GPU ``ranks``."""
        key = (op, float(size), tuple(ranks))
        if key not in self.index:
            self.index[key] = len(self.costs)
            self.costs.append(self._inside_one_server(*key) or self._cost(*key))
        return self.index[key]

    def _inside_one_server(self, op, size, ranks):
        """The cost of a communication among GPUs of one server, from that of the same ranks
        (local positions) in a server with identical internals (links, capacities, latencies,
        technologies) solved before, its links mapped across; None if there is none yet (or
        the ranks span servers). Only a communication whose links all lay inside its server
        is reused: then nothing outside the server can change it."""
        if self.servers is None:
            self.servers = _Servers(self.graph)
        found = self.servers.place(ranks)
        if found is None:
            return None
        server, local = found
        key = (op, size, self.servers.fingerprint[server], local)
        template = self.templates.get(key)
        if template is None:
            cost = self._cost(op, size, ranks)
            inside = self.servers.local_links(server, cost.links)
            if inside is not None:
                self.templates[key] = (cost, inside)
            return cost
        cost, inside = template
        links = self.servers.global_links(server, inside)
        return CommCost(op, size, ranks, cost.algorithm, cost.latency, cost.transfer, links, cost.load)

    def _cost(self, op, size, ranks) -> CommCost:
        empty = np.zeros(0, dtype=np.int64)
        if op == "barrier" or size == 0 or len(ranks) < 2:
            return CommCost(op, size, ranks, "", 0.0, 0.0, empty, np.zeros(0))
        try:
            r = collective(self.graph, op, size, ranks=list(ranks), algorithm=self.algorithms.get(op, "auto"),
                           **self.options)
        except ValueError as err:
            raise ValueError(f"{op} of {size:g} B among GPU ranks {list(ranks)[:16]}: {err}") from None
        if self.capacity is None:
            self.link_table = r.links
            self.capacity = np.asarray(r.links.effective_capacity(self.options.get("efficiency")), dtype=np.float64)
        transfer = float(sum(st.count * st.transfer for st in r.steps))
        util = _mean_utilization(r, transfer, self.capacity)
        used = np.flatnonzero(util > 0)
        if transfer <= 0 or not len(used):
            return CommCost(op, size, ranks, r.algorithm, float(r.time), 0.0, empty, np.zeros(0))
        load = util[used] * self.capacity[used] * transfer / util[used].max()
        return CommCost(op, size, ranks, r.algorithm, float(r.time) - transfer, transfer, used, load)

    def rates(self, active: tuple) -> np.ndarray:
        """Progress rates (1/s) of the running transfers ``active`` (signature indexes,
        sorted, repeats allowed) sharing the links max-min fairly."""
        if active not in self._rates:
            self._rates[active] = self._solve(active)
        return self._rates[active]

    def _solve(self, active):
        costs = [self.costs[s] for s in active]
        if len(costs) == 1:
            return np.array([1.0 / costs[0].transfer])
        links = np.concatenate([c.links for c in costs])
        uniq, rows = np.unique(links, return_inverse=True)
        cols = np.repeat(np.arange(len(costs)), [len(c.links) for c in costs])
        # a job alone on its links needs no solve: only jobs that share a link are solved
        shared = np.bincount(rows, minlength=len(uniq)) > 1
        if not shared.any():
            return np.array([1.0 / c.transfer for c in costs])
        # each job is one flow of its busiest link (its column scaled to 1 there): max-min
        # fair in bandwidth, as flows are, not in progress (a job 10x larger gets no more of
        # a shared link); its progress rate is that bandwidth over its bytes on the link
        peak = np.array([c.load.max() for c in costs])
        matrix = sp.csc_matrix((np.concatenate([c.load / p for c, p in zip(costs, peak)]), (rows, cols)),
                               shape=(len(uniq), len(costs)))
        alloc = max_min_fair(matrix, self.capacity[uniq])
        return np.asarray(alloc.rates, dtype=np.float64) / peak

    def utilization(self, active: tuple, rates: np.ndarray) -> tuple:
        """(links, utilisation) of a set of running transfers at ``rates``."""
        costs = [self.costs[s] for s in active]
        links = np.concatenate([c.links for c in costs])
        load = np.concatenate([c.load * x for c, x in zip(costs, rates)])
        uniq, rows = np.unique(links, return_inverse=True)
        return uniq, np.bincount(rows, weights=load, minlength=len(uniq)) / self.capacity[uniq]


def _mean_utilization(result, transfer: float, capacity) -> np.ndarray:
    """Each link's mean utilisation over a collective's transfer: the bytes its solved steps
    put on the link (every step's flows, routed, times the step's count) over capacity x
    ``transfer``. Not ``result.link_utilization``: that holds each step's first allocation for
    the whole step, so a ring's NVLink hop, whose flow runs at the full port until it is done
    while the InfiniBand hop sets the step, counts as busy all along (a 4 GiB all-gather on
    GPUs 0, 4, 8, 12 of two DGX H100s: 12.8 GB on GPU 0's NVLink port for the 3.2 GB it
    carries). NCCL's ring is a pipeline (a hop forwards what it received, its FIFO slots
    bounded), so each hop carries the ring's bytes at the ring's rate: the mean. Falls back to
    ``link_utilization`` where the result kept no routing (steps larger than
    ``KEEP_ROUTING_BYTES``)."""
    derivation = result.solved_on
    steps = () if derivation is None else derivation.steps
    if not steps or transfer <= 0:
        return np.asarray(result.link_utilization, dtype=np.float64)
    moved = np.zeros(len(capacity))
    for routing, sizes, count in steps:
        moved += count * np.asarray(routing.link_loads(sizes), dtype=np.float64)
    return moved / (np.asarray(capacity, dtype=np.float64) * transfer)


#: node attributes that name a server's place, not what it is (a copy differs in them alone)
_PER_SERVER = ("server", "rank")


def _plain_items(attrs: dict, leave: tuple) -> tuple:
    """An attribute dict as a sorted tuple of hashable (key, value) pairs, ``leave`` left out."""
    return tuple(sorted((k, repr(v)) for k, v in attrs.items() if k not in leave))


class _Servers:
    """Each GPU's server (node attribute ``server``), each server's internal links by local
    (tail, head) position, and a fingerprint of its internals (equal fingerprints: servers
    that are copies of each other, link for link)."""

    def __init__(self, graph):
        gpus = tp_.gpus(graph)
        self.server_of = [graph.nodes[v].get("server") for v in gpus]
        self.local_name = {}
        internal = {}
        for e, (u, v, d) in enumerate(graph.edges(data=True)):
            su, sv = graph.nodes[u].get("server"), graph.nodes[v].get("server")
            if su is not None and su == sv:
                internal.setdefault(su, []).append((self._local(u, su), self._local(v, su), e, d))
        self.edge_at, self.position, self.fingerprint = {}, {}, {}
        nodes = {}              # each server's nodes' own attributes (its GPUs' type, ...), by local name
        for v, d in graph.nodes(data=True):
            if d.get("server") is not None:
                nodes.setdefault(d["server"], []).append((self._local(v, d["server"]), _plain_items(d, _PER_SERVER)))
        for s, edges in internal.items():
            edges.sort(key=lambda x: (x[0], x[1]))
            self.edge_at[s] = {(a, b): e for a, b, e, _ in edges}
            self.position[s] = {e: (a, b) for a, b, e, _ in edges}
            # every attribute of every link and node inside: two servers of other GPU types or link
            # efficiencies are not copies (the first one solved was reused for both)
            self.fingerprint[s] = hash((tuple((a, b, _plain_items(d, ())) for a, b, _, d in edges),
                                        tuple(sorted(nodes.get(s, ())))))
        self.gpu_local = [None if s is None else self._local(v, s) for v, s in zip(gpus, self.server_of)]

    @staticmethod
    def _local(node, server):
        prefix = f"s{server}/"
        name = str(node)
        return name[len(prefix):] if name.startswith(prefix) else name

    def place(self, ranks):
        """(server, local names of the ranks) when every rank is on one server, else None."""
        servers = {self.server_of[r] for r in ranks}
        if len(servers) != 1 or None in servers or servers.pop() not in self.fingerprint:
            return None
        return self.server_of[ranks[0]], tuple(self.gpu_local[r] for r in ranks)

    def local_links(self, server, links):
        """Local positions of ``links`` (graph edge indexes), or None if one is not inside ``server``."""
        where = self.position[server]
        out = [where.get(int(e)) for e in links]
        return None if any(p is None for p in out) else tuple(out)

    def global_links(self, server, positions):
        at = self.edge_at[server]
        return np.array([at[p] for p in positions], dtype=np.int64)
