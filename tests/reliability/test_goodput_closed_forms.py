"""Daly's closed form beside the Monte Carlo: no overflow on absurd inputs, and the repair
wait of a job without spares in its downtime."""

import math

import pytest

import topologies as tp
from flowsolver.reliability import JobResponse, default_components, goodput, daly_useful_fraction


def test_daly_fraction_past_the_float_range_is_zero_or_its_exact_small_value():
    # R / M = 710: e^(R/M) is beyond a double (math.exp raises), the fraction is not:
    # tau / (M e^(R/M) (e^((tau+C)/M) - 1)) = e^-710 x tau / (M (e^((tau+C)/M) - 1))
    m, tau, c = 3600.0, 800.0, 30.0
    expect = math.exp(-710.0) * tau / (m * math.expm1((tau + c) / m))
    assert expect > 0
    assert daly_useful_fraction(tau, c, 710.0 * m, m) == pytest.approx(expect, rel=1e-9)
    # a restart of 3e8 MTBFs, or a checkpoint of 2,800: below the smallest double
    assert daly_useful_fraction(tau, c, 1e12, m) == 0.0
    assert daly_useful_fraction(tau, 1e7, 0.0, m) == 0.0
    # and the ordinary range is unchanged: 1 / (e^0.11 - 1) x 0.1 with R = 0
    assert daly_useful_fraction(360.0, 36.0, 0.0, 3600.0) == pytest.approx(0.1 / math.expm1(0.11), rel=1e-12)


def test_daly_fraction_without_spares_counts_the_repair_wait():
    # 16 GPUs; per day, for the whole job: 2 hardware interruptions (they wait for a 4-hour
    # repair) and 1 software one (it does not): M = 8 h, the mean downtime
    # R = 600 + (2 / 3) x 14,400 = 10,200 s; Daly: tau / (M e^(R/M) (e^((tau + C)/M) - 1))
    day = 86400.0
    from flowsolver.reliability import Component
    comps = {"gpu": Component("gpu", "interrupt", rate=2.0 / 16 / day, unit="gpu"),
             "software": Component("software", "interrupt", rate=1.0 / 16 / day, unit="gpu")}
    wait = JobResponse(checkpoint_cost=30.0, restart_time=600.0, checkpoint_interval=1800.0, spares=False,
                       repair_time=4 * 3600.0)
    step = lambda g: 1.0                                                  # noqa: E731
    r = goodput(tp.rail_optimized(2), step, wait, components=comps, days=30, trajectories=400, seed=3)
    m, big_r = day / 3.0, 600.0 + 2.0 / 3.0 * 14400.0
    expect = 1800.0 / (m * math.exp(big_r / m) * math.expm1(1830.0 / m))
    assert r.daly_fraction == pytest.approx(expect, rel=1e-9)
    assert r.useful_fraction.mean() == pytest.approx(expect, abs=0.01)   # the simulation agrees
    # hot spares: the restart alone
    spare = goodput(tp.rail_optimized(2), step, JobResponse(checkpoint_cost=30.0, restart_time=600.0,
                                                            checkpoint_interval=1800.0),
                    components=comps, days=30, trajectories=50, seed=3)
    assert spare.daly_fraction == pytest.approx(1800.0 / (m * math.exp(600.0 / m) * math.expm1(1830.0 / m)), rel=1e-9)


# one day, C = 30 s, by hand: floor(86,400 / (tau + 30)) checkpoints completed: 86,400 / 630 =
# 137.1 -> 137; 86,400 / 43,215 = 1.9993 -> 1; 86,400 / 86,420 -> 0; no interval: one period,
# the whole day -> 0
@pytest.mark.parametrize("interval, checkpoints", [(None, 0), (86390.0, 0), (600.0, 137), (43185.0, 1)])
def test_daly_fraction_with_no_interruptions_counts_the_checkpoints_the_run_writes(interval, checkpoints):
    # zero rates: the run completes its checkpoints and the work after the last one its end
    # keeps, 1 - checkpoints x 30 / 86,400 in every trajectory; with no interval it writes
    # none: 1.0, where the closed form charged one checkpoint, 86,400 / 86,430 (adv19a F4)
    from flowsolver.reliability import Component
    step = lambda g: 1.0                                                  # noqa: E731
    r = goodput(tp.rail_optimized(2), step, JobResponse(30.0, 600.0, checkpoint_interval=interval),
                components={"gpu": Component("gpu", "interrupt", 0.0)}, days=1, trajectories=4)
    expect = 1.0 - checkpoints * 30.0 / 86400.0
    assert r.daly_fraction == pytest.approx(expect, rel=1e-12)
    assert r.useful_fraction == pytest.approx(expect, rel=1e-12)             # every trajectory
