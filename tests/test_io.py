"""topologies.io: node-link JSON round trips, the older key, validation on load."""

import json

import networkx as nx
import pytest

import topologies as tp
from topologies import TopologyError

from .test_validate import _pair


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
