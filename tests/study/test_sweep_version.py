"""A resumed sweep runs again the rows another flowsolver version computed (adv17c finding 1)."""

import sys

import pandas as pd
import pytest

import flowsolver as fs
from flowsolver import sweep

import topologies as tp

GRID = {"nodes": [2], "link": ["ib_ndr", "roce_400g"], "op": ["all_reduce"], "size": [2**26]}


def _today(link):
    # the figure the installed model gives for the scenario, computed one call at a time
    return fs.collective(tp.rail_optimized(2, link=link), "all_reduce", 2**26).time


def _ran(monkeypatch):
    sw = sys.modules["flowsolver._sweep"]
    real, ran = sw._run_batch, []
    monkeypatch.setattr(sw, "_run_batch", lambda s, idx: ran.append(len(idx)) or real(s, idx))
    return ran


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("version", [None, "", "0.0.9"])
def test_rows_of_another_version_or_of_no_version_run_again(tmp_path, monkeypatch, suffix, version):
    out = tmp_path / f"r{suffix}"
    sweep(GRID, out=out, progress=False, cache_dir=None)
    old = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert list(old["flowsolver_version"]) == [fs.__version__] * 2 and old.columns[-1] == "flowsolver_version"
    old["time"] *= 1.5                                  # an older model's figure, 1.5 x today's
    if version is None:
        old = old.drop(columns="flowsolver_version")   # a file written before the column existed
    else:
        old["flowsolver_version"] = version
    old.to_parquet(out, index=False) if suffix == ".parquet" else old.to_csv(out, index=False)
    ran = _ran(monkeypatch)
    named = "a version before rows named theirs" if not version else version
    with pytest.warns(RuntimeWarning, match=rf"2 finished row\(s\) computed by another flowsolver \(2 by {named}; "
                                            rf"this is {fs.__version__}"):
        df = sweep(GRID, out=out, progress=False, cache_dir=None)
    assert ran == [2]
    assert list(df["time"]) == pytest.approx([_today("ib_ndr"), _today("roce_400g")], rel=1e-12)
    assert list(df["flowsolver_version"]) == [fs.__version__] * 2
    back = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert len(back) == 2 and list(back["flowsolver_version"]) == [fs.__version__] * 2


def test_rows_of_this_version_resume_and_another_grid_s_old_rows_stay_in_the_file(tmp_path, monkeypatch):
    out = tmp_path / "r.csv"
    sweep({**GRID, "nodes": [1]}, out=out, progress=False, cache_dir=None)          # another grid's rows
    old = pd.read_csv(out)
    old["flowsolver_version"] = "0.0.9"
    old.to_csv(out, index=False)
    first = sweep(GRID, out=out, progress=False, cache_dir=None)
    ran = _ran(monkeypatch)
    again = sweep(GRID, out=out, progress=False, cache_dir=None)                   # nothing to run again
    assert ran == [] and list(again["time"]) == list(first["time"])
    back = pd.read_csv(out)
    assert sorted(back["flowsolver_version"]) == ["0.0.9", "0.0.9", fs.__version__, fs.__version__]
