"""Arguments as users pass them: GPU node ids or NumPy integers as ranks, NumPy scalars for
sizes and counts, hand-built graphs checked by topologies.validate first."""

import networkx as nx
import numpy as np
import pytest

import topologies as tp
from flowsolver import collective, concurrent, training_step


@pytest.fixture(scope="module")
def two_servers():
    return tp.rail_optimized(nodes=2)


def test_ranks_as_node_ids_rank_integers_or_numpy_integers(two_servers):
    g = two_servers
    by_int = collective(g, "all_reduce", 2**26, ranks=range(4, 12), algorithm="ring")
    by_node = collective(g, "all_reduce", 2**26, ranks=tp.gpus(g)[4:12], algorithm="ring")
    by_numpy = collective(g, "all_reduce", 2**26, ranks=np.arange(4, 12), algorithm="ring")
    assert by_node.time == by_int.time == by_numpy.time
    every = collective(g, "all_gather", 2**24, ranks=tp.gpus(g), algorithm="ring")
    assert every.time == collective(g, "all_gather", 2**24, algorithm="ring").time


@pytest.mark.parametrize("ranks,match", [
    (["gpu0", "gpu1"], r"ranks\[0\] must be a GPU rank \(0 ... 15\) or a GPU node id of the graph .* got 'gpu0'"),
    ([0, 1.5], r"ranks\[1\] must be a GPU rank"),
    ([0, 16], r"ranks\[1\] = 16 is not a GPU rank of this graph \(0 ... 15\)"),
    ([0, True], r"ranks\[1\] must be a GPU rank or a GPU node id, got True"),
    ("s0/gpu0", r"ranks must be a sequence of GPU ranks or GPU node ids"),
])
def test_bad_ranks_name_the_entry(two_servers, ranks, match):
    with pytest.raises(ValueError, match=match):
        collective(two_servers, "all_reduce", 2**20, ranks=ranks)


def test_numpy_scalars_are_numbers(two_servers):
    g = two_servers
    plain = collective(g, "all_reduce", 2**26, algorithm="ring", channels=2)
    numpy = collective(g, "all_reduce", np.int64(2**26), algorithm="ring", channels=np.int64(2))
    assert numpy.time == plain.time
    assert collective(g, "all_reduce", np.float32(2**26), algorithm="ring", channels=2).time == plain.time
    a = training_step(g, model="llama-3-8b", tp=np.int64(8), dp=np.int64(2), global_batch=np.int64(16),
                      compute_efficiency=np.float64(0.4))
    b = training_step(g, model="llama-3-8b", tp=8, dp=2, global_batch=16, compute_efficiency=0.4)
    assert a.step_time == b.step_time
    with pytest.raises(ValueError, match=r"channels must be an integer in 1 ... 64, got 2.5"):
        collective(g, "all_reduce", 2**20, channels=2.5)
    with pytest.raises(ValueError, match=r"size must be a finite number of bytes > 0, got nan"):
        collective(g, "all_reduce", np.float64("nan"))


def hand_built(kind="gpu"):
    g = nx.DiGraph()
    for v in ("a", "b"):
        g.add_node(v, kind=kind)
    g.add_node("sw", kind="switch")
    for v in ("a", "b"):
        g.add_edge(v, "sw", capacity=50e9)
        g.add_edge("sw", v, capacity=50e9)
    return g


def test_hand_built_graphs_are_validated_first():
    assert collective(hand_built(), "all_reduce", 2**20).time > 0
    bad = hand_built(kind="GPU")
    for call in (lambda: collective(bad, "all_reduce", 2**20),
                 lambda: concurrent(bad, [dict(op="all_reduce", size=2**20)]),
                 lambda: training_step(bad, model="llama-3-8b")):
        with pytest.raises(tp.TopologyError, match=r"node 'a': kind must be one of .* got 'GPU'"):
            call()
    edited = tp.rail_optimized(nodes=1)
    edge = next(iter(edited.edges))
    edited.edges[edge]["capacity"] = -1.0          # an edit the fingerprint notices
    with pytest.raises(tp.TopologyError, match="capacity"):
        collective(edited, "all_reduce", 2**20)
    # an edited latency or cable count too: -1 ms on the NDR cables made a send across nodes faster
    for attr, value in (("latency", -1e-3), ("latency", float("nan")), ("cables", 0)):
        edited = tp.rail_optimized(nodes=2)
        for *_, d in edited.edges(data=True):
            if d.get("tech") == "ib_ndr":
                d[attr] = value
        with pytest.raises(tp.TopologyError, match=attr):
            collective(edited, "send_recv", 1024, ranks=[0, 8])
