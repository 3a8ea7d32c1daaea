"""Shrinking data parallelism: a failure stops every replica with a GPU on the failed part."""

import numpy as np
import pytest

import topologies as tp
from flowsolver.reliability import Component, JobResponse, goodput, simulate_goodput
from flowsolver.reliability._components import replicas_per_unit
from flowsolver.reliability._fabric import healthy_step

DAY = 86400.0


@pytest.mark.parametrize("dp", [8, 64])
def test_a_host_failure_stops_its_eight_gpus_whatever_the_replica_size(dp):
    # 64 GPUs on 8 servers, host failures only, once a day for the job, a 4-hour repair,
    # shrinking: a host out stops 1/8 of the GPUs (one 8-GPU replica at dp = 8, eight
    # 1-GPU replicas at dp = 64), so the speed lost is, by hand, rate x repair / 8 =
    # (1 / 86,400) x 14,400 / 8 = 2.08 % of the time (restart 0; the checkpoint's 1 s in
    # 3,601 and the rework of the periods cut short take a little of it)
    comps = {"host": Component("host", "interrupt", rate=1.0 / 8 / DAY, unit="host")}
    resp = JobResponse(checkpoint_cost=1.0, restart_time=0.0, checkpoint_interval=3600.0, spares=False,
                       shrink=True, repair_time=4 * 3600.0)
    r = goodput(tp.rail_optimized(8), lambda g: 1.0, resp, components=comps, days=30, trajectories=400, seed=1,
                dp=dp)
    assert r.lost_fraction()["shrink"] == pytest.approx(14400.0 / DAY / 8, abs=0.0015)


def test_replicas_per_unit_of_a_training_layout():
    # tp 4 x pp 2 x dp 2 on 16 GPUs (2 servers): rank i has DP index (i // 4) mod 2 and stage
    # i // 8, so server 0 (ranks 0-7) holds stage 0 of both replicas: a host failure stops
    # both (one replica per 8 GPUs would say 1); a GPU or its NIC stops one
    g = tp.rail_optimized(2)
    h = healthy_step(g, dict(model="llama-3-8b", tp=4, pp=2, dp=2, global_batch=8))
    assert h["replicas"] == {i: (i // 4) % 2 for i in range(16)}
    u = replicas_per_unit(g, h["replicas"])
    assert u["host"].tolist() == [2, 2] and set(u["gpu"].tolist()) == {1} and set(u["nic"].tolist()) == {1}
    # 4 NICs a server: NIC j serves GPUs 2j and 2j + 1; one GPU a replica: 2 replicas a NIC
    four = tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(name="four", nics=4, nic=None))
    assert replicas_per_unit(four, {i: i for i in range(16)})["nic"].tolist() == [2] * 8


def test_simulate_goodput_draws_the_failed_unit_where_units_differ():
    # one kind whose units hold 1 or 3 replicas, drawn evenly: 2 replicas a failure on average,
    # dp = 10, rate 1 a day, repair 6 h: speed lost = (1 / 86,400) x 21,600 x 2 / 10 = 5 %
    resp = JobResponse(checkpoint_cost=1.0, restart_time=0.0, checkpoint_interval=3600.0, spares=False,
                       shrink=True, repair_time=6 * 3600.0)
    run = simulate_goodput({"x": 1.0 / DAY}, resp, horizon=30 * DAY, trajectories=400, seed=2, dp=10,
                           replicas_out={"x": [1, 3]})
    assert np.mean(run.slowdown["shrink"]) / run.horizon == pytest.approx(0.05, abs=0.004)
    with pytest.raises(ValueError, match="replicas_out"):
        simulate_goodput({"x": 1.0 / DAY}, resp, horizon=DAY, dp=10, replicas_out={"x": 0})


def test_dp_given_with_a_training_workload_keeps_its_layouts_replicas():
    # Llama 3 8B TP4 PP2 DP8 on 8 DGX H100: rank t + 4d + 32q (tp-cp-dp-pp), so a server's 8 GPUs
    # hold the TP groups of 2 of the 8 replicas: a host failure stops 2 replicas, not the 1 that
    # dp=8 blocks of 8 consecutive ranks would say; dp given as the layout's own degree changes
    # nothing, another degree is refused
    day = 86400.0
    comps = {"host": Component("host", "interrupt", rate=1.0 / 8 / day, unit="host")}
    resp = JobResponse(checkpoint_cost=1.0, restart_time=0.0, checkpoint_interval=3600.0, spares=False,
                       shrink=True, repair_time=4 * 3600.0)
    wl = dict(model="llama-3-8b", tp=4, pp=2, dp=8, global_batch=64)
    g = tp.rail_optimized(8)
    runs = [goodput(g, wl, resp, components=comps, days=30, trajectories=200, seed=1, dp=dp) for dp in (None, 8)]
    assert runs[0].lost_fraction()["shrink"] == runs[1].lost_fraction()["shrink"]
    # one host failure a day for the job, 4 h each, 2 of 8 replicas out: 14,400 / 86,400 x 2 / 8
    assert runs[0].lost_fraction()["shrink"] == pytest.approx(14400 / 86400 * 2 / 8, rel=0.15)
    with pytest.raises(ValueError, match=r"dp \(4\) is not the training workload's own data-parallel degree \(8\)"):
        goodput(g, wl, resp, components=comps, days=30, trajectories=10, seed=1, dp=4)
