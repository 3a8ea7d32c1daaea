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
filling's, exactly as for the dense method; only the number of rounds can differ. A round
costs O(B x path length + links), independent of the number of flows.

When many links tie at the lowest share (a million independent equal bottlenecks, the
host links of a symmetric all-to-all) a *level round* freezes all of them at once: every
flow that crosses a link at the global minimum share freezes there, one pass over the
path table. It is taken when the frontier would need more rounds for the tie than one
pass over all flows costs.

Exact per-link weight sums. A link's unfrozen weight ``W = sum of w x fraction`` over its
live flows is kept as an int64 count of quanta ``2^e`` (``e`` per link): every contribution
is rounded to the link's quantum once, and the same rounded integer is added at the start
and subtracted when the flow freezes, so the sum has no cancellation error whatever the
weights' range (float sums of 1e9 and 1e-9 do). Its error against the real sum is at most
half a quantum per live flow. When that bound exceeds 2^-45 of the sum and the link has
lost half of its weight since its sum was last computed, the link is *untrusted*: it is
put first among the next round's candidates, its sum is recomputed from its live flows at
a finer quantum, and until then no flow crossing it may freeze. With integer weights and unit fractions (every all-to-all
without weights) the quanta are the weights themselves and nothing is ever recomputed.
Everything runs in float64 whatever the output dtype.

Demand caps become one private link per capped flow (capacity = the cap, the flow its only
user): a flow held by its cap is then frozen by that link, reported as bottleneck -1.
Flows with a zero cap are frozen at 0 before the first round.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .solver import _TRACES, bucket_size

INT_MIN = int(np.iinfo(np.int32).min)
INT_MAX = int(np.iinfo(np.int32).max)
#: the order key (see ``_order_key``) of a float64 +inf share: not a candidate
INF_KEY = float(np.array((0x7FF00000 >> 1) + 0x00800000, np.int32).view(np.float32))

#: flow-link pairs a round reads at most (the buffer also holds the largest link's list in full)
PAIRS_PER_ROUND = 1 << 15
#: the widest path table (links per flow, padded) ``method="auto"`` sends to the frontier
MAX_PATH = 32
#: a round's fixed cost on a 2-core CPU, in pair reads (~0.2 ms, measured on fat_tree(12))
ROUND_PAIRS = 1 << 14
#: smallest flow / link bucket (the pair buffer and lists start at 16 x this)
SMALL = 64
#: a link's weight sum is trusted while its error bound is below 2^-TRUST_BITS of the sum,
#: or while it holds at least half of its last recomputed sum (then its error is at most
#: twice that of a fresh sum, ``live flows x 2^-61`` relative)
TRUST_BITS = 45
#: quanta per link: the first sum of a link is below 2^QUANTUM_BITS quanta (int64 headroom)
QUANTUM_BITS = 61


@dataclass
class Layout:
    """Device-ready arrays of one problem: flow-major path table, per-link flow lists."""

    path: np.ndarray             # (Np, P) int32 link ids, padding link Lp-1
    frac: np.ndarray | None      # (Np, P) fractions, None when every entry is 1 and weights are integers
    link_ptr: np.ndarray         # (Lp+1,) int32: flows of link l are link_flow[link_ptr[l]:link_ptr[l+1]]
    link_flow: np.ndarray        # (Ep,) int32
    link_frac: np.ndarray | None  # (Ep,) the fraction of each (link, flow) pair (None with frac)
    cap: np.ndarray              # (Lp,) capacities of real then private (cap) links, inf padding
    weights: np.ndarray          # (Np,)
    frozen0: np.ndarray          # (Np,) bool: padding and zero-cap flows
    n_real: int                  # real links (private cap links come after them)
    K: int
    B: int
    level_ties: int              # ties at the minimum share that make a round a level round

    @property
    def n_links(self) -> int:
        return len(self.cap)


_WIDTHS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def slot_widths(rm) -> list[int]:
    """Longest segment each slot of ``rm.flow_seg`` uses (0 for a slot no flow uses);
    remembered per RoutingMatrix (immutable), since ``auto`` asks before the solve does."""
    if (known := _WIDTHS.get(rm)) is not None:
        return known
    lengths = np.append(np.diff(rm.seg_ptr), 0)          # slot -1 -> the extra 0
    widths = [int(lengths[rm.flow_seg[:, k]].max(initial=0)) for k in range(rm.flow_seg.shape[1])]
    _WIDTHS[rm] = widths
    return widths


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
    widths = slot_widths(rm)
    P = sum(widths)
    if P == 0:
        return np.full((n_flows, 1), -1, np.int32), None
    path = np.empty((n_flows, P), np.int32)
    frac = None if unit else np.empty((n_flows, P))
    off = 0
    for k, width in enumerate(widths):
        if width == 0:
            continue
        segs = np.where(rm.flow_seg[:, k] >= 0, rm.flow_seg[:, k], S)
        # np.take of a contiguous (segments, width) table: ~2x faster than row indexing
        path[:, off:off + width] = np.take(np.ascontiguousarray(seg_tab[:, :width]), segs, axis=0)
        if not unit:
            frac[:, off:off + width] = np.take(np.ascontiguousarray(seg_fr[:, :width]), segs, axis=0)
            if rm.flow_coef is not None:
                frac[:, off:off + width] *= rm.flow_coef[:, k:k + 1]
        off += width
    if unit:
        return path, None
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
    # every entry of the path table costs a gather and a scatter per read: pad short paths
    # not at all (a handful of compiled widths), long ones to a multiple of 4 or 16
    Pp = P if P <= 8 else -(-P // 4) * 4 if P <= 32 else -(-P // 16) * 16
    real = path >= 0
    full_path = np.full((Np, Pp), Lp - 1, dtype=np.int32)
    full_path[:N, :P] = np.where(real, path, Lp - 1)
    unit = (frac is None or bool(np.all(frac[real] == 1.0))) and bool(np.all((w == np.round(w)) & (w <= 2 ** 20)))
    full_frac = None
    if not unit:
        full_frac = np.zeros((Np, Pp))
        full_frac[:N, :P] = real if frac is None else np.where(real, frac, 0.0)
    # per-link flow lists: the transpose of the flow-major (CSC) pattern; a flow that lists a
    # link twice keeps two pairs (the weight sums add and remove each entry on its own)
    counts = real.sum(axis=1)
    data = np.ones(int(counts.sum()), np.int8) if unit else full_frac[:N, :P][real]
    csc = sp.csc_matrix((data, path[real], np.concatenate([[0], np.cumsum(counts)])), shape=(L + V, N))
    csr = csc.tocsr()
    E = csr.nnz
    if E != int(counts.sum()):                      # scipy merged duplicate entries
        raise AssertionError("per-link flow lists lost entries")
    Ep = bucket_size(E + 1, 16 * SMALL)
    link_flow = np.full(Ep, Np - 1, dtype=np.int32)
    link_flow[:E] = csr.indices
    link_frac = None
    if not unit:
        link_frac = np.zeros(Ep)
        link_frac[:E] = csr.data
    link_ptr = np.full(Lp + 1, E, dtype=np.int32)
    link_ptr[:L + V + 1] = csr.indptr
    deg = np.diff(csr.indptr)
    used = int(np.count_nonzero(deg))
    # pairs per round ~ 4 sqrt(E), a power of two: a round's cost grows with B, the rounds
    # fall as B grows. Measured after compilation (2-core CPU): fat_tree(12) all-to-all
    # (1.45 M pairs) 0.092 s at 4096 / 0.122 s at 8192 / 0.45 s at 32768; fat_tree(16)
    # (8.4 M pairs) 0.53 / 0.49 / 0.58 / 0.93 s at 4096 / 8192 / 16384 / 32768; on the
    # 16.7 M-flow all-to-all 2^15 pairs took 32 s where 2^19 took 210 s
    want = 1 << max(int(4 * np.sqrt(max(E, 1))).bit_length() - 1, 0)
    B = bucket_size(max(int(deg.max(initial=1)), min(PAIRS_PER_ROUND, want, E)), min(16 * SMALL, PAIRS_PER_ROUND))
    K = int(np.clip(B // max(E // max(used, 1), 1), 32, 1024))
    K = min(1 << (K.bit_length() - 1), Lp)
    capacity = np.full(Lp, np.inf)
    capacity[:L] = cap
    capacity[L:L + V] = d[capped]
    weights = np.ones(Np)
    weights[:N] = w
    frozen0 = np.ones(Np, dtype=bool)
    frozen0[:N] = zero
    # a level round (one pass over all flows) against the frontier rounds a tie needs (K
    # links each, a round costing B pairs plus a fixed cost of about ROUND_PAIRS pairs)
    level_ties = max(K, -(-K * Np // (B + ROUND_PAIRS)))
    return Layout(full_path, full_frac, link_ptr, link_flow, link_frac, capacity, weights, frozen0, L, K, B,
                  level_ties)


def eligible(rm, d: np.ndarray) -> bool:
    """Whether the frontier method suits this problem: short paths, few capped flows."""
    capped = int(np.count_nonzero(np.isfinite(d) & (d > 0)))
    return path_width(rm) + (capped > 0) <= MAX_PATH and capped <= max(rm.n_links, 4096)


def round_bound(lay: Layout) -> int:
    """Rounds that always suffice: each round freezes a flow or recomputes an untrusted
    link's sum, and a link is recomputed at most once more than flows leave it."""
    return int(min((lay.frozen0.size + lay.n_links + int(lay.link_ptr[-1]) + 1), np.iinfo(np.int32).max))


def _order_key(share):
    """A float32 key with the order of float64 ``share >= 0`` over its whole range (+inf
    included, as ``INF_KEY``): the upper 31 bits of the float64 pattern, offset to a normal
    float32 pattern. 19 mantissa bits: for ordering only. (XLA:CPU's top_k is ~8x faster
    on float32 than on int32 and ~30x faster than on float64.)"""
    bits = (jax.lax.bitcast_convert_type(share, jnp.int64) >> 33).astype(jnp.int32) + 0x00800000
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _quantize(a, e):
    """Contributions ``a`` (float64 >= 0) as whole quanta ``2^e`` of their link (int64)."""
    return jnp.round(jnp.ldexp(a, -e)).astype(jnp.int64)


def _quantum_exponent(total):
    """Exponent ``e`` such that ``total`` is below ``2^QUANTUM_BITS`` quanta ``2^e``."""
    return jnp.where(total > 0, jnp.frexp(total)[1] - QUANTUM_BITS, 0).astype(jnp.int32)


def _kernel(path, frac, link_ptr, link_flow, link_frac, cap, w, frozen0, max_rounds, n_real, *,
            n_links, K, B, inner, level_ties):
    _TRACES["count"] += 1
    Np, P = path.shape
    unit = frac is None
    f64 = jnp.float64
    pad_link = n_links - 1
    live0 = ~frozen0
    E = link_flow.shape[0]
    real = path != pad_link

    def contributions(rows_w, rows_frac, mask):
        """(M, P) float64 weight x fraction of the masked flows on their path entries."""
        a = rows_w[:, None] if unit else rows_w[:, None] * rows_frac
        return jnp.where(mask, a, 0.0)

    # initial sums: quantum exponents from a float64 pass, then exact integer sums
    a0 = contributions(w, frac, live0[:, None] & real)
    if unit:
        quanta = None
        W = jnp.zeros(n_links, jnp.int64).at[path].add(a0.astype(jnp.int64))
        cnt = None
    else:
        exponent = _quantum_exponent(jnp.zeros(n_links, f64).at[path].add(a0))
        W = jnp.zeros(n_links, jnp.int64).at[path].add(_quantize(a0, exponent[path]))
        quanta = (exponent, W)        # per link: quantum exponent, sum when last computed
        cnt = jnp.zeros(n_links, jnp.int32).at[path].add((live0[:, None] & real).astype(jnp.int32))
    pos = jnp.arange(B, dtype=jnp.int32)
    M = max(B // 8, 1)                       # frozen pairs released in the compacted form

    def fair_shares(W, F, quanta, cnt):
        Wf = W.astype(f64) if unit else jnp.ldexp(W.astype(f64), quanta[0])
        # no weight left: no share (inactive, or untrusted until recomputed), never a divide by 1
        share = jnp.where(W > 0, jnp.maximum(cap - F, 0) / jnp.where(W > 0, Wf, 1.0), jnp.inf)
        if unit:
            return share, None
        # error bound: half a quantum per live flow
        tight = W.astype(f64) >= cnt.astype(f64) * 2.0 ** (TRUST_BITS - 1)
        untrusted = (cnt > 0) & ~tight & (2 * W < quanta[1])
        return share, untrusted

    def release(W, F, cnt, quanta, rows, f, mine, lev):
        """Remove the flows ``mine`` (rows ``rows`` of the path table, ids ``f``) from their
        links' weight sums and add their rates (``lev`` x weight x fraction) to the loads."""
        on = real[f] & mine[:, None]
        a = contributions(w[f], None if unit else frac[f], on)
        q = a.astype(jnp.int64) if unit else _quantize(a, quanta[0][rows])
        W = W.at[rows].add(-q)
        F = F.at[rows].add(a * lev[:, None])
        if not unit:
            cnt = cnt.at[rows].add(-on.astype(jnp.int32))
        return W, F, cnt

    def frontier_round(state, share, untrusted, go):
        claim, bneck, W, F, cnt, quanta, level, left = state
        # candidates: the untrusted links first (to be recomputed; the first always fits in
        # the buffer, so every round repairs one or, with none left, freezes the exact
        # minimum), then the lowest shares by the upper 32 bits of their float64 pattern
        # (monotone for shares >= 0 over the whole float64 range; ordering only)
        trusted = share if unit else jnp.where(untrusted, jnp.inf, share)
        key = -_order_key(trusted)
        if not unit:
            key = jnp.where(untrusted, 1.0, key)
        first = jnp.argmin(trusted) if unit else jnp.where(jnp.any(untrusted), jnp.argmax(key), jnp.argmin(trusted))
        first = first.astype(jnp.int32)
        top, rest = jax.lax.top_k(key.at[first].set(-jnp.inf), K - 1)
        cand = jnp.concatenate([first[None], rest.astype(jnp.int32)])
        valid = jnp.concatenate([key[first][None], top]) > -INF_KEY
        deg = jnp.where(valid, link_ptr[cand + 1] - link_ptr[cand], 0)
        cum = jnp.cumsum(deg)
        fits = valid & (cum <= B)
        # c[p] = candidates whose lists end at or before pair p (with many candidates: one
        # scatter of K marks and a running sum over the consecutive positions)
        if K <= 64:
            c = jnp.searchsorted(cum, pos, side="right", method="compare_all")
        else:
            c = jnp.cumsum(jnp.zeros(B, jnp.int32).at[cum].add(1, mode="drop"))
        cc = jnp.minimum(c, K - 1)
        gid = link_ptr[cand[cc]] + pos - (cum[cc] - deg[cc])
        inside = (c < K) & fits[cc]
        safe_gid = jnp.where(inside, gid, E - 1)
        f = link_flow[safe_gid]
        live = inside & (claim[f] == INT_MIN)
        test = share
        if not unit:
            # recompute the untrusted candidates' sums from their live flows, finer quanta
            a = jnp.where(live, w[f] * link_frac[safe_gid], 0.0)
            e_new = _quantum_exponent(jax.ops.segment_sum(a, cc, K, indices_are_sorted=True))
            W_new = jax.ops.segment_sum(_quantize(a, e_new[cc]), cc, K, indices_are_sorted=True)
            fix = fits & untrusted[cand]
            at = jnp.where(fix, cand, n_links)
            W = W.at[at].set(W_new, mode="drop")
            quanta = (quanta[0].at[at].set(e_new, mode="drop"), quanta[1].at[at].set(W_new, mode="drop"))
            fixed = jnp.zeros(n_links, bool).at[at].set(True, mode="drop")
            fresh = jnp.where(W_new > 0, jnp.maximum(cap[cand] - F[cand], 0) / jnp.ldexp(W_new.astype(f64), e_new),
                              jnp.inf)
            # an untrusted link not recomputed blocks every flow that crosses it
            test = jnp.where(untrusted & ~fixed, -jnp.inf, share).at[at].set(fresh, mode="drop")
        sc = test[cand]
        rows = path[f]
        m = jnp.min(test[rows], axis=1)
        near = jax.ops.segment_min(jnp.where(live, m, jnp.inf), cc, K, indices_are_sorted=True)
        freeze = go & fits & jnp.isfinite(sc) & (sc <= near)
        take = live & freeze[cc]
        link = cand[cc]
        # each frozen flow is claimed by one pair: the largest key, real links before caps
        claim_key = jnp.where(link < n_real, gid, gid - E)
        claim = claim.at[jnp.where(take, f, Np)].max(claim_key, mode="drop")
        mine = take & (claim[f] == claim_key)
        bneck = bneck.at[jnp.where(mine, f, Np)].set(link, mode="drop")
        level = level.at[jnp.where(freeze, cand, n_links)].set(sc, mode="drop")
        lev = jnp.where(mine, sc[cc], 0.0)
        n_mine = jnp.sum(mine, dtype=jnp.int32)

        def compacted(W, F, cnt):           # the frozen pairs first: scatters of M, not B, rows
            idx = jnp.nonzero(mine, size=M, fill_value=0)[0]
            keep = jnp.arange(M, dtype=jnp.int32) < n_mine
            return release(W, F, cnt, quanta, rows[idx], f[idx], keep, lev[idx])

        W, F, cnt = jax.lax.cond(n_mine <= M, compacted, lambda W, F, cnt: release(W, F, cnt, quanta, rows, f, mine, lev),
                                 W, F, cnt)
        return claim, bneck, W, F, cnt, quanta, level, left - n_mine

    def level_round(state, share, untrusted, go):
        """Every flow that crosses a link at the global minimum share freezes there."""
        claim, bneck, W, F, cnt, quanta, level, left = state
        s_min = jnp.min(share)
        hit = share[path] <= s_min                                  # padding link: inf
        mine = go & jnp.any(hit, axis=1) & (claim == INT_MIN)
        link = jnp.take_along_axis(path, jnp.argmax(hit, axis=1)[:, None], axis=1)[:, 0]
        claim = jnp.where(mine, INT_MAX, claim)
        bneck = jnp.where(mine, link, bneck)
        level = jnp.where(go & (share <= s_min), s_min, level)
        ids = jnp.arange(Np, dtype=jnp.int32)
        W, F, cnt = release(W, F, cnt, quanta, path, ids, mine, jnp.where(mine, s_min, 0.0))
        return claim, bneck, W, F, cnt, quanta, level, left - jnp.sum(mine, dtype=jnp.int32)

    def busy(carry):
        (*_, left), rounds = carry
        return (left > 0) & (rounds < max_rounds)

    def shares_and_ties(carry):
        claim, bneck, W, F, cnt, quanta, level, left = carry[0]
        share, untrusted = fair_shares(W, F, quanta, cnt)
        s_min = jnp.min(share)
        ties = (jnp.sum(share <= s_min) >= level_ties) & jnp.isfinite(s_min)
        return share, untrusted, ties if unit else ties & ~jnp.any(untrusted)

    def step(round_fn):
        def run(carry):
            go = busy(carry)
            share, untrusted, _ = shares_and_ties(carry)
            return round_fn(carry[0], share, untrusted, go), carry[1] + go.astype(jnp.int32)
        return run

    frontier_step, level_step = step(frontier_round), step(level_round)

    def frontier_rounds(carry):
        return jax.lax.fori_loop(0, inner, lambda _, c: frontier_step(c), carry) if inner > 1 else frontier_step(carry)

    def outer(carry):
        # frontier rounds until a wide tie, then one level round (a conditional copies the
        # per-flow state, so it stays out of the inner loop)
        carry = jax.lax.while_loop(lambda c: busy(c) & ~shares_and_ties(c)[2], frontier_rounds, carry)
        return jax.lax.cond(busy(carry), level_step, lambda c: c, carry)

    state = (jnp.where(frozen0, INT_MAX, INT_MIN).astype(jnp.int32), jnp.full(Np, pad_link, jnp.int32),
             W, jnp.zeros(n_links, f64), cnt, quanta, jnp.zeros(n_links, f64), jnp.sum(live0, dtype=jnp.int32))
    (claim, bneck, W, F, cnt, quanta, level, left), rounds = jax.lax.while_loop(busy, outer, (state, jnp.int32(0)))
    frozen = claim != INT_MIN
    rates = jnp.where(frozen & live0, level[bneck] * w, 0)
    return rates, F, jnp.where(bneck < n_real, bneck, -1), rounds, frozen


_JITTED = jax.jit(_kernel, static_argnames=("n_links", "K", "B", "inner", "level_ties"))


def solve(lay: Layout, max_rounds: int, inner: int):
    """Run the kernel on one layout (float64 throughout), ``inner`` rounds per convergence
    check (one when a round reads more than ``PAIRS_PER_ROUND`` pairs: such rounds are dear
    and such problems, one hot link, take few); returns host arrays (rates, load,
    bottleneck, rounds, frozen) over the padded flows and links."""
    f64 = jnp.float64
    inner = 1 if lay.B > PAIRS_PER_ROUND else inner
    with jax.enable_x64(True):
        out = _JITTED(jnp.asarray(lay.path), None if lay.frac is None else jnp.asarray(lay.frac, f64),
                      jnp.asarray(lay.link_ptr), jnp.asarray(lay.link_flow),
                      None if lay.link_frac is None else jnp.asarray(lay.link_frac, f64),
                      jnp.asarray(lay.cap, f64), jnp.asarray(lay.weights, f64), jnp.asarray(lay.frozen0),
                      jnp.int32(max_rounds), jnp.int32(lay.n_real), n_links=lay.n_links, K=lay.K, B=lay.B,
                      inner=inner, level_ties=lay.level_ties)
        return tuple(np.asarray(x) for x in out)
