"""`flowsolver collective --compare` times a log as calibrate does: a -G (CUDA graph) log's rows
without the -g host floor (nccl-tests src/common.cu BenchTime times cudaGraphLaunch only), and
a sendrecv log's ring shift on the hosts its device list names (rank r sends to r + 1,
src/sendrecv.cu; round-robin placement puts every pair across the network). Logs printed here in
nccl-tests' format (src/util.cu)."""

import json

import pytest

import topologies as tp
from flowsolver import collective, nccl_tests
from flowsolver.cli import main
from flowsolver.collectives import log_ranks, nccl_tests_collective

from ..collectives.test_calibrate_placement import _log

KIB4 = 4096
GIB = 2**30


def _compare(capsys, path, nodes, *extra):
    assert main(["collective", "--nodes", str(nodes), "--compare", str(path), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _all_reduce_log(graph_flag, times_us):
    head = ("# Collective test starting: all_reduce_perf\n"
            "# nThread 1 nGpus 8 minBytes 4096 maxBytes 16384 step: 2(factor) warmup iters: 5 iters: 20 "
            f"agg iters: 1 validation: 1 graph: {graph_flag} unalign: 0\n#\n# Using devices\n")
    head += "".join(f"#  Rank {r:2d} Group  0 Pid   4242 on      hostA device {r:2d} [0000:{r:02x}:00] NVIDIA H100 80GB "
                    "HBM3\n" for r in range(8))
    head += "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    for size, t in zip((KIB4, 2 * KIB4, 4 * KIB4), times_us):
        head += f"{size:12d} {size // 4:12d}  float  sum  -1  {t:7.2f}  {size / t / 1e3:6.2f}  " \
                f"{size / t / 1e3 * 1.75:6.2f}  0\n"
    return head


def test_a_cuda_graph_log_is_compared_without_the_host_floor(tmp_path, capsys):
    g = tp.rail_optimized(nodes=1)
    sizes = (KIB4, 2 * KIB4, 4 * KIB4)
    alone = [collective(g, "all_reduce", s, algorithm="ring", protocol="LL").time * 1e6 for s in sizes]
    floored = [collective(g, "all_reduce", s, algorithm="ring", protocol="LL", gpus_per_thread=8).time * 1e6
               for s in sizes]
    assert floored[0] == pytest.approx(8 * 4.2)        # one thread's 8 calls: the -g 8 floor without -G
    for flag, want in ((1, alone), (0, floored)):
        path = tmp_path / f"g{flag}.log"
        path.write_text(_all_reduce_log(flag, alone))
        rows = _compare(capsys, path, 1, "--algorithm", "ring", "--protocol", "LL")
        assert [r["time_us"] for r in rows] == pytest.approx(want)


def test_a_round_robin_sendrecv_log_is_compared_on_its_hosts(tmp_path, capsys):
    # 2 servers of 8 H100 with one 400 Gb/s NIC each (a cluster file), rank r on host r mod 2
    # (mpirun --map-by node): all 16 pairs cross the network, 8 sends each way through a NIC,
    # >= 8 x 2^30 / 50e9 = 172 ms a GiB; in blocks 2 do, one each way (21.5 ms at the NIC's rate). The --compare
    # times are the API's on the placed ranks
    from topologies.formats import save
    g = tp.rail_optimized(nodes=2, server=tp.get_server("dgx_h100").with_(name="h100x8_1nic", nics=1))
    cluster = tmp_path / "one_nic.json"
    save(g, str(cluster))
    path = tmp_path / "rr.log"
    path.write_text(_log(lambda r: ("hostA" if r % 2 == 0 else "hostB", r // 2), (20000.0, 40000.0), ranks=16))
    placed = log_ranks(nccl_tests.read(str(path), op="send_recv"), "send_recv", g)
    assert placed == [r // 2 + 8 * (r % 2) for r in range(16)]
    assert main(["collective", "--cluster", str(cluster), "--compare", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    want = [nccl_tests_collective(g, "send_recv", s, ranks=placed).time * 1e6 for s in (GIB, 2 * GIB)]
    block = [nccl_tests_collective(g, "send_recv", s).time * 1e6 for s in (GIB, 2 * GIB)]
    assert [r["time_us"] for r in rows] == pytest.approx(want)
    assert want[0] * 1e-6 >= 8 * GIB / 50e9 and block[0] < 0.3 * want[0]     # every pair on the NIC, not two
