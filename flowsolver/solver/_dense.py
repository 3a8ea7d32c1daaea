"""The *dense* method of :func:`flowsolver.max_min_fair`: local-minimum rounds that test
every link in every round.

Algorithm (exact, many bottlenecks per round). Every unfrozen flow has the same level
``t = rate / weight``. A link's *fair share* is ``(c_l - frozen load) / (sum of A w over its
unfrozen flows)``: the level at which it would saturate. A round freezes, at once,

* every link whose fair share is no larger than the fair share of every link it shares an
  unfrozen flow with, and than the cap level ``d / w`` of each of its unfrozen flows (a
  local minimum): its flows freeze at its share, and it is their bottleneck;
* every flow whose cap level is no larger than the fair shares of all its links: it freezes
  at its cap (bottleneck ``-1``).

Fair shares only rise while filling proceeds, so a local minimum is where progressive
filling would freeze those flows: the result is progressive filling's, up to floating
point. The global minimum always qualifies, so each round freezes at least one flow; the
loop is bounded by ``max_rounds`` (default: the number of flows) and reports convergence.

The kernel consumes the matrix in the factored form of :class:`~flowsolver.RoutingMatrix`
(segments shared by flows), as COO index arrays with ``jax.ops.segment_*`` reductions of
static size. Shapes are padded to size buckets so that solving another instance of the
same bucket reuses the compiled code; a batch of scenarios (capacities, weights or caps
with a leading batch axis) is solved as one problem of disjoint copies, in chunks that fit
and sharded over the devices (:mod:`flowsolver.solver._batch`). A single large problem is compacted on the host as its flows
freeze and, with several devices, split between them by flows.

Precision: the kernel runs in the requested dtype; float32 is within 1e-5 .. 1e-3 relative
of float64, worst on large all-to-alls where the residual capacity cancels; where an estimate
of that cancellation exceeds 1e-3 the scenario is re-solved in float64
(:mod:`flowsolver.solver._float32`, run by the conditioning check).
"""

from __future__ import annotations

import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from ._allocation import Raw
from ._batch import solve_batch
from ._dense_kernel import _JITTED, _kernel, device_structure
from ._placement import local_devices
from ._problem import CompactRouting, Problem, pad

#: single solves with more flows than this are compacted on the host as flows freeze
COMPACT_FLOWS = 1 << 15
#: compact when at most this fraction of the flows is left unfrozen (benchmarks/TUNING.md)
COMPACT_KEEP = 0.65
#: single solves with more flows than this are spread over all local devices
SHARD_FLOWS = 1 << 15


def eligible(problem: Problem) -> bool:
    """The dense method solves every problem (``method="auto"``'s fallback).

    >>> eligible(None)
    True
    """
    return True


def solve(problem: Problem) -> Raw:
    """Rates, link loads, bottlenecks, rounds and convergence of ``problem`` (host arrays in
    its dtype; a leading scenario axis with a batch)."""
    p = problem
    # a float64 batch's capacity rows are scanned for subnormals on the device (solve_batch)
    scan = p.batch is not None and p.capacity.ndim == 2 and p.dtype == np.float64
    problem.check_range(dense=True, capacity_rows=not scan)
    max_rounds = p.routing.n_flows + 1 if p.max_rounds is None else p.max_rounds   # >= 1 flow a round
    inner = rounds_per_check(p.inner)
    if p.batch is None:
        return Raw(*_solve_single(p.routing, p.capacity, p.weights, p.demands, p.dtype, max_rounds, inner,
                                  p.compact)[:5])
    return Raw(*solve_batch(p.routing, p.capacity, p.weights, p.demands, p.unbounded, p.batch, p.dtype, max_rounds,
                            inner, per_link=p.per_link, scan_subnormal=scan))


def rounds_per_check(inner: int) -> int:
    """Rounds between convergence checks: ``inner`` on an accelerator, where a check is a
    host round trip; 1 on a CPU, where it costs one pass over the flows while every round
    of a block runs in full even once all flows are frozen (a one-round all-to-all paid
    for four)."""
    return 1 if local_devices()[0].platform == "cpu" else inner


@functools.lru_cache(maxsize=None)
def _sharded(devices: tuple, n_links: int, n_segs: int, inner: int, unit_coef: bool):
    """The kernel for one problem spread over ``devices`` (flows split between them)."""
    mesh = jax.sharding.Mesh(np.array(devices), ("flows",))
    P = jax.sharding.PartitionSpec

    def per_device(el, es, ef, ss, sc, cap, w, d, f0, max_rounds, stop_below):
        rates, load, bneck, rounds, frozen = _kernel(
            el[0], es[0], ef[0], ss[0], sc[0], cap[None], w[0][None], d[0][None], f0[0][None], max_rounds,
            stop_below, n_links=n_links, n_segs=n_segs, inner=inner, unit_coef=unit_coef, axis="flows")
        return rates, load[0], bneck, rounds[0], frozen

    split, same = P("flows"), P()
    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(split,) * 5 + (same,) + (split,) * 3 + (same, same),
                       out_specs=(split, same, split, same, split), check_vma=False)
    return jax.jit(fn), jax.sharding.NamedSharding(mesh, split)


# --------------------------------------------------------------------------- host side
class _LastStructure:
    """The device arrays of the last full problem solved, kept for the next solve of the
    same RoutingMatrix (the events of ``completion_times`` re-solve one matrix with other
    demands): one slot, held by a weak reference to the matrix, so it costs at most one
    problem's structure and never outlives its matrix."""

    def __init__(self):
        self.slot = (None, None, None)      # (weak ref to the matrix, key, arrays): replaced whole

    def get(self, rm, segments, sizes, jdt):      # (segments: the whole of rm's)
        key = (sizes, str(jdt))
        # one read of one tuple: a thread never sees one matrix's key beside another's arrays
        # (a sweep's threads solving two scenarios of one graph at once did: wrong rates)
        ref, known_key, arrays = self.slot
        if ref is not None and ref() is rm and known_key == key:
            return arrays
        arrays = device_structure(segments.padded(sizes, rm.n_links), jdt)
        self.slot = (weakref.ref(rm), key, arrays)
        return arrays


_LAST = _LastStructure()


def _solve_single(rm, cap, w, d, dtype, max_rounds, inner, compact):
    """One scenario. Large problems are compacted on the host whenever a third of their flows
    have frozen (frozen loads folded into the capacities), so later rounds work on fewer
    flows and segments; with several devices, large problems are split between them by
    flows. Shapes stay on the bucket ladder. Returns rates, loads, bottlenecks, rounds,
    convergence and which flows are frozen (all of them once converged)."""
    L, N = rm.n_links, rm.n_flows
    segments = full = CompactRouting.of(rm)
    residual = cap.astype(np.float64).copy()
    rates = np.zeros(N)
    bneck = np.full(N, -1, dtype=np.int32)
    rounds_done = 0
    converged = False
    jdt = jnp.dtype(dtype)
    load = np.zeros(L)
    done = np.zeros(N, dtype=bool)
    devices = local_devices()
    while True:
        n = len(segments.flows)
        stop_below = int(n * COMPACT_KEEP) if (compact and n > COMPACT_FLOWS) else 0
        run = functools.partial(_run_sharded, devices=devices) if len(devices) > 1 and n > SHARD_FLOWS else _run_one
        done_flows, r, b, part_load, k = run(segments, residual, w, d, jdt, L, max_rounds - rounds_done,
                                             stop_below, inner, owner=rm if segments is full else None)
        rounds_done += k
        if segments is full and len(r) == N:      # solved in one go: the kernel's arrays as they are
            rates, bneck = r.astype(np.float64), np.array(b)       # own, writable copies
            done |= done_flows                                      # (full: flow i is slot i)
        else:
            ids = segments.flows[done_flows]
            rates[ids], bneck[ids], done[ids] = r, b, True
        load += part_load
        if done_flows.all():
            converged = True
            break
        if rounds_done >= max_rounds:
            break
        residual = residual - part_load
        segments = segments.restrict(np.flatnonzero(~done_flows))
    return (rates.astype(dtype, copy=False), load.astype(dtype, copy=False), bneck, np.int32(rounds_done),
            np.bool_(converged), done)


def _run_one(segments, residual, w, d, jdt, L, max_rounds, stop_below, inner, owner=None):
    """``owner``: the RoutingMatrix whose whole structure ``segments`` is (its device
    arrays are then kept for its next solve)."""
    n = len(segments.flows)
    Lp, Np, Sp, _ = sizes = segments.buckets(L)
    frozen0 = pad(np.zeros(n, dtype=bool), Np, True)
    structure = _LAST.get(owner, segments, sizes, jdt) if owner is not None else \
        device_structure(segments.padded(sizes, L), jdt)
    mine = (lambda a: a) if owner is not None else (lambda a: a[segments.flows])  # noqa: E731 (all flows: no gather)
    out = _JITTED(*structure,
                  jnp.asarray(pad(residual, Lp, np.inf, np.float64)[None], jdt),
                  jnp.asarray(pad(mine(w), Np, 1.0, np.float64)[None], jdt),
                  jnp.asarray(pad(mine(d), Np, 0.0, np.float64)[None], jdt), jnp.asarray(frozen0[None]),
                  jnp.int32(max_rounds), jnp.int32(stop_below), n_links=Lp, n_segs=Sp, inner=inner,
                  unit_coef=segments.unit_coef)
    r, part_load, b, k, frozen = (np.asarray(x)[0] for x in out)
    done = frozen[:n]
    if done.all():
        return done, r[:n], b[:n], part_load[:L], int(k)
    return done, r[:n][done], b[:n][done], part_load[:L], int(k)


def _run_sharded(segments, residual, w, d, jdt, L, max_rounds, stop_below, inner, *, devices, owner=None):
    """The problem's flows split into one contiguous share per device; each share carries
    the segments it uses (shared segments are copied), all padded to the largest share's
    buckets."""
    n = len(segments.flows)
    bounds = np.linspace(0, n, len(devices) + 1).astype(np.int64)
    shares = [segments.restrict(np.arange(bounds[i], bounds[i + 1])) for i in range(len(devices))]
    Lp, Np, Sp, _ = sizes = tuple(max(s) for s in zip(*(sh.buckets(L) for sh in shares)))
    el, es, ef, ss, sc = (np.stack(a) for a in zip(*(sh.padded(sizes, L, segments.unit_coef) for sh in shares)))
    wp = np.stack([pad(w[sh.flows], Np, 1.0, np.float64) for sh in shares])
    dp = np.stack([pad(d[sh.flows], Np, 0.0, np.float64) for sh in shares])
    f0 = np.stack([pad(np.zeros(len(sh.flows), dtype=bool), Np, True) for sh in shares])
    fn, split = _sharded(devices, Lp, Sp, inner, segments.unit_coef)
    put = lambda a, dt=None: jax.device_put(jnp.asarray(a, dt), split)  # noqa: E731
    out = fn(put(el), put(es), put(ef, jdt), put(ss), put(sc, jdt),
             jnp.asarray(pad(residual, Lp, np.inf, np.float64), jdt), put(wp, jdt), put(dp, jdt), put(f0),
             jnp.int32(max_rounds), jnp.int32(stop_below))
    r, part_load, b, k, frozen = (np.asarray(x) for x in out)
    done = np.concatenate([frozen[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    rr = np.concatenate([r[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    bb = np.concatenate([b[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    return done, rr[done], bb[done], part_load[:L], int(k)
