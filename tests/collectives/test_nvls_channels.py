"""NVLS's channels are NCCL's own count, not the ring's: NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS
(and ``channels=``, which stands for them) clamp ``comm->nChannels`` only (src/graph/connect.cc:492-506
of master 5067397c), while ``comm->nvlsChannels`` comes from src/transport/nvls.cc:202-238
(ncclNvlsTuning: NVLS_NCHANNELS_SM90 = 16, SM100 24 in one NVLink domain and 32 across nodes),
clamped only to NCCL_MIN_CTAS / NCCL_MAX_CTAS; logs of 8-GPU H100 nodes print "24 coll channels,
... 16 nvls channels". A result's reported channels are those its time used."""

import pytest

import topologies as tp
from flowsolver import collective, nccl_tests
from flowsolver._nccl_env import bounded_channels, log_environment
from flowsolver.collectives import log_rows
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants

H100 = "NVIDIA H100 80GB HBM3"


def _hw(nodes=1, server="dgx_h100", channels=None):
    g = tp.rail_optimized(nodes=nodes, server=server)
    ranks, layout = participants(g, "all_reduce", None, None)
    return describe(g, ranks, layout, channels=channels)


@pytest.mark.parametrize("channels", [1, 2, 4, 32])
def test_channels_set_the_rings_count_and_leave_nvls_its_own(channels):
    hw = _hw(channels=channels)
    assert hw.channels == channels
    assert hw.nvls_channels == 16 and hw.nvls                  # NVLS_NCHANNELS_SM90, untouched
    for nodes, nvls in ((1, 24), (2, 32)):                     # NVLS_NCHANNELS_SM100(_NVL)
        assert _hw(nodes, "dgx_b200", channels).nvls_channels == nvls


def test_max_nchannels_1_neither_turns_nvls_off_nor_changes_its_time():
    g = tp.rail_optimized(nodes=1)
    size = 1 << 30
    base = collective(g, "all_reduce", size)
    assert base.algorithm == "nvls"          # NCCL's pick on one DGX H100 at 1 GiB
    for channels in (1, 2, 32):
        # NCCL runs NVLS on the same 16 channels whatever NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS say
        r = collective(g, "all_reduce", size, algorithm="nvls", channels=channels)
        assert r.time == pytest.approx(base.time, rel=1e-9)
    # two nodes: NVLSTree keeps its 16 too (8 ring channels: the flow solve's rings are still one a
    # NIC, as NCCL's default, so only the channel count differs; fewer: below)
    two = tp.rail_optimized(nodes=2)
    ref = collective(two, "all_reduce", 1 << 28, algorithm="nvls_tree")
    assert collective(two, "all_reduce", 1 << 28, algorithm="nvls_tree", channels=8).time == \
        pytest.approx(ref.time, rel=1e-9)
    assert collective(two, "all_reduce", 1 << 28, algorithm="nvls_tree", channels=1).algorithm == "nvls_tree"


def _log(lines, rows):
    head = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20\n"
    head += "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r} on dgx0 device {r:2d} [0x{r:02x}] {H100}\n"
                    for r in range(8))
    head += "".join(f"dgx0:100:100 [0] NCCL INFO {line}\n" for line in lines)
    head += ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
             "busbw #wrong\n")
    body = ""
    for size, t in rows:
        algbw = size / t / 1e9
        part = f"{t * 1e6:8.1f} {algbw:7.2f} {algbw * 1.75:7.2f}      0"
        body += f"{size:12d} {size // 4:12d}     float     sum      -1 {part} {part}\n"
    return head + body


def test_a_logs_max_nchannels_1_keeps_nvls_on_its_16_channels():
    g = tp.rail_optimized(nodes=1)
    size = 1 << 30
    nvls = collective(g, "all_reduce", size).time
    log = _log(["NCCL_MAX_NCHANNELS set by environment to 1.",
                "1 coll channels, 0 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"],
               [(size, nvls)])
    df = nccl_tests.read(log, op="all_reduce")
    rows = log_rows(df, "all_reduce", g)
    assert rows.keywords == {"channels": 1}                  # the ring's count
    r = collective(g, "all_reduce", size, **rows.keywords)
    assert (r.algorithm, r.time) == ("nvls", pytest.approx(nvls, rel=1e-9))


def test_the_cli_says_a_logs_channel_setting_is_the_rings(tmp_path, capsys):
    from flowsolver.cli import main
    g = tp.rail_optimized(nodes=1)
    size = 1 << 30
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(_log(["NCCL_MAX_NCHANNELS set by environment to 1."], [(size, collective(g, "all_reduce", size).time)]))
    assert main(["collective", "--nodes", "1", "--compare", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 ring / tree channels" in out and "NVLS keeps its own" in out


def test_ctas_bound_the_rings_count_as_connect_cc_does_and_are_named_for_nvls():
    # connect.cc:498-505: n = min(ncclMaxNchannels(), n, maxCTAs), copied up to max(ncclMinNchannels(), minCTAs)
    env = log_environment({"NCCL_MAX_NCHANNELS": "8", "NCCL_MAX_CTAS": "4"})
    assert env["channels"] == (1, 4)
    assert bounded_channels(24, env["channels"]) == 4
    env = log_environment({"NCCL_MIN_NCHANNELS": "8", "NCCL_MIN_CTAS": "32"})
    assert bounded_channels(24, env["channels"]) == 32
    # init.cc:2190-2194: minCTAs above maxCTAs is lowered to it; <= 0 is ignored (init.cc:2015, 2027)
    assert log_environment({"NCCL_MIN_CTAS": "16", "NCCL_MAX_CTAS": "4"})["channels"] == (4, 4)
    assert log_environment({"NCCL_MAX_CTAS": "0"})["channels"] is None
    # and they clamp NVLS's NCCL_NVLS_NCHANNELS (nvls.cc:234-235): applied, so none is named unmodelled
    env = log_environment({"NCCL_MAX_CTAS": "4", "NCCL_NVLS_NCHANNELS": "8"})
    assert env["unmodelled"] == [] and env["nvls_channels"] == 8 and env["ctas"] == (1, 4)
    assert log_environment({"NCCL_MAX_CTAS": "0"})["unmodelled"] == []



@pytest.mark.parametrize("server, nodes, algorithm, nvls", [("dgx_h100", 1, "nvls", 16), ("dgx_h100", 2, "nvls_tree", 16),
                                                            ("dgx_b200", 1, "nvls", 24), ("dgx_b200", 2, "nvls_tree", 32)])
def test_an_nvls_result_reports_the_nvls_channels_its_time_used(server, nodes, algorithm, nvls):
    # nvls.cc:155-157 NVLS_NCHANNELS_SM90 16, SM100_NVL 24 (one NVLink domain), SM100 32 (across nodes)
    g = tp.rail_optimized(nodes=nodes, server=server)
    r = collective(g, "all_reduce", 1 << 30, algorithm=algorithm)
    assert r.channels_run == nvls


def test_the_clis_ch_column_is_the_channels_the_time_used(capsys):
    import json

    from flowsolver.cli import main
    assert main(["collective", "--nodes", "1", "--op", "all_reduce", "-b", "1G", "-e", "1G", "--algorithm", "nvls",
                 "--json"]) == 0
    row, = json.loads(capsys.readouterr().out)
    assert (row["algorithm"], row["channels"]) == ("nvls", 16)          # not the ring's 24
    # a ring at 64 KiB runs 2 of its 24 (a channel dropped while 64 KiB < nc x 512 threads x 64 B,
    # enqueue.cc topoGetAlgoInfo: 2 x 32768 = 65536 is not more than 64 KiB)
    assert main(["collective", "--nodes", "1", "--op", "all_reduce", "-b", "64K", "-e", "64K", "--algorithm", "ring",
                 "--protocol", "Simple", "--json"]) == 0
    row, = json.loads(capsys.readouterr().out)
    assert row["channels"] == 2


@pytest.mark.parametrize("server, nodes, algorithm", [("dgx_h100", 1, "nvls"), ("dgx_h100", 2, "nvls_tree"),
                                                      ("dgx_b200", 1, "nvls"), ("dgx_b200", 2, "nvls_tree"),
                                                      ("dgx_h100", 4, "nvls_tree")])
def test_fewer_nvls_channels_are_never_faster(server, nodes, algorithm):
    # a channel is one CTA: fewer (NCCL_MAX_CTAS, NCCL_NVLS_NCHANNELS) move less, and the pipeline's
    # smaller steps (channels x ppn chunks a step) must not make up for it. The graph's bus
    # bandwidths are held (a GPU's NVLink inside a node, 8 NICs of 48 GB/s across), only the count moves
    from dataclasses import replace

    from flowsolver.collectives._nccl import busbw_factor
    from flowsolver.collectives._nccl_timing import tuned_time
    from flowsolver.collectives._options import Options
    hw = _hw(nodes, server)
    p = hw.ranks
    for size in [2 ** k for k in range(12, 34, 3)]:
        ring = size * busbw_factor("all_reduce", p) / (hw.nvlink_bw if nodes == 1 else 8 * 48e9)
        own = size / hw.nvlink_bw
        times = [tuned_time(algorithm, "Simple", "all_reduce", size, p, ring, own, replace(hw, nvls_channels=n),
                            Options(tuner=True))[0] for n in range(2, hw.nvls_run + 1)]
        # within 1 %: where one channel fewer spills a loop's last cells into a second loop, the
        # pipeline's averaged steps (NVLSTree's stages at their own rates) can come out a hair
        # under (B200 x 2 at 16 MiB: 31 channels 229.9 us, 32 channels 231.8 us); the finding was
        # 17-45 % reversals from the steps' fill shrinking with the channels
        assert all(a >= b * (1 - 1e-2) for a, b in zip(times, times[1:])), (size, times)
    # at 1 GiB on one DGX H100 half NCCL's 16 CTAs take about twice the transfer: 8 x (1 GiB / 16
    # CTAs' share each); the time's latency and fill are a small part of it
    if (server, nodes) == ("dgx_h100", 1):
        size = 1 << 30
        ring = size * busbw_factor("all_reduce", p) / hw.nvlink_bw
        full, half = (tuned_time("nvls", "Simple", "all_reduce", size, p, ring, size / hw.nvlink_bw,
                                 replace(hw, nvls_channels=n), Options(tuner=True))[0] for n in (16, 8))
        assert half / full == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("size", [64 << 20, 1 << 30])
def test_nvlstree_across_nodes_keeps_its_time_under_fewer_ring_channels(size):
    # review16 finding 1: NCCL_MAX_NCHANNELS / channels= clamp comm->nChannels (connect.cc:492-506)
    # and enqueue.cc topoGetAlgoInfo gives NVLSTree comm->nvlsChannels whatever it is, over all
    # the node's NICs: NVLSTree's time must not follow the ring's count (it ran 30-410 % slower
    # at 4..1 ring channels: the ring's flow solve, which NVLSTree's network rate is read from,
    # had used as many NICs as rings)
    import flowsolver as fs
    import topologies as tp
    g = tp.rail_optimized(2, server="dgx_h100")
    base = fs.collective(g, "all_reduce", size, algorithm="nvls_tree")
    for channels in (1, 2, 4, 8, 12):     # 12: 8 NICs, four of them two rings in the ring's solve
        r = fs.collective(g, "all_reduce", size, algorithm="nvls_tree", channels=channels)
        assert r.channels_run == base.channels_run == 16
        assert r.time == pytest.approx(base.time, rel=0.02), channels
