"""Which policies route around failed links and which refuse (adv17d F4): docs/concepts.md
names every policy in one of the two lists, and each list holds on failed fabrics."""

import pathlib
import re

import networkx as nx
import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.routing import RoutingError

ROUTE_AROUND = ("ecmp", "ecmp_hash", "shortest")
REFUSE = ("minimal", "valiant", "ugal", "dor")
CONCEPTS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "concepts.md"


def _fail(g, pick):
    """``g`` with every edge (both directions) that ``pick(u, v, data)`` selects at capacity 0."""
    h = g.copy()
    for u, v, d in h.edges(data=True):
        if pick(u, v, d):
            d["capacity"] = 0.0
    return h


def _group_of_gpu(g, gpu):
    return next(g.nodes[m]["group"] for m in nx.bfs_tree(g, gpu, depth_limit=3)
                if g.nodes[m].get("kind") == "switch")


def _df_without_global_0_1():
    """dragonfly(2, 4, 2) (Kim et al.'s balanced p = h = 2, a = 4: 9 groups, one global cable
    per pair) with the one cable between groups 0 and 1 failed; a GPU of each."""
    g = tp.dragonfly(2, 4, 2)
    h = _fail(g, lambda u, v, d: d["tier"] == "global" and {g.nodes[u]["group"], g.nodes[v]["group"]} == {0, 1})
    gpus = tp.gpus(h)
    src = next(i for i, n in enumerate(gpus) if _group_of_gpu(h, n) == 0)
    dst = next(i for i, n in enumerate(gpus) if _group_of_gpu(h, n) == 1)
    return h, src, dst


def test_docs_name_every_policy_as_routing_around_failures_or_refusing():
    assert set(ROUTE_AROUND) | set(REFUSE) == set(fs.POLICIES)
    text = CONCEPTS.read_text()
    para = re.search(r"^Failed links.*?(?=\n\n)", text, re.S | re.M).group(0)
    around = para.split("refuse", 1)[0]           # the policies that route around come first
    for p in ROUTE_AROUND:
        assert f"`{p}`" in around
    for p in REFUSE:
        assert f"`{p}`" in para
    assert "'shortest'" in para


@pytest.mark.parametrize("policy", ROUTE_AROUND)
def test_a_failed_global_cable_is_routed_through_a_third_group(policy):
    h, src, dst = _df_without_global_0_1()
    working = nx.DiGraph([(u, v) for u, v, d in h.edges(data=True) if d["capacity"] > 0])
    assert nx.has_path(working, tp.gpus(h)[src], tp.gpus(h)[dst])      # a detour exists
    rm = fs.route(h, fs.Flows([src], [dst], 1e9), policy)
    used = np.flatnonzero(rm.to_scipy("csr")[:, 0].toarray().ravel() > 0)
    groups = {h.nodes[rm.links.src[i]].get("group") for i in used} - {None}
    assert groups - {0, 1}                                      # through a third group
    assert all(h.edges[rm.links.src[i], rm.links.dst[i]]["capacity"] > 0 for i in used)
    assert fs.max_min_fair(rm).rates[0] > 0


@pytest.mark.parametrize("policy", ["minimal", "valiant", "ugal"])
def test_dragonfly_policies_refuse_a_missing_global_cable_naming_shortest(policy):
    h, src, dst = _df_without_global_0_1()
    with pytest.raises(RoutingError, match="no working global cable between groups 0 and 1.*'shortest'"):
        fs.route(h, fs.Flows([src], [dst], 1e9), policy, seed=1)


@pytest.mark.parametrize("policy", ["minimal", "valiant", "ugal"])
def test_dragonfly_policies_refuse_a_failed_local_cable_naming_shortest(policy):
    g = tp.dragonfly(2, 4, 2)
    h = _fail(g, lambda u, v, d: {u, v} == {"g3/r1", "g3/r2"})
    gpus = tp.gpus(h)
    with pytest.raises(RoutingError, match="'g3/r1' -> 'g3/r2'.*policy 'shortest'"):
        fs.route(h, fs.Flows.all_to_all(len(gpus), 1e6), policy)
    fs.route(h, fs.Flows.all_to_all(len(gpus), 1e6), "ecmp")     # routed around


def test_minimal_uses_the_other_global_cable_of_two_groups():
    g = tp.dragonfly(2, 2, 3, g=4)          # two global cables per pair of groups
    assert g.graph["params"]["cables_per_group_pair"] == 2
    cables = [(u, v) for u, v, d in g.edges(data=True)
              if d["tier"] == "global" and (g.nodes[u]["group"], g.nodes[v]["group"]) == (0, 1)]
    assert len(cables) == 2
    dead = cables[0]
    h = _fail(g, lambda u, v, d: {u, v} == set(dead))
    gpus = tp.gpus(h)
    src = next(i for i, n in enumerate(gpus) if _group_of_gpu(h, n) == 0)
    dst = next(i for i, n in enumerate(gpus) if _group_of_gpu(h, n) == 1)
    rm = fs.route(h, fs.Flows([src], [dst], 1e9), "minimal")
    col = rm.to_scipy("csr")[:, 0].toarray().ravel()
    on = {(rm.links.src[i], rm.links.dst[i]): col[i] for i in np.flatnonzero(col > 0)}
    assert dead not in on and on[cables[1]] == pytest.approx(1.0)


def test_dor_refuses_a_failed_torus_link_naming_shortest():
    g = _fail(tp.torus((4, 4)), lambda u, v, d: {u, v} == {"n0_0", "n1_0"})
    n = len(tp.gpus(g))
    with pytest.raises(RoutingError, match="'n0_0' -> 'n1_0'.*policy 'shortest'"):
        fs.route(g, fs.Flows.all_to_all(n, 1e6), "dor")
    for policy in ROUTE_AROUND:
        fs.route(g, fs.Flows.all_to_all(n, 1e6), policy)
