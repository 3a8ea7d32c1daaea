"""An H200 NVL log (a PCIe card on NVLink bridges, no NVSwitch) against a DGX H200 graph (SXM on
NVSwitch) gets the warning about another part of the generation, as an H100 NVL log on a DGX
H100 does; it read as the SXM h200 before, and no warning came."""

import warnings

import pytest

import topologies as tp
from flowsolver import nccl_tests
from flowsolver._nccl_log import device_gpu
from flowsolver.collectives import log_rows

HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
          "#wrong\n")


def _log(device, ranks=8):
    head = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20\n"
    head += "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r} on node0 device {r:2d} [0x{r:02x}] {device}\n"
                    for r in range(ranks))
    body = ""
    for size, t in [(2**20, 1e-4), (2**22, 3e-4)]:
        algbw = size / t / 1e9
        part = f"{t * 1e6:8.1f} {algbw:7.2f} {algbw * 2 * (ranks - 1) / ranks:7.2f}      0"
        body += f"{size:12d} {size // 4:12d}     float     sum      -1 {part} {part}\n"
    return head + HEADER + body


def test_h200_nvl_is_not_the_sxm_part():
    parts, generation = device_gpu("NVIDIA H200 NVL")
    assert generation == "hopper" and "h200" not in parts
    assert device_gpu("NVIDIA H200")[0] == ("h200",)          # the SXM part still itself
    assert device_gpu("NVIDIA H200 NVL") == device_gpu("NVIDIA H100 NVL")   # both PCIe cards on bridges


def test_an_h200_nvl_log_on_a_dgx_h200_warns():
    g = tp.rail_optimized(nodes=1, server="dgx_h200")
    nvl = nccl_tests.read(_log("NVIDIA H200 NVL"), op="all_reduce")
    with pytest.warns(UserWarning, match="NVIDIA H200 NVL.*h200, another part of the generation"):
        log_rows(nvl, "all_reduce", g)
    sxm = nccl_tests.read(_log("NVIDIA H200"), op="all_reduce")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*another part of the generation.*")
        log_rows(sxm, "all_reduce", g)
