"""flowsolver.reliability: neighbouring jobs' slowdowns (placement_slowdowns) against an
independent event-driven run of the same collectives: the same routed steps, replayed by a
plain event loop written here (weighted progressive filling between events, numpy only)."""

import numpy as np
import pytest

import topologies as tp
from flowsolver.collectives._concurrent import _options, _plan, _Routed
from flowsolver.reliability import PLACEMENTS, place_jobs, placement_slowdowns

pytestmark = pytest.mark.slow          # ~10 s each on 2 shared cores: flowsolver.concurrent's many small solves


def _water_fill(A, cap):
    """Max-min fair rates of the flows (columns of the dense links x flows matrix ``A``, entry
    = the fraction of the flow's rate on the link) on links of ``cap`` bytes/s: every flow not
    yet held by a full link grows at the same pace until a link fills (progressive filling)."""
    n = A.shape[1]
    rate = np.zeros(n)
    frozen = np.zeros(n, dtype=bool)
    residual = np.asarray(cap, dtype=np.float64).copy()
    while not frozen.all():
        w = A[:, ~frozen].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(w > 0, residual / w, np.inf)
        grow = room.min()
        if not np.isfinite(grow):                        # flows that cross no link: never limited
            rate[~frozen] = np.inf
            break
        rate[~frozen] += grow
        residual -= w * grow
        full = (w > 0) & (residual <= 1e-12 * np.maximum(cap, 1.0))
        frozen |= (A[full] > 0).any(axis=0)
    return rate


def _event_run(jobs, cap):
    """Finish time of each job: a job is a list of steps (A, sizes, delay); step k starts
    ``delay`` seconds after step k - 1 ended (the first after 0); between events (a flow
    finishing, a delay elapsing) every running flow of every job has its max-min fair rate."""
    k = [0] * len(jobs)
    start = [jobs[j][0][2] for j in range(len(jobs))]
    left = [np.asarray(jobs[j][0][1], dtype=np.float64).copy() for j in range(len(jobs))]
    done = [None] * len(jobs)
    t = 0.0
    while any(d is None for d in done):
        running = [j for j in range(len(jobs)) if done[j] is None and start[j] <= t]
        cols, owner = [], []
        for j in running:
            A = jobs[j][k[j]][0]
            for f in np.flatnonzero(left[j] > 0):
                cols.append(A[:, f])
                owner.append((j, f))
        rates = _water_fill(np.stack(cols, axis=1), cap) if cols else np.zeros(0)
        to_finish = [left[j][f] / r for (j, f), r in zip(owner, rates)]
        to_start = [start[j] - t for j in range(len(jobs)) if done[j] is None and start[j] > t]
        dt = min(to_finish + to_start)
        t += dt
        for (j, f), r in zip(owner, rates):
            left[j][f] -= r * dt
            if left[j][f] <= 1e-12 * np.max(jobs[j][k[j]][1]):
                left[j][f] = 0.0
        for j in running:
            if not (left[j] > 0).any():                  # the step ended: release the next
                k[j] += 1
                if k[j] == len(jobs[j]):
                    done[j] = t
                else:
                    start[j] = t + jobs[j][k[j]][2]
                    left[j] = np.asarray(jobs[j][k[j]][1], dtype=np.float64).copy()
    return done


def _steps(graph, ranks, size, options, routed):
    """The routed steps of a ring all-reduce over ``ranks``, each repetition once, with the
    latency before it (what flowsolver.concurrent runs for that collective)."""
    got, algorithm, schedule, _ = _plan(graph, dict(op="all_reduce", size=float(size), ranks=ranks,
                                                    algorithm="ring"), options)
    assert algorithm == "ring"
    out = []
    for j, st in enumerate(schedule):
        rm, sizes, latency, _ = routed(got, st.flows)     # (a ring's step: every flow's slowest hop)
        A = rm.to_scipy().toarray()
        for r in range(st.count):
            first = not (j or r)
            out.append((A, np.asarray(sizes, dtype=np.float64),
                        latency * (st.latency_count / st.count) + (options.base if first else 0.0)))
    return out


@pytest.mark.parametrize("graph, sizes, size", [
    # 4 leaves of 2 hosts, one spine, 2:1 oversubscribed: spread jobs share the uplinks
    (tp.leaf_spine(leaves=4, spines=1, hosts_per_leaf=2, oversubscription=2.0), [4, 4], 2**26),
    # 2 DGX H100 servers on 8 rail leaves: three jobs of 4, 4 and 8 GPUs
    (tp.rail_optimized(2), [4, 4, 8], 2**24),
])
def test_placement_slowdowns_equal_an_event_driven_run(graph, sizes, size):
    rows = placement_slowdowns(graph, sizes, "all_reduce", size)
    options = _options(graph, None)
    routed = _Routed(graph, options)
    cap = None
    for policy in PLACEMENTS:
        jobs = [_steps(graph, tuple(ranks), size, options, routed) for ranks in place_jobs(graph, sizes, policy)]
        if cap is None:
            rm = routed(*next(iter(routed.cache))[:2])[0]      # a cache key: (ranks, flows, step protocol)
            cap = rm.links.effective_capacity(options.efficiency)
        together = _event_run(jobs, cap)
        alone = [_event_run([job], cap)[0] for job in jobs]
        mine = [r for r in rows if r["policy"] == policy]
        assert [r["job"] for r in mine] == list(range(len(sizes)))
        for r, a, t in zip(mine, alone, together):
            assert r["alone"] == pytest.approx(a, rel=1e-9)
            assert r["together"] == pytest.approx(t, rel=1e-9)
            assert r["slowdown"] == pytest.approx(t / a, rel=1e-9)
    # the oversubscribed case is not trivial: some placement slows a job down
    if len(sizes) == 2:
        assert max(r["slowdown"] for r in rows) > 1.5
