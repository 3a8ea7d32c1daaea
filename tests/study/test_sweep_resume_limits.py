"""A sweep's results file read back for a resume: its column names checked before the rest is
read, and its size bounded (flowsolver._sweep_files.read_rows)."""

import tracemalloc

import pandas as pd
import pytest

from flowsolver import _sweep_files
from flowsolver._sweep_files import read_rows

_HEADER = "id,task,nodes,status,error,gpus,time,algbw,busbw\n"
_ROW = "7d899f01257d3a07,collective,2,ok,,16,8.1e-05,1.29e10,2.42e10\n"


def test_a_large_csv_that_is_not_a_sweeps_is_refused_from_its_first_line(tmp_path):
    path = tmp_path / "other.csv"
    row = "2026-01-01T00:00:00,node17,gpu3,71.5,402.66,ok\n"
    path.write_text("timestamp,host,gpu,temp,power,state\n" + row * (8 * 2**20 // len(row)))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"cannot resume from .*other\.csv.*no 'id', 'status' column"):
            read_rows(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the file is 8 MiB; reading all of it takes about 20 times that, its first line a few bytes
    assert peak < 2**20, peak


def test_a_sweeps_csv_over_the_limit_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    path.write_text(_HEADER + _ROW * 40)
    size = len(_HEADER) + 40 * len(_ROW)
    assert len(read_rows(path, max_bytes=size)) == 40                  # at the limit: read
    with pytest.raises(ValueError, match=rf"holds {size} bytes, more than the {size - 1} .*"
                                         "FLOWSOLVER_RESULTS_MAX_BYTES"):
        read_rows(path, max_bytes=size - 1)
    monkeypatch.setenv("FLOWSOLVER_RESULTS_MAX_BYTES", str(size - 1))
    with pytest.raises(ValueError, match=rf"more than the {size - 1} "):
        read_rows(path)
    monkeypatch.setenv("FLOWSOLVER_RESULTS_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="FLOWSOLVER_RESULTS_MAX_BYTES must be an integer"):
        read_rows(path)


def test_the_default_limit_holds_max_scenarios_rows():
    from flowsolver._sweep_grid import MAX_SCENARIOS

    # a sweep's CSV row is ~190 bytes (_ROW above is 62: the columns of every task are wider)
    assert _sweep_files.MAX_RESULTS_BYTES >= MAX_SCENARIOS * 190 * 3


def test_a_parquet_file_not_a_sweeps_or_of_too_many_rows_is_refused(tmp_path, monkeypatch):
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": range(1000), "b": 1.0}).to_parquet(other, index=False)
    with pytest.raises(ValueError, match=r"no 'id', 'status' column"):
        read_rows(other)
    mine = tmp_path / "r.parquet"
    pd.DataFrame({"id": [f"{i:016x}" for i in range(50)], "status": "ok"}).to_parquet(mine, index=False)
    assert len(read_rows(mine)) == 50
    monkeypatch.setattr(_sweep_files, "MAX_RESULTS_ROWS", 49)
    with pytest.raises(ValueError, match=r"holds 50 rows, more than the 49"):
        read_rows(mine)
