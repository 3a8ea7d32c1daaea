"""``flowsolver collective --compare`` of a multi-node sendrecv_perf log times nccl-tests' ring
shift (rank i sends to i + 1, all at once: src/sendrecv.cu), as calibrate does, not the pair 0 -> 1."""

import json

import pytest

import topologies as tp
from flowsolver.collectives import nccl_tests_collective
from flowsolver.cli import main

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
SIZES = [2**20, 2**25, 2**30]
MEASURED_US = [104.9, 900.0, 23860.9]


def _log():
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on node{r // 8} device {r % 8} [0x0f] NVIDIA H100 80GB HBM3\n"
                      for r in range(16))
    return ("# Collective test starting: sendrecv_perf\n" + devices + HEADER
            + "".join(f"{s} {s // 4} float sum -1 {t:.1f} 0 0 0\n" for s, t in zip(SIZES, MEASURED_US)))


def test_compare_of_a_2x8_sendrecv_log_times_the_ring_shift(tmp_path, capsys):
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    log, png = tmp_path / "sendrecv.log", tmp_path / "cmp.png"
    log.write_text(_log())
    assert main(["collective", "--nodes", "2", "--compare", str(log), "--plot", str(png), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # GPU 7 -> GPU 8 and 15 -> 0 cross the network, each through one 400 Gb/s NDR NIC: 50 GB/s a
    # direction (the catalogue's raw rate, no efficiency), so 1 GiB takes at least 2**30 / 50e9 s
    # (21.5 ms); the NVLink pair 0 -> 1 alone was modelled at 12.7 ms
    assert rows[-1]["time_us"] >= 2**30 / tp.get_link("ib_ndr").bandwidth * 1e6 == pytest.approx(21474.8, rel=1e-4)
    # the shift calibrate fits a log's rows to (its RowModel's rank groups): the library's
    # nccl_tests_collective, the model of sendrecv_perf
    shift = nccl_tests_collective(tp.rail_optimized(nodes=2), "send_recv", 2**30)
    assert rows[-1]["time_us"] == pytest.approx(shift.time * 1e6, rel=1e-9)
    assert png.stat().st_size > 0
