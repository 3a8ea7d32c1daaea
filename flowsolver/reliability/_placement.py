"""Neighbouring jobs: several jobs placed on one cluster by a policy, their collectives run at
once on the shared fabric (:func:`flowsolver.concurrent`, event by event), each job's
slowdown against running alone.

Placement policies (GPU slots are ``(server, local GPU index)``; ranks in
:func:`topologies.gpus` order):

- ``"packed"``: jobs in order, each on the fewest servers, next to the previous job (what a
  first-fit scheduler does): a job that fits on one server takes the first server (in rank
  order) with room for it, so an 8-GPU job after a 4-GPU one takes a whole free server rather
  than the first one's last 4 GPUs and the next one's first 4; a larger job takes the servers
  with the most free GPUs (whole free ones first, the first of equals) and the rest on the
  first server with room for it; on each server its lowest free GPUs;
- ``"spread"``: servers dealt round-robin to the jobs (server order ``0, J, 2J, ..., 1,
  J + 1, ...`` for ``J`` jobs); jobs in order, each takes whole free servers in that order
  (the last one only in part when the job is not a multiple of a server), so no two jobs
  share a server while a whole one is free: its servers are far apart (other leaves, other
  scalable units); once none is whole, the rest of a job takes the free GPUs of the
  servers in the same order;
- ``"rail_aligned"``: slots ordered by local GPU index first, then server: each job takes the
  same GPU indices (the same rails) on every server, so its traffic between servers stays on
  its own rails' leaves;
- ``"topology_aware"``: servers grouped by the switches their NICs attach to (a scalable
  unit of a rail-optimised fabric, a leaf of a leaf-spine); jobs, largest first, each go to
  the group with the fewest free GPUs that still holds it whole (best fit, as a scheduler's
  topology plugin does), in rank order there; a job no group holds spills over the groups
  with the most free GPUs first.
"""

from __future__ import annotations

import numbers

import numpy as np

import topologies as tp

from ..collectives import ALGORITHMS, concurrent

__all__ = ["PLACEMENTS", "fixed_algorithm", "place_jobs", "placement_slowdowns"]

PLACEMENTS = ("packed", "spread", "rail_aligned", "topology_aware")


def _where(graph) -> list:
    """(server, local GPU index, rank) of every GPU, in rank order."""
    out = []
    for rank, node in enumerate(tp.gpus(graph)):
        d = graph.nodes[node]
        out.append((d.get("server", rank), d.get("local_rank", 0), rank))
    return out


def _by_server(graph, sizes, policy: str) -> list:
    """``"packed"`` and ``"spread"`` (see the module docstring): each job's ranks."""
    free: dict = {}                                   # server -> its free ranks, lowest local index first
    for server, _, rank in sorted(_where(graph)):
        free.setdefault(server, []).append(rank)
    servers = sorted(free)
    size = {s: len(free[s]) for s in servers}
    jobs = len(sizes)
    order = [servers[i] for r in range(jobs) for i in range(r, len(servers), jobs)]
    out = []
    for n in sizes:
        chosen: list = []
        if policy == "packed":
            room = sorted(servers, key=lambda s: -len(free[s]))           # most free first, stable
            m, held = 0, 0
            while held < n:
                held, m = held + len(free[room[m]]), m + 1
            for s in room[:m - 1]:                    # all of them but the last: whole (or fullest)
                chosen += free[s]
                free[s] = []
            rest = n - len(chosen)
            last = next(s for s in servers if len(free[s]) >= rest)     # first fit (the m-th has room)
            chosen += free[last][:rest]
            free[last] = free[last][rest:]
        else:
            for whole in (True, False):               # whole free servers first, then any free GPU
                for s in order:
                    k = min(n - len(chosen), len(free[s]))
                    if k and (len(free[s]) == size[s] or not whole):
                        chosen += free[s][:k]
                        free[s] = free[s][k:]
        out.append(sorted(chosen))
    return out


def _groups(graph) -> list:
    """Free GPU ranks per group of servers that attach to the same switches, in rank order."""
    gpus = tp.gpus(graph)
    server_of = [graph.nodes[n].get("server", r) for r, n in enumerate(gpus)]
    kind = {n: d.get("kind") for n, d in graph.nodes(data=True)}
    attached: dict = {}
    for u, v, d in graph.edges(data=True):
        s = graph.nodes[u].get("server")
        if s is not None and kind.get(v) == "switch" and "network" not in graph.nodes[v]:
            attached.setdefault(s, set()).add(v)
    groups: dict = {}
    for rank, s in enumerate(server_of):
        groups.setdefault(frozenset(attached.get(s, {s})), []).append(rank)
    return list(groups.values())


def _best_fit(graph, sizes) -> list:
    free = _groups(graph)
    out = [None] * len(sizes)
    for j in sorted(range(len(sizes)), key=lambda j: -sizes[j]):
        n = sizes[j]
        fits = [g for g in free if len(g) >= n]
        if fits:
            group = min(fits, key=len)
            out[j], group[:] = sorted(group[:n]), group[n:]
            continue
        taken = []
        for group in sorted(free, key=len, reverse=True):
            k = min(n - len(taken), len(group))
            taken += group[:k]
            group[:] = group[k:]
        out[j] = sorted(taken)
    return out


def place_jobs(graph, sizes, policy: str = "packed") -> list:
    """GPU ranks of each job (a list per job, ascending) when jobs of ``sizes`` GPUs are
    placed on ``graph`` by ``policy`` (see the module docstring).

    >>> g = tp.rail_optimized(4)                                   # 4 servers x 8 GPUs
    >>> [r[:4] for r in place_jobs(g, [16, 16], "spread")]         # servers 0, 2 and 1, 3
    [[0, 1, 2, 3], [8, 9, 10, 11]]
    >>> place_jobs(g, [16, 16], "rail_aligned")[1][:4]             # GPUs 4-7 of every server
    [4, 5, 6, 7]
    """
    if isinstance(sizes, (numbers.Number, str)) or not all(isinstance(n, numbers.Integral) and not isinstance(
            n, (bool, np.bool_)) and n >= 1 for n in sizes):
        raise ValueError(f"sizes must be a list of GPU counts (integers >= 1), got {sizes!r}")
    sizes = [int(n) for n in sizes]
    if not sizes:
        raise ValueError("sizes must name at least one job")
    total = len(tp.gpus(graph))
    if sum(sizes) > total:
        raise ValueError(f"sizes ask for {sum(sizes)} GPUs; the cluster has {total}")
    if policy == "topology_aware":
        return _best_fit(graph, sizes)
    if policy in ("packed", "spread"):
        return _by_server(graph, sizes, policy)
    if policy != "rail_aligned":
        raise ValueError(f"policy must be one of {', '.join(PLACEMENTS)}, got {policy!r}")
    slots = [rank for _, _, rank in sorted(_where(graph), key=lambda w: (w[1], w[0]))]
    out, at = [], 0
    for n in sizes:
        out.append(sorted(slots[at:at + n]))
        at += n
    return out


def fixed_algorithm(op: str) -> str:
    """The algorithm a what-if times ``op`` with where none is named: the ring where ``op`` has one
    (one schedule before and after a change, not NCCL's choice flipping), else NCCL's choice
    ("auto": an all-to-all or a send has no ring; adv25 F6 found them refused over a ring the user
    never named).

    >>> fixed_algorithm("all_reduce"), fixed_algorithm("all_to_all")
    ('ring', 'auto')
    """
    return "ring" if "ring" in ALGORITHMS.get(op, ()) else "auto"


def placement_slowdowns(graph, sizes, op: str = "all_reduce", size: float = 2**30, *, algorithm: str | None = None,
                        policies=PLACEMENTS, **options) -> list:
    """Each job's collective (``op`` of ``size`` bytes over its GPUs) alone and with every other
    job's at once, per placement policy: a list of rows ``policy``, ``job``, ``gpus``,
    ``servers`` (how many it spans), ``alone`` and ``together`` (s), ``slowdown``
    (together / alone). ``algorithm`` None: :func:`fixed_algorithm` (the ring where ``op`` has one).
    ``options`` go to :func:`flowsolver.concurrent` (``policy=`` there is the routing policy: pass
    it as ``routing=``).

    >>> rows = placement_slowdowns(tp.rail_optimized(4), [16, 16], size=2**26, policies=["packed"])
    >>> [(r["job"], r["servers"], round(r["slowdown"], 3)) for r in rows]   # non-blocking leaves
    [(0, 2, 1.0), (1, 2, 1.0)]
    """
    if "routing" in options:
        options["policy"] = options.pop("routing")
    algorithm = fixed_algorithm(op) if algorithm is None else algorithm
    rows = []
    gpus = tp.gpus(graph)
    for policy in policies:
        jobs = place_jobs(graph, sizes, policy)
        specs = [dict(op=op, size=float(size), ranks=ranks, algorithm=algorithm) for ranks in jobs]
        res = concurrent(graph, specs, **options)
        for j, ranks in enumerate(jobs):
            servers = len({graph.nodes[gpus[r]].get("server", r) for r in ranks})
            rows.append(dict(policy=policy, job=j, gpus=len(ranks), servers=servers, alone=res.alone[j],
                             together=res.together[j], slowdown=res.slowdown[j]))
    return rows
