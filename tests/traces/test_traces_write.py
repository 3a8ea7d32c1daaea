"""Our writer: the file format checked against the independent wire encoder (the round
trip of a training step is in test_traces_roundtrip.py)."""

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
