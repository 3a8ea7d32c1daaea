"""Hosts on rack-scale servers: a GB200 NVL72 rack's compute trays are its hosts."""

import pytest

import topologies as tp
from flowsolver.reliability import JobResponse, goodput, job_units
from flowsolver.reliability._components import replicas_per_unit


def test_an_nvl72_rack_counts_a_host_per_compute_tray():
    # 2 racks of 72 GPUs, 18 compute trays of 4 GPUs each (ServerModel("nvl72").gpus_per_tray
    # = 4): 2 x 72 / 4 = 36 hosts; one NIC a GPU: 144 NICs (a rack counted as one host gave 2)
    g = tp.nvl72_cluster(2)
    u = job_units(g)
    assert (u["gpu"], u["nic"], u["host"]) == (144, 144, 36)
    # ranks 0-7: trays 0 and 1 of rack 0, their 4 + 4 NICs (NIC j serves GPU j)
    u = job_units(g, ranks=range(8))
    assert (u["gpu"], u["nic"], u["host"]) == (8, 8, 2)
    # ranks 70-73: tray 17 of rack 0 (GPUs 68-71) and tray 0 of rack 1 (GPUs 72-75): 2 hosts, 8 NICs
    assert (job_units(g, ranks=[70, 71, 72, 73])["host"], job_units(g, ranks=[70, 71, 72, 73])["nic"]) == (2, 8)
    # an 8-GPU DGX is still one host
    assert job_units(tp.rail_optimized(2))["host"] == 2


def test_nvl72_mtbf_counts_the_trays_host_failures():
    # Llama 3 Table 5 by hand, per day: per GPU (gpu 196 + hbm 72 + software 63 + network 35)
    # / (16,384 x 54); per NIC 7 / (16,384 x 54); per host 46 / (2,048 x 54). On 144 GPUs,
    # 144 NICs and 36 trays: 366 x 144 / 884,736 + 7 x 144 / 884,736 + 46 x 36 / 110,592
    # = 0.059570 + 0.001139 + 0.014974 = 0.075684 a day: MTBF 24 / 0.075684 = 317.1 h
    # (one host a rack: 0.060709 + 0.000832 a day, 390.0 h)
    per_day = 366 * 144 / (16384 * 54) + 7 * 144 / (16384 * 54) + 46 * 36 / (2048 * 54)
    r = goodput(tp.nvl72_cluster(2), lambda g: 1.0, JobResponse(30.0, 300.0), days=1, trajectories=2)
    assert r.mtbf / 3600.0 == pytest.approx(24.0 / per_day, rel=1e-9)
    assert r.mtbf / 3600.0 == pytest.approx(317.1, abs=0.05)


def test_a_tray_failure_stops_the_replicas_on_its_gpus_not_the_racks():
    g = tp.nvl72_cluster(2)
    # one GPU a replica (dp = 144): a tray holds 4 replicas, 36 trays (a rack held 72, 2 racks)
    u = replicas_per_unit(g, {r: r for r in range(144)})
    assert u["host"].tolist() == [4] * 36 and u["nic"].tolist() == [1] * 144
    # replicas of 8 consecutive GPUs (dp = 18): each tray holds part of one replica
    assert replicas_per_unit(g, {r: r // 8 for r in range(144)})["host"].tolist() == [1] * 36
    # replicas of 2 GPUs on half of rack 0 (ranks 0-35, trays 0-8): 9 trays of 2 replicas each
    assert replicas_per_unit(g, {r: r // 2 for r in range(36)})["host"].tolist() == [2] * 9
