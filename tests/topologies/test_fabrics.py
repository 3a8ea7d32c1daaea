"""Structural invariants against the formulas and tables of ../shared/REFERENCE.md."""

from collections import Counter

import networkx as nx
import pytest

import topologies as tp

from ..helpers import endpoint_diameter, kind_count, min_cut, ranked_gpus

NDR = 50e9


def _full_duplex(g):
    for u, v, d in g.edges(data=True):
        assert g.has_edge(v, u), (u, v)
        assert g[v][u]["capacity"] == d["capacity"]


# ---------------------------------------------------------------- fat-tree
@pytest.mark.parametrize("k,hosts,switches", [(4, 16, 20), (8, 128, 80), (16, 1024, 320)])
def test_fat_tree_counts(k, hosts, switches):
    g = tp.fat_tree(k)
    assert kind_count(g, "gpu") == hosts == k ** 3 // 4
    assert kind_count(g, "switch") == switches == 5 * k * k // 4
    assert kind_count(g, "switch", "core") == (k // 2) ** 2
    assert kind_count(g, "switch", "edge") == kind_count(g, "switch", "aggregation") == k * k // 2
    # every switch uses exactly its k ports, one cable each
    degrees = Counter(g.out_degree(n) for n, d in g.nodes(data=True) if d["kind"] == "switch")
    assert degrees == {k: switches}
    assert all(d["cables"] == 1 for _, _, d in g.edges(data=True))
    _full_duplex(g)


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_diameter_is_six_host_hops(k):
    g = tp.fat_tree(k)
    nics = [n for n, d in g.nodes(data=True) if d["kind"] == "nic"]
    assert endpoint_diameter(g, nics, {"nic", "switch"}) == 6
    assert tp.describe(g)["network_diameter"] == 6


def test_fat_tree_with_dgx_servers_packs_a_server_per_edge_switch():
    g = tp.fat_tree(16, server="dgx_h100")
    assert kind_count(g, "gpu") == 1024  # 128 servers x 8 GPUs on 1024 edge ports
    for s in (0, 5, 127):
        edges = {v for j in range(8) for v in g.successors(f"s{s}/nic{j}")
                 if g.nodes[v]["kind"] == "switch"}
        assert len(edges) == 1


# ---------------------------------------------------------------- SuperPOD
@pytest.mark.parametrize("units,gpus,leaf,spine,core", [
    (2, 512, 16, 8, 0), (4, 1024, 32, 16, 0), (8, 2048, 64, 32, 0), (16, 4096, 128, 128, 64)])
def test_superpod_switch_counts(units, gpus, leaf, spine, core):
    g = tp.rail_optimized(32 * units)
    assert kind_count(g, "gpu") == gpus
    assert kind_count(g, "switch", "leaf") == leaf
    assert kind_count(g, "switch", "spine") == spine
    assert kind_count(g, "switch", "core") == core
    # non-blocking, 64-port switches: every leaf 32 down + 32 up, every switch <= 64 ports
    for n, d in g.nodes(data=True):
        if d["kind"] != "switch":
            continue
        ports = sum(e["cables"] for e in g[n].values())
        assert ports <= 64
        if d["role"] == "leaf":
            down = sum(1 for v in g[n] if g.nodes[v]["kind"] == "nic")
            assert down == 32 and ports == 64
    _full_duplex(g)


def test_superpod_rails():
    g = tp.rail_optimized(64)
    for s in (0, 31, 32, 63):
        for r in range(8):
            leaf = [v for v in g.successors(f"s{s}/nic{r}") if g.nodes[v]["kind"] == "switch"]
            assert leaf == [f"su{s // 32}/leaf{r}"]
            assert g.nodes[leaf[0]]["rail"] == r


def test_superpod_partial_unit_and_single_server():
    g = tp.rail_optimized(40)
    assert kind_count(g, "gpu") == 320 and kind_count(g, "switch", "leaf") == 16
    one = tp.rail_optimized(1)
    assert kind_count(one, "switch") == 0 and kind_count(one, "nic") == 8


@pytest.mark.parametrize("nodes,expected", [(8, 4), (64, 4), (288, 6)])
def test_superpod_diameter(nodes, expected):
    g = tp.rail_optimized(nodes)
    nics = [n for n, d in g.nodes(data=True) if d["kind"] == "nic"][:: 7 if nodes > 64 else 1]
    assert endpoint_diameter(g, nics, {"nic", "switch"}) == expected == g.graph["network_diameter"]


def test_superpod_oversubscription():
    g = tp.rail_optimized(64, oversubscription=2)
    leaf = "su0/leaf0"
    up = sum(e["cables"] for v, e in g[leaf].items() if g.nodes[v]["kind"] == "switch")
    assert up == 16


# ---------------------------------------------------------------- leaf-spine
def test_leaf_spine_parallel_links_and_oversubscription():
    g = tp.leaf_spine(4, 2, 8, oversubscription=2)
    assert g["leaf0"]["spine0"]["cables"] == 2 and g["leaf0"]["spine0"]["capacity"] == 2 * NDR
    g = tp.leaf_spine(4, 3, 8, uplinks=4)  # 4 uplinks over 3 spines: extras balanced
    per_spine = Counter()
    for u, v, d in g.edges(data=True):
        if u.startswith("leaf") and v.startswith("spine"):
            per_spine[v] += d["cables"]
    assert sorted(per_spine.values()) == [5, 5, 6]
    with pytest.raises(ValueError, match=r"uplinks \(4\) must be >= spines \(8\)"):
        tp.leaf_spine(4, 8, 8, uplinks=4)      # leaves 0, 2 and 1, 3 would share no spine



def _fewest_uplinks(down, ratio):
    """The fewest whole uplinks u >= 1 with down / u <= ratio, in exact rationals (the ratio
    read as its decimal: 1.1 is 11/10)."""
    from fractions import Fraction
    u = 1
    while Fraction(down, u) > Fraction(str(ratio)):
        u += 1
    return u


@pytest.mark.parametrize("ratio", [1.0, 1.1, 1.5, 2.0, 2.5, 3.0, 4.0])
def test_uplinks_are_never_more_oversubscribed_than_asked(ratio):
    # 4 hosts at 3 are 2 uplinks (ratio 2), not round(4/3) = 1 (ratio 4); 5 hosts at 2 are 3
    # (ratio 5/3), not round(2.5) = 2 (ratio 2.5); 11 at 1.1 are 10, not 11 from a float's last bit
    for hosts in range(1, 13):
        g = tp.leaf_spine(4, 1, hosts, oversubscription=ratio)
        up = _fewest_uplinks(hosts, ratio)
        assert g.graph["params"]["uplinks"] == up, hosts
        assert g.graph["params"]["oversubscription"] == pytest.approx(hosts / up)
        assert sum(e["cables"] for v, e in g["leaf0"].items() if v.startswith("spine")) == up
        # rail_optimized: the same rule per leaf, and the built ratio recorded likewise
        r = tp.rail_optimized(hosts, servers_per_unit=hosts, oversubscription=ratio) if hosts > 1 else None
        if r is not None:
            assert sum(e["cables"] for v, e in r["su0/leaf0"].items() if r.nodes[v]["kind"] == "switch") == up
            assert r.graph["params"]["oversubscription"] == pytest.approx(hosts / up)


# ---------------------------------------------------------------- DragonFly
@pytest.mark.parametrize("p,a,groups,routers,hosts", [(2, 4, 9, 36, 72), (4, 8, 33, 264, 1056)])
def test_dragonfly_counts_and_radix(p, a, groups, routers, hosts):
    g = tp.dragonfly(p, a, p)
    assert kind_count(g, "switch", "router") == routers
    assert kind_count(g, "gpu") == hosts
    assert len({d["group"] for _, d in g.nodes(data=True) if d["kind"] == "switch"}) == groups
    for n, d in g.nodes(data=True):
        if d["kind"] == "switch":
            assert sum(e["cables"] for e in g[n].values()) == p + a - 1 + p
    # exactly one global cable between every pair of groups
    pairs = Counter()
    for u, v, d in g.edges(data=True):
        if d["tier"] == "global":
            pairs[(g.nodes[u]["group"], g.nodes[v]["group"])] += d["cables"]
    assert len(pairs) == groups * (groups - 1) and set(pairs.values()) == {1}
    _full_duplex(g)


@pytest.mark.parametrize("arrangement", ["absolute", "relative"])
def test_dragonfly_minimal_diameter_is_three_router_hops(arrangement):
    g = tp.dragonfly(2, 4, 2, arrangement=arrangement)
    routers = g.subgraph([n for n, d in g.nodes(data=True) if d["kind"] == "switch"])
    assert nx.diameter(routers) == 3
    assert tp.describe(g)["network_diameter"] == 3 + 2


def test_dragonfly_fewer_groups_get_parallel_global_cables():
    g = tp.dragonfly(2, 4, 2, g=5)  # 8 global ports per group over 4 other groups
    pairs = Counter()
    for u, v, d in g.edges(data=True):
        if d["tier"] == "global":
            pairs[(g.nodes[u]["group"], g.nodes[v]["group"])] += d["cables"]
    assert set(pairs.values()) == {2}
    d = tp.describe(g)
    routers = g.subgraph([n for n, x in g.nodes(data=True) if x["kind"] == "switch"])
    assert d["network_diameter"] == nx.diameter(routers) + 2


# ---------------------------------------------------------------- torus
def test_torus_of_chips():
    g = tp.torus((4, 4, 4))
    assert kind_count(g, "gpu") == 64
    assert {g.out_degree(n) for n in g} == {6}
    assert {len(set(g.successors(n))) for n in g} == {6}
    assert nx.diameter(g) == 3 * (4 // 2)
    _full_duplex(g)


@pytest.mark.parametrize("dims,wrap,diameter", [((5, 5), True, 4), ((4, 4), False, 6),
                                                ((3, 4, 5), True, 1 + 2 + 2), ((2, 3), True, 2)])
def test_torus_and_mesh_diameter(dims, wrap, diameter):
    g = tp.torus(dims, wrap=wrap)
    assert nx.diameter(g) == diameter == tp.describe(g)["network_diameter"]


def test_torus_of_servers():
    g = tp.torus((4, 4), server="dgx_h100")
    assert kind_count(g, "gpu") == 128 and kind_count(g, "switch", "router") == 16
    routers = g.subgraph([n for n, d in g.nodes(data=True) if d["kind"] == "switch"])
    assert {routers.out_degree(n) for n in routers} == {4}


# ---------------------------------------------------------------- bisection
def _rank_halves(g):
    order = ranked_gpus(g)
    return order[: len(order) // 2], order[len(order) // 2:]


@pytest.mark.parametrize("build,expected", [
    (lambda: tp.fat_tree(4), 8 * NDR),                                  # k^3/8 links
    (lambda: tp.fat_tree(8, server="dgx_h100"), 64 * NDR),
    (lambda: tp.leaf_spine(4, 2, 8), 16 * NDR),
    (lambda: tp.leaf_spine(4, 2, 8, oversubscription=2), 8 * NDR),
    (lambda: tp.rail_optimized(64), 256 * NDR),                          # 512 GPUs / 2
    (lambda: tp.rail_optimized(64, oversubscription=2), 128 * NDR),
    (lambda: tp.rail_optimized(8), 32 * NDR),
    (lambda: tp.torus((4, 4, 4)), 2 * 4 ** 2 * NDR),                     # 2 k^(n-1) links
    (lambda: tp.torus((4, 6), wrap=False), 4 * NDR),
    (lambda: tp.torus((4, 4), server="dgx_h100"), 8 * NDR),
])
def test_bisection_formula_equals_networkx_min_cut(build, expected):
    g = build()
    first, second = _rank_halves(g) if g.graph["generator"] != "torus" else _torus_halves(g)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(expected)
    assert min_cut(g, first, second) == pytest.approx(expected)


def _torus_halves(g):
    dims = g.graph["params"]["dims"]
    d = dims.index(max(dims))
    gpus = ranked_gpus(g)

    def coord(n):
        node = n if g.nodes[n].get("coords") else None
        if node is None:  # a server's GPU: the router its NICs plug into
            nic = n.replace("gpu", "nic")
            node = [v for v in g.successors(nic) if g.nodes[v]["kind"] == "switch"][0]
        return g.nodes[node]["coords"][d]

    return ([n for n in gpus if coord(n) < max(dims) // 2],
            [n for n in gpus if coord(n) >= max(dims) // 2])


def test_dragonfly_bisection_against_min_cut_of_group_halves():
    g = tp.dragonfly(2, 4, 2)
    groups = 9
    gpus = ranked_gpus(g)
    group_of = {}
    for n in gpus:
        router = [v for v in g.successors(n.replace("gpu", "nic")) if g.nodes[v]["kind"] == "switch"][0]
        group_of[n] = g.nodes[router]["group"]
    first = [n for n in gpus if group_of[n] < groups // 2]
    second = [n for n in gpus if group_of[n] >= groups // 2]
    expected = 4 * 5 * NDR  # 4 x 5 group pairs across the cut, one cable each
    assert min_cut(g, first, second) == pytest.approx(expected)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(expected)


def test_edited_graph_is_measured_not_assumed():
    g = tp.fat_tree(4)
    g.remove_edge("pod0/agg0", "core0")
    g.remove_edge("core0", "pod0/agg0")
    d = tp.describe(g)
    first, second = _rank_halves(g)
    assert d["bisection_bandwidth"] == pytest.approx(7 * NDR)
    assert d["bisection_bandwidth"] == pytest.approx(min_cut(g, first, second))
    assert "max flow" in d["bisection_method"] and d["diameter_method"] == "breadth-first search"


# ---------------------------------------------------------------- describe, rank order
def test_describe_counts_cables_by_technology():
    d = tp.describe(tp.rail_optimized(8))
    assert d["gpus"] == 64 and d["servers"] == 8
    assert d["cables_by_tech"] == {"ib_ndr": 64 + 64, "nvlink4": 64, "pcie5": 64}
    assert d["cost"]["switches"] == 9


def test_gpu_rank_order():
    g = tp.rail_optimized(4)
    order = tp.gpus(g)
    assert order[:9] == [f"s0/gpu{i}" for i in range(8)] + ["s1/gpu0"]
    assert [g.nodes[n]["rank"] for n in order] == list(range(32))
    hand = nx.DiGraph()
    for name in ("gpu10", "gpu2", "gpu1"):
        hand.add_node(name, kind="gpu")
    assert tp.gpus(hand) == ["gpu1", "gpu2", "gpu10"]


def test_generated_graphs_validate():
    for g in (tp.fat_tree(4), tp.leaf_spine(2, 2, 4), tp.rail_optimized(33), tp.dragonfly(2, 4, 2),
              tp.torus((3, 3)), tp.rail_optimized(2, server="pcie_8gpu"), tp.rail_optimized(1, server="nvl72")):
        assert tp.validate(g) is g


def test_an_edit_that_keeps_every_total_is_measured_not_assumed():
    """adv24 F4: half of every leaf-spine link's capacity moved to one NVLink edge keeps the
    counts and totals the fingerprint held; describe() then reported the family's bisection (12.8
    TB/s on 64 DGX H100) where the max flow is half. A NaN efficiency on a generated graph is
    refused as on a hand-built one."""
    g = tp.rail_optimized(nodes=64)
    formula = tp.describe(g)["bisection_bandwidth"]
    lost = 0.0
    for _, _, d in g.edges(data=True):
        if d.get("tier") == "leaf-spine":
            lost += d["capacity"] / 2
            d["capacity"] /= 2
    u, v = next((u, v) for u, v, t in g.edges(data="tier") if t == "nvlink")
    g.edges[u, v]["capacity"] += lost
    d = tp.describe(g)
    assert "max flow" in d["bisection_method"]
    assert d["bisection_bandwidth"] == pytest.approx(formula / 2)
    h = tp.rail_optimized(nodes=2)
    for _, _, e in h.edges(data=True):
        if e.get("tier") == "access":
            e["efficiency"] = float("nan")
    with pytest.raises(tp.TopologyError, match="efficiency must be a fraction"):
        tp.validate_edited(h)
    # where no efficiency was (a CPU socket link), and a technology set to None (review24)
    p = tp.rail_optimized(2, server="pcie_8gpu")
    p.edges["s0/cpu0", "s0/cpu1"]["efficiency"] = float("nan")
    with pytest.raises(tp.TopologyError, match="efficiency must be a fraction"):
        tp.validate_edited(p)
    q = tp.rail_optimized(2)
    u, v = next((u, v) for u, v, t in q.edges(data="tier") if t == "access")
    q.edges[u, v]["tech"] = None
    with pytest.raises(tp.TopologyError, match="tech must be a string"):
        tp.validate_edited(q)
