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
from ._placement import local_devices
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
    return 1 if local_devices()[0].platform == "cpu" else inner


# --------------------------------------------------------------------------- kernel
class _Net:
    """The padded structure of one kernel call and the reductions over it (used while
    tracing), for ``B`` scenarios at once: every per-flow, per-segment and per-link array
    has a leading scenario axis. ``slot_seg`` / ``slot_coef`` are (flows, K); ``unit_coef``
    says every used slot has coefficient 1 (then ``slot_coef`` is not read). No mask is
    needed anywhere: padding slots point to the padding segment, whose entries (fraction 0)
    point to the padding link (infinite capacity, no weight), and real entries have
    fractions > 0.

    The scenarios are one problem of ``B`` disjoint copies: scenario ``b``'s segment ``s``
    is ``b x n_segs + s`` and its link ``l`` is ``b x n_links + l``, so every reduction is
    one plain segment reduction over all scenarios (a scatter with batch dimensions, what
    ``vmap`` makes of one, ran ~100x slower than the bytes it moves on both CPU and GPU).
    With ``axis`` (inside ``shard_map``, ``B`` = 1) each device holds a share of the flows
    with the segments they use; per-link sums and minima are combined over the devices, so
    every device sees the same fair shares."""

    def __init__(self, entry_link, entry_seg, entry_frac, slot_seg, slot_coef, dtype, *, batch, n_links, n_segs,
                 unit_coef, axis):
        self.entry_link, self.entry_seg, self.entry_frac = entry_link, entry_seg, entry_frac
        self.n_links, self.n_segs, self.unit_coef, self.axis, self.batch = n_links, n_segs, unit_coef, axis, batch
        self.inf = jnp.asarray(jnp.inf, dtype)
        self.n_flows, self.k = slot_seg.shape
        self.flat_seg = slot_seg.reshape(-1)
        self.flat_coef = slot_coef.reshape(-1)
        scenario = jnp.arange(batch, dtype=jnp.int32)[:, None]
        # global ids of each (scenario, slot)'s segment, (scenario, entry)'s segment and link
        self.slot_ids = (self.flat_seg[None, :] + scenario * n_segs).reshape(-1)
        self.entry_seg_ids = (entry_seg[None, :] + scenario * n_segs).reshape(-1)
        self.entry_link_ids = (entry_link[None, :] + scenario * n_links).reshape(-1)

    def total(self, x):
        return x if self.axis is None else jax.lax.psum(x, self.axis)

    def lowest(self, x):
        return x if self.axis is None else jax.lax.pmin(x, self.axis)

    def _per_seg(self, op, x, ids, sorted_ids=False):      # (B, n) values on (B x n) ids -> (B, n_segs)
        return op(x.reshape(-1), ids, self.batch * self.n_segs,
                  indices_are_sorted=sorted_ids).reshape(self.batch, self.n_segs)

    def _per_link(self, op, x):                            # (B, entries) -> (B, n_links)
        return op(x.reshape(-1), self.entry_link_ids, self.batch * self.n_links).reshape(self.batch, self.n_links)

    def slots(self, x):                # per-flow values (B, flows) -> per-slot (B, flows * K)
        return jnp.repeat(x, self.k, axis=1)

    def slot_to_seg(self, op, x):      # per-slot values (B, flows * K) -> per-segment
        return self._per_seg(op, x, self.slot_ids)

    def entry_to_seg(self, op, x):     # per-entry values (B, entries) -> per-segment (entries sorted by segment)
        return self._per_seg(op, x, self.entry_seg_ids, sorted_ids=True)

    def per_flow(self, x, reduce):     # per-slot values (B, flows * K) -> reduced over each flow's K
        return reduce(x.reshape(self.batch, self.n_flows, self.k), axis=2)

    def at_slots(self, seg_values):    # per-segment (B, n_segs) -> per-slot (B, flows * K)
        return jnp.take(seg_values, self.flat_seg, axis=1)

    def at_entries(self, values, index):   # (B, n) -> (B, entries) through an entry index
        return jnp.take(values, index, axis=1)

    def link_sum(self, x):             # per-flow values (B, flows) -> per-link sums over all devices
        rep = self.slots(x)
        seg = self.slot_to_seg(jax.ops.segment_sum, rep if self.unit_coef else rep * self.flat_coef)
        return self.total(self._per_link(jax.ops.segment_sum, self.entry_frac * self.at_entries(seg, self.entry_seg)))


def _round(net: _Net, cap, w, cap_level, max_rounds, state):
    """One round of the local-minimum freezing (see the module docstring), in every
    scenario: arrays (B, flows) and (B, links), ``rounds`` (B,)."""
    t, frozen, bneck, rounds = state
    inf = net.inf
    # a scenario runs a round only while it has flows left and max_rounds is not reached
    # (the inner loop would otherwise overshoot it by up to ``inner - 1`` rounds)
    busy = (net.total(jnp.sum(~frozen, axis=1, dtype=jnp.int32)) > 0) & (rounds < max_rounds)     # (B,)
    W = net.link_sum(jnp.where(frozen, 0, w))
    F = net.link_sum(jnp.where(frozen, t * w, 0))
    share = jnp.where(W > 0, jnp.maximum(cap - F, 0) / jnp.where(W > 0, W, 1), inf)
    s_min = net.entry_to_seg(jax.ops.segment_min, net.at_entries(share, net.entry_link))
    m = net.per_flow(net.at_slots(s_min), jnp.min)
    val = jnp.where(frozen, inf, jnp.minimum(m, cap_level))
    s_val = net.slot_to_seg(jax.ops.segment_min, net.slots(val))
    near = net.lowest(net._per_link(jax.ops.segment_min, net.at_entries(s_val, net.entry_seg)))
    freeze_link = (W > 0) & (share <= near)
    s_link = net.entry_to_seg(jax.ops.segment_max, jnp.where(net.at_entries(freeze_link, net.entry_link),
                                                              net.entry_link, -1))
    f_link = net.per_flow(net.at_slots(s_link), jnp.max)
    live = busy[:, None] & ~frozen
    by_link = live & (f_link >= 0)
    by_cap = live & ~by_link & (cap_level <= m)
    t = jnp.where(by_link, m, jnp.where(by_cap, cap_level, t))
    bneck = jnp.where(by_link, f_link, jnp.where(by_cap, -1, bneck))
    return t, frozen | by_link | by_cap, bneck, rounds + busy.astype(jnp.int32)


def _kernel(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap, w, d, frozen0, max_rounds,
            stop_below, *, n_links, n_segs, inner, unit_coef=False, axis=None):
    """Rounds of the local-minimum freezing, for ``B`` scenarios (``cap`` (B, links),
    ``frozen0`` (B, flows); ``w`` and ``d`` (B, flows) or (1, flows), shared), until every
    flow is frozen, ``max_rounds`` is reached or at most ``stop_below`` flows are left
    unfrozen (``stop_below`` > 0, with B = 1, lets the host compact the problem). Returns
    rates, the load of the frozen flows, bottlenecks, rounds (B,) and the frozen mask. The
    structure's arrays are described by :class:`_Net`."""
    count_trace()
    batch = cap.shape[0]
    net = _Net(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap.dtype, batch=batch, n_links=n_links,
               n_segs=n_segs, unit_coef=unit_coef, axis=axis)
    cap_level = jnp.where(jnp.isinf(d), net.inf, d / w)
    one_round = functools.partial(_round, net, cap, w, cap_level, max_rounds)

    def cond(state):
        left = net.total(jnp.sum(~state[1], axis=1, dtype=jnp.int32))
        return jnp.any((left > 0) & (left > stop_below) & (state[3] < max_rounds))

    def body(state):
        return jax.lax.fori_loop(0, inner, lambda _, s: one_round(s), state)

    state = (jnp.zeros(frozen0.shape, cap.dtype), frozen0, jnp.full(frozen0.shape, -1, jnp.int32),
             jnp.zeros(batch, jnp.int32))
    t, frozen, bneck, rounds = jax.lax.while_loop(cond, body, state)
    rates = jnp.where(frozen, t * w, 0)
    return rates, net.link_sum(rates), bneck, rounds, frozen


_STATIC = ("n_links", "n_segs", "inner", "unit_coef")
_JITTED = jax.jit(_kernel, static_argnames=_STATIC)


@functools.lru_cache(maxsize=None)
def _batch_sharded(devices: tuple, n_links: int, n_segs: int, inner: int, unit_coef: bool):
    """The kernel for a batch spread over ``devices`` (scenarios split between them, each
    device solving its share as one problem)."""
    mesh = jax.sharding.Mesh(np.array(devices), ("batch",))
    P = jax.sharding.PartitionSpec
    kernel = functools.partial(_kernel, n_links=n_links, n_segs=n_segs, inner=inner, unit_coef=unit_coef)
    split, same = P("batch"), P()
    fn = jax.shard_map(kernel, mesh=mesh, in_specs=(same,) * 5 + (split,) * 4 + (same, same),
                       out_specs=(split,) * 5, check_vma=False)
    return jax.jit(fn), jax.sharding.NamedSharding(mesh, split)


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


#: slot, entry, segment and link elements one batched call holds at most over its scenarios
#: (~1-2 GB of device memory in float64: per scenario about ``bytes_per_scenario``); a
#: larger batch runs in chunks of a power-of-two number of scenarios
CALL_ELEMENTS = 1 << 25
#: bytes the kernel holds per element of a scenario, float64: the compiled program's memory
#: analysis on the CPU gives 19-22 (``tests/test_solver_batch.py`` checks the bound); the
#: first H200 run's vmapped kernel held about 5x its input arrays (508 KB a scenario of a
#: 1024-GPU ring); 96 covers both
BYTES_PER_ELEMENT = 96


def scenario_elements(sizes) -> int:
    """Elements (slots, entries, segments, links, flows) of one scenario of a batch padded to
    ``sizes`` = (links, flows, segments, entries, K)."""
    Lp, Np, Sp, Ep, K = sizes
    return Np * K + 2 * Ep + Sp + Lp + Np


def bytes_per_scenario(sizes) -> int:
    """Device memory one scenario of a batch takes (bytes, float64), an upper estimate.

    >>> bytes_per_scenario((1024, 1536, 2048, 4096, 4)) // 1024     # KiB
    1776
    """
    return scenario_elements(sizes) * BYTES_PER_ELEMENT


def free_memory() -> int | None:
    """Bytes the default device can still allocate (None where the backend does not say:
    the CPU)."""
    stats = local_devices()[0].memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def chunk_size(B: int, sizes, n_dev: int, free: int | None) -> int:
    """Scenarios per call: all of ``B`` when they fit :data:`CALL_ELEMENTS` and half the
    free memory, else the largest power of two that does (a multiple of the device count).
    A scenario that alone exceeds the free memory is an error naming the sizes."""
    per = bytes_per_scenario(sizes)
    if free is not None and per * n_dev > free:
        Lp, Np, Sp, Ep, K = sizes
        raise ValueError(f"capacity: one scenario of this batch needs about {per / 2**20:.1f} MiB of device memory "
                         f"({Np:,} flows x {K} slots, {Ep:,} link entries, {Sp:,} segments, {Lp:,} links) and the "
                         f"device has {free / 2**20:.1f} MiB free; solve on the CPU (jax.default_device) or split "
                         "the routing")
    fit = CALL_ELEMENTS // scenario_elements(sizes)
    if free is not None:
        fit = min(fit, free // (2 * per))
    fit = max(fit // n_dev, 1)
    if B <= fit * n_dev:
        return -(-B // n_dev) * n_dev
    return (1 << (fit.bit_length() - 1)) * n_dev


def solve_batch(rm, cap, w, d, unbounded, B, dtype, max_rounds, inner):
    """``B`` scenarios as one problem of disjoint copies (:class:`_Net`), in chunks that fit
    (:func:`chunk_size`), each sharded over the devices along the batch; unbounded flows
    start frozen; links no flow crosses are left out of the kernel (their load is 0).
    Weights and caps shared by every scenario are sent once. Returns host arrays with a
    leading scenario axis."""
    L, N = rm.n_links, rm.n_flows
    full = Segments.of(rm)
    used = np.unique(full.seg_link[full.seg_frac > 0])
    segments = full.on_links(used)
    Lu = len(used)
    Lp, Np, Sp, Ep = sizes = segments.buckets(Lu)
    jdt = jnp.dtype(dtype)
    devices = local_devices()
    n_dev = len(devices)
    chunk = chunk_size(B, (Lp, Np, Sp, Ep, full.flow_seg.shape[1]), n_dev, free_memory())
    unbounded = np.asarray(unbounded)
    d = np.where(unbounded, 0.0, d)
    shared = {name: a.ndim == 1 for name, a in (("w", np.asarray(w)), ("d", d), ("u", unbounded))}
    structure = _device_structure(segments.padded(sizes), jdt)
    one = lambda a, n, fill, dt: jnp.asarray(pad(a, Np, fill, dt)[None], bool if dt is bool else jdt)  # noqa: E731
    w_once = one(w, N, 1.0, np.float64) if shared["w"] else None
    d_once = one(d, N, 0.0, np.float64) if shared["d"] else None
    rates = np.empty((B, N), dtype)
    load = np.zeros((B, L), dtype)
    bneck = np.empty((B, N), np.int32)
    rounds = np.empty(B, np.int32)
    converged = np.empty(B, bool)
    if n_dev > 1:
        fn, split = _batch_sharded(devices, Lp, Sp, inner, segments.unit_coef)
        put = lambda a: jax.device_put(a, split)  # noqa: E731
    else:
        fn = functools.partial(_JITTED, n_links=Lp, n_segs=Sp, inner=inner, unit_coef=segments.unit_coef)
        put = lambda a: a  # noqa: E731
    cap = np.asarray(cap)
    for lo in range(0, B, chunk):
        hi = min(lo + chunk, B)
        rows = np.arange(lo, lo + chunk).clip(max=B - 1)       # the last chunk repeats its last scenario
        pick = lambda a: a[rows] if a.ndim == 2 else np.broadcast_to(a, (chunk,) + a.shape)  # noqa: E731
        capc = pad(pick(cap)[:, used], Lp, np.inf, np.float64)         # this chunk's rows only
        capc = put(jnp.asarray(capc, jdt))
        # one device takes shared weights and caps as (1, flows); sharding needs a row each
        wc = (w_once if n_dev == 1 else put(jnp.broadcast_to(w_once, (chunk, Np)))) if shared["w"] else \
            put(jnp.asarray(pad(pick(w), Np, 1.0, np.float64), jdt))
        dc = (d_once if n_dev == 1 else put(jnp.broadcast_to(d_once, (chunk, Np)))) if shared["d"] else \
            put(jnp.asarray(pad(pick(d), Np, 0.0, np.float64), jdt))
        f0 = put(jnp.asarray(pad(pick(unbounded), Np, True)))
        out = fn(*structure, capc, wc, dc, f0, jnp.int32(max_rounds), jnp.int32(0))
        r, part_load, b, k, frozen = (np.asarray(x)[:hi - lo] for x in out)
        b = b[:, :N]
        rates[lo:hi], bneck[lo:hi], rounds[lo:hi] = r[:, :N], np.where(b >= 0, used[np.maximum(b, 0)], b), k
        load[lo:hi, used] = part_load[:, :Lu]
        converged[lo:hi] = frozen.all(axis=1)
    return rates, load, bneck, rounds, converged
