"""A mixture of experts' routing under uniform top-k choice: the share of experts some token of
a step is routed to, and the busiest expert-parallel rank's count (what a synchronous step
reads on its slowest rank)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["ROUTING_DRAWS", "busiest_rank_experts", "expected_active_experts"]


def expected_active_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected share of ``experts`` at least one of ``tokens`` tokens is routed to, each token
    choosing ``top_k`` distinct experts uniformly: ``1 - (1 - top_k / experts)^tokens``.

    >>> expected_active_experts(8, 2, 1), expected_active_experts(8, 2, 0)
    (0.25, 0.0)
    """
    if experts <= 1:
        return 1.0
    return 1.0 - (1.0 - top_k / experts) ** tokens


#: draws of the routing simulation behind :func:`busiest_rank_experts`: the busiest rank's
#: count spreads by at most about one expert, so its mean is within ~0.05 of an expert
ROUTING_DRAWS = 512


@functools.lru_cache(maxsize=64)
def _busiest_curve(experts: int, top_k: int, ep: int) -> np.ndarray:
    """The mean over :data:`ROUTING_DRAWS` seeded draws of the busiest rank's distinct local
    experts after 0, 1, 2, ... tokens, up to the token count where every draw has a rank
    with all its experts hit."""
    rng = np.random.default_rng(0)
    local = experts // ep
    hit = np.zeros((ROUTING_DRAWS, experts), dtype=bool)
    rows = np.arange(ROUTING_DRAWS)[:, None]
    curve = [0.0]
    while curve[-1] < local:
        hit[rows, np.argpartition(rng.random((ROUTING_DRAWS, experts)), top_k - 1, axis=1)[:, :top_k]] = True
        curve.append(float(hit.reshape(ROUTING_DRAWS, ep, local).sum(axis=2).max(axis=1).mean()))
    return np.array(curve)


def busiest_rank_experts(experts: int, top_k: int, ep: int, tokens: float) -> float:
    """Expected distinct experts the busiest of ``ep`` ranks (``experts / ep`` each) holds a
    token for, when ``tokens`` tokens each choose ``top_k`` distinct experts uniformly: the
    expert weights a synchronous step reads on its slowest rank. One rank: ``experts x``
    :func:`expected_active_experts`; several: a seeded simulation (:data:`ROUTING_DRAWS`).
    One token's top-2 of 8 experts on 8 ranks puts a whole expert on two ranks: the busiest
    reads one, where the average rank reads 0.25.

    >>> busiest_rank_experts(8, 2, 8, 1), busiest_rank_experts(8, 2, 1, 1)
    (1.0, 2.0)
    """
    if tokens <= 0 or experts <= 1:
        return 0.0 if tokens <= 0 else 1.0
    if ep == 1:
        return experts * expected_active_experts(experts, top_k, tokens)
    curve = _busiest_curve(int(experts), int(top_k), int(ep))
    return float(curve[min(int(round(tokens)), len(curve) - 1)])
