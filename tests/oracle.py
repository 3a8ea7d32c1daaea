"""Plain NumPy progressive filling: the oracle the solver is tested against.

Obviously correct and slow: one bottleneck level per round, dense matrices. Freezes every
flow crossing a link that saturates at the smallest level, or whose cap binds there.
"""

import numpy as np


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
