"""A sendrecv log's rank placement: nccl-tests' sendrecv_perf shifts every rank to the next
(src/sendrecv.cu: rank r sends to r + 1 mod n), so which pairs cross the network is set by
the hosts its device list puts the ranks on. Two hosts of four H100 with one 400 Gb/s NIC
each (50 GB/s a direction): in blocks (ranks 0-3, 4-7) two of the eight pairs cross, one send
each way per NIC; round-robin (``mpirun --map-by node``: rank r on host r mod 2) every pair
crosses, four sends each way per NIC, so a GiB takes at least 4 x 2^30 / 50e9 = 85.9 ms where
the block placement needs 21.5 ms. The log is printed here in nccl-tests' format
(src/util.cu writeDeviceReport, writeResultHeader)."""

import warnings

import pytest

import topologies as tp
from flowsolver import calibrate, nccl_tests
from flowsolver.collectives import log_ranks, nccl_tests_collective

GIB = 2**30
NIC = 50e9          # 400 Gb/s RoCE, bytes/s a direction


@pytest.fixture(scope="module")
def graph():
    server = tp.get_server("dgx_h100").with_(name="h100x4_1nic", gpus=4, nics=1)
    return tp.rail_optimized(2, server=server, link="roce_400g")


def _log(hosts, times_us, ranks=8):
    """A sendrecv log of ``ranks`` ranks, rank r on host ``hosts(r)`` (name, device), a row of
    1, 2, 4 ... GiB for each of ``times_us``."""
    sizes = [GIB << i for i in range(len(times_us))]
    out = ["# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
           "# Collective test starting: sendrecv_perf",
           f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 "
           "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0", "#", "# Using devices"]
    for r in range(ranks):
        host, dev = hosts(r)
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s" % (
            r, 0, 1000 + r, host, dev, 0, 0x18 + dev, 0, "NVIDIA H100 80GB HBM3"))
    out += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                 "algbw   busbw #wrong"]
    for size, t in zip(sizes, times_us):
        bw = size / t / 1e3
        out.append("%12d  %12d  %8s  %6s  %6d" % (size, size // 4, "float", "sum", -1)
                   + "  %7.1f  %6.2f  %6.2f  %6g" % (t, bw, bw, 0) * 2)
    return "\n".join(out + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1", ""])


def ROUND_ROBIN(r):
    return ("hostA" if r % 2 == 0 else "hostB"), r // 2


def BLOCK(r):
    return ("hostA" if r < 4 else "hostB"), r % 4


def test_the_device_lists_hosts_place_the_ranks(graph):
    times = (20000.0, 40000.0, 80000.0)
    rr = nccl_tests.read(_log(ROUND_ROBIN, times), op="send_recv")
    # rank r on host r mod 2: hostA's ranks 0, 2, 4, 6 on server 0's GPUs 0-3, hostB's on GPUs 4-7
    assert log_ranks(rr, "send_recv", graph) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert log_ranks(nccl_tests.read(_log(BLOCK, times), op="send_recv"), "send_recv", graph) is None   # as given
    # other ops: NCCL's rings and trees go by node whatever the placement
    assert log_ranks(rr, "all_reduce", graph, ranks=list(range(8))) == list(range(8))


def test_a_round_robin_log_is_timed_with_every_pair_across_the_network(graph):
    rr = nccl_tests.read(_log(ROUND_ROBIN, (1.0, 2.0, 3.0)), op="send_recv")
    spread = nccl_tests_collective(graph, "send_recv", GIB, ranks=log_ranks(rr, "send_recv", graph)).time
    block = nccl_tests_collective(graph, "send_recv", GIB).time
    assert spread >= 4 * GIB / NIC > 2 * GIB / NIC > block >= GIB / NIC


def test_calibrating_on_a_round_robin_log_of_the_models_own_times_moves_nothing(graph):
    placed = [0, 4, 1, 5, 2, 6, 3, 7]                        # rank r on host r mod 2, by hand
    times = [nccl_tests_collective(graph, "send_recv", s, ranks=placed).time * 1e6 for s in (GIB, 2 * GIB, 4 * GIB)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate(graph, [_log(ROUND_ROBIN, times)])
    p2p = {p.name: p.value for p in cal.parameters}["p2p_bandwidth"]
    # (timed as a block placement, the same rows fitted the P2P channels at 0.28x)
    assert p2p == pytest.approx(1.0, abs=0.01)
    assert cal.residuals["error"].abs().max() < 0.01
