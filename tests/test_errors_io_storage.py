import json

import networkx as nx
import pytest

import topologies as tp
from topologies import TopologyError

from .helpers import kind_count


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("call,match", [
    (lambda: tp.fat_tree(5), r"k must be even"),
    (lambda: tp.fat_tree(2), r"k must be an integer >= 4"),
    (lambda: tp.fat_tree(4.0), r"k must be an integer"),
    (lambda: tp.fat_tree(-4), r"k must be an integer >= 4"),
    (lambda: tp.fat_tree(4, link="ndr"), r"link: unknown link technology 'ndr'.*ib_ndr"),
    (lambda: tp.fat_tree(4, server="dgx"), r"unknown server 'dgx'.*dgx_h100"),
    (lambda: tp.leaf_spine(0, 2, 8), r"leaves must be an integer >= 1"),
    (lambda: tp.leaf_spine(2, 0, 8), r"spines must be an integer >= 1"),
    (lambda: tp.leaf_spine(2, 2, -1), r"hosts_per_leaf must be an integer >= 1"),
    (lambda: tp.leaf_spine(2, 2, 8, oversubscription=0.5), r"oversubscription must be .*>= 1"),
    (lambda: tp.rail_optimized(0), r"nodes must be an integer >= 1"),
    (lambda: tp.rail_optimized(4, oversubscription=float("nan")), r"oversubscription"),
    (lambda: tp.rail_optimized(4, link="ib_qdr"), r"link: unknown link technology"),
    (lambda: tp.dragonfly(0, 4, 2), r"p must be an integer >= 1"),
    (lambda: tp.dragonfly(2, 4, 2, g=10), r"g must be between 2 and a\*h \+ 1 = 9"),
    (lambda: tp.dragonfly(2, 4, 2, g=4), r"g - 1 must divide a\*h = 8.*allowed g: \[2, 3, 5, 9\]"),
    (lambda: tp.dragonfly(2, 4, 2, arrangement="random"), r"arrangement must be one of"),
    (lambda: tp.torus((4, 1)), r"dims must be .*integers >= 2"),
    (lambda: tp.torus((0, 4)), r"dims must be"),
    (lambda: tp.torus(()), r"dims must be"),
    (lambda: tp.torus(4), r"dims must be a sequence"),
    (lambda: tp.add_storage(tp.torus((3, 3)), network="compute"), r"needs a switched compute fabric"),
    (lambda: tp.add_storage(tp.fat_tree(4), network="san"), r"network must be one of"),
    (lambda: tp.add_storage(tp.fat_tree(4), 0), r"count must be an integer >= 1"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _pair():
    g = nx.DiGraph()
    g.add_node("a", kind="gpu")
    g.add_node("b", kind="gpu")
    g.add_edge("a", "b", capacity=50e9)
    g.add_edge("b", "a", capacity=50e9)
    return g


def test_validate_rejects_bad_user_graphs():
    g = _pair()
    g.add_node("c", kind="gpu")
    with pytest.raises(TopologyError, match="node 'c': this GPU has no links"):
        tp.validate(g)
    g = _pair()
    g.add_node("x", kind="router")
    with pytest.raises(TopologyError, match="node 'x': kind must be one of gpu, nic"):
        tp.validate(g)
    g = _pair()
    g["a"]["b"]["capacity"] = -1.0
    with pytest.raises(TopologyError, match="edge 'a' -> 'b': capacity must be"):
        tp.validate(g)
    g = _pair()
    g.remove_edge("b", "a")
    with pytest.raises(TopologyError, match="edge 'a' -> 'b' has no reverse"):
        tp.validate(g)
    g = _pair()
    g["b"]["a"]["latency"] = float("inf")
    with pytest.raises(TopologyError, match="latency"):
        tp.validate(g)
    with pytest.raises(TopologyError, match="no node of kind 'gpu'"):
        tp.validate(nx.DiGraph())
    with pytest.raises(TopologyError, match="DiGraph"):
        tp.validate(nx.Graph())
    assert issubclass(TopologyError, ValueError)
    # a failed link (capacity 0) is valid
    g = _pair()
    g["a"]["b"]["capacity"] = 0.0
    assert tp.validate(g) is g


# ---------------------------------------------------------------- save / load
@pytest.mark.parametrize("build", [lambda: tp.rail_optimized(33), lambda: tp.dragonfly(2, 4, 2),
                                   lambda: tp.torus((2, 3, 4))])
def test_node_link_json_round_trip(tmp_path, build):
    g = build()
    path = tp.save(g, tmp_path / "g.json")
    assert "edges" in json.loads(path.read_text())
    back = tp.load(path)
    assert isinstance(back, nx.DiGraph)
    assert dict(back.nodes(data=True)) == dict(g.nodes(data=True))
    assert {(u, v): d for u, v, d in back.edges(data=True)} == {(u, v): d for u, v, d in g.edges(data=True)}
    assert back.graph == g.graph
    assert tp.describe(back) == tp.describe(g)


def test_load_accepts_the_older_links_key(tmp_path):
    g = tp.fat_tree(4)
    data = nx.node_link_data(g, edges="links")
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert tp.load(tmp_path / "old.json").number_of_edges() == g.number_of_edges()


def test_load_validates(tmp_path):
    g = _pair()
    g.remove_edge("b", "a")
    (tmp_path / "bad.json").write_text(json.dumps(nx.node_link_data(g, edges="edges")))
    with pytest.raises(TopologyError, match="no reverse"):
        tp.load(tmp_path / "bad.json")


# ---------------------------------------------------------------- storage
def test_frontend_storage_is_a_separate_network():
    g = tp.rail_optimized(64)
    before = tp.describe(g)
    ids = tp.add_storage(g, 4, link="eth_400g", network="frontend")
    assert ids == [f"storage{i}" for i in range(4)]
    assert kind_count(g, "storage") == 4 and kind_count(g, "nic", "frontend") == 64
    # storage reaches a server's host memory without crossing the compute fabric
    path = nx.shortest_path(g, "storage0", "s17/cpu0")
    assert path == ["storage0", "frontend/switch", "s17/fe_nic", "s17/cpu0"]
    # on a DGX the front end ends in host memory: no GPU is reachable from storage
    assert not any(g.nodes[n]["kind"] == "gpu" for n in nx.descendants(g, "storage0"))
    after = tp.describe(g)
    assert after["bisection_bandwidth"] == before["bisection_bandwidth"]
    assert after["bisection_method"] == before["bisection_method"]
    tp.validate(g)


def test_compute_storage_shares_the_compute_fabric():
    g = tp.fat_tree(4)
    tp.add_storage(g, 2, link="ib_ndr", network="compute")
    cores = [n for n, d in g.nodes(data=True) if d.get("role") == "core"]
    assert sum(g["storage/leaf"][c]["cables"] for c in cores if g.has_edge("storage/leaf", c)) == 2
    path = nx.shortest_path(g, "storage1", "s3/gpu0")
    assert path[-2] == "s3/nic0"  # GPUDirect Storage: in through the compute NIC
    assert any(g.nodes[n].get("role") == "core" for n in path)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(8 * 50e9)
    tp.validate(g)
