"""Plain NumPy progressive filling and the bottleneck characterisation: the oracles the
solver is tested against.

Obviously correct and slow: one bottleneck level per round, dense matrices. Freezes every
flow crossing a link that saturates at the smallest level, or whose cap binds there.
"""

import numpy as np
import pytest


def progressive_filling(A, capacity, weights=None, demands=None, tol=1e-12):
    A = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)
    n_links, n_flows = A.shape
    c = np.asarray(capacity, dtype=np.float64)
    w = np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64)
    d = np.full(n_flows, np.inf) if demands is None else np.asarray(demands, dtype=np.float64)
    level = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    for _ in range(n_flows + 1):
        if frozen.all():
            break
        rate = level * w
        free = ~frozen
        used = A @ np.where(frozen, rate, 0.0)
        unfrozen_weight = A @ np.where(free, w, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(unfrozen_weight > 0, np.maximum(c - used, 0) / unfrozen_weight, np.inf)
        cap_level = np.where(free, d / w, np.inf)
        lam = min(share.min(initial=np.inf), cap_level.min(initial=np.inf))
        assert np.isfinite(lam), "unbounded flow"
        tight = share <= lam * (1 + tol)                 # relative only: any unit, any scale
        hit = free & ((A[tight] > 0).any(axis=0) | (cap_level <= lam * (1 + tol)))
        level[hit] = np.minimum(lam, cap_level[hit])
        frozen |= hit
    return level * w


def assert_max_min_fair(A, capacity, weights, demands, rates, bottleneck, atol=1e-12):
    """The bottleneck characterisation, checked by hand on a dense ``A``: rates feasible,
    every flow reported held by its cap (bottleneck -1) at its cap, every other flow on its
    reported bottleneck, a saturated link it crosses where its level ``rate / weight`` is
    the largest; and, conversely, every flow below its cap crosses such a link. ``atol``
    (bytes/s) is added to the relative 1e-9 slack of feasibility and saturation."""
    A = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    d = np.asarray(demands, dtype=np.float64)
    x = np.asarray(rates, dtype=np.float64)
    load = A @ x
    assert (load <= cap * (1 + 1e-9) + atol).all() and (x <= d * (1 + 1e-12)).all()
    level = x / w
    saturated = load >= cap * (1 - 1e-9) - atol
    bneck = np.asarray(bottleneck)
    for f in range(len(x)):
        if bneck[f] == -1:
            assert x[f] == pytest.approx(d[f], rel=1e-9)
            continue
        link = bneck[f]
        assert A[link, f] > 0 and saturated[link]
        assert level[f] >= level[A[link] > 0].max() * (1 - 1e-9)
    # iff: every flow below its cap crosses a saturated link where its level is the largest
    for f in np.flatnonzero(x < d * (1 - 1e-9)):
        links = np.flatnonzero((A[:, f] > 0) & saturated)
        assert any(level[f] >= level[A[link] > 0].max() * (1 - 1e-9) for link in links)



def rational_filling(A, capacity, weights=None, demands=None):
    """Progressive filling in exact rational arithmetic (``fractions.Fraction``): every
    float64 input is a dyadic rational, so nothing is rounded; the rates come back as
    Fractions. Dense and slow on purpose: each round recomputes every link's share from
    scratch, raises the unfrozen flows to the smallest share or cap level ``lam`` and freezes
    those on a link whose share is ``lam`` or whose cap level is ``lam``."""
    from fractions import Fraction as Q

    A = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)
    n_links, n_flows = A.shape
    a = [[Q(float(v)) for v in row] for row in A]
    c = [Q(float(v)) for v in capacity]
    w = [Q(float(v)) for v in (np.ones(n_flows) if weights is None else weights)]
    d = [None if (demands is None or np.isinf(demands[f])) else Q(float(demands[f])) for f in range(n_flows)]
    level = [None] * n_flows
    while any(t is None for t in level):
        share = {}
        for l in range(n_links):
            free = [f for f in range(n_flows) if level[f] is None and a[l][f] > 0]
            if free:
                used = sum((a[l][f] * w[f] * level[f] for f in range(n_flows) if level[f] is not None), Q(0))
                share[l] = max(c[l] - used, Q(0)) / sum(a[l][f] * w[f] for f in free)
        caps = {f: d[f] / w[f] for f in range(n_flows) if level[f] is None and d[f] is not None}
        lam = min(list(share.values()) + list(caps.values()))
        tight = [l for l, s in share.items() if s == lam]
        for f in range(n_flows):
            if level[f] is None and (any(a[l][f] > 0 for l in tight) or caps.get(f) == lam):
                level[f] = lam
    return [w[f] * level[f] for f in range(n_flows)]
