"""Transfer times of many independent steps (each on its own copy of its links, its own event
clock), solved in groups of bounded size: :func:`solve_steps`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..solver import max_min_fair
from ..timing import completion_times, keep_limit, kept_run

__all__ = ["SolvedStep", "solve_steps", "CHUNK_FLOWS", "SPLIT_FLOWS"]

#: Steps solved together in one call hold at most this many flows (a single larger step is
#: solved alone). Independent steps stacked into one max-min problem cost the solver about
#: (their distinct levels) x (their entries), so a long pipeline's hundreds of distinct fill
#: and drain steps are solved in groups: the answers are the same (the steps share nothing).
#: Chosen on a tree all-reduce over 2 NVL72 racks (144 ranks, 289 distinct steps, 6.0 M flows,
#: warm compilation cache): 8.0 s in one call, 3.1 / 2.9 / 3.0 / 4.7 s in groups of 5 k / 20 k /
#: 60 k / 150 k flows, and 1.3 GB of memory instead of 2.8 GB (benchmarks/collectives_scale.py).
CHUNK_FLOWS = 1 << 15
#: Steps of at most this many flows in all are solved in one call however many they are: each
#: group's problem shape compiles once a process (~0.45 s on 2 cores without the compilation
#: cache), which a problem this small does not win back (a 1 MiB tree all-reduce over 3 NVL72
#: racks, 93 k flows in 3 groups: 2.1 s first call against 0.85 s in one).
SPLIT_FLOWS = 1 << 18


@dataclass(frozen=True)
class SolvedStep:
    """One step's transfer solved (:func:`solve_steps`): ``transfer`` (s; inf where a flow
    can never move), ``utilization`` per link of the graph (fraction: the bytes the step's flows
    put on the link over its capacity x ``transfer``, the mean over the transfer; the first
    event's where the transfer is 0 or inf) and ``bottleneck`` (Bottleneck records, longest-held
    first, at most 8, ranked at the first event's rates)."""

    transfer: float
    utilization: np.ndarray
    bottleneck: tuple


def _critical(m, u, bott, start, flow_time, util):
    """Bottleneck records of one step (``bott`` its flows' bottleneck links in the block,
    whose links start at ``start``): the links holding the flows that would take longest
    at the first rates, longest first (at most 8)."""
    held = bott >= 0
    critical = np.full(m.n_links, -1.0)
    np.maximum.at(critical, u[bott[held] - start], flow_time[held])
    hot = np.flatnonzero(critical >= 0)
    hot = hot[np.argsort(-critical[hot], kind="stable")]
    return tuple(m.links.bottleneck(l, util[l]) for l in hot[:8])


def solve_steps(rm, group, sizes, cap, n_groups=1, kept=None):
    """Transfer time (s), per-link utilisation and bottleneck records (a :class:`SolvedStep`
    each) of the steps whose flows ``rm`` holds on shared links (``group``: the step of each
    flow, contiguous, or None for one step): each step on its own copy of its links, each
    with its own event clock; past :data:`SPLIT_FLOWS` flows in all, consecutive steps of at
    most :data:`CHUNK_FLOWS` flows in all are solved in one call. ``cap`` is (links,) or
    (scenarios, links); with scenarios the result is a list per scenario. A step with a flow
    that can never move gets transfer ``inf``; a step without a flow, 0. ``kept`` (a list;
    one scenario): gets the run's :class:`~flowsolver.timing.KeptRun` (every event's
    allocation, for derivatives without a re-solve; one per group of steps,
    joined).
    """
    if group is None or n_groups == 1:
        return _solve_block(rm, None, sizes, cap, 1, kept)
    ends = np.cumsum(np.bincount(group, minlength=n_groups))
    firsts = _chunk_firsts(ends, CHUNK_FLOWS) if rm.n_flows > SPLIT_FLOWS else [0]
    if len(firsts) == 1:
        return _solve_block(rm, group, sizes, cap, n_groups, kept)
    batched = np.ndim(cap) == 2
    parts, runs, held = [], [], 0
    for g0, g1 in zip(firsts, list(firsts[1:]) + [n_groups]):
        a, b = (int(ends[g0 - 1]) if g0 else 0), int(ends[g1 - 1])
        mine = [] if kept is not None else None
        if a == b:          # steps without a flow (no schedule of the library's has one): nothing to move
            none = [SolvedStep(0.0, np.zeros(rm.n_links), ()) for _ in range(g0, g1)]
            parts.append([none] * len(np.atleast_2d(cap)) if batched else none)
            runs.append(None)
            continue
        parts.append(_solve_block(rm.flow_rows(a, b), group[a:b] - g0, sizes[a:b], cap, g1 - g0, mine))
        runs.append(mine[0] if mine else None)
        held += sum(len(active) + len(alloc.link_load) for active, alloc, _, _ in runs[-1].phases) if mine else 0
        if held > keep_limit():             # the groups' kept events together as the engine's own limit
            kept, runs = None, []           # bounds one run's: none kept, the derivatives re-run the steps
    if kept is not None and any(run is not None for run in runs):
        kept.append(_JoinedRuns(runs, firsts))
    if batched:
        return [[s for part in parts for s in part[b]] for b in range(len(parts[0]))]
    return [s for part in parts for s in part]


def _chunk_firsts(ends, budget):
    """The first step of each group of consecutive steps holding at most ``budget`` flows in
    all (``ends``: the cumulative flow count after each step; a step over the budget alone).

    >>> _chunk_firsts(np.array([3, 5, 12, 13, 14]), 4)
    [0, 1, 2, 3]
    """
    firsts, start = [0], 0
    for g in range(1, len(ends)):
        if ends[g] - start > budget:
            firsts.append(g)
            start = int(ends[g - 1])
    return firsts


class _JoinedRuns:
    """The :class:`~flowsolver.timing.KeptRun` of each group of steps solved apart, answering
    as one run of all of them (``firsts``: each group's first step; a run None where that
    group's forward kept no phases: its lookups answer None, as such a run's)."""

    def __init__(self, runs, firsts):
        self.runs, self.firsts, self.index = runs, np.asarray(firsts), {}

    def add(self, routing, group: int) -> None:
        c = int(np.searchsorted(self.firsts, group, side="right")) - 1
        if self.runs[c] is not None:
            self.runs[c].add(routing, int(group - self.firsts[c]))
            self.index[id(routing)] = c

    def lookup(self, routing, capacity):
        c = self.index.get(id(routing))
        return None if c is None else self.runs[c].lookup(routing, capacity)


def _solve_block(rm, group, sizes, cap, n_groups=1, kept=None):
    """:func:`solve_steps` of some steps in one call."""
    batched = np.ndim(cap) == 2
    caps = np.atleast_2d(cap)
    if group is None or n_groups == 1:
        block, used, group = rm, [np.arange(rm.n_links)], None
    else:
        block, used = rm.separate(group, n_groups)
    block_cap = np.concatenate([caps[:, u] for u in used], axis=1) if group is not None else caps
    arg = block_cap if batched else block_cap[0]
    keep = kept is not None and not batched
    done = completion_times(block, sizes, arg, groups=group, disjoint_groups=True, keep_phases=keep)
    if keep and (run := kept_run(done, sizes, used, group)) is not None:
        kept.append(run)
    alloc = done.initial if done.initial is not None else max_min_fair(block, arg)
    finish, stalled = np.atleast_2d(done.finish), np.atleast_2d(done.stalled)
    rates = np.atleast_2d(np.asarray(alloc.rates, dtype=np.float64))
    util_all = np.atleast_2d(np.asarray(alloc.utilization, dtype=np.float64))
    bott_all = np.atleast_2d(alloc.bottleneck)
    counts = np.bincount(group, minlength=n_groups) if group is not None else [rm.n_flows]
    moved = np.asarray(block.link_loads(sizes), dtype=np.float64)     # bytes on each (block) link
    results = []
    for b in range(caps.shape[0]):
        with np.errstate(divide="ignore"):
            flow_time = np.where(rates[b] > 0, sizes / np.where(rates[b] > 0, rates[b], 1.0), np.inf)
        out = []
        f0 = l0 = 0
        for u, n in zip(used, counts):
            fs, ls = slice(f0, f0 + n), slice(l0, l0 + len(u))
            f0, l0 = f0 + n, l0 + len(u)
            transfer = np.inf if stalled[b, fs].any() else float(finish[b, fs].max(initial=0.0))
            util = np.zeros(rm.n_links)
            util[u] = util_all[b, ls]
            critical = _critical(rm, u, bott_all[b, fs], ls.start, flow_time[fs], util)
            if np.isfinite(transfer) and transfer > 0:      # the mean over the transfer, not the first event's
                cap = block_cap[b, ls]              # bytes / transfer / capacity: no overflow at 1e300 B/s
                util = np.zeros(rm.n_links)
                util[u] = np.divide(moved[ls] / transfer, cap, out=np.zeros(len(u)), where=cap > 0)
            out.append(SolvedStep(transfer, util, critical))
        results.append(out)
    return results if batched else results[0]


