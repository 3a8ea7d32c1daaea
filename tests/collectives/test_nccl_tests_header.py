"""What nccl-tests' header and device list say beyond the table: the ``-S 1`` timestamp column,
``-G`` (CUDA graph launches) and an ``NCCL_TESTS_SPLIT_MASK`` run's groups. The fixtures are
printed here with nccl-tests' own formats (NVIDIA/nccl-tests a0b82b2, src/util.cu:
writeDeviceReport, writeResultHeader, writeBenchmarkLineBody, writeTimestamp)."""

import pytest

from flowsolver import nccl_tests


def _log(ranks=2, groups=None, graph=0, stamps=False, ngpus=1):
    """An all-reduce log as nccl-tests prints it; ``groups`` the Group (color) of each rank."""
    groups = groups or [0] * ranks
    out = ["# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
           "# Collective test starting: all_reduce_perf",
           "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d "
           "validation: %d graph: %d unalign: %d" % (1, ngpus, 8, 1048576, 1024, "factor", 5, 20, 1, 1, graph, 0),
           "#", "# Using devices"]
    for r in range(ranks):
        host = "hostA" if r < ranks // 2 else "hostB"
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s" % (
            r, groups[r], 1000 + r, host, r % 8, 0, 0x18 + r, 0, "NVIDIA H100 80GB HBM3"))
    ts_lbl, ts_pad, ts_fmt = ("timestamp", 19, "%Y-%m-%d %H:%M:%S") if stamps else ("", 0, "")
    out.append("#")
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
        "#wrong", ts_pad, ts_lbl))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad,
        ts_fmt))
    per = ranks // len(set(groups))                    # a row's ranks: its group's (the split communicator's)
    for k, (size, t) in enumerate(((8, 20.0), (1048576, 40.0))):
        algbw = size / t / 1e3
        busbw = algbw * 2 * (per - 1) / per
        line = "%12d  %12d  %8s  %6s  %6d" % (size, size // 4, "float", "sum", -1)
        for _ in range(2):                                  # out-of-place, then in-place
            line += "  %7.2f  %6.2f  %6.2f  %6g" % (t, algbw, busbw, 0)
        if stamps:
            line += "%21s" % f"2026-12-06 09:31:{34 + k:02d}"
        out.append(line)
    out += ["# %-20s : %d %s" % ("Out of bounds values", 0, "OK"), "# %-20s : %g %s" % ("Avg bus bandwidth", 1.0, ""),
            "#", "# Collective test concluded: all_reduce_perf", ""]
    return "\n".join(out)


def test_a_timestamp_column_is_read_as_the_rows_time_stamp():
    df = nccl_tests.read(_log(stamps=True))
    assert list(df["size"]) == [8, 8, 1048576, 1048576] and list(df["time"]) == [20.0] * 2 + [40.0] * 2
    assert list(df["#wrong"]) == [0] * 4 and df.attrs["ranks"] == 2
    # nccl-tests prints the stamp once, after the in-place part: it is the row's, both placements'
    assert list(df["timestamp"]) == ["2026-12-06 09:31:34"] * 2 + ["2026-12-06 09:31:35"] * 2


def test_a_damaged_timestamp_names_the_line():
    text = _log(stamps=True).replace("2026-12-06 09:31:35", "2026-12-06 9:31")
    with pytest.raises(ValueError, match=r"<text>:\d+: the row's timestamp is '2026-12-06 9:31'"):
        nccl_tests.read(text)


def test_a_split_run_is_refused_naming_the_split_and_what_is_read():
    # NCCL_TESTS_SPLIT_MASK=0x8 on 16 processes (src/common.cu: color = proc & mask): Group 0 and 8
    text = _log(ranks=16, groups=[0] * 8 + [8] * 8)
    with pytest.raises(ValueError) as info:
        nccl_tests.read(text)
    message = str(info.value)
    assert "NCCL_TESTS_SPLIT_MASK" in message and "Group 0: 8 ranks; Group 8: 8 ranks" in message
    assert "one communicator" in message and "cut short" not in message


def test_one_group_of_any_colour_is_one_communicator():
    assert nccl_tests.read(_log(ranks=8, groups=[3] * 8)).attrs["ranks"] == 8


def test_the_headers_graph_launches_are_read():
    assert nccl_tests.read(_log(graph=1)).attrs["graph"] == 1           # -G 1: CUDA graph launches
    assert nccl_tests.read(_log(graph=0)).attrs["graph"] == 0
    older = _log().replace(" graph: 0 unalign: 0", "")                  # a header without the field
    assert nccl_tests.read(older).attrs["graph"] is None


def test_the_header_names_the_nccl_release_without_nccl_debug():
    """nccl-tests prints the library's NCCL_VERSION_CODE on its first line (src/common.cu:
    ``nccl-library=%d``, X*10000 + Y*100 + Z, X*1000 + Y*100 + Z before 2.9): a log without
    NCCL_DEBUG=INFO's ``NCCL version`` line still says its release (newuser24: it ran under 2.30's
    rules); the NCCL INFO line, where there is one, wins."""
    log = _log()
    assert nccl_tests.read(log).attrs["nccl_version"] == "2.28.3"
    older = log.replace("nccl-headers=22803 nccl-library=22803", "nccl-headers=2708 nccl-library=2708")
    assert nccl_tests.read(older).attrs["nccl_version"] == "2.7.8"
    info = "hostA:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + log
    assert nccl_tests.read(info).attrs["nccl_version"] == "2.21.5"
