"""NCCL's view of the NICs over the whole communicator (adv27 F2): a failed NIC cable (capacity
0) is a port that is down, which NCCL leaves out of its topology, and NCCL takes its P2P channel
count and ring search figures over every GPU, so neither the order of ``ranks`` nor a cable no
route of the call uses changes a time. It used to be read through the first rank's GPU alone:
a send over NVLink fell to one channel (50.8 ms against 12.7), the same all-to-all took 38.4 or
11.4 ms by the order of the ranks, and a failure made a ring all-gather 31 % faster."""

import pytest

import flowsolver as fs
import topologies as tp

GIB = float(1 << 30)


def failed_nic0():
    g = tp.rail_optimized(2)
    g.edges["s0/nic0", "su0/leaf0"]["capacity"] = 0.0
    g.edges["su0/leaf0", "s0/nic0"]["capacity"] = 0.0
    return g


@pytest.mark.parametrize("op, size, ranks", [("all_to_all", GIB, [0, 8]), ("send_recv", GIB, [0, 9]),
                                             ("all_gather", 16 * 2**20, [0, 8]), ("all_reduce", GIB, [0, 8])])
def test_the_order_of_the_ranks_does_not_change_a_time(op, size, ranks):
    g = failed_nic0()
    forward, backward = (fs.collective(g, op, size, ranks=r).time for r in (ranks, ranks[::-1]))
    assert forward == pytest.approx(backward, rel=1e-12)


def test_a_send_over_nvlink_ignores_a_failed_nic():
    # GPU 0 -> GPU 1 of one server crosses NVLink only: the failed cable is on no route of it
    healthy = fs.collective(tp.rail_optimized(2), "send_recv", GIB, ranks=[0, 1, 8, 9])
    failed = fs.collective(failed_nic0(), "send_recv", GIB, ranks=[0, 1, 8, 9])
    assert failed.channels == healthy.channels
    assert failed.time == pytest.approx(healthy.time, rel=1e-12)


@pytest.mark.parametrize("size", [16 * 2**20, GIB])
def test_a_failure_never_speeds_a_ring_up(size):
    healthy = fs.collective(tp.rail_optimized(2), "all_gather", size, ranks=[0, 8], algorithm="ring")
    failed = fs.collective(failed_nic0(), "all_gather", size, ranks=[0, 8], algorithm="ring")
    assert failed.time >= healthy.time * (1 - 1e-12)


def test_a_half_speed_nic_gives_one_time_whatever_the_order():
    g = tp.degrade_links(tp.rail_optimized(2), [("s0/nic0", "su0/leaf0")], 0.5)
    for op in ("all_reduce", "all_gather"):
        a, b = (fs.collective(g, op, GIB, ranks=r) for r in ([0, 8], [8, 0]))
        assert (a.algorithm, a.channels) == (b.algorithm, b.channels)
        assert a.time == pytest.approx(b.time, rel=1e-12)
