"""Sweeps: expansion, batching equal to one-by-one, broken scenarios, resume, shards, dtypes."""

import pandas as pd
import pytest

import numpy as np

import flowsolver as fs
from flowsolver import collective, sweep, training_step
from flowsolver._sweep import METRICS, expand_grid

import topologies as tp

GRID = {"nodes": [1, 2], "link": ["ib_ndr", "ib_hdr"], "op": ["all_reduce"], "size": [2**24, 2**28],
        "algorithm": ["ring"]}


def test_rows_equal_one_by_one_collectives():
    df = sweep(GRID, progress=False, cache_dir=None)
    assert len(df) == 8 and (df["status"] == "ok").all()
    for row in df.itertuples():
        g = tp.rail_optimized(row.nodes, link=row.link)
        assert row.time == pytest.approx(collective(g, "all_reduce", row.size, algorithm="ring").time, rel=1e-9)
    # one GPU server's ring never leaves NVLink: the link does not matter
    one = df[df["nodes"] == 1]
    assert one.groupby("size")["busbw"].nunique().max() == 1


def test_columns_and_dtypes():
    from flowsolver._sweep import TRAIN_METRICS

    df = sweep({"nodes": [1], "size": [2**20]}, progress=False, cache_dir=None)
    present = [k for k in METRICS if k not in TRAIN_METRICS]      # no training columns on collectives
    for col in ("id", "family", "nodes", "link", "op", "size", "algorithm", *present):
        assert col in df.columns
    assert not set(TRAIN_METRICS) & set(df.columns)
    for col, kind in METRICS.items():
        if col not in present:
            continue
        if kind is float:
            assert df[col].dtype == "float64", col
        elif kind == "Int64":
            assert str(df[col].dtype) == "Int64", col
        else:
            assert pd.api.types.is_string_dtype(df[col]), col
    assert df["gpus"].iloc[0] == 8 and df["bottleneck_tier"].iloc[0] == "nvlink"


def test_a_broken_scenario_is_recorded_and_the_sweep_goes_on():
    grid = [dict(nodes=1, size=2**20), dict(nodes=1, link="ib_qdr", size=2**20), dict(nodes=1, op="allreduce"),
            dict(family="fat_tree", k=4, size=2**20, fail_fraction=0.05, seed=3),
            dict(task="train", nodes=1, model="llama-3-8b", tp=8, global_batch=8)]
    df = sweep(grid, progress=False, cache_dir=None)
    assert list(df["status"]) == ["ok", "error", "error", "ok", "ok"]
    assert "unknown link technology 'ib_qdr'" in df["error"].iloc[1]
    assert "op must be one of" in df["error"].iloc[2]
    assert 0 < df["comm_overhead"].iloc[4] < 1 and df["speedup"].iloc[4] > 1
    with pytest.raises(ValueError, match="unknown sweep parameter"):
        expand_grid({"nodez": [1]})
    with pytest.raises(ValueError, match="size: an empty list of values gives no scenarios"):
        expand_grid({"nodes": [1, 2], "size": []})        # was no scenario and no word
    # k sizes a fat-tree, not rail_optimized; tp is a training degree; a fat-tree takes no
    # oversubscription; ecmp splits no subflows; a seed draws nothing without failed links; a key in
    # some rows of a list that none of those rows reads: rows differing in the label only
    for grid in ({"nodes": [1], "k": [4, 8]}, {"nodes": [1], "tp": [2, 4]},
                 {"family": ["fat_tree"], "k": [4], "oversubscription": [1.0, 4.0]},
                 {"nodes": [1], "subflows": [1, 8]}, {"nodes": [1], "seed": [0, 1]},
                 [{"nodes": 1, "k": 4}, {"nodes": 2}]):
        with pytest.raises(ValueError, match="apply to no scenario"):
            expand_grid(grid)
    assert len(expand_grid({"nodes": [1], "policy": ["ecmp_hash"], "subflows": [1, 8]})) == 2
    # one unread value that is the default says nothing: a spelled-out seed = 0 is not refused
    assert len(expand_grid({"nodes": [1], "seed": 0})) == len(expand_grid({"nodes": [1], "subflows": [1]})) == 1
    assert len(expand_grid({"family": "fat_tree", "k": [4], "oversubscription": 1})) == 1     # 1 is 1.0
    with pytest.raises(ValueError, match="would be ignored"):                 # but 4:1 on a fat-tree is
        expand_grid({"family": "fat_tree", "k": [4], "oversubscription": 4.0})
    assert len(expand_grid({"nodes": [1], "fail_fraction": [0.1], "seed": [0, 1]})) == 2
    assert len(expand_grid({"family": ["rail_optimized", "fat_tree"], "nodes": [1], "k": [4]})) == 2   # each reads one
    with pytest.raises(ValueError, match="resume='no'"):            # a string is not False
        sweep({"nodes": [1]}, resume="no", progress=False)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_resume_after_an_interruption_runs_only_what_is_left(tmp_path, suffix, monkeypatch):
    import sys

    sw = sys.modules["flowsolver._sweep"]

    out = tmp_path / f"r{suffix}"
    calls = []
    real = sw._run_batch

    def flaky(scenarios, idx):
        if len(calls) == 2:
            raise KeyboardInterrupt          # the job is killed after two batches
        calls.append(len(idx))
        return real(scenarios, idx)

    monkeypatch.setattr(sw, "_run_batch", flaky)
    grid = {"nodes": [1, 2], "size": [2**20, 2**22], "link": ["ib_ndr", "ib_hdr"]}
    with pytest.raises(KeyboardInterrupt):
        sweep(grid, out=out, progress=False, cache_dir=None)
    first = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert len(first) == sum(calls) == 4              # two batches of two technologies
    monkeypatch.setattr(sw, "_run_batch", real)
    ran = []
    monkeypatch.setattr(sw, "_run_batch", lambda s, i: ran.append(len(i)) or real(s, i))
    df = sweep(grid, out=out, progress=False, cache_dir=None)
    assert sum(ran) == 4 and len(df) == 8 and (df["status"] == "ok").all()
    assert df["id"].is_unique


def test_a_resumed_sweep_reruns_rows_computed_under_other_options(tmp_path):
    # the file's row is the default options'; a quarter of the links' efficiency is another scenario
    out, grid = tmp_path / "r.csv", {"nodes": [1], "size": [2**26]}
    plain = sweep(grid, out=out, progress=False, cache_dir=None)
    slow = fs.CollectiveOptions(efficiency=0.25)
    df = sweep(grid, out=out, progress=False, cache_dir=None, options=slow)
    assert df["time"].iloc[0] == pytest.approx(fs.collective(tp.rail_optimized(1), "all_reduce", 2**26,
                                                             options=slow).time, rel=1e-12)
    assert df["time"].iloc[0] > 2 * plain["time"].iloc[0]
    again = sweep(grid, out=out, progress=False, cache_dir=None)          # both rows kept in the file
    assert again["time"].iloc[0] == plain["time"].iloc[0] and "options" not in again
    rows = pd.read_csv(out)                   # each row says what it ran under: the options, or none
    assert len(rows) == 2 and sorted(rows["options"].fillna("").map(bool)) == [False, True]
    assert "efficiency=0.25" in rows["options"].dropna().iloc[0]
    # the default options are no options: those rows resume
    ran = sweep(grid, out=out, progress=False, cache_dir=None, options=fs.CollectiveOptions())
    assert ran["time"].iloc[0] == plain["time"].iloc[0] and len(pd.read_csv(out)) == 2


def test_a_resumed_sweep_reruns_rows_of_a_user_link_registered_again(tmp_path):
    # a user's link re-registered at a quarter of its rate: the file's row was another fabric's;
    # an all-to-all over 2 servers' rails is bound by the NICs, so 4x slower (within the latency)
    from topologies.links import Gbit, LinkTech
    out, grid = tmp_path / "r.csv", {"nodes": [2], "link": ["test_resume_fabric"], "op": ["all_to_all"],
                                     "size": [2**26]}
    tp.register_link(LinkTech("test_resume_fabric", 400 * Gbit, 1e-6), overwrite=True)
    fast = sweep(grid, out=out, progress=False, cache_dir=None)
    tp.register_link(LinkTech("test_resume_fabric", 100 * Gbit, 1e-6), overwrite=True)
    slow = sweep(grid, out=out, progress=False, cache_dir=None)
    fresh = fs.collective(tp.rail_optimized(2, link="test_resume_fabric"), "all_to_all", 2**26).time
    assert slow["time"].iloc[0] == pytest.approx(fresh, rel=1e-12)
    assert slow["time"].iloc[0] > 3 * fast["time"].iloc[0]
    # a grid of built-in names keeps its ids (a file written before resumes)
    from flowsolver._sweep_files import _user_definitions
    assert _user_definitions({"link": "ib_ndr", "server": "dgx_h100"}) == ()


def test_shards_split_the_grid_deterministically():
    grid = {"nodes": [1], "size": [2**20, 2**21, 2**22, 2**23, 2**24]}
    a = sweep(grid, shard=(0, 2), progress=False, cache_dir=None)
    b = sweep(grid, shard=(1, 2), progress=False, cache_dir=None)
    assert list(a["size"]) == [2**20, 2**22, 2**24] and list(b["size"]) == [2**21, 2**23]
    with pytest.raises(ValueError, match="shard must be"):
        sweep(grid, shard=(2, 2), progress=False, cache_dir=None)


def test_a_sweep_compiles_a_handful_of_times():
    from flowsolver.solver import trace_count

    grid = {"nodes": [1, 2], "link": ["ib_ndr", "ib_hdr", "roce_400g", "eth_100g"], "size": [2**20, 2**26],
            "algorithm": ["ring"]}
    sweep({"nodes": [2], "size": [2**20], "algorithm": ["ring"]}, progress=False, cache_dir=None)   # warm
    before = trace_count()
    df = sweep(grid, progress=False, cache_dir=None)
    assert (df["status"] == "ok").all() and len(df) == 16
    assert trace_count() - before <= 4          # 16 scenarios, 4 batched calls, shared buckets
    # the persistent cache (cache_dir=...): tests/study/test_sweep_safety.py


def test_progress_bar_shows_scenarios_and_rate(capsys):
    sweep({"nodes": [1], "size": [2**20, 2**21]}, progress=True, cache_dir=None)
    err = capsys.readouterr().err
    assert "2/2" in err and "scenario/s" in err


def test_the_default_cache_is_the_one_flowsolver_cache_dir_names_and_otherwise_off(tmp_path, monkeypatch):
    import sys

    import jax

    from flowsolver import default_cache_dir

    sw = sys.modules["flowsolver._sweep"]
    seen = []
    real = sw._run_batch
    monkeypatch.setattr(sw, "_run_batch", lambda s, i: seen.append(jax.config.jax_compilation_cache_dir) or real(s, i))
    before = jax.config.jax_compilation_cache_dir
    grid = {"nodes": [1], "size": [2**20], "algorithm": ["ring"]}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLOWSOLVER_CACHE_DIR", raising=False)
    assert default_cache_dir() is None                                   # XDG alone turns nothing on
    sweep(grid, progress=False)                                          # cache_dir="default"
    monkeypatch.setenv("FLOWSOLVER_CACHE_DIR", "off")
    assert default_cache_dir() is None
    sweep(grid, progress=False)
    monkeypatch.setenv("FLOWSOLVER_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    sweep(grid, progress=False)
    assert seen == [before, before, str(tmp_path / "mine")] and (tmp_path / "mine").is_dir()
    assert not (tmp_path / "xdg").exists() and jax.config.jax_compilation_cache_dir == before


def test_mixed_sweeps_keep_both_tasks_columns_and_training_sweeps_drop_bandwidths():
    from flowsolver._sweep import COLLECTIVE_METRICS, TRAIN_METRICS

    train = sweep([dict(task="train", nodes=1, model="llama-3-8b", tp=8, global_batch=8)], progress=False,
                  cache_dir=None)
    assert set(TRAIN_METRICS) <= set(train.columns) and not set(COLLECTIVE_METRICS) & set(train.columns)
    mixed = sweep([dict(task="train", nodes=1, model="llama-3-8b", tp=8, global_batch=8),
                   dict(nodes=1, size=2**20)], progress=False, cache_dir=None)
    assert set(TRAIN_METRICS) | set(COLLECTIVE_METRICS) <= set(mixed.columns)
    # each column is the result field it is named after, and only its task fills it
    step = training_step(tp.rail_optimized(1), model="llama-3-8b", tp=8, global_batch=8)
    assert mixed["step_time"].iloc[0] == step.step_time and mixed["comm_overhead"].iloc[0] == step.comm_overhead
    assert np.isnan(mixed["time"].iloc[0]) and np.isnan(mixed["step_time"].iloc[1])


GRID_X = {"nodes": [1, 2], "link": ["ib_ndr", "ib_hdr"], "size": [2**20, 2**24], "algorithm": ["ring"]}


def _same_rows(a, b):
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_an_executor_gives_the_serial_rows_file_and_resume(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    serial = sweep(GRID_X, progress=False, cache_dir=None, out=tmp_path / "serial.csv")
    with ThreadPoolExecutor(max_workers=2) as pool:
        pooled = sweep(GRID_X, progress=False, cache_dir=None, out=tmp_path / "pooled.csv", executor=pool)
        _same_rows(pooled, serial)
        assert (tmp_path / "pooled.csv").read_text() == (tmp_path / "serial.csv").read_text()
        # resume: half of each file gone, the rest recomputed (serially, through the executor)
        for name in ("serial.csv", "pooled.csv"):
            lines = (tmp_path / name).read_text().splitlines()
            (tmp_path / name).write_text("\n".join(lines[:4]) + "\n")
        again = sweep(GRID_X, progress=False, cache_dir=None, out=tmp_path / "serial.csv")
        resumed = sweep(GRID_X, progress=False, cache_dir=None, out=tmp_path / "pooled.csv", executor=pool)
        _same_rows(resumed, again)
        assert (tmp_path / "pooled.csv").read_text() == (tmp_path / "serial.csv").read_text()
    with pytest.raises(ValueError, match="executor must be a concurrent.futures.Executor"):
        sweep(GRID_X, progress=False, cache_dir=None, executor=object())


def test_a_dask_cluster_of_two_worker_processes_gives_the_serial_rows():
    distributed = pytest.importorskip("distributed")
    grid = dict(GRID_X, size=[2**20])           # two tasks (one per cluster size), one per worker
    serial = sweep(grid, progress=False, cache_dir=None)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pooled = sweep(grid, progress=False, cache_dir=None, executor=client.get_executor())
        workers = client.run(lambda: __import__("os").getpid())
    assert len(set(workers.values())) == 2
    _same_rows(pooled, serial)


def test_ranks_in_a_sweep_as_rank_integers_or_node_ids():
    g = tp.rail_optimized(2)
    sets = [[0, 1, 2, 3], ["s1/gpu0", "s1/gpu1", "s0/gpu0", "s0/gpu1"]]
    df = sweep({"nodes": [2], "size": [2**24], "algorithm": ["ring"], "ranks": sets}, progress=False, cache_dir=None)
    assert list(df["status"]) == ["ok", "ok"]
    for row, ranks in zip(df.itertuples(), sets):
        assert row.time == collective(g, "all_reduce", 2**24, algorithm="ring", ranks=ranks).time
    one = sweep({"nodes": [2], "size": [2**24], "algorithm": ["ring"], "ranks": [0, 1, 2, 3]}, progress=False,
                cache_dir=None)
    assert len(one) == 1 and one["time"].iloc[0] == df["time"].iloc[0]     # a flat list is one rank set


def test_a_resumed_sweep_retries_the_scenarios_that_failed(tmp_path):
    out = tmp_path / "r.csv"
    first = sweep(GRID_X, progress=False, cache_dir=None, out=out)
    table = pd.read_csv(out)
    table["error"] = table["error"].astype(object)
    table.loc[0, "status"], table.loc[0, "error"], table.loc[0, "busbw"] = "error", "RuntimeError: worker lost", None
    table.to_csv(out, index=False)                       # as a lost worker would have left it
    again = sweep(GRID_X, progress=False, cache_dir=None, out=out)
    assert list(again["status"]) == ["ok"] * len(first) and len(pd.read_csv(out)) == len(first)
    assert again["busbw"].iloc[0] == first["busbw"].iloc[0]


def test_a_training_sweep_takes_the_compute_model_by_name_or_fraction():
    grid = [dict(task="train", nodes=1, model="llama-3-8b", tp=8, global_batch=8, compute_efficiency=c)
            for c in ("auto", None, 0.46, "kernels")]
    df = sweep(grid, progress=False, cache_dir=None)
    g = tp.rail_optimized(1)
    tables = training_step(g, model="llama-3-8b", tp=8, global_batch=8).step_time
    flat = training_step(g, model="llama-3-8b", tp=8, global_batch=8, compute_efficiency=0.46).step_time
    assert list(df["step_time"][:3]) == pytest.approx([tables, tables, flat], rel=1e-12)
    assert df["status"][3] != "ok" and "compute_efficiency must be 'auto', None" in df["error"][3]


def test_a_fractional_count_or_a_boolean_size_is_an_error_row_not_a_truncated_run():
    # 2.9 channels ran as 2 and 8.9 sequences a step as 8 while the row said 2.9 and 8.9; a size
    # of True ran a 1-byte all-reduce: each is the error the direct call gives
    grid = [dict(nodes=2, size=2**20, channels=2.9), dict(nodes=2, size=True),
            dict(task="train", nodes=1, model="llama-3-8b", tp=8, global_batch=8.9),
            dict(nodes=2, size=2**20, channels=2),
            dict(task="train", nodes=1, model="llama-3-8b", tp=8, compute_efficiency=True)]
    df = sweep(grid, progress=False, cache_dir=None)
    assert list(df["status"]) == ["error", "error", "error", "ok", "error"]
    assert "compute_efficiency" in df["error"].iloc[4]       # True ran as an efficiency of 1.0
    assert "channels must be an integer >= 1, got 2.9" in df["error"].iloc[0]
    assert "size must be a finite number of bytes > 0, got True" in df["error"].iloc[1]
    assert "global_batch must be an integer >= 1, got 8.9" in df["error"].iloc[2]


def test_a_link_registered_again_under_its_name_is_not_served_the_old_cluster():
    # the kept clusters were keyed by names: 100G after 400G was timed on the 400G cluster
    from topologies.links import Gbit, LinkTech
    grid = {"nodes": [2], "link": ["test_sweep_nic"], "size": [2**26]}
    times = []
    for rate in (400, 100):
        tp.register_link(LinkTech("test_sweep_nic", rate * Gbit, 1e-6, family="infiniband"), overwrite=True)
        times.append(sweep(grid, progress=False, cache_dir=None)["time"][0])
        assert times[-1] == pytest.approx(fs.collective(tp.rail_optimized(2, link="test_sweep_nic"), "all_reduce",
                                                        2**26).time, rel=1e-12)
    assert times[1] > times[0]


def test_a_file_of_both_tasks_keeps_each_rows_metrics(tmp_path):
    # a training grid run on a collective grid's file dropped the collective row's time, algbw
    # and busbw from the file (its status still "ok"), and the other way round
    out = tmp_path / "mix.csv"
    coll = {"nodes": [1], "op": ["all_reduce"], "size": [2**20]}
    train = {"task": ["train"], "nodes": [1], "model": ["llama-3-8b"], "tp": [8], "global_batch": [8]}
    first = sweep(coll, out=out, progress=False, cache_dir=None)
    trained = sweep(train, out=out, progress=False, cache_dir=None)
    sweep(coll, out=out, progress=False, cache_dir=None)
    df = pd.read_csv(out).set_index("task")
    assert df.loc["collective", "time"] == pytest.approx(first["time"][0], rel=1e-12)
    assert df.loc["train", "step_time"] == pytest.approx(trained["step_time"][0], rel=1e-12)


def test_a_row_leaves_the_other_task_s_parameters_empty():
    # a training row never read op / size / algorithm / channels, a collective row never read
    # the model or its layout: neither shows the defaults it did not use
    rows = sweep({"task": ["train"], "nodes": [1], "model": "llama-3-8b", "tp": [8], "global_batch": 8},
                 progress=False, cache_dir=None)
    assert rows["status"].iloc[0] == "ok"
    assert all(pd.isna(rows[k].iloc[0]) or rows[k].iloc[0] == "" for k in ("op", "size", "algorithm"))
    assert rows["model"].iloc[0] == "llama-3-8b" and rows["tp"].iloc[0] == 8
    coll = sweep({"nodes": [1], "size": [2**20]}, progress=False, cache_dir=None)
    assert all(pd.isna(coll[k].iloc[0]) or coll[k].iloc[0] == "" for k in ("model", "tp", "pp"))
    assert coll["op"].iloc[0] == "all_reduce"
