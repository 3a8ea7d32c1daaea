"""A log's NCCL settings (NCCL prints each as "NCCL_X set by environment to V", src/misc/param.cc:100)
applied as NCCL applies them, or named in a warning where the model cannot express them; the
log's GPUs checked against the graph's. The logs are printed here in nccl-tests' format
(src/util.cu), their rows the library's own prediction of what NCCL ran under the setting: a log
consistent with the model must calibrate back to the catalogue's efficiencies."""

import json
import warnings

import pytest

import topologies as tp
from flowsolver import calibrate, collective, nccl_tests
from flowsolver.cli import main
from flowsolver.collectives import log_rows
from flowsolver.routing import link_efficiency

H100 = "NVIDIA H100 80GB HBM3"
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
          "#wrong\n")


def _log(op, ranks, per_host, rows, info=(), device=H100):
    """An nccl-tests log of ``op`` on ``ranks`` GPUs, ``per_host`` a host, its rows ``(size, time s)``
    and ``info`` NCCL INFO lines; busbw as nccl-tests' src/*.cu computes it."""
    head = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20\n"
    head += "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r} on dgx{r // per_host} device {r % per_host:2d} "
                    f"[0x{r:02x}] {device}\n" for r in range(ranks))
    head += "".join(f"dgx0:100:100 [0] NCCL INFO {line}\n" for line in info)
    factor = {"all_reduce": 2 * (ranks - 1) / ranks, "all_gather": (ranks - 1) / ranks}[op]
    per = ranks if op == "all_gather" else 1
    body = ""
    for size, t in rows:
        us, algbw = t * 1e6, size / t / 1e9
        part = f"{us:8.1f} {algbw:7.2f} {algbw * factor:7.2f}      0"
        body += f"{size:12d} {size // 4 // per:12d}     float     sum      -1 {part} {part}\n"
    return head + HEADER + body


SIZES = [2**k for k in range(20, 31, 2)]


def _nvls_off_log():
    g = tp.rail_optimized(nodes=1)
    # NCCL without NVLS runs ring or tree (src/transport/nvls.cc ncclNvlsInit returns at NVLS_ENABLE=0)
    rows = [(s, collective(g, "all_reduce", s, algorithm=["ring", "tree"]).time) for s in SIZES]
    return g, _log("all_reduce", 8, 8, rows, ["NCCL_NVLS_ENABLE set by environment to 0.",
                                              "NCCL version 2.21.5+cuda12.4"])


def test_nvls_enable_0_calibrates_back_to_the_catalogue_and_compares_without_nvls(tmp_path, capsys):
    g, log = _nvls_off_log()
    df = nccl_tests.read(log, op="all_reduce")
    assert df.attrs["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"          # param.cc's "%lld." read as 0
    assert log_rows(df, "all_reduce", g).allowed[0] == ("ring", "tree")
    cal = calibrate(g, [df])
    # (it fitted nvlink4 at 0.604 when calibrate still priced NVLS)
    assert cal.efficiency.get("nvlink4", link_efficiency("nvlink4")) == pytest.approx(link_efficiency("nvlink4"),
                                                                                      rel=0.01)
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(log)
    assert main(["collective", "--nodes", "1", "--compare", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["algorithm"] for r in rows} <= {"ring", "tree"}
    assert max(abs(r["error"]) for r in rows) < 0.01        # was -23.6 % at 1 GiB, NVLS priced


def test_max_nchannels_bounds_the_channels_as_nccl_does(tmp_path, capsys):
    g = tp.rail_optimized(nodes=2)
    # NCCL_MAX_NCHANNELS=4 caps the channels (src/graph/connect.cc:503, ncclMaxNchannels)
    rows = [(s, collective(g, "all_gather", s, algorithm="ring", channels=4).time) for s in SIZES]
    log = _log("all_gather", 16, 8, rows, ["NCCL_MAX_NCHANNELS set by environment to 4.",
                                           "NCCL_ALGO set by environment to Ring"])
    df = nccl_tests.read(log, op="all_gather")
    assert log_rows(df, "all_gather", g).keywords == {"channels": 4}
    cal = calibrate(g, [df])
    factor = {p.name: p.value for p in cal.parameters}["bandwidth"]
    assert factor == pytest.approx(1.0, rel=0.01)           # nvlink4 was fitted at 0.435 of its rate
    for tech, eff in cal.efficiency.items():
        assert eff == pytest.approx(link_efficiency(tech), rel=0.01)
    path = tmp_path / "all_gather_perf.log"
    path.write_text(log)
    assert main(["collective", "--nodes", "2", "--compare", str(path), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert {r["channels"] for r in compared} == {4} and max(abs(r["error"]) for r in compared) < 0.01


def test_channel_bounds_follow_nccls_min_and_max():
    from flowsolver._nccl_env import bounded_channels, log_environment

    # src/graph/connect.cc ncclMinNchannels / ncclMaxNchannels: the new names override the old
    # (NRINGS), a maximum below 1 is 1, both at most MAXCHANNELS (64); the count is capped at the
    # maximum, then copied up to the minimum
    assert log_environment({"NCCL_MAX_NRINGS": "8", "NCCL_MAX_NCHANNELS": "4"})["channels"] == (0, 4)
    assert log_environment({"NCCL_MAX_NCHANNELS": "0"})["channels"] == (0, 1)
    assert log_environment({"NCCL_MIN_NCHANNELS": "100"})["channels"] == (64, 64)
    assert log_environment({})["channels"] is None
    # -2 is the parameters' "not set" (NCCL_PARAM(MaxNchannels, "MAX_NCHANNELS", -2)): the old name,
    # else no bound, applies
    assert log_environment({"NCCL_MAX_NCHANNELS": "-2"})["channels"] is None
    assert log_environment({"NCCL_MAX_NRINGS": "8", "NCCL_MAX_NCHANNELS": "-2"})["channels"] == (0, 8)
    assert [bounded_channels(16, b) for b in ((0, 4), (24, 64), (8, 4), (0, 64))] == [4, 24, 8, 16]


def test_pxn_disable_and_the_printed_channel_count_reach_the_model():
    g = tp.rail_optimized(nodes=2)
    rows = [(2**20, 1e-4)]
    for value, keywords in (("1", {"pxn": False}), ("0", {})):      # paths.cc: PXN unless ncclPxnDisable() == 1
        df = nccl_tests.read(_log("all_gather", 16, 8, rows, [f"NCCL_PXN_DISABLE set by environment to {value}."]),
                             op="all_gather")
        assert log_rows(df, "all_gather", g).keywords == keywords
    # "2 coll channels" (src/init.cc:1646): NCCL ran 2, fewer than the model's 16: used, and said
    line = "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer"
    df = nccl_tests.read(_log("all_gather", 16, 8, rows, [line]), op="all_gather")
    assert df.attrs["coll_channels"] == 2
    with pytest.warns(UserWarning, match="NCCL printed 2 coll channels, fewer than the 16"):
        assert log_rows(df, "all_gather", g).keywords == {"channels": 2}


def test_a_setting_the_model_cannot_express_is_named_and_quiet_ones_are_not():
    g = tp.rail_optimized(nodes=2)
    rows = [(s, collective(g, "all_gather", s, algorithm="ring").time) for s in SIZES[:3]]
    quiet = ["NCCL_DEBUG set by environment to INFO", "NCCL_SOCKET_IFNAME set by environment to eth0",
             "NCCL_IB_GID_INDEX set by environment to 3.", "NCCL_IB_DISABLE set by environment to 0."]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = nccl_tests.read(_log("all_gather", 16, 8, rows, quiet), op="all_gather")
        assert log_rows(df, "all_gather", g).notes == ()
    loud = quiet + ["NCCL_IB_HCA set by environment to mlx5_0,mlx5_1", "NCCL_BUFFSIZE set by environment to 1048576."]
    with pytest.warns(UserWarning) as said:
        cal = calibrate(g, [_log("all_gather", 16, 8, rows, loud)], op="all_gather")
    text = " ".join(str(w.message) for w in said)
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1" in text and "NCCL_BUFFSIZE=1048576" in text
    assert "NCCL_DEBUG" not in text and "NCCL_SOCKET_IFNAME" not in text
    assert "NCCL_IB_HCA" in cal.message and "absorbed" in cal.message


def test_the_logs_gpus_are_checked_against_the_graphs():
    rows = [(2**20, 1e-4), (2**22, 3e-4)]
    a100 = nccl_tests.read(_log("all_reduce", 8, 8, rows, device="NVIDIA A100-SXM4-80GB"), op="all_reduce")
    # an A100 log on H100s (the command line's default server) fitted nvlink4 at 0.524: refused
    with pytest.raises(ValueError, match=r"NVIDIA A100-SXM4-80GB \(ampere\).*h100_sxm \(hopper\).*--server.*dgx_a100"):
        calibrate(tp.rail_optimized(nodes=1), [a100])
    assert log_rows(a100, "all_reduce", tp.rail_optimized(nodes=1, server="dgx_a100")).rows is not None
    pcie = nccl_tests.read(_log("all_reduce", 8, 8, rows, device="NVIDIA H100 PCIe"), op="all_reduce")
    with pytest.warns(UserWarning, match="NVIDIA H100 PCIe.*h100_sxm, another part of the generation"):
        log_rows(pcie, "all_reduce", tp.rail_optimized(nodes=1))


def test_a_logs_nccl_version_applies_that_releases_rules():
    """A log printing "NCCL version 2.18.3+cuda12.2" runs NCCL 2.18's rules: its tree Simple
    rows are the tree's pipeline in 2.18's depth-shrunk chunks (collective(nccl_version=)), and
    such a log, written from that model, calibrates back to the catalogue's efficiencies."""
    g = tp.rail_optimized(nodes=2)
    sizes = [2**k for k in range(20, 25)]
    rows = [(s, collective(g, "all_reduce", s, algorithm="tree", protocol="Simple", nccl_version="2.18").time)
            for s in sizes]
    log = _log("all_reduce", 16, 8, rows, ["NCCL version 2.18.3+cuda12.2", "NCCL_ALGO set by environment to Tree",
                                            "NCCL_PROTO set by environment to Simple"])
    df = nccl_tests.read(log, op="all_reduce")
    assert log_rows(df, "all_reduce", g).keywords == {"nccl_version": "2.18.3"}
    assert rows[0][1] < collective(g, "all_reduce", sizes[0], algorithm="tree", protocol="Simple").time
    cal = calibrate(g, [df])
    for tech, eff in cal.efficiency.items():
        assert eff == pytest.approx(link_efficiency(tech), rel=0.02)


def test_a_release_given_over_the_logs_version_line_is_said():
    # calibrate(nccl_version=) applies one release to every row; a log printing another release's
    # version line is fitted under the given one: a warning names both (adv23 F7: it was silent)
    g = tp.rail_optimized(nodes=2)
    rows = [(s, collective(g, "all_reduce", s, nccl_version="2.18").time) for s in SIZES]
    df = nccl_tests.read(_log("all_reduce", 16, 8, rows, ["NCCL version 2.18.3+cuda12.2"]), op="all_reduce")
    with pytest.warns(UserWarning, match=r"nccl_version='2.21' is applied to every row, over the logs' NCCL version "
                                         r"lines \(2.18.3\)"):
        calibrate(g, [df], nccl_version="2.21")
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the same release as the log's: nothing to say
        calibrate(g, [df], nccl_version="2.18")
