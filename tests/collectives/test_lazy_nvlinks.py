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


def test_describe_outside_a_block_reads_the_graphs_index_a_bounded_number_of_times(monkeypatch):
    """review25 F1: each server group's egress looked the routing index up, and outside an
    unchanged block each look-up hashes the whole graph: describe on 8,192 GPUs went from 0.37 s
    to 37.7 s (73 signature passes on 64 servers, 8 before). The count must not grow with the
    servers of the layout."""
    from flowsolver.collectives._hardware import describe
    from flowsolver.collectives._layout import participants
    from flowsolver.routing import _cache
    counts = []
    for nodes in (4, 32):
        g = tp.rail_optimized(nodes)
        ranks, layout = participants(g, "all_reduce", None, None)
        describe(g, ranks, layout)
        passes = []
        real = _cache._signature
        monkeypatch.setattr(_graph_index, "_signature", lambda graph: passes.append(1) or real(graph))
        describe(g, ranks, layout)
        monkeypatch.setattr(_graph_index, "_signature", real)
        counts.append(len(passes))
    assert counts[0] == counts[1] <= 10, counts
