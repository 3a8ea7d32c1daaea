"""rail_optimized's partial last unit: its leaves, fewer uplinks than spines, share spines as a
full unit's do (adv17d F5: laid end to end they shared none, 25 of 28 leaf pairs at 33 DGX, so
the graph's diameter was 6 where describe() said 4, and ECMP went down through a full unit's
leaf and up again). Counts worked by hand: DGX H100, 8 rails, units of 32 servers at 1:1."""

import itertools

import networkx as nx
import pytest

import flowsolver as fs
import topologies as tp


def _role(g, role):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("role") == role]


def _spines_of(g, leaf):
    return {v for v in g.successors(leaf) if g.nodes[v].get("role") == "spine"}


@pytest.mark.parametrize("nodes, spines", [
    (33, 5),    # 8 x 32 + 8 x 1 = 264 uplinks / 64 -> 5
    (34, 5),    # 256 + 16 = 272 / 64 -> 5
    (65, 9),    # 512 + 8 = 520 / 64 -> 9
    (100, 13),  # 768 + 8 x 4 = 800 / 64 -> 13
])
def test_partial_unit_leaves_share_a_spine(nodes, spines):
    g = tp.rail_optimized(nodes)
    assert len(_role(g, "spine")) == spines
    leaves = _role(g, "leaf")
    for a, b in itertools.combinations(leaves, 2):
        assert _spines_of(g, a) & _spines_of(g, b), (a, b)
    for s in _role(g, "spine"):
        assert sum(g[s][v]["cables"] for v in g.successors(s)) <= 64
    # leaf - spine - leaf: 4 hops NIC to NIC, by breadth-first search over the fabric
    fabric = g.subgraph(v for v, d in g.nodes(data=True) if d["kind"] in ("nic", "switch")).to_undirected()
    nics = [v for v, d in g.nodes(data=True) if d["kind"] == "nic"]
    assert max(max(d for t, d in nx.single_source_shortest_path_length(fabric, n).items() if t in set(nics))
               for n in nics[-16:]) == 4 == tp.describe(g)["network_diameter"]


def test_partial_unit_routes_stay_in_the_unit():
    # 34 DGX: GPU 0 of server 32 (rank 256, rail 0) to GPU 1 of server 33 (rank 265, rail 1),
    # no PXN: up su1/leaf0, over a spine, down su1/leaf1; no full-unit leaf carries it
    g = tp.rail_optimized(34)
    rm = fs.route(g, fs.Flows([256], [265], 1e9))
    edges = list(g.edges())
    links, _ = rm.column(0)
    switches = {v for i in links for v in edges[i] if g.nodes[v]["kind"] == "switch"}
    assert {v for v in switches if g.nodes[v].get("role") == "leaf"} == {"su1/leaf0", "su1/leaf1"}


def test_three_tier_partial_unit_leaves_share_a_spine():
    # 289 DGX: 9 units + 1 server, three tiers; the partial unit su9 has its own 8 spines
    # (8 leaves x 32 uplinks / 32 down ports) and its leaves, 1 uplink each, share one
    g = tp.rail_optimized(289)
    part = [f"su9/leaf{r}" for r in range(8)]
    assert len({frozenset(_spines_of(g, leaf)) for leaf in part}) == 1
    assert len([s for s in _role(g, "spine") if s.startswith("su9/")]) == 8
