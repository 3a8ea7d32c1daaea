"""Flow completion times under max-min sharing, event by event.

All flows start at time 0. Between two events the rates are the max-min fair allocation of
the flows still running; an event is a flow finishing, which releases its bandwidth to the
rest (fluid processor sharing over the network). This is the transfer-time model of a
collective step: the step ends when its last flow does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .routing import RoutingMatrix
from ._status import Status
from .solver import max_min_fair

__all__ = ["completion_times", "Completion"]


@dataclass(frozen=True)
class Completion:
    """Result of :func:`completion_times` (leading batch axis when the input had one).

    Attributes
    ----------
    finish : ndarray (flows,)
        Completion time of each flow, seconds (``inf`` for a flow that never gets bandwidth).
    makespan : float or ndarray
        The last finite completion time, seconds; ``nan`` where ``max_events`` stopped the
        run before every flow finished or stalled (the time is then unknown).
    events : int or ndarray
        Re-solves (rate changes) taken.
    stalled : ndarray of bool (flows,)
        Flows with bytes left and rate 0 (their links failed).
    unfinished : ndarray of bool (flows,)
        Flows still moving bytes when ``max_events`` stopped the run (``finish`` is ``inf``).
    status : int or ndarray
        0 ok, 1 stopped by ``max_events`` with unfinished flows (``flowsolver.STATUS``).
    """

    finish: np.ndarray
    makespan: np.ndarray
    events: np.ndarray
    stalled: np.ndarray
    unfinished: np.ndarray
    status: np.ndarray

    @property
    def ok(self):
        """True where every flow finished or stalled within ``max_events``."""
        return self.status == Status.OK


def completion_times(routing, sizes=None, capacity=None, *, weights=None, demands=None,
                     dtype=None, max_events: int | None = None, rtol: float = 1e-9,
                     groups=None) -> Completion:
    """Completion time of every flow when all start at 0 and share links max-min fairly,
    rates re-solved each time a flow finishes.

    Parameters
    ----------
    routing : RoutingMatrix or scipy.sparse (links x flows)
    sizes : array (flows,) or (batch, flows), optional
        Bytes per flow; default the RoutingMatrix's flow sizes.
    capacity, weights, demands, dtype
        As for :func:`~flowsolver.max_min_fair` (bytes/s).
    max_events : int, optional
        Bound on the re-solves (default: number of flows + 1, always enough: every event
        finishes a flow). A run it cuts short reports ``status`` 1 and its unfinished flows.
    rtol : float
        Relative tolerance: a flow whose time to finish is within ``rtol`` of the group's
        next event, or whose bytes left are within ``rtol`` of its size, finishes at that
        event (relative to the quantities, so the same in any unit).
    groups : array of int (flows,), optional
        Independent problems solved together: flows of different groups must share no link
        (checked). Each group keeps its own clock, so one solve per event advances every
        group to its own next event: ``events`` is the largest count of any group. This is
        how many collective steps are timed in one call.

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
    rm = routing if isinstance(routing, RoutingMatrix) else RoutingMatrix.from_scipy(routing)
    n = rm.n_flows
    if sizes is None:
        if rm.flows is None:
            raise ValueError("sizes is required when routing carries no Flows")
        sizes = rm.flows.size
    sizes = np.asarray(sizes, dtype=np.float64)
    if sizes.shape[-1] != n or sizes.ndim not in (1, 2):
        raise ValueError(f"sizes must have shape ({n},) or (batch, {n}), got {sizes.shape}")
    if (bad := ~np.isfinite(sizes) | (sizes < 0)).any():
        idx = np.argwhere(bad)[0]
        where = f"[{idx[0]}]" if len(idx) == 1 else f"[scenario {idx[0]}, {idx[1]}]"
        raise ValueError(f"sizes{where} must be a finite number >= 0 bytes, got {sizes[tuple(idx)].item()!r}")
    cap = rm.capacity if capacity is None else np.asarray(capacity, dtype=np.float64)
    base = rm.demands if demands is None else np.asarray(demands, dtype=np.float64)
    shapes = [a.shape[0] for a in (sizes, cap, base) if a.ndim == 2]
    if weights is not None and np.ndim(weights) == 2:
        shapes.append(np.shape(weights)[0])
    if len(set(shapes)) > 1:
        raise ValueError(f"batched inputs disagree on the batch size: {sorted(set(shapes))}")
    batch = shapes[0] if shapes else None
    B = batch or 1
    group, n_groups = _check_groups(rm, groups)
    if n_groups > 1:
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(n_groups))
        per_flow = lambda a: a[:, group]  # noqa: E731   (per group -> per flow)
    else:
        per_flow = lambda a: a  # noqa: E731              ((B, 1) broadcasts)
    remaining = np.broadcast_to(sizes, (B, n)).copy()
    scale = remaining.copy()
    base = np.broadcast_to(base, (B, n))
    done = remaining <= 0
    finish = np.where(done, 0.0, np.inf)
    stalled = np.zeros((B, n), dtype=bool)
    clock = np.zeros((B, n_groups))
    events = np.zeros((B, n_groups), dtype=np.int64)
    limit = n + 1 if max_events is None else int(max_events)
    for _ in range(limit):
        if done.all():
            break
        caps = np.where(done, 0.0, base)
        alloc = max_min_fair(rm, cap, weights=weights, demands=caps if batch else caps[0], dtype=dtype)
        rates = np.asarray(alloc.rates, dtype=np.float64).reshape(B, n)
        running = ~done & (rates > 0)
        stuck = ~done & ~running
        with np.errstate(divide="ignore", invalid="ignore"):
            to_go = np.where(running, remaining / np.where(running, rates, 1.0), np.inf)
        # per scenario and group: time to the group's next event
        if n_groups == 1:
            dt = to_go.min(axis=1)[:, None]
            live = ~done.all(axis=1)[:, None]
        else:
            dt = np.minimum.reduceat(to_go[:, order], starts, axis=1)
            live = np.logical_or.reduceat(~done[:, order], starts, axis=1)
        # groups where nothing can move: the rest of their flows are stalled for good
        frozen_out = per_flow(live & ~np.isfinite(dt))
        stalled |= stuck & frozen_out
        done |= stuck & frozen_out
        step = np.where(np.isfinite(dt) & live, dt, 0.0)
        remaining = np.where(running, remaining - rates * per_flow(step), remaining)
        clock += step
        events += live
        newly = running & ((to_go <= per_flow(step) * (1 + rtol)) | (remaining <= rtol * scale))
        finish[newly] = np.broadcast_to(per_flow(clock), (B, n))[newly]
        done |= newly
    unfinished = ~done
    finite = np.where(np.isfinite(finish), finish, -np.inf)
    makespan = np.maximum(finite.max(axis=1, initial=-np.inf), 0.0)
    cut = unfinished.any(axis=1)
    makespan = np.where(cut, np.nan, makespan)
    status = np.where(cut, Status.NOT_CONVERGED, Status.OK).astype(np.int32)
    events = events.max(axis=1)
    if batch is None:
        return Completion(finish=finish[0], makespan=makespan[0], events=events[0], stalled=stalled[0],
                          unfinished=unfinished[0], status=status[0])
    return Completion(finish=finish, makespan=makespan, events=events, stalled=stalled, unfinished=unfinished,
                      status=status)


def _check_groups(rm, groups):
    """Group index per flow (0 ... G-1) and G; raises when two groups share a link."""
    n = rm.n_flows
    if groups is None:
        return np.zeros(n, dtype=np.int64), 1
    groups = np.asarray(groups)
    if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(f"groups must be an integer array of shape ({n},), got {groups.dtype} {groups.shape}")
    uniq, group = np.unique(groups, return_inverse=True)
    # which groups use each segment, then each link (factored: no expansion)
    used = rm.flow_seg >= 0
    seg = rm.flow_seg[used]
    seg_group = np.full(rm.n_segments, -1, dtype=np.int64)
    owner = np.broadcast_to(group[:, None], rm.flow_seg.shape)[used]
    seg_group[seg] = owner
    clash = seg_group[seg] != owner
    owner_entry = np.repeat(seg_group, np.diff(rm.seg_ptr))
    live = owner_entry >= 0
    link_group = np.full(rm.n_links, -1, dtype=np.int64)
    link_group[rm.seg_link[live]] = owner_entry[live]
    if clash.any() or (link_group[rm.seg_link[live]] != owner_entry[live]).any():
        raise ValueError("groups must not share links: flows of different groups cross a common link")
    return group, len(uniq)
