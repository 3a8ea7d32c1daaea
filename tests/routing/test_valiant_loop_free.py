"""DragonFly Valiant through a random intermediate group (Kim et al., ISCA 2008): every route
is local-global-local-global-local, at most 3 local hops, 2 global hops, no router twice,
with one global cable between each pair of groups or several."""

import networkx as nx
import numpy as np
import pytest

import topologies as tp
from flowsolver.routing import route
from flowsolver.traffic import Flows


def _all_pairs(g):
    n = len(tp.gpus(g))
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    return pairs, Flows([a for a, _ in pairs], [b for _, b in pairs], 1.0)


@pytest.mark.parametrize("args, kw", [((2, 4, 2), {}), ((1, 4, 2), {"arrangement": "relative"}),
                                      ((2, 3, 1), {})])
@pytest.mark.parametrize("seed", [0, 3])
def test_valiant_routes_visit_no_router_twice(args, kw, seed):
    g = tp.dragonfly(*args, **kw)               # g = a*h + 1 groups: one global cable a pair
    pairs, flows = _all_pairs(g)
    rm = route(g, flows, "valiant", seed=seed)
    group = {n: d["group"] for n, d in g.nodes(data=True) if d.get("kind") == "switch"}
    looped, local, via_third = 0, [], 0
    for f in range(len(pairs)):
        links, frac = rm.column(f)
        assert np.allclose(frac, 1.0)           # one path: one cable joins each pair of groups
        used = [(rm.links.src[l], rm.links.dst[l], rm.links.tier[l]) for l in links]
        path = nx.DiGraph((u, v) for u, v, _ in used)
        entered = [v for _, v, _ in used]
        looped += len(entered) != len(set(entered)) or not nx.is_directed_acyclic_graph(path)
        local.append(sum(t == "local" for *_, t in used))
        hops = [group[v] for u, v, t in used if t == "global"]
        if len(hops) == 2:                      # pairs in two groups: through a third
            src_group = group[[u for u, _, t in used if t == "global"][0]]
            via_third += hops[0] not in (src_group, hops[1])
    assert looped == 0                          # was 503 of 5,112 routes on dragonfly(2, 4, 2)
    assert max(local) <= 3                      # was 4 (entry -> mid -> entry -> exit)
    assert via_third > 0.5 * len(pairs)


def test_intermediate_router_is_where_the_global_cable_lands():
    from flowsolver.routing._fabric import DragonflyTables
    from flowsolver.routing._graph_index import GraphIndex

    g = tp.dragonfly(2, 4, 2)
    df = DragonflyTables(GraphIndex(g))
    ix = df.ix
    a = np.repeat(df.routers_of[0], 8)
    b = np.tile(df.routers_of[1], 8)
    mid = df.intermediate(a, b, seed=1)
    for x, m in zip(a, mid):
        gm = df.group[m]
        assert gm not in (0, 1)
        # a global cable from group 0 lands on the intermediate router
        lands = {ix.head[c] for c in df.glob if df.group[ix.tail[c]] == 0 and df.group[ix.head[c]] == gm}
        assert m in lands


def _fabric_dag(rm, f):
    """Flow ``f``'s fabric links (tiers local and global) as a graph, and whether it has a
    cycle: a fluid route passes a router twice on some path exactly where its links close one."""
    links, _ = rm.column(f)
    d = nx.DiGraph()
    for lk in links:
        tier = rm.links.tier[lk]
        if tier in ("local", "global"):
            d.add_edge(rm.links.src[lk], rm.links.dst[lk], local=int(tier == "local"), glob=int(tier == "global"))
    return d


# several cables a group pair (m = a*h/(g-1)): 2 for (2, 4, 2, g=5), 4 for (1, 4, 2, g=3),
# 2 for (1, 3, 2, g=4) and 4 relative (2, 4, 2, g=3); one for the default g = a*h + 1
SHAPES = [((2, 4, 2), {"g": 5}), ((1, 4, 2), {"g": 3}), ((1, 3, 2), {"g": 4}),
          ((2, 4, 2), {"g": 3, "arrangement": "relative"}), ((2, 4, 2), {}), ((2, 2, 1), {"server": "dgx_h100"})]


@pytest.mark.parametrize("args, kw", SHAPES)
@pytest.mark.parametrize("seed", [0, 5])
def test_valiant_every_path_loop_free_with_several_cables(args, kw, seed):
    g = tp.dragonfly(*args, **kw)
    pairs, flows = _all_pairs(g)
    rm = route(g, flows, "valiant", seed=seed)
    looped = 0
    for f in range(len(pairs)):
        d = _fabric_dag(rm, f)
        if not nx.is_directed_acyclic_graph(d):
            looped += 1
            continue
        # the longest path of the route's links bounds every path the fluid split takes
        assert nx.dag_longest_path_length(d, weight="local") <= 3
        assert nx.dag_longest_path_length(d, weight="glob") <= 2
    assert looped == 0              # was 428 of 1,560 routes on dragonfly(2, 4, 2, g=5)


@pytest.mark.parametrize("args, kw", SHAPES[:3])
def test_minimal_fluid_over_the_group_pairs_cables(args, kw):
    """Minimal is one global hop, at most 2 local, and puts cables / (cables between the two
    groups) of the flow on each global cable joining its groups (m = a*h/(g-1) of them)."""
    g = tp.dragonfly(*args, **kw)
    p, a, h = args
    groups = kw.get("g", a * h + 1)
    m = a * h // (groups - 1)
    pairs, flows = _all_pairs(g)
    rm = route(g, flows, "minimal")
    group = {n: d["group"] for n, d in g.nodes(data=True) if d.get("kind") == "switch"}
    for f in range(len(pairs)):
        d = _fabric_dag(rm, f)
        assert nx.is_directed_acyclic_graph(d)
        assert nx.dag_longest_path_length(d, weight="local") <= 2
        links, frac = rm.column(f)
        glob = [(rm.links.src[lk], rm.links.dst[lk], x) for lk, x in zip(links, frac)
                if rm.links.tier[lk] == "global"]
        if glob:                    # two groups: every cable from one to the other, by its cables
            assert len(glob) == len({(u, v) for u, v, _ in glob})
            assert sum(g.edges[u, v].get("cables", 1) for u, v, _ in glob) == m
            assert len({(group[u], group[v]) for u, v, _ in glob}) == 1
            for u, v, x in glob:
                assert x == pytest.approx(g.edges[u, v].get("cables", 1) / m)
