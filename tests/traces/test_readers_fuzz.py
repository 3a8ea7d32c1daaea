"""Every reader of other tools' files against damaged copies of a valid file the test writes
itself (a Chakra trace built message by message with tests/chakra_wire.py and its
communicator-group JSON, a SimAI workload, an nccl-tests log): truncated, bytes flipped or
inserted, numbers replaced by huge, negative, NaN, inf, 1e400 or non-numeric ones. Each
read either returns or raises one clear error, a ValueError or OSError on one line that
names the file, and stays under a bound of Python memory (tracemalloc)."""

import gzip
import json
import re
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .. import chakra_wire as cw

PEAK = 64 * 2**20            # bytes of Python memory a read of these small files may take
# derandomized: the same 400 damaged files every run, so that a CI run is reproducible (a random
# run found the header without algbw that nccl_tests.read now refuses; to explore, set
# derandomize=False here)
FUZZ = settings(max_examples=400, deadline=None, derandomize=True)

#: what a number in a text file is replaced by
NUMBERS = ["99999999999999999999999", "-1", "-5e3", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "abc", "0",
           "1.5", "Infinity", "0x10", "1" + "0" * 5000, ""]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


@st.composite
def damage(draw, data: bytes, text: bool) -> bytes:
    """``data`` after a few random edits: a cut, a flipped byte, inserted bytes, and (text
    files) a number replaced."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "number"] if text else ["cut", "flip", "insert"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "cut":
            data = data[:at]
        elif kind == "flip" and data:
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif kind == "number":
            found = list(_NUMBER.finditer(data))
            if found:
                m = found[draw(st.integers(0, len(found) - 1))]
                data = data[:m.start()] + draw(st.sampled_from(NUMBERS)).encode() + data[m.end():]
    return data


def _read_checked(read, path, names):
    """Run ``read(path)``: it returns, or raises a ValueError / OSError (not a
    UnicodeError) whose one-line message names one of ``names``; its peak Python memory
    stays under PEAK."""
    tracemalloc.start()
    try:
        try:
            read(path)
        except (ValueError, OSError) as err:
            message = str(err)
            assert not isinstance(err, UnicodeError), repr(err)
            assert "\n" not in message, message
            assert any(name in message for name in names), message
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK, peak


# ---- Chakra traces and their communicator-group JSON ----

pytest.importorskip("google.protobuf")

from flowsolver.traces import read_chakra, read_simai_workload  # noqa: E402

_INT = st.sampled_from([0, 1, 2, 64, 2**31, 2**62, 2**64 - 1, -1, -2**63])
_DOUBLE = st.sampled_from([0.0, 1.0, 64.0, -1.0, 1e308, float("nan"), float("inf"), -float("inf")])


def _value_attr(draw, name):
    """An attribute ``name`` of a random type and value."""
    kind = draw(st.sampled_from(["int64", "uint64", "double", "string", "boolean", "none"]))
    if kind == "none":
        return []
    value = {"int64": _INT, "uint64": st.integers(0, 2**64 - 1), "double": _DOUBLE,
             "string": st.sampled_from(["", "x", "1", "ALL_REDUCE"]), "boolean": st.booleans()}[kind]
    return [cw.attr(name, **{kind: draw(value)})]


@st.composite
def chakra_node(draw, nid):
    """A node of any type whose attributes take odd types and values as often as good ones."""
    kind = draw(st.sampled_from([cw.COMP, cw.COLL, cw.SEND, cw.RECV, cw.METADATA, 0, 2, 9, 11, 42]))
    attrs = []
    for name in ("comm_size", "comm_type", "comm_src", "comm_dst", "comm_tag", "num_ops", "is_cpu_op", "pg_name"):
        attrs += _value_attr(draw, name) if draw(st.booleans()) else []
    deps = draw(st.sampled_from([(), (nid - 1,), (nid + 1,), (99,), (2**64 - 1,)]))
    inputs = draw(st.sampled_from([None, json.dumps([{"pg_name": "1", "ranks": [0, 1]}]), "[[[", '[{"pg_name": 1}]']))
    return cw.node(nid, f"n{nid}", kind, data_deps=deps, duration_us=draw(st.sampled_from([0, 10, 2**64 - 1])),
                   attrs=attrs, inputs=inputs)


def _good_ranks():
    rank0 = [cw.node(0, "pg", cw.METADATA, inputs=json.dumps([{"pg_name": "1", "ranks": [0, 1]}])),
             cw.comp(1, "fwd", 1000, flops=10**9), cw.coll(2, "ar", cw.ALL_REDUCE, 2**24, deps=(1,), pg="1"),
             cw.p2p(3, "send", True, 1, 2**20, tag=7, deps=(2,))]
    rank1 = [cw.node(0, "pg", cw.METADATA, inputs=json.dumps([{"pg_name": "1", "ranks": [0, 1]}])),
             cw.comp(10, "fwd", 3000), cw.coll(11, "ar", cw.ALL_REDUCE, 2**24, deps=(10,), pg="1"),
             cw.p2p(12, "recv", False, 0, 2**20, tag=7, deps=(11,))]
    return [rank0, rank1]


def _read_folder(folder):
    return read_chakra(folder, max_nodes=20_000, max_file_bytes=2**20)


def test_the_valid_chakra_trace_reads():
    # the starting point of the fuzzing is a good trace (else every example would fail the same way)
    with tempfile.TemporaryDirectory() as d:
        for r, nodes in enumerate(_good_ranks()):
            cw.write(Path(d) / f"trace.{r}.et", [cw.metadata()] + nodes)
        (Path(d) / "comm_group.json").write_text(json.dumps({"1": [0, 1]}))
        w = _read_folder(d)
        assert w.n_ranks == 2 and sorted(c.op for c in w.comms) == ["all_reduce", "send_recv"]


@FUZZ
@given(st.data(), st.sampled_from(["trace.0.et", "trace.1.et", "comm_group.json"]), st.booleans())
def test_a_damaged_chakra_trace_reads_or_raises_one_clear_error(data, target, compress):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        files = {f"trace.{r}.et": cw.stream([cw.metadata()] + nodes) for r, nodes in enumerate(_good_ranks())}
        files["comm_group.json"] = json.dumps({"1": [0, 1]}).encode()
        if compress and target != "comm_group.json":
            files[target] = gzip.compress(files[target])
        files[target] = data.draw(damage(files[target], text=target.endswith(".json")))
        for name, content in files.items():
            (folder / (name + (".gz" if compress and name == target != "comm_group.json" else ""))).write_bytes(content)
        _read_checked(_read_folder, folder, [str(folder)])


@FUZZ
@given(st.data(), st.lists(st.integers(0, 1), min_size=1, max_size=6))
def test_chakra_nodes_with_odd_attribute_types_and_values_read_or_raise_one_clear_error(data, ranks_of_nodes):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        per_rank = [[], []]
        for nid, r in enumerate(ranks_of_nodes, 1):
            per_rank[r].append(data.draw(chakra_node(nid)))
        for r, nodes in enumerate(per_rank):
            body = cw.stream([cw.metadata()] + nodes)
            if data.draw(st.booleans()):
                body = data.draw(damage(body, text=False))
            (folder / f"trace.{r}.et").write_bytes(body)
        _read_checked(_read_folder, folder, [str(folder)])


@FUZZ
@given(st.data())
def test_a_damaged_group_json_reads_or_raises_one_clear_error(data):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for r in range(2):
            cw.write(folder / f"trace.{r}.et", [cw.metadata(), cw.coll(1, "ar", cw.ALL_REDUCE, 64, pg="1")])
        groups = data.draw(st.sampled_from(['{"1": [0, 1]}', '{"1": [0, 1], "2": [1]}',
                                            '{"1": ' + "[" * 3000 + "]" * 3000 + "}"]))
        (folder / "comm_group.json").write_bytes(data.draw(damage(groups.encode(), text=True)))
        _read_checked(_read_folder, folder, [str(folder / "comm_group.json"), str(folder)])


# ---- SimAI workload files ----

SIMAI = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 2 vpp: 1 ga: 2 all_gpus: 16 "
         "checkpoints: 0 checkpoint_initiates: 0 pp_comm 4096\n3\n"
         "embedding -1 556000 ALLREDUCE 536870912 1000 NONE 0 2000 NONE 0 100\n"
         "attention -1 1000 ALLGATHER 1048576 2000 REDUCESCATTER 1048576 3000 ALLREDUCE 4194304 100\n"
         "moe -1 1000 ALLTOALL_EP 65536 2000 ALLTOALL_EP 65536 3000 ALLREDUCE_DP_EP 4194304 100\n")


def test_the_valid_simai_file_reads(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text(SIMAI)
    w = read_simai_workload(path)
    assert w.n_ranks == 16 and {c.op for c in w.comms} == {"all_reduce", "all_gather", "reduce_scatter",
                                                          "all_to_all", "send_recv"}


@FUZZ
@given(st.data())
def test_a_damaged_simai_file_reads_or_raises_one_clear_error(data):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "w.txt"
        path.write_bytes(data.draw(damage(SIMAI.encode(), text=True)))
        _read_checked(lambda p: read_simai_workload(p, max_nodes=20_000), path, [str(path)])


# ---- nccl-tests logs ----

pd = pytest.importorskip("pandas")

from flowsolver import nccl_tests  # noqa: E402

NCCL = """# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid 2 on hostA device  1 [0x15] NVIDIA H100 80GB HBM3
hostA:1:1 [0] NCCL INFO comm 0x55 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    20.48    0.05    0.05      0    20.00    0.05    0.05      0
        2048           512     float     sum      -1    20.48    0.10    0.10      0    20.31    0.10    0.10    N/A
        4096          1024     float     sum      -1    21.02    0.19    0.19      0
                                                        20.80    0.20    0.20      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.11
"""


def test_the_valid_nccl_log_reads(tmp_path):
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(NCCL)
    df = nccl_tests.read(path)
    assert list(df["size"]) == [1024, 1024, 2048, 2048, 4096, 4096] and df.attrs["ranks"] == 2
    assert df["time"].tolist() == [20.48, 20.0, 20.48, 20.31, 21.02, 20.8]


@FUZZ
@given(st.data())
def test_a_damaged_nccl_log_reads_or_raises_one_clear_error(data):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "all_reduce_perf.log"
        path.write_bytes(data.draw(damage(NCCL.encode(), text=True)))

        def read(p):
            df = nccl_tests.read(p)
            # what was read is a table of nccl-tests' columns with numbers where numbers go
            assert {"size", "time", "algbw", "busbw"} <= set(df.columns) and len(df) > 0
            assert (df["size"] >= 0).all() and not (df["time"] < 0).any()
        _read_checked(read, path, [str(path)])
