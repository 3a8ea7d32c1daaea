"""flowsolver.nccl_tests.read on every shared nccl-tests log and on broken ones."""

import json
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from flowsolver import busbw_factor, nccl_tests  # noqa: E402

from ..helpers import fed_fifo  # noqa: E402

LOGS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
FILES = sorted(LOGS.glob("*.txt")) if LOGS.is_dir() else []
COLUMNS = ["size", "count", "type", "redop", "root", "placement", "time", "algbw", "busbw", "#wrong"]


def _sidecar(path):
    return json.loads(path.with_suffix(".json").read_text())


@pytest.mark.skipif(not FILES, reason="../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_shared_log_parses_to_consistent_rows(path):
    df = nccl_tests.read(path)
    meta = _sidecar(path)
    assert list(df.columns) == COLUMNS
    assert df.attrs["op"] == nccl_tests.OP_NAMES[meta["op"].replace("_", "")]
    if df.attrs["ranks"] is not None:       # logs without a device list cannot say
        assert df.attrs["ranks"] == meta["ranks"]
    ranks = meta["ranks"]
    # nccl-tests' own definitions, recomputed from the parsed size and time: algbw = size / time,
    # busbw = algbw x the op's factor (printed to 2 decimals)
    big = df[df["size"] >= 2**20]
    assert ((big["size"] / big["time"] / 1e3 - big["algbw"]).abs() <= 0.006 + 0.003 * big["algbw"]).all()
    factor = busbw_factor(df.attrs["op"], ranks)
    assert ((big["algbw"] * factor - big["busbw"]).abs() <= 0.01 + 0.003 * big["busbw"]).all()
    assert set(df["placement"]) <= {"out-of-place", "in-place"} and df["size"].is_monotonic_increasing is not None


@pytest.mark.skipif(not FILES, reason="../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
def test_header_details_are_read():
    oci = nccl_tests.read(LOGS / "oci_oke_2xA100-40GB_allreduce_1G-4G_nccl2.29.txt")
    assert oci.attrs["nccl_version"] == "2.29.3" and oci.attrs["avg_busbw"] == pytest.approx(185.594)
    assert oci.attrs["ranks"] == 16 and oci.attrs["nodes"] == 2           # device list trimmed to 4 lines
    moc = nccl_tests.read(LOGS / "moc_roce_2xH100_sendrecv_roce_4gpu.txt")
    assert moc.attrs["op"] == "send_recv" and moc.attrs["nccl_version"] == "2.26.2"
    # NCCL_ALGO=RING in its INFO lines, read; it does not govern a send / receive (not one of NCCL's
    # five functions), so no algorithm is forced for the log's op
    assert moc.attrs["nccl_algo"].lower() == "ring" and moc.attrs["algorithm"] is None
    assert oci.attrs["algorithm"] is None
    assert moc["#wrong"].isna().sum() == 13                              # in-place '#wrong' is N/A
    aws = nccl_tests.read(LOGS / "aws_2xp5_H100_allreduce_8B-16G.txt")    # '0: ' prefixes, no footer
    assert len(aws) == 2 * 32 and aws.attrs["avg_busbw"] is None


GOOD = """# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid 2 on hostA device  1 [0x15] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    20.48    0.05    0.05      0
                                                            20.00    0.05    0.05      0
        2048           512     float     sum      -1    20.48    0.10    0.10      0
"""


def test_wrapped_rows_and_missing_in_place_columns():
    df = nccl_tests.read(GOOD, op="all_reduce")
    assert list(df["size"]) == [1024, 1024, 2048] and list(df["placement"]) == ["out-of-place", "in-place",
                                                                                "out-of-place"]
    assert df["time"].tolist() == [20.48, 20.0, 20.48]


def test_bad_logs_raise_one_clear_error_each(tmp_path):
    with pytest.raises(ValueError, match="the log is empty"):
        nccl_tests.read("   \n")
    with pytest.raises(ValueError, match="no nccl-tests table"):
        nccl_tests.read("hello\nworld\n")
    with pytest.raises(ValueError, match="truncated at line 8"):
        nccl_tests.read(GOOD + "        4096          1024     float     sum\n")
    with pytest.raises(ValueError, match="header but no result rows"):
        nccl_tests.read(GOOD.split("        1024")[0])
    path = tmp_path / "all_gather_perf.log"
    path.write_text("# Collective test starting: all_gather_perf\n" + GOOD)
    with pytest.raises(ValueError, match="tests all_gather, not all_reduce"):
        nccl_tests.read(path, op="all_reduce")
    with pytest.raises(TypeError, match="path_or_text must be a path"):
        nccl_tests.read(3)


# ---- rows that are not data rows, rows that are damaged, files that are not there ----

def _write(tmp_path, text, name="all_reduce_perf.log"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_lines_that_are_not_data_rows_are_skipped(tmp_path):
    # nccl-tests and the launcher print warnings and notes among the rows; none has a row's shape
    lines = GOOD.splitlines()
    noisy = "\n".join(lines[:4] + ["Warning: the GPU clock is throttled", "3 warnings generated.",
                                   "node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'"] + lines[4:]) + "\n"
    df = nccl_tests.read(_write(tmp_path, noisy), op="all_reduce")
    assert list(df["size"]) == [1024, 1024, 2048] and df["time"].tolist() == [20.48, 20.0, 20.48]


@pytest.mark.parametrize("row, column, token", [
    ("        2048           512     float     sum      -1    abc    0.10    0.10      0", "time", "abc"),
    ("        2048          abc     float     sum      -1    20.48    0.10    0.10      0", "count", "abc"),
    ("        2048           512     float     sum      -1    nan    0.10    0.10      0", "time", "nan"),
    ("        2048           512     float     sum      -1    inf    0.10    0.10      0", "time", "inf"),
    ("        2048           512     float     sum      -1    1e400    0.10    0.10      0", "time", "1e400"),
    ("        2048           512     float     sum      -1    -20.5    0.10    0.10      0", "time", "-20.5"),
    ("        2048           512     float     sum      -1    20.48    0.10    x.10      0", "busbw", "x.10"),
    ("        2048           512     float     sum      xyz    20.48    0.10    0.10      0", "root", "xyz"),
    ("  99999999999999999999999  512  float  sum  -1  20.48  0.10  0.10  0", "size", "99999999999999999999999"),
])
def test_a_row_of_the_right_shape_with_a_bad_value_names_file_line_and_column(tmp_path, row, column, token):
    text = GOOD.replace("        2048           512     float     sum      -1    20.48    0.10    0.10      0", row)
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=rf"{path}:7: column '{column}' is '{token}', not ") as err:
        nccl_tests.read(path)
    assert "\n" not in str(err.value)


def test_a_row_with_a_word_too_many_names_file_and_line(tmp_path):
    # "float float": one value more than the header's columns, every column after it shifted
    text = GOOD.replace("512     float", "512     float float")
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=rf"{path}:7: the row has 10 values, .*9 columns out-of-place"):
        nccl_tests.read(path)
    both = GOOD.replace("20.48    0.05    0.05      0\n", "20.48    0.05    0.05      0  20.1  0.05  0.05  0  7\n")
    with pytest.raises(ValueError, match=rf"{path}:5: the row has 14 values, the header 13 columns"):
        nccl_tests.read(_write(tmp_path, both))


def test_a_missing_log_is_file_not_found_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in ("missing.log", tmp_path / "missing.log"):
        with pytest.raises(FileNotFoundError, match="missing.log") as err:
            nccl_tests.read(given)
        assert str(err.value.filename).endswith("missing.log")
    with pytest.raises(IsADirectoryError, match="not an nccl-tests log"):
        nccl_tests.read(tmp_path)


def test_the_log_size_is_bounded(tmp_path):
    path = _write(tmp_path, GOOD)
    assert len(nccl_tests.read(path, max_bytes=len(GOOD))) == 3
    with pytest.raises(ValueError, match=rf"{path}: the file is {len(GOOD)} bytes, more than the 100-byte limit"):
        nccl_tests.read(path, max_bytes=100)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_pipe_is_read_no_further_than_the_limit(tmp_path):
    # a pipe (/dev/stdin, <(...)) says size 0: the limit was checked on that and the whole stream
    # read (a 1 MB limit read GBs); 4 MiB streamed against a 1000-byte limit
    with fed_fifo(tmp_path / "pipe.log", b"# NCCL INFO filler line\n" * 1024, 170) as path:
        with pytest.raises(ValueError, match=rf"{path}: the file holds more than the 1000-byte limit on an "
                                             "nccl-tests log"):
            nccl_tests.read(path, max_bytes=1000)


def test_nccl_info_nranks_gives_the_rank_count_without_a_device_list():
    info = "node1:1:1 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 16 cudaDev 0 busId 1000 - Init START\n"
    no_devices = "\n".join(line for line in GOOD.splitlines() if "Rank" not in line) + "\n"
    assert nccl_tests.read(no_devices).attrs["ranks"] is None
    assert nccl_tests.read(info + no_devices).attrs["ranks"] == 16


def test_a_size_of_5000_digits_is_a_clear_error(tmp_path):
    # Python refuses to convert more than 4300 digits; the reader checks the length first
    huge = "1" + "0" * 5000
    path = _write(tmp_path, GOOD.replace("        2048           512", f"{huge}           512"))
    with pytest.raises(ValueError, match=rf"{path}:7: column 'size' is '1000000000.*', not an integer >= 0"):
        nccl_tests.read(path)


def test_a_row_wrapped_inside_its_out_of_place_part_is_joined(tmp_path):
    # a terminal wrapped the 2048 row after its redop: the rest (root, time, ...) on the next line
    text = GOOD.replace("512     float     sum      -1", "512     float     sum\n      -1")
    df = nccl_tests.read(_write(tmp_path, text), op="all_reduce")
    assert list(df["size"]) == [1024, 1024, 2048] and df["time"].tolist() == [20.48, 20.0, 20.48]
    assert df["root"].tolist() == [-1, -1, -1]


def test_two_tests_written_into_one_log_are_an_error_not_one_table(tmp_path):
    # `for t in all_reduce_perf all_gather_perf; do ./$t; done > log`: two tables, two ops
    two = ("# Collective test starting: all_reduce_perf\n" + GOOD +
           "# Collective test starting: all_gather_perf\n" + GOOD)
    with pytest.raises(ValueError, match=r"several tests \(all_gather, all_reduce\)"):
        nccl_tests.read(_write(tmp_path, two))
    # the same test twice (the classic header has no test line): the second table is named
    with pytest.raises(ValueError, match=r"all_reduce_perf.log:12: a second nccl-tests table"):
        nccl_tests.read(_write(tmp_path, GOOD + "# Avg bus bandwidth    : 0.05\n" + GOOD))


def test_the_op_comes_from_the_test_line_the_binary_or_the_file_name_not_from_any_op_word(tmp_path):
    # NCCL 2.26's algorithm matrix (lines without 'NCCL INFO', kept by `grep -v "NCCL INFO"`)
    # starts with a Broadcast row, and a host may be called reduce-node1: neither says the op
    matrix = ("Enabled NCCL Func/Proto/Algo Matrix:\n     Function |       LL     LL128    Simple   |\n"
              "    Broadcast |        1        0         1   |\n")
    lines = GOOD.splitlines()

    def body(count):        # 8 B rows over 2 ranks (algbw, busbw print 0.00): all-gather's, all-to-all's count is 1
        return "\n".join(lines[:1] + [lines[1].replace("hostA", "reduce-node1")] + lines[2:4]
                         + [f"8 {count} float sum -1 20.10 0.00 0.00 0 20.00 0.00 0.00 0"]) + "\n"
    path = _write(tmp_path, matrix + body(2), name="sendrecv_perf_2x1.txt")
    assert nccl_tests.read(path).attrs["op"] == "send_recv"                       # the file name's
    assert nccl_tests.read(path, op="send_recv").attrs["op"] == "send_recv"
    assert nccl_tests.read(matrix + body(2)).attrs["op"] is None                  # text alone: unsaid
    assert nccl_tests.read("srun ./build/alltoall_perf -b 8 -e 1G\n" + matrix + body(1)).attrs["op"] == "all_to_all"
    # NGC's containers ship the MPI builds as all_gather_perf_mpi (nccl-tests prints the binary's name)
    mpi = _write(tmp_path, "# Collective test starting: all_gather_perf_mpi\n" + body(1), name="run_allreduce_then.txt")
    assert nccl_tests.read(mpi).attrs["op"] == "all_gather"
    assert nccl_tests.read("mpirun -np 2 all_gather_perf_mpi -b 8\n" + body(1)).attrs["op"] == "all_gather"


def test_the_bus_bandwidth_factor_is_nccl_tests_and_refuses_what_it_cannot_price():
    # nccl-tests' src/*.cc: all-reduce 2 (p - 1) / p, all-gather / reduce-scatter / all-to-all
    # (p - 1) / p, broadcast / reduce / send-recv 1
    assert busbw_factor("all_reduce", 8) == 1.75 and busbw_factor("all_gather", np.int64(4)) == 0.75
    assert busbw_factor("broadcast", 16) == 1.0 and busbw_factor("all_to_all", 1) == 0.0
    for op in ("allreduce", "all-reduce", None):
        with pytest.raises(ValueError, match="op must be one of all_reduce"):
            busbw_factor(op, 8)
    for p in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="p must be an integer >= 1"):
            busbw_factor("all_reduce", p)


_HEAD = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
_ROW = "1048576 262144 float sum -1 30.10 34.84 60.97 0 29.90 35.07 61.37 0\n"     # 8 ranks: busbw 1.75 algbw


@pytest.mark.parametrize("token", ["3_0.1", "\uff130.10", "-0.0", "0x1e"])
def test_a_time_is_ascii_decimal_as_nccl_tests_prints_it(token):
    # Python's float() reads "3_0.1" as 30.1 and a full-width digit as a digit: a damaged row
    # would be read as other numbers
    with pytest.raises(ValueError, match="column 'time' is"):
        nccl_tests.read(_HEAD + _ROW.replace("30.10", token), op="all_reduce")
    assert nccl_tests.read(_HEAD + _ROW.replace("30.10", "3.01e1"), op="all_reduce")["time"][0] == 30.1


def test_rows_with_wrong_results_are_no_measurement_to_fit():
    import topologies as tp
    from flowsolver import calibrate
    log = nccl_tests.read("# nThread 1 nGpus 1\n" + "".join(
        f"#  Rank {r} Group  0 Pid 1 on node47 device {r} [0x1b] NVIDIA H100 80GB HBM3\n" for r in range(8))
        + _HEAD + _ROW.replace("60.97 0", "60.97 12"), op="all_reduce")
    with pytest.raises(ValueError, match="wrong results in 1 rows"):
        calibrate(tp.rail_optimized(nodes=1), [log])
