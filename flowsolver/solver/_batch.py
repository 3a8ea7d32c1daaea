"""Batches of scenarios for the dense method (:mod:`flowsolver.solver._dense`): one problem
of disjoint copies per call, in chunks that fit the device.

A batch of ``B`` scenarios of one routing (capacities, weights or caps with a leading
scenario axis) is solved by the dense kernel as one problem of ``B`` disjoint copies (see
``_dense_kernel._Net``), never ``vmap``: a vmapped segment reduction becomes a scatter with batch
dimensions, which ran ~100x slower than the bytes it moves (a 1024-GPU ring's failure
scenarios: 486 to 2,618 per second on 16 CPU cores). Links no flow crosses are left out of
the kernel (their load is 0); weights and caps shared by every scenario are sent once. The
scenarios run in calls of at most :data:`CALL_ELEMENTS` elements and half the device's free
memory (:func:`chunk_size`), each sharded over the devices along the batch.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._dense_kernel import _JITTED, _kernel, device_structure
from ._placement import local_devices
from ._problem import CompactRouting, pad


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


#: slot, entry, segment and link elements one batched call holds at most over its scenarios
#: (~1-2 GB of device memory in float64: per scenario about ``bytes_per_scenario``); a
#: larger batch runs in chunks of a power-of-two number of scenarios
CALL_ELEMENTS = 1 << 25
#: bytes the kernel holds per element of a scenario, float64: the compiled program's memory
#: analysis on the CPU gives 19-22 (``tests/solver/test_solver_batch.py`` checks the bound); the
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
    """``B`` scenarios as one problem of disjoint copies (``_dense_kernel._Net``), in chunks that fit
    (:func:`chunk_size`), each sharded over the devices along the batch; unbounded flows
    start frozen; links no flow crosses are left out of the kernel (their load is 0).
    Weights and caps shared by every scenario are sent once. Returns host arrays with a
    leading scenario axis."""
    L, N = rm.n_links, rm.n_flows
    full = CompactRouting.of(rm)
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
    structure = device_structure(segments.padded(sizes), jdt)
    one = lambda a, n, fill, dt: jnp.asarray(pad(a, Np, fill, dt)[None], bool if dt is bool else jdt)  # noqa: E731
    w_once = one(w, N, 1.0, np.float64) if shared["w"] else None
    d_once = one(d, N, 0.0, np.float64) if shared["d"] else None
    rates = np.empty((B, N), dtype)
    load = np.empty((B, L), dtype)
    util = np.empty((B, L), dtype) if jdt == jnp.float64 else None
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
    used_j = jnp.asarray(used.astype(np.int32))
    for lo in range(0, B, chunk):
        hi = min(lo + chunk, B)
        # a short last chunk repeats its last scenario (one compiled shape); full ones are slices
        rows = slice(lo, hi) if hi - lo == chunk else np.arange(lo, lo + chunk).clip(max=B - 1)
        pick = lambda a: a[rows] if a.ndim == 2 else np.broadcast_to(a, (chunk,) + a.shape)  # noqa: E731
        capc = put(jnp.asarray(pad(pick(cap)[:, used], Lp, np.inf, np.float64), jdt))   # this chunk's rows only
        # one device takes shared weights and caps as (1, flows); sharding needs a row each
        wc = (w_once if n_dev == 1 else put(jnp.broadcast_to(w_once, (chunk, Np)))) if shared["w"] else \
            put(jnp.asarray(pad(pick(w), Np, 1.0, np.float64), jdt))
        dc = (d_once if n_dev == 1 else put(jnp.broadcast_to(d_once, (chunk, Np)))) if shared["d"] else \
            put(jnp.asarray(pad(pick(d), Np, 0.0, np.float64), jdt))
        f0 = put(jnp.asarray(pad(pick(unbounded), Np, True)))
        r, part_load, b, k, frozen = fn(*structure, capc, wc, dc, f0, jnp.int32(max_rounds), jnp.int32(0))
        # every link's load (and, in float64, utilization) laid out on the device: the host
        # copies rows, no per-column scatter or division over B x links
        full_load, full_util = _full_width(part_load, capc, used_j, n_links=L)
        r, b, k, frozen = (np.asarray(x)[:hi - lo] for x in (r, b, k, frozen))
        b = b[:, :N]
        rates[lo:hi], bneck[lo:hi], rounds[lo:hi] = r[:, :N], np.where(b >= 0, used[np.maximum(b, 0)], b), k
        load[lo:hi] = np.asarray(full_load)[:hi - lo]
        if util is not None:
            util[lo:hi] = np.asarray(full_util)[:hi - lo]
        converged[lo:hi] = frozen.all(axis=1)
    return rates, load, bneck, rounds, converged, util


@functools.partial(jax.jit, static_argnames=("n_links",))
def _full_width(part_load, capc, used, *, n_links):
    """Loads and utilizations (``load / capacity``, 0 on an unused zero-capacity link, inf on
    a loaded one) on all ``n_links`` links from the kernel's loads on the ``used`` ones."""
    Lu = used.shape[0]
    load_u, cap_u = part_load[:, :Lu], capc[:, :Lu]
    live = cap_u > 0
    util_u = jnp.where(live, load_u / jnp.where(live, cap_u, 1), jnp.where(load_u > 0, jnp.inf, 0))
    zero = jnp.zeros((part_load.shape[0], n_links), part_load.dtype)
    return zero.at[:, used].set(load_u), zero.at[:, used].set(util_u)
