"""flowsolver.reliability: several job responses on one set of trajectories (the fabrics solved
once for all) against each response run alone; degradation_impact reusing the healthy solve."""

import numpy as np
import pytest

import topologies as tp
from flowsolver.reliability import Component, JobResponse, degradation_impact, goodput

DAY = 86400.0


def test_several_responses_equal_each_run_alone():
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**28, algorithm="ring", compute=1.0, tokens=2**20)
    comps = {"gpu": Component("gpu", "interrupt", rate=1 / (16 * 3600.0), unit="gpu"),
             "nic_link": Component("nic_link", "degrade", rate=2 / (16 * DAY), unit="link", duration=3600.0,
                                   factor=0.5, links="access"),
             "slow_gpu": Component("slow_gpu", "straggler", rate=1 / (16 * DAY), unit="gpu", duration=1800.0,
                                   factor=0.8)}
    responses = [JobResponse(checkpoint_cost=20.0, restart_time=120.0),
                 JobResponse(checkpoint_cost=20.0, restart_time=120.0, spares=False, repair_time=3600.0),
                 JobResponse(checkpoint_cost=60.0, restart_time=300.0, checkpoint_interval=900.0)]
    kw = dict(components=comps, days=10, trajectories=40, seed=2)
    together = goodput(g, wl, responses, **kw)
    assert isinstance(together, list) and len(together) == 3
    for resp, r in zip(responses, together):
        alone = goodput(g, wl, resp, **kw)
        np.testing.assert_array_equal(r.useful_fraction, alone.useful_fraction)
        assert r.lost_fraction() == alone.lost_fraction()
        assert r.daly_interval == alone.daly_interval and r.run.interval == alone.run.interval
        # the same distinct states, the same step times, the same count of degraded fabrics
        np.testing.assert_array_equal(r.states.states, alone.states.states)
        np.testing.assert_array_equal(r.states.step_time, alone.states.step_time)
        assert r.states.fabrics == alone.states.fabrics
    assert together[0].states.fabrics > 0
    # solved once: the later responses solve nothing more
    assert together[0].states.solved == together[1].states.solved == together[2].states.solved
    assert together[0].healthy_result is not None
    with pytest.raises(TypeError, match="JobResponse"):
        goodput(g, wl, [responses[0], "fast"], **kw)
    with pytest.raises(TypeError, match="JobResponse"):
        goodput(g, wl, [], **kw)


def test_degradation_impact_reuses_the_healthy_solve():
    g = tp.rail_optimized(4)
    wl = dict(op="all_reduce", size=2**28, algorithm="ring")
    r = goodput(g, dict(wl, compute=1.0), JobResponse(checkpoint_cost=10.0, restart_time=60.0), days=1,
                trajectories=5)
    assert degradation_impact(g, wl, base=r.healthy_result) == degradation_impact(g, wl)
    with pytest.raises(TypeError, match="base"):
        degradation_impact(g, wl, base=1.0)


def test_each_kind_costs_in_proportion_to_its_rate():
    # two interrupting kinds, same response: each failure costs the same in expectation
    # (its restart plus the work since the last checkpoint), so each kind's share of the
    # interruption losses is its share of the rate, 1 : 3
    from flowsolver.reliability import simulate_goodput

    lam = 1 / 3600.0
    r = simulate_goodput({"gpu": lam / 4, "hbm": 3 * lam / 4},
                         JobResponse(checkpoint_cost=10.0, restart_time=120.0, checkpoint_interval=600.0),
                         horizon=400 * DAY, trajectories=50, seed=1)
    lost = r.lost()
    gpu, hbm = lost["gpu"].sum(), lost["hbm"].sum()
    # ~9,600 failures of each trajectory's mean cost ~420 s: the split within a few percent
    assert gpu / (gpu + hbm) == pytest.approx(0.25, abs=0.01)
    assert np.allclose(lost["gpu"] + lost["hbm"] + lost["checkpointing"] + r.useful, r.horizon)


def test_cli_checkpoint_through_the_storage_tier(capsys):
    import json

    from flowsolver.cli import main

    # 2 servers x 8 GPUs x 1 GiB through one 400 GbE storage port (50 GB/s): 16 GiB / 50 GB/s
    argv = ["goodput", "--nodes", "2", "--checkpoint-bytes", "1G", "--storage-ports", "1", "--restart", "300",
            "--days", "2", "--trajectories", "10", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_cost"] == pytest.approx(16 * 2**30 / 50e9, rel=1e-9)
    assert main(["goodput", "--nodes", "2", "--checkpoint-bytes", "1G", "--restart", "300"]) == 2
    assert "--storage-ports" in capsys.readouterr().err
    assert main(["goodput", "--nodes", "2", "--checkpoint-bytes", "1G", "--storage-ports", "1", "--checkpoint-cost",
                 "3", "--restart", "300"]) == 2
    assert "not both" in capsys.readouterr().err


def test_llama3_effective_training_time_is_near_the_paper():
    # The Llama 3 paper (arXiv:2407.21783, Section 3.3.4): 419 unexpected interruptions in 54
    # days on 16,384 GPUs, "higher than 90 %" effective training time. Checkpoint: its largest
    # per-GPU state, 4 GB, from every GPU at its storage's 2 TB/s: 4e9 x 16384 / 2e12 = 32.8 s
    # (checkpoint_write_time gives the same through 40 ports of 50 GB/s, benchmarks/goodput.py);
    # restart: 5 minutes (the paper gives none); Daly's interval; hot spares.
    from flowsolver.reliability import daly_useful_fraction, default_components, simulate_goodput

    units = {"gpu": 16384, "nic": 16384, "host": 2048}
    rates = {k: c.rate * units[c.unit] for k, c in default_components().items()}
    assert sum(rates.values()) * 54 * DAY == pytest.approx(419)
    cost = 4e9 * 16384 / 2e12
    r = simulate_goodput(rates, JobResponse(checkpoint_cost=cost, restart_time=300.0), horizon=54 * DAY,
                         trajectories=300, seed=0)
    mean = r.useful_fraction.mean()
    assert r.interruptions.mean() == pytest.approx(419, rel=0.02)
    assert 0.87 < mean < 0.93                                       # within a few points of 90 %
    assert mean == pytest.approx(daly_useful_fraction(r.interval, cost, 300.0, 1 / sum(rates.values())), abs=0.003)

