"""Chakra traces read from files built message by message (tests/chakra_wire.py, written
from the protobuf wire format, not by our writer), replayed on cluster graphs; every
bad-trace error."""

import json
import re

import pytest

pytest.importorskip("google.protobuf")

import topologies as tp  # noqa: E402
from flowsolver import collective  # noqa: E402
from flowsolver.traces import RankTrace, TraceError, TraceNode, build_workload, read_chakra, replay  # noqa: E402

from .. import chakra_wire as cw  # noqa: E402

H100_PEAK = 989e12          # H100 SXM dense bf16 (NVIDIA datasheet), topologies' h100_sxm


def _write_ranks(folder, per_rank, *, compress=False, prefix="trace"):
    for r, nodes in enumerate(per_rank):
        suffix = ".et.gz" if compress else ".et"
        cw.write(folder / f"{prefix}.{r}{suffix}", [cw.metadata()] + nodes, compress=compress)
    return folder


def _two_rank_trace(folder, **kw):
    rank0 = [cw.comp(1, "fwd", 1000), cw.coll(2, "ar", cw.ALL_REDUCE, 2**24, deps=(1,), pg="1"),
             cw.p2p(3, "send", True, 1, 2**20, tag=7, deps=(2,))]
    rank1 = [cw.comp(10, "fwd", 3000), cw.coll(11, "ar", cw.ALL_REDUCE, 2**24, deps=(10,), pg="1"),
             cw.p2p(12, "recv", False, 0, 2**20, tag=7, deps=(11,)),
             cw.node(13, "bwd", cw.COMP, ctrl_deps=(12,), duration_us=500)]          # a control dependency
    (folder / "comm_group.json").write_text(json.dumps({"1": [0, 1]}))
    return _write_ranks(folder, [rank0, rank1], **kw)


@pytest.mark.parametrize("compress", [False, True])
def test_a_trace_built_from_the_schema_reads_node_by_node(tmp_path, compress):
    w = read_chakra(_two_rank_trace(tmp_path, compress=compress))
    assert w.n_ranks == 2 and w.n_nodes == 7 and w.groups == {"1": (0, 1)}
    fwd, ar, send = w.ranks[0].nodes
    assert (fwd.kind, fwd.duration) == ("compute", pytest.approx(1e-3))
    assert (ar.kind, ar.op, ar.bytes, ar.group, ar.deps) == ("collective", "all_reduce", 2.0**24, "1", (1,))
    assert (send.kind, send.peer, send.tag, send.bytes) == ("send", 1, 7, 2.0**20)
    assert w.ranks[1].nodes[3].deps == (12,)
    ops = sorted((c.op, c.ranks, c.members) for c in w.comms)
    assert ops == [("all_reduce", (0, 1), ((0, 1), (1, 1))), ("send_recv", (0, 1), ((0, 2), (1, 2)))]


def test_replay_follows_the_dag_across_ranks(tmp_path):
    g = tp.rail_optimized(1)
    res = replay(g, read_chakra(_two_rank_trace(tmp_path)))
    ar = collective(g, "all_reduce", 2**24, ranks=[0, 1]).time
    sr = collective(g, "send_recv", 2**20, ranks=[0, 1]).time
    # rank 1 reaches the all-reduce last (3 ms), then the pair, then its 0.5 ms backward
    assert res.iteration_time == pytest.approx(3e-3 + ar + sr + 0.5e-3, rel=1e-9)
    assert [(p.rank, p.name) for p in res.critical_path] == [(1, "fwd"), (1, "ar"), (1, "recv"), (1, "bwd")]
    assert res.exposed_communication == pytest.approx(ar + sr, rel=1e-9)
    assert res.path_compute == pytest.approx(3.5e-3, rel=1e-9)
    # rank 0 computed 1 ms and then waited: its all-reduce starts at 3 ms, with rank 1's
    assert res.start[0][1] == pytest.approx(3e-3) and res.end[0][0] == pytest.approx(1e-3)
    trace = res.chrome_trace(tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text()) == trace
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"fwd", "ar", "send", "recv", "bwd"}
    bwd, = [e for e in spans if e["name"] == "bwd"]          # microseconds, on the compute thread
    assert (bwd["pid"], bwd["tid"]) == (1, 0) and bwd["dur"] == pytest.approx(500.0)
    assert bwd["ts"] == pytest.approx((res.iteration_time - 0.5e-3) * 1e6)
    assert {e["tid"] for e in spans if e["name"] in ("ar", "send", "recv")} == {1}


def test_compute_and_communication_overlap_as_the_dag_allows(tmp_path):
    g = tp.rail_optimized(1)
    size = 2**28
    ar = collective(g, "all_reduce", size).time
    # every rank: an all-reduce with no dependency beside a compute node twice as long
    per_rank = [[cw.comp(1, "mm", round(2e6 * ar)), cw.coll(2, "ar", cw.ALL_REDUCE, size)] for _ in range(8)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)))
    assert res.iteration_time == pytest.approx(round(2e6 * ar) * 1e-6, rel=1e-9)
    assert [p.name for p in res.critical_path] == ["mm"] and res.exposed_communication == 0


def test_a_call_beside_compute_is_exposed_only_for_what_outlasts_it(tmp_path):
    g = tp.rail_optimized(1)
    size = 2**28
    ar = collective(g, "all_reduce", size).time
    hidden = round(0.25e6 * ar)                       # microseconds of compute beside the call
    # every rank: the all-reduce and a GEMM of a quarter of its time from the start, then a
    # node waiting for both: the path runs through the call whole, the GEMM beside it
    per_rank = [[cw.comp(1, "gemm", hidden), cw.coll(2, "ar", cw.ALL_REDUCE, size),
                 cw.comp(3, "next", 1000, deps=(1, 2))] for _ in range(8)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)))
    assert res.iteration_time == pytest.approx(ar + 1e-3, rel=1e-9)
    assert [p.name for p in res.critical_path] == ["ar", "next"]
    assert res.exposed_communication == pytest.approx(ar - hidden * 1e-6, rel=1e-9)
    assert res.path_compute == pytest.approx(hidden * 1e-6 + 1e-3, rel=1e-9)


def test_transfers_running_together_share_their_links(tmp_path):
    g = tp.rail_optimized(2)
    size = 2**28
    alone = collective(g, "send_recv", size, ranks=[0, 8])
    transfer = sum(st.count * st.transfer for st in alone.steps)
    # two pairs on the same NIC of rank 0 (rail 0): each gets half of it until both end
    per_rank = [[] for _ in range(16)]
    per_rank[0] = [cw.p2p(1, "a", True, 8, size, tag=1), cw.p2p(2, "b", True, 8, size, tag=2)]
    per_rank[8] = [cw.p2p(1, "a", False, 0, size, tag=1), cw.p2p(2, "b", False, 0, size, tag=2)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)))
    assert res.iteration_time == pytest.approx(alone.time + transfer, rel=1e-9)
    times, links, util = res.link_utilization()
    assert times[-1] == pytest.approx(res.iteration_time) and util.max() == pytest.approx(1.0)
    src, dst, mean = res.busiest_links(1)[0]
    assert mean == pytest.approx(2 * transfer / res.iteration_time, rel=1e-6)
    # the two sends run at once on rank 0: two comm threads, no thread with overlapping events
    trace = res.chrome_trace(ranks=[0])["traceEvents"]
    spans = [e for e in trace if e["ph"] == "X"]
    assert len({e["tid"] for e in spans}) == 2 and {e["name"] for e in spans} == {"a", "b"}
    names = {e["tid"]: e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert sorted(names[e["tid"]] for e in spans) == ["comm", "comm 2"]


def test_a_small_transfer_beside_a_large_one_gets_an_equal_share(tmp_path):
    g = tp.rail_optimized(2)
    size = 2**26
    alone = collective(g, "send_recv", size, ranks=[0, 8])
    transfer = sum(st.count * st.transfer for st in alone.steps)
    latency = alone.time - transfer
    per_rank = [[] for _ in range(16)]
    per_rank[0] = [cw.p2p(1, "small", True, 8, size, tag=1), cw.p2p(2, "large", True, 8, 3 * size, tag=2)]
    per_rank[8] = [cw.p2p(1, "small", False, 0, size, tag=1), cw.p2p(2, "large", False, 0, 3 * size, tag=2)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)))
    # half the link each until the small one is done (2 x its time alone), then the rest alone
    small, large = sorted(res.comm_end)
    assert small == pytest.approx(latency + 2 * transfer, rel=1e-9)
    assert large == pytest.approx(latency + 4 * transfer, rel=1e-9)


def test_groups_that_do_not_meet_take_their_time_alone_as_concurrent_says(tmp_path):
    from flowsolver import collective, concurrent

    g = tp.rail_optimized(2)
    size = 2**26
    per_rank = [[cw.coll(1, "ar", cw.ALL_REDUCE, size, pg=str(1 + r // 8))] for r in range(16)]
    (tmp_path / "comm_group.json").write_text(json.dumps({"1": list(range(8)), "2": list(range(8, 16))}))
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)))
    together = concurrent(g, [dict(op="all_reduce", size=size, ranks=range(8)),
                              dict(op="all_reduce", size=size, ranks=range(8, 16))], alone=False, lockstep=True)
    alone = collective(g, "all_reduce", size, ranks=range(8)).time          # one server each: they never meet
    assert res.iteration_time == pytest.approx(together.makespan, rel=1e-9)
    assert res.iteration_time == pytest.approx(alone, rel=1e-9)


def test_gpu_compute_runs_one_node_at_a_time_and_cpu_ops_beside_it(tmp_path):
    cpu = cw.node(3, "dataloader", cw.COMP, duration_us=2500, attrs=[cw.attr("is_cpu_op", boolean=True)])
    # two GPU kernels without dependencies share the GPU: 1 ms + 1 ms; the CPU op overlaps them
    res = replay(tp.rail_optimized(1), read_chakra(_write_ranks(tmp_path, [[cw.comp(1, "a", 1000), cw.comp(2, "b", 1000),
                                                                            cpu]])))
    assert res.end[0].tolist() == pytest.approx([1e-3, 2e-3, 2.5e-3])
    assert [p.name for p in res.critical_path] == ["dataloader"]


def test_trace_ranks_placed_on_other_gpus(tmp_path):
    g = tp.rail_optimized(2)
    per_rank = [[cw.coll(1, "ar", cw.ALL_REDUCE, 2**24)] for _ in range(2)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)), ranks=[0, 8])
    assert res.iteration_time == pytest.approx(collective(g, "all_reduce", 2**24, ranks=[0, 8]).time, rel=1e-9)
    with pytest.raises(ValueError, match="ranks must give 2 distinct GPU ranks"):
        replay(g, read_chakra(tmp_path), ranks=[0, 0])


def test_collectives_that_collide_slow_down_as_concurrent_says(tmp_path):
    from flowsolver import concurrent

    # two interleaved all-to-all groups over a 2:1 oversubscribed spine: both slow down
    g = tp.leaf_spine(leaves=2, spines=1, hosts_per_leaf=4, oversubscription=2.0)
    size, groups = 2**26, {"1": [0, 2, 4, 6], "2": [1, 3, 5, 7]}
    (tmp_path / "comm_group.json").write_text(json.dumps(groups))
    per_rank = [[cw.coll(1, "a2a", cw.ALL_TO_ALL, size, pg=str(1 + r % 2))] for r in range(8)]
    res = replay(g, read_chakra(_write_ranks(tmp_path, per_rank)), algorithms={"all_to_all": "pairwise"})
    together = concurrent(g, [dict(op="all_to_all", size=size, ranks=r, algorithm="pairwise") for r in groups.values()])
    assert together.slowdown[0] > 1.2
    assert res.iteration_time == pytest.approx(together.makespan, rel=1e-9)


def test_compute_given_by_flops_runs_at_the_efficiency_of_the_peak(tmp_path):
    flops = 10**15
    per_rank = [[cw.comp(1, "mm", 0, flops=flops)] for _ in range(8)]
    res = replay(tp.rail_optimized(1), read_chakra(_write_ranks(tmp_path, per_rank)), compute_efficiency=0.5)
    assert res.iteration_time == pytest.approx(flops / (0.5 * H100_PEAK), rel=1e-12)
    with pytest.raises(ValueError, match=r"compute_efficiency must be in \(0, 1\], got 1.5"):
        replay(tp.rail_optimized(1), read_chakra(tmp_path), compute_efficiency=1.5)


def test_the_replay_command_on_a_cluster_file_computes_flops_as_the_api(tmp_path, capsys):
    from flowsolver.cli import main
    from flowsolver.training import DEFAULT_COMPUTE_EFFICIENCY

    net = tmp_path / "net.yml"          # ASTRA-sim: 8 NPUs on one switch, 50 GB/s, 500 ns
    net.write_text("topology: [ Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    flops, size = 10**14, 2**26
    per_rank = [[cw.comp(1, "mm", 0, flops=flops), cw.coll(2, "ar", cw.ALL_REDUCE, size, deps=(1,))] for _ in range(8)]
    folder = _write_ranks(tmp_path / "t", per_rank) if (tmp_path / "t").mkdir() is None else None
    assert main(["replay", str(folder), "--cluster", str(net), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["summary"]
    g = tp.from_astra_network(net)
    expected = flops / (DEFAULT_COMPUTE_EFFICIENCY * H100_PEAK) + collective(g, "all_reduce", size).time
    assert out["iteration_time_s"] == pytest.approx(expected, rel=1e-9)
    assert out["iteration_time_s"] == pytest.approx(replay(g, read_chakra(folder)).iteration_time, rel=1e-12)


def test_metadata_process_groups_and_a_prefix_path(tmp_path):
    groups = json.dumps([{"pg_name": "3", "ranks": [0, 1]}])
    per_rank = [[cw.node(0, "pg", cw.METADATA, inputs=groups), cw.coll(1, "ag", cw.ALL_GATHER, 2**20, pg="3")]
                for _ in range(2)]
    _write_ranks(tmp_path, per_rank, prefix="job")
    w = read_chakra(tmp_path / "job")
    assert w.groups["3"] == (0, 1) and [c.op for c in w.comms] == ["all_gather"]
    # groups given by the caller must agree with the trace's own
    with pytest.raises(TraceError, match=r"process group '3': the groups passed give ranks \[1, 0\]"):
        read_chakra(tmp_path / "job", groups={"3": [1, 0]})


def test_without_protobuf_the_error_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from flowsolver.traces import _schema

    folder = _two_rank_trace(tmp_path)
    _schema.messages.cache_clear()
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    try:
        with pytest.raises(ImportError, match=r"pip install 'flowsolver\[traces\]'"):
            read_chakra(folder)
    finally:
        _schema.messages.cache_clear()


# ---- bad traces: one clear error each, naming the file and the node ----

def _bad(tmp_path, per_rank, match, groups=None):
    if groups is not None:
        (tmp_path / "comm_group.json").write_text(json.dumps(groups))
    _write_ranks(tmp_path, per_rank)
    with pytest.raises(TraceError, match=match):
        read_chakra(tmp_path)


def test_a_truncated_message_names_the_file_and_the_message(tmp_path):
    data = cw.stream([cw.metadata(), cw.comp(1, "a", 10), cw.comp(2, "b", 10, deps=(1,))])
    (tmp_path / "t.0.et").write_bytes(data[:-3])
    with pytest.raises(TraceError, match=r"t\.0\.et: node message 1 \(after node 1\) at byte \d+ is truncated"):
        read_chakra(tmp_path)


def test_an_undecodable_message_names_the_file_and_the_node_before_it(tmp_path):
    # a length prefix of 1 over the byte 0x0f: field 1 with wire type 7, which protobuf does not have
    data = cw.stream([cw.metadata(), cw.comp(4, "a", 10)]) + b"\x01\x0f"
    (tmp_path / "t.0.et").write_bytes(data)
    with pytest.raises(TraceError, match=r"t\.0\.et: node message 1 \(after node 4\) at byte \d+ cannot be decoded"):
        read_chakra(tmp_path)


def test_an_unknown_node_type(tmp_path):
    _bad(tmp_path, [[cw.comp(1, "a", 10), cw.node(2, "odd", 42)]], r"t.*\.0\.et: node 2 \('odd'\): unknown node type 42")


def test_an_unsupported_collective_type(tmp_path):
    _bad(tmp_path, [[cw.coll(4, "g", 3, 64)]], r"\.0\.et: node 4 \('g'\): collective type 3 \(GATHER\) is not supported")


@pytest.mark.parametrize("node, said", [
    # a hand-built node: -1 s of compute ran the replay's clock backwards (iteration_time -1.0)
    (TraceNode(0, "a", "compute", duration=-1.0), "duration must be a finite number >= 0, got -1.0"),
    (TraceNode(0, "a", "delay", duration=float("nan")), "duration must be a finite number >= 0, got nan"),
    (TraceNode(0, "f", "compute", flops=-1e15), "flops must be a finite number >= 0"),
    (TraceNode(0, "a", "compute", duration=True), "duration must be a finite number >= 0, got True"),
    (TraceNode(0, "a", "Compute", duration=1.0), "kind must be one of compute, delay, collective, send, recv"),
])
def test_a_hand_built_node_is_checked(node, said):
    with pytest.raises(TraceError, match=re.escape(said)):
        build_workload([RankTrace(0, [node])])


def test_a_dependency_cycle(tmp_path):
    _bad(tmp_path, [[cw.comp(1, "a", 10, deps=(3,)), cw.comp(2, "b", 10, deps=(1,)), cw.comp(3, "c", 10, deps=(2,))]],
         r"\.0\.et: node \d \('\w'\): is on a dependency cycle")


def test_a_missing_dependency(tmp_path):
    _bad(tmp_path, [[cw.comp(1, "a", 10), cw.comp(2, "b", 10, deps=(1, 9))]],
         r"\.0\.et: node 2 \('b'\): depends on node 9, which is not in the trace")


def test_process_groups_whose_ranks_disagree(tmp_path):
    per_rank = [[cw.node(0, "pg", cw.METADATA, inputs=json.dumps([{"pg_name": "5", "ranks": ranks}])),
                 cw.coll(1, "ar", cw.ALL_REDUCE, 64, pg="5")] for ranks in ([0, 1], [0, 1, 2])] + [[]]
    _bad(tmp_path, per_rank, r"process group '5': .*trace\.0\.et: node 0 gives ranks \[0, 1\] but .*trace\.1\.et: node 0 "
                             r"gives \[0, 1, 2\]")


def test_process_groups_whose_ranks_disagree_within_one_file(tmp_path):
    # two metadata nodes of one file naming group 'a' differently: the later one was kept
    meta = [cw.node(1, "pg", cw.METADATA, inputs=json.dumps([{"pg_name": "a", "ranks": [0, 1]}])),
            cw.node(2, "pg2", cw.METADATA, inputs=json.dumps([{"pg_name": "a", "ranks": [0, 1, 2, 3]}])),
            cw.coll(3, "ar", cw.ALL_REDUCE, 64, pg="a")]
    per_rank = [list(meta) for _ in range(4)]
    _bad(tmp_path, per_rank, r"process group 'a': .*trace\.0\.et: node 1 gives ranks \[0, 1\] but node 2 gives "
                             r"\[0, 1, 2, 3\]")


def test_a_rank_outside_its_process_group(tmp_path):
    per_rank = [[cw.coll(1, "ar", cw.ALL_REDUCE, 64, pg="1")], [cw.coll(1, "ar", cw.ALL_REDUCE, 64, pg="1")], []]
    per_rank[2] = [cw.coll(1, "x", cw.ALL_REDUCE, 64, pg="1")]
    _bad(tmp_path, per_rank, r"trace\.1\.et: node 1 \('ar'\): rank 1 is not in its process group '1'", groups={"1": [0, 2]})


def test_collectives_that_do_not_match_across_ranks(tmp_path):
    per_rank = [[cw.coll(1, "ar", cw.ALL_REDUCE, 64)], [cw.coll(4, "ar", cw.ALL_REDUCE, 128)]]
    _bad(tmp_path, per_rank, r"rank 0 node 1 \(.*trace\.0\.et\) is all_reduce of 64 B but rank 1 node 4 "
                             r"\(.*trace\.1\.et\) is all_reduce of 128 B")


def test_a_collective_one_rank_never_issues(tmp_path):
    per_rank = [[cw.coll(1, "ar", cw.ALL_REDUCE, 64), cw.coll(2, "ar2", cw.ALL_REDUCE, 64, deps=(1,))],
                [cw.coll(1, "ar", cw.ALL_REDUCE, 64)]]
    _bad(tmp_path, per_rank, r"rank 1 issues 1 collectives, rank 0 2; the first unmatched is rank 0's node 2 "
                             r"\('ar2'\) \(.*trace\.0\.et\)")


def test_a_send_without_its_recv(tmp_path):
    _bad(tmp_path, [[cw.p2p(1, "s", True, 1, 64, tag=3)], [cw.comp(1, "c", 1)]],
         r"rank 0 -> rank 1 \(tag 3\): 1 sends but 0 recvs; rank 0's send node 1 \('s'\) \(.*trace\.0\.et\)")


def test_a_recv_that_expects_other_bytes_than_its_send(tmp_path):
    _bad(tmp_path, [[cw.p2p(1, "s", True, 1, 64, tag=3)], [cw.p2p(7, "r", False, 0, 128, tag=3)]],
         r"rank 0 node 1 \(.*trace\.0\.et\) sends 64 B to rank 1 but its recv node 7 \(.*trace\.1\.et\) expects 128 B")


def test_a_process_group_defined_nowhere(tmp_path):
    _bad(tmp_path, [[cw.coll(3, "ar", cw.ALL_REDUCE, 64, pg="9")]] * 2,
         r"trace\.0\.et: node 3 \('ar'\): process group '9' is defined nowhere")


def test_a_deadlock_between_ranks_names_the_node(tmp_path):
    # rank 0 waits for its recv before it sends; rank 1 the same: neither pair can start
    per_rank = [[cw.p2p(1, "r", False, 1, 64, tag=1), cw.p2p(2, "s", True, 1, 64, tag=2, deps=(1,))],
                [cw.p2p(1, "r", False, 0, 64, tag=2), cw.p2p(2, "s", True, 0, 64, tag=1, deps=(1,))]]
    w = read_chakra(_write_ranks(tmp_path, per_rank))
    with pytest.raises(ValueError, match=r"node \d \('\w'\) never ran: ranks \[\d\] never reached it"):
        replay(tp.rail_optimized(1), w)


@pytest.mark.parametrize("change", ["gpu_type", "efficiency"])
def test_a_server_unlike_the_others_is_timed_as_itself(change):
    # server 1's GPUs made A100s, or its NVLink run at 0.4: the replay reused server 0's cost
    # (its fingerprint read capacities, latencies, techs and cables only)
    from flowsolver.traces import RankTrace, TraceNode, build_workload, replay
    g = tp.rail_optimized(2)
    for u, v, d in g.edges(data=True):
        if change == "efficiency" and d.get("tier") == "nvlink" and g.nodes[u].get("server") == 1:
            d["efficiency"] = 0.4
    for n, d in g.nodes(data=True):
        if change == "gpu_type" and d.get("kind") == "gpu" and d.get("server") == 1:
            d["gpu_type"] = "a100_sxm"
    per = [RankTrace(r, [TraceNode(0, "w", "compute", duration=0.0 if r < 8 else 1.0),
                         TraceNode(1, "ar", "collective", deps=(0,), op="all_reduce", bytes=2**30,
                                   group="1" if r < 8 else "2")]) for r in range(16)]
    res = replay(g, build_workload(per, {"1": list(range(8)), "2": list(range(8, 16))}))
    for i, ranks in ((0, range(8)), (1, range(8, 16))):      # the two calls never overlap: each alone
        want = collective(g, "all_reduce", 2**30, ranks=list(ranks)).time
        assert res.comm_end[i] - res.comm_start[i] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("algorithms, match", [({"allreduce": "ring"}, "'allreduce' is not an op"),
                                               ({"all_reduce": "rign"}, r"algorithms\['all_reduce'\] must be"),
                                               ("ring", "algorithms must be a dict")])
def test_replay_checks_its_algorithms(algorithms, match):
    # {"allreduce": "ring"} ran NCCL's choice (nvls) unseen; "ring" was a dict() error
    g = tp.rail_optimized(1)
    w = build_workload([RankTrace(r, [TraceNode(0, "ar", "collective", op="all_reduce", bytes=2**26, group="1")])
                        for r in range(8)], {"1": list(range(8))})
    with pytest.raises(ValueError, match=match):
        replay(g, w, algorithms=algorithms)
