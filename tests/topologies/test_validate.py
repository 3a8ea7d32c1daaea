"""topologies._validate: the schema check names the first offending node or edge."""

import networkx as nx
import pytest

import topologies as tp
from topologies import TopologyError


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
