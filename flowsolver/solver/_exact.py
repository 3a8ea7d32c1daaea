"""The *exact* method of :func:`flowsolver.max_min_fair`: progressive filling in rational
arithmetic, on the host.

Every float64 input (capacity, weight, cap, routing fraction) is a dyadic rational, so
progressive filling can be run without rounding: each round raises every unfrozen flow's
level ``rate / weight`` to the smallest fair share ``residual / (sum of fraction x weight
of the unfrozen flows)`` over the links, or to the smallest cap level ``cap / weight``,
and freezes the flows that reach it (on a link at that share: bottleneck that link; held
by their cap: bottleneck ``-1``). Residuals and weight sums are kept as exact
``fractions.Fraction`` values and updated only on the links of the flows that freeze; a
heap gives the smallest share. Rates are rounded once, at the end (correctly rounded to
float64, then to the requested dtype).

It is what the float64 methods cannot be where a flow's rate is a tiny part of its
bottleneck link's capacity (weights or fractions spread over many orders of magnitude on
one link): there the residual ``capacity - frozen load`` cancels, and levels that differ
in the 17th digit decide which link freezes first. :func:`max_min_fair` re-solves such
scenarios here (see :mod:`flowsolver.solver._conditioning`). The cost grows with the
number of (link, flow) pairs and with the size of the fractions' numerators (which grow
with the depth of the freeze order), so problems above :data:`EXACT_PAIRS` pairs are
refused.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

import numpy as np

from ._allocation import Raw
from ._problem import Problem

#: (link, flow) pairs the exact method takes at most (a 300-flow problem on 30 links of
#: 3-hop paths is ~1,000 pairs and solves in ~10 ms; 100,000 pairs take seconds)
EXACT_PAIRS = 100_000


def eligible(problem: Problem) -> bool:
    """``method="auto"`` never picks the exact method by itself (it is slow); it is used
    for ill-conditioned scenarios (:mod:`~flowsolver.solver._conditioning`) and on request.

    >>> eligible(None)
    False
    """
    return False


def fits(routing) -> bool:
    """Whether the exact method takes ``routing`` (at most :data:`EXACT_PAIRS` pairs)."""
    return routing.expanded_nnz <= EXACT_PAIRS


def solve(problem: Problem) -> Raw:
    """Rates, link loads, bottlenecks, rounds and convergence of ``problem``, each scenario
    solved exactly (host arrays in the problem's dtype; a leading scenario axis with a
    batch)."""
    rm = problem.routing
    if not fits(rm):
        raise ValueError(f"method='exact' takes at most {EXACT_PAIRS:,} (link, flow) pairs; this routing has "
                         f"{rm.expanded_nnz:,} (use method='auto')")
    A = rm.to_scipy().tocsc()
    if problem.batch is None:
        out = solve_one(A, problem.capacity, problem.weights, problem.demands, problem.unbounded,
                        problem.max_rounds)
        return Raw(*(_cast(x, problem.dtype) for x in out))
    rows = [solve_one(A, *(_row(a, i) for a in (problem.capacity, problem.weights, problem.demands,
                                                problem.unbounded)), problem.max_rounds)
            for i in range(problem.batch)]
    return Raw(*(_cast(np.stack(col), problem.dtype) for col in zip(*rows)))


def _row(a, i):
    return a if a.ndim == 1 else a[i]


def _cast(x, dtype):
    return x.astype(dtype) if x.dtype.kind == "f" else x


def solve_one(A, capacity, weights, demands, frozen0=None, max_rounds=None):
    """One scenario: ``A`` a scipy CSC (links x flows) matrix, ``capacity`` (links,),
    ``weights``, ``demands`` (flows,) float64; flows in ``frozen0`` start frozen at 0.
    Returns float64 rates and loads, int32 bottlenecks, the rounds and convergence.

    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    >>> rates, load, bneck, rounds, ok = solve_one(A, np.array([3.0, 3.0]), np.array([1e-9, 1e9, 2e-9]),
    ...                                            np.full(3, np.inf))
    >>> bool(rates[0] == rates[2]), bneck.tolist()   # link 1 freezes first; flow 0 gets what flow 1 leaves
    (True, [0, 1, 1])
    """
    L, N = A.shape
    A = A.tocsc()
    csr = A.tocsr()
    frac = [Fraction(float(x)) for x in A.data]          # exact: every float64 is a dyadic rational
    w = [Fraction(float(x)) for x in weights]
    residual = [Fraction(float(c)) if np.isfinite(c) else None for c in capacity]   # None: never binds
    W = [Fraction(0)] * L
    frozen = np.zeros(N, dtype=bool) if frozen0 is None else np.array(frozen0, dtype=bool)
    for f in np.flatnonzero(~frozen):
        for j in range(A.indptr[f], A.indptr[f + 1]):
            W[A.indices[j]] += frac[j] * w[f]
    level = [Fraction(0)] * N
    bneck = np.full(N, -1, dtype=np.int32)
    version = [0] * L
    links: list = []
    for l in range(L):
        _push(links, l, residual, W, version)
    caps = [(Fraction(float(demands[f])) / w[f], int(f)) for f in np.flatnonzero(~frozen) if np.isfinite(demands[f])]
    heapq.heapify(caps)
    rounds, limit = 0, (N + 1 if max_rounds is None else int(max_rounds))
    while not frozen.all() and rounds < limit:
        while caps and frozen[caps[0][1]]:
            heapq.heappop(caps)
        while links and links[0][2] != version[links[0][1]]:
            heapq.heappop(links)
        lam = min([h[0] for h in (caps[:1] + links[:1])], default=None)
        if lam is None:           # no finite link and no cap left: unbounded (checked upstream)
            break
        rounds += 1
        hit = []                  # (flow, bottleneck) frozen this round
        while links and links[0][0] == lam:
            _, l, v = heapq.heappop(links)
            if v != version[l]:
                continue
            for j in range(csr.indptr[l], csr.indptr[l + 1]):
                f = csr.indices[j]
                if not frozen[f]:
                    frozen[f] = True
                    hit.append((f, l))
            version[l] += 1       # saturated: no share from now on
        while caps and caps[0][0] == lam:
            f = heapq.heappop(caps)[1]
            if not frozen[f]:
                frozen[f] = True
                hit.append((f, -1))
        touched = set()
        for f, b in hit:
            level[f], bneck[f] = lam, b
            rate = w[f] * lam
            for j in range(A.indptr[f], A.indptr[f + 1]):
                l = A.indices[j]
                W[l] -= frac[j] * w[f]
                if residual[l] is not None:
                    residual[l] -= frac[j] * rate
                touched.add(l)
        for l in touched:
            version[l] += 1
            if W[l] > 0:
                _push(links, l, residual, W, version)
    rates_exact = [w[f] * level[f] if frozen[f] else Fraction(0) for f in range(N)]
    rates = np.array([float(r) for r in rates_exact], dtype=np.float64)
    load = np.array([float(sum((Fraction(float(csr.data[j])) * rates_exact[csr.indices[j]]
                                for j in range(csr.indptr[l], csr.indptr[l + 1])), Fraction(0)))
                     for l in range(L)], dtype=np.float64)
    converged = bool(frozen.all())
    return rates, load, bneck, np.int32(rounds), np.bool_(converged)


def _push(heap, l, residual, W, version):
    """Put link ``l``'s current fair share on the heap (links of infinite capacity or no
    unfrozen weight have none)."""
    if residual[l] is None or W[l] <= 0:
        return
    heapq.heappush(heap, (max(residual[l], Fraction(0)) / W[l], l, version[l]))
