"""Neighbouring jobs: several jobs placed on one cluster by a policy, their collectives run at
once on the shared fabric (:func:`flowsolver.concurrent`, event by event), each job's
slowdown against running alone.

Placement policies (GPU slots are ``(server, local GPU index)``; ranks in
:func:`topologies.gpus` order):

- ``"packed"``: slots in rank order, each job on the fewest servers, next to the previous
  job (what a first-fit scheduler does on an empty cluster);
- ``"spread"``: servers dealt round-robin to the jobs (server order ``0, J, 2J, ..., 1,
  J + 1, ...`` for ``J`` jobs), each job filling whole servers in that order: its servers are
  far apart (other leaves, other scalable units);
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

from ..collectives import concurrent

__all__ = ["PLACEMENTS", "place_jobs", "placement_slowdowns"]

PLACEMENTS = ("packed", "spread", "rail_aligned", "topology_aware")


def _slots(graph, policy: str, jobs: int) -> list:
    """GPU ranks in the order ``policy`` hands them out."""
    gpus = tp.gpus(graph)
    where = []
    for rank, node in enumerate(gpus):
        d = graph.nodes[node]
        where.append((d.get("server", rank), d.get("local_rank", 0), rank))
    servers = sorted({s for s, _, _ in where})
    if policy == "packed":
        return list(range(len(gpus)))
    if policy == "spread":
        order = [servers[i] for r in range(jobs) for i in range(r, len(servers), jobs)]
        position = {s: k for k, s in enumerate(order)}
        return [rank for _, _, rank in sorted(where, key=lambda w: (position[w[0]], w[1]))]
    if policy == "rail_aligned":
        return [rank for _, _, rank in sorted(where, key=lambda w: (w[1], w[0]))]
    raise ValueError(f"policy must be one of {', '.join(PLACEMENTS)}, got {policy!r}")


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
    slots = _slots(graph, policy, len(sizes))
    out, at = [], 0
    for n in sizes:
        out.append(sorted(slots[at:at + n]))
        at += n
    return out


def placement_slowdowns(graph, sizes, op: str = "all_reduce", size: float = 2**30, *, algorithm: str = "ring",
                        policies=PLACEMENTS, **options) -> list:
    """Each job's collective (``op`` of ``size`` bytes over its GPUs) alone and with every other
    job's at once, per placement policy: a list of rows ``policy``, ``job``, ``gpus``,
    ``servers`` (how many it spans), ``alone`` and ``together`` (s), ``slowdown``
    (together / alone). ``options`` go to :func:`flowsolver.concurrent` (``policy=`` there is
    the routing policy: pass it as ``routing=``).

    >>> rows = placement_slowdowns(tp.rail_optimized(4), [16, 16], size=2**26, policies=["packed"])
    >>> [(r["job"], r["servers"], round(r["slowdown"], 3)) for r in rows]   # non-blocking leaves
    [(0, 2, 1.0), (1, 2, 1.0)]
    """
    if "routing" in options:
        options["policy"] = options.pop("routing")
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
