"""Our writer: the file format checked against the independent wire encoder (the round
trip of a training step is in test_traces_roundtrip.py)."""

import re

import pytest

pytest.importorskip("google.protobuf")

from flowsolver.traces import RankTrace, TraceNode, build_workload, read_chakra, write_chakra  # noqa: E402

from .. import chakra_wire as cw  # noqa: E402


def test_the_written_files_are_the_schema_s_bytes(tmp_path):
    a = RankTrace(0, [TraceNode(5, "mm", "compute", duration=1.5e-3, flops=2e12),
                      TraceNode(9, "ar", "collective", deps=(5,), op="all_reduce", bytes=4096, group="1")])
    b = RankTrace(1, [TraceNode(0, "ar", "collective", op="all_reduce", bytes=4096, group="1")])
    write_chakra(build_workload([a, b], {"1": (0, 1)}), tmp_path)
    expected = cw.stream([
        cw.metadata("0.0.4"),
        cw.node(0, "mm", cw.COMP, duration_us=1500, attrs=[cw.attr("is_cpu_op", boolean=False),
                                                          cw.attr("num_ops", int64=2 * 10**12)]),
        cw.node(1, "ar", cw.COLL, data_deps=(0,), attrs=[cw.attr("is_cpu_op", boolean=False),
                                                          cw.attr("comm_type", int64=cw.ALL_REDUCE),
                                                          cw.attr("comm_size", int64=4096),
                                                          cw.attr("pg_name", string="1")])])
    assert (tmp_path / "trace.0.et").read_bytes() == expected
    assert (tmp_path / "comm_group.json").read_text() == '{"1": [0, 1]}'


def test_durations_round_without_drifting(tmp_path):
    nodes = [TraceNode(i, f"k{i}", "compute", deps=(i - 1,) if i else (), duration=0.4e-6) for i in range(1000)]
    write_chakra(build_workload([RankTrace(0, nodes)]), tmp_path)
    back = read_chakra(tmp_path).ranks[0].nodes
    assert sum(n.duration for n in back) == pytest.approx(400e-6, abs=0.5e-6)


@pytest.mark.parametrize("kernel, cpu", [(0.6e-6, 0.4e-6), (0.4e-6, 0.6e-6)])
def test_rounding_does_not_add_up_along_a_chain_with_nodes_beside_it(tmp_path, kernel, cpu):
    # 1,000 chained kernels, a CPU delay node beside each (adv18b finding 1): rounding a running
    # sum over the whole node list wrote every kernel as 1 us and every delay as 0 (or the other
    # way round), 600 us read back as 1,000 us (400 us as 1 us). The chain is 1,000 x the kernel,
    # the longest delay alone: 600 (400) us, each written finish within 0.5 us of the exact one.
    import topologies as tp
    from flowsolver.traces import replay
    nodes = []
    for i in range(1000):
        nodes += [TraceNode(2 * i + 1, "k", "compute", duration=kernel, deps=(2 * i - 1,) if i else ()),
                  TraceNode(2 * i + 2, "d", "delay", duration=cpu)]
    write_chakra(build_workload([RankTrace(0, nodes)]), tmp_path)
    back = read_chakra(tmp_path).ranks[0].nodes
    assert sum(n.duration for n in back if n.kind == "compute") == pytest.approx(1000 * kernel, abs=0.5e-6)
    assert max(n.duration for n in back if n.kind == "delay") <= cpu + 0.5e-6
    assert replay(tp.rail_optimized(1), read_chakra(tmp_path)).iteration_time == \
        pytest.approx(1000 * kernel, abs=1e-6)


def test_rounding_does_not_add_up_along_a_chain_of_kernels_and_cpu_ops(tmp_path):
    # kernel (1.0 us) -> CPU op (0.4 us) -> kernel -> ...: the chain is 1,400 us; rounding each
    # CPU op on its own (round(0.4) = 0) would lose 400 us of it
    nodes = []
    for i in range(1000):
        nodes += [TraceNode(2 * i, "k", "compute", duration=1e-6, deps=(2 * i - 1,) if i else ()),
                  TraceNode(2 * i + 1, "d", "delay", duration=0.4e-6, deps=(2 * i,))]
    write_chakra(build_workload([RankTrace(0, nodes)]), tmp_path)
    assert sum(n.duration for n in read_chakra(tmp_path).ranks[0].nodes) == pytest.approx(1400e-6, abs=0.5e-6)


def test_rounding_follows_dependencies_not_the_node_order(tmp_path):
    # the same chain of 0.4 us kernels listed last to first (node k waits for node k + 1)
    nodes = [TraceNode(i, f"k{i}", "compute", deps=(i + 1,) if i < 999 else (), duration=0.4e-6) for i in range(1000)]
    write_chakra(build_workload([RankTrace(0, nodes)]), tmp_path)
    assert sum(n.duration for n in read_chakra(tmp_path).ranks[0].nodes) == pytest.approx(400e-6, abs=0.5e-6)


def test_a_node_under_half_a_microsecond_keeps_its_time(tmp_path):
    # ten 0.4 us nodes of 1 GFLOP: every other one is written as 0 us, and with its FLOPs a
    # reader timed it from them (17.2 us in all for the 4 us written)
    import topologies as tp
    from flowsolver.traces import replay
    w = build_workload([RankTrace(0, [TraceNode(i, f"c{i}", "compute", deps=(i - 1,) if i else (), duration=0.4e-6,
                                                flops=1e9) for i in range(10)])])
    write_chakra(w, tmp_path)
    g = tp.rail_optimized(1)
    assert replay(g, read_chakra(tmp_path)).iteration_time == pytest.approx(replay(g, w).iteration_time, abs=0.5e-6)


INT64_MAX = 9223372036854775807            # 2**63 - 1: AttributeProto's int64_val (comm_size, num_ops, comm_tag)


@pytest.mark.parametrize("node, said", [
    # a collective is on both ranks: rank 0's is the first named
    (TraceNode(7, "ar", "collective", op="all_reduce", bytes=1e20),
     "rank 0, node 7 ('ar'): bytes 1e+20 does not fit Chakra's comm_size (an int64: 100000000000000000000 is not in "
     f"{-INT64_MAX - 1} ... {INT64_MAX})"),
    (TraceNode(7, "mm", "compute", duration=1e-3, flops=1e30),
     "rank 1, node 7 ('mm'): flops 1e+30 does not fit Chakra's num_ops (an int64: 1000000000000000019884624838656 is "
     "not in"),
    # 2e13 s = 2e19 us, more than 2**64 - 1 = 1.8e19: beyond duration_micros, a uint64
    (TraceNode(7, "wait", "delay", duration=2e13),
     "rank 1, node 7 ('wait'): duration 20000000000000.0 s does not fit Chakra's duration_micros (a uint64: "
     f"20000000000000000000 us is not in 0 ... {2**64 - 1})"),
])
def test_a_value_a_chakra_field_cannot_hold_names_its_rank_node_and_field(tmp_path, node, said):
    ok = TraceNode(1, "fine", "collective", op="all_reduce", bytes=2.0**62)       # 4.6e18 bytes: fits an int64
    other = node if node.kind == "collective" else TraceNode(7, "mm", "compute", duration=1e-3)
    folder = tmp_path / "out"
    with pytest.raises(ValueError, match="^write_chakra: " + re.escape(said)):
        write_chakra(build_workload([RankTrace(0, [ok, other]), RankTrace(1, [ok, node])]), folder)
    assert not folder.exists()                                   # refused before anything is written
    write_chakra(build_workload([RankTrace(r, [ok]) for r in (0, 1)]), folder)
    assert read_chakra(folder).comms[0].bytes == 2.0**62


def test_a_collective_chakra_has_no_type_for_is_refused_naming_it(tmp_path):
    # a collective node of op send_recv reached a bare KeyError: 'send_recv'
    w = build_workload([RankTrace(r, [TraceNode(1, "x", "collective", op="send_recv", bytes=2**20)]) for r in range(2)])
    with pytest.raises(ValueError, match="rank 0, node 1 .'x'.: Chakra has no collective type for op 'send_recv'"):
        write_chakra(w, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_hand_built_workload_with_a_broken_dag_is_refused_before_writing(tmp_path):
    """A Workload built directly (not by build_workload, which checks it): a dependency on a
    node not in the trace and a cycle are TraceErrors naming the node, no file written."""
    from flowsolver.traces import TraceError, Workload
    missing = Workload([RankTrace(0, [TraceNode(0, "k", "compute", deps=(5,), duration=1e-6)])], {})
    cycle = Workload([RankTrace(0, [TraceNode(0, "a", "compute", deps=(1,), duration=1e-6),
                                    TraceNode(1, "b", "compute", deps=(0,), duration=1e-6)])], {})
    for w, said in ((missing, "depends on node 5"), (cycle, "cycle")):
        out = tmp_path / said.replace(" ", "_")
        with pytest.raises(TraceError, match=said):
            write_chakra(w, out)
        assert not out.exists()
