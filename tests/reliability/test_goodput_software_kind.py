"""Software or hardware is the component's `hardware` field, not its kind's name."""

import math

import numpy as np
import pytest

import topologies as tp
from flowsolver.reliability import Component, JobResponse, default_components, goodput

DAY = 86400.0


def test_defaults_keep_software_the_only_kind_that_never_waits():
    comps = default_components()
    assert {k: c.hardware for k, c in comps.items()} == {"gpu": True, "hbm": True, "nic": True, "network": True,
                                                          "host": True, "software": False}
    assert comps["software"].with_rate(1e-9).hardware is False       # a copy keeps it
    with pytest.raises(ValueError, match="hardware"):
        Component("x", "interrupt", 1e-9, hardware="no")


def test_a_software_kind_of_another_name_only_restarts():
    # 64 GPUs, 0.05 interruptions per GPU per day: 3.2 a day, M = 86,400 / 3.2 = 27,000 s;
    # checkpoint C = 30 s, restart R = 300 s, no spares, a 4-hour repair. Daly's interval by
    # hand: sqrt(2 C M) = 1,272.79, x (1 + sqrt(C / 2M) / 3 + C / 18M) = x 1.007918, - C:
    # tau = 1,252.87 s; a software failure's downtime is R alone: useful fraction
    # tau / (M e^(R/M) (e^((tau + C)/M) - 1)) = 1,252.87 / (27,000 x 1.011173 x 0.048661) = 0.9431;
    # waiting the repair too (R = 14,700 s) it would be 1,252.87 / (27,000 x 1.723731 x 0.048661) = 0.5532
    M, C, R = 27000.0, 30.0, 300.0
    tau = math.sqrt(2 * C * M) * (1 + math.sqrt(C / (2 * M)) / 3 + C / (18 * M)) - C
    assert tau == pytest.approx(1252.87, abs=0.01)
    expected = tau / (M * math.exp(R / M) * (math.exp((tau + C) / M) - 1))
    assert expected == pytest.approx(0.9431, abs=5e-5)
    resp = JobResponse(C, R, spares=False, repair_time=4 * 3600.0)
    rate = 0.05 / DAY
    runs = {}
    for name, hw in (("software", None), ("nccl_timeout", False), ("gpu_fault", None)):
        comps = {name: Component(name, "interrupt", rate=rate, unit="gpu", hardware=hw)}
        runs[name] = goodput(tp.rail_optimized(8), lambda g: 1.0, resp, components=comps, days=30,
                             trajectories=300, seed=0)
    soft = runs["nccl_timeout"]
    assert soft.daly_fraction == pytest.approx(expected, rel=1e-9)
    assert soft.useful_fraction.mean() == pytest.approx(expected, abs=0.005)
    # the same trajectories as the kind named "software" (the name draws nothing)
    assert np.array_equal(soft.useful_fraction, runs["software"].useful_fraction)
    # a kind of its own name left to its default is hardware: it waits the 4 hours
    assert runs["gpu_fault"].daly_fraction == pytest.approx(
        tau / (M * math.exp((R + 14400.0) / M) * (math.exp((tau + C) / M) - 1)), rel=1e-9)
    assert runs["gpu_fault"].useful_fraction.mean() < 0.6


def test_hardware_false_does_not_shrink_the_job():
    # shrinking, dp = 64, a software kind: no replica is ever out, nothing is lost to shrinking
    resp = JobResponse(30.0, 300.0, spares=False, shrink=True, repair_time=4 * 3600.0)
    comps = {"nccl_timeout": Component("nccl_timeout", "interrupt", rate=0.05 / DAY, hardware=False)}
    r = goodput(tp.rail_optimized(8), lambda g: 1.0, resp, components=comps, days=10, trajectories=50, seed=0,
                dp=64)
    assert r.lost_fraction().get("shrink", 0.0) == 0.0
    # the same kind as hardware: one GPU a replica out for 4 h per failure, 3.2 failures a day:
    # 3.2 x 14,400 / 86,400 / 64 = 0.83 % of the speed lost to shrinking
    comps = {"nccl_timeout": Component("nccl_timeout", "interrupt", rate=0.05 / DAY, hardware=True)}
    r = goodput(tp.rail_optimized(8), lambda g: 1.0, resp, components=comps, days=10, trajectories=50, seed=0,
                dp=64)
    assert r.lost_fraction()["shrink"] == pytest.approx(3.2 * 14400 / DAY / 64, abs=0.002)
