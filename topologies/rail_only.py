"""Rail-only fabrics (Wang et al., "How to Build Low-cost Networks for Large Language Models
(without Sacrificing Performance)", arXiv:2307.12169, 2023): the spine layer between rails is
removed. Rail ``r`` (NIC ``r`` of every server) is its own non-blocking network; traffic
between GPUs of different rails crosses the servers' NVLink to the right rail first."""

from __future__ import annotations

import math

import networkx as nx

from ._endpoints import attach_servers, server_parts, server_params
from ._graph import add_cable, check_int, check_scale, finish, resolve_link
from .servers import get_server

__all__ = ["rail_only"]


def rail_only(nodes: int, *, server="dgx_h100", link="ib_ndr", radix: int = 64) -> nx.DiGraph:
    """A rail-only fabric of ``nodes`` servers: one network per rail, none between rails.

    Each rail joins NIC ``r`` of every server. Up to ``radix`` servers a rail is one switch;
    beyond, a non-blocking two-tier Clos of its own: ``ceil(nodes / (radix/2))`` leaves with
    ``radix/2`` server ports and ``radix/2`` uplinks each, over ``ceil(leaves / 2)`` spines,
    every leaf cabled to every spine (parallel cables where the uplinks outnumber the
    spines). The largest rail of ``radix``-port switches holds ``radix**2 / 2`` servers;
    more raises ValueError naming it. Servers must have NVLink (a GPU reaches the other rails
    through it).

    Parameters
    ----------
    nodes : int
        Servers (>= 2).
    server : str or ServerModel
        Server model with an NVSwitch layout (default ``"dgx_h100"``).
    link : str or LinkTech
        Technology of every fabric cable.
    radix : int
        Switch ports (even, >= 4).

    Examples
    --------
    >>> g = rail_only(32)                       # 8 rails of one 64-port switch each
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "switch")
    8
    >>> g = rail_only(128)                      # a rail: 4 leaves of 32 servers, 2 spines
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "switch")
    48
    """
    nodes = check_int("nodes", nodes, 2)
    radix = check_int("radix", radix, 4, "switch ports")
    if radix % 2:
        raise ValueError(f"radix must be even (a leaf splits its ports half down, half up), got {radix}")
    tech = resolve_link("link", link)
    model = get_server(server)
    if not model.has_nvlink:
        raise ValueError(f"server {model.name!r} has no NVLink: a rail-only fabric needs it to join the rails "
                         "(use rail_optimized)")
    half = radix // 2
    limit = radix * half
    if nodes > limit:
        raise ValueError(f"nodes must be at most {limit} for rail_only with radix={radix} (a rail is two tiers of "
                         f"{radix}-port switches: {radix} leaves of {half} servers); got {nodes}")
    # the servers, and a rail's leaf uplinks to its spines, both ways (an upper bound)
    check_scale("rail_only", nodes * (server_parts(model) + 2 * model.nics), f"{nodes} nodes")
    rails = model.rails
    g = nx.DiGraph()
    if nodes <= radix:
        leaves, per_leaf, spines = 1, nodes, 0
    else:
        leaves = math.ceil(nodes / half)
        per_leaf, spines = half, math.ceil(leaves / 2)
    for r in range(rails):
        for l in range(leaves):
            g.add_node(f"rail{r}/leaf{l}", kind="switch", role="leaf", tier=1, rail=r)
        for s in range(spines):
            g.add_node(f"rail{r}/spine{s}", kind="switch", role="spine", tier=2, rail=r)
        for l in range(leaves):
            down = min(per_leaf, nodes - l * per_leaf)
            base, extra = divmod(down, spines) if spines else (0, 0)
            for s in range(spines):
                n = base + (1 if (s - l * extra) % spines < extra else 0)
                if n:
                    add_cable(g, f"rail{r}/leaf{l}", f"rail{r}/spine{s}", tech, tier="leaf-spine", cables=n)
    # server s's NIC r on leaf s // per_leaf of rail r
    ports = [f"rail{r}/leaf{s // per_leaf}" for s in range(nodes) for r in range(rails)]
    attach_servers(g, model, ports, tech)
    params = dict(nodes=nodes, link=tech.name, server=server_params(model), radix=radix, rails=rails,
                  leaves_per_rail=leaves, spines_per_rail=spines, tiers=1 if not spines else 2)
    return finish(g, "rail_only", params, bisection=None, bisection_method="", network_diameter=None)
