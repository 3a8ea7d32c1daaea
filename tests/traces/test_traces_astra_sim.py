"""Chakra traces that ASTRA-sim runs though they stray from the schema's letter (as PyTorch's
converter writes them; Chakra's own feeder-test trace has both): a collective's host-side call
marked is_cpu_op, without a comm_size, and ctrl_deps that name nodes not in the file, the node
itself or close a cycle. Built message by message (tests/chakra_wire.py), not by our writer."""

import pytest

pytest.importorskip("google.protobuf")

import topologies as tp  # noqa: E402
from flowsolver import collective  # noqa: E402
from flowsolver.traces import TraceError, read_chakra, replay  # noqa: E402

from .. import chakra_wire as cw  # noqa: E402


def _write_ranks(folder, per_rank):
    for r, nodes in enumerate(per_rank):
        cw.write(folder / f"trace.{r}.et", [cw.metadata()] + nodes)
    return folder


def _cpu(id, name, duration_us, *, ctrl_deps=(), data_deps=()):
    return cw.node(id, name, cw.COMP, ctrl_deps=ctrl_deps, data_deps=data_deps, duration_us=duration_us,
                   attrs=[cw.attr("is_cpu_op", boolean=True)])


def test_a_collective_s_host_side_call_on_the_cpu_is_a_delay_of_its_duration(tmp_path):
    # c10d::all_reduce_ as the converter writes it: a COMM_COLL_NODE with is_cpu_op and no comm_size
    # (ASTRA-sim before FeederV3 ran it as compute, by its recorded duration); the kernel moves the bytes
    host = cw.node(1, "c10d::allreduce_", cw.COLL, duration_us=40, attrs=[cw.attr("is_cpu_op", boolean=True)])
    send = cw.node(3, "c10d::send", cw.SEND, duration_us=10, data_deps=(2,),
                   attrs=[cw.attr("is_cpu_op", boolean=True), cw.attr("comm_dst", int64=1)])
    per_rank = [[host, cw.coll(2, "ncclKernel_AllReduce", cw.ALL_REDUCE, 2**24, deps=(1,)), send]
                for _ in range(2)]
    w = read_chakra(_write_ranks(tmp_path, per_rank))
    call, kernel, sent = w.ranks[0].nodes
    assert (call.kind, call.duration, call.bytes) == ("delay", pytest.approx(40e-6), 0.0)
    assert (sent.kind, sent.duration, sent.peer) == ("delay", pytest.approx(10e-6), -1)
    assert [(c.op, c.bytes, c.ranks) for c in w.comms] == [("all_reduce", 2.0**24, (0, 1))]   # the kernel's only
    g = tp.rail_optimized(1)
    ar = collective(g, "all_reduce", 2**24, ranks=[0, 1]).time
    assert replay(g, w).iteration_time == pytest.approx(40e-6 + ar + 10e-6, rel=1e-9)


def test_a_gpu_communication_node_still_needs_its_comm_size(tmp_path):
    kernel = cw.node(1, "ncclKernel", cw.COLL, attrs=[cw.attr("comm_type", int64=cw.ALL_REDUCE),
                                                      cw.attr("is_cpu_op", boolean=False)])
    _write_ranks(tmp_path, [[kernel]])
    with pytest.raises(TraceError, match=r"node 1 \('ncclKernel'\): a communication node needs a comm_size"):
        read_chakra(tmp_path)


@pytest.mark.parametrize("stray, why", [
    ((99,), r"node 3 \('z'\): depends on node 99, which is not in the trace"),      # its parent, not converted
    ((3,), r"node 3 \('z'\): depends on itself"),
    ((4,), r"node \d \('\w'\): is on a dependency cycle"),                            # 3 -> 4 -> 3
])
def test_a_file_whose_ctrl_deps_are_not_a_dag_waits_for_its_data_deps_only(tmp_path, stray, why):
    # CPU ops run side by side: x (2 ms); y after x by a ctrl dep (0.5 ms); z, whose ctrl dep is stray
    # (0.3 ms), and w after z by a data dep (0.1 ms). Rank 1's ctrl deps are a DAG: they hold.
    def rank():
        return [_cpu(1, "x", 2000), _cpu(2, "y", 500, ctrl_deps=(1,)), _cpu(3, "z", 300, ctrl_deps=stray),
                _cpu(4, "w", 100, data_deps=(3,), ctrl_deps=(3,) if stray == (4,) else ())]
    good = [_cpu(1, "x", 2000), _cpu(2, "y", 500, ctrl_deps=(1,)), _cpu(3, "z", 300), _cpu(4, "w", 100, data_deps=(3,))]
    w_trace = _write_ranks(tmp_path, [rank(), good])
    with pytest.warns(RuntimeWarning, match=rf"trace\.0\.et: its ctrl_deps do not make a DAG with its data_deps "
                                            rf"\({why}.*\): its \d ctrl_deps are left out.*data_deps only") as said:
        w = read_chakra(w_trace)
    assert len(said) == 1                                           # rank 1's file is read as it is
    res = replay(tp.rail_optimized(1), w)
    # rank 0: y no longer waits for x (ends at 0.5 ms), w still waits for z (0.3 + 0.1 ms)
    assert res.end[0].tolist() == pytest.approx([2e-3, 0.5e-3, 0.3e-3, 0.4e-3])
    assert res.end[1].tolist() == pytest.approx([2e-3, 2.5e-3, 0.3e-3, 0.4e-3])
    assert [n.deps for n in w.ranks[0].nodes] == [(), (), (), (3,)]
    assert [n.deps for n in w.ranks[1].nodes] == [(), (1,), (), (3,)]


def test_data_deps_that_are_not_a_dag_stay_an_error_whatever_the_ctrl_deps(tmp_path):
    _write_ranks(tmp_path, [[_cpu(1, "a", 10, ctrl_deps=(7,)), _cpu(2, "b", 10, data_deps=(1, 9))]])
    with pytest.raises(TraceError, match=r"trace\.0\.et: node 2 \('b'\): depends on node 9, which is not in the trace"):
        read_chakra(tmp_path)
