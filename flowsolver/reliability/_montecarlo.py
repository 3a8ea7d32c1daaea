"""Monte Carlo over failure trajectories, vectorised with numpy.

Each trajectory is a run of ``horizon`` seconds. Interruptions of each kind arrive as a Poisson
process; after one the job is down for its restart (plus the repair when there are no spares
and it does not shrink); a failure during a restart starts the restart again, and outages
that overlap merge: the job computes again only once every repair under way is done and a
restart has completed after the last interruption (a software failure during a repair wait
does not end it; see ``_outages``). Between interruptions the job computes, writing a
checkpoint (``C`` s) after every ``tau`` s of computing; an interruption loses the work since
the last completed checkpoint. Degradations and stragglers arrive as Poisson processes too
(each lasting a fixed ``duration``; those in progress at time 0 included, so the count active
at any time is Poisson with mean ``rate x duration``) and set, while active, the job's
relative speed ``state_rate(state) = healthy step time / step time of the state``: each
distinct state is passed to ``state_rate`` once, in one call (where the caller solves the
distinct fabrics in a batch). A job that shrinks data parallelism runs at ``(dp - k) / dp``
of that while ``k`` replicas wait for repair: a failure stops every replica with a GPU on
the failed part (``replicas_out``: a host failure stops the 8 one-GPU replicas of its 8
GPUs at ``dp = 64``, one replica at ``dp = 8``).

Accounting, per trajectory, in seconds (they add up to the horizon exactly): ``useful`` (work
saved by checkpoints, in healthy-step seconds, plus the work after the last checkpoint of the
run, which the run's end keeps), ``checkpoint`` (time writing checkpoints), ``restart`` per
interrupting kind (downtime after its failures; where outages overlap, the outage already
under way keeps its time up to its end and a later failure is charged with what it adds
beyond), ``rework`` per interrupting kind (computing lost since the last checkpoint),
``slowdown`` per degradation process and for shrinking (the time the saved work took beyond
its healthy time; split over the processes active in proportion to what each costs alone).
Within a checkpoint period the speed is taken as its mean over the period.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _checks
from ._checkpoint import JobResponse, daly_interval
from ._outages import Segments

__all__ = ["Process", "RunSample", "simulate_goodput"]


@dataclass(frozen=True)
class Process:
    """A non-interrupting process of the Monte Carlo: ``rate`` events per second for the whole
    job, each lasting ``duration`` seconds."""

    kind: str
    rate: float
    duration: float

    def __post_init__(self):
        if isinstance(self.rate, bool) or not (isinstance(self.rate, (int, float)) and math.isfinite(self.rate)
                                               and self.rate >= 0):
            raise ValueError(f"process {self.kind!r}: rate must be a finite number >= 0 per second, got {self.rate!r}")
        if isinstance(self.duration, bool) or not (isinstance(self.duration, (int, float))
                                                   and math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"process {self.kind!r}: duration must be a finite number of seconds > 0, "
                             f"got {self.duration!r}")


@dataclass
class RunSample:
    """The trajectories of :func:`simulate_goodput`; every array has one entry per trajectory,
    seconds unless said otherwise (see the module docstring for what each counts)."""

    horizon: float
    interval: float
    checkpoint_cost: float
    useful: np.ndarray
    checkpoint: np.ndarray
    restart: dict
    rework: dict
    slowdown: dict
    interruptions: np.ndarray
    distinct_states: int
    states: np.ndarray = field(repr=False)
    state_rates: np.ndarray = field(repr=False)
    # per segment (between interruptions), for time-to-train: trajectory, start of computing,
    # end of the saved (or, for the last, the run's) work, useful seconds saved
    _segments: tuple = field(repr=False, default=())

    @property
    def useful_fraction(self) -> np.ndarray:
        """Useful training time / wall time, per trajectory."""
        return self.useful / self.horizon

    def lost(self) -> dict:
        """Seconds lost per trajectory by cause: each interrupting kind (restart + rework),
        each degradation process (slowdown), ``"checkpointing"`` and ``"shrink"``."""
        out = {"checkpointing": self.checkpoint}
        for kind in self.restart:
            out[kind] = self.restart[kind] + self.rework[kind]
        for kind, v in self.slowdown.items():
            out[kind] = out.get(kind, 0.0) + v
        return out

    def time_to_useful(self, seconds: float) -> np.ndarray:
        """Wall time (s) at which each trajectory has done ``seconds`` of useful work (inf
        where its horizon is too short), to within one checkpoint period."""
        traj, start, end, useful = self._segments
        n = len(self.useful)
        target = float(seconds)
        csum = np.cumsum(useful)
        before = csum - useful
        first = np.searchsorted(traj, np.arange(n))
        base = np.where(first < len(traj), before[np.minimum(first, len(traj) - 1)], 0.0)
        need = target - (before - base[traj])
        hit = (need > 0) & (need <= useful) & (useful > 0)
        t = start + np.where(hit, need / np.where(useful > 0, useful, 1.0), 0.0) * (end - start)
        out = np.full(n, np.inf)
        # the first segment of each trajectory where the work crosses the target
        idx = np.flatnonzero(hit)
        if len(idx):
            order = np.lexsort((idx, traj[idx]))
            idx = idx[order]
            keep = np.ones(len(idx), bool)
            keep[1:] = traj[idx][1:] != traj[idx][:-1]
            out[traj[idx[keep]]] = t[idx[keep]]
        if target <= 0:
            out[:] = 0.0
        return out


def _poisson_times(rng, n, rate, lo, hi):
    """Per-trajectory Poisson arrivals on [lo, hi): (trajectory, time), unsorted."""
    counts = rng.poisson(rate * (hi - lo), size=n)
    traj = np.repeat(np.arange(n, dtype=np.int64), counts)
    return traj, rng.uniform(lo, hi, size=len(traj))


#: host bytes per simulated event (a trajectory or an interruption): 1.8 GB for 400,000
#: trajectories of a week at 21 interruptions each, measured (peak RSS) on this repository's machine
EVENT_BYTES = 200
#: events a call may simulate (about 6.7 GB at EVENT_BYTES): more is refused, not a MemoryError
MAX_EVENTS = 1 << 25


def simulate_goodput(interrupts: dict, response: JobResponse, *, horizon: float, trajectories: int = 1000,
                     seed: int = 0, processes=(), state_rate=None, hardware=None, dp: int | None = None,
                     intervals=None, replicas_out=None):
    """Monte Carlo of a run's goodput (see the module docstring).

    Parameters
    ----------
    interrupts : dict
        Interrupting kind -> events per second for the whole job (>= 0).
    response : JobResponse
        Checkpoint interval and cost, restart, spares / shrinking.
    horizon : float
        Seconds of the run (> 0).
    trajectories : int
        Trajectories (>= 1).
    seed : int
        Seed of numpy's default generator (an integer >= 0): the same seed gives the same
        trajectories.
    processes : sequence of Process
        Degradations and stragglers (the state columns, in order).
    state_rate : callable, optional
        ``states (m, len(processes)) int -> relative speed (m,)`` in [0, 1], called once with
        every distinct state that occurs (and the one-process states); default: every state
        at full speed.
    hardware : dict, optional
        Interrupting kind -> whether its failure takes a node out (waits for repair or shrinks
        when there are no spares); default all but ``"software"``.
    dp : int, optional
        Data-parallel degree, needed when ``response.shrink``.
    intervals : sequence of float, optional
        Checkpoint intervals (s) to evaluate on the same trajectories; returns a list of
        samples, one per interval, instead of one sample.
    replicas_out : dict, optional
        Interrupting kind -> the data-parallel replicas one of its failures stops when the
        job shrinks: an integer >= 1, or one per unit of that kind (the failed unit drawn
        uniformly for each failure); default 1 for every kind.

    >>> r = simulate_goodput({"gpu": 1 / 3600.0}, JobResponse(checkpoint_cost=10.0, restart_time=60.0,
    ...                      checkpoint_interval=300.0), horizon=86400.0, trajectories=200, seed=1)
    >>> bool(0.8 < r.useful_fraction.mean() < 0.95), bool(r.interruptions.mean() > 20)
    (True, True)
    """
    n = _checks.integer("trajectories", trajectories, 1)
    seed = _checks.integer("seed", seed, 0)             # numpy's own message would not name it
    H = float(horizon)
    if not (math.isfinite(H) and H > 0):
        raise ValueError(f"horizon must be a finite number of seconds > 0, got {horizon!r}")
    if not isinstance(response, JobResponse):
        raise TypeError(f"response must be a JobResponse, got {type(response).__name__}")
    if not isinstance(interrupts, dict):
        raise TypeError("interrupts must be a dict kind -> events per second")
    kinds = list(interrupts)
    lam = np.array([float(interrupts[k]) for k in kinds], dtype=np.float64)
    if np.any(~np.isfinite(lam)) or np.any(lam < 0):
        raise ValueError(f"interrupts: every rate must be a finite number >= 0 per second, got {interrupts!r}")
    processes = list(processes)
    for p in processes:
        if not isinstance(p, Process):
            raise TypeError(f"processes must hold Process objects, got {type(p).__name__}")
    hardware = {k: k != "software" for k in kinds} if hardware is None else dict(hardware)
    if response.shrink and (dp is None or _checks.integer("dp", dp, 2) < 2):
        raise ValueError("response.shrink needs dp >= 2 (the data-parallel degree)")
    per_unit = _replicas_per_unit(replicas_out, kinds)
    total = float(lam.sum())
    if response.checkpoint_interval is not None:
        default_tau = response.checkpoint_interval
    elif total > 0 and response.checkpoint_cost > 0:
        default_tau = daly_interval(response.checkpoint_cost, 1.0 / total)
    elif total > 0:
        raise ValueError("response: with checkpoint_cost=0 there is no optimal interval (checkpoint as often as "
                         "you like): give checkpoint_interval")
    else:
        default_tau = H                      # nothing fails: one period
    taus = [default_tau] if intervals is None else [float(x) for x in intervals]
    if not taus:
        raise ValueError("intervals: give at least one checkpoint interval (seconds), or None for the optimal one")
    for x in taus:
        if not (math.isfinite(x) and x > 0):
            raise ValueError(f"intervals: every checkpoint interval must be a finite number of seconds > 0, got {x!r}")
    # (a process's events over the horizon and its duration, each a start and an end on the timeline)
    events = n * (1.0 + total * H + sum(2.0 * float(p.rate) * (H + float(p.duration)) for p in processes))
    if events > MAX_EVENTS:
        raise ValueError(f"trajectories x (1 + expected interruptions each) is {events:.3g}, above {MAX_EVENTS:,} "
                         f"(about {EVENT_BYTES} bytes each in memory): give fewer trajectories or a shorter horizon")
    rng = np.random.default_rng(seed)

    i_traj, i_time, i_kind = _interruptions(rng, n, lam, H)
    interruptions = np.bincount(i_traj, minlength=n)
    repair = response.repair_time
    hw = np.array([bool(hardware.get(k, True)) for k in kinds], dtype=bool)
    down = np.full(len(kinds), response.restart_time)
    if not response.spares and not response.shrink:
        down = down + np.where(hw, repair, 0.0)

    timeline = _Timeline(rng, n, H, processes, i_traj, i_time, i_kind, hw if response.shrink else None, repair,
                         state_rate, dp, per_unit)
    segments = Segments(n, H, i_traj, i_time, i_kind, down, len(kinds))
    out = [_account(timeline, segments, tau, response.checkpoint_cost, kinds, processes, interruptions)
           for tau in taus]
    return out[0] if intervals is None else out


def _interruptions(rng, n, lam, H):
    """Interruptions (trajectory, time, kind index), sorted by trajectory then time, each
    segment starting after one; kinds at rates ``lam`` (per second)."""
    total = float(lam.sum())
    i_traj, i_time = _poisson_times(rng, n, total, 0.0, H) if total > 0 else (np.zeros(0, np.int64), np.zeros(0))
    i_kind = rng.choice(len(lam), size=len(i_traj), p=lam / total) if total > 0 else np.zeros(0, np.int64)
    order = np.argsort(i_traj * (2.0 * H) + i_time)          # by trajectory, then time
    return i_traj[order], i_time[order], i_kind[order]


def _replicas_per_unit(replicas_out, kinds) -> list:
    """Per interrupting kind, the replicas each of its units holds (an int64 array, >= 1)."""
    if replicas_out is None:
        replicas_out = {}
    if not isinstance(replicas_out, dict):
        raise TypeError("replicas_out must be a dict kind -> replicas one failure stops")
    out = []
    for k in kinds:
        v = np.atleast_1d(np.asarray(replicas_out.get(k, 1)))
        if v.ndim != 1 or not len(v) or v.dtype.kind not in "iu" or np.any(v < 1):
            raise ValueError(f"replicas_out[{k!r}] must be an integer >= 1 or a sequence of them (one per unit), "
                             f"got {replicas_out.get(k)!r}")
        out.append(v.astype(np.int64))
    return out


def unique_rows(rows):
    """``np.unique(rows, axis=0, return_inverse=True)`` for small non-negative int rows, by
    one int64 key per row (mixed radix), ~50x faster than numpy's row-wise unique."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.shape[1] == 0:
        return rows[:1], np.zeros(len(rows), np.int64)
    radix = rows.max(axis=0) + 1
    if rows.min() < 0 or float(np.prod(radix.astype(np.float64))) >= 2.0 ** 62:
        states, inverse = np.unique(rows, axis=0, return_inverse=True)
        return states, np.asarray(inverse).reshape(-1)
    stride = np.concatenate([[1], np.cumprod(radix[:0:-1])])[::-1]       # last column varies fastest
    keys = rows @ stride
    size = int(np.prod(radix.astype(np.float64)))
    if size <= max(1 << 22, len(rows)):
        # few possible states: mark the keys met in a table (no sort), number them in key
        # order (numpy's unique gives the same order), read each row's number back
        seen = np.zeros(size, dtype=bool)
        seen[keys] = True
        met = np.flatnonzero(seen)
        number = np.cumsum(seen) - 1
        states = (met[:, None] // stride[None, :]) % radix[None, :]
        return states.astype(np.int64), number[keys].astype(np.int64)
    keys, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[first], np.asarray(inverse).reshape(-1)


class _Timeline:
    """The speed of each trajectory over time: piecewise constant between events of the
    degradation processes (and shrinking), with the cumulative work ``W`` at each event."""

    def __init__(self, rng, n, H, processes, i_traj, i_time, i_kind, shrink_hw, repair, state_rate, dp, per_unit):
        P = len(processes)
        cols = P + 1                                  # the last column counts replicas out (shrinking)
        trajs, times, col, delta = [np.arange(n, dtype=np.int64)], [np.zeros(n)], [np.zeros(n, np.int64)], \
            [np.zeros(n, np.int64)]
        for j, p in enumerate(processes):
            if p.rate <= 0:
                continue
            tr, start = _poisson_times(rng, n, p.rate, -p.duration, H)
            end = start + p.duration
            trajs += [tr, tr[end < H]]
            times += [np.maximum(start, 0.0), end[end < H]]
            col += [np.full(len(tr), j), np.full(int((end < H).sum()), j)]
            delta += [np.ones(len(tr), np.int64), -np.ones(int((end < H).sum()), np.int64)]
        if shrink_hw is not None:
            out = shrink_hw[i_kind]
            tr, t0, kind = i_traj[out], i_time[out], i_kind[out]
            back = t0 + repair
            # the replicas each failure stops: its kind's, or (units unlike) a uniformly drawn unit's
            k = np.ones(len(tr), np.int64)
            for j, units in enumerate(per_unit):
                at = kind == j
                k[at] = units[0] if np.all(units == units[0]) else units[rng.integers(len(units), size=int(at.sum()))]
            trajs += [tr, tr[back < H]]
            times += [t0, back[back < H]]
            col += [np.full(len(tr), P), np.full(int((back < H).sum()), P)]
            delta += [k, -k[back < H]]
        traj, t, c, d = (np.concatenate(x) for x in (trajs, times, col, delta))
        # by trajectory, then time; rows tied in time (those clipped to 0) have dt = 0 and
        # never count, so the order among them does not matter and no stable sort is needed
        order = np.argsort(traj * (2.0 * H) + t)
        traj, t, c, d = traj[order], t[order], c[order].astype(np.int32), d[order].astype(np.int32)
        del order
        first = np.searchsorted(traj, np.arange(n))
        # the count active of each column at each row: a running sum per column, from 0 at
        # each trajectory's first row (1-D running sums: ~10x faster than one over (rows, cols))
        counts = np.empty((cols, len(traj)), dtype=np.int32)
        for j in range(cols):
            step = np.where(c == j, d, 0).astype(np.int32)
            run = np.cumsum(step, dtype=np.int32)
            counts[j] = run - (run[first] - step[first])[traj]
        del c, d
        nxt = np.empty(len(t))
        nxt[:-1] = t[1:]
        nxt[-1] = H
        last = np.ones(len(t), bool)
        last[:-1] = traj[1:] != traj[:-1]
        nxt[last] = H
        dt = nxt - t
        del nxt, last
        # the distinct states (of intervals that last), each asked of state_rate once
        live = dt > 0
        fab = counts[:P, live].T.astype(np.int64)
        # each process alone (what it costs alone splits a shared slowdown); one that never
        # starts asks for nothing
        unit = np.eye(P, dtype=np.int64) * np.array([p.rate > 0 for p in processes], dtype=np.int64)[:, None]
        ask = np.concatenate([np.zeros((1, P), np.int64), unit, fab]) if P else np.zeros((1, 0), np.int64)
        del fab
        states, inverse = unique_rows(ask)
        if state_rate is None or P == 0:
            rates = np.ones(len(states))
        else:
            rates = np.asarray(state_rate(states), dtype=np.float64).reshape(-1)
            if rates.shape != (len(states),) or np.any(~(rates >= 0)) or np.any(rates > 1 + 1e-9):
                raise ValueError("state_rate must return one relative speed in [0, 1] per state")
        self.states, self.state_rates = states, rates
        self.distinct = int(np.count_nonzero(np.bincount(inverse[1 + P:], minlength=len(states)))) \
            if P and live.any() else 1
        self.alone_rates = rates[inverse[1:1 + P]] if P else np.zeros(0)
        speed = np.ones(len(t))
        speed[live] = rates[inverse[1 + P:]] if P else rates[0]
        del inverse
        if shrink_hw is not None:
            speed = speed * np.clip(dp - counts[P], 0, None) / dp
        # what each process costs alone (its share of a slowdown where several are active)
        alone = 1.0 - self.alone_rates if P else np.zeros(0)
        share = [counts[j] * alone[j] for j in range(P)] + \
            [counts[P] / dp if shrink_hw is not None else np.zeros(len(t))]
        total = np.sum(share, axis=0) if share else np.zeros(len(t))
        loss = (1.0 - speed) * dt
        scale = np.where(total > 0, loss / np.maximum(total, 1e-300), 0.0)
        self.shares = np.stack([np.bincount(traj, weights=x * scale, minlength=n) for x in share], axis=1)
        del share, total, loss, scale, counts
        work = speed * dt
        cw = np.cumsum(work) - work
        self.W0 = cw - cw[first][traj]
        self.key = traj * (2.0 * H) + t
        self.t, self.speed, self.H = t, speed, H

    def W(self, traj, t):
        """Cumulative work (healthy seconds) of trajectories ``traj`` at times ``t``."""
        idx = np.searchsorted(self.key, traj * (2.0 * self.H) + t, side="right") - 1
        return self.W0[idx] + self.speed[idx] * (t - self.t[idx])


def _account(tl: _Timeline, sg: Segments, tau, C, kinds, processes, interruptions) -> RunSample:
    n, H, K = sg.n, sg.H, sg.K
    period = tau + C
    u = sg.b - sg.s
    k = np.where(u > 0, np.floor(u / period), 0.0)
    e = sg.s + k * period
    saved = tau / period * (tl.W(sg.traj, e) - tl.W(sg.traj, sg.s))
    slow = k * tau - saved
    rework = np.where(sg.last, 0.0, sg.b - e)
    tail = np.where(sg.last, tl.W(sg.traj, np.full(len(e), H)) - tl.W(sg.traj, e), 0.0)   # kept at the run's end
    slow = slow + np.where(sg.last, (H - e) - tail, 0.0)
    useful_seg = saved + tail
    useful = np.bincount(sg.traj, weights=useful_seg, minlength=n)
    checkpoint = np.bincount(sg.traj, weights=k * C, minlength=n)

    def per_kind(which, values):
        ok = which >= 0
        m = np.bincount(sg.traj[ok] * K + which[ok], weights=values[ok], minlength=n * K).reshape(n, K)
        return {kind: m[:, i] for i, kind in enumerate(kinds)}

    (held_by, held), (new_by, added) = sg.down_by
    restart = {kind: a + b for (kind, a), b in zip(per_kind(held_by, held).items(), per_kind(new_by, added).values())}
    rework_k = per_kind(sg.after, rework)
    slow_total = np.bincount(sg.traj, weights=slow, minlength=n)
    shares = tl.shares
    norm = shares.sum(axis=1)
    frac = np.where(norm[:, None] > 0, shares / np.where(norm > 0, norm, 1.0)[:, None], 0.0)
    slowdown = {p.kind: slow_total * frac[:, j] for j, p in enumerate(processes)}
    slowdown["shrink"] = slow_total * frac[:, len(processes)]
    # slowdown nobody caused is rounding (no process active): keep the books exact
    unattributed = slow_total - sum(slowdown.values())
    slowdown["shrink"] = slowdown["shrink"] + unattributed
    end = np.where(sg.last, H, e)
    return RunSample(horizon=H, interval=tau, checkpoint_cost=C, useful=useful, checkpoint=checkpoint,
                     restart=restart, rework=rework_k, slowdown=slowdown, interruptions=interruptions,
                     distinct_states=tl.distinct, states=tl.states, state_rates=tl.state_rates,
                     _segments=(sg.traj, sg.s, end, useful_seg))
