"""Batches of scenarios for the dense method (:mod:`flowsolver.solver._dense`): one problem
of disjoint copies per call, in chunks that fit the device.

A batch of ``B`` scenarios of one routing (capacities, weights or caps with a leading
scenario axis) is solved by the dense kernel as one problem of ``B`` disjoint copies (see
``_dense_kernel._Net``), never ``vmap``: a vmapped segment reduction becomes a scatter with batch
dimensions, which ran ~100x slower than the bytes it moves (a 1024-GPU ring's failure
scenarios: 486 to 2,618 per second on 16 CPU cores). Links no flow crosses are left out of
the kernel (their load is 0); capacities, weights and caps shared by every scenario are sent
once. The scenarios run in calls of at most :data:`CALL_ELEMENTS` elements and half the
device's free memory (:func:`chunk_size`), each sharded over the devices along the batch.

The host's work per scenario is one copy of its rows each way: a call takes the caller's
rows as they are; :func:`_prepare` gathers the used links and pads, the kernel (compiled
for the padded sizes) solves and :func:`_layout` lays the loads and utilizations out on
every link, all on the device. (The host's gathers, padding and conversions of every row
and the previous scatter of the loads cost 81-145 us a scenario of a 1024-GPU ring on a
2-core CPU, growing with the batch; 57-93 us now, flat from 1,024 scenarios on;
docs/performance.md.)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._dense_kernel import _JITTED, _kernel, device_structure
from ._placement import local_devices
from ._input_checks import subnormal_rule
from ._problem import CompactRouting, pad


@functools.lru_cache(maxsize=None)
def _batch_sharded(devices: tuple, shared: tuple, n_links: int, n_segs: int, inner: int, unit_coef: bool):
    """The kernel for a batch spread over ``devices`` (scenarios split between them, each
    device solving its share as one problem); ``shared``: whether the weights and the caps
    are one row for every scenario (then every device holds it whole)."""
    mesh = jax.sharding.Mesh(np.array(devices), ("batch",))
    P = jax.sharding.PartitionSpec
    kernel = functools.partial(_kernel, n_links=n_links, n_segs=n_segs, inner=inner, unit_coef=unit_coef)
    split, same = P("batch"), P()
    rows = tuple(same if one else split for one in shared)
    fn = jax.shard_map(kernel, mesh=mesh, in_specs=(same,) * 5 + (split,) + rows + (split, same, same),
                       out_specs=(split,) * 5, check_vma=False)
    return jax.jit(fn), jax.sharding.NamedSharding(mesh, split), jax.sharding.NamedSharding(mesh, same)


#: slot, entry, segment and link elements one batched call holds at most over its scenarios
#: (~1-2 GB of device memory in float64: per scenario about ``bytes_per_scenario``); a
#: larger batch runs in chunks of a power-of-two number of scenarios
CALL_ELEMENTS = 1 << 25
#: bytes the kernel holds per element of a scenario, float64: the compiled program's memory
#: analysis on the CPU gives 19-22 (``tests/solver/test_solver_batch.py`` checks the bound); the
#: first H200 run's vmapped kernel held about 5x its input arrays (508 KB a scenario of a
#: 1024-GPU ring); 96 covers both
BYTES_PER_ELEMENT = 96
#: bytes per scenario and link of the routing (all links, not the kernel's): its capacity in,
#: its load and utilization out (float64) and a gather's temporary; the CPU's memory analysis
#: of a 1024-GPU ring's batched call (7,168 links) gives 506 KB a scenario in all, what the
#: first H200 run measured as its peak (0.52 MB)
FULL_WIDTH_BYTES = 32


def scenario_elements(sizes) -> int:
    """Elements (slots, entries, segments, links, flows) of one scenario of a batch padded to
    ``sizes`` = (links, flows, segments, entries, K) of the kernel, and optionally the
    routing's own link count ``L`` last: its capacities in and its loads and utilizations out
    on every link (:func:`_prepare`, :func:`_layout`), 3 ``L`` more."""
    Lp, Np, Sp, Ep, K, *rest = sizes
    return Np * K + 2 * Ep + Sp + Lp + Np + 3 * (rest[0] if rest else 0)


def bytes_per_scenario(sizes) -> int:
    """Device memory one scenario of a batch takes (bytes, float64), an upper estimate:
    :data:`BYTES_PER_ELEMENT` per kernel element, :data:`FULL_WIDTH_BYTES` per link of the
    routing (``sizes``' optional sixth entry).

    >>> bytes_per_scenario((1024, 1536, 2048, 4096, 4)) // 1024     # KiB
    1776
    >>> bytes_per_scenario((1024, 1536, 2048, 4096, 4, 4000)) // 1024   # and 4,000 links in all
    1901
    """
    Lp, Np, Sp, Ep, K, *rest = sizes
    return scenario_elements((Lp, Np, Sp, Ep, K)) * BYTES_PER_ELEMENT + (rest[0] if rest else 0) * FULL_WIDTH_BYTES


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
        Lp, Np, Sp, Ep, K, *rest = sizes
        every = f", {rest[0]:,} links in all" if rest else ""
        raise ValueError(f"capacity: one scenario of this batch needs about {per / 2**20:.1f} MiB of device memory "
                         f"({Np:,} flows x {K} slots, {Ep:,} link entries, {Sp:,} segments, {Lp:,} links{every}) "
                         f"and the device has {free / 2**20:.1f} MiB free; solve on the CPU (jax.default_device) or "
                         "split the routing")
    fit = CALL_ELEMENTS // scenario_elements(sizes)
    if free is not None:
        fit = min(fit, free // (2 * per))
    fit = max(fit // n_dev, 1)
    if B <= fit * n_dev:
        return -(-B // n_dev) * n_dev
    return (1 << (fit.bit_length() - 1)) * n_dev


def solve_batch(rm, cap, w, d, unbounded, B, dtype, max_rounds, inner, *, per_link=True, scan_subnormal=False):
    """``B`` scenarios as one problem of disjoint copies (``_dense_kernel._Net``), in chunks that fit
    (:func:`chunk_size`), each sharded over the devices along the batch; unbounded flows
    start frozen; links no flow crosses are left out of the kernel (their load is 0).
    Capacities, weights and caps shared by every scenario are sent once. The host sends each
    chunk's rows as they are and copies the results' rows: the gathers and padding
    (:func:`_prepare`) and the layout on every link (:func:`_layout`) run on the device, around
    the kernel compiled for the padded sizes (shared by every routing of the same buckets).
    Returns host arrays with a leading scenario axis (``per_link`` False: the loads and
    utilizations None, neither laid out nor copied). ``scan_subnormal``: the capacity rows
    (float64, a row per scenario) are scanned for subnormal numbers on the device, as the
    gathers read them, rather than by a host pass over every row first; one found raises
    ``ValueError`` as :meth:`~._problem.Problem.check_range` does."""
    L, N = rm.n_links, rm.n_flows
    used, segments = _kernel_links(rm)
    Lp, Np, Sp, Ep = sizes = segments.buckets(len(used), coarse=False)
    jdt = jnp.dtype(dtype)
    devices = local_devices()
    n_dev = len(devices)
    arrays = segments.padded(sizes, len(used), coarse=False)
    chunk = chunk_size(B, (Lp, Np, Sp, Ep, arrays[3].shape[1], L), n_dev, free_memory())
    structure = device_structure(arrays, jdt)
    with_util = per_link and jdt == jnp.float64
    # the kernel link of each link (-1: none) and the link of each kernel link (-1: padding)
    where = np.full(L, -1, np.int32)
    where[used] = np.arange(len(used), dtype=np.int32)
    used_j, where_j = jnp.asarray(pad(used.astype(np.int32), Lp, -1)), jnp.asarray(where)
    rows_of = [np.asarray(a) for a in (cap, w, d, unbounded)]
    shared = tuple(a.ndim == 1 for a in rows_of)
    if n_dev > 1:
        # the caps the kernel gets are per scenario where the unbounded flows are (their cap 0)
        kernel, split, whole = _batch_sharded(devices, (shared[1], shared[2] and shared[3]), Lp, Sp, inner,
                                              segments.unit_coef)
        put, put_once = (lambda a: jax.device_put(a, split)), (lambda a: jax.device_put(a, whole))  # noqa: E731
    else:
        kernel = functools.partial(_JITTED, n_links=Lp, n_segs=Sp, inner=inner, unit_coef=segments.unit_coef)
        put = put_once = jax.device_put
    once = [put_once(a[None]) if one else None for a, one in zip(rows_of, shared)]

    def call(lo, hi):
        # a short last chunk repeats its last scenario (one compiled shape); full ones are slices
        rows = slice(lo, hi) if hi - lo == chunk else np.arange(lo, lo + chunk).clip(max=B - 1)
        per = [o if one else put(a[rows]) for a, o, one in zip(rows_of, once, shared)]
        capc, wc, dc, f0, tiny = _prepare(*per, used_j, n_links=Lp, n_flows=Np, dtype=jdt.name, scan=scan_subnormal)
        r, part_load, b, k, frozen = kernel(*structure, capc, wc, dc, f0, jnp.int32(max_rounds), jnp.int32(0))
        full_load, full_util, bn, conv = _layout(part_load, capc, b, frozen, used_j, where_j, with_util=with_util,
                                                 with_load=per_link)
        return r, full_load, full_util, bn, k, conv, tiny

    if chunk >= B:
        # one call: its rows are the results, copied once from the device's arrays (not into
        # arrays allocated first and filled: a second pass over each scenario's 126 KB on the ring)
        r, full_load, full_util, bn, k, conv, tiny = (None if x is None else np.array(np.asarray(x)[:B] if w is None
                                                                                      else np.asarray(x)[:B, :w])
                                                      for x, w in zip(call(0, B), (N, L, L, N, None, None, None)))
        _refuse_subnormal(cap, tiny)
        return r, full_load, bn, k, conv, full_util
    rates = np.empty((B, N), dtype)
    load = np.empty((B, L), dtype) if per_link else None
    util = np.empty((B, L), dtype) if with_util else None
    bneck = np.empty((B, N), np.int32)
    rounds = np.empty(B, np.int32)
    converged = np.empty(B, bool)
    tiny = np.empty(B, bool) if scan_subnormal else None
    results = (rates, load, util, bneck, rounds, converged, tiny)

    def collect(lo, hi, out):   # a call's rows into the results (waits for the call)
        for dest, x in zip(results, out):
            if dest is not None:    # (the kernel's flows are padded: the first N of each row)
                dest[lo:hi] = np.asarray(x)[:hi - lo] if dest.ndim == 1 else np.asarray(x)[:hi - lo, :dest.shape[1]]

    pending = None
    for lo in range(0, B, chunk):
        out = call(lo, min(lo + chunk, B))
        # the next call is queued before this one's rows are copied: the device solves while
        # the host copies (two calls' results at most are held at once)
        if pending is not None:
            collect(*pending)
        pending = (lo, min(lo + chunk, B), out)
    collect(*pending)
    _refuse_subnormal(cap, tiny)
    return rates, load, bneck, rounds, converged, util


def _refuse_subnormal(cap, tiny):
    """Raise for the first subnormal capacity of the scenarios ``tiny`` flags (None: not scanned)."""
    if tiny is not None and tiny.any():
        row = int(np.flatnonzero(tiny)[0])
        least = float(np.finfo(np.float64).tiny)
        j = int(np.flatnonzero((cap[row] > 0) & (cap[row] < least))[0])
        raise ValueError(f"capacity[scenario {row}, {j}] must be {subnormal_rule(np.float64)}, got {cap[row, j].item()!r}")


@functools.partial(jax.jit, static_argnames=("n_links", "n_flows", "dtype", "scan"))
def _prepare(cap, w, d, unbounded, used, *, n_links, n_flows, dtype, scan=False):
    """A call's kernel inputs from the caller's rows, on the device: ``cap`` (b or 1, links)
    over every link gathered onto the kernel's ``used`` links (``n_links``, -1: padding, inf);
    ``w``, ``d`` and ``unbounded`` (b or 1, flows; 1: shared) padded to ``n_flows`` (weight 1,
    cap 0, frozen), an unbounded flow's cap 0. At least one of the four has a row per scenario.
    With ``scan`` (``cap`` float64), also whether each row of ``cap`` holds a subnormal number,
    read from its bits (XLA on a CPU treats a subnormal operand as 0 in a comparison), else None."""
    dt = jnp.dtype(dtype)
    b, n = max(a.shape[0] for a in (cap, w, d, unbounded)), w.shape[1]
    if cap.shape[1] == 0:       # a routing of no links: every kernel link is padding (a take from nothing fails)
        capc = jnp.full((cap.shape[0], n_links), jnp.inf, dt)
    else:
        capc = jnp.where(used >= 0, jnp.take(cap.astype(dt), jnp.maximum(used, 0), axis=1), jnp.asarray(jnp.inf, dt))
    grow = lambda a, fill: jnp.pad(a, ((0, 0), (0, n_flows - n)), constant_values=fill)  # noqa: E731
    tiny = None
    if scan:                    # 0 < bits < tiny's bits: a positive subnormal (a sign bit makes it large)
        bits = jax.lax.bitcast_convert_type(cap, jnp.uint64)
        least = np.asarray(np.finfo(np.float64).tiny).view(np.uint64)
        tiny = jnp.any((bits - np.uint64(1)) < least - np.uint64(1), axis=1)
    return (jnp.broadcast_to(capc, (b, n_links)), grow(w.astype(dt), 1), grow(jnp.where(unbounded, 0, d).astype(dt), 0),
            jnp.broadcast_to(grow(unbounded, True), (b, n_flows)), tiny)


@functools.partial(jax.jit, static_argnames=("with_util", "with_load"))
def _layout(part_load, capc, bneck, frozen, used, where, *, with_util, with_load=True):
    """The kernel's results laid out for the host: loads (``with_load``; None without) and,
    ``with_util``, utilizations ``load / capacity`` (0 on an unused zero-capacity link, inf
    on a loaded one) on every link (``where``: each link's kernel link, -1: none, load 0),
    bottlenecks as link ids of the routing, convergence per scenario. Gathers, not scatters."""

    def full(x):                # (b, n_links) on the used links -> (b, links)
        return jnp.where(where >= 0, jnp.take(x, jnp.maximum(where, 0), axis=1), jnp.zeros((), x.dtype))

    util = None
    if with_util:
        live = capc > 0
        util = full(jnp.where(live, part_load / jnp.where(live, capc, 1), jnp.where(part_load > 0, jnp.inf, 0)))
    bottleneck = jnp.where(bneck >= 0, jnp.take(used, jnp.maximum(bneck, 0)), bneck)
    return full(part_load) if with_load else None, util, bottleneck, frozen.all(axis=1)


def _kernel_links(rm):
    """The links some flow crosses (sorted ids) and the routing's segments renumbered onto them."""
    full = CompactRouting.of(rm)
    used = np.unique(full.seg_link[full.seg_frac > 0])
    return used, full.on_links(used)
