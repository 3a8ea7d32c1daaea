"""Vectorised SciPy progressive filling, one bottleneck level per round: the baseline the
JAX solver is measured against (benchmarks only; the test oracle is tests/oracle.py)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def progressive_filling_scipy(A, capacity, weights=None, demands=None, rtol=1e-12):
    """Weighted max-min rates by progressive filling; returns (rates, rounds)."""
    A = sp.csr_matrix(A)
    At = A.T.tocsr()
    n_links, n_flows = A.shape
    c = np.asarray(capacity, dtype=np.float64)
    w = np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64)
    d = np.full(n_flows, np.inf) if demands is None else np.asarray(demands, dtype=np.float64)
    cap_level = d / w
    level = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    used = np.zeros(n_links)              # load of frozen flows
    free_weight = A @ w                   # A w over unfrozen flows
    rounds = 0
    while not frozen.all():
        rounds += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(free_weight > rtol * np.abs(A).max(), np.maximum(c - used, 0) / free_weight, np.inf)
        lam = min(share.min(), cap_level[~frozen].min())
        tight = (share <= lam * (1 + rtol)).astype(np.float64)
        hit = ~frozen & (((At @ tight) > 0) | (cap_level <= lam * (1 + rtol)))
        level[hit] = np.minimum(lam, cap_level[hit])
        frozen |= hit
        x = np.where(hit, level * w, 0.0)
        used += A @ x
        free_weight -= A @ np.where(hit, w, 0.0)
    return level * w, rounds
