"""Overlapping outages without hot spares: a failure during a repair wait does not end it.

The job is down over the union of ``[t_hw, t_hw + repair + restart]`` and ``[t_sw, t_sw +
restart]``, a restart re-begun by a failure during it; checked on a sequence worked by hand
and against an independent interval-merging loop on random sequences, both injected in place
of the Monte Carlo's draws, and on the Monte Carlo's own draws (adding a kind of failure
never raises the useful time; the hardware keeps its downtime in the loss by cause)."""

import numpy as np
import pytest

from flowsolver.reliability import JobResponse, _montecarlo, simulate_goodput

DAY, HOUR = 86400.0, 3600.0


def _inject(monkeypatch, seqs):
    """Replace the drawn interruptions by ``seqs``: per trajectory, a list of (time, kind index)."""
    traj = [j for j, seq in enumerate(seqs) for _ in seq]
    time = [t for seq in seqs for t, _ in sorted(seq)]
    kind = [k for seq in seqs for _, k in sorted(seq)]
    monkeypatch.setattr(_montecarlo, "_interruptions",
                        lambda rng, n, lam, H: (np.array(traj, np.int64), np.array(time, float),
                                                np.array(kind, np.int64)))


def test_overlapping_outages_by_hand(monkeypatch):
    # kinds: 0 = gpu (hardware, waits 100 s for its repair), 1 = software; restart 10 s.
    # gpu at 100: down to 100 + 100 + 10 = 210; software at 150 (its restart would end at 160:
    # inside the wait, adds nothing); software at 205 (ends at 215: 5 s beyond 210); computing
    # 215-500; gpu at 500 (to 610) and gpu at 550 (to 660, a second node away); computing
    # 660-1000. Down 115 + 160 = 275 s; checkpoints every second for free, every stretch an
    # integer number of seconds: nothing to redo, useful 1000 - 275 = 725 s.
    _inject(monkeypatch, [[(100.0, 0), (150.0, 1), (205.0, 1), (500.0, 0), (550.0, 0)]])
    resp = JobResponse(checkpoint_cost=0.0, restart_time=10.0, checkpoint_interval=1.0, spares=False,
                       repair_time=100.0)
    r = simulate_goodput({"gpu": 1e-3, "software": 1e-3}, resp, horizon=1000.0, trajectories=1)
    assert r.useful[0] == pytest.approx(725.0)
    # by cause: the outage under way keeps its time; the software failure at 205 adds 5 s
    assert r.restart["gpu"][0] == pytest.approx(270.0)
    assert r.restart["software"][0] == pytest.approx(5.0)
    assert r.rework["gpu"][0] == pytest.approx(0.0) and r.rework["software"][0] == pytest.approx(0.0)


def _merged_down(seq, down, restart, H):
    """Seconds down: the union of [t, t + down[kind]], a restart re-begun by a failure during
    it (an independent event loop over the sorted intervals)."""
    total, cur = 0.0, None
    for t, k in sorted(seq):
        end = t + down[k]
        if cur is None or t > cur[1]:
            if cur is not None:
                total += min(cur[1], H) - cur[0]
            cur = [t, end]
        else:
            cur[1] = max(cur[1], end, t + restart)
    if cur is not None:
        total += min(cur[1], H) - cur[0]
    return total


def test_outages_against_interval_merging(monkeypatch):
    H, repair, restart, tau = 10 * DAY, 10 * HOUR, 60.0, 1e-3
    rates = {"gpu": 1 / DAY, "host": 0.5 / DAY, "software": 2 / HOUR}
    down = [repair + restart, repair + restart, restart]
    rng = np.random.default_rng(7)
    seqs = [[(t, k) for k, lam in enumerate(rates.values()) for t in rng.uniform(0, H, rng.poisson(lam * H))]
            for _ in range(40)]
    resp = JobResponse(checkpoint_cost=0.0, restart_time=restart, checkpoint_interval=tau, spares=False,
                       repair_time=repair)
    _inject(monkeypatch, seqs)
    r = simulate_goodput(rates, resp, horizon=H, trajectories=len(seqs))
    ref = np.array([H - _merged_down(s, down, restart, H) for s in seqs])
    # what is redone is under one checkpoint interval per interruption
    assert np.all(np.abs(r.useful - ref) <= tau * np.array([len(s) + 1 for s in seqs]))
    # adding a kind of failure to the same trajectories never raises the useful time
    _inject(monkeypatch, [[(t, k) for t, k in s if k != 2] for s in seqs])
    hw_only = simulate_goodput(rates, resp, horizon=H, trajectories=len(seqs))
    assert np.all(r.useful <= hw_only.useful + 1e-6)
    assert np.any(r.useful < hw_only.useful - 60.0)


def test_software_failures_do_not_shorten_repairs():
    # the Monte Carlo's own draws: without spares (10 h repairs) more software failures lower
    # the useful time, and the hardware keeps (to within the noise) the downtime it had alone
    H, repair, restart = 30 * DAY, 10 * HOUR, 60.0
    resp = JobResponse(checkpoint_cost=0.0, restart_time=restart, checkpoint_interval=1.0, spares=False,
                       repair_time=repair)
    runs = [simulate_goodput({"gpu": 1 / DAY, "software": sw}, resp, horizon=H, trajectories=300, seed=0)
            for sw in (0.0, 2 / HOUR, 8 / HOUR)]
    means = [r.useful_fraction.mean() for r in runs]
    assert means[0] > means[1] > means[2]
    hw = [r.restart["gpu"] / H for r in runs]
    for x in hw[1:]:
        assert abs(x.mean() - hw[0].mean()) < 4 * np.hypot(x.std(), hw[0].std()) / np.sqrt(len(x))
    # the software failures' own charge: at most their restarts (60 s each)
    for r, sw in zip(runs[1:], (2 / HOUR, 8 / HOUR)):
        assert r.restart["software"].mean() <= sw * H * restart
