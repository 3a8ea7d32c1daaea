"""rail_optimized with more rails a server than half a switch's ports (GB200 NVL72: 72 rails on
64-port switches; 8 rails on 8-port switches): a valid folded Clos or a clear error.

The Clos rules, checked on the built graph: the leaves and spines split into pods in which every
leaf is cabled to every spine; every spine is cabled to every core of its group; a core joins the
spines of at least two pods (else it lies on no shortest path); no switch uses more than its
radix ports. Counts and limits are derived here by hand from those rules."""

import networkx as nx
import pytest

import flowsolver as fs
import topologies as tp

NDR = 50e9          # InfiniBand NDR: 400 Gb/s = 50 GB/s a NIC (docs REFERENCE "Link technologies")


def _role(g, role):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("role") == role]


def _up(g, node, role):
    return {v for v in g[node] if g.nodes[v].get("role") == role}


def _check_clos(g, radix):
    """Assert the Clos rules; returns the pods (frozensets of spines)."""
    leaves, spines, cores = _role(g, "leaf"), _role(g, "spine"), _role(g, "core")
    # pods: the connected parts of the leaf-spine graph; in each, every leaf reaches every spine
    ls = nx.Graph((u, v) for u in leaves for v in _up(g, u, "spine"))
    pods = [frozenset(n for n in part if n in set(spines)) for part in nx.connected_components(ls)]
    pod_of = {s: i for i, pod in enumerate(pods) for s in pod}
    for leaf in leaves:
        reached = _up(g, leaf, "spine")
        assert reached == pods[pod_of[next(iter(reached))]], leaf
    # one pod: no core tier; several: every spine reaches every core of its group, and every core
    # joins spines of several pods
    assert bool(cores) == (len(pods) > 1)
    group = {c: g.nodes[c]["group"] for c in cores}
    for s in spines:
        ups = _up(g, s, "core")
        if cores:
            assert len({group[c] for c in ups}) == 1
            assert ups == {c for c in cores if group[c] == group[next(iter(ups))]}, s
    for c in cores:
        assert len({pod_of[s] for s in _up(g, c, "spine")}) == len(pods), c
    for n in leaves + spines + cores:
        assert sum(e["cables"] for e in g[n].values()) <= radix, n
    return pods


def _max_flow_between_halves(g):
    """Max flow from the first half of the GPU ranks to the second (networkx, edge capacities)."""
    h = nx.DiGraph()
    for u, v, d in g.edges(data=True):
        h.add_edge(u, v, capacity=d["capacity"])
    gpus = tp.gpus(g)
    for x in gpus[: len(gpus) // 2]:
        h.add_edge("source", x)
    for x in gpus[len(gpus) // 2:]:
        h.add_edge(x, "sink")
    return nx.maximum_flow_value(h, "source", "sink")


@pytest.mark.parametrize("nodes", [2, 16, 32])
def test_nvl72_rails_make_pods_of_24_leaves_under_cores(nodes):
    # 72 rails > 64/2: a spine reaches at most 32 leaves, so the unit's 72 leaves split into the
    # fewest equal groups of <= 32: 3 pods of 24. A leaf has `nodes` up; a pod's 24 x nodes
    # uplinks fill spines of 32 down: 24 * nodes / 32 spines a pod; 3 pods meet at the cores
    g = tp.rail_optimized(nodes, server="nvl72")
    pods = _check_clos(g, 64)
    assert len(pods) == 3 and {len(p) for p in pods} == {24 * nodes // 32 + (24 * nodes % 32 > 0)}
    assert len(_role(g, "leaf")) == 72
    # 16 servers: 36 spines (12 a pod), 32 up each; 3 x 32 cables a group over 64-port cores: 2
    if nodes == 16:
        assert (len(_role(g, "spine")), len(_role(g, "core"))) == (36, 12 * 2)
    # non-blocking: the cut between the halves of the racks is their NICs, 72 x 400G a rack
    assert _max_flow_between_halves(g) == nodes // 2 * 72 * NDR
    assert g.graph["bisection_bandwidth"] == nodes // 2 * 72 * NDR
    tp.validate(g)


def test_uneven_leaf_spreads_still_reach_every_core():
    # 8 rails on 12 ports: pods of 4 leaves of 4 uplinks over ceil(16 / 6) = 3 spines (2-1-1 a
    # leaf): spines of 5 or 6 cables down under 12 pods x 6 / 12 = 6 cores a group
    g = tp.rail_optimized(24, servers_per_unit=4, radix=12)
    assert len(_check_clos(g, 12)) == 6 * 2
    assert len(_role(g, "core")) == 3 * 6


def test_eight_rails_on_eight_port_switches_route_across_rails():
    # 8 rails > 8/2: 2 pods of 4 leaves a unit; 8-port cores hold 8 pods = 4 units of 2 servers
    g = tp.rail_optimized(8, servers_per_unit=2, radix=8)
    pods = _check_clos(g, 8)
    assert len(pods) == 4 * 2
    assert _max_flow_between_halves(g) == 4 * 8 * NDR
    # rail 0 of server 0 to rail 1 of server 1, and to rail 4 (the other pod), without PXN
    rm = fs.route(g, fs.Flows([0, 0], [8 + 1, 8 + 4], 1e6), pxn=False)
    assert rm.n_flows == 2


@pytest.mark.parametrize("kw,most", [(dict(nodes=16, servers_per_unit=2, radix=8), 8),
                                     (dict(nodes=2, server="nvl72", radix=8), 1),
                                     (dict(nodes=673, server="nvl72"), 21 * 32)])
def test_beyond_what_three_tiers_hold_is_an_error(kw, most):
    # 8 rails, radix 8: 2 pods a unit, 8 pods a core -> 4 units of 2. 72 rails, radix 8: 18 pods
    # of 4 leaves a unit, more than 8 cores' ports: not one unit (a single server needs no
    # switch). 72 rails, radix 64: 3 pods a unit, 64 // 3 = 21 units of 32
    with pytest.raises(ValueError, match=rf"nodes must be at most {most} for rail_optimized with "
                                         rf"radix={kw.get('radix', 64)}, .* pods .*got {kw['nodes']}"):
        tp.rail_optimized(**kw)
    server = kw.get("server", "dgx_h100")
    limit = tp.rail_optimized_limit(server=server, servers_per_unit=kw.get("servers_per_unit", 32),
                                    radix=kw.get("radix", 64))
    assert limit == (most if most > 1 else 0)
    if server == "nvl72":
        with pytest.raises(ValueError, match="nvl72_cluster"):
            tp.rail_optimized(**kw)


def test_one_unit_of_at_most_radix_rails_stays_two_tier():
    # 8 rails on 8 ports, one unit: every spine reaches the 8 leaves; no cores
    g = tp.rail_optimized(2, servers_per_unit=2, radix=8)
    assert _check_clos(g, 8) and not _role(g, "core") and g.graph["params"]["tiers"] == 2


@pytest.mark.parametrize("nodes", [32 * 12, 32 * 32])
def test_the_superpod_layout_keeps_the_same_rules(nodes):
    # DGX H100 (8 rails <= 32): 12 units, one pod each; 32 units (B200 RA: 256 leaves, 256
    # spines, 128 cores)
    pods = _check_clos(tp.rail_optimized(nodes), 64)
    assert len(pods) == nodes // 32
