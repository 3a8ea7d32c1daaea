"""The stretches of a Monte Carlo trajectory between interruptions, and the outages after
them merged: the job is down until every outage begun so far has ended.

An interruption at ``t`` with downtime ``d`` (a restart, after a repair where the job waits
for one) keeps the job down until ``t + d``; a later interruption before then does not end
that outage early (the failed node is still away, the restart still to finish): the job
computes again at the running maximum of ``t + d`` over the interruptions so far, which is
the end of the union of the outages ``[t, t + d]``, with a restart re-begun by a failure
during it. Attribution by cause: each stretch of downtime goes to the outage that was
already outstanding, up to its end, and a later interruption is charged only with the time
it adds beyond that (a software failure during a 4-hour repair wait costs nothing more
unless its restart ends after the repair's).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Segments", "merged_outages"]


class Segments:
    """The stretches between interruptions: ``a`` (the interruption before, or 0), ``b``
    (the next, or the horizon), ``s`` (computing starts, after the downtime)."""

    def __init__(self, n, H, i_traj, i_time, i_kind, down, K):
        # each trajectory's start (time 0) then its interruptions, in order (these come sorted)
        m = n + len(i_traj)
        at = np.arange(len(i_traj)) + i_traj + 1
        starts = np.searchsorted(i_traj, np.arange(n)) + np.arange(n)
        traj, a, before = np.empty(m, np.int64), np.empty(m), np.empty(m, np.int64)
        traj[at], a[at], before[at] = i_traj, i_time, i_kind
        traj[starts], a[starts], before[starts] = np.arange(n), 0.0, -1
        last = np.ones(len(traj), bool)
        last[:-1] = traj[1:] != traj[:-1]
        b = np.empty(len(a))
        b[:-1] = a[1:]
        b[last] = H
        after = np.full(len(a), -1, np.int64)
        after[:-1] = before[1:]
        after[last] = -1
        self.traj, self.a, self.b, self.before, self.after, self.last = traj, a, b, before, after, last
        # outages merge: the job is down until every outage begun so far has ended (a running
        # maximum of t + downtime over the trajectory's interruptions), each segment's downtime
        # split between the outage already outstanding (up to where it ended) and the new one
        # (what it adds beyond); see merged_outages
        ends, prev_end, prev_owner = merged_outages(i_traj, i_time, np.asarray(down, float)[i_kind])
        D, Dp, ownp = np.zeros(m), np.full(m, -np.inf), np.full(m, -1, np.int64)
        D[at], Dp[at] = ends, prev_end
        ownp[at] = np.where(prev_owner >= 0, i_kind[np.maximum(prev_owner, 0)], -1)    # its kind
        D[starts] = 0.0                                                   # the run's start: no outage
        self.lost_down = np.minimum(D, b) - a
        held = np.clip(np.minimum(Dp, b) - a, 0.0, self.lost_down)        # the outstanding outage's
        self.down_by = ((ownp, held), (before, self.lost_down - held))
        self.s = a + self.lost_down
        self.n, self.H, self.K = n, H, K


def merged_outages(i_traj, i_time, downtime):
    """Merged outages of interruptions sorted by trajectory then time, each down from its time
    ``t`` to ``t + downtime`` (a restart, after a repair where it waits for one): the job is
    down until ``end_i = max over j <= i (t_j + downtime_j)`` of its trajectory (every repair
    done, and a restart completed after the last interruption). Returns ``end``, and the end
    and the index of the interruption that set it just before each interruption (``-inf`` and
    -1 for a trajectory's first); ties go to the earlier interruption."""
    k = len(i_traj)
    x = i_time + downtime
    if k == 0:
        return x, x, np.zeros(0, np.int64)
    # a running maximum per trajectory, exact: rank the ends (an earlier interruption ranks
    # above a later one with the same end), offset each trajectory's ranks above the last's
    idx = np.arange(k)
    order = np.lexsort((-idx, x))
    rank = np.empty(k, np.int64)
    rank[order] = idx
    best = np.maximum.accumulate(i_traj * k + rank)
    owner = order[best - i_traj * k]
    first = np.ones(k, bool)
    first[1:] = i_traj[1:] != i_traj[:-1]
    prev_owner = np.full(k, -1, np.int64)
    prev_owner[1:] = owner[:-1]
    prev_owner[first] = -1
    prev_end = np.where(prev_owner >= 0, x[np.maximum(prev_owner, 0)], -np.inf)
    return x[owner], prev_end, prev_owner
