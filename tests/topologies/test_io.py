"""topologies.formats.node_link: node-link JSON round trips, the older key, validation on load."""

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


@pytest.mark.parametrize("items", [3, 7])
def test_a_file_saved_with_an_older_fingerprint_is_still_unedited(tmp_path, items):
    # files saved before the fingerprint held latency and cable sums store 3 items, before it held
    # the sums of squares, efficiencies, technologies and edges' hash 7: a load that finds those
    # equal keeps the graph as generated (describe()'s formulas, no re-validation)
    g = tp.fat_tree(4)
    path = tp.save(g, tmp_path / "old.json")
    data = json.loads(path.read_text())
    data["graph"]["fingerprint"] = data["graph"]["fingerprint"][:items]
    path.write_text(json.dumps(data))
    back = tp.load(path)
    assert back.graph["fingerprint"] == tp.fingerprint(g) and tp.describe(back) == tp.describe(g)


def test_the_fingerprint_does_not_depend_on_the_edge_order():
    # a subgraph's edge order follows Python's hashing: the sums must not (math.fsum, exactly rounded)
    g = tp.rail_optimized(2)
    edges = list(g.edges(data=True))
    shuffled = nx.DiGraph()
    shuffled.add_nodes_from(g.nodes(data=True))
    shuffled.add_edges_from(edges[::-1])
    shuffled.graph.update(g.graph)
    assert tp.fingerprint(shuffled) == tp.fingerprint(g)


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


# -- bad files: one clear error naming the file (issue 27) ---------------------------------
from ..reader_checks import raises_clearly  # noqa: E402


@pytest.mark.parametrize("text,expected", [
    ("[1, 2]", "a JSON object"),
    ('"a string"', "a JSON object"),
    ('{"directed": true}', '"nodes"'),
    ('{"nodes": {}, "edges": []}', '"nodes"'),
    ('{"nodes": [], "edges": 3}', '"edges"'),
    ('{"nodes": [1], "edges": []}', "node 0"),
    ('{"nodes": [{"id": {"a": 1}}], "edges": []}', "node 0"),
    ('{"nodes": [{"id": "a", "kind": "gpu"}], "edges": [{"source": "a"}]}', "edge 0"),
    ('{"nodes": [], "edges": [], "graph": [1]}', '"graph"'),
    ("[" * 100_000 + "]" * 100_000, "nested"),
    ('{"nodes": [}', "not JSON"),
    ('{"nodes": [], "edges": []} x', "not JSON"),
    # networkx merges a node or an edge given twice (the last wins: a GPU became a NIC, a cable was
    # dropped) and json keeps a key's last value: each is an error naming it
    ('{"nodes": [{"id": "g1", "kind": "gpu"}, {"id": "g1", "kind": "nic"}], "edges": []}', "node 1: the id"),
    ('{"nodes": [{"id": ["s", 1]}, {"id": ["s", 1]}], "edges": []}', "given twice"),
    ('{"nodes": [{"id": "a"}, {"id": "b"}], "edges": [{"source": "a", "target": "b", "capacity": 5e10}, '
     '{"source": "a", "target": "b", "capacity": 5e9}]}', "edge 1: 'a' -> 'b' is given twice"),
    ('{"nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "a", "capacity": 5e10, "capacity": 5}]}',
     "'capacity' appears twice"),
    ('{"nodes": [], "edges": [], "links": []}', 'both "edges" and "links"'),
])
def test_bad_json_is_one_clear_error_naming_the_file(tmp_path, text, expected):
    path = tmp_path / "g.json"
    path.write_text(text)
    raises_clearly(tp.load, path, expected)


def test_missing_file_and_non_utf8_bytes_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.json: no such file"):
        tp.load(tmp_path / "absent.json")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        tp.load(tmp_path)
    path = tmp_path / "bytes.json"
    path.write_bytes(b'{"nodes": [{"id": "\xff"}], "edges": []}')
    raises_clearly(tp.load, path, "UTF-8")


def test_schema_errors_name_the_file_and_the_edge(tmp_path):
    """An infinite capacity (JSON's 1e400) or a 400-digit integer: the validator's message,
    prefixed with the file."""
    g = _pair()
    data = nx.node_link_data(g, edges="edges")
    text = json.dumps(data).replace('"capacity": 50000000000.0', '"capacity": 1e400', 1)
    path = tmp_path / "inf.json"
    path.write_text(text)
    err = raises_clearly(tp.load, path, "capacity", "'a' -> 'b'")
    assert isinstance(err, TopologyError)
    path.write_text(json.dumps(data).replace('"capacity": 50000000000.0', '"capacity": ' + "9" * 400, 1))
    raises_clearly(tp.load, path, "capacity")


def test_the_byte_limit_is_checked_before_reading(tmp_path):
    path = tp.save(tp.torus((2, 2)), tmp_path / "t.json")
    size = path.stat().st_size
    assert tp.load(path, max_bytes=size).number_of_nodes() == tp.torus((2, 2)).number_of_nodes()
    raises_clearly(lambda p: tp.load(p, max_bytes=size - 1), path, "max_bytes", str(size - 1))
    with pytest.raises(ValueError, match="max_bytes"):
        tp.load(path, max_bytes=0)


def test_tuple_node_ids_survive_the_round_trip(tmp_path):
    """JSON writes a tuple id as a list; load reads it back as the tuple (the checks on ids
    accept flat lists of strings and numbers)."""
    g = nx.DiGraph()
    g.add_node(("gpu", 0), kind="gpu")
    g.add_node(("gpu", 1), kind="gpu")
    g.add_edge(("gpu", 0), ("gpu", 1), capacity=50e9)
    g.add_edge(("gpu", 1), ("gpu", 0), capacity=50e9)
    back = tp.load(tp.save(g, tmp_path / "t.json"))
    assert set(back.nodes) == {("gpu", 0), ("gpu", 1)} and back[("gpu", 0)][("gpu", 1)]["capacity"] == 50e9


@pytest.mark.parametrize("bad", [float("nan"), -1.0, 7.5])
def test_a_file_s_link_efficiency_must_be_a_fraction(tmp_path, bad):
    # a NaN efficiency read from a file turned NVLS off silently; 7.5 failed only at the first collective
    import json
    path = tmp_path / "g.json"
    tp.save(tp.rail_optimized(nodes=1), path)
    data = json.loads(path.read_text())
    edge = next(e for e in data["edges"] if e.get("tech") == "nvlink4")
    edge["efficiency"] = bad
    path.write_text(json.dumps(data))
    with pytest.raises(tp.TopologyError, match=r"g\.json: edge .* efficiency must be a fraction in \(0, 1\]"):
        tp.load(path)


def test_a_file_s_edited_formula_is_not_reported_as_the_formula_s(tmp_path):
    # the fingerprint covered counts and sums only: a bisection edited in the file was trusted
    import json
    path = tmp_path / "ft.json"
    tp.save(tp.fat_tree(4), path)
    data = json.loads(path.read_text())
    data["graph"]["bisection_bandwidth"] = 1e30
    path.write_text(json.dumps(data))
    d = tp.describe(tp.load(path))
    assert d["bisection_bandwidth"] == pytest.approx(16 / 2 * 50e9)   # 8 host NICs of NDR each way
