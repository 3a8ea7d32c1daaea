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
with a leading batch axis) is solved by ``vmap`` and, with several devices, sharded over
them along the batch axis. A single large problem is compacted on the host as its flows
freeze and, with several devices, split between them by flows.

Precision: the kernel runs in the requested dtype; float32 is within 1e-5 .. 1e-3 relative
of float64, worst on large all-to-alls where the residual capacity cancels.
"""

from __future__ import annotations

import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from ._allocation import Raw
from ._problem import Problem, Segments, count_trace, pad

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
    problem.check_float32(dense=True)
    p = problem
    max_rounds = p.routing.n_flows + 1 if p.max_rounds is None else p.max_rounds   # >= 1 flow a round
    inner = rounds_per_check(p.inner)
    if p.batch is None:
        return Raw(*_solve_single(p.routing, p.capacity, p.weights, p.demands, p.dtype, max_rounds, inner,
                                  p.compact)[:5])
    return Raw(*solve_batch(p.routing, p.capacity, p.weights, p.demands, p.unbounded, p.batch, p.dtype, max_rounds,
                            inner))


def rounds_per_check(inner: int) -> int:
    """Rounds between convergence checks: ``inner`` on an accelerator, where a check is a
    host round trip; 1 on a CPU, where it costs one pass over the flows while every round
    of a block runs in full even once all flows are frozen (a one-round all-to-all paid
    for four)."""
    return 1 if jax.default_backend() == "cpu" else inner


# --------------------------------------------------------------------------- kernel
class _Net:
    """The padded structure of one kernel call and the reductions over it (used while
    tracing). ``slot_seg`` / ``slot_coef`` are (flows, K); ``unit_coef`` says every used
    slot has coefficient 1 (then ``slot_coef`` is not read). No mask is needed anywhere:
    padding slots point to the padding segment, whose entries (fraction 0) point to the
    padding link (infinite capacity, no weight), and real entries have fractions > 0. With
    ``axis`` (inside ``shard_map``) each device holds a share of the flows with the segments
    they use; per-link sums and minima are combined over the devices, so every device sees
    the same fair shares."""

    def __init__(self, entry_link, entry_seg, entry_frac, slot_seg, slot_coef, dtype, *, n_links, n_segs,
                 unit_coef, axis):
        self.entry_link, self.entry_seg, self.entry_frac = entry_link, entry_seg, entry_frac
        self.n_links, self.n_segs, self.unit_coef, self.axis = n_links, n_segs, unit_coef, axis
        self.inf = jnp.asarray(jnp.inf, dtype)
        self.n_flows, self.k = slot_seg.shape
        self.flat_seg = slot_seg.reshape(-1)
        self.flat_coef = slot_coef.reshape(-1)

    def total(self, x):
        return x if self.axis is None else jax.lax.psum(x, self.axis)

    def lowest(self, x):
        return x if self.axis is None else jax.lax.pmin(x, self.axis)

    def slot_to_seg_sum(self, x):      # per-flow values -> per-segment sums
        rep = jnp.repeat(x, self.k)
        return jax.ops.segment_sum(rep if self.unit_coef else rep * self.flat_coef, self.flat_seg, self.n_segs)

    def per_flow(self, x, reduce):     # per-slot values (flows * K,) -> reduced over each flow's K
        return reduce(x.reshape(self.n_flows, self.k), axis=1)

    def seg_to_link_sum(self, x):      # per-segment values -> per-link sums over entries
        return jax.ops.segment_sum(self.entry_frac * x[self.entry_seg], self.entry_link, self.n_links)

    def link_sum(self, x):             # per-flow values -> per-link sums over all devices
        return self.total(self.seg_to_link_sum(self.slot_to_seg_sum(x)))


def _round(net: _Net, cap, w, cap_level, max_rounds, state):
    """One round of the local-minimum freezing (see the module docstring)."""
    t, frozen, bneck, rounds = state
    inf = net.inf
    # a round runs only while flows are left and max_rounds is not reached (the inner
    # loop would otherwise overshoot it by up to ``inner - 1`` rounds)
    busy = (net.total(jnp.sum(~frozen, dtype=jnp.int32)) > 0) & (rounds < max_rounds)
    W = net.link_sum(jnp.where(frozen, 0, w))
    F = net.link_sum(jnp.where(frozen, t * w, 0))
    share = jnp.where(W > 0, jnp.maximum(cap - F, 0) / jnp.where(W > 0, W, 1), inf)
    s_min = jax.ops.segment_min(share[net.entry_link], net.entry_seg, net.n_segs, indices_are_sorted=True)
    m = net.per_flow(s_min[net.flat_seg], jnp.min)
    val = jnp.where(frozen, inf, jnp.minimum(m, cap_level))
    s_val = jax.ops.segment_min(jnp.repeat(val, net.k), net.flat_seg, net.n_segs)
    near = net.lowest(jax.ops.segment_min(s_val[net.entry_seg], net.entry_link, net.n_links))
    freeze_link = (W > 0) & (share <= near)
    s_link = jax.ops.segment_max(jnp.where(freeze_link[net.entry_link], net.entry_link, -1),
                                 net.entry_seg, net.n_segs, indices_are_sorted=True)
    f_link = net.per_flow(s_link[net.flat_seg], jnp.max)
    by_link = busy & ~frozen & (f_link >= 0)
    by_cap = busy & ~frozen & ~by_link & (cap_level <= m)
    t = jnp.where(by_link, m, jnp.where(by_cap, cap_level, t))
    bneck = jnp.where(by_link, f_link, jnp.where(by_cap, -1, bneck))
    return t, frozen | by_link | by_cap, bneck, rounds + busy.astype(jnp.int32)


def _kernel(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap, w, d, frozen0, max_rounds,
            stop_below, *, n_links, n_segs, inner, unit_coef=False, axis=None):
    """Rounds of the local-minimum freezing until every flow is frozen, ``max_rounds`` is
    reached or at most ``stop_below`` flows are left unfrozen (``stop_below`` > 0 lets the
    host compact the problem). Returns rates, the load of the frozen flows, bottlenecks,
    rounds and the frozen mask. The structure's arrays are described by :class:`_Net`."""
    count_trace()
    net = _Net(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap.dtype, n_links=n_links, n_segs=n_segs,
               unit_coef=unit_coef, axis=axis)
    cap_level = jnp.where(jnp.isinf(d), net.inf, d / w)
    one_round = functools.partial(_round, net, cap, w, cap_level, max_rounds)

    def cond(state):
        left = net.total(jnp.sum(~state[1], dtype=jnp.int32))
        return (left > 0) & (left > stop_below) & (state[3] < max_rounds)

    def body(state):
        return jax.lax.fori_loop(0, inner, lambda _, s: one_round(s), state)

    state = (jnp.zeros(net.n_flows, cap.dtype), frozen0, jnp.full(net.n_flows, -1, jnp.int32), jnp.int32(0))
    t, frozen, bneck, rounds = jax.lax.while_loop(cond, body, state)
    rates = jnp.where(frozen, t * w, 0)
    return rates, net.link_sum(rates), bneck, rounds, frozen


_STATIC = ("n_links", "n_segs", "inner", "unit_coef")
_JITTED = jax.jit(_kernel, static_argnames=_STATIC)


def _batched_kernel(*args, n_links, n_segs, inner, unit_coef):
    kernel = functools.partial(_kernel, n_links=n_links, n_segs=n_segs, inner=inner, unit_coef=unit_coef)
    return jax.vmap(kernel, in_axes=(None, None, None, None, None, 0, 0, 0, 0, None, None))(*args)


_BATCHED = jax.jit(_batched_kernel, static_argnames=_STATIC)


@functools.lru_cache(maxsize=None)
def _sharded(devices: tuple, n_links: int, n_segs: int, inner: int, unit_coef: bool):
    """The kernel for one problem spread over ``devices`` (flows split between them)."""
    mesh = jax.sharding.Mesh(np.array(devices), ("flows",))
    P = jax.sharding.PartitionSpec

    def per_device(el, es, ef, ss, sc, cap, w, d, f0, max_rounds, stop_below):
        rates, load, bneck, rounds, frozen = _kernel(
            el[0], es[0], ef[0], ss[0], sc[0], cap, w[0], d[0], f0[0], max_rounds, stop_below,
            n_links=n_links, n_segs=n_segs, inner=inner, unit_coef=unit_coef, axis="flows")
        return rates[None], load, bneck[None], rounds, frozen[None]

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

    def get(self, rm, segments, sizes, jdt):
        key = (sizes, str(jdt))
        # one read of one tuple: a thread never sees one matrix's key beside another's arrays
        # (a sweep's threads solving two scenarios of one graph at once did: wrong rates)
        ref, known_key, arrays = self.slot
        if ref is not None and ref() is rm and known_key == key:
            return arrays
        arrays = _device_structure(segments.padded(sizes), jdt)
        self.slot = (weakref.ref(rm), key, arrays)
        return arrays


_LAST = _LastStructure()


def _device_structure(arrays, jdt):
    link, seg, frac, slot_seg, slot_coef = arrays
    return [jnp.asarray(link), jnp.asarray(seg), jnp.asarray(frac, jdt), jnp.asarray(slot_seg),
            jnp.asarray(slot_coef, jdt)]


def _solve_single(rm, cap, w, d, dtype, max_rounds, inner, compact):
    """One scenario. Large problems are compacted on the host whenever a third of their flows
    have frozen (frozen loads folded into the capacities), so later rounds work on fewer
    flows and segments; with several devices, large problems are split between them by
    flows. Shapes stay on the bucket ladder. Returns rates, loads, bottlenecks, rounds,
    convergence and which flows are frozen (all of them once converged)."""
    L, N = rm.n_links, rm.n_flows
    segments = full = Segments.of(rm)
    residual = cap.astype(np.float64).copy()
    rates = np.zeros(N)
    bneck = np.full(N, -1, dtype=np.int32)
    rounds_done = 0
    converged = False
    jdt = jnp.dtype(dtype)
    load = np.zeros(L)
    done = np.zeros(N, dtype=bool)
    devices = tuple(jax.devices())
    while True:
        n = len(segments.flows)
        stop_below = int(n * COMPACT_KEEP) if (compact and n > COMPACT_FLOWS) else 0
        run = functools.partial(_run_sharded, devices=devices) if len(devices) > 1 and n > SHARD_FLOWS else _run_one
        done_flows, r, b, part_load, k = run(segments, residual, w, d, jdt, L, max_rounds - rounds_done,
                                             stop_below, inner, owner=rm if segments is full else None)
        rounds_done += k
        if segments is full and len(r) == N:      # solved in one go: the kernel's arrays as they are
            rates, bneck = r.astype(np.float64), np.array(b)       # own, writable copies
        else:
            rates[segments.flows[done_flows]] = r
            bneck[segments.flows[done_flows]] = b
        done[segments.flows[done_flows]] = True
        load += part_load
        if done_flows.all():
            converged = True
            break
        if rounds_done >= max_rounds:
            break
        residual = residual - part_load
        segments = segments.restrict(np.flatnonzero(~done_flows))
    return rates.astype(dtype), load.astype(dtype), bneck, np.int32(rounds_done), np.bool_(converged), done


def _run_one(segments, residual, w, d, jdt, L, max_rounds, stop_below, inner, owner=None):
    """``owner``: the RoutingMatrix whose whole structure ``segments`` is (its device
    arrays are then kept for its next solve)."""
    n = len(segments.flows)
    Lp, Np, Sp, _ = sizes = segments.buckets(L)
    frozen0 = pad(np.zeros(n, dtype=bool), Np, True)
    structure = _LAST.get(owner, segments, sizes, jdt) if owner is not None else \
        _device_structure(segments.padded(sizes), jdt)
    mine = (lambda a: a) if owner is not None else (lambda a: a[segments.flows])  # noqa: E731 (all flows: no gather)
    out = _JITTED(*structure,
                  jnp.asarray(pad(residual, Lp, np.inf, np.float64), jdt),
                  jnp.asarray(pad(mine(w), Np, 1.0, np.float64), jdt),
                  jnp.asarray(pad(mine(d), Np, 0.0, np.float64), jdt), jnp.asarray(frozen0),
                  jnp.int32(max_rounds), jnp.int32(stop_below), n_links=Lp, n_segs=Sp, inner=inner,
                  unit_coef=segments.unit_coef)
    r, part_load, b, k, frozen = (np.asarray(x) for x in out)
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
    el, es, ef, ss, sc = (np.stack(a) for a in zip(*(sh.padded(sizes, segments.unit_coef) for sh in shares)))
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


def solve_batch(rm, cap, w, d, unbounded, B, dtype, max_rounds, inner):
    """``B`` scenarios in one vmapped call (sharded over the devices along the batch);
    unbounded flows start frozen. Returns host arrays with a leading scenario axis."""
    L, N = rm.n_links, rm.n_flows
    segments = Segments.of(rm)
    Lp, Np, Sp, _ = sizes = segments.buckets(L)
    jdt = jnp.dtype(dtype)
    capp = pad(np.broadcast_to(cap, (B, L)), Lp, np.inf, np.float64)
    wp = pad(np.broadcast_to(w, (B, N)), Np, 1.0, np.float64)
    dp = pad(np.broadcast_to(np.where(unbounded, 0.0, d), (B, N)), Np, 0.0, np.float64)
    frozen0 = pad(np.broadcast_to(unbounded, (B, N)), Np, True)
    scen = [capp, wp, dp, frozen0]
    n_dev = len(jax.devices())
    Bp = -(-B // n_dev) * n_dev
    if Bp != B:   # pad the batch to a multiple of the device count (copies of scenario 0)
        scen = [np.concatenate([a, np.repeat(a[:1], Bp - B, axis=0)]) for a in scen]
    scen = [jnp.asarray(a, bool if a.dtype == bool else jdt) for a in scen]
    if n_dev > 1:
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
        shard = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        scen = [jax.device_put(a, shard) for a in scen]
    out = _BATCHED(*_device_structure(segments.padded(sizes), jdt), *scen, jnp.int32(max_rounds), jnp.int32(0),
                   n_links=Lp, n_segs=Sp, inner=inner, unit_coef=segments.unit_coef)
    r, load, b, k, frozen = (np.asarray(x)[:B] for x in out)
    return r[:, :N], load[:, :L], b[:, :N], k, frozen.all(axis=1)
