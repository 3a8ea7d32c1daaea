"""nccl_tests.read and calibrate on logs an adversary built: the right numbers or a ValueError
naming the file (and line) and what is wrong, never silently other numbers."""

import bz2
import gzip
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import calibrate, collective, nccl_tests  # noqa: E402
from flowsolver.collectives import checked_log  # noqa: E402

LOGS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
HEAD = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n")


def _devices(ranks, per_host=8):
    return "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r // per_host} device {r % per_host} [0x0f] NVIDIA H100\n"
                   for r in ranks)


def _info(nranks):
    return f"host0:1:1 [0] NCCL INFO comm 0x55 rank 0 nranks {nranks} cudaDev 0 busId 1000 - Init COMPLETE\n"


# 1 GiB all-reduce, 5000 us: algbw = 2^30 B / 5000 us = 214.75 GB/s; busbw = algbw x 2 (p - 1) / p
# (nccl-tests' PERFORMANCE.md): 375.81 for 8 ranks, 402.66 for 16
def _row(busbw):
    return f"  1073741824  268435456 float sum -1 5000.0 214.75 {busbw} 0 5000.0 214.75 {busbw} 0\n"


R8, R16 = _row("375.81"), _row("402.66")


# ---- 1. the rank count: every witness, and a device list cut short ----

def test_a_device_list_cut_short_gives_way_to_nccl_and_the_bandwidth_ratio():
    df = nccl_tests.read(_devices(range(8)) + _info(16) + HEAD + R16, op="all_reduce")
    assert df.attrs["ranks"] == 16 and "cut short" in df.attrs["ranks_from"]
    # ranks missing between the list's first and last: evidently trimmed, one witness is enough
    assert nccl_tests.read(_devices([0, 7, 8, 15]) + HEAD + R16, op="all_reduce").attrs["ranks"] == 16


@pytest.mark.parametrize("text, figures", [
    (_devices(range(8)) + HEAD + R16, ["names ranks up to 7", "busbw / algbw says 16"]),       # a list of 8, 16
    (_devices(range(16)) + HEAD + R8, ["names ranks up to 15", "busbw / algbw says 8"]),       # 16 named, 8 ran
    (_devices(range(8)) + _info(16) + HEAD + R8, ["NCCL INFO nranks says 16", "busbw / algbw says 8"]),
    (_devices(range(8)) + _info(16) + HEAD + _row("0.00").replace("214.75", "0.00"), ["up to 7", "nranks says 16"]),
])
def test_rank_counts_that_disagree_are_refused_giving_each(text, figures):
    with pytest.raises(ValueError, match="the log's rank counts disagree") as err:
        nccl_tests.read(text, op="all_reduce")
    assert all(f in str(err.value) for f in figures)


def test_a_table_read_without_its_op_is_checked_against_the_ratio_when_calibrated():
    df = nccl_tests.read(_devices(range(8)) + HEAD + R16)          # no op: the ratio cannot be read
    assert df.attrs["ranks"] == 8
    with pytest.raises(ValueError, match=r"rank counts disagree \(its device list says 8, busbw / algbw of "
                                         r"all_reduce allows 16 to 16\)"):
        checked_log(df, "all_reduce", 8, False)


def test_all_gather_sizes_are_the_count_times_the_ranks():
    # nccl-tests prints all-gather's full buffer and the count per rank (src/all_gather.cu): 16 ranks
    rows = "  1048576  16384 float none -1 100.0 10.49 9.83 0 100.0 10.49 9.83 0\n"        # 10.49 x 15 / 16
    assert nccl_tests.read(HEAD + rows, op="all_gather").attrs["ranks"] == 16
    with pytest.raises(ValueError, match=r"names ranks up to 31 .* size / \(count x type bytes\) says 16"):
        nccl_tests.read(_devices(range(32)) + HEAD + rows, op="all_gather")


def test_a_rank_listed_on_two_hosts_names_the_line(tmp_path):
    # mpirun without MPI support: each process a rank 0 of its own run, one table each
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(_devices(range(8)) + _devices([3], per_host=1) + HEAD + R8)
    with pytest.raises(ValueError, match=rf"{path}:9: the device list names rank 3 twice, on host0 and host3"):
        nccl_tests.read(path, op="all_reduce")
    assert nccl_tests.read(_devices(range(8)) + _devices([3]) + HEAD + R8).attrs["ranks"] == 8     # a repeat


@pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/nccl-tests is absent (optional data)")
def test_the_shared_16_rank_log_with_its_second_host_cut_is_refused(tmp_path):
    lines = (LOGS / "oci_oke_2xA100-40GB_allreduce_8B-8G.txt").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(line for line in lines if not any(f"Rank {r:2d} " in line for r in range(8, 16))))
    with pytest.raises(ValueError, match=r"cut.txt: the log's rank counts disagree .*up to 7.*busbw / algbw says 16"):
        nccl_tests.read(cut, op="all_reduce")


# ---- 2. nccl-tests binaries flowsolver has no model of ----

@pytest.mark.parametrize("binary, op", [("gather", "all_gather"), ("scatter", "reduce_scatter"),
                                        ("hypercube", "all_gather"), ("alltoallv", "all_to_all")])
def test_a_test_flowsolver_does_not_model_is_refused_not_taken_for_another(tmp_path, binary, op):
    body = "# Collective test starting: {}_perf\n".format(binary) + HEAD + R8
    with pytest.raises(ValueError, match=rf"nccl-tests' {binary}_perf, which flowsolver has no model of"):
        nccl_tests.read(body, op=op)
    with pytest.raises(ValueError, match=rf"{binary}_perf"):
        nccl_tests.read(f"srun ./build/{binary}_perf -b 8 -e 1G\n" + HEAD + R8, op=op)
    path = tmp_path / f"run_{binary}_perf_2x8.log"
    path.write_text(HEAD + R8)
    with pytest.raises(ValueError, match=rf"{path}: the log is of nccl-tests' {binary}_perf"):
        nccl_tests.read(path, op=op)


# ---- 3. failed runs: the footer, older nccl-tests' error column ----

OLD = """# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144   float     sum    40.15   26.12   45.70  {err}    39.98   26.23   45.90  0e+00
# Out of bounds values : {oob}
"""


def test_a_failed_footer_is_no_measurement_whatever_the_columns():
    failed = nccl_tests.read(OLD.format(err="0e+00", oob="1 FAILED"), op="all_reduce")
    with pytest.raises(ValueError, match="'Out of bounds values : 1 FAILED'"):
        checked_log(failed, "all_reduce", 8, True)
    new = nccl_tests.read(HEAD + R8 + "# Out of bounds values : 2 FAILED\n", op="all_reduce")
    with pytest.raises(ValueError, match="2 FAILED"):
        checked_log(new, "all_reduce", 8, True)


@pytest.mark.parametrize("err, ok", [("2e+00", False), ("4e-04", False), ("7e-05", True), ("1e-06", True)])
def test_older_nccl_tests_error_column_beyond_round_off_is_refused(err, ok):
    # nccl-tests before 2.13 (src/common.cu DeltaMaxValue): a float row failed where its largest
    # deviation passed 1e-5 x (nranks - 1): 7e-5 for 8 ranks
    df = nccl_tests.read(OLD.format(err=err, oob="0 OK"), op="all_reduce")
    assert df["error"].tolist() == [float(err), 0.0]
    if ok:
        assert checked_log(df, "all_reduce", 8, True) is df
    else:
        with pytest.raises(ValueError, match="wrong results in 1 rows"):
            checked_log(df, "all_reduce", 8, True)


# ---- 4. the size limit, and how to lift it from Python and from the command line ----

def test_the_size_limit_names_the_environment_variable_the_command_line_can_set(tmp_path, monkeypatch):
    from flowsolver.cli._arguments import in_cli_words
    from flowsolver.cli._parser import build_parser
    assert nccl_tests.MAX_BYTES == 2**24
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(HEAD + R8)
    monkeypatch.setenv("FLOWSOLVER_LOG_MAX_BYTES", "100")
    with pytest.raises(ValueError, match="more than the 100-byte limit") as err:
        nccl_tests.read(path)
    for command in ("collective", "calibrate"):       # collective's --max-bytes is its largest message size
        said = in_cli_words(str(err.value), build_parser(), command)
        assert "FLOWSOLVER_LOG_MAX_BYTES" in said and "--max-bytes" not in said
    assert len(nccl_tests.read(path, max_bytes=10**4)) == 2                  # the keyword wins
    monkeypatch.setenv("FLOWSOLVER_LOG_MAX_BYTES", "1000")
    assert len(nccl_tests.read(path)) == 2
    monkeypatch.setenv("FLOWSOLVER_LOG_MAX_BYTES", "1e6")
    with pytest.raises(ValueError, match="FLOWSOLVER_LOG_MAX_BYTES must be an integer"):
        nccl_tests.read(path)


# ---- 5. rows NCCL's messages broke, rows with a damaged size ----

INTERLEAVED = _devices([0, 7, 8, 15]) + HEAD + """\
  1073741824  268435456  float  sum  -1  10908.0  98.44  184.57  0  11220.1  95.70  179.43  0
  2147483648  536870912  float  sum  -1inst-qfvws:490:520 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0
inst-qfvws:490:520 [0] NCCL INFO Connected all trees
  21500.1  99.88  187.28  0  21629.9  99.28  186.16  0
  4294967296  1073741824  float  sum  -1  42721.7  100.53  188.50  0  42920.8  100.07  187.63  0
"""


def test_a_row_an_nccl_message_broke_is_stitched_back():
    df = nccl_tests.read(INTERLEAVED, op="all_reduce")
    out = df[df["placement"] == "out-of-place"]
    assert out["size"].tolist() == [2**30, 2**31, 2**32] and out["time"].tolist() == [10908.0, 21500.1, 42721.7]
    assert df[df["size"] == 2**31]["busbw"].tolist() == [187.28, 186.16] and df.attrs["ranks"] == 16


def test_nccl_lines_without_a_host_prefix_between_a_wrapped_row_s_parts_are_skipped():
    wrapped = HEAD + R8.replace(" 5000.0 214.75 375.81 0 5000.0", "\n[1,0]<stdout>:NCCL INFO Bootstrap\n 5000.0 214.75 "
                                "375.81 0 5000.0")
    assert nccl_tests.read(wrapped, op="all_reduce")["time"].tolist() == [5000.0, 5000.0]


def test_a_broken_row_that_cannot_be_told_apart_names_its_line(tmp_path):
    # "-11node": root -1 and host 1node, or root -11 and host node; the log's other NCCL lines say
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(INTERLEAVED.replace("-1inst-qfvws:490", "-11node:490"))
    with pytest.raises(ValueError, match=rf"{path}:7: an NCCL message is printed into a data row"):
        nccl_tests.read(path, op="all_reduce")
    told = INTERLEAVED.replace("inst-qfvws", "1node")
    assert nccl_tests.read(told, op="all_reduce")["root"].tolist() == [-1] * 6


def test_a_row_with_a_size_that_is_no_integer_names_its_line_counting_nccl_lines(tmp_path):
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(_info(8) + HEAD + R8 + "2K 512 float sum -1 9.0 0.10 0.09 0 9.1 0.10 0.09 0\n" + R8)
    with pytest.raises(ValueError, match=rf"{path}:4: column 'size' is '2K'"):
        nccl_tests.read(path, op="all_reduce")
    path.write_text(_info(8) + HEAD + R8 + R8.replace("  268435456", "  5x2"))
    with pytest.raises(ValueError, match=rf"{path}:4: column 'count' is '5x2'"):       # line 3 without NCCL's
        nccl_tests.read(path, op="all_reduce")


# ---- 6. NCCL_PROTO, honoured as NCCL_ALGO is ----

def test_a_forced_protocol_is_read_and_calibrated_with():
    g = tp.rail_optimized(nodes=1)
    sizes = [2**k for k in (10, 13, 16, 19, 22, 25)]
    times = [collective(g, "all_reduce", s, protocol="Simple").time * 1e6 for s in sizes]
    rows = "".join(f"{s:12d} {s // 4:12d} float sum -1 {t:.2f} 0 0 0\n" for s, t in zip(sizes, times))
    head = HEAD.split("#wrong")[0] + "#wrong\n"
    plain = _devices(range(8)) + head + rows
    forced = "host0:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n" + plain
    assert nccl_tests.read(forced, op="all_reduce").attrs["protocol"] == "Simple"
    assert nccl_tests.read(forced.replace("to Simple", "to LL,LL128"), op="all_reduce").attrs["protocol"] is None
    said, given, auto = (calibrate(g, [log], op="all_reduce", **kw) for log, kw in
                         ((forced, {}), (plain, dict(protocol="Simple")), (plain, {})))
    assert said.residuals["model"].tolist() == given.residuals["model"].tolist()
    assert said.residuals["model"].tolist() != auto.residuals["model"].tolist()       # LL at the small sizes


# ---- 7. gzip, UTF-16, other files ----

def test_gzip_and_utf16_logs_read_as_the_text_and_other_files_say_what_they_are(tmp_path):
    text = _devices(range(8)) + HEAD + R8
    want = nccl_tests.read(text, op="all_reduce")
    for name, data in (("log.gz", gzip.compress(text.encode())), ("bom16.txt", text.encode("utf-16")),
                       ("le16.txt", text.encode("utf-16-le")), ("bom8.txt", b"\xef\xbb\xbf" + text.encode()),
                       ("padded.txt", text.encode() + b"\x00" * 64)):         # a crash's NUL padding: still text
        (tmp_path / name).write_bytes(data)
        got = nccl_tests.read(tmp_path / name, op="all_reduce")
        assert got["time"].tolist() == want["time"].tolist() and got.attrs["ranks"] == 8
    for name, data, said in (("log.bz2", bz2.compress(text.encode()), "a bzip2 file"),
                             ("bin.txt", b"\x00\x01\x02\x03" * 100, "a binary file"),
                             ("bad.gz", b"\x1f\x8b\x08\x00garbage", "a gzip file that does not unpack")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"{tmp_path / name}: {said}"):
            nccl_tests.read(tmp_path / name)
    (tmp_path / "big.gz").write_bytes(gzip.compress(text.encode() * 10))
    with pytest.raises(ValueError, match="unpacks to more than 1000 bytes"):
        nccl_tests.read(tmp_path / "big.gz", max_bytes=1000)


# ---- 8. units, sizes against counts, tables of several types ----

def test_a_units_line_other_than_nccl_tests_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "all_reduce_perf.log"
    units = "#  (B)  (elements)        (ms)  (GB/s)  (GB/s)        (ms)  (GB/s)  (GB/s)\n"
    path.write_text(HEAD + units + R8)
    with pytest.raises(ValueError, match=rf"{path}:2: the table's units line says \(ms\), \(ms\)"):
        nccl_tests.read(path)
    path.write_text(HEAD + units.replace("(ms)", "(us)") + R8)
    assert nccl_tests.read(path)["time"].tolist() == [5000.0, 5000.0]


def test_a_size_that_is_not_its_count_of_its_type_names_the_line(tmp_path):
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(HEAD + R8 + "        2048           256     float     sum      -1    20.48    0.10    0.10   0\n")
    with pytest.raises(ValueError, match=rf"{path}:3: the row's size 2048 B is not its count 256 x 4 B \(float\)"):
        nccl_tests.read(path, op="all_reduce")
    half = "        2048          1024      half     sum      -1    20.48    0.10    0.10      0\n"
    assert nccl_tests.read(HEAD + R8 + half, op="all_reduce")["size"].tolist() == [2**30, 2**30, 2048]


def test_rows_of_several_types_or_reductions_are_not_one_calibration():
    g = tp.rail_optimized(nodes=1)
    half = R8.replace("268435456 float", "536870912 half")
    with pytest.raises(ValueError, match=r"the all_reduce rows mix types \(float, half; nccl-tests -d all"):
        calibrate(g, [_devices(range(8)) + HEAD + R8 + half], op="all_reduce")
    with pytest.raises(ValueError, match=r"mix redops \(max, sum"):
        calibrate(g, [_devices(range(8)) + HEAD + R8 + R8.replace("sum", "max")], op="all_reduce")
    with pytest.raises(ValueError, match=r"<text>: the all_reduce rows mix types"):        # two logs
        calibrate(g, [_devices(range(8)) + HEAD + R8, _devices(range(8)) + HEAD + half], op="all_reduce")
    mixed = nccl_tests.read(_devices(range(8)) + HEAD + R8 + half, op="all_reduce")   # as --compare checks a log
    with pytest.raises(ValueError, match=r"mix types \(float, half"):
        checked_log(mixed, "all_reduce", 8, True)


# ---- 9. a row's time against its own algbw (nccl-tests prints algbw = size / 1e9 / seconds) ----

@pytest.mark.parametrize("time, ok", [
    ("5000.0", True),       # 2^30 B / 5000.0 us = 214.748 GB/s: 214.75 printed
    ("5000.1", True),       # 5000.05 .. 5000.15 us: 214.747 .. 214.743 GB/s, the former 214.75
    ("5000.4", False),      # 214.735 .. 214.731 GB/s: 214.74 or 214.73, not 214.75
    ("5001.0", False),      # 214.705 GB/s
    ("8000.0", False),      # a digit flipped: 134.22 GB/s
    ("5000", True),         # printed to the unit (nccl-tests' %7.0f past 10,000 us): 4999.5 .. 5000.5
])
def test_a_time_that_contradicts_its_algbw_is_a_damaged_row(time, ok):
    text = _devices(range(8)) + HEAD + R8.replace("5000.0", time, 1)
    if ok:
        assert nccl_tests.read(text, op="all_reduce")["time"].iloc[0] == float(time)
    else:
        with pytest.raises(ValueError, match=rf"<text>:10: the row's time {time} us and algbw 214.75 GB/s disagree"):
            nccl_tests.read(text, op="all_reduce")
    # a table made by hand from other timings, "0" for its bandwidths: nothing to compare
    bare = _devices(range(8)) + HEAD + f"  1073741824  268435456 float sum -1 {time} 0 0 0 {time} 0 0 0\n"
    assert nccl_tests.read(bare, op="all_reduce")["time"].iloc[0] == float(time)


def test_the_flipped_digit_of_a_real_log_is_refused():
    path = LOGS / "aws_2xp5_H100_allreduce_8B-16G.txt"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data: optional data, not shipped)")
    text = path.read_text()
    row = "268435456      67108864     float     sum      -1   1468.2  182.83  342.81"
    assert row in text and nccl_tests.read(text) is not None           # 2^28 B / 1468.2 us = 182.83 GB/s
    with pytest.raises(ValueError, match=r"time 4468\.2 us and algbw 182\.83 GB/s disagree.*60\.08 GB/s"):
        nccl_tests.read(text.replace(row, row.replace("1468.2", "4468.2")))
