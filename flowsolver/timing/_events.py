"""The event engine of :mod:`flowsolver.timing`: flows in steps, steps released by other
steps after a delay, groups of flows on their own clocks, a leading batch axis; rates
re-solved at each event (or kept, when they are provably still max-min fair)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._status import Status
from ..routing import RoutingMatrix
from ..solver import max_min_fair, utilization

#: (flows + links) x events kept by ``keep_phases`` at most (~20 bytes each; else none)
KEEP_PHASES_ENTRIES = 1 << 24


def keep_limit() -> int:
    """(flows + links) x events one forward run keeps for its derivatives at most
    (:data:`KEEP_PHASES_ENTRIES`, read at each call): a caller keeping several runs bounds
    them together by it.

    >>> keep_limit() == 1 << 24
    True
    """
    return KEEP_PHASES_ENTRIES


class _Run:
    """The one event engine: flows in steps (``parts``), steps released by other steps
    after a delay, groups of flows on their own clocks, a leading batch axis."""

    def __init__(self, parts, sizes, group, n_groups, after, delay, batched):
        B, n = sizes.shape
        self.parts, self.after, self.batched = parts, after, batched
        self.initial = None                  # the first event's Allocation (rates at time 0)
        self.phases = None                   # every event's (kept when asked)
        self.last = None                     # (active flows, Allocation) of the last solve
        self.solves = 0                      # max-min solves taken
        self.kept_last = False               # the last Allocation is one still_fair kept
        counts = [m.n_flows for m in parts]
        self.counts = counts
        self.first = np.cumsum([0] + counts[:-1])
        self.part_of = np.repeat(np.arange(len(parts)), counts)
        self.group, self.n_groups = group, n_groups
        if n_groups > 1:
            self.order = np.argsort(group, kind="stable")
            self.starts = np.searchsorted(group[self.order], np.arange(n_groups))
        self.part_group = group[self.first] if n else np.zeros(len(parts), dtype=np.int64)
        self.remaining, self.scale = sizes, sizes.copy()
        self.done = sizes <= 0
        self.finish = np.where(self.done, 0.0, np.inf)
        self.stalled = np.zeros((B, n), dtype=bool)
        self.failed = np.zeros(B, dtype=np.int32)    # a scenario's solve's status other than OK (the first)
        # flows with a rate whose time to finish is past float64's range (size / rate overflows):
        # they finish at inf, and their step never ends (Status.OVERFLOW)
        self.overflowed = np.zeros((B, n), dtype=bool)
        self.clock = np.zeros((B, n_groups))
        self.events = np.zeros((B, n_groups), dtype=np.int64)
        self.wait = np.broadcast_to(delay, (B, len(parts))).copy()
        self.started = np.zeros((B, len(parts)), dtype=bool)
        self.ended = np.zeros((B, len(parts)), dtype=bool)
        self.start = np.full((B, len(parts)), np.inf)
        self.part_finish = np.full((B, len(parts)), np.inf)

    def per_flow(self, a):
        """Per group (B, G) -> per flow (B, n)."""
        return a[:, self.group] if self.n_groups > 1 else a

    def group_min(self, a):
        """Per flow (B, n) -> per group (B, G), reduced by min."""
        if self.n_groups == 1:
            return a.min(axis=1, initial=np.inf)[:, None]
        return np.minimum.reduceat(a[:, self.order], self.starts, axis=1)

    def group_any(self, a):
        """Per flow (B, n) -> per group (B, G), reduced by any."""
        if self.n_groups == 1:
            return a.any(axis=1)[:, None]
        return np.logical_or.reduceat(a[:, self.order], self.starts, axis=1)

    def per_part_group(self, a, fill):
        """Per part (B, P) -> per group (B, G), reduced by min (``fill`` where none)."""
        out = np.full((a.shape[0], self.n_groups), fill)
        np.minimum.at(out.T, self.part_group, a.T)
        return out

    def settle(self):
        """End the steps whose flows are all done, start the released ones whose delay is over."""
        while True:
            finished = self.done & ~self.stalled & ~self.overflowed
            all_done = np.logical_and.reduceat(finished, self.first, axis=1) if finished.shape[1] else \
                np.ones(self.started.shape, dtype=bool)
            end = self.started & ~self.ended & all_done
            self.part_finish[end] = np.broadcast_to(self.clock[:, self.part_group], end.shape)[end]
            self.ended |= end
            free = np.where(self.after >= 0, self.ended[:, np.maximum(self.after, 0)], True)
            begin = ~self.started & free & (self.wait <= 0)
            self.start[begin] = np.broadcast_to(self.clock[:, self.part_group], begin.shape)[begin]
            self.started |= begin
            if not (end.any() or begin.any()):
                return free & ~self.started          # released steps still waiting

    def rates_of_one(self, cap, weights, base, dtype, active):
        """Rates (B, n) of the ``active`` flows of the single part: the last ones when they
        are still max-min fair (:meth:`still_fair`), else one solve (batched scenarios
        together), the other flows capped at 0."""
        if (kept := self.still_fair(active, cap)) is not None:
            self.last, self.kept_last = (active.copy(), kept), True
            return np.asarray(kept.rates, dtype=np.float64).reshape(active.shape)
        self.solves += 1
        self.kept_last = False
        demands = np.where(active, base, 0.0)
        cap, weights = self.without_failed(cap, weights)
        # a batch's later solves are read for their rates alone (still_fair and the phases are
        # unbatched): no per-link rows for them (issue 31)
        alloc = max_min_fair(self.parts[0], cap, weights=weights, demands=demands if self.batched else demands[0],
                             dtype=dtype, per_link=not (self.batched and self.initial is not None))
        if self.initial is None:
            self.initial = alloc
        self.last = (active.copy(), alloc)
        rates = np.asarray(alloc.rates, dtype=np.float64).reshape(active.shape)
        bad = np.atleast_1d(np.asarray(alloc.status)) != Status.OK
        if self.batched and bad.any():
            # a scenario its solve could not answer (unbounded, ill-conditioned): no rates, no
            # events, its status reported (an unbounded one finished at 0 with status ok)
            self.failed = np.where(bad & (self.failed == Status.OK), np.asarray(alloc.status), self.failed)
            rates = np.where(bad[:, None], 0.0, rates)
            self.done[bad] = True
        return rates

    def without_failed(self, cap, weights):
        """``cap`` and ``weights`` with the rows of the scenarios an earlier solve failed set to
        1 (their flows are done, demands 0), so each later solve neither fails on them again nor
        warns about them once per event (the first solve's warning names them)."""
        bad = self.failed != Status.OK
        if not (self.batched and bad.any()):
            return cap, weights
        def clean(a):
            if a is None or np.ndim(a) != 2:
                return a
            a = np.array(a, dtype=np.float64)
            a[bad] = 1.0
            return a
        return clean(cap), clean(weights)

    def still_fair(self, active, cap):
        """The last solve's Allocation restricted to the flows ``active`` now, when it is
        still their max-min fair allocation (None otherwise), so that the event needs no
        solve.

        Only finished flows have left since (no flow started), and no finished flow carried
        load on the bottleneck link of a flow still running. Then every running flow still
        crosses a saturated link where no flow has a larger level (the loads elsewhere only
        fell), which is the max-min certificate of :mod:`flowsolver.solver._certificate`;
        the max-min allocation is unique, so these are exactly the rates a solve returns.
        The finished flows are at 0, held by their cap of 0 (bottleneck -1), as a solve
        with their demands at 0 reports them. Unbatched runs only (a batch re-solves every
        scenario together)."""
        if self.last is None or self.batched:
            return None
        before, alloc = self.last
        if (active & ~before).any() or not bool(np.all(alloc.converged)):
            return None
        rates = np.asarray(alloc.rates)
        gone = (before & ~active)[0]
        left = np.flatnonzero(gone & (rates > 0))
        bneck = np.asarray(alloc.bottleneck)
        held = bneck[active[0] & (bneck >= 0)]
        load = np.asarray(alloc.link_load)
        cap = np.asarray(self.parts[0].capacity if cap is None else cap, dtype=np.float64)
        # the links whose load changes (the left flows' links, read over their segments only)
        links, freed = self.parts[0].subset_loads_sparse(left, rates[left]) if len(left) else \
            (np.empty(0, dtype=np.int64), np.empty(0))
        if len(links):
            touched = np.zeros(len(load), dtype=bool)
            touched[links[freed > 0]] = True
            if touched[held].any():
                return None
        load = load.copy()
        load[links] = (load[links] - freed).astype(load.dtype)
        if self.kept_last:         # its utilisation was worked out here: only the changed links move
            util = np.array(alloc.utilization)
            util[links] = utilization(load[links], cap[links])
        else:
            util = utilization(load, cap).astype(alloc.utilization.dtype)
        return replace(alloc, rates=np.where(gone, 0, rates).astype(rates.dtype), link_load=load,
                       utilization=util, bottleneck=np.where(gone, -1, bneck), rounds=np.int32(0))

    def rates_of_many(self, cap, active):
        """Rates (B = 1) of the running steps' flows, their matrices stacked on the shared links."""
        running = np.flatnonzero(self.started[0] & ~self.ended[0])
        flows = np.concatenate([np.arange(self.first[i], self.first[i] + self.counts[i]) for i in running])
        rm = RoutingMatrix.stack([self.parts[i] for i in running])
        alloc = max_min_fair(rm, cap, demands=np.where(active[0, flows], rm.demands, 0.0))
        rates = np.zeros(active.shape)
        rates[0, flows] = np.asarray(alloc.rates, dtype=np.float64)
        return rates

    def simulate(self, rates_of, limit, rtol):
        """Event by event until every step ended or stalled, or ``limit`` events; sets status."""
        cut = True
        for _ in range(limit):
            waiting = self.settle()
            active = self.started[:, self.part_of] & ~self.done
            if not (active.any() or waiting.any()):
                cut = False
                break
            rates = rates_of(active) if active.any() else np.zeros(active.shape)
            running = active & (rates > 0)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                to_go = np.where(running, self.remaining / np.where(running, rates, 1.0), np.inf)
            dt = np.minimum(self.group_min(to_go), self.per_part_group(np.where(waiting, self.wait, np.inf), np.inf))
            live = self.group_any(active) | (self.per_part_group(np.where(waiting, 0.0, 1.0), 1.0) == 0.0)
            # groups where nothing can move: the rest of their flows are stalled for good
            frozen_out = self.per_flow(live & ~np.isfinite(dt))
            stuck = active & ~running & frozen_out
            self.stalled |= stuck
            self.done |= stuck
            # running, but size / rate past float64's range (1e10 bytes at 5e-301 bytes/s): they
            # finish at inf, said as such (the loop ran to max_events and blamed it)
            over = active & running & frozen_out & ~np.isfinite(to_go)
            self.overflowed |= over
            self.done |= over
            step = np.where(np.isfinite(dt) & live, dt, 0.0)
            self.remaining = np.where(running, self.remaining - rates * self.per_flow(step), self.remaining)
            self.wait = np.where(waiting, self.wait - step[:, self.part_group], self.wait)
            with np.errstate(over="ignore"):
                self.clock += step
            # a clock past float64's range (two finite steps of 1e308 s): every flow finishing
            # there finishes at inf
            at = self.per_flow(self.clock)
            self.overflowed |= ~np.isfinite(at) & active
            self.events += live
            newly = running & ((to_go <= self.per_flow(step) * (1 + rtol)) | (self.remaining <= rtol * self.scale))
            self.finish[newly] = np.broadcast_to(at, self.finish.shape)[newly]
            self.done |= newly
            if isinstance(self.phases, list) and active.any():
                last = self.last[1]
                self.phases.append((active[0].copy(), last, step[0].copy(), newly[0].copy()))
                if len(self.phases) * (self.remaining.shape[1] + len(last.link_load)) > KEEP_PHASES_ENTRIES:
                    self.phases = False          # too many events to keep: the derivatives re-run them
        if cut:
            waiting = self.settle()
            cut = (self.started[:, self.part_of] & ~self.done).any(axis=1) | waiting.any(axis=1)
        over = np.where(self.overflowed.any(axis=1), Status.OVERFLOW, Status.OK)
        self.status = np.where(cut, Status.NOT_CONVERGED, over).astype(np.int32) if np.ndim(cut) else \
            over.astype(np.int32)


def _check_groups(rm, groups, check=True):
    """Group index per flow (0 ... G-1) and G; raises when two groups share a link (unless
    ``check`` is off: the caller built them disjoint)."""
    n = rm.n_flows
    if groups is None:
        return np.zeros(n, dtype=np.int64), 1
    groups = np.asarray(groups)
    if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(f"groups must be an integer array of shape ({n},), got {groups.dtype} {groups.shape}")
    uniq, group = np.unique(groups, return_inverse=True)
    if not check:
        return group, len(uniq)
    # which groups use each segment, then each link (factored: no expansion)
    used = rm.flow_seg >= 0
    seg = rm.flow_seg[used]
    seg_group = np.full(rm.n_segments, -1, dtype=np.int64)
    owner = np.broadcast_to(group[:, None], rm.flow_seg.shape)[used]
    seg_group[seg] = owner
    clash = seg_group[seg] != owner
    owner_entry = seg_group[rm.entry_segment]
    live = owner_entry >= 0
    link_group = np.full(rm.n_links, -1, dtype=np.int64)
    link_group[rm.seg_link[live]] = owner_entry[live]
    if clash.any() or (link_group[rm.seg_link[live]] != owner_entry[live]).any():
        raise ValueError("groups must not share links: flows of different groups cross a common link")
    return group, len(uniq)
