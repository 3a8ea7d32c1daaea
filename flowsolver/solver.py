"""Exact weighted max-min fair rates with demand caps, in JAX.

The problem: flows ``f`` with weights ``w_f > 0`` and caps ``d_f`` share links of capacity
``c_l``; flow ``f`` puts ``A[l, f]`` of its rate on link ``l``. The weighted max-min fair
allocation makes ``rate / weight`` lexicographically maximal subject to ``A rate <= c`` and
``rate <= d``; it is what progressive filling computes.

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

Two ways to run the rounds (``method=``): the *dense* kernel below tests every link in every
round; the *frontier* kernel (:mod:`flowsolver._frontier`) tests only the lowest-share links,
so a round's cost does not grow with the number of flows (0.93 s instead of 5.2 s on a 1 M-flow
all-to-all), keeps its per-link weight sums exact, and has every result checked against the
max-min certificate (:mod:`flowsolver._certificate`). ``method="auto"`` picks the frontier
for large single scenarios.

The dense kernel consumes the matrix in the factored form of :class:`~flowsolver.RoutingMatrix`
(segments shared by flows), as COO index arrays with ``jax.ops.segment_*`` reductions of
static size. Shapes are padded to size buckets so that solving another instance of the
same bucket reuses the compiled code; a batch of scenarios (capacities, weights or caps
with a leading batch axis) is solved by ``vmap`` and, with several devices, sharded over
them along the batch axis.

Precision: float64 by default (exactness; the solver turns on 64-bit mode only inside its
own calls, never globally). ``dtype="float32"``: the dense kernel runs in float32 (half the
memory and traffic; within 1e-5 .. 1e-3 relative of float64, worst on large all-to-alls
where the residual capacity cancels); the frontier computes in float64 and rounds its
output (within 6e-8). Values float32 cannot hold are an error.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .routing import MergedRouting, RoutingMatrix
from .routing._matrix import _ranges

__all__ = ["max_min_fair", "Allocation", "STATUS", "bucket_size", "trace_count"]

#: per-scenario status codes
STATUS = {0: "ok", 1: "not converged (max_rounds or max_events reached)", 2: "unbounded flow (no link, no cap)"}
OK, NOT_CONVERGED, UNBOUNDED = 0, 1, 2

_TRACES = {"count": 0}


def trace_count() -> int:
    """How many times the solver kernel was traced (compiled) in this process."""
    return _TRACES["count"]


def bucket_size(n: int, minimum: int = 16) -> int:
    """Padded size for ``n`` items, at least ``minimum``: the next of 2^k or 1.5 x 2^k below
    4096; from 4096 on the next of 5/8, 6/8, 7/8 or 8/8 of a power of two, so large
    problems carry at most 14 % padding (on a 1 M-flow all-to-all this makes the solver
    ~10 % faster than the coarser ladder) while small ones share few compiled shapes.

    >>> [bucket_size(n) for n in (1, 17, 25, 100, 1000, 5000, 2_500_000)]
    [16, 24, 32, 128, 1024, 5120, 2621440]
    """
    n = max(int(n), minimum)
    p = 1 << (n - 1).bit_length()
    if n < 4096:
        return p * 3 // 4 if p * 3 // 4 >= n and p >= 4 else p
    return next(p * j // 8 for j in (5, 6, 7, 8) if p * j // 8 >= n)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Allocation:
    """Result of :func:`max_min_fair` (an immutable JAX pytree of host NumPy arrays, so
    that float64 results stay float64 whatever JAX's 64-bit mode).

    With a batch, every field has a leading scenario axis.

    Attributes
    ----------
    rates : array (flows,)
        Rate of each flow, bytes/s (``inf`` for an unbounded flow of a batched scenario).
    link_load : array (links,)
        ``A @ rates``, bytes/s.
    utilization : array (links,)
        ``link_load / capacity`` (0 on an unused zero-capacity link).
    bottleneck : int array (flows,)
        A saturated link on which the flow has the largest ``rate / weight``, or -1 where
        the flow is held by its demand cap.
    rounds : int
        Rounds taken.
    converged : bool
        All flows frozen within ``max_rounds``.
    status : int
        0 ok, 1 not converged, 2 unbounded flow (see ``STATUS``).
    """

    rates: np.ndarray
    link_load: np.ndarray
    utilization: np.ndarray
    bottleneck: np.ndarray
    rounds: np.ndarray
    converged: np.ndarray
    status: np.ndarray

    @property
    def ok(self):
        """True where the scenario solved cleanly."""
        return self.status == OK


# --------------------------------------------------------------------------- kernel
def _kernel(entry_link, entry_seg, entry_frac, slot_seg, slot_coef, cap, w, d, frozen0, max_rounds,
            stop_below, *, n_links, n_segs, inner, unit_coef=False, axis=None):
    """Rounds of the local-minimum freezing until every flow is frozen, ``max_rounds`` is
    reached or at most ``stop_below`` flows are left unfrozen (``stop_below`` > 0 lets the
    host compact the problem). Returns rates, the load of the frozen flows, bottlenecks,
    rounds and the frozen mask.

    ``slot_seg`` / ``slot_coef`` are (flows, K); ``unit_coef`` says every used slot has
    coefficient 1 (then ``slot_coef`` is not read). No mask is needed anywhere: padding
    slots point to the padding segment, whose entries (fraction 0) point to the padding link
    (infinite capacity, no weight), and real entries have fractions > 0. With ``axis`` (inside ``shard_map``) each
    device holds a share of the flows with the segments they use; per-link sums and minima
    are combined over the devices, so every device sees the same fair shares.
    """
    _TRACES["count"] += 1
    dtype = cap.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    n_flows, k = slot_seg.shape
    flat_seg = slot_seg.reshape(-1)
    flat_coef = slot_coef.reshape(-1)
    cap_level = jnp.where(jnp.isinf(d), inf, d / w)
    total = (lambda x: x) if axis is None else (lambda x: jax.lax.psum(x, axis))  # noqa: E731
    lowest = (lambda x: x) if axis is None else (lambda x: jax.lax.pmin(x, axis))  # noqa: E731

    def slot_to_seg_sum(x):      # per-flow values -> per-segment sums
        rep = jnp.repeat(x, k)
        return jax.ops.segment_sum(rep if unit_coef else rep * flat_coef, flat_seg, n_segs)

    def per_flow(x, reduce):     # per-slot values (flows * K,) -> reduced over each flow's K
        return reduce(x.reshape(n_flows, k), axis=1)

    def seg_to_link_sum(x):      # per-segment values -> per-link sums over entries
        return jax.ops.segment_sum(entry_frac * x[entry_seg], entry_link, n_links)

    def one_round(state):
        t, frozen, bneck, rounds = state
        # a round runs only while flows are left and max_rounds is not reached (the inner
        # loop would otherwise overshoot it by up to ``inner - 1`` rounds)
        busy = (total(jnp.sum(~frozen, dtype=jnp.int32)) > 0) & (rounds < max_rounds)
        W = total(seg_to_link_sum(slot_to_seg_sum(jnp.where(frozen, 0, w))))
        F = total(seg_to_link_sum(slot_to_seg_sum(jnp.where(frozen, t * w, 0))))
        share = jnp.where(W > 0, jnp.maximum(cap - F, 0) / jnp.where(W > 0, W, 1), inf)
        s_min = jax.ops.segment_min(share[entry_link], entry_seg, n_segs, indices_are_sorted=True)
        m = per_flow(s_min[flat_seg], jnp.min)
        val = jnp.where(frozen, inf, jnp.minimum(m, cap_level))
        s_val = jax.ops.segment_min(jnp.repeat(val, k), flat_seg, n_segs)
        near = lowest(jax.ops.segment_min(s_val[entry_seg], entry_link, n_links))
        freeze_link = (W > 0) & (share <= near)
        s_link = jax.ops.segment_max(jnp.where(freeze_link[entry_link], entry_link, -1),
                                     entry_seg, n_segs, indices_are_sorted=True)
        f_link = per_flow(s_link[flat_seg], jnp.max)
        by_link = busy & ~frozen & (f_link >= 0)
        by_cap = busy & ~frozen & ~by_link & (cap_level <= m)
        t = jnp.where(by_link, m, jnp.where(by_cap, cap_level, t))
        bneck = jnp.where(by_link, f_link, jnp.where(by_cap, -1, bneck))
        return t, frozen | by_link | by_cap, bneck, rounds + busy.astype(jnp.int32)

    def cond(state):
        left = total(jnp.sum(~state[1], dtype=jnp.int32))
        return (left > 0) & (left > stop_below) & (state[3] < max_rounds)

    def body(state):
        return jax.lax.fori_loop(0, inner, lambda _, s: one_round(s), state)

    state = (jnp.zeros(n_flows, dtype), frozen0, jnp.full(n_flows, -1, jnp.int32), jnp.int32(0))
    t, frozen, bneck, rounds = jax.lax.while_loop(cond, body, state)
    rates = jnp.where(frozen, t * w, 0)
    load = total(seg_to_link_sum(slot_to_seg_sum(rates)))
    return rates, load, bneck, rounds, frozen


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
def _as_routing(routing) -> tuple[RoutingMatrix, MergedRouting | None]:
    if isinstance(routing, MergedRouting):
        return routing.routing, routing
    if isinstance(routing, RoutingMatrix):
        return routing, None
    if sp.issparse(routing):
        if np.iscomplexobj(routing.data) or routing.dtype.kind not in "fiub":
            raise ValueError(f"routing fractions must be real numbers >= 0, got dtype {routing.dtype}")
        m = sp.csc_matrix(routing, dtype=np.float64)
        if m.nnz and not np.isfinite(m.data).all():
            raise ValueError("routing fractions must be finite numbers >= 0 (the matrix has NaN or inf)")
        if m.nnz and (m.data < 0).any():
            raise ValueError("routing fractions must be >= 0 (the matrix has negative entries)")
        m.eliminate_zeros()
        return RoutingMatrix.from_scipy(m), None
    raise ValueError(f"routing must be a RoutingMatrix or a scipy.sparse matrix (links x flows), "
                     f"got {type(routing).__name__}")


def _real_array(name, value) -> np.ndarray:
    """``value`` as a float64 array; complex, boolean or non-numeric input is an error."""
    raw = np.asarray(value)
    if raw.dtype == object:
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be real numbers, got {raw.ravel()[:3].tolist()!r}...") from None
    if np.iscomplexobj(raw):
        raise ValueError(f"{name} must be real numbers, got complex values (dtype {raw.dtype})")
    if raw.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be real numbers, got dtype {raw.dtype}")
    return raw.astype(np.float64)


def _per(name, value, n, default, *, what):
    """Broadcast a per-item input to (n,) or (B, n) float64, checking its shape."""
    if value is None:
        return np.asarray(default, dtype=np.float64)
    arr = _real_array(name, value)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise ValueError(f"{name} must have shape ({n},) or (batch, {n}) - one entry per {what} - "
                         f"got shape {arr.shape}")
    return arr


def _first_bad(mask, name, rule, arr):
    """Raise for the first entry of ``arr`` where ``mask`` holds, naming its position."""
    idx = np.argwhere(mask)[0]
    where = f"[{idx[0]}]" if len(idx) == 1 else f"[scenario {idx[0]}, {idx[1]}]"
    raise ValueError(f"{name}{where} must be {rule}, got {arr[tuple(idx)].item()!r}")


def max_min_fair(routing, capacity=None, *, weights=None, demands=None, dtype=None,
                 max_rounds: int | None = None, inner_rounds: int = 4,
                 compact: bool | None = None, method: str = "auto") -> Allocation:
    """Weighted max-min fair rates of the flows of ``routing``.

    Parameters
    ----------
    routing : RoutingMatrix, MergedRouting or scipy.sparse matrix (links x flows)
        Entry (l, f): fraction of flow f's rate on link l (>= 0).
    capacity : array (links,) or (batch, links), optional
        Bytes/s; >= 0 (0 = failed link). Default: the RoutingMatrix's link capacities.
    weights : array (flows,) or (batch, flows), optional
        Max-min weights, > 0; default the RoutingMatrix's (1 for a scipy matrix).
    demands : array (flows,) or (batch, flows), optional
        Rate caps in bytes/s, >= 0 (``inf`` = none); default the RoutingMatrix's.
    dtype : "float64" (default) or "float32"
    max_rounds : int, optional
        Bound on the rounds (default: enough in exact arithmetic: the number of flows for
        the dense method; flows + links + flow-link pairs for the frontier, whose rounds
        either freeze flows or recompute a link's sum).
    inner_rounds : int
        Rounds per convergence check (a host round trip per check on a GPU).
    compact : bool, optional
        Dense method: shrink a single large problem on the host as its flows freeze
        (default: on for a single scenario of more than ``COMPACT_FLOWS`` flows; batches
        are never compacted).
    method : "auto", "dense" or "frontier"
        ``"dense"`` tests every link in every round (batches run as one vmapped call);
        ``"frontier"`` tests only the lowest-share links each round, at a cost independent
        of the number of flows (see ``flowsolver._frontier``; a batch is solved scenario by
        scenario). Both give progressive filling's rates. ``"auto"``: frontier for a single
        scenario of at least ``FRONTIER_FLOWS`` flows with paths of at most 32 links and
        few capped flows, dense otherwise.

    Returns
    -------
    Allocation
        With a leading batch axis when any input had one. A single scenario with an
        unbounded flow raises; a batch reports ``status == 2`` for that scenario.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0]])               # one link, two flows
    >>> a = max_min_fair(A, [3.0], weights=[1.0, 0.5])
    >>> [round(float(x), 6) for x in a.rates]
    [2.0, 1.0]
    >>> int(a.bottleneck[0]), bool(a.converged)
    (0, True)
    """
    rm, merged = _as_routing(routing)
    n_links, n_flows = rm.n_links, rm.n_flows
    if dtype is None:
        dtype = "float64"
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype("float32"), np.dtype("float64")):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype}")
    cap = _per("capacity", capacity, n_links, rm.capacity, what="link")
    w = _per("weights", weights, n_flows, rm.weights, what="flow")
    d = _per("demands", demands, n_flows, rm.demands, what="flow")
    if (bad := ~(cap >= 0)).any():
        _first_bad(bad, "capacity", "a number >= 0 bytes/s (0 = failed link)", cap)
    if (bad := ~(w > 0) | ~np.isfinite(w)).any():
        _first_bad(bad, "weights", "a finite number > 0", w)
    if (bad := ~(d >= 0)).any():
        _first_bad(bad, "demands", "a number >= 0 bytes/s (inf = no cap)", d)
    batched = [a.shape[0] for a in (cap, w, d) if a.ndim == 2]
    if batched and len(set(batched)) > 1:
        raise ValueError(f"batched inputs disagree on the batch size: {sorted(set(batched))}")
    if max_rounds is not None and (isinstance(max_rounds, bool) or not isinstance(max_rounds, (int, np.integer))
                                   or not 1 <= max_rounds < 2**31):
        raise ValueError(f"max_rounds must be an integer in 1 ... 2^31 - 1, got {max_rounds!r}")
    if isinstance(inner_rounds, bool) or not isinstance(inner_rounds, (int, np.integer)) or inner_rounds < 1:
        raise ValueError(f"inner_rounds must be an integer >= 1, got {inner_rounds!r}")
    if method not in ("auto", "dense", "frontier"):
        raise ValueError(f"method must be 'auto', 'dense' or 'frontier', got {method!r}")
    batch = batched[0] if batched else None
    crossing = _crossing(rm, cap)           # flows held by at least one finite link
    unbounded = ~crossing & np.isinf(d)     # (N,) or (B, N)
    if batch is None and unbounded.any():
        f = int(np.flatnonzero(unbounded)[0])
        raise ValueError(f"flow {f} crosses no link of finite capacity and has no demand cap: its "
                         "max-min rate is unbounded; give it a demand or route it over a link")
    compact = (batch is None) if compact is None else bool(compact)
    mode = "dense" if method == "auto" else method
    if method == "auto" and batch is None and n_flows >= FRONTIER_FLOWS:
        from . import _frontier

        if _frontier.eligible(rm, d):
            mode = "frontier"
    if dtype == np.float32:
        _check_float32(rm, cap, w, d, dense=mode == "dense")
    out = _solve(rm, cap, w, d, unbounded, batch, dtype, None if max_rounds is None else int(max_rounds),
                 int(inner_rounds), compact, mode)
    if merged is not None:
        out = _expand(out, merged)
    return out


def _check_float32(rm, cap, w, d, *, dense: bool):
    """float32 rates must hold every capacity and cap; the dense kernel, which runs in
    float32, also every weight, every link's sum of weights and every level (rate / weight)
    it forms (the frontier computes in float64 and only rounds its rates). An overflow would
    return ``inf``, NaN or 0 rates with status ok."""
    big = float(np.finfo(np.float32).max) / 16          # headroom for sums of a few terms
    tiny = float(np.finfo(np.float32).tiny)
    for name, arr in (("capacity", cap), ("demands", d)):
        if (bad := np.isfinite(arr) & (arr > big)).any():
            _first_bad(bad, name, f"at most {big:.3g} bytes/s with dtype='float32' (use dtype='float64')", arr)
    if not dense:
        return
    if (bad := (w < tiny) | (w > big)).any():
        _first_bad(bad, "weights", f"in {tiny:.3g} ... {big:.3g} with dtype='float32' (use dtype='float64')", w)
    sums = np.array([rm.link_loads(row) for row in np.atleast_2d(w)])
    if (sums > big).any():
        link = int(np.argwhere(sums > big)[0][-1])
        raise ValueError(f"weights: the flows on link {link} sum to {sums.max():.3g}, more than dtype='float32' "
                         f"holds ({big:.3g}); use dtype='float64'")
    finite = np.concatenate([cap[np.isfinite(cap)].ravel(), d[np.isfinite(d)].ravel()])
    top = float(finite.max(initial=0.0))
    if top / float(w.min()) > big:
        raise ValueError(f"dtype='float32' cannot hold the levels (rate / weight) of this problem: largest "
                         f"capacity or cap {top:.3g} over smallest weight {float(w.min()):.3g} exceeds "
                         f"{big:.3g}; use dtype='float64'")


def _crossing(rm: RoutingMatrix, cap: np.ndarray) -> np.ndarray:
    """Flows that cross at least one link of finite capacity: (flows,) or (batch, flows)."""
    lengths = np.diff(rm.seg_ptr)
    owner = np.repeat(np.arange(rm.n_segments), lengths)
    coef = np.ones(rm.flow_seg.shape) if rm.flow_coef is None else rm.flow_coef
    ok = (rm.flow_seg >= 0) & (coef > 0)
    seg = np.maximum(rm.flow_seg, 0)

    def one(finite):
        hit = (rm.seg_frac > 0) & finite[rm.seg_link]
        has = np.bincount(owner[hit], minlength=rm.n_segments) > 0
        return (ok & has[seg]).any(axis=1)

    finite = np.isfinite(cap)
    if finite.ndim == 1:
        return one(finite)
    return np.stack([one(row) for row in finite])


#: single solves with more flows than this are compacted on the host as flows freeze
COMPACT_FLOWS = 1 << 15
#: compact when at most this fraction of the flows is left unfrozen (0.65 measured ~5 %
#: faster than 0.5 and ~15 % faster than 0.8 on the 1 M-flow benchmark, with the fine ladder)
COMPACT_KEEP = 0.65
#: single solves with more flows than this are spread over all local devices (dense method)
SHARD_FLOWS = 1 << 15
#: method="auto" uses the frontier method for single solves of at least this many flows
#: (after compilation, frontier vs dense: fat_tree(12) all-to-all 186 k flows 0.17 / 0.73 s,
#: fat_tree(16) 1 M 0.93 / 5.2 s, 1 M equal bottlenecks 0.22 / 0.28 s, 200 k incast
#: 0.060 / 0.052 s; benchmarks/solver_speed.py)
FRONTIER_FLOWS = 1 << 17


@dataclass
class _Problem:
    """The routing structure of the flows still being solved (host arrays)."""

    seg_ptr: np.ndarray
    seg_link: np.ndarray
    seg_frac: np.ndarray
    flow_seg: np.ndarray
    flow_coef: np.ndarray | None
    flows: np.ndarray                 # global flow ids

    @classmethod
    def of(cls, rm: RoutingMatrix) -> "_Problem":
        return cls(rm.seg_ptr, rm.seg_link, rm.seg_frac, rm.flow_seg, rm.flow_coef,
                   np.arange(rm.n_flows))

    def restrict(self, keep: np.ndarray) -> "_Problem":
        """The sub-problem of the flows ``keep`` (local indices) and the segments they use."""
        flow_seg = self.flow_seg[keep]
        used = np.unique(flow_seg[flow_seg >= 0])
        remap = np.full(len(self.seg_ptr) - 1, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        lengths = np.diff(self.seg_ptr)[used]
        idx = _ranges(self.seg_ptr[used], lengths)
        return _Problem(np.concatenate([[0], np.cumsum(lengths)]), self.seg_link[idx], self.seg_frac[idx],
                        np.where(flow_seg >= 0, remap[np.maximum(flow_seg, 0)], -1).astype(np.int32),
                        None if self.flow_coef is None else self.flow_coef[keep], self.flows[keep])

    @property
    def unit_coef(self) -> bool:
        return self.flow_coef is None or bool(np.all(self.flow_coef[self.flow_seg >= 0] == 1.0))

    def padded(self, n_links: int):
        """Device-ready arrays padded to buckets: padding link ``Lp-1``, segment ``Sp-1``
        and flows ``N..Np-1`` carry nothing."""
        S = len(self.seg_ptr) - 1
        N, K = self.flow_seg.shape
        owner = np.repeat(np.arange(S, dtype=np.int32), np.diff(self.seg_ptr))
        keep = self.seg_frac > 0          # the kernel relies on real entries being > 0
        owner, seg_link, seg_frac = owner[keep], self.seg_link[keep], self.seg_frac[keep]
        E = len(seg_link)
        Lp, Np, Sp, Ep = bucket_size(n_links + 1), bucket_size(N + 1), bucket_size(S + 1), bucket_size(E + 1)
        entry_link = np.full(Ep, Lp - 1, dtype=np.int32)
        entry_seg = np.full(Ep, Sp - 1, dtype=np.int32)
        entry_frac = np.zeros(Ep)
        entry_link[:E], entry_seg[:E], entry_frac[:E] = seg_link, owner, seg_frac
        slot_seg = np.full((Np, K), Sp - 1, dtype=np.int32)
        slot_coef = np.zeros((Np, K))
        used = self.flow_seg >= 0
        slot_seg[:N] = np.where(used, self.flow_seg, Sp - 1)
        slot_coef[:N] = np.where(used, 1.0 if self.flow_coef is None else self.flow_coef, 0.0)
        return (entry_link, entry_seg, entry_frac, slot_seg, slot_coef), (Lp, Np, Sp)


def _pad_rows(a, n, fill):
    out = np.full(a.shape[:-1] + (n,), fill, dtype=np.float64)
    out[..., :a.shape[-1]] = a
    return out


def _device_structure(arrays, jdt):
    link, seg, frac, slot_seg, slot_coef = arrays
    return [jnp.asarray(link), jnp.asarray(seg), jnp.asarray(frac, jdt), jnp.asarray(slot_seg),
            jnp.asarray(slot_coef, jdt)]


def _solve_single(rm, cap, w, d, dtype, max_rounds, inner, compact):
    """One scenario. Large problems are compacted on the host whenever a third of their flows
    have frozen (frozen loads folded into the capacities), so later rounds work on fewer
    flows and segments; with several devices, large problems are split between them by
    flows. Shapes stay on the bucket ladder."""
    L, N = rm.n_links, rm.n_flows
    problem = _Problem.of(rm)
    residual = cap.astype(np.float64).copy()
    rates = np.zeros(N)
    bneck = np.full(N, -1, dtype=np.int32)
    rounds_done = 0
    converged = False
    jdt = jnp.dtype(dtype)
    load = np.zeros(L)
    devices = tuple(jax.devices())
    while True:
        n = len(problem.flows)
        stop_below = int(n * COMPACT_KEEP) if (compact and n > COMPACT_FLOWS) else 0
        if len(devices) > 1 and n > SHARD_FLOWS:
            done_flows, r, b, part_load, k = _run_sharded(problem, residual, w, d, devices, jdt, L,
                                                          max_rounds - rounds_done, stop_below, inner)
        else:
            done_flows, r, b, part_load, k = _run_one(problem, residual, w, d, jdt, L,
                                                      max_rounds - rounds_done, stop_below, inner)
        rounds_done += k
        rates[problem.flows[done_flows]] = r
        bneck[problem.flows[done_flows]] = b
        load += part_load
        if done_flows.all():
            converged = True
            break
        if rounds_done >= max_rounds:
            break
        residual = residual - part_load
        problem = problem.restrict(np.flatnonzero(~done_flows))
    return rates.astype(dtype), load.astype(dtype), bneck, np.int32(rounds_done), np.bool_(converged)


def _run_one(problem, residual, w, d, jdt, L, max_rounds, stop_below, inner):
    n = len(problem.flows)
    arrays, (Lp, Np, Sp) = problem.padded(L)
    frozen0 = np.ones(Np, dtype=bool)
    frozen0[:n] = False
    out = _JITTED(*_device_structure(arrays, jdt), jnp.asarray(_pad_rows(residual, Lp, np.inf), jdt),
                  jnp.asarray(_pad_rows(w[problem.flows], Np, 1.0), jdt),
                  jnp.asarray(_pad_rows(d[problem.flows], Np, 0.0), jdt), jnp.asarray(frozen0),
                  jnp.int32(max_rounds), jnp.int32(stop_below), n_links=Lp, n_segs=Sp, inner=inner,
                  unit_coef=problem.unit_coef)
    r, part_load, b, k, frozen = (np.asarray(x) for x in out)
    done = frozen[:n]
    return done, r[:n][done], b[:n][done], part_load[:L], int(k)


def _run_sharded(problem, residual, w, d, devices, jdt, L, max_rounds, stop_below, inner):
    """The problem's flows split into one contiguous share per device; each share carries
    the segments it uses (shared segments are copied)."""
    n = len(problem.flows)
    D = len(devices)
    bounds = np.linspace(0, n, D + 1).astype(np.int64)
    shares = [problem.restrict(np.arange(bounds[i], bounds[i + 1])) for i in range(D)]
    padded = [sh.padded(L) for sh in shares]
    Lp = padded[0][1][0]
    Np = max(p[1][1] for p in padded)
    Sp = max(p[1][2] for p in padded)
    Ep = max(len(p[0][0]) for p in padded)
    K = problem.flow_seg.shape[1]
    el = np.full((D, Ep), Lp - 1, dtype=np.int32)
    es = np.full((D, Ep), Sp - 1, dtype=np.int32)
    ef = np.zeros((D, Ep))
    ss = np.full((D, Np, K), Sp - 1, dtype=np.int32)
    sc = np.zeros((D, Np, K))
    wp = np.ones((D, Np))
    dp = np.zeros((D, Np))
    f0 = np.ones((D, Np), dtype=bool)
    for i, (sh, ((link, seg, frac, slot_seg, slot_coef), (_, np_i, sp_i))) in enumerate(zip(shares, padded)):
        m = len(sh.flows)
        E = int(np.count_nonzero(frac > 0))     # real entries come first, padding after
        el[i, :E], ef[i, :E] = link[:E], frac[:E]
        es[i, :E] = seg[:E]
        ss[i, :m] = np.where(slot_seg[:m] == sp_i - 1, Sp - 1, slot_seg[:m])
        sc[i, :m] = slot_coef[:m]
        wp[i, :m], dp[i, :m] = w[sh.flows], d[sh.flows]
        f0[i, :m] = False
    fn, split = _sharded(devices, Lp, Sp, inner, problem.unit_coef)
    put = lambda a, dt=None: jax.device_put(jnp.asarray(a, dt), split)  # noqa: E731
    out = fn(put(el), put(es), put(ef, jdt), put(ss), put(sc, jdt),
             jnp.asarray(_pad_rows(residual, Lp, np.inf), jdt), put(wp, jdt), put(dp, jdt), put(f0),
             jnp.int32(max_rounds), jnp.int32(stop_below))
    r, part_load, b, k, frozen = (np.asarray(x) for x in out)
    done = np.concatenate([frozen[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    rr = np.concatenate([r[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    bb = np.concatenate([b[i, :len(sh.flows)] for i, sh in enumerate(shares)])
    return done, rr[done], bb[done], part_load[:L], int(k)


def _solve_batch(rm, cap, w, d, unbounded, B, dtype, max_rounds, inner):
    L, N = rm.n_links, rm.n_flows
    problem = _Problem.of(rm)
    arrays, (Lp, Np, Sp) = problem.padded(L)
    jdt = jnp.dtype(dtype)
    capp = _pad_rows(np.broadcast_to(cap, (B, L)), Lp, np.inf)
    wp = _pad_rows(np.broadcast_to(w, (B, N)), Np, 1.0)
    dp = _pad_rows(np.broadcast_to(np.where(unbounded, 0.0, d), (B, N)), Np, 0.0)
    frozen0 = np.ones((B, Np), dtype=bool)
    frozen0[:, :N] = np.broadcast_to(unbounded, (B, N))
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
    out = _BATCHED(*_device_structure(arrays, jdt), *scen, jnp.int32(max_rounds), jnp.int32(0),
                   n_links=Lp, n_segs=Sp, inner=inner, unit_coef=problem.unit_coef)
    r, load, b, k, frozen = (np.asarray(x)[:B] for x in out)
    return r[:, :N], load[:, :L], b[:, :N], k, frozen.all(axis=1)


#: check every converged frontier solve against the max-min certificate (flowsolver._certificate)
CHECK_FRONTIER = True


def _solve_frontier(rm, cap, w, d, unbounded, batch, dtype, max_rounds, inner):
    """Frontier method, one scenario at a time (rows of the batch in turn), in float64
    whatever ``dtype``; each converged result is checked against the max-min certificate
    and, should it ever fail, re-solved with the dense method (with a warning)."""
    from . import _certificate, _frontier

    L, N = rm.n_links, rm.n_flows
    paths = _frontier.path_table(rm)
    rows = 1 if batch is None else batch
    pick = lambda a, b: a if a.ndim == 1 else a[b]  # noqa: E731
    out = []
    for b in range(rows):
        cap_b, w_b, d_b, skip_b = pick(cap, b), pick(w, b), pick(d, b), pick(unbounded, b)
        lay = _frontier.build(*paths, cap_b, w_b, d_b, skip_b)
        r, load, bn, k, frozen = _frontier.solve(lay, _frontier.round_bound(lay) if max_rounds is None else max_rounds,
                                                 inner)
        r, load, bn, conv = r[:N], load[:L], bn[:N], bool(frozen[:N].all())
        bad = _certificate.violation(rm, cap_b, w_b, d_b, r, bn, skip=skip_b, paths=paths) if conv and CHECK_FRONTIER else None
        if bad is not None:
            warnings.warn(f"max_min_fair: the frontier method's result failed its max-min certificate ({bad}); "
                          "re-solved with the dense method", RuntimeWarning, stacklevel=4)
            with jax.enable_x64(True):
                r, load, bn, kd, conv = _solve_batch(rm, cap_b[None], w_b[None], d_b[None], skip_b[None], 1,
                                                     np.dtype(np.float64), max_rounds or N + 1, inner)
            r, load, bn, k, conv = r[0], load[0], bn[0], int(k) + int(kd[0]), bool(conv[0])
        out.append((r.astype(dtype), load.astype(dtype), bn, np.int32(k), np.bool_(conv)))
    if batch is None:
        return out[0]
    return tuple(np.stack([o[i] for o in out]) for i in range(5))


def _solve(rm, cap, w, d, unbounded, batch, dtype, max_rounds, inner, compact, mode="dense"):
    with jax.enable_x64(dtype == np.float64):
        if mode != "frontier" and max_rounds is None:
            max_rounds = rm.n_flows + 1          # each dense round freezes at least one flow
        if mode == "frontier":
            rates, load, bneck, rounds, conv = _solve_frontier(rm, cap, w, d, unbounded, batch, dtype,
                                                               max_rounds, inner)
        elif batch is None:
            rates, load, bneck, rounds, conv = _solve_single(rm, cap, w, d, dtype, max_rounds, inner, compact)
        else:
            rates, load, bneck, rounds, conv = _solve_batch(rm, cap, w, d, unbounded, batch, dtype,
                                                            max_rounds, inner)
    L = rm.n_links
    capb = cap if batch is None else np.broadcast_to(cap, (batch, L))
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(capb > 0, load / np.where(capb > 0, capb, 1), np.where(load > 0, np.inf, 0.0))
    util = util.astype(rates.dtype)
    ubr = np.broadcast_to(unbounded, rates.shape)
    rates = np.where(ubr, np.inf, rates).astype(rates.dtype)
    status = np.where(np.any(ubr, axis=-1), UNBOUNDED, np.where(conv, OK, NOT_CONVERGED)).astype(np.int32)
    return Allocation(rates=rates, link_load=load, utilization=util, bottleneck=bneck, rounds=rounds,
                      converged=conv, status=status)


def _expand(out: Allocation, merged: MergedRouting) -> Allocation:
    inv = merged.inverse
    counts = merged.counts.astype(out.rates.dtype)
    return Allocation(rates=out.rates[..., inv] / counts[inv], link_load=out.link_load,
                      utilization=out.utilization, bottleneck=out.bottleneck[..., inv],
                      rounds=out.rounds, converged=out.converged, status=out.status)
