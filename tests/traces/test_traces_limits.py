"""Bad and hostile workload files (SimAI workload text, Chakra traces, process-group JSON):
one clear error each, naming the file, the line or node and the field, and never more
memory than the reader's limits allow (checked with tracemalloc, before the allocation).
Every file here is written by the test itself."""

import gzip
import json
import tracemalloc
import zlib

import pytest

from flowsolver.traces import TraceError, read_chakra, read_simai_workload

from .. import chakra_wire as cw
from ..helpers import fed_fifo

HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8"
ROW = "layer -1 556000 ALLREDUCE 536870912 1000 NONE 0 2000 NONE 0 100"
MiB = 2**20


def _simai(tmp_path, text, name="w.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _peak(f, *a, **kw):
    """(what f raised, peak bytes Python allocated while it ran)."""
    tracemalloc.start()
    try:
        try:
            f(*a, **kw)
            raised = None
        except Exception as err:        # noqa: BLE001 - returned for the test to check
            raised = err
        return raised, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---- SimAI workload files: values a layer row or the header cannot have ----

@pytest.mark.parametrize("row, match", [
    ("layer -1 -5000 NONE 0 1 NONE 0 1 NONE 0 1", r"line 3: fwd_compute .* got '-5000'"),
    ("layer -1 1 NONE 0 -1 NONE 0 1 NONE 0 1", r"line 3: ig_compute .* got '-1'"),
    ("layer -1 1 NONE 0 1 NONE 0 nan NONE 0 1", r"line 3: wg_compute .* got 'nan'"),
    ("layer -1 inf NONE 0 1 NONE 0 1 NONE 0 1", r"line 3: fwd_compute .* got 'inf'"),
    ("layer -1 1e400 NONE 0 1 NONE 0 1 NONE 0 1", r"line 3: fwd_compute .* got '1e400'"),
    ("layer -1 1 ALLREDUCE nan 1 NONE 0 1 NONE 0 1", r"line 3: fwd_comm_size .* got 'nan'"),
    ("layer -1 1 ALLREDUCE inf 1 NONE 0 1 NONE 0 1", r"line 3: fwd_comm_size .* got 'inf'"),
    ("layer -1 1 ALLREDUCE -8 1 NONE 0 1 NONE 0 1", r"line 3: fwd_comm_size .* got '-8'"),
    ("layer -1 1 NONE 0 1 ALLGATHER -1e400 1 NONE 0 1", r"line 3: ig_comm_size .* got '-1e400'"),
    ("layer -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 12abc 1", r"line 3: wg_comm_size .* '12abc'"),
])
def test_a_layer_value_out_of_range_names_the_file_line_and_field(tmp_path, row, match):
    path = _simai(tmp_path, f"{HEADER}\n1\n{row}\n")
    with pytest.raises(TraceError, match=match) as err:
        read_simai_workload(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("count", ["-1", "0", "-1000000"])
def test_a_layer_count_below_one_is_an_error_not_an_empty_workload(tmp_path, count):
    path = _simai(tmp_path, f"{HEADER}\n{count}\n{ROW}\n")
    with pytest.raises(TraceError, match=rf"{path}: line 2: the layer count must be an integer >= 1, got {count}"):
        read_simai_workload(path)


def test_more_layer_rows_than_the_count_announces_is_an_error(tmp_path):
    # SimAI reads as many rows as the count says: the extra rows would be dropped without a word
    path = _simai(tmp_path, f"{HEADER}\n1\n{ROW}\n{ROW}\n")
    with pytest.raises(TraceError, match=r"line 4: .*announces 1 layer.* 2 layer rows"):
        read_simai_workload(path)


def _header(**kw):
    v = dict(tp=8, ep=1, pp=1, ga=1, all_gpus=8, pp_comm=0) | kw
    return (f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {v['tp']} ep: {v['ep']} pp: {v['pp']} vpp: 1 "
            f"ga: {v['ga']} all_gpus: {v['all_gpus']} pp_comm {v['pp_comm']}")


@pytest.mark.parametrize("field, value", [("ga", "-2"), ("ep", "0"), ("pp", "0"), ("all_gpus", "0"),
                                          ("pp_comm", "-5"), ("ga", "2.5"), ("all_gpus", "1e3")])
def test_header_values_out_of_range_name_the_field(tmp_path, field, value):
    path = _simai(tmp_path, f"{_header(**{field: value})}\n1\n{ROW}\n")
    with pytest.raises(TraceError, match=rf"{path}: line 1: {field}:? .*{value}"):
        read_simai_workload(path)


def test_the_layer_values_read_are_the_files(tmp_path):
    # the checks leave good files alone: 0 and large finite values are read as written
    path = _simai(tmp_path, f"{HEADER}\n1\nlayer -1 0 ALLREDUCE 1e12 2500 NONE 0 0 NONE 0 1\n")
    w = read_simai_workload(path)
    fwd, comm, ig, wg = w.ranks[0].nodes
    assert (fwd.duration, comm.bytes, ig.duration, wg.duration) == (0.0, 1e12, 2.5e-6, 0.0)


# ---- SimAI: files that cannot be read ----

def test_a_missing_simai_file_is_file_not_found_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such SimAI workload file.*nope.txt") as err:
        read_simai_workload(tmp_path / "nope.txt")
    assert err.value.filename == str(tmp_path / "nope.txt")


def test_a_folder_given_as_a_simai_file_is_is_a_directory_naming_it(tmp_path):
    with pytest.raises(IsADirectoryError, match="not a SimAI workload file") as err:
        read_simai_workload(tmp_path)
    assert err.value.filename == str(tmp_path)


def test_a_non_utf8_byte_is_a_value_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes(f"{HEADER}\n1\n".encode() + b"layer\xff -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    with pytest.raises(TraceError, match=rf"{path}: line 3: byte 0xff .*not UTF-8"):
        read_simai_workload(path)


# ---- SimAI: what a file can make the reader allocate ----

@pytest.mark.parametrize("field", ["all_gpus", "ga"])
def test_a_billion_ranks_or_microbatches_is_refused_before_building(tmp_path, field):
    path = _simai(tmp_path, f"{_header(**{field: 1_000_000_000})}\n1\n{ROW}\n")
    err, peak = _peak(read_simai_workload, path)
    assert isinstance(err, TraceError), err
    assert str(path) in str(err) and ("max_ranks" in str(err) or "max_nodes" in str(err))
    assert peak < 16 * MiB


def test_the_limits_are_parameters(tmp_path):
    path = _simai(tmp_path, f"{HEADER}\n1\n{ROW}\n")
    # 8 ranks of 4 nodes each (forward compute and its all-reduce, input and weight gradients)
    assert read_simai_workload(path, max_nodes=32).n_nodes == 32
    with pytest.raises(TraceError, match=r"all_gpus \(8\) x ga \(1\) x 1 layer.* 32 nodes.*max_nodes=31"):
        read_simai_workload(path, max_nodes=31)
    with pytest.raises(TraceError, match=r"line 1: all_gpus: 8 is more than max_ranks=4"):
        read_simai_workload(path, max_ranks=4)
    with pytest.raises(TraceError, match=rf"{path}: the file is \d+ bytes, more than max_file_bytes=10"):
        read_simai_workload(path, max_file_bytes=10)


@pytest.mark.parametrize("kw, rows", [
    (dict(tp=8, all_gpus=8), [ROW]),
    (dict(tp=2, pp=2, ga=3, all_gpus=8, pp_comm=1024), [ROW, "l2 -1 1 NONE 0 1 ALLREDUCE 64 1 ALLREDUCE 64 1"]),
    (dict(tp=1, ep=2, pp=3, ga=2, all_gpus=12, pp_comm=8), ["moe -1 1 ALLTOALL_EP 64 1 NONE 0 1 ALLREDUCE_DP_EP 64 1"]),
    (dict(tp=4, all_gpus=4), ["x -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1"]),          # dp 1: no DP group, no call
], ids=["tp", "tp-pp-ga", "ep-pp", "dp1"])
def test_max_nodes_is_the_count_of_nodes_the_file_makes(tmp_path, kw, rows):
    # the count is worked out before building; here it is compared with what is built
    path = _simai(tmp_path, "\n".join([_header(**kw), str(len(rows))] + rows) + "\n")
    n = read_simai_workload(path).n_nodes
    assert read_simai_workload(path, max_nodes=n).n_nodes == n
    with pytest.raises(TraceError, match=rf"make {n} nodes, more than max_nodes={n - 1}"):
        read_simai_workload(path, max_nodes=n - 1)


# ---- Chakra: gzip ----

def _metadata_and(nodes):
    return cw.stream([cw.metadata()] + nodes)


def _repeated_gzip(first: bytes, repeated: bytes, times: int) -> bytes:
    """A gzip file whose deflate stream holds ``first`` then ``repeated`` ``times`` times,
    without compressing it all: after a full flush deflate starts afresh, so the bytes of
    one flushed block of ``repeated`` can be repeated (the trailer's CRC is not written:
    the reader must stop before it)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(first) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(repeated) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(repeated) + c.flush(zlib.Z_FULL_FLUSH) == block
    return head + block * times


def test_a_small_gzip_inflating_to_3_gib_is_refused_in_bounded_memory(tmp_path):
    # a 1 MiB node message (a name of 1 MiB) 3 x 1024 times: 3 GiB inflated from a few MB
    body = cw.node(1, "n" * (MiB - 16), cw.COMP)
    message = cw.varint(len(body)) + body
    data = _repeated_gzip(cw.stream([cw.metadata()]), message, 3 * 1024)
    assert len(data) < 8 * MiB
    (tmp_path / "t.0.et.gz").write_bytes(data)
    err, peak = _peak(read_chakra, tmp_path)
    assert isinstance(err, TraceError), err
    assert "t.0.et.gz" in str(err) and "max_file_bytes" in str(err)
    assert peak < 64 * MiB


def test_a_length_prefix_of_3_gib_is_refused_before_reading_it(tmp_path):
    data = cw.stream([cw.metadata()]) + cw.varint(3 * 2**30) + b"\x08\x01"
    (tmp_path / "t.0.et").write_bytes(data)
    err, peak = _peak(read_chakra, tmp_path)
    assert isinstance(err, TraceError) and "t.0.et" in str(err), err
    assert "3221225472 bytes" in str(err) and peak < 4 * MiB


def test_inflated_size_is_a_parameter_and_decompression_is_chunked(tmp_path):
    node = cw.comp(1, "a" * 1000, 10)
    message = cw.varint(len(node)) + node
    (tmp_path / "t.0.et.gz").write_bytes(_repeated_gzip(cw.stream([cw.metadata()]), message, 16 * 1024))
    err, peak = _peak(read_chakra, tmp_path, max_file_bytes=MiB)
    assert isinstance(err, TraceError), err
    assert "t.0.et.gz: inflates to more than max_file_bytes=1048576 bytes" in str(err)
    assert peak < 8 * MiB


@pytest.mark.parametrize("damage", ["truncated", "crc", "garbage", "trailing"])
def test_a_damaged_gzip_is_one_trace_error_naming_the_file(tmp_path, damage):
    data = gzip.compress(_metadata_and([cw.comp(1, "a", 10)]))
    data = {"truncated": data[:-6], "crc": data[:-8] + bytes(4) + data[-4:], "garbage": data[:10] + b"\x07" * 20,
            "trailing": data + b"junk"}[damage]
    (tmp_path / "t.0.et.gz").write_bytes(data)
    with pytest.raises(TraceError, match=r"t\.0\.et\.gz: not a readable gzip file"):
        read_chakra(tmp_path)


def test_a_gzip_of_several_members_reads_as_their_concatenation(tmp_path):
    whole = _metadata_and([cw.comp(1, "a", 10), cw.comp(2, "b", 20, deps=(1,))])
    cut = len(cw.stream([cw.metadata(), cw.comp(1, "a", 10)]))
    (tmp_path / "t.0.et.gz").write_bytes(gzip.compress(whole[:cut]) + gzip.compress(whole[cut:]))
    w = read_chakra(tmp_path)
    assert [(n.id, n.duration) for n in w.ranks[0].nodes] == [(1, pytest.approx(10e-6)), (2, pytest.approx(20e-6))]


def test_the_node_count_is_bounded(tmp_path):
    for r in range(2):
        cw.write(tmp_path / f"t.{r}.et", [cw.metadata()] + [cw.comp(i, "a", 1) for i in range(1, 6)])
    assert read_chakra(tmp_path, max_nodes=10).n_nodes == 10
    with pytest.raises(TraceError, match=r"t\.1\.et: more than max_nodes=9 nodes"):
        read_chakra(tmp_path, max_nodes=9)


# ---- Chakra: a folder of trace files ----

def test_one_stray_rank_a_billion_is_an_error_not_a_billion_element_set(tmp_path):
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    cw.write(tmp_path / "trace.1000000000.et", [cw.metadata(), cw.comp(1, "a", 1)])
    err, peak = _peak(read_chakra, tmp_path)
    assert isinstance(err, TraceError), err
    assert "trace.1000000000.et" in str(err) and "max_ranks" in str(err)
    assert peak < 4 * MiB


def test_a_gap_in_the_ranks_names_the_first_missing(tmp_path):
    for r in (0, 1, 3):
        cw.write(tmp_path / f"trace.{r}.et", [cw.metadata(), cw.comp(1, "a", 1)])
    with pytest.raises(TraceError, match=r"ranks must be 0 \.\.\. 3, one file each; missing rank 2"):
        read_chakra(tmp_path)
    with pytest.raises(TraceError, match=r"trace\.3\.et: rank 3 is beyond max_ranks=2"):
        read_chakra(tmp_path, max_ranks=2)


def test_a_folder_named_like_a_trace_file_is_named(tmp_path):
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    (tmp_path / "trace.1.et").mkdir()
    with pytest.raises(TraceError, match=r"trace\.1\.et is not a file"):
        read_chakra(tmp_path)


# ---- process-group JSON and metadata groups ----

def _one_rank(tmp_path, groups_text):
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    cw.write(tmp_path / "trace.1.et", [cw.metadata(), cw.comp(1, "a", 1)])
    (tmp_path / "comm_group.json").write_text(groups_text)
    return tmp_path


@pytest.mark.parametrize("text, match", [
    ('{"1": [0, Infinity]}', "Infinity"),
    ('{"1": [0, NaN]}', "NaN"),
    ('{"1": [0, 1e400]}', "inf"),
    ('{"1": [0.7, 1]}', "0.7"),
    ('{"1": [0.0, 1]}', "0.0"),
    ('{"1": ["0", 1]}', "'0'"),
    ('{"1": [true, 0]}', "True"),
    ('{"1": [0, -1]}', "-1"),
    ('{"1": 3}', "3"),
    ('{"1": "01"}', "'01'"),
    ('[[0, 1]]', "object"),
    ('{"1": [0, 1' + "0" * 5000 + "]}", "digits"),
])
def test_group_json_ranks_must_be_non_negative_integers(tmp_path, text, match):
    _one_rank(tmp_path, text)
    with pytest.raises(TraceError, match="comm_group.json") as err:
        read_chakra(tmp_path)
    assert match in str(err.value) and "\n" not in str(err.value)


def test_group_json_nested_100000_deep_is_a_trace_error(tmp_path):
    _one_rank(tmp_path, '{"1": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceError, match="comm_group.json: .*nested too deep"):
        read_chakra(tmp_path)


def test_group_json_that_is_not_utf8_is_a_trace_error(tmp_path):
    _one_rank(tmp_path, "")
    (tmp_path / "comm_group.json").write_bytes(b'{"1": [0, 1]}\xff')
    with pytest.raises(TraceError, match="comm_group.json: .*UTF-8"):
        read_chakra(tmp_path)


@pytest.mark.parametrize("ranks", [[0.0, 1], ["0", "1"], [True, False], [0, -1]])
def test_groups_passed_by_the_caller_are_checked_the_same_way(tmp_path, ranks):
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    cw.write(tmp_path / "trace.1.et", [cw.metadata(), cw.comp(1, "a", 1)])
    with pytest.raises(TraceError, match=r"groups: process group '1': ranks must be non-negative integers"):
        read_chakra(tmp_path, groups={"1": ranks})


def test_numpy_and_range_ranks_are_integers(tmp_path):
    np = pytest.importorskip("numpy")
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    cw.write(tmp_path / "trace.1.et", [cw.metadata(), cw.comp(1, "a", 1)])
    w = read_chakra(tmp_path, groups={"1": np.arange(2), "2": range(1, 2)})
    assert w.groups == {"1": (0, 1), "2": (1,)} and all(type(r) is int for r in w.groups["1"])


@pytest.mark.parametrize("groups", [[{"pg_name": "3", "ranks": [0.5, 1]}], [{"pg_name": "3", "ranks": "01"}],
                                    [{"pg_name": "3", "ranks": [0, True]}]])
def test_metadata_group_ranks_must_be_integers(tmp_path, groups):
    per_rank = [[cw.node(0, "pg", cw.METADATA, inputs=json.dumps(groups)), cw.coll(1, "ag", cw.ALL_GATHER, 64, pg="3")]
                for _ in range(2)]
    for r, nodes in enumerate(per_rank):
        cw.write(tmp_path / f"trace.{r}.et", [cw.metadata()] + nodes)
    with pytest.raises(TraceError, match=r"trace\.0\.et: node 0: process group '3': ranks must be (a list of )?"
                                         "non-negative"):
        read_chakra(tmp_path)


def test_metadata_groups_nested_deep_are_a_trace_error(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.node(0, "pg", cw.METADATA, inputs=deep)])
    with pytest.raises(TraceError, match=r"trace\.0\.et: node 0: .*nested too deep"):
        read_chakra(tmp_path)


# ---- Chakra node attributes of the wrong type ----

@pytest.mark.parametrize("node, match", [
    (cw.node(1, "c", cw.COLL, attrs=[cw.attr("comm_type", int64=0), cw.attr("comm_size", string="big")]),
     r"attribute comm_size must be a number of bytes >= 0, got 'big'"),
    (cw.node(1, "c", cw.COLL, attrs=[cw.attr("comm_type", int64=0), cw.attr("comm_size", double=float("nan"))]),
     r"attribute comm_size must be a number of bytes >= 0, got nan"),
    (cw.node(1, "c", cw.COLL, attrs=[cw.attr("comm_type", int64=0), cw.attr("comm_size", double=float("inf"))]),
     r"attribute comm_size must be a number of bytes >= 0, got inf"),
    (cw.node(1, "c", cw.COLL, attrs=[cw.attr("comm_type", int64=0), cw.attr("comm_size", boolean=True)]),
     r"attribute comm_size must be a number of bytes >= 0, got True"),
    (cw.node(1, "c", cw.COLL, attrs=[cw.attr("comm_type", string="ALL_REDUCE"), cw.attr("comm_size", int64=8)]),
     r"attribute comm_type must be a CollectiveCommType number, got 'ALL_REDUCE'"),
    (cw.node(1, "c", cw.COMP, attrs=[cw.attr("num_ops", string="x")]),
     r"attribute num_ops must be a number of FLOPs >= 0, got 'x'"),
    (cw.node(1, "c", cw.COMP, attrs=[cw.attr("num_ops", double=-1.0)]),
     r"attribute num_ops must be a number of FLOPs >= 0, got -1.0"),
    (cw.node(1, "s", cw.SEND, attrs=[cw.attr("comm_dst", string="x"), cw.attr("comm_size", int64=8)]),
     r"attribute comm_dst must be a rank \(an integer >= 0\), got 'x'"),
    (cw.node(1, "s", cw.SEND, attrs=[cw.attr("comm_dst", double=1.0), cw.attr("comm_size", int64=8)]),
     r"attribute comm_dst must be a rank \(an integer >= 0\), got 1.0"),
    (cw.node(1, "s", cw.RECV, attrs=[cw.attr("comm_src", int64=1), cw.attr("comm_size", int64=8),
                                      cw.attr("comm_tag", string="t")]),
     r"attribute comm_tag must be an integer, got 't'"),
    (cw.node(1, "c", cw.COMP, attrs=[cw.attr("is_cpu_op", string="yes")]),
     r"attribute is_cpu_op must be a bool, got 'yes'"),
], ids=["size-string", "size-nan", "size-inf", "size-bool", "type-string", "flops-string", "flops-negative",
        "dst-string", "dst-float", "tag-string", "cpu-string"])
def test_attributes_of_the_wrong_type_name_the_node_and_attribute(tmp_path, node, match):
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), node])
    with pytest.raises(TraceError, match=r"trace\.0\.et: node 1 \('\w'\): " + match):
        read_chakra(tmp_path)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_pipe_is_read_no_further_than_max_file_bytes(tmp_path):
    # a pipe (/dev/stdin, <(...)) says size 0: the limit was checked on that and the whole stream
    # read into memory; 4 MiB streamed against a 1000-byte limit
    with fed_fifo(tmp_path / "w.txt", b"x\n" * 2048, 1024) as path:
        with pytest.raises(TraceError, match=rf"{path}: the file holds more than max_file_bytes=1000"):
            read_simai_workload(path, max_file_bytes=1000)
    cw.write(tmp_path / "trace.0.et", [cw.metadata(), cw.comp(1, "a", 1)])
    cw.write(tmp_path / "trace.1.et", [cw.metadata(), cw.comp(1, "a", 1)])
    with fed_fifo(tmp_path / "comm_group.json", b"[" * 4096, 1024) as path:     # under a limit of its own
        with pytest.raises(TraceError, match=rf"{path}: the file holds more than max_group_bytes=1000"):
            read_chakra(tmp_path, max_group_bytes=1000)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_trace_streamed_without_a_size_is_cut_at_max_file_bytes(tmp_path):
    from flowsolver.traces._schema import _chunks

    with fed_fifo(tmp_path / "t.0.et", b"\x01" * 4096, 1024) as path:
        with pytest.raises(TraceError, match=rf"{path}: the file holds more than max_file_bytes=1000"):
            for _ in _chunks(path, 1000):
                pass
