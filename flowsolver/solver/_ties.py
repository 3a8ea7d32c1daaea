"""The conditioning check's tie test (:mod:`flowsolver.solver._conditioning`): on each link it
reads, the levels where the link was full, and what is left of it there."""

from __future__ import annotations

import numpy as np

from .._tolerance import RTOL as TIE      # the conditioning check's tie (its TIE)


def summed(keys, *values):
    """``keys`` (sorted, distinct) and each of ``values`` summed per key."""
    keys, at = np.unique(keys, return_inverse=True)
    return (keys, *(np.bincount(at.reshape(-1), weights=v, minlength=len(keys)) for v in values))


#: (row, level rank) keys counted in a table rather than sorted when there are at most this many
#: (the conditioning check's 256 M entries at 131,072 GPUs: 33 s of sorting, G = 1 level)
DENSE_KEYS = 1 << 24


def summed_dense(keys, size, *values):
    """:func:`summed` by table (keys below ``size``): the same keys, the same sums in the same
    order (bincount adds in input order either way).

    >>> [a.tolist() for a in summed_dense(np.array([3, 1, 3]), 5, np.array([1.0, 2.0, 4.0]))]
    [[1, 3], [2.0, 5.0]]
    """
    present = np.flatnonzero(np.bincount(keys, minlength=size))
    return (present, *(np.bincount(keys, weights=v, minlength=size)[present] for v in values))


def tied_pairs(pairs, G, cap, level, rank) -> tuple:
    """The keys ``row * G + level rank`` (sorted) of the (link, level) pairs where the link was
    full to within :data:`TIE` at that level, and the error factor of what was left of it there,
    ``(c + below) / (t x above)``: its load with every flow on it held at the level,
    ``V(t) = sum of min(x_f, t w_f)`` (the loads of flows below ``t``, ``t`` x the weight of the
    others), reaches its capacity less ``TIE`` x what the flows at ``t`` and above carry (plus
    the sums' own rounding). There a flow frozen at another link at level ``t`` could have been
    frozen here: the rounding's choice of link moves this link's residual by its load."""
    keys, load, weight = summed(*(np.concatenate(p) for p in zip(*pairs)))
    if not len(keys):
        return keys, np.zeros(0)
    rows = keys // G
    t_of = np.empty(G)
    t_of[rank] = level
    t = t_of[keys % G]
    lengths = np.diff(np.r_[np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]), len(keys)])
    run = _row_cumsum(load, lengths)                 # sums restarted at every row: no row's loads
    below = run - load                               # swamp another's (a 1e16 link beside a 4 one)
    above = _row_cumsum(weight[::-1], lengths[::-1])[::-1]      # the weight at this level and above
    V = below + t * above
    c = cap[rows]
    tied = c - V <= TIE * t * above + 16 * np.finfo(np.float64).eps * (c + V)
    with np.errstate(divide="ignore", invalid="ignore"):
        # what is left of the link at the tie, c - below, carries t x above: its error factor
        factor = np.where(t * above > 0, (c + below) / (t * above), np.inf)
    return keys[tied], factor[tied]


def _row_cumsum(v, lengths, width: int = 64) -> np.ndarray:
    """Cumulative sums of ``v`` restarted at every row (rows of ``lengths`` entries, one after
    the other): rows of at most ``width`` entries as one (rows x width) array, longer ones one
    at a time (at most ``len(v) / width`` of them).

    >>> _row_cumsum(np.array([1e16, 1.0, 4.0, 1.0]), np.array([2, 2])).tolist()
    [1e+16, 1e+16, 4.0, 5.0]
    """
    out = np.empty(len(v))
    starts = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
    short = lengths <= width
    if short.any():
        n_short, len_short = int(short.sum()), lengths[short]
        rows = np.repeat(np.arange(n_short), len_short)
        cols = np.arange(int(len_short.sum())) - np.repeat(np.r_[0, np.cumsum(len_short)[:-1]], len_short)
        at = np.repeat(starts[short], len_short) + cols
        grid = np.zeros((n_short, int(len_short.max())))
        grid[rows, cols] = v[at]
        out[at] = np.cumsum(grid, axis=1)[rows, cols]
    for s0, n in zip(starts[~short], lengths[~short]):
        out[s0:s0 + n] = np.cumsum(v[s0:s0 + n])
    return out
