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
        The last finite completion time, seconds.
    events : int or ndarray
        Re-solves (rate changes) taken.
    stalled : ndarray of bool (flows,)
        Flows with bytes left and rate 0 (their links failed).
    """

    finish: np.ndarray
    makespan: np.ndarray
    events: np.ndarray
    stalled: np.ndarray


def completion_times(routing, sizes=None, capacity=None, *, weights=None, demands=None,
                     dtype=None, max_events: int | None = None, rtol: float = 1e-9) -> Completion:
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
        Bound on the re-solves (default: number of flows + 1).
    rtol : float
        Flows within ``rtol`` of their size at an event finish at that event.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0, 1.0]])          # three flows on one link of 1 byte/s
    >>> c = completion_times(A, sizes=[1.0, 2.0, 3.0], capacity=[1.0])
    >>> [round(float(t), 9) for t in c.finish]        # 3*1, then 3 + 2*1, then 5 + 1
    [3.0, 5.0, 6.0]
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
    remaining = np.broadcast_to(sizes, (B, n)).copy()
    scale = np.maximum(remaining, 1.0)
    base = np.broadcast_to(base, (B, n))
    done = remaining <= 0
    finish = np.where(done, 0.0, np.inf)
    stalled = np.zeros((B, n), dtype=bool)
    clock = np.zeros(B)
    events = np.zeros(B, dtype=np.int64)
    limit = n + 1 if max_events is None else int(max_events)
    for _ in range(limit):
        if done.all():
            break
        active = ~done.all(axis=1)
        caps = np.where(done, 0.0, base)
        alloc = max_min_fair(rm, cap, weights=weights, demands=caps if batch else caps[0], dtype=dtype)
        rates = np.asarray(alloc.rates, dtype=np.float64).reshape(B, n)
        running = ~done & (rates > 0)
        stuck = ~done & ~running
        with np.errstate(divide="ignore", invalid="ignore"):
            dt = np.where(running, remaining / np.where(running, rates, 1.0), np.inf).min(axis=1)
        # scenarios where nothing can move: the rest are stalled for good
        frozen_out = active & ~np.isfinite(dt)
        stalled |= stuck & frozen_out[:, None]
        done |= stuck & frozen_out[:, None]
        step = np.where(np.isfinite(dt) & active, dt, 0.0)
        remaining = np.where(running, remaining - rates * step[:, None], remaining)
        clock += step
        events += active
        newly = running & (remaining <= rtol * scale)
        finish[newly] = np.broadcast_to(clock[:, None], (B, n))[newly]
        done |= newly
    finite = np.where(np.isfinite(finish), finish, -np.inf)
    makespan = np.maximum(finite.max(axis=1), 0.0)
    out = Completion(finish=finish, makespan=makespan, events=events, stalled=stalled)
    if batch is None:
        out = Completion(finish=finish[0], makespan=makespan[0], events=events[0], stalled=stalled[0])
    return out
