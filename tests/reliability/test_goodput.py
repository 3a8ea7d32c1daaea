"""flowsolver.reliability (flowsolver.goodput and friends): failure processes, checkpointing, the Monte Carlo against closed forms,
degraded fabrics solved in batches against one-by-one solves."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import topologies as tp
from flowsolver import collective
from flowsolver.reliability import (Component, JobResponse, Process, checkpoint_write_time, daly_interval,
                                daly_useful_fraction, default_components, goodput, job_units, simulate_goodput,
                                state_graphs, state_step_times, young_interval)
from flowsolver.reliability._fabric import bundle_changes

DAY = 86400.0


def _accounted(r):
    """Every second of every trajectory, by where it went."""
    return (r.useful + r.checkpoint + sum(r.restart.values()) + sum(r.rework.values())
            + sum(r.slowdown.values()))


# ---------------------------------------------------------------- components


def test_default_rates_are_the_llama3_table():
    # Table 5 of the Llama 3 paper: 419 unexpected interruptions in 54 days, 16,384 GPUs,
    # 2,048 servers of 8 GPUs and 8 NICs; faulty GPU 148, HBM3 72, switch/cable 35, NIC 7
    comps = default_components()
    per_run = {k: c.rate * 54 * DAY * {"gpu": 16384, "nic": 16384, "host": 2048}[c.unit] for k, c in comps.items()}
    assert sum(per_run.values()) == pytest.approx(419)
    assert per_run["hbm"] == pytest.approx(72)
    assert per_run["network"] == pytest.approx(35)
    assert per_run["nic"] == pytest.approx(7)
    assert per_run["gpu"] == pytest.approx(148 + 19 + 17 + 6 + 6)
    # overrides: a rate, a new process, a removal
    mine = default_components(hbm=0.0, network=None,
                              optic=Component("optic", "degrade", 1e-8, unit="link", duration=60.0, factor=0.5,
                                              links="leaf-spine"))
    assert mine["hbm"].rate == 0.0 and "network" not in mine and mine["optic"].effect == "degrade"


def test_job_units_count_gpus_nics_hosts_and_cables():
    g = tp.rail_optimized(4)          # 4 DGX H100: 32 GPUs, 32 NICs, 8 leaves x 1 spine
    u = job_units(g)
    assert (u["gpu"], u["nic"], u["host"]) == (32, 32, 4)
    assert u["link"]["access"] == 32 and u["link"]["leaf-spine"] == 8 * 4        # 4 cables an edge
    assert job_units(g, ranks=range(8, 24))["host"] == 2
    # a GPU listed twice is not two GPUs; -1 is not the last one
    for bad, match in (([0, 0, 0, 0], "distinct"), ([-1], "not a GPU rank"), ([], "at least one")):
        with pytest.raises(ValueError, match=match):
            job_units(g, bad)


@pytest.mark.parametrize("kw, match", [
    (dict(effect="explode"), "effect"),
    (dict(rate=-1.0), "rate"),
    (dict(rate=float("nan")), "rate"),
    (dict(unit="rack"), "unit"),
    (dict(effect="degrade", unit="link", duration=0.0, factor=0.5, links="access"), "duration"),
    (dict(effect="degrade", unit="link", duration=10.0, factor=1.5, links="access"), "factor"),
    (dict(effect="degrade", unit="gpu", duration=10.0, factor=0.5), "unit='link'"),
    (dict(effect="straggler", unit="nic", duration=10.0, factor=0.5), "straggler"),
])
def test_component_rejects_bad_input(kw, match):
    args = dict(kind="x", effect="interrupt", rate=1e-6)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        Component(**args)


@pytest.mark.parametrize("kw, match", [
    (dict(checkpoint_cost=-1.0, restart_time=0.0), "checkpoint_cost"),
    (dict(checkpoint_cost=1.0, restart_time=float("inf")), "restart_time"),
    (dict(checkpoint_cost=1.0, restart_time=1.0, checkpoint_interval=0.0), "checkpoint_interval"),
    (dict(checkpoint_cost=1.0, restart_time=1.0, shrink=True), "spares=False"),
    (dict(checkpoint_cost=1.0, restart_time=1.0, spares=False), "repair_time"),
])
def test_job_response_rejects_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        JobResponse(**kw)


# ---------------------------------------------------------------- checkpoint intervals


def test_young_and_daly_intervals_against_the_exact_optimum():
    m = 3 * 3600.0
    for c in (10.0, 60.0, 300.0):
        assert young_interval(c, m) == pytest.approx(math.sqrt(2 * c * m))
        # the optimum of Daly's exact expected useful fraction, found numerically
        best = minimize_scalar(lambda t: -daly_useful_fraction(t, c, 0.0, m), bounds=(1.0, 5 * m),
                               method="bounded", options=dict(xatol=1e-3)).x
        assert daly_interval(c, m) == pytest.approx(best, rel=0.02)       # the higher-order estimate
        assert abs(young_interval(c, m) - best) > abs(daly_interval(c, m) - best)
    assert daly_interval(3 * m, m) == m                                   # C >= 2M: M


def test_daly_fraction_closed_form_cases():
    # no failures: tau / (tau + C); restart only scales by exp(-R/M)
    assert daly_useful_fraction(100.0, 25.0, 0.0, 1e15) == pytest.approx(0.8, rel=1e-9)
    m, tau, c, r = 1000.0, 100.0, 10.0, 50.0
    assert daly_useful_fraction(tau, c, r, m) == pytest.approx(tau / (m * math.exp(r / m) * (math.exp(0.11) - 1)))


# ---------------------------------------------------------------- Monte Carlo vs closed forms


@pytest.mark.parametrize("R, C, tau", [(60.0, 10.0, 300.0), (600.0, 60.0, 1200.0), (300.0, 100.0, 500.0)])
def test_monte_carlo_matches_daly_expected_waste(R, C, tau):
    m = 3600.0
    n, horizon = 200, 2000 * m
    r = simulate_goodput({"gpu": 1 / m}, JobResponse(checkpoint_cost=C, restart_time=R, checkpoint_interval=tau),
                         horizon=horizon, trajectories=n, seed=3)
    f = r.useful_fraction
    expect = daly_useful_fraction(tau, C, R, m)
    # the sample mean within 4 standard errors, plus the run's edges (no restart before the
    # first segment, the last one's work kept): at most (tau + C + R) / horizon
    tol = 4 * f.std() / math.sqrt(n) + (tau + C + R) / horizon
    assert abs(f.mean() - expect) < tol
    assert np.allclose(_accounted(r), horizon, rtol=1e-12)
    # Poisson counts: mean horizon / M
    assert r.interruptions.mean() == pytest.approx(horizon / m, rel=0.01)


def test_simulated_optimum_is_near_daly():
    m, c, R = 3600.0, 30.0, 120.0
    grid = [100.0, 200.0, 300.0, 400.0, 445.0, 550.0, 700.0, 900.0, 1200.0]
    runs = simulate_goodput({"gpu": 1 / m}, JobResponse(checkpoint_cost=c, restart_time=R), horizon=3000 * m,
                            trajectories=100, seed=0, intervals=grid)
    means = [r.useful_fraction.mean() for r in runs]
    exact = [daly_useful_fraction(t, c, R, m) for t in grid]
    assert np.max(np.abs(np.array(means) - exact)) < 2e-3
    best = grid[int(np.argmax(means))]
    # sqrt(2 C M) = 464.8; x (1 + sqrt(C / 2M) / 3 + C / 18M) - C = 464.8 x 1.02198 - 30 = 445.0
    assert daly_interval(c, m) == pytest.approx(445.0, abs=0.5)
    assert best in (400.0, 445.0, 550.0)            # the curve is flat at its top


def test_degradations_slow_the_run_as_poisson_occupancy_says():
    # no interruptions, no checkpoint cost: useful / wall = the mean speed. Arrivals Poisson
    # (nu per s), each lasting d: the count active is Poisson(nu d); speed f^count, so
    # E[speed] = exp(-nu d (1 - f))
    nu, d, f = 2.0 / DAY, 6 * 3600.0, 0.5
    r = simulate_goodput({}, JobResponse(checkpoint_cost=0.0, restart_time=0.0), horizon=200 * DAY,
                         trajectories=400, seed=1, processes=[Process("optic", nu, d)],
                         state_rate=lambda s: f ** s[:, 0])
    expect = math.exp(-nu * d * (1 - f))
    sf = r.useful_fraction
    assert abs(sf.mean() - expect) < 4 * sf.std() / math.sqrt(len(sf)) + 1e-9
    lost = r.lost()
    assert np.allclose(lost["optic"], r.horizon - r.useful)
    assert np.allclose(_accounted(r), r.horizon)


def test_shrinking_and_waiting_for_repair():
    lam, repair, dp = 1 / 3600.0, 3600.0, 8
    base = dict(horizon=300 * DAY, trajectories=60, seed=2)
    # shrinking: no downtime and (almost) nothing to redo with 1 s checkpoints for free; the
    # replicas out are Poisson(lam x repair): speed 1 - lam repair / dp
    r = simulate_goodput({"gpu": lam}, JobResponse(checkpoint_cost=0.0, restart_time=0.0, checkpoint_interval=1.0,
                                                   spares=False, shrink=True, repair_time=repair), dp=dp, **base)
    expect = 1 - lam * repair / dp
    assert r.useful_fraction.mean() == pytest.approx(expect, abs=3e-3)
    assert np.allclose(_accounted(r), r.horizon)
    # waiting for the repair: Daly with restart R + repair; software failures do not wait
    wait = JobResponse(checkpoint_cost=10.0, restart_time=60.0, checkpoint_interval=300.0, spares=False,
                       repair_time=600.0)
    r = simulate_goodput({"gpu": lam}, wait, **base)
    assert r.useful_fraction.mean() == pytest.approx(daly_useful_fraction(300.0, 10.0, 660.0, 1 / lam), abs=2e-3)
    soft = simulate_goodput({"software": lam}, wait, **base)
    assert soft.useful_fraction.mean() == pytest.approx(daly_useful_fraction(300.0, 10.0, 60.0, 1 / lam), abs=2e-3)


def test_monte_carlo_is_reproducible_and_seeded():
    kw = dict(horizon=30 * DAY, trajectories=50, processes=[Process("optic", 1 / DAY, 3600.0)],
              state_rate=lambda s: 1 / (1 + s[:, 0]))
    resp = JobResponse(checkpoint_cost=20.0, restart_time=300.0)
    a = simulate_goodput({"gpu": 1 / 7200.0}, resp, seed=5, **kw)
    b = simulate_goodput({"gpu": 1 / 7200.0}, resp, seed=5, **kw)
    c = simulate_goodput({"gpu": 1 / 7200.0}, resp, seed=6, **kw)
    assert np.array_equal(a.useful, b.useful) and np.array_equal(a.interruptions, b.interruptions)
    assert not np.array_equal(a.useful, c.useful)


def test_time_to_useful_work():
    # nothing fails, checkpoints free: work accrues at wall speed
    r = simulate_goodput({}, JobResponse(checkpoint_cost=0.0, restart_time=0.0, checkpoint_interval=100.0),
                         horizon=1000.0, trajectories=3, seed=0)
    assert np.allclose(r.time_to_useful(450.0), 450.0)
    assert np.all(np.isinf(r.time_to_useful(2000.0)))
    # with failures: the whole run's useful work is reached at the end of the run at the
    # latest, and more work takes longer
    r = simulate_goodput({"gpu": 1 / 3600.0}, JobResponse(checkpoint_cost=10.0, restart_time=120.0),
                         horizon=10 * DAY, trajectories=20, seed=4)
    least = r.useful.min()
    early, late = r.time_to_useful(0.5 * least), r.time_to_useful(0.99 * least)
    assert np.all(early < late) and np.all(late <= 10 * DAY)
    # before any failure costs anything, work / wall <= 1: never faster than the wall clock
    assert np.all(early >= 0.5 * least)


@pytest.mark.parametrize("kw, match", [
    (dict(horizon=0.0), "horizon"),
    (dict(horizon=DAY, trajectories=0), "trajectories"),
    (dict(horizon=DAY, intervals=[-1.0]), "intervals"),
    (dict(horizon=DAY, intervals=[]), "give at least one checkpoint interval"),     # an empty curve before (adv21a)
    # 10^12 trajectories (1e-4 failures a second over a day: ~9.6e12 events) was a raw MemoryError
    (dict(horizon=DAY, trajectories=10**12), r"is 9\.6\de\+12, above 33,554,432"),
])
def test_simulate_rejects_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        simulate_goodput({"gpu": 1e-4}, JobResponse(checkpoint_cost=1.0, restart_time=1.0), **kw)
    with pytest.raises(ValueError, match="rate"):
        simulate_goodput({"gpu": -1.0}, JobResponse(checkpoint_cost=1.0, restart_time=1.0), horizon=DAY)
    with pytest.raises(ValueError, match="checkpoint_interval"):
        simulate_goodput({"gpu": 1e-4}, JobResponse(checkpoint_cost=0.0, restart_time=1.0), horizon=DAY)
    for rate, duration in ((True, 60.0), (1e-4, True)):      # a bool is not one event a second, nor one second
        with pytest.raises(ValueError, match="rate" if rate is True else "duration"):
            Process("optic", rate, duration)
    with pytest.raises(ValueError, match="dp"):
        simulate_goodput({"gpu": 1e-4}, JobResponse(checkpoint_cost=1.0, restart_time=1.0, spares=False,
                                                    shrink=True, repair_time=10.0), horizon=DAY)


# ---------------------------------------------------------------- degraded fabrics


@pytest.mark.parametrize("wl", [dict(op="all_reduce", size=2**28, algorithm="ring"),
                                dict(op="all_reduce", size=2**28),
                                dict(op="all_to_all", size=2**26)])
def test_batched_degraded_fabrics_equal_one_by_one_solves(wl):
    g = tp.rail_optimized(4)
    degrades = [("access", 0.5), ("leaf-spine", 0.25)]
    states = np.array([[0, 0], [1, 0], [0, 1], [3, 2]])
    st = state_step_times(g, wl, degrades, [], states, compute_time=0.0, seed=7, batch=2)
    # the same fabrics built with the public topologies calls, each solved alone with the
    # healthy fabric's algorithm and protocol (NCCL tunes once, when the job starts)
    healthy = collective(g, **wl)
    pinned = dict(wl, algorithm=healthy.algorithm, protocol=healthy.protocol)
    views = state_graphs(g, degrades, states, seed=7)
    hits = bundle_changes(g, degrades, states, seed=7)
    for row, view, t, hit in zip(states, views, st.step_time, hits):
        assert sorted(view.graph.get("degraded", [])) == sorted(c for c, _, _ in hit)
        h = g
        for (tier, factor), count in zip(degrades, row):
            # physical cables: a leaf-spine edge bundles 4, one of them at 1/4 leaves the
            # bundle 1 - (1 - 1/4) / 4 = 13/16 of its capacity
            mine = [(c, n, fs) for c, n, fs in hit if g.edges[c]["tier"] == tier]
            assert sum(len(fs) for _, _, fs in mine) == count
            for c, n, fs in mine:
                assert n == g.edges[c].get("cables", 1) and set(fs) == {factor}
                h = tp.degrade_links(h, [c], 1.0 - len(fs) * (1.0 - factor) / n)
        for u, v, d in h.edges(data=True):
            assert view.edges[u, v]["capacity"] == d["capacity"]
        # NVLSTree (the auto pick here) reads NCCL's view of the NICs for its network levels,
        # which the batched re-solve keeps at the healthy fabric's (NCCL tunes once) and a solve
        # of the degraded fabric alone re-reads: within 1 % (0.3 % with a cable at half rate); the
        # flows, the ring and every other choice re-solve exactly
        exact = healthy.algorithm != "nvls_tree"
        assert t == pytest.approx(collective(h, **pinned).time, rel=1e-12 if exact else 1e-2)
    assert st.step_time[0] == pytest.approx(healthy.time, rel=1e-12)
    assert st.step_time[1] > st.step_time[0]              # a NIC at half rate slows it
    # the fabrics in batches of two, and each alone: the same times
    if wl.get("algorithm") == "ring":
        alone = state_step_times(g, wl, degrades, [], states, compute_time=0.0, seed=7, batch=1)
        assert np.array_equal(alone.step_time, st.step_time)


def test_straggler_adds_its_compute_slowdown():
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**26, algorithm="ring", compute=2.0)
    st = state_step_times(g, wl, [], [0.8, 0.5], np.array([[0, 0], [1, 0], [2, 1]]), compute_time=2.0)
    t0 = 2.0 + collective(g, op="all_reduce", size=2**26, algorithm="ring").time
    # the step waits for the slowest GPU: compute 2 s at 80 % speed is 2.5 s; at 50 % 4 s
    assert st.step_time == pytest.approx([t0, t0 + 0.5, t0 + 2.0], rel=1e-12)


def test_goodput_on_a_cluster():
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**28, algorithm="ring", compute=1.0, tokens=2**20)
    comps = {"gpu": Component("gpu", "interrupt", rate=1 / (16 * 3600.0), unit="gpu"),     # job MTBF 1 h
             "nic_link": Component("nic_link", "degrade", rate=1 / (16 * DAY), unit="link", duration=3600.0,
                                   factor=0.5, links="access")}
    resp = JobResponse(checkpoint_cost=20.0, restart_time=120.0)
    r = goodput(g, wl, resp, components=comps, days=20, trajectories=60, seed=0, intervals=[200.0, 400.0])
    assert r.mtbf == pytest.approx(3600.0)
    assert r.run.interval == pytest.approx(daly_interval(20.0, 3600.0))
    assert np.allclose(_accounted(r.run), 20 * DAY)
    # every distinct state was solved; one degraded NIC cable: the healthy step time grows
    assert r.states.step_time[0] == pytest.approx(r.healthy_step_time)
    assert np.all(r.states.step_time[1:] > r.healthy_step_time)
    lost = r.lost_fraction()
    assert lost["nic_link"] > 0 and lost["gpu"] > lost["nic_link"]
    s = r.summary()
    assert s["tokens_per_day_mean"] == pytest.approx(s["useful_fraction_mean"] * 2**20 / r.healthy_step_time * DAY)
    # time to train: about tokens / (tokens per second x useful fraction)
    ttt = r.time_to_train(2**20 / r.healthy_step_time * 5 * DAY)
    assert np.all(ttt > 5 * DAY) and np.all(ttt < 20 * DAY)
    assert len(r.curve) == 2
    assert s["distinct_fabrics"] == len(r.states.states[r.states.states[:, 0] > 0])
    auto = goodput(g, wl, resp, components=comps, days=5, trajectories=20, seed=0, intervals="auto")
    grid = [t for t, _ in auto.curve]
    step = auto.healthy_step_time        # each interval a whole number of steps, the middle Daly's rounded
    assert len(grid) == 9 and grid[4] == pytest.approx(round(auto.daly_interval / step) * step)
    assert grid[0] == pytest.approx(round(auto.daly_interval / 4 / step) * step)
    assert grid[-1] == pytest.approx(round(auto.daly_interval * 4 / step) * step)


def test_goodput_rejects_bad_input():
    g = tp.rail_optimized(2)
    resp = JobResponse(checkpoint_cost=1.0, restart_time=1.0)
    wl = dict(op="all_reduce", size=2**20)
    with pytest.raises(ValueError, match="days"):
        goodput(g, wl, resp, days=0)
    with pytest.raises(TypeError, match="workload"):
        goodput(g, 42, resp)
    with pytest.raises(ValueError, match="compute"):
        goodput(g, dict(wl, compute=-1.0), resp)
    bad = {"x": Component("x", "degrade", 1e-6, unit="link", duration=1.0, factor=0.5, links="no-such-tier")}
    with pytest.raises(ValueError, match="no-such-tier"):
        goodput(g, wl, resp, components=bad)
    with pytest.raises(TypeError, match="JobResponse"):
        goodput(g, wl, {"checkpoint_cost": 1.0})


def test_goodput_refuses_a_dp_the_job_cannot_hold():
    # 16 GPUs: a data-parallel degree above them (shrink's loss scaled as 1 / dp, so 64 or 1,000 replicas
    # of a 16-GPU job lost almost nothing to a failure) or not dividing them (replicas of unequal size)
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**20, compute=1.0, tokens=1e6)
    resp = JobResponse(checkpoint_cost=1.0, restart_time=1.0, spares=False, shrink=True, repair_time=3600.0)
    for dp, match in ((64, r"dp must be an integer in 1 \.\.\. 16, got 64"), (1000, "in 1 ... 16, got 1000"),
                      (0, "in 1 ... 16, got 0"), (2.0, "got 2.0"), (True, "got True"),
                      (3, "dp must divide the job's 16 GPUs .*got 3")):
        with pytest.raises(ValueError, match=match):
            goodput(g, wl, resp, days=1, trajectories=2, dp=dp)
    # the job's GPUs are its ranks, not the graph's
    with pytest.raises(ValueError, match=r"dp must be an integer in 1 \.\.\. 8, got 16"):
        goodput(g, dict(wl, ranks=range(8)), resp, days=1, trajectories=2, dp=16)
    # a dp that divides them runs, its shrink loss that of 1 / dp of the job per failure
    assert goodput(g, wl, resp, days=1, trajectories=2, dp=16).useful_fraction.mean() > 0
    # dp with no response that shrinks would change nothing: refused (the CLI refuses --dp so too)
    with pytest.raises(ValueError, match=r"dp sizes the replicas .* no response shrinks"):
        goodput(g, wl, JobResponse(checkpoint_cost=1.0, restart_time=1.0), days=1, trajectories=2, dp=16)


def test_checkpoint_writes_through_the_storage_tier():
    # front end: 4 servers x 8 GPUs x 1 GB = 32 GB; 2 storage ports of 400 GbE (50 GB/s) hold it
    g = tp.rail_optimized(4)
    tp.add_storage(g, 2, link="eth_400g")
    assert checkpoint_write_time(g, 1e9) == pytest.approx(32e9 / 100e9, rel=1e-9)
    # ten storage nodes: 500 GB/s of ports; the 4 servers' front-end NICs (4 x 50 GB/s) hold it
    g = tp.rail_optimized(4)
    tp.add_storage(g, 10, link="eth_400g")
    assert checkpoint_write_time(g, 1e9) == pytest.approx(32e9 / 200e9, rel=1e-9)
    with pytest.raises(ValueError, match="storage"):
        checkpoint_write_time(tp.rail_optimized(2), 1e9)
    with pytest.raises(ValueError, match="bytes_per_gpu"):
        checkpoint_write_time(g, 0.0)
    # one GPU's 1 GB through its server's 400 GbE front-end NIC (50 GB/s): 0.02 s, not twice that for [0, 0]
    assert checkpoint_write_time(g, 1e9, ranks=[0]) == pytest.approx(1e9 / 50e9, rel=1e-9)
    for bad in ([0, 0], [-1], [0.9], []):
        with pytest.raises(ValueError, match="ranks"):
            checkpoint_write_time(g, 1e9, ranks=bad)
    with pytest.raises(ValueError, match="bytes_per_gpu"):
        checkpoint_write_time(g, True)


def test_degradation_impact_ranks_the_tiers():
    from flowsolver.reliability import degradation_impact

    # 4 servers in one scalable unit: a ring between servers goes NIC -> rail leaf -> NIC and
    # never reaches the spine, so a leaf-spine cable at half rate changes nothing; a NIC
    # cable at half rate slows the ring
    g = tp.rail_optimized(4)
    wl = dict(op="all_reduce", size=2**28, algorithm="ring")
    st = state_step_times(g, wl, [("leaf-spine", 0.5), ("access", 0.5)], [], np.array([[0, 0], [2, 0], [8, 0], [1, 1]]),
                          compute_time=0.0)
    assert st.fabrics == 3 and st.solved == 1            # only the one with a NIC cable is re-solved
    assert st.step_time[1] == st.step_time[2] == st.step_time[0] < st.step_time[3]
    rows = degradation_impact(g, wl)
    by = {r["tier"]: r for r in rows}
    assert by["leaf-spine"]["slowdown"] == 1.0
    assert by["access"]["slowdown"] > 1.0
    assert rows[0]["slowdown"] == max(r["slowdown"] for r in rows)
    with pytest.raises(ValueError, match="factor"):
        degradation_impact(tp.rail_optimized(2), dict(op="all_reduce", size=2**20), factor=1.0)
    with pytest.raises(ValueError, match="collective"):
        degradation_impact(tp.rail_optimized(2), dict(model="llama-3-8b"))


def test_public_names():
    import importlib

    import flowsolver as fs

    # flowsolver.goodput is the function; the package (flowsolver.reliability, another name so
    # that importing it never shadows the function) holds the rest, also at the top level
    package = importlib.import_module("flowsolver.reliability")
    assert callable(fs.goodput) and fs.goodput.__module__ == "flowsolver.reliability._run"
    for name in ("JobResponse", "Component", "default_components", "simulate_goodput", "place_jobs",
                 "placement_slowdowns", "GoodputResult"):
        assert getattr(fs, name) is getattr(package, name)


def test_a_process_s_events_count_toward_the_memory_limit(monkeypatch):
    # a process's events (a start and an end each) were not counted: 10 trajectories of one
    # day at 1e-3 a second hold 10 x (1 + 2 x 1e-3 x (86400 + 60)) = 1,739 events
    from flowsolver.reliability import _montecarlo
    monkeypatch.setattr(_montecarlo, "MAX_EVENTS", 1000)       # (a regressed guard: a small run, not GBs)
    with pytest.raises(ValueError, match=r"is 1\.74e\+03, above 1,000"):
        simulate_goodput({"gpu": 0.0}, JobResponse(checkpoint_cost=1.0, restart_time=1.0, checkpoint_interval=60.0),
                         horizon=DAY, trajectories=10, processes=[Process("optic", 1e-3, 60.0)])


def test_a_run_or_an_interval_shorter_than_a_step_is_refused():
    """adv25 F5: work was a fluid, so a 1e12 s step against a 3,167 h MTBF read 99.74 % useful
    and a run of 86 us (one step is ~1 s) 100 %. A job checkpoints at step boundaries and a run
    shorter than a step completes none: each is refused naming what is short."""
    from flowsolver.reliability import JobResponse, goodput
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**26, algorithm="ring", compute=1.0, tokens=2**20)
    step = 1.0 + collective(g, op="all_reduce", size=2**26, algorithm="ring").time
    with pytest.raises(ValueError, match=r"days: the run .* shorter than one healthy step"):
        goodput(g, wl, [JobResponse(30, 300)], days=0.5 * step / 86400, trajectories=5)
    with pytest.raises(ValueError, match=r"checkpoint_interval 0.5 s is shorter than one healthy step"):
        goodput(g, wl, [JobResponse(30, 300, checkpoint_interval=0.5)], trajectories=5)
    with pytest.raises(ValueError, match=r"intervals: 0.25 s is shorter than one healthy step"):
        goodput(g, wl, [JobResponse(30, 300)], intervals=[3600.0, 0.25], trajectories=5)
    huge = dict(wl, compute=1e12)
    with pytest.raises(ValueError, match=r"shorter than one healthy step"):
        goodput(g, huge, [JobResponse(30, 300)], days=1e8, trajectories=5)
    assert goodput(g, wl, [JobResponse(30, 300, checkpoint_interval=step)], trajectories=5)[0] is not None


def test_the_automatic_interval_grid_holds_no_interval_below_a_step():
    """review25 F3: intervals="auto" spans a quarter of Daly's interval to four times it; with a
    checkpoint so cheap that Daly's is 1.5 steps, its first points (0.38 s against a 1.0 s
    step) were intervals a job cannot take, which the same call refuses when given."""
    from flowsolver.reliability import JobResponse, goodput
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**26, algorithm="ring", compute=1.0, tokens=2**20)
    step = 1.0 + collective(g, op="all_reduce", size=2**26, algorithm="ring").time
    r = goodput(g, wl, [JobResponse(1e-7, 300)], intervals="auto", trajectories=5)[0]
    taus = [tau for tau, _ in r.curve]
    assert taus and min(taus) >= step and len(taus) < 9


def test_the_automatic_interval_grid_takes_whole_steps():
    """newuser25 #8: with 20,000 s steps the automatic grid held 26,136 and 36,962 s, intervals
    no job takes (it checkpoints at step boundaries); each is now a whole number of steps: a
    2 s step and a cheap checkpoint whose Daly interval is a few steps."""
    from flowsolver.reliability import JobResponse, goodput
    from flowsolver.reliability._checkpoint import daly_interval
    g = tp.rail_optimized(2)
    wl = dict(op="all_reduce", size=2**26, algorithm="ring", compute=2.0, tokens=2**20)
    step = 2.0 + collective(g, op="all_reduce", size=2**26, algorithm="ring").time
    r = goodput(g, wl, [JobResponse(2e-5, 300)], intervals="auto", trajectories=5)[0]
    taus = [tau for tau, _ in r.curve]
    centre = daly_interval(2e-5, r.mtbf)
    assert 2 * step < centre < 40 * step      # a few steps: the grid's points fall between whole steps
    for tau in taus:
        n = tau / step
        assert abs(n - round(n)) < 1e-9 and round(n) >= 1
    assert len(set(taus)) == len(taus) and taus == sorted(taus)
    assert max(taus) == pytest.approx(round(4 * centre / step) * step)
