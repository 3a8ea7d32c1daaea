"""goodput(): a run's useful training time, tokens per day and time to train over failure
trajectories, on the job's fabric with its degradations solved."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _checks
from ._checkpoint import JobResponse, daly_interval, daly_useful_fraction, young_interval
from ._components import Component, default_components, job_units, replicas_per_unit
from ._fabric import REROUTE, StateTimes, healthy_step, state_step_times
from ._montecarlo import Process, RunSample, simulate_goodput

__all__ = ["GoodputResult", "goodput"]

_DAY = 86400.0


@dataclass
class GoodputResult:
    """What :func:`goodput` returns.

    ``run``: the Monte Carlo sample (:class:`RunSample`: per-trajectory seconds of useful work,
    checkpointing, restarts, rework and slowdown); ``healthy_step_time`` (s) and
    ``tokens_per_step`` (NaN when the workload does not say); ``states``: the distinct
    degraded states met and their step times (:class:`StateTimes`); ``mtbf`` (s) of the
    interruptions; ``young_interval`` and ``daly_interval`` (s); ``daly_fraction``: Daly's
    expected useful fraction for the interval used (interruptions only, exponential; its
    downtime ``R`` the restart, plus, without spares and not shrinking, the repair times the
    share of interruptions that wait for one: the mean downtime); with no interruptions the
    run's own count, ``1 - floor(H / (tau + C)) C / H`` over the ``days`` (the checkpoints
    it completes; 1.0 where the interval is the whole run, which writes none), what every
    trajectory gives, where Daly's ``tau / (tau + C)`` is only its long-run limit;
    ``curve``: (interval s, mean useful fraction) over the intervals asked, on the same
    trajectories, when ``intervals`` was given; ``healthy_result``: the step's collective on
    the healthy fabric (a :class:`~flowsolver.CollectiveResult`; None for training steps and
    callables), to reuse (:func:`degradation_impact`'s ``base``).
    """

    run: RunSample
    healthy_step_time: float
    tokens_per_step: float
    components: dict
    states: StateTimes
    mtbf: float
    young_interval: float
    daly_interval: float
    daly_fraction: float
    curve: list = field(default_factory=list)
    healthy_result: object = field(default=None, repr=False)

    @property
    def useful_fraction(self) -> np.ndarray:
        """Useful training time / wall time, per trajectory."""
        return self.run.useful_fraction

    @property
    def healthy_tokens_per_s(self) -> float:
        """Tokens per second with nothing broken."""
        return self.tokens_per_step / self.healthy_step_time

    @property
    def tokens_per_day(self) -> np.ndarray:
        """Useful tokens per day, per trajectory (NaN when tokens per step are unknown)."""
        return self.useful_fraction * self.healthy_tokens_per_s * _DAY

    @property
    def simulated_optimum(self) -> float:
        """The interval of ``curve`` with the highest mean useful fraction (s); NaN without a curve."""
        if not self.curve:
            return float("nan")
        return float(max(self.curve, key=lambda p: p[1])[0])

    def time_to_train(self, tokens: float) -> np.ndarray:
        """Wall seconds to train ``tokens``, per trajectory (inf where the run simulated was
        too short: simulate more ``days``)."""
        if not (isinstance(tokens, (int, float)) and math.isfinite(tokens) and tokens > 0):
            raise ValueError(f"tokens must be a finite number > 0, got {tokens!r}")
        if not math.isfinite(self.tokens_per_step):
            raise ValueError("the workload has no tokens per step (give the collective workload 'tokens')")
        return self.run.time_to_useful(tokens / self.healthy_tokens_per_s)

    def lost_fraction(self) -> dict:
        """Mean fraction of wall time lost per cause (each interrupting kind, each
        degradation kind, ``checkpointing``, ``shrink``), largest first."""
        out = {k: float(np.mean(v)) / self.run.horizon for k, v in self.run.lost().items()}
        out = {k: (0.0 if abs(v) < 1e-12 else v) for k, v in out.items()}        # rounding, not a loss
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def summary(self) -> dict:
        """Means and percentiles as plain numbers (what the command line prints)."""
        f = self.useful_fraction
        out = dict(trajectories=len(f), days=self.run.horizon / _DAY, healthy_step_time=self.healthy_step_time,
                   interruptions_mean=float(self.run.interruptions.mean()), mtbf_hours=self.mtbf / 3600.0,
                   checkpoint_interval=self.run.interval, checkpoint_cost=self.run.checkpoint_cost,
                   young_interval=self.young_interval, daly_interval=self.daly_interval,
                   daly_fraction=self.daly_fraction, useful_fraction_mean=float(f.mean()),
                   useful_fraction_p5=float(np.percentile(f, 5)), useful_fraction_p50=float(np.percentile(f, 50)),
                   useful_fraction_p95=float(np.percentile(f, 95)), distinct_states=self.run.distinct_states,
                   distinct_fabrics=self.states.fabrics, fabrics_solved=self.states.solved,
                   fabrics_rerouted=getattr(self.states, "rerouted", 0))
        if math.isfinite(self.tokens_per_step):
            tpd = self.tokens_per_day
            out.update(tokens_per_day_mean=float(tpd.mean()), tokens_per_day_p5=float(np.percentile(tpd, 5)),
                       healthy_tokens_per_day=self.healthy_tokens_per_s * _DAY)
        if self.curve:
            out["simulated_optimum"] = self.simulated_optimum
        out["lost_fraction"] = self.lost_fraction()
        return out


def _job_rate(c: Component, units: dict) -> float:
    if c.unit == "link":
        if not isinstance(c.links, str):
            raise ValueError(f"component {c.kind!r}: unit='link' needs links= a tier name")
        if c.links not in units["link"]:
            raise ValueError(f"component {c.kind!r}: links={c.links!r} is no tier of the graph; its tiers: "
                             f"{', '.join(sorted(map(str, units['link'])))}")
        return c.rate * units["link"][c.links]
    return c.rate * units[c.unit]


def goodput(graph, workload, response, *, components=None, days: float = 30.0,
            trajectories: int = 1000, seed: int = 0, intervals=None, dp: int | None = None,
            fabric_seed: int = 0, reroute: str = "stay", reroute_below: float | None = None):
    """Goodput of a training run on ``graph`` over failure trajectories.

    Parameters
    ----------
    graph : networkx.DiGraph
        The cluster (the job runs on the workload's ranks, default every GPU).
    workload : dict or callable
        One training step: :func:`~flowsolver.training_step`'s arguments (with ``model``), or
        :func:`~flowsolver.collective`'s (with ``op``) plus ``compute`` (s per step) and
        ``tokens`` (per step), or a callable ``graph -> step time``. A straggler slows the
        step's compute: a callable says how many of its step's seconds are compute by a
        ``compute_time`` attribute (``f.compute_time = 1.0``); without one, straggler
        components (rate > 0) are refused with a ``ValueError`` rather than costing nothing.
    response : JobResponse or sequence of JobResponse
        Checkpoint interval (default Daly's optimum) and cost, restart, spares or shrinking.
        A list: one result per response, in order, all on the same trajectories (the same
        ``seed``), the healthy step and every distinct degraded fabric solved once for all
        of them (``states.solved`` of each counts the fabrics solved up to it).
    components : dict, optional
        Kind -> :class:`Component`; default :func:`default_components` (the Llama 3 paper's
        interruption rates). Degradations (``effect="degrade"``) re-solve the fabric with
        their links slower; stragglers slow the step's compute. Without spares an
        interruption waits for a repair (or shrinks the job) when its ``hardware`` is True.
    days : float
        Length of each simulated run (days, > 0).
    trajectories : int
        Monte Carlo trajectories (>= 1).
    seed : int
        Seed of the trajectories (reproducible): an integer >= 0.
    intervals : sequence of float or "auto", optional
        Checkpoint intervals (s) to compare on the same trajectories (``curve``,
        ``simulated_optimum``); ``"auto"``: 9 intervals from a quarter of Daly's to four
        times it, evenly spaced in log, each rounded to a whole number of healthy steps (a job
        checkpoints at step boundaries; fewer than 9 where two round to the same).
    dp : int, optional
        Data-parallel degree for ``shrink`` (training workloads know theirs: for one, dp is
        its own degree or an error, and its layout places the replicas): an integer in
        1 ... the job's GPUs that divides them (each replica the same number of GPUs,
        consecutive ranks). A failure stops every replica with a GPU on the failed part (a
        GPU, its NIC, its host: 8 replicas for an 8-GPU server at one GPU a replica, 4 for
        an NVL72 compute tray).
    fabric_seed : int
        Seed of the order in which a tier's cables degrade: an integer >= 0.
    reroute : {"stay", "around"}
        On a degraded cable the traffic stays (its share moves at the cable's lower rate), or
        is routed around every cable kept at less than ``reroute_below`` of its rate (the step
        routed and solved again on that fabric; where no route is left it stays). See
        :func:`~flowsolver.reliability.state_step_times`.
    reroute_below : float, optional
        With ``reroute="around"``: the fraction of its rate, in (0, 1], below which a cable is
        drained (default 1: any degradation); refused with ``reroute="stay"``, which drains none.

    Examples
    --------
    >>> import topologies as tp
    >>> g = tp.rail_optimized(2)
    >>> wl = dict(op="all_reduce", size=2**30, algorithm="ring", compute=1.0, tokens=1e6)
    >>> r = goodput(g, wl, JobResponse(checkpoint_cost=20.0, restart_time=300.0), days=7, trajectories=100)
    >>> bool(0.9 < r.useful_fraction.mean() < 1.0)          # 16 GPUs at Llama 3's rates: rare failures
    True
    """
    many = not isinstance(response, JobResponse)
    responses = list(response) if many and isinstance(response, (list, tuple)) else [response]
    if not responses or not all(isinstance(x, JobResponse) for x in responses):
        bad = next((x for x in responses if not isinstance(x, JobResponse)), response)
        raise TypeError(f"response must be a JobResponse or a non-empty list of them, got {type(bad).__name__}")
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not (math.isfinite(days) and days > 0):
        raise ValueError(f"days must be a finite number > 0, got {days!r}")
    if reroute not in REROUTE:
        raise ValueError(f"reroute must be one of {', '.join(REROUTE)}, got {reroute!r}")
    if reroute_below is not None and reroute != "around":
        raise ValueError(f"reroute_below ({reroute_below!r}) is the threshold of reroute='around'; with "
                         f"reroute={reroute!r} no cable is drained: leave it out or route around")
    reroute_below = 1.0 if reroute_below is None else reroute_below
    seed = _checks.integer("seed", seed, minimum=0)        # before the healthy step is solved; numpy's own
    fabric_seed = _checks.integer("fabric_seed", fabric_seed, minimum=0)    # message would name neither
    if isinstance(reroute_below, bool) or not isinstance(reroute_below, (int, float)) \
            or not (0 < reroute_below <= 1):           # checked here, not only once a degraded fabric is met
        raise ValueError(f"reroute_below must be in (0, 1] (a fraction of a cable's rate), got {reroute_below!r}")
    comps = default_components() if components is None else dict(components)
    for kind, c in comps.items():
        if not isinstance(c, Component):
            raise TypeError(f"components[{kind!r}] must be a Component, got {type(c).__name__}")
    ranks = workload.get("ranks") if isinstance(workload, dict) else None
    units = job_units(graph, ranks)
    if dp is not None and not any(x.shrink for x in responses):
        raise ValueError("dp sizes the replicas a failure stops when the job shrinks; no response "
                         "shrinks (JobResponse(shrink=True)): leave dp out")
    if dp is not None:      # a replica of GPUs per data-parallel rank, each as large
        dp = _checks.integer("dp", dp, maximum=units["gpu"])
        if units["gpu"] % dp:
            raise ValueError(f"dp must divide the job's {units['gpu']} GPUs (each replica as many), got {dp}")
    healthy = healthy_step(graph, workload)
    if dp is not None and healthy.get("dp") is not None:     # a training workload knows its replicas
        if dp != healthy["dp"]:
            raise ValueError(f"dp ({dp}) is not the training workload's own data-parallel degree "
                             f"({healthy['dp']}): leave dp out, the layout places its replicas")
        dp = None                                            # its layout's replicas, not rank blocks
    interrupts, hardware, processes, degrades, stragglers = {}, {}, [], [], []
    for kind, c in comps.items():
        rate = _job_rate(c, units)
        if c.effect == "interrupt":
            interrupts[kind] = rate
            hardware[kind] = c.hardware
    for kind, c in comps.items():
        if c.effect == "degrade":
            _job_rate(c, units)
            processes.append(Process(kind, _job_rate(c, units), c.duration))
            degrades.append((c.links, c.factor))
    for kind, c in comps.items():
        if c.effect == "straggler":
            processes.append(Process(kind, _job_rate(c, units), c.duration))
            stragglers.append(c.factor)
    compute = healthy["compute_time"]
    if compute is None:                  # a callable that does not say how much of its step is compute
        slow = [k for k, c in comps.items() if c.effect == "straggler" and c.rate > 0]
        if slow:
            raise ValueError(f"straggler components ({', '.join(map(repr, slow))}) slow the step's compute, but "
                             "the workload callable does not say how many of its step's seconds are compute: give "
                             "it a compute_time attribute (seconds per step, e.g. f.compute_time = 1.0), or use a "
                             "dict workload with 'compute'")
        compute = 0.0
    solved: list = []
    known: dict = {}                  # state -> (step time, status, message), shared by the responses
    n_deg = len(degrades)

    def state_rate(states):
        states = np.asarray(states, dtype=np.int64)
        rows = [tuple(int(x) for x in row) for row in states]
        missing = [i for i, row in enumerate(rows) if row not in known]
        st = None
        if missing:
            st = state_step_times(graph, workload, degrades, stragglers, states[missing],
                                  compute_time=compute, seed=fabric_seed,
                                  healthy_time=healthy["step_time"], healthy_result=healthy.get("result"),
                                  reroute=reroute, reroute_below=reroute_below)
            for k, i in enumerate(missing):
                known[rows[i]] = (float(st.step_time[k]), st.status[k], st.message[k])
        if len(missing) == len(rows):
            solved.append(st)            # every state new (the first response): its own solve, as it was
        else:
            prior = solved[-1] if solved else None
            fabrics = {row[:n_deg] for row in rows if any(row[:n_deg])}
            merged = StateTimes(states, [known[r][0] for r in rows], [known[r][1] for r in rows],
                                [known[r][2] for r in rows], fabrics=len(fabrics),
                                solved=(prior.solved if prior else 0) + (st.solved if st else 0))
            merged.rerouted = (prior.rerouted if prior else 0) + (st.rerouted if st else 0)
            solved.append(merged)
        times = np.array([known[r][0] for r in rows])
        with np.errstate(divide="ignore"):
            return np.where(np.isfinite(times), healthy["step_time"] / times, 0.0)

    dp_used = dp if dp is not None else healthy.get("dp")
    replicas_out = None
    if any(x.shrink for x in responses) and dp_used:
        # what one failure stops: every replica with a GPU on the failed part (a host's 8 GPUs
        # are 8 replicas at one GPU a replica); a replica is the training layout's DP index,
        # or for dp= consecutive blocks of gpus / dp of the job's ranks
        job = list(range(units["gpu"])) if ranks is None else [int(x) for x in ranks]
        replica_of = healthy.get("replicas") if dp is None else \
            {rank: i // (len(job) // dp) for i, rank in enumerate(job)}
        per_unit = replicas_per_unit(graph, replica_of)
        replicas_out = {kind: per_unit.get(c.unit, 1) for kind, c in comps.items() if c.effect == "interrupt"}
    auto = isinstance(intervals, str)
    if auto and intervals != "auto":
        raise ValueError(f"intervals must be a list of seconds or 'auto', got {intervals!r}")
    total = sum(interrupts.values())
    mtbf = 1.0 / total if total > 0 else math.inf
    out = []
    _at_least_a_step(healthy["step_time"], days, responses, interrupts, None if auto else intervals)
    for resp in responses:
        grid = intervals
        if auto:
            grid = _auto_grid(_interval(resp, interrupts, days), healthy["step_time"])
        before = len(solved)
        runs = simulate_goodput(interrupts, resp, horizon=float(days) * _DAY, trajectories=trajectories, seed=seed,
                                processes=processes, state_rate=state_rate, hardware=hardware, dp=dp_used,
                                replicas_out=replicas_out,
                                intervals=None if grid is None else [_interval(resp, interrupts, days)] + list(grid))
        run = runs if grid is None else runs[0]
        curve = [] if grid is None else [(r.interval, float(r.useful_fraction.mean())) for r in runs[1:]]
        young = young_interval(resp.checkpoint_cost, mtbf) if resp.checkpoint_cost > 0 and total > 0 else math.inf
        daly = daly_interval(resp.checkpoint_cost, mtbf) if resp.checkpoint_cost > 0 and total > 0 else math.inf
        daly_frac = daly_useful_fraction(run.interval, resp.checkpoint_cost, _downtime(resp, interrupts, hardware),
                                         mtbf) if total > 0 else \
            _failure_free_fraction(run.interval, resp.checkpoint_cost, float(days) * _DAY)
        states = solved[before] if len(solved) > before else StateTimes([], [], [], [])
        out.append(GoodputResult(run=run, healthy_step_time=healthy["step_time"],
                                 tokens_per_step=float(healthy["tokens"]), components=comps, states=states, mtbf=mtbf,
                                 young_interval=young, daly_interval=daly, daly_fraction=daly_frac, curve=curve,
                                 healthy_result=healthy.get("result")))
    return out if many else out[0]


def _failure_free_fraction(interval: float, checkpoint_cost: float, horizon: float) -> float:
    """Useful fraction of a run of ``horizon`` s that nothing interrupts, checkpointing ``C`` s
    after every ``interval`` s of computing: ``1 - floor(H / (tau + C)) C / H``, the
    checkpoints it completes (the work after the last one the run's end keeps, as the Monte
    Carlo counts it). No checkpoint where the interval is the whole run: 1.0. Daly's form
    with no failures (``M`` infinite) is its long-run limit ``tau / (tau + C)``, which also
    charged the checkpoint a run of one interval never writes.

    >>> _failure_free_fraction(86400.0, 30.0, 86400.0), round(_failure_free_fraction(600.0, 30.0, 86400.0), 6)
    (1.0, 0.952431)
    """
    return 1.0 - math.floor(horizon / (interval + checkpoint_cost)) * checkpoint_cost / horizon


def _downtime(response, interrupts, hardware):
    """The mean downtime after an interruption (s), Daly's ``R``: the restart, plus (without
    spares, not shrinking) the repair wait times the share of interruptions that wait for it
    (the hardware ones)."""
    if response.spares or response.shrink:
        return response.restart_time
    total = sum(interrupts.values())
    waits = sum(rate for kind, rate in interrupts.items() if hardware.get(kind, True))
    return response.restart_time + waits / total * response.repair_time


def _at_least_a_step(step, days, responses, interrupts, intervals) -> None:
    """Refuse a run or a checkpoint interval shorter than one healthy step (adv25 F5): the
    trajectories count work as a fluid, but a job checkpoints at step boundaries (Megatron's
    ``--save-interval`` counts iterations) and a run shorter than a step completes none; a 1e12 s
    step against a 3,167 h MTBF came out 99.74 % useful."""
    if not (step > 0 and math.isfinite(step)):
        return
    if float(days) * _DAY < step:
        raise ValueError(f"days: the run ({float(days) * _DAY:.6g} s) is shorter than one healthy step "
                         f"({step:.6g} s): no step completes")
    for resp in responses:
        tau = _interval(resp, interrupts, days)
        if tau < step:
            given = resp.checkpoint_interval is not None
            what = "checkpoint_interval" if given else "the checkpoint interval (Daly's optimum)"
            raise ValueError(f"{what} "
                             f"{tau:.6g} s is shorter than one healthy step ({step:.6g} s): a job checkpoints at step "
                             "boundaries" + ("" if given else "; the step is longer than the failures allow a "
                                             "checkpoint interval to be: give checkpoint_interval >= one step"))
    short = [x for x in (intervals or ()) if float(x) < step]
    if short:
        raise ValueError(f"intervals: {short[0]:.6g} s is shorter than one healthy step ({step:.6g} s): a job "
                         "checkpoints at step boundaries")


def _auto_grid(centre: float, step: float) -> list:
    """``intervals="auto"``'s checkpoint intervals (s): 9 from a quarter of ``centre`` (Daly's)
    to four times it, evenly spaced in log, each rounded to a whole number of healthy steps of
    ``step`` s (a job checkpoints at step boundaries: Megatron's ``--save-interval`` counts
    iterations), none below one step (review25 F3), each once (newuser25: 26,136 and 36,962 s
    with 20,000 s steps, intervals no job takes).

    >>> _auto_grid(100.0, 1.0)[:3], _auto_grid(100.0, 30.0)
    ([25.0, 35.0, 50.0], [30.0, 60.0, 90.0, 150.0, 210.0, 270.0, 390.0])
    """
    if not (step > 0 and math.isfinite(step)):
        return [float(x) for x in np.geomspace(centre / 4.0, centre * 4.0, 9)]
    whole = (max(1.0, round(float(x) / step)) * step for x in np.geomspace(centre / 4.0, centre * 4.0, 9))
    return sorted({x for x in whole if x >= step})


def _interval(response, interrupts, days):
    """The interval the run uses: the response's, else Daly's, else the whole run."""
    total = sum(interrupts.values())
    if response.checkpoint_interval is not None:
        return response.checkpoint_interval
    if total > 0 and response.checkpoint_cost > 0:
        return daly_interval(response.checkpoint_cost, 1.0 / total)
    return float(days) * _DAY
