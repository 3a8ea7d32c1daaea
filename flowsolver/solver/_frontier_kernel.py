"""The JAX kernel of the frontier method (:mod:`flowsolver.solver._frontier`): rounds that
look only at the lowest-share links.

A round

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
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ._frontier_wide import Wide, stale
from ._problem import count_trace

INT_MIN = int(np.iinfo(np.int32).min)
INT_MAX = int(np.iinfo(np.int32).max)
#: the order key (see ``_order_key``) of a float64 +inf share: not a candidate
INF_KEY = float(np.array((0x7FF00000 >> 1) + 0x00800000, np.int32).view(np.float32))
#: a link's weight sum is trusted while its error bound is below 2^-TRUST_BITS of the sum,
#: or while it holds at least half of its last recomputed sum (then its error is at most
#: twice that of a fresh sum, ``live flows x 2^-61`` relative)
TRUST_BITS = 45
#: quanta per link: the first sum of a link is below 2^QUANTUM_BITS quanta (int64 headroom)
QUANTUM_BITS = 61
f64 = jnp.float64


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


@dataclass(frozen=True)
class DeviceTables:
    """One frontier problem as the kernel takes it (:class:`~._frontier.FrontierTables` on
    the device, float64): the arrays are traced, the sizes static (each distinct set of
    sizes compiles once)."""

    path: object                 # (Np, P) int32 link ids, padding link n_links - 1
    frac: object                 # (Np, P) float64 fractions, or None (unit fractions, integer weights)
    link_ptr: object             # (Lp + 1,) int32 per-link flow list pointers
    link_flow: object            # (Ep,) int32
    link_frac: object            # (Ep,) float64, or None with frac
    cap: object                  # (Lp,) float64 capacities, bytes/s
    weights: object              # (Np,) float64
    frozen0: object              # (Np,) bool: padding and zero-cap flows
    n_real: object               # int32 scalar: real links (private cap links after them)
    wide: object                 # the wide segments' arrays (module _frontier_wide), or None
    n_links: int                 # Lp (static)
    K: int                       # candidate links per round (static)
    B: int                       # (link, flow) pairs a round reads at most (static)
    level_ties: int              # ties at the minimum share that make a round a level round (static)
    wide_segments: int = 0       # padded wide segments (static)


jax.tree_util.register_dataclass(
    DeviceTables, data_fields=["path", "frac", "link_ptr", "link_flow", "link_frac", "cap", "weights", "frozen0",
                               "n_real", "wide"],
    meta_fields=["n_links", "K", "B", "level_ties", "wide_segments"])


class _Net:
    """One problem's arrays and sizes while the kernel is traced (``frac`` None: unit
    fractions and integer weights, no quanta, no trust)."""

    def __init__(self, path, frac, link_ptr, link_flow, link_frac, cap, w, n_real, *, n_links, K, B, wide=None):
        self.wide: Wide | None = wide            # the wide segments (module _frontier_wide), if any
        self.path, self.frac, self.link_ptr, self.link_flow, self.link_frac = path, frac, link_ptr, link_flow, link_frac
        self.cap, self.w, self.n_real, self.n_links, self.K, self.B = cap, w, n_real, n_links, K, B
        self.Np = path.shape[0]
        self.unit = frac is None
        self.pad_link = n_links - 1
        self.E = link_flow.shape[0]
        self.pos = None                        # set by the kernel after the initial sums
        self.M = max(B // 8, 1)                # frozen pairs released in the compacted form

    def targets(self, links, mask):
        """``links`` where ``mask``, else past the last link: scatters with ``mode="drop"``
        then skip the masked-off entries (padding and flows not released), which otherwise
        each update a link (every padding entry the same one, serialised on a GPU)."""
        return jnp.where(mask, links, self.n_links)

    def contributions(self, rows_w, rows_frac, mask):
        """(M, P) float64 weight x fraction of the masked flows on their path entries."""
        a = rows_w[:, None] if self.unit else rows_w[:, None] * rows_frac
        return jnp.where(mask, a, 0.0)


def _initial_sums(net: _Net, live0):
    """Quantum exponents from a float64 pass, then exact integer sums: W, quanta, counts."""
    path, n_links = net.path, net.n_links
    on = live0[:, None] & net.real
    at = net.targets(path, on)
    a0 = net.contributions(net.w, net.frac, on)
    if net.unit:
        return jnp.zeros(n_links, jnp.int64).at[at].add(a0.astype(jnp.int64), mode="drop"), None, None
    exponent = _quantum_exponent(jnp.zeros(n_links, f64).at[at].add(a0, mode="drop"))
    W = jnp.zeros(n_links, jnp.int64).at[at].add(_quantize(a0, exponent[path]), mode="drop")
    quanta = (exponent, W)        # per link: quantum exponent, sum when last computed
    cnt = jnp.zeros(n_links, jnp.int32).at[at].add(on.astype(jnp.int32), mode="drop")
    return W, quanta, cnt


def _fair_shares(net: _Net, W, F, quanta, cnt):
    """Each link's fair share and (with quanta) whether its weight sum is untrusted."""
    Wf = W.astype(f64) if net.unit else jnp.ldexp(W.astype(f64), quanta[0])
    # no weight left: no share (inactive, or untrusted until recomputed), never a divide by 1
    share = jnp.where(W > 0, jnp.maximum(net.cap - F, 0) / jnp.where(W > 0, Wf, 1.0), jnp.inf)
    if net.unit:
        return share, None
    # error bound: half a quantum per live flow
    tight = W.astype(f64) >= cnt.astype(f64) * 2.0 ** (TRUST_BITS - 1)
    untrusted = (cnt > 0) & ~tight & (2 * W < quanta[1])
    return share, untrusted


def _release(net: _Net, W, F, cnt, quanta, rows, f, mine, lev):
    """Remove the flows ``mine`` (rows ``rows`` of the path table, ids ``f``) from their
    links' weight sums and add their rates (``lev`` x weight x fraction) to the loads."""
    on = net.real[f] & mine[:, None]
    a = net.contributions(net.w[f], None if net.unit else net.frac[f], on)
    q = a.astype(jnp.int64) if net.unit else _quantize(a, quanta[0][rows])
    at = net.targets(rows, on)
    W = W.at[at].add(-q, mode="drop")
    F = F.at[at].add(a * lev[:, None], mode="drop")
    if not net.unit:
        cnt = cnt.at[at].add(-on.astype(jnp.int32), mode="drop")
    return W, F, cnt


def _candidates(net: _Net, share, untrusted):
    """The K candidate links: the untrusted links first (to be recomputed; the first always
    fits in the buffer, so every round repairs one or, with none left, freezes the exact
    minimum), then the lowest shares by the upper 32 bits of their float64 pattern
    (monotone for shares >= 0 over the whole float64 range; ordering only). Returns the
    candidates, their list lengths, the running sum of those and whether each fits."""
    unit, K = net.unit, net.K
    trusted = share if unit else jnp.where(untrusted, jnp.inf, share)
    key = -_order_key(trusted)
    if not unit:
        key = jnp.where(untrusted, 1.0, key)
    first = jnp.argmin(trusted) if unit else jnp.where(jnp.any(untrusted), jnp.argmax(key), jnp.argmin(trusted))
    first = first.astype(jnp.int32)
    top, rest = jax.lax.top_k(key.at[first].set(-jnp.inf), K - 1)
    cand = jnp.concatenate([first[None], rest.astype(jnp.int32)])
    valid = jnp.concatenate([key[first][None], top]) > -INF_KEY
    deg = jnp.where(valid, net.link_ptr[cand + 1] - net.link_ptr[cand], 0)
    cum = jnp.cumsum(deg)
    return cand, deg, cum, valid & (cum <= net.B)


def _pairs(net: _Net, cand, deg, cum, fits, claim):
    """The (link, flow) pairs the candidates' lists put in the buffer: each pair's
    candidate slot ``cc``, list position ``gid`` (clamped: ``safe_gid``), flow ``f`` and
    whether it is a live flow of a fitting candidate."""
    K, B, pos = net.K, net.B, net.pos
    # c[p] = candidates whose lists end at or before pair p (with many candidates: one
    # scatter of K marks and a running sum over the consecutive positions)
    if K <= 64:
        c = jnp.searchsorted(cum, pos, side="right", method="compare_all")
    else:
        c = jnp.cumsum(jnp.zeros(B, jnp.int32).at[cum].add(1, mode="drop"))
    cc = jnp.minimum(c, K - 1)
    gid = net.link_ptr[cand[cc]] + pos - (cum[cc] - deg[cc])
    inside = (c < K) & fits[cc]
    safe_gid = jnp.where(inside, gid, net.E - 1)
    f = net.link_flow[safe_gid]
    live = inside & (claim[f] == INT_MIN)
    return cc, gid, safe_gid, f, live


def _recompute(net: _Net, share, untrusted, cand, fits, cc, safe_gid, f, live, W, F, quanta):
    """Recompute the untrusted candidates' sums from their live flows, finer quanta;
    returns W, quanta and the shares to test (an untrusted link not recomputed blocks every
    flow that crosses it)."""
    K, n_links = net.K, net.n_links
    a = jnp.where(live, net.w[f] * net.link_frac[safe_gid], 0.0)
    e_new = _quantum_exponent(jax.ops.segment_sum(a, cc, K, indices_are_sorted=True))
    W_new = jax.ops.segment_sum(_quantize(a, e_new[cc]), cc, K, indices_are_sorted=True)
    fix = fits & untrusted[cand]
    at = jnp.where(fix, cand, n_links)
    W = W.at[at].set(W_new, mode="drop")
    quanta = (quanta[0].at[at].set(e_new, mode="drop"), quanta[1].at[at].set(W_new, mode="drop"))
    fixed = jnp.zeros(n_links, bool).at[at].set(True, mode="drop")
    fresh = jnp.where(W_new > 0, jnp.maximum(net.cap[cand] - F[cand], 0) / jnp.ldexp(W_new.astype(f64), e_new),
                      jnp.inf)
    test = jnp.where(untrusted & ~fixed, -jnp.inf, share).at[at].set(fresh, mode="drop")
    return W, quanta, test


def _frontier_round(net: _Net, state, share, untrusted, go):
    """Freeze the candidates that are local minima (see the module docstring)."""
    claim, bneck, W, F, cnt, quanta, level, left, wide = state
    Np, E, M = net.Np, net.E, net.M
    cand, deg, cum, fits = _candidates(net, share, untrusted)
    cc, gid, safe_gid, f, live = _pairs(net, cand, deg, cum, fits, claim)
    test = share
    if not net.unit:
        W, quanta, test = _recompute(net, share, untrusted, cand, fits, cc, safe_gid, f, live, W, F, quanta)
    sc = test[cand]
    rows = net.path[f]
    m = jnp.min(test[rows], axis=1)
    if net.wide is not None:            # wide segments: their lowest shares (lower bounds)
        m = jnp.minimum(m, net.wide.row_min(wide[1], f))
    near = jax.ops.segment_min(jnp.where(live, m, jnp.inf), cc, net.K, indices_are_sorted=True)
    freeze = go & fits & jnp.isfinite(sc) & (sc <= near)
    take = live & freeze[cc]
    link = cand[cc]
    # each frozen flow is claimed by one pair: the largest key, real links before caps
    claim_key = jnp.where(link < net.n_real, gid, gid - E)
    claim = claim.at[jnp.where(take, f, Np)].max(claim_key, mode="drop")
    mine = take & (claim[f] == claim_key)
    bneck = bneck.at[jnp.where(mine, f, Np)].set(link, mode="drop")
    level = level.at[jnp.where(freeze, cand, net.n_links)].set(sc, mode="drop")
    lev = jnp.where(mine, sc[cc], 0.0)
    n_mine = jnp.sum(mine, dtype=jnp.int32)

    def compacted(W, F, cnt):           # the frozen pairs first: scatters of M, not B, rows
        idx = jnp.nonzero(mine, size=M, fill_value=0)[0]
        keep = jnp.arange(M, dtype=jnp.int32) < n_mine
        return _release(net, W, F, cnt, quanta, rows[idx], f[idx], keep, lev[idx])

    W, F, cnt = jax.lax.cond(n_mine <= M, compacted,
                             lambda W, F, cnt: _release(net, W, F, cnt, quanta, rows, f, mine, lev), W, F, cnt)
    return claim, bneck, W, F, cnt, quanta, level, left - n_mine, None if wide is None else stale(wide)


def _level_round(net: _Net, state, share, untrusted, go):
    """Every flow that crosses a link at the global minimum share freezes there (wide links
    count only right after a refresh, when their shares are exact)."""
    claim, bneck, W, F, cnt, quanta, level, left, wide = state
    path = net.path
    s_min = jnp.min(share)
    if net.wide is not None:
        s_min = jnp.where(wide[3], jnp.minimum(s_min, jnp.min(wide[0])), s_min)
    hit = share[path] <= s_min                                  # padding link: inf
    crosses = jnp.any(hit, axis=1)
    link = jnp.take_along_axis(path, jnp.argmax(hit, axis=1)[:, None], axis=1)[:, 0]
    if net.wide is not None:
        wide_hit, wide_link = net.wide.level_hits(wide, s_min)
        link = jnp.where(crosses, link, wide_link)
        crosses = crosses | wide_hit
        level = jnp.where(go & wide[3] & (wide[0] <= s_min), s_min, level)
    mine = go & crosses & (claim == INT_MIN)
    claim = jnp.where(mine, INT_MAX, claim)
    bneck = jnp.where(mine, link, bneck)
    level = jnp.where(go & (share <= s_min), s_min, level)
    ids = jnp.arange(net.Np, dtype=jnp.int32)
    W, F, cnt = _release(net, W, F, cnt, quanta, path, ids, mine, jnp.where(mine, s_min, 0.0))
    return (claim, bneck, W, F, cnt, quanta, level, left - jnp.sum(mine, dtype=jnp.int32),
            None if wide is None else stale(wide))


def kernel(tables: DeviceTables, max_rounds, *, inner):
    """Frontier rounds on ``tables`` until every flow is frozen or ``max_rounds`` is
    reached, ``inner`` rounds per convergence check, with a level round whenever at least
    ``tables.level_ties`` links tie at the minimum share. Returns rates, loads, bottlenecks
    (-1: a private cap link), rounds and the frozen mask (padded). ``tables.wide``: the wide
    segments (:mod:`flowsolver.solver._frontier_wide`), of ``tables.wide_segments`` padded
    segments."""
    count_trace()
    path, w, frozen0, n_real = tables.path, tables.weights, tables.frozen0, tables.n_real
    n_links, B, level_ties = tables.n_links, tables.B, tables.level_ties
    wide = None if tables.wide is None else Wide(tables.wide, tables.wide_segments, n_links)
    net = _Net(path, tables.frac, tables.link_ptr, tables.link_flow, tables.link_frac, tables.cap, w, n_real,
               n_links=n_links, K=tables.K, B=B, wide=wide)
    live0 = ~frozen0
    net.real = path != net.pad_link
    W, quanta, cnt = _initial_sums(net, live0)
    net.pos = jnp.arange(B, dtype=jnp.int32)

    def busy(carry):
        (*_, left, _), rounds = carry
        return (left > 0) & (rounds < max_rounds)

    def shares_and_ties(carry):
        """Shares, untrusted sums, whether to take a level round for a wide tie and whether
        the wide shares are due a refresh (their lower bounds fell below the narrow minimum)."""
        claim, bneck, W, F, cnt, quanta, level, left, wide_state = carry[0]
        share, untrusted = _fair_shares(net, W, F, quanta, cnt)
        s_min = jnp.min(share)
        ties = (jnp.sum(share <= s_min) >= level_ties) & jnp.isfinite(s_min)
        trusted = True if net.unit else ~jnp.any(untrusted)
        due = jnp.bool_(False) if wide is None else (jnp.min(wide_state[0]) < s_min) & trusted
        return share, untrusted, ties & trusted, due

    def step(round_fn):
        def run(carry):
            go = busy(carry)
            share, untrusted, *_ = shares_and_ties(carry)
            return round_fn(net, carry[0], share, untrusted, go), carry[1] + go.astype(jnp.int32)
        return run

    frontier_step, level_step = step(_frontier_round), step(_level_round)

    def frontier_rounds(carry):
        return jax.lax.fori_loop(0, inner, lambda _, c: frontier_step(c), carry) if inner > 1 else frontier_step(carry)

    def refresh(carry):
        claim, bneck, W, F, cnt, quanta, level, left, _ = carry[0]
        fresh, _ = wide.refresh(net.cap, net.w, claim, bneck, level, live0)
        return (claim, bneck, W, F, cnt, quanta, level, left, fresh), carry[1] + 1

    def outer(carry):
        # frontier rounds until a wide tie (or, with wide segments, until their lower bounds
        # fall below the narrow minimum: then a refresh), then one level round if a tie or
        # a wide link is at the minimum (a conditional copies the per-flow state, so it
        # stays out of the inner loop)
        def more(c):
            _, _, ties, due = shares_and_ties(c)
            return busy(c) & ~ties & ~due
        carry = jax.lax.while_loop(more, frontier_rounds, carry)
        if wide is None:
            return jax.lax.cond(busy(carry), level_step, lambda c: c, carry)
        carry = jax.lax.cond(busy(carry) & shares_and_ties(carry)[3], refresh, lambda c: c, carry)
        share, _, ties, _ = shares_and_ties(carry)
        wide_state = carry[0][8]
        at_min = wide_state[3] & (jnp.min(wide_state[0]) <= jnp.min(share))
        return jax.lax.cond(busy(carry) & (ties | at_min), level_step, lambda c: c, carry)

    Np, pad_link = net.Np, net.pad_link
    claim0, bneck0 = jnp.where(frozen0, INT_MAX, INT_MIN).astype(jnp.int32), jnp.full(Np, pad_link, jnp.int32)
    level0 = jnp.zeros(n_links, f64)
    wide0 = None if wide is None else wide.refresh(net.cap, w, claim0, bneck0, level0, live0)[0]
    state = (claim0, bneck0, W, jnp.zeros(n_links, f64), cnt, quanta, level0, jnp.sum(live0, dtype=jnp.int32), wide0)
    (claim, bneck, W, F, cnt, quanta, level, left, _), rounds = jax.lax.while_loop(busy, outer, (state, jnp.int32(0)))
    frozen = claim != INT_MIN
    rates = jnp.where(frozen & live0, level[bneck] * w, 0)
    if wide is not None:                 # the wide links' loads, summed from the final rates
        F = F + wide.refresh(net.cap, w, claim, bneck, level, live0)[1]
    return rates, F, jnp.where(bneck < n_real, bneck, -1), rounds, frozen


JITTED = jax.jit(kernel, static_argnames=("inner",))
