"""A tuned result's NVLink links (for its derivatives) are found when a derivative asks, from the
GPUs and edge index taken while the call held the graph: finding them reads no graph index again
(each look-up outside the call hashes the whole graph: a 16,384-rank goodput study spent 130 s so),
and they are the links the eager code found, every group's GPUs' NVLinks to and from their switch."""

import topologies as tp
from flowsolver import collective
from flowsolver.collectives._hardware import nvlink_edges
from flowsolver.collectives._layout import edge_index
from flowsolver.routing import _graph_index


def test_the_nvlinks_are_found_later_without_the_graphs_index(monkeypatch):
    g = tp.rail_optimized(2)
    r = collective(g, "all_reduce", 2**30, algorithm="nvls_tree")
    looked = []
    real = _graph_index.GraphIndex.of.__func__
    monkeypatch.setattr(_graph_index.GraphIndex, "of", classmethod(lambda cls, graph: looked.append(1) or
                                                                   real(cls, graph)))
    found = r.solved_on.tuned.nvlinks()
    assert not looked
    index = edge_index(g)
    expected = {index[e] for e in nvlink_edges(g, tp.gpus(g))}
    assert set(found) == expected and len(found) == 2 * 16          # 16 GPUs, one NVLink edge each way
