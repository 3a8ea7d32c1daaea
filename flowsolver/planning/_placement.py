"""Placement: which GPUs of a cluster a job gets and which logical rank each one hosts, as
schedulers place jobs. A placement is a graph: the cluster with only the job's GPUs, their
``rank`` attributes renumbered in the order the job's ranks take them, so that
:func:`topologies.gpus`, :func:`flowsolver.training_step` and :func:`flowsolver.plan` on it
put each TP / CP / PP / DP / EP group on the GPUs the policy chose. The switches, NICs and
links all stay (the other jobs' GPUs are idle: their traffic is not modelled)."""

from __future__ import annotations

from collections import defaultdict

import topologies as tp_

from .. import _checks

__all__ = ["PLACEMENTS", "place_job", "server_racks"]

#: the placement policies of one job, by name (flowsolver.reliability.place_jobs places several
#: jobs beside each other with the same names where they mean the same for one job)
PLACEMENTS = {
    "packed": "whole servers, rack by rack (a rack: the servers under the same leaf switches, or the same "
              "scalable unit / pod): server-packed and rack-packed, the job fills one rack before it takes the "
              "next; on each server local rank i on GPU i (the i-th GPUs of all servers share rail i)",
    "rail_aligned": "the same GPU indices of every server of the cluster, GPUs 0 .. k-1 of each (k = gpus / "
                    "servers, a divisor of a server's GPUs): part of every server, each group across servers on "
                    "its own rails; a job that is not k GPUs of every server takes whole servers, those 'packed' "
                    "takes",
    "spread": "whole servers dealt round-robin over the racks (the first server of every rack, then the second, "
              "...), as on a fragmented cluster; ranks in server order",
    "rail_unaligned": "the servers of 'packed', but on the j-th server of the job local rank i runs on GPU "
                      "(i + j) mod the server's GPUs (a scheduler that does not pin local ranks to GPU "
                      "indices): the peers of a DP or PP group across servers sit on different rails",
}


def _rack_key(graph, gpu):
    """The rack of a GPU's server: the ``unit`` or ``pod`` of the first switches its NICs
    reach, or those switches' names."""
    leaves = set()
    for nic in graph.successors(gpu):
        if graph.nodes[nic].get("kind") != "nic":
            continue
        for sw in graph.successors(nic):
            data = graph.nodes[sw]
            if data.get("kind") == "switch":
                leaves.add(("unit", data["unit"]) if "unit" in data else ("pod", data["pod"]) if "pod" in data
                           else ("switch", sw))
    return tuple(sorted(leaves, key=str))


def server_racks(graph) -> dict:
    """Each server's GPUs (in rank order) grouped by rack: ``{rack index: {server: [gpu nodes]}}``,
    racks numbered by their first server, servers in rank order.

    >>> import topologies as tp
    >>> racks = server_racks(tp.rail_optimized(4, servers_per_unit=2))
    >>> {r: list(servers) for r, servers in racks.items()}
    {0: [0, 1], 1: [2, 3]}
    """
    servers: dict = {}
    for i, gpu in enumerate(tp_.gpus(graph)):
        servers.setdefault(graph.nodes[gpu].get("server", i), []).append(gpu)
    keys: dict = {}
    racks: dict = defaultdict(dict)
    for server, members in servers.items():
        rack = keys.setdefault(_rack_key(graph, members[0]), len(keys))
        racks[rack][server] = members
    return dict(racks)


def place_job(graph, gpus: int | None = None, placement: str = "packed"):
    """The cluster ``graph`` as a job of ``gpus`` GPUs (default all; whole servers) placed by
    ``placement`` (:data:`PLACEMENTS`) sees it: a copy with only the job's GPUs, their ``rank``
    attributes 0 .. gpus - 1 in the order the job's logical ranks take them.

    Time a layout on it with :func:`flowsolver.training_step` or search it with
    :func:`flowsolver.plan` (``plan(graph, gpus=..., placement=...)`` does this for you).

    >>> import topologies as tp
    >>> g = place_job(tp.rail_optimized(4, servers_per_unit=2), gpus=16, placement="spread")   # one per rack
    >>> tp.gpus(g)[:2], tp.gpus(g)[8:10]
    (['s0/gpu0', 's0/gpu1'], ['s2/gpu0', 's2/gpu1'])
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    racks = server_racks(graph)
    total = sum(len(m) for servers in racks.values() for m in servers.values())
    gpus = total if gpus is None else _checks.integer("gpus", gpus)
    if gpus > total:
        raise ValueError(f"gpus ({gpus}) is more than the cluster's {total} GPUs")
    if placement == "rail_aligned":
        return _rail_aligned(graph, racks, gpus)
    if placement == "spread":
        queues = [list(servers.items()) for servers in racks.values()]
        dealt = [queue[k] for k in range(max(len(q) for q in queues)) for queue in queues if k < len(queue)]
    else:
        dealt = [item for servers in racks.values() for item in servers.items()]
    chosen, count = [], 0
    for server, members in dealt:
        if count >= gpus:
            break
        chosen.append((server, members))
        count += len(members)
    if count != gpus:
        raise ValueError(f"gpus ({gpus}) must be whole servers under placement {placement!r}: the servers it "
                         f"takes hold {count} GPUs")
    order = {server: k for k, server in enumerate(sorted(server for server, _ in chosen))}
    chosen.sort(key=lambda item: order[item[0]])            # ranks in server order (a sorted host list)
    job = []
    for j, (_, members) in enumerate(chosen):
        n = len(members)
        job += [members[(i + j) % n] for i in range(n)] if placement == "rail_unaligned" else members
    return _job_graph(graph, job)


def _rail_aligned(graph, racks, gpus):
    """GPUs 0 .. k-1 of the first ``gpus / k`` servers, the smallest ``k`` (dividing the
    server's GPUs) that fits: all servers unless ``k`` is the whole server."""
    servers = [members for rack in racks.values() for members in rack.values()]
    width = len(servers[0])
    per_server = next((k for k in range(1, width + 1) if width % k == 0 and gpus % k == 0
                       and gpus // k <= len(servers) and (k == width or gpus // k == len(servers))), None)
    if per_server is None or any(len(m) != width for m in servers):
        raise ValueError(f"gpus ({gpus}) cannot be placed rail_aligned on {len(servers)} servers of {width} GPUs: "
                         f"it takes the same k GPUs (k dividing {width}) of gpus / k servers, all of them unless "
                         f"k = {width}")
    count = gpus // per_server
    job = [m[i] for m in servers[:count] for i in range(per_server)]
    return _job_graph(graph, job)


def _job_graph(graph, job):
    """``graph`` with only the GPUs of ``job``, ranked in its order (everything else kept)."""
    keep = set(job)
    out = graph.subgraph([v for v in graph.nodes if v in keep or graph.nodes[v].get("kind") != "gpu"]).copy()
    for rank, gpu in enumerate(job):
        out.nodes[gpu]["rank"] = rank
    return out
