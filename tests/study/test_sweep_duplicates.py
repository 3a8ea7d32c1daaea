"""adv19b M2: a grid that lists a scenario twice (nodes=[1, 2, 1]) gives a row at each of its
places, in scenario order, and a resumed sweep keeps every one of them (it lost one)."""

import warnings

import pandas as pd

import flowsolver as fs

GRID = {"family": ["rail_optimized"], "nodes": [1, 2, 1], "op": ["all_reduce"], "size": [2 ** 20]}


def test_duplicate_scenarios_keep_their_places_and_survive_a_resume(tmp_path):
    out = tmp_path / "dup.csv"
    first = fs.sweep(GRID, out=out, progress=False)
    assert list(first["nodes"]) == [1, 2, 1]
    assert (first["status"] == "ok").all()
    # the duplicate is the same scenario: the same id and the same figures
    assert first["id"][0] == first["id"][2] and first["time"][0] == first["time"][2]
    written = pd.read_csv(out)
    assert list(written["nodes"]) == [1, 2, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # nothing is run again or dropped with a warning
        again = fs.sweep(GRID, out=out, progress=False)
    assert list(again["nodes"]) == [1, 2, 1]
    assert list(again["time"]) == list(first["time"])
    assert list(pd.read_csv(out)["nodes"]) == [1, 2, 1]


def test_a_file_with_one_row_of_a_duplicated_scenario_runs_only_the_missing_place(tmp_path):
    out = tmp_path / "dup.csv"
    fs.sweep({**GRID, "nodes": [1, 2]}, out=out, progress=False)
    rows = fs.sweep(GRID, out=out, progress=False)
    assert list(rows["nodes"]) == [1, 2, 1] and (rows["status"] == "ok").all()
    assert list(pd.read_csv(out)["nodes"]) == [1, 2, 1]
