"""nccl-tests rows that time nothing (a time of 0) or only in place: a damaged row is a
ValueError naming its line, never a bare ZeroDivisionError; rows calibrate and ``--compare``
leave out are said (adv19d F7 and its minor items)."""

import warnings

import pytest

pd = pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import calibrate, nccl_tests  # noqa: E402

HEAD = ("# Collective test starting: all_reduce_perf\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n")


def _row(size, us, out_of_place=True):
    """An all-reduce row of 16 ranks as nccl-tests prints it: algbw = size / time (GB/s), busbw =
    algbw x 2 (16 - 1) / 16 (nccl-tests' PERFORMANCE.md)."""
    algbw = size / us / 1e3
    part = f"  {us:9.2f} {algbw:7.2f} {algbw * 30 / 16:7.2f}      0"
    out = part if out_of_place else "        N/A     N/A     N/A    N/A"
    return f"{size:12d}  {size // 4:12d}     float     sum      -1{out}{part}\n"


def test_a_row_timed_zero_is_a_damaged_row_naming_its_line():
    # nccl-tests prints algbw = size / time: a time of 0.00 us with an algbw of 0.00 GB/s is no
    # row it printed (it would print inf); line 4 is the second data row (two header lines)
    text = HEAD + _row(2**20, 60.0) + (" " * 5 + "4194304       1048576     float     sum      -1      0.00    0.00"
                                       "    0.00      0      0.00    0.00    0.00      0\n")
    with pytest.raises(ValueError, match=r"^<text>:4: the row's time 0\.00 us and algbw 0\.00 GB/s disagree.*"
                                         r"4194304 B / 0\.00 us = no finite bandwidth\): a damaged row"):
        nccl_tests.read(text)


def test_a_log_timed_in_place_only_says_calibrate_uses_out_of_place_rows():
    text = HEAD + "".join(_row(2**k, 5200.0 * 2.0 ** (k - 30) + 30, out_of_place=False) for k in range(20, 34, 2))
    df = nccl_tests.read(text)
    assert (df["placement"] == "in-place").sum() == 7 and df.loc[df["placement"] == "out-of-place", "time"].isna().all()
    with pytest.raises(ValueError, match=r"<text>: the log times its 7 rows in place only .*calibrate and flowsolver "
                                         r"collective --compare use the out-of-place rows"):
        calibrate(tp.rail_optimized(nodes=2), [df])
    # the way out the message gives: the in-place rows relabelled are calibrated on (7 rows)
    placed = df[df["placement"] == "in-place"].assign(placement="out-of-place")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(calibrate(tp.rail_optimized(nodes=2), [placed]).residuals) == 7


def test_rows_timed_zero_that_are_left_out_are_said_with_their_lines():
    # a table made by hand ("0" bandwidths: no algbw to check the time against): rows of 1 MiB ..
    # 4 GiB on lines 3-9, then two rows of time 0 on lines 10 and 11
    text = HEAD + "".join(_row(2**k, 5200.0 * 2.0 ** (k - 30) + 30) for k in range(20, 34, 2))
    text += "  8589934592 2147483648 float sum -1 0 0 0 0 0 0 0 0\n  17179869184 4294967296 float sum -1 0 0 0 0 0 0 0 0\n"
    df = nccl_tests.read(text)
    assert df.attrs["zero_time_lines"] == [10, 11]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = calibrate(tp.rail_optimized(nodes=2), [df])
    said = [str(w.message) for w in caught if "0 us" in str(w.message)]
    assert said == ["<text>: 2 out-of-place rows (lines 10, 11) time 0 us: no measurement, left out (7 rows used)"]
    assert len(cal.residuals) == 7
    # a DataFrame without the reader's lines (built by hand): its sizes are named instead
    bare = df.copy()
    bare.attrs = {k: v for k, v in df.attrs.items() if k != "zero_time_lines"}
    with pytest.warns(UserWarning, match=r"2 out-of-place rows \(sizes 8589934592, 17179869184 B\) time 0 us"):
        calibrate(tp.rail_optimized(nodes=2), [bare])
