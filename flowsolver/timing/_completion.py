"""Flow completion times under max-min sharing, event by event: one engine.

Between two events the rates are the max-min fair allocation of the flows running; an event
is a flow finishing, which releases its bandwidth to the rest (fluid processor sharing over
the network), or a step starting. :func:`completion_times`: every flow starts at time 0
(the transfer-time model of a collective step: the step ends when its last flow does);
:func:`step_times`: steps of flows, each released by another step after a delay (several
collectives, each a sequence of steps and latencies, on one fabric). Both run on the same
event loop.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .. import _checks
from .._status import Status
from .._tolerance import RTOL
from ..routing import MergedRouting, RoutingMatrix
from ._events import _check_groups, _Run

__all__ = ["completion_times", "Completion", "step_times", "StepTimes", "RTOL", "RTOL_MAX"]

#: the largest relative tolerance accepted: flows within ``rtol`` of an event finish at it,
#: so the completion times move by up to that fraction (1 % is the most a tolerance, not a
#: different answer, can be)
RTOL_MAX = 1e-2


def _check_run(rtol, max_events, **flags) -> int | None:
    """ValueError naming ``rtol`` (a number in (0, RTOL_MAX)), ``max_events`` (None or an
    integer >= 1) or a flag that is not a bool; the checked ``max_events``."""
    ok = isinstance(rtol, numbers.Real) and not isinstance(rtol, (bool, np.bool_)) and \
        math.isfinite(float(rtol)) and 0 < rtol < RTOL_MAX
    if not ok:
        raise ValueError(f"rtol must be a number in (0, {RTOL_MAX:g}) (relative tolerance of an event: flows that "
                         f"close to it finish at it), got {_checks._plain(rtol)!r}")
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    return None if max_events is None else _checks.integer("max_events", max_events)



@dataclass(frozen=True)
class Completion:
    """Result of :func:`completion_times` (leading batch axis when the input had one).

    Attributes
    ----------
    finish : ndarray (flows,)
        Completion time of each flow, seconds (``inf`` for a flow that never gets bandwidth).
    makespan : float or ndarray
        The last completion time, seconds: ``inf`` where a flow stalled (it never finishes),
        ``nan`` where ``max_events`` stopped the run before every flow finished or stalled (the
        time is then unknown).
    events : int or ndarray
        Re-solves (rate changes) taken.
    stalled : ndarray of bool (flows,)
        Flows with bytes left and rate 0 (their links failed).
    unfinished : ndarray of bool (flows,)
        Flows still moving bytes when ``max_events`` stopped the run (``finish`` is ``inf``).
    status : int or ndarray
        ``Status.OK`` (0); ``Status.NOT_CONVERGED`` (1): ``max_events`` stopped the run with
        unfinished flows; ``Status.STALLED`` (3): a flow never gets bandwidth (its links failed);
        in a batch, a scenario whose solve the solver could not answer reports that solve's
        status (``UNBOUNDED``, ``ILL_CONDITIONED``), with ``finish`` and ``makespan`` NaN.
    initial : Allocation or None
        The max-min allocation at time 0, every flow with bytes to send running (the first
        event's rates, utilisation and bottlenecks); None when no flow had bytes.
    solves : int
        Max-min solves taken: at most ``events``, fewer where the flows that finished at an
        event carried nothing over any running flow's bottleneck link (the rates are then
        unchanged and exactly known without a solve).
    phases : tuple or None
        ``keep_phases=True``: per event (flows running, their Allocation with the others
        capped at 0, each group's step to its next event (s), flows finishing at it), for
        derivatives; None where over ``_events.KEEP_PHASES_ENTRIES`` entries; ``()`` when not asked.
    """

    finish: np.ndarray
    makespan: np.ndarray
    events: np.ndarray
    stalled: np.ndarray
    unfinished: np.ndarray
    status: np.ndarray
    initial: object = None
    solves: int = 0
    phases: tuple = ()

    @property
    def ok(self):
        """True where every flow finished within ``max_events`` (a stalled flow: ``Status.STALLED``)."""
        return self.status == Status.OK


def completion_times(routing, sizes=None, capacity=None, *, weights=None, demands=None,
                     dtype=None, max_events: int | None = None, rtol: float = RTOL,
                     groups=None, disjoint_groups: bool = False, keep_phases: bool = False) -> Completion:
    """Completion time of every flow when all start at 0 and share links max-min fairly,
    rates re-solved each time a flow finishes.

    Parameters
    ----------
    routing : RoutingMatrix or scipy.sparse (links x flows)
    sizes : array (flows,) or (batch, flows), optional
        Bytes per flow; default the RoutingMatrix's flow sizes.
    capacity, weights, demands, dtype
        As for :func:`~flowsolver.max_min_fair` (bytes/s).
    max_events : int >= 1, optional
        Bound on the re-solves (default: number of flows + 1, always enough: every event
        finishes a flow). A run it cuts short reports ``status`` 1 and its unfinished flows.
    rtol : float in (0, 0.01)
        Relative tolerance (default :data:`RTOL`, 1e-9): a flow whose time to finish is
        within ``rtol`` of the group's next event, or whose bytes left are within ``rtol`` of its size, finishes at that
        event (relative to the quantities, so the same in any unit).
    groups : array of int (flows,), optional
        Independent problems solved together: flows of different groups must share no link
        (checked). Each group keeps its own clock, so one solve per event advances every
        group to its own next event: ``events`` is the largest count of any group. This is
        how many collective steps are timed in one call.
    disjoint_groups : bool
        The caller guarantees that ``groups`` share no link (a block built by
        ``RoutingMatrix.stack(..., separate_links=True)``), so the check is skipped.
    keep_phases : bool
        Keep every event's allocation in ``phases`` (one scenario).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0, 1.0]])          # three flows on one link of 1 byte/s
    >>> c = completion_times(A, sizes=[1.0, 2.0, 3.0], capacity=[1.0])
    >>> [round(float(t), 9) for t in c.finish]        # 3*1, then 3 + 2*1, then 5 + 1
    [3.0, 5.0, 6.0]
    >>> A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # two independent links
    >>> c = completion_times(A, sizes=[1.0, 2.0, 4.0], capacity=[1.0, 1.0], groups=[0, 0, 1])
    >>> [round(float(t), 9) for t in c.finish], int(c.events)
    ([2.0, 3.0, 4.0], 2)
    """
    max_events = _check_run(rtol, max_events, disjoint_groups=disjoint_groups, keep_phases=keep_phases)
    rm, sizes = _routing_and_sizes(routing, sizes)
    n = rm.n_flows
    cap = rm.capacity if capacity is None else np.asarray(capacity, dtype=np.float64)
    base = rm.demands if demands is None else np.asarray(demands, dtype=np.float64)
    shapes = [a.shape[0] for a in (sizes, cap, base) if a.ndim == 2]
    if weights is not None and np.ndim(weights) == 2:
        shapes.append(np.shape(weights)[0])
    if len(set(shapes)) > 1:
        raise ValueError(f"batched inputs disagree on the batch size: {sorted(set(shapes))}")
    batch = shapes[0] if shapes else None
    group, n_groups = _check_groups(rm, groups, check=not disjoint_groups)
    run = _Run([rm], np.broadcast_to(sizes, (batch or 1, n)).copy(), group, n_groups, np.array([-1]),
               np.zeros(1), batched=batch is not None)
    if keep_phases and batch is not None:
        raise ValueError("keep_phases: one scenario only (no leading batch axis)")
    run.phases = [] if keep_phases else None
    run.simulate(lambda active: run.rates_of_one(cap, weights, base, dtype, active),
                 n + 1 if max_events is None else int(max_events), rtol)
    finish, stalled, unfinished, status = run.finish, run.stalled, ~run.done, run.status
    finite = np.where(np.isfinite(finish), finish, -np.inf)
    makespan = np.where(unfinished.any(axis=1), np.nan, np.maximum(finite.max(axis=1, initial=-np.inf), 0.0))
    # a flow that never finishes: the whole never does (step_times' rule); a stall cut short stays NOT_CONVERGED
    never = stalled.any(axis=1) & (status == Status.OK)
    makespan = np.where(never | (status == Status.OVERFLOW), np.inf, makespan)
    status = np.where(never, Status.STALLED, status).astype(np.int32)
    failed = run.failed != Status.OK           # a solve's status for the scenario: no times
    if failed.any():
        status = np.where(failed, run.failed, status).astype(np.int32)
        makespan = np.where(failed, np.nan, makespan)
        finish = np.where(failed[:, None], np.nan, finish)
        unfinished = unfinished | failed[:, None]
    events = run.events.max(axis=1)
    if batch is None:
        return Completion(finish=finish[0], makespan=makespan[0], events=events[0], stalled=stalled[0],
                          unfinished=unfinished[0], status=status[0], initial=run.initial, solves=run.solves,
                          phases=None if run.phases is False else tuple(run.phases or ()))
    return Completion(finish=finish, makespan=makespan, events=events, stalled=stalled, unfinished=unfinished,
                      status=status, initial=run.initial, solves=run.solves)


@dataclass(frozen=True)
class StepTimes:
    """Result of :func:`step_times`.

    Attributes
    ----------
    start, finish : ndarray (steps,)
        When each step's flows started and when its last flow finished, seconds (``inf``
        for a step that never started or never finished).
    flow_finish : ndarray (flows,)
        Completion time of every flow, the steps' flows in order (``inf`` where none).
    stalled : ndarray of bool (flows,)
        Flows with bytes left and rate 0 (their links failed): their step, and the steps
        after it, never finish.
    events : int
        Re-solves taken.
    status : Status
        ``Status.OK``; ``Status.STALLED`` when stalled flows left steps unfinished;
        ``Status.NOT_CONVERGED`` when ``max_events`` stopped the run first.
    """

    start: np.ndarray
    finish: np.ndarray
    flow_finish: np.ndarray
    stalled: np.ndarray
    events: int
    status: Status


def step_times(steps, capacity=None, *, sizes=None, after=None, delay=None, max_events: int | None = None,
               rtol: float = RTOL) -> StepTimes:
    """Completion times of steps that share a fabric, each released by another: step ``s``
    starts ``delay[s]`` seconds after step ``after[s]`` finished (``-1``: after time 0),
    all its flows at once; between events (a flow finishing, a delay elapsing) the flows of
    every running step share the links max-min fairly. :func:`completion_times` is the case
    of one step that starts at 0. This is how collectives run side by side on one cluster
    (each a sequence of steps, each step after the previous one and its latency).

    Parameters
    ----------
    steps : sequence of RoutingMatrix
        The flows of each step, routed on one fabric (same links). A matrix may appear
        several times (a repeated step).
    capacity : array (links,), optional
        Bytes/s; default the first matrix's capacities.
    sizes : sequence of arrays (flows of the step,), optional
        Bytes per flow of each step; default the matrices' flow sizes (``Flows``).
    after : sequence of int (steps,), optional
        The step each waits for (an earlier one), ``-1`` for none (default: none).
    delay : sequence of float (steps,), optional
        Seconds between a step's release and its start (default 0).
    max_events : int >= 1, optional
        Bound on the re-solves (default flows + steps, always enough: every event finishes
        a flow or starts a step); a run it cuts short reports ``Status.NOT_CONVERGED``.
    rtol : float in (0, 0.01)
        As for :func:`completion_times`.

    Examples
    --------
    >>> one = RoutingMatrix.from_scipy([[1.0]], capacity=[1.0])     # one flow on a link of 1 B/s
    >>> t = step_times([one, one, one], sizes=[[2.0]] * 3, after=[-1, 0, -1], delay=[0.0, 1.0, 0.0])
    >>> t.finish.tolist()          # steps 0 and 2 share the link (2 bytes each at 1/2), step 1 after 1 s alone
    [4.0, 7.0, 4.0]
    """
    max_events = _check_run(rtol, max_events)
    steps = list(steps)
    if not steps or not all(isinstance(m, RoutingMatrix) and m.n_flows for m in steps):
        raise ValueError("steps must be a non-empty list of RoutingMatrix objects, each with flows")
    if sizes is None:
        if any(m.flows is None for m in steps):
            raise ValueError("sizes is required when a step's RoutingMatrix carries no Flows")
        sizes = [m.flows.sizes for m in steps]
    if len(sizes) != len(steps):
        raise ValueError(f"sizes must give one array per step ({len(steps)}), got {len(sizes)}")
    P = len(steps)
    after = np.full(P, -1, dtype=np.int64) if after is None else np.asarray(after, dtype=np.int64)
    delay = np.zeros(P) if delay is None else np.asarray(delay, dtype=np.float64)
    if after.shape != (P,) or ((after >= np.arange(P)) | (after < -1)).any():
        raise ValueError(f"after must give, per step ({P}), an earlier step or -1")
    if delay.shape != (P,) or not (np.isfinite(delay) & (delay >= 0)).all():
        raise ValueError(f"delay must give, per step ({P}), a finite number of seconds >= 0")
    sizes = _checked_sizes(np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in sizes]),
                           sum(m.n_flows for m in steps))
    cap = steps[0].capacity if capacity is None else np.asarray(capacity, dtype=np.float64)
    run = _Run(steps, sizes[None, :].copy(), np.zeros(len(sizes), dtype=np.int64), 1, after, delay, batched=False)
    run.simulate(lambda active: run.rates_of_many(cap, active),
                 len(sizes) + P if max_events is None else int(max_events), rtol)
    status = Status(int(run.status[0]))
    if status == Status.OK and run.stalled.any():
        status = Status.STALLED
    return StepTimes(start=run.start[0], finish=run.part_finish[0], flow_finish=run.finish[0],
                     stalled=run.stalled[0], events=int(run.events.max()), status=status)


def _routing_and_sizes(routing, sizes):
    """The routing as a RoutingMatrix and its flows' checked sizes (bytes; default the
    matrix's ``Flows``)."""
    if isinstance(routing, MergedRouting):          # a class's rate is its flows' total: no one flow's finish
        raise TypeError("routing: completion times need one column per flow; pass the MergedRouting's original "
                        "RoutingMatrix, not the merged one")
    rm = routing if isinstance(routing, RoutingMatrix) else RoutingMatrix.from_scipy(routing)
    if sizes is None:
        if rm.flows is None:
            raise ValueError("sizes is required when routing carries no Flows")
        sizes = rm.flows.sizes
    return rm, _checked_sizes(sizes, rm.n_flows)


def _checked_sizes(sizes, n):
    sizes = np.asarray(sizes, dtype=np.float64)
    if sizes.shape[-1] != n or sizes.ndim not in (1, 2):
        raise ValueError(f"sizes must have shape ({n},) or (batch, {n}), got {sizes.shape}")
    if (bad := ~np.isfinite(sizes) | (sizes < 0)).any():
        idx = np.argwhere(bad)[0]
        where = f"[{idx[0]}]" if len(idx) == 1 else f"[scenario {idx[0]}, {idx[1]}]"
        raise ValueError(f"sizes{where} must be a finite number >= 0 bytes, got {sizes[tuple(idx)].item()!r}")
    return sizes
