"""Checkpointing: the job's response to failures, Young's and Daly's intervals, Daly's expected
useful fraction, and the time a checkpoint takes to write through the storage tier.

With failures a Poisson process of mean time between failures ``M`` (s), a checkpoint every
``tau`` seconds of work costing ``C`` seconds, and a restart of ``R`` seconds after every
failure (a failure during a restart starts it again), the expected wall time per ``tau`` of
saved work is ``M exp(R / M) (exp((tau + C) / M) - 1)`` (Daly 2006, "A higher order estimate of
the optimum checkpoint interval for restart dumps", Future Generation Computer Systems 22(3),
eq. 8 with the restart included). Its minimum is near Young's ``sqrt(2 C M)`` (Young 1974, "A
first order approximation to the optimum checkpoint interval", CACM 17(9)) and Daly's
higher-order ``sqrt(2 C M) (1 + sqrt(C / (2M)) / 3 + C / (18 M)) - C`` for ``C < 2M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _checks

__all__ = ["JobResponse", "young_interval", "daly_interval", "daly_useful_fraction", "checkpoint_write_time"]


def _positive(name, value, *, allow_zero=False, allow_none=False):
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(f"{name} must be a finite number of seconds {'>= 0' if allow_zero else '> 0'}, "
                         f"got {value!r}")
    return float(value)


@dataclass(frozen=True)
class JobResponse:
    """How a job responds to failures.

    Parameters
    ----------
    checkpoint_cost : float
        Seconds the job stops to write one checkpoint (>= 0; see :func:`checkpoint_write_time`).
    restart_time : float
        Seconds from a failure to computing again: detection, rescheduling onto healthy
        nodes, loading the checkpoint (>= 0). A failure during a restart starts it again.
    checkpoint_interval : float, optional
        Seconds of work between checkpoints (> 0); default Daly's optimum for the job's
        interruption rate (:func:`daly_interval`).
    spares : bool
        Hot spares replace a failed node at once (the restart is the whole downtime). Without
        them a hardware failure either waits ``repair_time`` (``shrink=False``) or restarts
        without the data-parallel replicas on the failed part until the repair (``shrink=True``). A failure
        during a repair wait does not end it: the job resumes once every repair under way is
        done and a restart has completed after the last failure.
    shrink : bool
        Shrink data parallelism instead of waiting (``spares=False`` only).
    repair_time : float
        Seconds to repair or replace a failed node when there are no spares.

    >>> JobResponse(checkpoint_cost=30.0, restart_time=600.0).spares
    True
    """

    checkpoint_cost: float
    restart_time: float
    checkpoint_interval: float | None = None
    spares: bool = True
    shrink: bool = False
    repair_time: float = 0.0

    def __post_init__(self):
        _positive("checkpoint_cost", self.checkpoint_cost, allow_zero=True)
        _positive("restart_time", self.restart_time, allow_zero=True)
        _positive("checkpoint_interval", self.checkpoint_interval, allow_none=True)
        _positive("repair_time", self.repair_time, allow_zero=True)
        if not isinstance(self.spares, bool) or not isinstance(self.shrink, bool):
            raise ValueError("spares and shrink must be True or False")
        if self.shrink and self.spares:
            raise ValueError("shrink=True is the response without spares: pass spares=False with it")
        if self.spares and self.repair_time > 0:
            raise ValueError("repair_time is the wait without spares; with spares=True (hot spares replace a failed "
                             "node at once) it would be ignored: pass spares=False with it, or leave it 0")
        if not self.spares and self.repair_time <= 0:
            raise ValueError("spares=False needs repair_time > 0 (seconds until a failed node is back)")


def young_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young's checkpoint interval ``sqrt(2 C M)`` (s of work between checkpoints).

    >>> round(young_interval(30.0, 3 * 3600.0), 1)
    805.0
    """
    c = _positive("checkpoint_cost", checkpoint_cost)
    m = _positive("mtbf", mtbf)
    return math.sqrt(2.0 * c * m)


def daly_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Daly's higher-order optimum ``sqrt(2CM) (1 + sqrt(C/2M)/3 + C/18M) - C`` for ``C < 2M``,
    else ``M`` (s of work between checkpoints).

    >>> round(daly_interval(30.0, 3 * 3600.0), 1)
    785.1
    """
    c = _positive("checkpoint_cost", checkpoint_cost)
    m = _positive("mtbf", mtbf)
    if c >= 2.0 * m:
        return m
    x = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - c


def daly_useful_fraction(interval: float, checkpoint_cost: float, restart_time: float, mtbf: float) -> float:
    """Expected useful fraction of wall time, ``tau / (M e^(R/M) (e^((tau+C)/M) - 1))``, for
    exponential failures of mean ``mtbf`` (Daly 2006; see the module docstring).

    >>> round(daly_useful_fraction(800.0, 30.0, 0.0, 1e12), 4)      # no failures: tau / (tau + C)
    0.9639
    >>> daly_useful_fraction(800.0, 30.0, 1e12, 3600.0)             # a restart of 3e8 MTBFs: nothing useful
    0.0
    """
    tau = _positive("interval", interval)
    c = _positive("checkpoint_cost", checkpoint_cost, allow_zero=True)
    r = _positive("restart_time", restart_time, allow_zero=True)
    m = _positive("mtbf", mtbf)
    x = (tau + c) / m
    # in logarithms: e^(R/M) and e^((tau+C)/M) overflow a float past ~709 (a restart or a
    # checkpoint hundreds of MTBFs long), where the fraction is below the smallest double: 0
    log_expm1 = math.log(math.expm1(x)) if x < 700.0 else x + math.log1p(-math.exp(-x))
    return math.exp(math.log(tau / m) - r / m - log_expm1)


def checkpoint_write_time(graph, bytes_per_gpu: float, *, ranks=None, policy: str = "ecmp") -> float:
    """Seconds to write a checkpoint of ``bytes_per_gpu`` from every GPU of the job to the
    graph's storage nodes (:func:`topologies.add_storage`), all writes at once sharing the
    links max-min fairly (:func:`flowsolver.completion_times`).

    Front-end storage: each server writes its GPUs' bytes from host memory (``s{i}/cpu0``)
    through its front-end NIC; compute-fabric storage: each GPU writes through its compute
    NIC (GPUDirect Storage). Each writer spreads its bytes evenly over the storage nodes.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(4)
    >>> _ = tp.add_storage(g, 2, link="eth_400g")
    >>> round(checkpoint_write_time(g, 1e9), 3)   # 32 GB through 2 storage ports of 50 GB/s
    0.32
    """
    import topologies as tp

    from ..routing import route
    from ..timing import completion_times
    from ..traffic import Flows

    size = _checks.positive_number("bytes_per_gpu", bytes_per_gpu, "bytes")
    stores = sorted(n for n, d in graph.nodes(data=True) if d.get("kind") == "storage")
    if not stores:
        raise ValueError("the graph has no storage nodes: add them with topologies.add_storage(graph, ...)")
    gpus = tp.gpus(graph)
    chosen = range(len(gpus)) if ranks is None else _checks.distinct_ranks(graph, ranks, nodes=gpus)
    frontend = any(d.get("network") == "frontend" and d.get("kind") == "storage" for _, d in graph.nodes(data=True))
    writers: dict = {}
    for r in chosen:
        if frontend:
            key = f"s{graph.nodes[gpus[r]]['server']}/cpu0"
        else:
            key = r
        writers[key] = writers.get(key, 0.0) + size
    src, dst, sizes = [], [], []
    for w, total in writers.items():
        for s in stores:
            src.append(w)
            dst.append(s)
            sizes.append(total / len(stores))
    rm = route(graph, Flows(src, dst, sizes), policy)
    done = completion_times(rm, np.asarray(sizes))
    if bool(np.any(done.stalled)):
        raise ValueError("a checkpoint write cannot reach the storage nodes (its path has failed links)")
    return float(done.makespan)
