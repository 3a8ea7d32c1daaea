"""A certificate that rates are the weighted max-min fair allocation, checked on the host
(:func:`violation`, which also says what failed) or on the device on the frontier's path
table (:data:`DEVICE_CHECK`: one pass, no host work on a 1 M-flow solve).

Rates ``x`` with reported bottlenecks are max-min fair exactly when

* they are feasible: ``A x <= c`` on every link and ``x <= d`` for every flow;
* every flow reported as held by its cap (bottleneck ``-1``) is at its cap;
* every other flow crosses its reported bottleneck link, that link is saturated, and no
  flow on that link has a larger level ``x / w``.

(A flow on a saturated link where its level is the largest cannot gain without taking
from a flow of no larger level: the usual characterisation of max-min fairness.) Every
comparison is relative to the quantity itself (a link's capacity, a flow's cap or level),
so the check means the same in bytes/s, bits/s or any other unit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._tolerance import RTOL       # the default tolerance of violation (see flowsolver._tolerance)


def _segment_max(rm, per_flow: np.ndarray) -> np.ndarray:
    """Per-link maximum of a per-flow value over the flows that cross the link (-inf where none)."""
    seg_max = np.full(rm.n_segments, -np.inf)
    coef = rm.flow_coef
    for k in range(rm.slots):
        segs = rm.flow_seg[:, k]
        ok = segs >= 0 if coef is None else (segs >= 0) & (coef[:, k] > 0)
        np.maximum.at(seg_max, segs[ok], per_flow[ok])
    hit = rm.seg_frac > 0
    link_max = np.full(rm.n_links, -np.inf)
    np.maximum.at(link_max, rm.seg_link[hit], seg_max[rm.entry_segment[hit]])
    return link_max


def _crosses(rm, flows: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Whether flow ``flows[i]`` puts a positive fraction on link ``links[i]``."""
    out = np.zeros(len(flows), dtype=bool)
    lengths = np.diff(rm.seg_ptr)
    for k in range(rm.slots):
        segs = rm.flow_seg[flows, k]
        ok = segs >= 0
        if rm.flow_coef is not None:
            ok &= rm.flow_coef[flows, k] > 0
        idx = np.flatnonzero(ok)
        counts = lengths[segs[idx]]
        starts = rm.seg_ptr[segs[idx]]
        rep = np.repeat(idx, counts)
        entry = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
        match = (rm.seg_link[entry] == links[rep]) & (rm.seg_frac[entry] > 0)
        out[rep[match]] = True
    return out


def _crosses_wide(wide, n_links, flows, links) -> np.ndarray:
    """Whether a wide segment of flow ``flows[i]`` (a :class:`~flowsolver.solver._frontier_paths.WideParts`)
    holds link ``links[i]``: one search per wide slot among the sorted (segment, link) keys."""
    keys = np.sort(wide.entry_seg * n_links + wide.entry_link)
    out = np.zeros(len(flows), dtype=bool)
    for k in range(wide.seg.shape[1]):
        seg = wide.seg[flows, k]
        q = seg * n_links + links
        pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        out |= (seg >= 0) & (keys[pos] == q)
    return out


def violation(rm, capacity, weights, demands, rates, bottleneck, skip=None, rtol: float = RTOL,
              paths=None) -> str | None:
    """The first way ``rates`` fail to certify a weighted max-min fair allocation, or None.

    ``rm`` is a RoutingMatrix; ``capacity`` (links,), ``weights``, ``demands``, ``rates``
    and ``bottleneck`` (flows,) as :func:`~flowsolver.max_min_fair` takes and returns
    them (bytes/s); flows in ``skip`` (unbounded flows of a batch) are left out. ``paths``
    (optional): the frontier method's ``(path, frac)`` link table (``-1`` padding) or its
    ``(path, frac, wide)`` split (:func:`flowsolver.solver._frontier_paths.split_paths`), a faster
    membership test for the reported bottlenecks.

    >>> import scipy.sparse as sp
    >>> from flowsolver import RoutingMatrix
    >>> rm = RoutingMatrix.from_scipy(sp.csc_matrix([[1.0, 1.0]]))
    >>> print(violation(rm, [2.0], [1.0, 1.0], [float("inf")] * 2, [1.0, 1.0], [0, 0]))
    None
    >>> violation(rm, [2.0], [1.0, 1.0], [float("inf")] * 2, [1.5, 0.5], [0, 0])
    'flow 1 (level 0.5) is not the largest on its bottleneck link 0 (level 1.5 there)'
    """
    cap = np.asarray(capacity, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    d = np.asarray(demands, dtype=np.float64)
    x = np.asarray(rates, dtype=np.float64)
    bneck = np.asarray(bottleneck, dtype=np.int64)
    keep = np.ones(len(x), dtype=bool) if skip is None else ~np.asarray(skip, dtype=bool)
    xs = np.where(keep, x, 0.0)
    if (bad := keep & ~(np.isfinite(x) & (x >= 0))).any():
        f = int(np.flatnonzero(bad)[0])
        return f"flow {f} has rate {x[f]!r}"
    if (bad := keep & (x > d * (1 + rtol))).any():
        f = int(np.flatnonzero(bad)[0])
        return f"flow {f} runs at {x[f]:.6g}, above its cap {d[f]:.6g}"
    load = rm.link_loads(xs)
    if (bad := load > cap * (1 + rtol)).any():
        l = int(np.flatnonzero(bad)[0])
        return f"link {l} carries {load[l]:.6g}, above its capacity {cap[l]:.6g}"
    by_cap = keep & (bneck < 0)
    if (bad := by_cap & (x < d * (1 - rtol))).any():
        f = int(np.flatnonzero(bad)[0])
        return f"flow {f} is reported held by its cap {d[f]:.6g} but runs at {x[f]:.6g}"
    level = np.where(keep, xs / w, -np.inf)
    link_max = _segment_max(rm, level)
    f_link = np.flatnonzero(keep & (bneck >= 0))
    links = bneck[f_link]
    if (bad := links >= rm.n_links).any():
        f = int(f_link[np.flatnonzero(bad)[0]])
        return f"flow {f} reports bottleneck {bneck[f]}, not a link"
    if (bad := load[links] < cap[links] * (1 - rtol)).any():
        f = int(f_link[np.flatnonzero(bad)[0]])
        return f"flow {f}'s bottleneck link {bneck[f]} is not saturated ({load[bneck[f]]:.6g} of {cap[bneck[f]]:.6g})"
    if (bad := level[f_link] < link_max[links] * (1 - rtol)).any():
        f = int(f_link[np.flatnonzero(bad)[0]])
        return (f"flow {f} (level {level[f]:.6g}) is not the largest on its bottleneck link {bneck[f]} "
                f"(level {link_max[bneck[f]]:.6g} there)")
    if paths is not None:                      # one pass over the whole table, no row gather
        path = paths[0]                           # entries of fraction 0 are already -1
        crosses = (path == np.where(keep & (bneck >= 0), bneck, -2)[:, None]).any(axis=1)[f_link]
        if len(paths) > 2 and paths[2] is not None:
            crosses |= _crosses_wide(paths[2], rm.n_links, f_link, links)
    else:
        crosses = _crosses(rm, f_link, links)
    if (bad := ~crosses).any():
        f = int(f_link[np.flatnonzero(bad)[0]])
        return f"flow {f} does not cross its reported bottleneck link {bneck[f]}"
    return None


def _device_check(path, frac, cap, w, d, keep, x, bneck, rtol=RTOL, *, n_links):
    """Whether padded rates ``x`` and bottlenecks ``bneck`` (-1: held by a cap) certify on a
    flow-major path table (``path`` (flows, P) link ids, padding link ``n_links - 1`` of
    infinite capacity; ``frac`` its fractions, None for all 1; ``cap`` (n_links,) with the
    frontier's private cap links; ``keep``: the real flows that are not skipped). The same
    conditions as :func:`violation`, as one boolean."""
    xs = jnp.where(keep, x, 0.0)
    per_entry = jnp.broadcast_to(xs[:, None], path.shape) if frac is None else frac * xs[:, None]
    # padding entries and flows not kept go past the last link, where the reductions drop them
    # (each would otherwise update the padding link: one address, serialised on a GPU)
    at = jnp.where(keep[:, None] & (path != n_links - 1), path, n_links).reshape(-1)
    load = jax.ops.segment_sum(per_entry.reshape(-1), at, n_links)
    level = jnp.where(keep, xs / w, -jnp.inf)
    link_max = jax.ops.segment_max(jnp.broadcast_to(level[:, None], path.shape).reshape(-1), at, n_links)
    has = keep & (bneck >= 0)
    b = jnp.maximum(bneck, 0)
    ok = [~keep | (jnp.isfinite(x) & (x >= 0)), ~keep | (x <= d * (1 + rtol)),
          ~(keep & (bneck < 0)) | (x >= d * (1 - rtol)),
          ~has | (load[b] >= cap[b] * (1 - rtol)), ~has | (level >= link_max[b] * (1 - rtol)),
          ~has | jnp.any(path == bneck[:, None], axis=1)]
    return jnp.all(load <= cap * (1 + rtol)) & jnp.all(jnp.stack([jnp.all(o) for o in ok]))


#: :func:`_device_check`, compiled
DEVICE_CHECK = jax.jit(_device_check, static_argnames=("n_links",))
