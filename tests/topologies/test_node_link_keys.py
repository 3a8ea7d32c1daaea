"""topologies.load refuses a node-link file whose nodes or edges lack the schema's required
keys before any graph is built, and its default size limit bounds the memory."""

import time

import pytest

import topologies as tp
from topologies.formats import node_link


def _no_graph_built(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("node_link_graph was called: the graph was built before the refusal")
    monkeypatch.setattr(node_link.nx, "node_link_graph", refuse)


def test_many_nodes_without_a_kind_refused_before_a_graph_is_built(tmp_path, monkeypatch):
    # the tester's file had 1,000,000 nodes '{"id": i}' (13 MiB: 632 MB, 12 s before the
    # validator refused node 0); 100,000 here
    p = tmp_path / "nodes.json"
    p.write_text('{"nodes":[' + ",".join('{"id":%d}' % i for i in range(100_000)) + '],"edges":[]}')
    _no_graph_built(monkeypatch)
    t = time.perf_counter()
    with pytest.raises(tp.TopologyError, match=r"node 0: kind must be one of gpu, .* got no kind"):
        tp.load(p)
    assert time.perf_counter() - t < 5.0       # json.loads and one walk (~0.2 s), no graph


@pytest.mark.parametrize("text, message", [
    ('{"nodes":[{"id":"a","kind":"gpu"},{"id":"b","kind":"router"}],"edges":[]}',
     r"node 'b': kind must be one of .* got 'router'"),
    ('{"nodes":[{"id":"a","kind":"nic"},{"id":"b","kind":"switch"}],"edges":[]}', "no node of kind 'gpu'"),
    ('{"nodes":[{"id":"a","kind":"gpu"},{"id":"b","kind":"gpu"}],"edges":[{"source":"a","target":"b"},'
     '{"source":"b","target":"a","capacity":5e10}]}', r"edge 'a' -> 'b': capacity must be .* got no capacity"),
])
def test_missing_required_keys_are_named_before_a_graph_is_built(tmp_path, monkeypatch, text, message):
    p = tmp_path / "g.json"
    p.write_text(text)
    _no_graph_built(monkeypatch)
    with pytest.raises(tp.TopologyError, match=message) as err:
        tp.load(p)
    assert str(err.value).startswith(str(p))


def test_a_good_file_still_loads():
    import os
    import tempfile
    g = tp.fat_tree(4)
    back = tp.load(tp.save(g, os.path.join(tempfile.mkdtemp(), "f.json")))
    assert (back.number_of_nodes(), back.number_of_edges()) == (g.number_of_nodes(), g.number_of_edges())
    assert dict(back.nodes(data="kind")) == dict(g.nodes(data="kind"))


def test_default_limit_is_sized_to_the_memory_budget():
    # ~30x the file in the worst case measured (tiny nodes): the default keeps it near 1.5 GB
    assert node_link.MAX_JSON_BYTES * 30 <= 1.6e9
    # and still reads meta_24k's 24,576 GPUs (37 MiB saved)
    assert node_link.MAX_JSON_BYTES >= 37 * 2**20
