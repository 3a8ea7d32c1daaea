"""Sweeps that must not hang, lose finished rows, keep a wrong row or write outside the
working directory (issue 27): process pools that fork are refused, the results file is
replaced atomically, a torn or unreadable results file is never resumed into a wrong row,
and the compilation cache is only where asked, with JAX's settings restored afterwards."""

import concurrent.futures
import multiprocessing
import os
import sys
import threading

import pandas as pd
import pytest

from flowsolver import sweep
import topologies as tp

#: 8 scenarios in 4 batches (one per cluster size and message size, two technologies each)
GRID = {"nodes": [1, 2], "link": ["ib_ndr", "ib_hdr"], "size": [2**20, 2**24], "algorithm": ["ring"]}


def _same_rows(a, b):
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A sweep of GRID run once from nothing: its rows and the CSV file it wrote."""
    out = tmp_path_factory.mktemp("fresh") / "fresh.csv"
    rows = sweep(GRID, out=out, progress=False, cache_dir=None)
    assert len(rows) == 8 and (rows["status"] == "ok").all()
    return dict(rows=rows, text=out.read_text())


def _count_batches(monkeypatch):
    """The number of scenarios each batch the sweep runs from now on holds."""
    sw = sys.modules["flowsolver._sweep"]
    real, ran = sw._run_batch, []
    monkeypatch.setattr(sw, "_run_batch", lambda s, idx: ran.append(len(idx)) or real(s, idx))
    return ran


# -- 1. process pools that fork ----------------------------------------------------------------

class _NeverSubmit(concurrent.futures.ProcessPoolExecutor):
    """A process pool whose submit fails the test instead of starting a worker (a forked
    worker deadlocks on the locks JAX's threads held at the fork, and the test would hang)."""

    def submit(self, *args, **kwargs):
        raise AssertionError("a scenario was submitted to a process pool that forks")


@pytest.mark.parametrize("context", ["fork", None])
def test_a_process_pool_that_forks_is_refused_with_the_fix_in_the_message(context):
    if context is None and multiprocessing.get_start_method() != "fork":
        pytest.skip("this platform's default start method is not fork")
    pool = _NeverSubmit(max_workers=1, mp_context=None if context is None else multiprocessing.get_context(context))
    try:
        with pytest.raises(ValueError, match=r"executor: .*'fork'.*ProcessPoolExecutor\(mp_context="
                                             r"multiprocessing\.get_context\(\"spawn\"\)\)"):
            sweep(GRID, progress=False, cache_dir=None, executor=pool)
    finally:
        pool.shutdown()


def _within(seconds, fn, on_timeout):
    """fn() run in a thread, failing the test (after on_timeout()) instead of hanging."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:       # re-raised in the test's thread
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        on_timeout()
        pytest.fail(f"still running after {seconds} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_spawn_pool_gives_the_serial_rows(fresh):
    grid = {"nodes": [1], "link": ["ib_ndr", "ib_hdr"], "size": [2**20], "algorithm": ["ring"]}     # one task
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def kill():
        processes = list((getattr(pool, "_processes", None) or {}).values())     # before shutdown forgets them
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.kill()

    try:
        pooled = _within(180, lambda: sweep(grid, progress=False, cache_dir=None, executor=pool), kill)
    finally:
        kill()
    serial = fresh["rows"]
    _same_rows(pooled, serial[(serial["nodes"] == 1) & (serial["size"] == 2**20)])


# -- 2. the results file is replaced atomically ------------------------------------------------

@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_sweep_killed_while_writing_its_file_keeps_every_finished_row(tmp_path, suffix, monkeypatch, fresh):
    out = tmp_path / f"r{suffix}"
    writer = "to_parquet" if suffix == ".parquet" else "to_csv"
    real = getattr(pd.DataFrame, writer)
    writes = []

    def killed_halfway_through_the_second_write(self, target=None, *args, **kwargs):
        writes.append(len(self))
        if len(writes) < 2:
            return real(self, target, *args, **kwargs)
        data = real(self, None, *args, **kwargs)           # the whole file, as str (CSV) or bytes
        half = data[:len(data) // 2]
        if hasattr(target, "write"):
            try:
                target.write(half)
            except TypeError:
                target.write(half.encode())
            target.flush()
        else:
            with open(target, "wb") as fh:
                fh.write(half if isinstance(half, bytes) else half.encode())
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, writer, killed_halfway_through_the_second_write)
    with pytest.raises(KeyboardInterrupt):
        sweep(GRID, out=out, progress=False, cache_dir=None)
    monkeypatch.setattr(pd.DataFrame, writer, real)
    assert writes == [2, 4]
    # the file is the one the first batch (one server, 1 MiB, both links) left, whole; no
    # temporary file is left beside it
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
    rows = fresh["rows"]
    first = rows[(rows["nodes"] == 1) & (rows["size"] == 2**20)]
    if suffix == ".csv":
        lines = fresh["text"].splitlines()
        assert out.read_text().splitlines() == lines[:1] + [x for x in lines if x.split(",")[0] in set(first["id"])]
    else:
        kept = pd.read_parquet(out)
        assert list(kept["id"]) == list(first["id"]) and list(kept["busbw"]) == list(first["busbw"])
    ran = _count_batches(monkeypatch)
    resumed = sweep(GRID, out=out, progress=False, cache_dir=None)
    assert sum(ran) == 6
    _same_rows(resumed, fresh["rows"])


# -- 3. a torn or unreadable results file on resume --------------------------------------------

def test_a_csv_cut_in_the_middle_of_a_row_runs_that_row_again(tmp_path, monkeypatch, fresh):
    lines = fresh["text"].splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    last = lines[-1].rstrip("\n").split(",")
    busbw = last[header.index("busbw")]
    assert "e+" in busbw or len(busbw) > 6               # a number long enough to cut
    cut = lines[-1].index(busbw) + len(busbw) // 2       # in the middle of the last row's busbw
    out = tmp_path / "r.csv"
    out.write_text("".join(lines[:-1]) + lines[-1][:cut])
    ran = _count_batches(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"r\.csv.* line 9 .*incomplete.*run again"):
        resumed = sweep(GRID, out=out, progress=False, cache_dir=None)
    assert ran == [1]
    _same_rows(resumed, fresh["rows"])
    assert out.read_text() == fresh["text"]


def test_csv_rows_with_a_missing_field_or_a_value_that_is_not_a_number_run_again(tmp_path, monkeypatch, fresh):
    lines = fresh["text"].splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    short = lines[3].rstrip("\n").rsplit(",", 1)[0] + "\n"          # row 3 lost its last field
    fields = lines[6].rstrip("\n").split(",")
    fields[header.index("busbw")] = "1.64x59e11"                     # row 6's busbw is garbled
    out = tmp_path / "r.csv"
    out.write_text("".join(lines[:3]) + short + "".join(lines[4:6]) + ",".join(fields) + "\n" + "".join(lines[7:]))
    ran = _count_batches(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"lines 4, 7 .*run again"):
        resumed = sweep(GRID, out=out, progress=False, cache_dir=None)
    assert sorted(ran) == [1, 1]
    _same_rows(resumed, fresh["rows"])
    assert out.read_text() == fresh["text"]


def test_an_unreadable_parquet_file_or_a_csv_that_is_not_a_sweeps_is_a_clear_error(tmp_path, fresh):
    out = tmp_path / "r.parquet"
    sweep(GRID, out=out, progress=False, cache_dir=None)
    data = out.read_bytes()
    out.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"out: cannot resume from '.*r\.parquet'.*resume=False"):
        sweep(GRID, out=out, progress=False, cache_dir=None)
    assert out.read_bytes() == data[:len(data) // 2]                 # left as it was
    _same_rows(sweep(GRID, out=out, progress=False, cache_dir=None, resume=False), fresh["rows"])
    _same_rows(sweep(GRID, out=out, progress=False, cache_dir=None), fresh["rows"])     # resumed: all done
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"out: cannot resume from '.*other\.csv': it has no 'id', 'status'"):
        sweep(GRID, out=other, progress=False, cache_dir=None)
    assert other.read_text() == "a,b\n1,2\n"


def test_a_row_whose_id_looks_like_a_number_is_resumed(tmp_path, monkeypatch):
    from flowsolver._sweep import expand_grid, scenario_id

    grid = {"nodes": [1], "size": [1050320], "algorithm": ["ring"]}
    assert scenario_id(expand_grid(grid)[0]) == "37774235719345e5"   # a float, to a reader that guesses types
    out = tmp_path / "r.csv"
    first = sweep(grid, out=out, progress=False, cache_dir=None)
    text = out.read_text()
    ran = _count_batches(monkeypatch)
    _same_rows(sweep(grid, out=out, progress=False, cache_dir=None), first)
    assert ran == [] and out.read_text() == text


# -- 4. nothing written under the home directory; JAX's settings restored ---------------------

def _cache_settings():
    import jax

    return {name: getattr(jax.config, name) for name in ("jax_compilation_cache_dir",
                                                         "jax_persistent_cache_min_compile_time_secs",
                                                         "jax_enable_compilation_cache")}


def test_a_sweep_writes_nothing_under_home_and_leaves_the_jax_settings_as_they_were(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("FLOWSOLVER_CACHE_DIR", "off")     # the solver's own cache (on by default) switched off
    before = _cache_settings()
    df = sweep({"nodes": [1], "size": [2**20], "algorithm": ["ring"]}, progress=False)      # every default
    assert (df["status"] == "ok").all()
    assert [str(p.relative_to(home)) for p in home.rglob("*")] == []
    assert _cache_settings() == before


def test_a_named_cache_is_on_during_the_sweep_only(tmp_path, monkeypatch):
    import jax
    import jax.numpy as jnp

    sw = sys.modules["flowsolver._sweep"]
    cache = tmp_path / "jax-cache"
    before = _cache_settings()
    seen = []
    real = sw._run_batch
    monkeypatch.setattr(sw, "_run_batch", lambda s, idx: seen.append(_cache_settings()) or real(s, idx))
    try:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)      # cache every compile
        during = dict(_cache_settings(), jax_compilation_cache_dir=str(cache))
        sweep({"nodes": [1], "size": [2**20], "algorithm": ["ring"]}, progress=False, cache_dir=cache)
        assert seen == [during] and cache.is_dir()
        assert _cache_settings() == dict(before, jax_persistent_cache_min_compile_time_secs=0.0)
        entries = set(os.listdir(cache))
        jax.jit(lambda x: x * 3.25 + 0.75)(jnp.arange(7.0)).block_until_ready()   # a new compile, after
        assert set(os.listdir(cache)) == entries                          # went nowhere near the sweep's cache
        with pytest.raises(RuntimeError, match="stop"):                   # restored also when the sweep raises
            monkeypatch.setattr(sw, "_run_batch", lambda s, idx: (_ for _ in ()).throw(RuntimeError("stop")))
            sweep({"nodes": [1], "size": [2**20], "algorithm": ["ring"]}, progress=False, cache_dir=cache)
        assert _cache_settings() == dict(before, jax_persistent_cache_min_compile_time_secs=0.0)
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          before["jax_persistent_cache_min_compile_time_secs"])


def test_cache_dir_that_is_not_a_folder_is_a_clear_error(tmp_path, monkeypatch):
    afile = tmp_path / "f"
    afile.write_text("")
    for bad, match in ((5, r"cache_dir must be a folder .*got 5"), (afile, r"cache_dir: .*f' is not a folder")):
        with pytest.raises(ValueError, match=match):
            sweep({"nodes": [1], "size": [2**20]}, progress=False, cache_dir=bad)
    assert not (tmp_path / "5").exists() and not os.path.exists("5")
    monkeypatch.setenv("FLOWSOLVER_CACHE_DIR", str(afile))
    with pytest.raises(ValueError, match=r"\$FLOWSOLVER_CACHE_DIR: .*f' is not a folder"):
        sweep({"nodes": [1], "size": [2**20]}, progress=False)


def test_an_integral_float_resumes_the_integer_s_row(tmp_path, monkeypatch):
    # size = 1048576.0 in one grid and 1048576 in the next: the same scenario, not a second row
    out = tmp_path / "r.csv"
    first = sweep({"nodes": [1], "size": [1048576], "algorithm": ["ring"]}, out=out, progress=False, cache_dir=None)
    ran = _count_batches(monkeypatch)
    again = sweep({"nodes": [1], "size": [1048576.0], "algorithm": ["ring"]}, out=out, progress=False, cache_dir=None)
    assert ran == [] and len(again) == len(first) == 1


# -- 5. a row with status ok but an impossible metric ----------------------------------------

@pytest.mark.parametrize("edits, reasons", [
    ({1: ("time", ""), 3: ("time", "nan"), 6: ("time", "-1")},
     ["time is empty or NaN", "time is empty or NaN", "time -1.0 is not > 0"]),
    ({2: ("time", "inf"), 4: ("busbw", "0"), 8: ("chosen_algorithm", "")},
     ["time inf is not finite", "busbw 0.0 is not > 0", "chosen_algorithm is empty"]),
    ({5: ("gpus", "0"), 7: ("algbw", "-3.5e10")}, ["gpus 0.0 is not >= 1", "algbw -35000000000.0 is not > 0"]),
])
def test_an_ok_row_with_an_empty_or_impossible_metric_runs_again(tmp_path, monkeypatch, fresh, edits, reasons):
    # an ok collective has a finite time > 0 for a size > 0, so algbw = size / time > 0 and busbw > 0,
    # at least one GPU and the algorithm it ran: a cell emptied or edited to anything else is not a result
    lines = fresh["text"].splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    for line, (column, value) in edits.items():
        fields = lines[line].rstrip("\n").split(",")
        fields[header.index(column)] = value
        lines[line] = ",".join(fields) + "\n"
    out = tmp_path / "r.csv"
    out.write_text("".join(lines))
    ran = _count_batches(monkeypatch)
    with pytest.warns(RuntimeWarning, match=rf"{len(edits)} row\(s\) with status ok but a metric missing or out of "
                                            rf"range .*run again") as record:
        resumed = sweep(GRID, out=out, progress=False, cache_dir=None)
    message = str(record[0].message)
    assert all(reason in message for reason in reasons), message
    assert sum(ran) == len(edits)
    _same_rows(resumed, fresh["rows"])
    assert out.read_text() == fresh["text"]


def test_training_metrics_out_of_their_range_are_named():
    from flowsolver._sweep_files import ok_row_problem

    keys = ("gpus", "step_time", "tokens_per_s", "speedup", "comm_overhead")
    good = dict(gpus=8, step_time=1.5, tokens_per_s=2.0e4, speedup=6.1, comm_overhead=0.0)
    assert ok_row_problem(good, keys) is None          # no exposed communication: an overhead of 0
    # comm_overhead = exposed / step_time, and the step holds the exposed time: a fraction <= 1
    assert ok_row_problem({**good, "comm_overhead": 1.25}, keys) == "comm_overhead 1.25 is more than 1"
    assert ok_row_problem({**good, "speedup": 0.0}, keys) == "speedup 0.0 is not > 0"
    assert ok_row_problem({**good, "step_time": float("-inf")}, keys) == "step_time -inf is not finite"
    assert ok_row_problem({**good, "tokens_per_s": "fast"}, keys) == "tokens_per_s 'fast' is not a number"
    assert ok_row_problem({k: v for k, v in good.items() if k != "gpus"}, keys) == "gpus is missing"


def test_a_grid_is_counted_before_it_is_expanded():
    import tracemalloc

    from flowsolver import expand_grid

    # 2 x 50,001 = 100,002 scenarios, 2 over the default limit of 100,000: refused before any
    # is made (a 1 kB file of six lists, 19.2 M scenarios, ran out of memory expanding)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as err:
            expand_grid({"nodes": [1, 2], "size": list(range(1, 50_002))})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(err.value) == ("grid: 100,002 scenarios (2 nodes x 50001 size), more than max_scenarios=100,000: sweep "
                              "fewer values, or pass a larger max_scenarios ([sweep] max_scenarios in a sweep file)")
    assert peak < 16 * 2**20          # the lists given, not 100,002 scenario dicts (~1 kB each)
    # at the limit, as before; a list of dicts is counted too
    assert len(expand_grid(GRID, max_scenarios=8)) == 8
    with pytest.raises(ValueError, match=r"grid: 8 scenarios \(2 nodes x 2 link x 2 size\), more than "
                                         r"max_scenarios=7"):
        expand_grid(GRID, max_scenarios=7)
    with pytest.raises(ValueError, match=r"grid: 3 scenarios \(listed\), more than max_scenarios=2"):
        expand_grid([{"nodes": 1}] * 3, max_scenarios=2)
    with pytest.raises(ValueError, match="max_scenarios must be an integer >= 1, got 0"):
        expand_grid(GRID, max_scenarios=0)


def test_a_sweep_file_past_the_limit_is_refused_with_its_count(tmp_path, capsys):
    from flowsolver.cli import main

    path = tmp_path / "big.toml"
    # 2 x 50,001 = 100,002 scenarios (an unknown family: where the count went unchecked, the
    # expansion's own check stops it after building them, not a sweep of 100,002)
    path.write_text(f"[grid]\nfamily = 'nope'\nnodes = [1, 2]\nsize = {list(range(1, 50_002))}\n")
    assert main(["sweep", str(path), "--no-progress"]) == 2
    assert "grid: 100,002 scenarios (2 nodes x 50001 size), more than max_scenarios=100,000" \
        in capsys.readouterr().err
    path.write_text("[sweep]\nmax_scenarios = 3\n[grid]\nnodes = [1, 2]\nsize = [1024, 2048]\n")
    assert main(["sweep", str(path), "--no-progress"]) == 2
    assert "grid: 4 scenarios (2 nodes x 2 size), more than max_scenarios=3" in capsys.readouterr().err


def test_a_grid_sets_the_protocol_per_scenario():
    """newuser26 #3: a sweep could not set the protocol (the TOML key was refused, options= set
    one for every scenario) nor show what NCCL's choice ran. Each row now takes its grid's
    protocol and reports chosen_protocol; a row without one keeps its id (results files resume)."""
    from flowsolver import collective
    from flowsolver._sweep import expand_grid, scenario_id
    g = tp.rail_optimized(2)
    df = sweep({"nodes": [2], "size": [2**24], "algorithm": ["ring"], "protocol": ["LL128", "Simple", None]},
               progress=False, cache_dir=None)
    for proto, row in zip(("LL128", "Simple", None), df.itertuples()):
        want = collective(g, "all_reduce", 2**24, algorithm="ring", **({} if proto is None else {"protocol": proto}))
        assert row.status == "ok" and row.time == want.time and row.chosen_protocol == want.protocol
    plain = expand_grid({"nodes": [1], "size": [1050320], "algorithm": ["ring"]})[0]
    assert scenario_id(plain) == "37774235719345e5"       # the id it had before the key existed
