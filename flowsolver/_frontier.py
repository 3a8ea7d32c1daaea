"""The *frontier* method of :func:`flowsolver.max_min_fair`: local-minimum rounds that look
only at the lowest-share links.

The dense method tests every link in every round, which costs passes over all flows even
when a round freezes a few hundred of a million. Here a round

1. takes the ``K`` links of lowest fair share (always including the exact minimum);
2. reads the flows of those links from per-link flow lists (``B`` pairs at most, lowest
   shares first), and for each such flow the minimum share over its path;
3. freezes each candidate that is a local minimum (its share is the smallest on every one
   of its unfrozen flows), its unfrozen flows at its share;
4. subtracts the frozen flows' weight from, and adds their rate to, the links of their
   paths (scatters into link-sized arrays).

Any set of local minima may be frozen in a round (each is where progressive filling
freezes its flows), and the global minimum always is, so the result is progressive
filling's, exactly as for the dense method; only the number of rounds can differ (on the
1 M-flow fat-tree all-to-all: 457 against 445). A round costs O(B x path length + links),
independent of the number of flows, so nothing is compacted.

Demand caps become one private link per capped flow (capacity = the cap, the flow its only
user): a flow held by its cap is then frozen by that link, reported as bottleneck -1.
Flows with a zero cap are frozen at 0 before the first round.

Per-link sums (weight, frozen load) are kept in float64 whatever the flows' dtype: they are
updated incrementally, and float32 would drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .solver import _TRACES, bucket_size

INT_MIN = int(np.iinfo(np.int32).min)
INT_MAX = int(np.iinfo(np.int32).max)

#: flow-link pairs a round reads (the buffer also holds the largest link's list in full)
PAIRS_PER_ROUND = 1 << 15
#: the widest path table (links per flow, padded) the frontier method accepts
MAX_PATH = 32
#: smallest flow / link bucket (the pair buffer and lists start at 16 x this)
SMALL = 64


@dataclass
class Layout:
    """Device-ready arrays of one problem: flow-major path table, per-link flow lists."""

    path: np.ndarray          # (Np, P) int32 link ids, padding link Lp-1
    frac: np.ndarray | None   # (Np, P) fractions, None when every entry is 1 and weights are integers
    link_ptr: np.ndarray      # (Lp+1,) int32: flows of link l are link_flow[link_ptr[l]:link_ptr[l+1]]
    link_flow: np.ndarray     # (Ep,) int32
    cap: np.ndarray           # (Lp,) capacities of real then private (cap) links, inf padding
    weights: np.ndarray       # (Np,)
    frozen0: np.ndarray       # (Np,) bool: padding and zero-cap flows
    n_real: int               # real links (private cap links come after them)
    K: int
    B: int

    @property
    def n_links(self) -> int:
        return len(self.cap)


def slot_widths(rm) -> list[int]:
    """Longest segment each slot of ``rm.flow_seg`` uses (0 for a slot no flow uses)."""
    lengths = np.append(np.diff(rm.seg_ptr), 0)          # slot -1 -> the extra 0
    return [int(lengths[rm.flow_seg[:, k]].max(initial=0)) for k in range(rm.flow_seg.shape[1])]


def path_width(rm) -> int:
    """Width of :func:`path_table`'s table, without building it."""
    return sum(slot_widths(rm))


def path_table(rm):
    """(flows, P) link ids of each flow's path (padding ``-1``) and their fractions (``None``
    when every fraction is 1), from a RoutingMatrix's factored form: segment rows gathered
    per slot, no per-entry sort."""
    S = rm.n_segments
    n_flows = rm.n_flows
    lengths = np.diff(rm.seg_ptr)
    unit = rm.flow_coef is None and bool(np.all(rm.seg_frac == 1.0))
    lam = max(int(lengths.max()) if S else 0, 1)
    seg_tab = np.full((S + 1, lam), -1, dtype=np.int32)
    seg_fr = None if unit else np.zeros((S + 1, lam))
    if len(rm.seg_link):
        row = np.repeat(np.arange(S), lengths)
        col = np.arange(len(rm.seg_link)) - np.repeat(rm.seg_ptr[:-1], lengths)
        seg_tab[row, col] = rm.seg_link
        if not unit:
            seg_fr[row, col] = rm.seg_frac
    links, fracs = [], []
    for k, width in enumerate(slot_widths(rm)):
        if width == 0:
            continue
        segs = np.where(rm.flow_seg[:, k] >= 0, rm.flow_seg[:, k], S)
        links.append(seg_tab[segs, :width])
        if not unit:
            fr = seg_fr[segs, :width]
            fracs.append(fr if rm.flow_coef is None else fr * rm.flow_coef[:, k:k + 1])
    if not links:
        return np.full((n_flows, 1), -1, np.int32), None
    path = np.concatenate(links, axis=1) if len(links) > 1 else links[0]
    if unit:
        return path, None
    frac = np.concatenate(fracs, axis=1)
    path[frac <= 0] = -1
    return path, np.where(path >= 0, frac, 0.0)


def build(path, frac, cap, w, d, skip) -> Layout:
    """The frontier layout of one scenario (``cap`` (L,), ``w``, ``d`` (N,) float64);
    flows in ``skip`` (unbounded ones of a batch) and zero-cap flows start frozen at 0."""
    N, L = len(w), len(cap)
    capped = np.flatnonzero(np.isfinite(d) & (d > 0) & ~skip)
    zero = (np.isfinite(d) & (d == 0)) | skip
    V = len(capped)
    if V:
        extra = np.full((N, 1), -1, np.int32)
        extra[capped, 0] = L + np.arange(V, dtype=np.int32)
        path = np.concatenate([path, extra], axis=1)
        if frac is not None:
            frac = np.concatenate([frac, (extra >= 0).astype(np.float64)], axis=1)
    # coarse minimum buckets: small problems share a handful of compiled shapes
    Lp, Np = bucket_size(L + V + 1, SMALL), bucket_size(N + 1, SMALL)
    P = path.shape[1]
    Pp = 4 if P <= 4 else 8 if P <= 8 else -(-P // 4) * 4 if P <= 32 else -(-P // 16) * 16
    real = path >= 0
    full_path = np.full((Np, Pp), Lp - 1, dtype=np.int32)
    full_path[:N, :P] = np.where(real, path, Lp - 1)
    unit = (frac is None or bool(np.all(frac[real] == 1.0))) and bool(np.all((w == np.round(w)) & (w <= 2 ** 20)))
    full_frac = None
    if not unit:
        full_frac = np.zeros((Np, Pp))
        full_frac[:N, :P] = real if frac is None else frac
    # per-link flow lists: the transpose of the flow-major (CSC) pattern
    counts = real.sum(axis=1)
    csc = sp.csc_matrix((np.ones(int(counts.sum()), dtype=np.int8), path[real],
                         np.concatenate([[0], np.cumsum(counts)])), shape=(L + V, N))
    csr = csc.tocsr()
    E = csr.nnz
    Ep = bucket_size(E + 1, 16 * SMALL)
    link_flow = np.full(Ep, Np - 1, dtype=np.int32)
    link_flow[:E] = csr.indices
    link_ptr = np.full(Lp + 1, E, dtype=np.int32)
    link_ptr[:L + V + 1] = csr.indptr
    deg = np.diff(csr.indptr)
    used = int(np.count_nonzero(deg))
    # a fixed buffer: on a 16.7 M-flow all-to-all, 2^15 pairs per round took 32 s (3618 rounds)
    # where E / 256 = 2^19 pairs took 210 s (3195 rounds)
    B = bucket_size(max(int(deg.max(initial=1)), min(PAIRS_PER_ROUND, E)), min(16 * SMALL, PAIRS_PER_ROUND))
    K = int(np.clip(B // max(E // max(used, 1), 1), 32, 1024))
    K = min(1 << (K.bit_length() - 1), Lp)
    capacity = np.full(Lp, np.inf)
    capacity[:L] = cap
    capacity[L:L + V] = d[capped]
    weights = np.ones(Np)
    weights[:N] = w
    frozen0 = np.ones(Np, dtype=bool)
    frozen0[:N] = zero
    return Layout(full_path, full_frac, link_ptr, link_flow, capacity, weights, frozen0, L, K, B)


def eligible(rm, d: np.ndarray) -> bool:
    """Whether the frontier method suits this problem: short paths, few capped flows."""
    capped = int(np.count_nonzero(np.isfinite(d) & (d > 0)))
    return path_width(rm) + (capped > 0) <= MAX_PATH and capped <= max(rm.n_links, 4096)


def _kernel(path, frac, link_ptr, link_flow, cap, w, frozen0, max_rounds, n_real, *, n_links, K, B, inner):
    _TRACES["count"] += 1
    Np, P = path.shape
    unit = frac is None
    acc = cap.dtype                    # float64 per-link sums
    pad_link = n_links - 1
    live0 = ~frozen0
    E = link_flow.shape[0]
    W = jnp.zeros(n_links, acc)
    cnt = None if unit else jnp.zeros(n_links, jnp.int32)
    for j in range(P):
        counted = live0 & (path[:, j] != pad_link)        # the padding link stays inactive
        contrib = w if unit else w * frac[:, j]
        W = W.at[path[:, j]].add(jnp.where(counted, contrib, 0).astype(acc))
        if not unit:
            cnt = cnt.at[path[:, j]].add(counted.astype(jnp.int32))
    pos = jnp.arange(B, dtype=jnp.int32)
    method = "compare_all" if K <= 64 else "scan"

    def one_round(state):
        claim, bneck, W, F, cnt, level, left, rounds = state
        active = (W > 0) if unit else (cnt > 0)
        share = jnp.where(active, jnp.maximum(cap - F, 0) / jnp.where(W > 0, W, 1), jnp.inf)
        # candidates: the exact minimum, then the K-1 lowest in float32 (ordering only)
        lowest = jnp.argmin(share).astype(jnp.int32)
        neg, rest = jax.lax.top_k(-share.astype(jnp.float32).at[lowest].set(jnp.inf), K - 1)
        cand = jnp.concatenate([lowest[None], rest.astype(jnp.int32)])
        sc = share[cand]
        valid = jnp.concatenate([jnp.isfinite(sc[:1]), jnp.isfinite(neg)])   # each link once
        deg = jnp.where(valid, link_ptr[cand + 1] - link_ptr[cand], 0)
        cum = jnp.cumsum(deg)
        fits = valid & (cum <= B)
        c = jnp.searchsorted(cum, pos, side="right", method=method)
        cc = jnp.minimum(c, K - 1)
        gid = link_ptr[cand[cc]] + pos - (cum[cc] - deg[cc])
        inside = (c < K) & fits[cc]
        f = link_flow[jnp.where(inside, gid, E - 1)]
        live = inside & (claim[f] == INT_MIN)
        rows = jax.lax.optimization_barrier(path[f])
        on = [rows[:, j] for j in range(P)]
        m = share[on[0]]
        for j in range(1, P):
            m = jnp.minimum(m, share[on[j]])
        near = jax.ops.segment_min(jnp.where(live, m, jnp.inf), cc, K, indices_are_sorted=True)
        freeze = fits & (sc <= near)
        take = live & freeze[cc]
        link = cand[cc]
        # each frozen flow is claimed by one pair: the largest key, real links before caps
        key = jnp.where(link < n_real, gid, gid - E)
        claim = claim.at[jnp.where(take, f, Np)].max(key, mode="drop")
        mine = take & (claim[f] == key)
        bneck = bneck.at[jnp.where(mine, f, Np)].set(link, mode="drop")
        level = level.at[jnp.where(freeze, cand, n_links)].set(sc, mode="drop")
        at = jnp.where(mine, sc[cc], 0)                   # (0 x inf would be NaN)
        wm = jnp.where(mine, w[f], 0).astype(acc)
        fr = None if unit else frac[f].astype(acc)
        for j in range(P):
            a = wm if unit else wm * fr[:, j]
            W = W.at[on[j]].add(-a)
            F = F.at[on[j]].add(a * at)
            if not unit:
                cnt = cnt.at[on[j]].add(-(mine & (on[j] != pad_link)).astype(jnp.int32))
        busy = (left > 0).astype(jnp.int32)
        left = left - jnp.sum(mine, dtype=jnp.int32)
        return claim, bneck, W, F, cnt, level, left, rounds + busy

    def cond(state):
        return (state[6] > 0) & (state[7] < max_rounds)

    def body(state):
        return jax.lax.fori_loop(0, inner, lambda _, s: one_round(s), state) if inner > 1 else one_round(state)

    state = (jnp.where(frozen0, INT_MAX, INT_MIN).astype(jnp.int32), jnp.full(Np, pad_link, jnp.int32),
             W, jnp.zeros(n_links, acc), cnt, jnp.zeros(n_links, acc), jnp.sum(live0, dtype=jnp.int32),
             jnp.int32(0))
    claim, bneck, W, F, cnt, level, left, rounds = jax.lax.while_loop(cond, body, state)
    frozen = claim != INT_MIN
    rates = jnp.where(frozen & live0, level[bneck] * w.astype(acc), 0)
    return rates, F, jnp.where(bneck < n_real, bneck, -1), rounds, frozen


_JITTED = jax.jit(_kernel, static_argnames=("n_links", "K", "B", "inner"))


def solve(lay: Layout, dtype, max_rounds: int, inner: int):
    """Run the kernel on one layout; returns host arrays (rates, load, bottleneck, rounds,
    frozen) over the padded flows and links."""
    jdt = jnp.dtype(dtype)
    with jax.enable_x64(True):
        out = _JITTED(jnp.asarray(lay.path), None if lay.frac is None else jnp.asarray(lay.frac, jdt),
                      jnp.asarray(lay.link_ptr), jnp.asarray(lay.link_flow), jnp.asarray(lay.cap, jnp.float64),
                      jnp.asarray(lay.weights, jdt), jnp.asarray(lay.frozen0), jnp.int32(max_rounds),
                      jnp.int32(lay.n_real), n_links=lay.n_links, K=lay.K, B=lay.B, inner=inner)
        return tuple(np.asarray(x) for x in out)

