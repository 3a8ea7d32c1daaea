"""flowsolver.calibrate: known constants recovered, held-out sizes of a real log predicted,
logs that do not match the graph refused."""

from pathlib import Path

import pytest

pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import Calibration, calibrate, collective, nccl_tests  # noqa: E402

LOGS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"


def _log(rows, ranks):
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r // 8} device {r % 8} [0x0f] NVIDIA H100\n"
                      for r in range(ranks))
    return devices + HEADER + "".join(f"{int(s):12d} {int(s) // 4:12d} float sum -1 {t * 1e6:10.2f} 0 0 0\n"
                                      for s, t in rows)


def test_known_constants_are_recovered():
    # "measured" = the model (NCCL_ALGO=Ring, NCCL's protocol choice) with an NVLink
    # efficiency of 0.70 and 6 us more on every call (a VM's launch path), on one node (NVLink
    # is the only technology the ring crosses: links in series cannot be told apart by one log)
    g = tp.rail_optimized(nodes=1)
    truth = Calibration(efficiency={"nvlink4": 0.70}, latency_scale=1.0, ranks=8, ops=("all_reduce",),
                        launch_latency=6e-6)
    sizes = [2**k for k in (10, 12, 14, 17, 22, 27, 32)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring", model=truth).time) for s in sizes], 8)
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring")
    assert cal.converged and cal.ranks == 8 and cal.ops == ("all_reduce",)
    assert cal.efficiency == {"nvlink4": pytest.approx(0.70, rel=0.03)}        # one node: NVLink's own
    assert cal.launch_latency == pytest.approx(6e-6, rel=0.05)
    assert cal.latency_scale == pytest.approx(1.0, rel=0.05)
    assert cal.residuals["error"].abs().max() < 0.03 and len(cal.residuals) == len(sizes)


def test_a_given_efficiency_is_the_start_not_a_second_factor():
    # a log made at NVLink 0.70: calibrated from efficiency=0.9 (one number or a dict) it is
    # still 0.70 (the rows were re-solved at 0.9 while the fit's factor was counted as applied:
    # 0.9 x f^2, and the calibrated model kept 0.9)
    g = tp.rail_optimized(nodes=1)
    truth = Calibration(efficiency={"nvlink4": 0.70}, latency_scale=1.0, ranks=8, ops=("all_reduce",))
    sizes = [2**k for k in (12, 17, 22, 27, 30)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring", model=truth).time) for s in sizes], 8)
    for given in (0.9, {"nvlink4": 0.9}):
        cal = calibrate(g, [log], op="all_reduce", algorithm="ring", efficiency=given)
        assert cal.efficiency == {"nvlink4": pytest.approx(0.70, rel=0.01)}
        assert cal.residuals["error"].abs().max() < 0.01


@pytest.mark.parametrize("op, ranks", [("send_recv", [0, 8]), ("all_to_all", list(range(16))),
                                       ("broadcast", list(range(16)))])
def test_a_launch_latency_reaches_the_flow_timed_ops_and_is_fitted_from_them(op, ranks):
    # a VM's 30 us on every call: the ops NCCL's cost model does not time ignored a
    # calibration's launch latency, and their logs left it "not constrained" (36-70 % off)
    g = tp.rail_optimized(nodes=2)
    truth = Calibration(efficiency={}, latency_scale=1.0, ranks=16, ops=(), launch_latency=30e-6)
    plain, more = (collective(g, op, 64, ranks=ranks, model=m).time for m in (None, truth))
    assert more - plain == pytest.approx(30e-6, rel=1e-9)
    rows = [(s, collective(g, op, s, ranks=ranks, model=truth).time) for s in (2**k for k in range(8, 28, 3))]
    devices = "".join(f"#  Rank {i:2d} Group  0 Pid {i} on host{r // 8} device {r % 8} [0x0f] NVIDIA H100\n"
                      for i, r in enumerate(ranks))
    per = len(ranks) if op == "all_to_all" else 1       # nccl-tests prints all-to-all's count per peer
    log = devices + HEADER + "".join(f"{s} {s // 4 // per} float none 0 {t * 1e6:.2f} 0 0 0\n" for s, t in rows)
    cal = calibrate(g, [log], op=op, ranks=ranks)
    assert cal.launch_latency == pytest.approx(30e-6, rel=0.02) and "launch_latency" not in cal.unconstrained
    assert cal.residuals["error"].abs().max() < 0.005


def test_a_model_that_is_not_a_calibration_is_a_type_error_naming_it():
    from flowsolver import concurrent
    g = tp.rail_optimized(nodes=1)
    with pytest.raises(TypeError, match="model must be a flowsolver.Calibration .* got int"):
        collective(g, "all_reduce", 2**20, model=3)              # was AttributeError: 'int' ... 'check'
    with pytest.raises(TypeError, match="model must be a flowsolver.Calibration .* got str"):
        concurrent(g, [dict(op="all_reduce", size=2**20)], model="cal.json")


def _hosts_log(op, hosts, rows, algo=None):
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on h{h} device {r % 8} [0x0f] NVIDIA H100\n"
                      for r, h in enumerate(hosts))
    info = f"h0:1:1 [0] NCCL INFO NCCL_ALGO set by environment to {algo}\n" if algo else ""
    head = HEADER.rstrip("\n") + "     time   algbw   busbw #wrong\n"
    per = len(hosts) if op in ("all_gather", "reduce_scatter", "all_to_all") else 1     # nccl-tests' count: per rank
    return info + devices + head + "".join(f"{s} {s // 4 // per} float none -1 {t * 1e6:.2f} 0 0 0 {t * 1e6:.2f} 0 0 0"
                                           "\n" for s, t in rows)


def test_a_log_of_other_hosts_is_refused_or_said_and_size_0_rows_are_read_past():
    g = tp.rail_optimized(nodes=2)
    # a 2 x 4 log (hosts h0 and h1) fitted to one server's 8 GPUs derated NVLink to 0.51: said
    # (containers of a GPU each name a host per GPU on one machine); on fewer hosts than the
    # ranks' servers, refused
    half = [0, 1, 2, 3, 8, 9, 10, 11]
    rows = [(s, collective(g, "all_gather", s, ranks=half).time) for s in (2**20, 2**24, 2**28)]
    log = _hosts_log("all_gather", [0] * 4 + [1] * 4, rows)
    with pytest.warns(UserWarning, match="the log ran on 2 hosts, the ranks modelled are on 1 servers"):
        calibrate(g, [log], op="all_gather", ranks=range(8))
    one_host = _hosts_log("all_gather", [0] * 8, rows)
    with pytest.raises(ValueError, match="the log ran on 1 hosts, the ranks modelled are on 2 servers"):
        calibrate(g, [one_host], op="all_gather", ranks=half)
    cal = calibrate(g, [log], op="all_gather", ranks=half)
    assert cal.residuals["error"].abs().max() < 0.01
    names = calibrate(g, [log], op="all_gather", ranks=[tp.gpus(g)[r] for r in half])    # node ids: a TypeError
    assert names.efficiency == cal.efficiency
    # an NVL72 rack is one server of 18 trays, each its own host: 2 hosts of 4 GPUs are 2 trays
    from flowsolver.collectives import checked_log
    rack = tp.rail_optimized(1, server="nvl72")
    df = nccl_tests.read(log.replace("NVIDIA H100", "NVIDIA GB200"), op="all_gather")     # the rack's GPUs
    assert checked_log(df, "all_gather", 8, True, rack, list(range(8))) is df
    with pytest.raises(ValueError, match=r"ran on 2 hosts, the ranks modelled are on 3 servers \(or trays\)"):
        checked_log(df, "all_gather", 8, True, rack, [0, 1, 2, 3, 4, 5, 8, 9])
    # nccl-tests' size-0 rows (a size below ranks x 4 B: nothing ran) were a "size must be > 0" error
    zero = _hosts_log("all_gather", [0] * 4 + [1] * 4, [(0, 1.8e-7)] + rows)
    assert len(calibrate(g, [zero], op="all_gather", ranks=half).residuals) == len(rows)


def test_a_log_whose_nccl_algo_is_a_list_forces_none():
    # NCCL_ALGO=Ring,Tree leaves NCCL the choice; it was read as Ring and calibrate forced ring.
    # allreduce:tree allows an all-reduce tree alone (NCCL's per-function entry, tuning.cc parseList)
    for value, forced in (("Ring", "ring"), ("Ring,Tree", None), ("^NVLS", None), ("allreduce:tree", "tree"),
                          ("allgather:ring", None)):
        log = _hosts_log("all_reduce", [0] * 8, [(2**20, 1e-4)], value)
        assert nccl_tests.read(log, op="all_reduce").attrs["algorithm"] == forced


def test_a_pipeline_scale_is_recovered_and_what_a_log_cannot_tell_is_named():
    # "measured": the model with the chunk pipeline's floors and fills x 2 (mid sizes, where
    # the fill is 10-40 % of the time) and NVLink at 0.8
    from dataclasses import asdict

    from flowsolver.collectives._pipeline import PIPELINE, Pipeline

    g = tp.rail_optimized(nodes=1)
    doubled = Pipeline(**{k: 2 * v for k, v in asdict(PIPELINE).items()})
    truth = Calibration(efficiency={"nvlink4": 0.8}, latency_scale=1.0, ranks=8, ops=("all_reduce",), pipeline=doubled)
    sizes = [2**k for k in (20, 22, 24, 26, 28, 30)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring", model=truth).time) for s in sizes], 8)
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring")
    assert cal.pipeline.fill_ring == pytest.approx(2 * PIPELINE.fill_ring, rel=0.05)
    assert cal.residuals["error"].abs().max() < 0.01
    # 4-16 GiB only: a latency (~60 us of 20-80 ms) moves no row by 0.1 %: not fitted, named
    big = [2**k for k in (32, 33, 34)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring", model=truth).time) for s in big], 8)
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring")
    assert "launch_latency" in cal.unconstrained and cal.launch_latency == 0.0 and cal.latency_scale == 1.0
    assert "do not constrain: " in cal.message and "launch_latency" in cal.message


@pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
def test_the_lower_half_of_a_real_log_predicts_its_upper_half():
    df = nccl_tests.read(LOGS / "nccl1047_1xH100_reducescatter_ring.txt")
    rows = df[df["placement"] == "out-of-place"].sort_values("size")
    half = len(rows) // 2
    low = rows.iloc[:half].copy()
    low.attrs.update(df.attrs)
    g = tp.rail_optimized(nodes=1)
    cal = calibrate(g, [low], algorithm="ring")          # the run forced NCCL_ALGO=Ring
    for size, time_us in zip(rows["size"].iloc[half:], rows["time"].iloc[half:]):
        model = collective(g, "reduce_scatter", float(size), model=cal).time * 1e6
        assert model == pytest.approx(time_us, rel=0.10), size


def test_logs_that_do_not_match_the_graph_are_refused():
    g = tp.rail_optimized(nodes=1)
    log = _log([(2**20, 30e-6), (2**24, 80e-6)], 16)
    # more ranks than the graph has GPUs: ranks= cannot help (newuser20), a graph of 16 GPUs can
    with pytest.raises(ValueError, match=r"ran on 16 ranks \(its device list; its device list names 2 hosts\), the "
                                         r"graph has 8 GPUs: time it on a graph of 16 GPUs \(nodes=2: 2 servers of 8 "
                                         r"GPUs\)$"):
        calibrate(g, [log], op="all_reduce")
    with pytest.raises(ValueError, match=r"ran on 16 ranks, the graph \(ranks=\) has 4 \(16 from its device list, 4 "
                                         r"given by ranks=\)"):
        calibrate(tp.rail_optimized(nodes=2), [log], op="all_reduce", ranks=range(4))
    with pytest.raises(ValueError, match="does not say which collective"):
        calibrate(g, [_log([(2**20, 30e-6)], 8)])
    with pytest.raises(ValueError, match="tests all_reduce, not all_gather"):
        calibrate(g, ["# Collective test starting: all_reduce_perf\n" + _log([(2**20, 30e-6)], 8)], op="all_gather")
    with pytest.raises(ValueError, match="calibrated on 16 ranks; this graph has 8 GPUs"):
        collective(g, "all_reduce", 2**20, model=Calibration({}, 1.0, 16, ("all_reduce",)))


def test_collective_variants_take_the_model_too():
    from flowsolver import collective_variants

    g = tp.rail_optimized(nodes=1)
    cal = Calibration(efficiency={"nvlink4": 0.5}, latency_scale=2.0, ranks=8, ops=("all_reduce",))
    kw = dict(algorithm="ring", protocol="Simple")
    together, = collective_variants([g], "all_reduce", 2**26, model=cal, **kw)
    assert together.time == pytest.approx(collective(g, "all_reduce", 2**26, model=cal, **kw).time)
    # the same efficiency without the model: the latency scale 2 adds NCCL's ring Simple
    # latency once more, 56.0 us on 8 ranks of one node (REFERENCE's worked figure)
    bare = collective(g, "all_reduce", 2**26, efficiency={"nvlink4": 0.5}, **kw)
    assert together.time - bare.time == pytest.approx(56.0e-6, rel=1e-6)


def test_concurrent_and_training_steps_take_the_model_too():
    from flowsolver import concurrent, training_step

    g = tp.rail_optimized(nodes=2)
    cal = Calibration(efficiency={"nvlink4": 0.5}, latency_scale=2.0, ranks=8, ops=("all_reduce",))
    groups = [dict(op="all_reduce", size=2**26, ranks=range(8 * s, 8 * s + 8), algorithm="ring") for s in range(2)]
    kw = dict(protocol="Simple")
    lock = concurrent(g, groups, lockstep=True, alone=False, model=cal, **kw)
    # one server each: the groups never meet, so each takes its collective() time under the model,
    # which is the efficiency's time plus NCCL's ring Simple latency once more (56.0 us, REFERENCE)
    bare = collective(g, "all_reduce", 2**26, ranks=range(8), algorithm="ring", efficiency={"nvlink4": 0.5}, **kw)
    assert lock.makespan == pytest.approx(bare.time + 56.0e-6, rel=1e-6)
    step = dict(model="llama-3-8b", tp=8, dp=2, global_batch=16)
    slow = training_step(g, collective_options=dict(model=cal), **step)
    assert slow.phases["tp"].per_call > training_step(g, **step).phases["tp"].per_call


# ---- logs that do not say their rank count, or say another one; logs that are not there ----

def _bare_log(rows, ranks, scale=2.0):
    """A table without a device list: algbw = size / time and busbw = algbw x scale (p - 1) / p,
    nccl-tests' definitions (scale 2 for all-reduce, 1 for all-gather / reduce-scatter /
    all-to-all; broadcast's busbw is its algbw), printed to 2 decimals as nccl-tests does."""
    out = HEADER
    for size, t in rows:
        algbw = size / t / 1e9
        busbw = algbw * scale * (ranks - 1) / ranks if scale else algbw
        out += f"{int(size):12d} {int(size) // 4:12d} float sum -1 {t * 1e6:10.2f} {algbw:7.2f} {busbw:7.2f} 0\n"
    return out


ROWS = [(2**24, 180e-6), (2**26, 500e-6), (2**28, 1.9e-3)]


def test_a_16_rank_log_is_not_fitted_onto_32_gpus(tmp_path, capsys):
    from flowsolver.cli import main

    g = tp.rail_optimized(nodes=4)
    assert len(tp.gpus(g)) == 32
    log = _bare_log(ROWS, 16)              # no device list: busbw / algbw = 2 x 15 / 16 says 16 ranks
    with pytest.raises(ValueError, match=r"ran on 16 ranks, the graph \(ranks=\) has 32 \(16 from busbw / algbw, 32 "
                                         r"the graph's GPUs\): pass ranks= the 16 GPU ranks it ran on \(e\.g\. "
                                         r"ranks=range\(16\)"):
        calibrate(g, [log], op="all_reduce")
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(log)
    assert main(["calibrate", str(path), "--nodes", "4"]) == 2
    err = capsys.readouterr().err            # in the command line's words
    assert "the log ran on 16 ranks, the graph (--ranks) has 32 (16 from busbw / algbw" in err and "pass --ranks" in err


def test_a_log_that_does_not_say_its_rank_count_needs_ranks():
    g = tp.rail_optimized(nodes=1)
    log = _bare_log(ROWS, 8, scale=0)      # broadcast: busbw = algbw whatever the rank count
    with pytest.raises(ValueError, match=r"does not say how many ranks it ran on .*busbw / algbw is 1 for broadcast.*"
                                         r"pass ranks= the GPU ranks it ran on \(the graph has 8 GPUs"):
        calibrate(g, [log], op="broadcast")
    slow = _bare_log([(2**10, 1e-3)], 8)   # 0.00 GB/s: too coarse to tell
    with pytest.raises(ValueError, match=r"does not say how many ranks .*busbw / algbw is printed too coarsely"):
        calibrate(g, [slow], op="all_reduce")


def test_a_log_fits_a_subset_of_the_graph_when_ranks_says_which(tmp_path):
    # an 8-rank log (busbw / algbw says 8) on a 16-GPU graph: ranks= picks the 8, the fit runs
    g = tp.rail_optimized(nodes=2)
    truth = Calibration(efficiency={"nvlink4": 0.70}, latency_scale=1.3, ranks=8, ops=("all_reduce",))
    sizes = [2**k for k in (17, 22, 27, 32)]
    times = [collective(g, "all_reduce", s, ranks=range(8), algorithm="ring", model=truth).time for s in sizes]
    log = _bare_log(list(zip(sizes, times)), 8)
    with pytest.raises(ValueError, match=r"ran on 8 ranks, the graph \(ranks=\) has 16 \(8 from busbw / algbw"):
        calibrate(g, [log], op="all_reduce", algorithm="ring")
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring", ranks=range(8))
    assert cal.ranks == 8 and cal.efficiency == {"nvlink4": pytest.approx(0.70, rel=0.03)}


def test_a_missing_log_is_not_found_not_malformed(tmp_path, capsys):
    from flowsolver.cli import main

    g = tp.rail_optimized(nodes=1)
    missing = tmp_path / "missing.log"
    with pytest.raises(FileNotFoundError, match="missing.log"):
        calibrate(g, [str(missing)], op="all_reduce")
    assert main(["calibrate", str(missing), "--nodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "no such nccl-tests log" in err and str(missing) in err


@pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
def test_busbw_over_algbw_gives_every_shared_logs_rank_count():
    import json

    from flowsolver.collectives._calibrate import ranks_from_busbw

    scaled = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for path in sorted(LOGS.glob("*.txt")):
        df = nccl_tests.read(path)
        said, why = ranks_from_busbw(df, df.attrs["op"])
        stated = json.loads(path.with_suffix(".json").read_text())["ranks"]      # the sidecar's, from the source
        assert said == (stated if df.attrs["op"] in scaled else None), (path.name, why)


def test_busbw_over_algbw_never_gives_a_wrong_rank_count():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from flowsolver.collectives._calibrate import ranks_from_busbw

    pd = pytest.importorskip("pandas")

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]), st.integers(2, 4096),
           st.lists(st.floats(0.0, 900.0), min_size=1, max_size=8))
    def check(op, ranks, algbws):
        scale = 2.0 if op == "all_reduce" else 1.0
        # nccl-tests rounds both to 2 decimals after computing busbw from the unrounded algbw
        df = pd.DataFrame(dict(algbw=[round(a, 2) for a in algbws],
                               busbw=[round(a * scale * (ranks - 1) / ranks, 2) for a in algbws]))
        said, _ = ranks_from_busbw(df, op)
        assert said in (None, ranks)

    check()


# ---- the physical quantities: recovered from a synthetic log, left alone where a log cannot tell them ----

def _truth(**kw):
    """Hand-chosen constants of a 2 x 8 H100 NDR cluster: its NDR network at 0.70 of its rate (the
    ring's NVLink and NICs run at the same utilisation: one log cannot tell them apart, and the
    calibration derates the network, NVLink's rate being the GPU generation's), 25 us
    more on every network hop than NCCL's constants (NCCL adds a network plugin's latency per
    hop, twice for Simple), LL's kernels at half NCCL's LL bandwidth, a ring fill of 3.5 steps."""
    from dataclasses import replace

    from flowsolver.collectives._pipeline import PIPELINE

    return Calibration(efficiency={"ib_ndr": 0.70}, latency_scale=1.0, ranks=16, ops=("all_reduce",),
                       net_latency=25e-6, ll_bandwidth=0.5, pipeline=replace(PIPELINE, fill_ring=3.5), **kw)


def _sweep(graph, sizes, model):
    return _log([(s, collective(graph, "all_reduce", s, algorithm="ring", model=model).time) for s in sizes], 16)


def test_hand_chosen_quantities_are_recovered_from_a_full_sweep():
    g = tp.rail_optimized(nodes=2)
    sizes = [2**k for k in range(3, 35, 2)]                   # 8 B - 4 GiB, every 4x
    cal = calibrate(g, [_sweep(g, sizes, _truth())], op="all_reduce", algorithm="ring")
    got = {p.name: p for p in cal.parameters}
    assert cal.efficiency == {"ib_ndr": pytest.approx(0.70, rel=0.03)}
    assert cal.net_latency == pytest.approx(25e-6, rel=0.05)
    assert cal.ll_bandwidth == pytest.approx(0.5, rel=0.10)
    assert cal.pipeline.fill_ring == pytest.approx(3.5, rel=0.10)
    for name, truth in (("net_latency", 25e-6), ("ll_bandwidth", 0.5), ("fill_ring", 3.5)):
        p = got[name]
        assert p.constrained and 0 < p.uncertainty and abs(p.value - truth) <= max(3 * p.uncertainty, 0.1 * truth)
    # the one-node quantities (NVLS floor and fill) do not move a ring across nodes: not constrained
    assert {"floor_nvls", "fill_nvls"} <= set(cal.unconstrained)
    assert got["fill_nvls"].value == got["fill_nvls"].default and got["fill_nvls"].uncertainty is None
    assert cal.residuals["error"].abs().max() < 0.02


def test_a_log_of_small_messages_leaves_the_bandwidth_at_the_library_value():
    # 8 B - 64 KiB: NCCL's latency and the network hops are the time; the links' bandwidth is
    # under half of every row's, so the log cannot tell it: the calibration keeps the
    # library's efficiency, and a 4 GiB all-reduce is the uncalibrated model's, not the truth's
    g = tp.rail_optimized(nodes=2)
    small = [2**k for k in range(3, 17)]
    cal = calibrate(g, [_sweep(g, small, _truth())], op="all_reduce", algorithm="ring")
    got = {p.name: p for p in cal.parameters}
    assert "bandwidth" in cal.unconstrained and cal.efficiency == {}
    assert not got["bandwidth"].constrained and got["bandwidth"].value == 1.0
    assert "do not constrain: " in cal.message and "bandwidth" in cal.message
    assert got["net_latency"].constrained and cal.net_latency == pytest.approx(25e-6, rel=0.10)
    big = 2**32
    bare = collective(g, "all_reduce", big, algorithm="ring").time
    truth = collective(g, "all_reduce", big, algorithm="ring", model=_truth()).time
    # the calibrated time is the uncalibrated one plus the network latency NCCL counts on a ring
    # Simple all-reduce over 2 nodes: 2 (nodes - 1) = 2 network hops, each twice for Simple
    calibrated = collective(g, "all_reduce", big, algorithm="ring", model=cal).time
    assert calibrated - bare == pytest.approx(2 * 2 * cal.net_latency, rel=1e-3)
    assert truth / bare > 1.15                             # the truth's NVLink at 0.70: not extrapolated to


@pytest.mark.slow          # ~15 s of CPU: four calibrations on 16 rows, 64 collectives
@pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
def test_each_half_of_a_real_sweep_calibrates_what_it_can_tell():
    # AWS p5 (2 x 8 H100, EFA modelled as 8 x 400G Ethernet), 8 B - 16 GiB: the lower half
    # (to 256 KiB) tells the network hop's latency, not the links' bandwidth; the upper half
    # tells the bandwidth; each half predicts the other better than the uncalibrated model
    import statistics

    P5 = tp.get_server("dgx_h100").with_(name="p5", nic="eth_400g")
    g = tp.rail_optimized(2, server=P5, link="eth_400g")
    df = nccl_tests.read(LOGS / "aws_2xp5_H100_allreduce_8B-16G.txt")
    rows = df[df["placement"] == "out-of-place"].sort_values("size")
    half = len(rows) // 2
    hops = []
    for fit, test, told, untold in ((slice(None, half), slice(half, None), "net_latency", "bandwidth"),
                                    (slice(half, None), slice(None, half), "bandwidth", "ll_bandwidth")):
        part = rows.iloc[fit].copy()
        part.attrs.update(df.attrs)
        cal = calibrate(g, [part])
        assert told not in cal.unconstrained and untold in cal.unconstrained
        hops.append(next(p for p in cal.parameters if p.name == "net_latency"))
        sizes, measured = rows["size"].iloc[test], rows["time"].iloc[test] * 1e-6
        calibrated = [abs(collective(g, "all_reduce", float(s), model=cal).time / t - 1) for s, t in zip(sizes, measured)]
        bare = [abs(collective(g, "all_reduce", float(s)).time / t - 1) for s, t in zip(sizes, measured)]
        assert statistics.median(calibrated) < statistics.median(bare)
    # the network hop's latency is one physical quantity: both halves tell it, and agree within
    # three standard deviations of their difference (2.5 since NCCL's run-time channel count, 24
    # on one node, entered the pipeline on 2026-12-06: 23.6 and 19.7 us; within 2 before)
    low, high = hops
    assert low.constrained and high.constrained
    assert abs(low.value - high.value) < 3 * (low.uncertainty**2 + high.uncertainty**2) ** 0.5


def test_a_log_run_with_several_gpus_a_thread_is_fitted_with_the_hosts_floor():
    # nccl-tests -g 8 on one DGX H100: its header says nGpus 8. A ring LL all-reduce of 1-32 KiB
    # takes ~16-20 us on the GPUs, below the thread's 8 x 4.2 = 33.6 us (nccl-tests issue #123's
    # per-call figure), so every such row measures 33.6 us. Read with the header the rows are the
    # model's already; read as one GPU a thread the fit has to invent a latency of ~15 us.
    g = tp.rail_optimized(nodes=1)
    sizes = [2**k for k in (10, 11, 12, 13, 14, 15)]
    rows = [(s, 8 * 4.2e-6) for s in sizes]
    log = "# nThread 1 nGpus 8 minBytes 1024 maxBytes 32768 step: 2(factor) warmup iters: 5 iters: 20\n" + \
        _log(rows, 8)
    assert nccl_tests.read(log).attrs["gpus_per_thread"] == 8
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring", protocol="LL")
    assert cal.residuals["error"].abs().max() < 1e-6
    assert cal.launch_latency == pytest.approx(0.0, abs=0.5e-6)
    one = calibrate(g, [log], op="all_reduce", algorithm="ring", protocol="LL", gpus_per_thread=1)
    assert one.launch_latency > 10e-6
    with pytest.raises(ValueError, match="GPUs per thread differ \\(nGpus: 4, 8\\)"):
        calibrate(g, [log, log.replace("nGpus 8", "nGpus 4")], op="all_reduce", algorithm="ring", protocol="LL")


def test_logs_that_state_their_gpus_a_thread_beside_logs_that_do_not_are_refused():
    g = tp.rail_optimized(nodes=1)
    rows = [(2**k, 8 * 4.2e-6) for k in (10, 11, 12, 13)]
    stated = "# nThread 1 nGpus 8 minBytes 1024 maxBytes 8192 step: 2(factor) warmup iters: 5 iters: 20\n" + \
        _log(rows, 8)
    with pytest.raises(ValueError, match="nGpus: 8, not stated"):
        calibrate(g, [stated, _log(rows, 8)], op="all_reduce", algorithm="ring", protocol="LL")
    cal = calibrate(g, [stated, _log(rows, 8)], op="all_reduce", algorithm="ring", protocol="LL", gpus_per_thread=8)
    assert cal.residuals["error"].abs().max() < 1e-6
    # a bad option is refused before any log is read
    with pytest.raises(ValueError, match="chunk"):
        calibrate(g, ["no-such.log"], op="all_reduce", chunk=-1)


def test_one_dataframe_is_one_log_not_its_column_names():
    g = tp.rail_optimized(nodes=1)
    rows = [(2**k, 8 * 4.2e-6) for k in (10, 11, 12, 13)]
    df = nccl_tests.read(_log(rows, 8), op="all_reduce")
    alone = calibrate(g, df, op="all_reduce", algorithm="ring", protocol="LL")
    listed = calibrate(g, [df], op="all_reduce", algorithm="ring", protocol="LL")
    assert len(alone.residuals) == len(rows) and alone.launch_latency == listed.launch_latency


def test_auto_prunes_by_bounds_that_take_a_calibrations_latency_scale():
    # a latency scale of 0.05: the unscaled bound pruned the tree (2.48 us), and auto picked
    # halving-doubling at 2.77 us (review)
    g = tp.rail_optimized(nodes=2)
    cal = Calibration(efficiency={}, latency_scale=0.05, ranks=16, ops=())
    kw = dict(model=cal, step_latency=2e-6, candidates="all")
    r = collective(g, "all_reduce", 2**16, **kw)
    each = [collective(g, "all_reduce", 2**16, algorithm=a, **kw).time for a in r.candidates | r.pruned]
    assert r.time == pytest.approx(min(each), rel=1e-9)


def test_a_fitted_hop_latency_is_a_cost_nccls_choice_does_not_see():
    """A calibration's net_latency is what a network hop costs on the user's fabric; NCCL
    chooses with what its plugin reports (0 on InfiniBand): 2 x 8 H100 keep NCCL's pick,
    NVLSTree / Simple, at 4 and 16 MiB, and it takes 2 network hops x 2 (Simple) x 50 us more
    (with the hop cost in the estimate the pick moved to tree / LL128 at 4 MiB: 234 us)."""
    g = tp.rail_optimized(2)
    cal = Calibration({}, 1.0, 16, ("all_reduce",), net_latency=50e-6)
    for size in (1 << 22, 1 << 24):
        bare, fitted = collective(g, "all_reduce", size), collective(g, "all_reduce", size, model=cal)
        assert (fitted.algorithm, fitted.protocol) == (bare.algorithm, bare.protocol) == ("nvls_tree", "Simple")
        assert fitted.time == pytest.approx(bare.time + 2 * 2 * 50e-6, rel=1e-9)


def test_a_log_of_more_ranks_than_the_graph_is_told_the_nodes(tmp_path, capsys):
    # newuser20: a 4 x 8 log on the command line's default 2 nodes was told to pass
    # --ranks range(32), which the 16-GPU graph refuses; the log's 4 hosts say --nodes 4
    from flowsolver.cli import main

    path = tmp_path / "all_reduce_perf.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + _log([(2**20, 60e-6), (2**26, 900e-6)], 32))
    assert main(["calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the graph has 16 GPUs: time it on a graph of 32 GPUs (--nodes 4: 4 servers of 8 GPUs)" in err
    assert "range(" not in err


def test_a_log_faster_than_the_raw_rate_says_the_efficiency_is_capped():
    # one DGX H100, ring: a log 1.5x faster than the model at NVLink 4's 20.6 / 25 needs 1.24 of
    # the raw rate; the fit stops at 1.0 and cal.message says so (the CLI alone said it before)
    g = tp.rail_optimized(nodes=1)
    sizes = [2**k for k in (22, 25, 28, 31)]
    log = _log([(s, collective(g, "all_reduce", s, algorithm="ring").time / 1.5) for s in sizes], 8)
    cal = calibrate(g, [log], op="all_reduce", algorithm="ring")
    assert cal.efficiency["nvlink4"] == 1.0
    assert "nvlink4 at 1.000, its cap: the fit asked for" in cal.message
