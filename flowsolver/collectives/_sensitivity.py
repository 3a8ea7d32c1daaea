"""Derivatives of a collective's time with respect to every link capacity, and the tidy
table of time saved per added GB/s by link, tier, technology and cable group.

Where NCCL's cost model sets the time (``latency + size / algbw``, the bandwidth a min and
product of the ring's flow-solved bus bandwidth, the algorithm's own flow solve, protocol
and per-channel caps, NVLink bandwidths and efficiencies), the derivative is that formula's
own: it is evaluated on :class:`~._dual.Dual` numbers whose derivatives are the flow
solves' (below) and the NVLink link's, so a binding constant cap gives exactly 0 and a tie
between a minimum's arguments the two one-sided derivatives (flagged).

A collective's time is ``base + sum over steps of count x (transfer + latency)``; only the
transfers depend on capacity, each through its own event-driven solve on the effective
capacities (raw capacity x the technology's efficiency), so
``d time / d raw_l = sum count x d transfer / d effective_l x efficiency_l``
(:func:`flowsolver.completion_sensitivity` for each step). A group's row is the exact
one-sided derivative for adding the same bandwidth to every link of the group at once (at a
tie, e.g. a symmetric all-to-all whose flows are held by both their NICs, upgrading one
link alone saves nothing while upgrading the tier does: the group rows say so exactly).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..timing import completion_sensitivity
from .._tolerance import RTOL
from ._dual import Dual

__all__ = ["time_gradient", "time_directional", "one_sided", "any_one_sided", "sensitivity_table", "GB"]

#: bytes per GB (decimal, as link rates are quoted)
GB = 1e9


def _steps(der):
    """Each distinct step's CompletionSensitivity and count (each step computed once per
    result, whichever derivation of it asks)."""
    memo = der.cache.setdefault("steps", {})
    out = []
    for rm, sizes, count in der.steps:
        key = (id(rm), id(sizes))
        if key not in memo:         # the forward's events where kept, else a re-run of the step
            kept = next((cs for run in der.cache.get("runs", ())
                         if (cs := run.lookup(rm, der.effective)) is not None), None)
            memo[key] = kept if kept is not None else completion_sensitivity(rm, sizes, der.effective)
        out.append((memo[key], count))
    return out


def _efficiency(der) -> np.ndarray:
    raw = np.asarray(der.raw, dtype=np.float64)
    return np.where(raw > 0, der.effective / np.where(raw > 0, raw, 1.0), 0.0)


def _raw_scale(der) -> np.ndarray:
    """Each link's raw capacity (1 where it is 0): the unit of the derivatives' chain."""
    raw = np.asarray(der.raw, dtype=np.float64)
    return np.where((raw > 0) & np.isfinite(raw), raw, 1.0)


def _per_capacity(der, elastic) -> np.ndarray:
    """d time / d raw_l from ``elastic`` = raw_l x d time / d raw_l (0 on failed links): the
    division overflows to a signed infinity for a link of ~1e-300 B/s, never to NaN."""
    raw = np.asarray(der.raw, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(raw > 0, elastic / _raw_scale(der), 0.0)


def _check_side(side):
    if side not in ("up", "down"):
        raise ValueError(f"side must be 'up' or 'down', got {side!r}")


def _flow_elasticity(der, side):
    """raw_l x d (flow-solved time) / d raw_l per link (s): the steps' elasticities in their
    effective capacities, which are the same (effective = efficiency x raw)."""
    key = ("elasticity", side, tuple((id(rm), id(sizes), count) for rm, sizes, count in der.steps))
    if key not in der.cache:            # the ring's and an algorithm's own steps are often the same
        total = np.zeros(len(der.raw))
        for cs, count in _steps(der):
            total += count * cs.elasticity(side)
        der.cache[key] = total
    return der.cache[key]


def _flow_gradient(der, side):
    return _per_capacity(der, _flow_elasticity(der, side))


def _flow_one_sided(der):
    out = np.zeros(len(der.raw), dtype=bool)
    for cs, _ in _steps(der):
        out |= cs.one_sided()
    return out


def _flow_directional(der, dc, side):
    eff = dc * _efficiency(der)
    return float(sum(count * cs.directional(eff, side) for cs, count in _steps(der)))


def _unit_direction(der, dc):
    """``dc`` scaled to at most each link's raw capacity, and the factor it was divided by
    (the derivative is positively homogeneous in the direction: the chain runs on numbers
    of the order of the time, the factor multiplies the result)."""
    reach = float(np.max(np.abs(dc) / _raw_scale(der), initial=0.0))
    return (dc / reach, reach) if reach > 0 else (dc, 0.0)


def _tuned(der, tangent, flagged, nvlink, side, net=None):
    """The Dual of a time NCCL's cost model set, for ``side``: its formula on the Duals of the
    ring's transfer, the algorithm's own steady transfer (``tangent(part, side)``,
    ``flagged(part)`` of their solved steps), the NVLink bandwidth (``nvlink``, a Dual or None)
    and NCCL's view of the NICs (``net``, a Dual or None: the formula's own constant).
    Each side of a minimum needs only that side of its arguments, so both of a Dual's sides
    carry ``side``'s derivatives: where they then differ, a tie of the formula is one-sided."""
    tf = der.tuned
    parts = [replace(der, steps=steps, tuned=None) for steps in (tf.ring, tf.own)]     # one shared cache
    ring, own = (Dual(v, tangent(d, side), None, flagged(d)) for v, d in zip(tf.values, parts))
    nvlink = tf.values[2] if nvlink is None else nvlink
    t = Dual.of(tf.formula(ring, own, nvlink) if net is None else tf.formula(ring, own, nvlink, net))
    return t, t.up if side == "up" else t.down


def _least_nvlinks(der) -> np.ndarray:
    """The links (graph edge order) of the ranks' NVLinks at their least effective capacity:
    the tuner's NVLink bandwidth is their minimum, so only these move it (all of them on a
    healthy server: a tie, one-sided)."""
    idx = np.asarray(der.tuned.nvlinks(), dtype=np.int64)
    eff = np.asarray(der.effective, dtype=np.float64)[idx]
    low = eff.min()
    return idx[np.abs(eff - low) <= RTOL * abs(low)]


def _nvlink_alone(der):
    """The tuner's NVLink bandwidth as a :class:`Dual` along each link alone (bytes/s per unit
    of the link's raw capacity): a tied link raised leaves the others' minimum (right
    derivative 0), lowered lowers it (left derivative its efficiency), as :func:`lesser`."""
    tied = _least_nvlinks(der)
    down = np.zeros(len(der.raw))
    down[tied] = (_efficiency(der) * _raw_scale(der))[tied]
    up = down if len(tied) == 1 else np.zeros_like(down)
    return Dual(der.tuned.values[2], up, down, up != down)


def _nvlink_along(der, unit):
    """The tuner's NVLink bandwidth as a :class:`Dual` along the direction ``unit`` (raw
    capacities): the least of the tied links' slopes to the right, the greatest to the left."""
    tied = _least_nvlinks(der)
    slopes = unit[tied] * _efficiency(der)[tied]
    return Dual(der.tuned.values[2], slopes.min(), slopes.max(), slopes.min() != slopes.max())


def _net_slopes(der, unit=None) -> tuple:
    """(value, slopes of the least cells): NCCL's view of the NICs (``Hardware.net_bw``, the
    formula's fourth value) is the least of its cells' sums of weight x effective capacity
    (:func:`~._net_cells.net_cells`); each tied cell's slope along each link alone (``unit``
    None: raw_l x d cell / d raw_l, an array per cell) or along ``unit`` (raw capacities: a
    number per cell). A view below the cells' least (a share the model set otherwise) scales
    with them."""
    tf = der.tuned
    cells = _cells(der)
    eff, effective = _efficiency(der), np.asarray(der.effective, dtype=np.float64)
    sums = [sum(w * effective[i] for i, w in cell) for cell in cells]
    low = min(sums)
    if not low > 0:
        return tf.values[3], []
    scale = tf.values[3] / low
    slopes = []
    for cell, total in zip(cells, sums):
        if abs(total - low) > RTOL * abs(low):
            continue
        if unit is None:
            slope = np.zeros(len(der.raw))
            for i, w in cell:
                slope[i] += w * effective[i] * scale
        else:
            slope = sum(w * unit[i] * eff[i] for i, w in cell) * scale
        slopes.append(slope)
    return tf.values[3], slopes


def _cells(der) -> tuple:
    """The NIC cells of ``der``'s formula (:attr:`~._results.TunedFormula.net`, a tuple or a
    function giving one; () where it has none)."""
    net = getattr(der.tuned, "net", ())
    return net() if callable(net) else net


def _net_dual(der, unit=None):
    """NCCL's view of the NICs as a :class:`Dual`, along each link alone (``unit`` None: bytes/s
    per unit of the link's raw capacity, an array; :func:`_net_slopes`) or along the direction
    ``unit`` (raw capacities): the least of the tied cells' slopes to the right, the greatest to
    the left (one server's cable raised leaves the other servers' least: 0), as :func:`lesser`;
    None where the formula has no NICs."""
    if not _cells(der):
        return None
    value, slopes = _net_slopes(der, unit)
    if not slopes:
        return None
    up, down = np.minimum.reduce(slopes), np.maximum.reduce(slopes)
    return Dual(value, up, down, up != down)


def _tuned_gradient(der, side):
    """(Dual, derivative) of a tuned time along each link alone, in units of each link's raw
    capacity (raw_l x d time / d raw_l: finite wherever the time is; cached with the
    derivation)."""
    if ("tuned", side) not in der.cache:
        nvlink = _nvlink_alone(der) if der.tuned.nvlinks() else None
        der.cache["tuned", side] = _tuned(der, _flow_elasticity, _flow_one_sided, nvlink, side, _net_dual(der))
    return der.cache["tuned", side]


def _p2p_state(der):
    """Where a send / receive's P2P channels bound its transfer (``der.p2p``: least, solved):
    ``"binds"`` (no link changes the time), ``"tie"`` (the time is the greater of the two:
    a link's change counts on the side it slows the flows, one-sided) or None."""
    if der.p2p is None:
        return None
    least, solved = der.p2p
    return "binds" if least > solved else "tie" if least == solved else None


def _bounded(value, state, side):
    """A flow derivative ``value`` (a number or an array) through ``max(least, transfer)``."""
    if state == "binds":
        return np.zeros_like(value) if isinstance(value, np.ndarray) else 0.0
    if state == "tie":        # right derivative max(0, v); left derivative min(0, v)
        return np.maximum(value, 0.0) if side == "up" else np.minimum(value, 0.0)
    return value


def time_gradient(der, side: str = "up") -> np.ndarray:
    """d time / d raw capacity of each link alone, s per byte/s (a derivative past float64,
    on a link of ~1e-300 B/s, is a signed infinity, never NaN)."""
    _check_side(side)
    if der.tuned is None:
        return _bounded(_flow_gradient(der, side), _p2p_state(der), side)
    elastic = np.broadcast_to(_tuned_gradient(der, side)[1], (len(der.raw),)).astype(np.float64)
    return _per_capacity(der, elastic)


def one_sided(der) -> np.ndarray:
    """Links whose time derivative may depend on the sign of the change (any step's, or a
    tie between the arguments of a minimum in NCCL's cost model)."""
    if der.tuned is None:
        state = _p2p_state(der)
        if state == "binds":
            return np.zeros(len(der.raw), dtype=bool)
        flagged = _flow_one_sided(der)
        return flagged | (_flow_gradient(der, "down") != 0) if state == "tie" else flagged
    t = _tuned_gradient(der, "up")[0]
    return np.broadcast_to(t.flag | (t.up != t.down), (len(der.raw),)).copy()


def any_one_sided(der) -> bool:
    """``one_sided(der).any()``, stopping at the first tie where no cost model is involved."""
    if der.tuned is None and _p2p_state(der) is None:
        return any(cs.any_one_sided() for cs, _ in _steps(der))
    return bool(one_sided(der).any())


def time_directional(der, d_capacity, side: str = "up") -> float:
    """One-sided derivative of the time (s) along ``d_capacity`` (bytes/s per link, raw)."""
    _check_side(side)
    dc = np.asarray(d_capacity, dtype=np.float64)
    if dc.shape != (len(der.raw),):
        raise ValueError(f"d_capacity must have shape ({len(der.raw)},) - one entry per link - got {dc.shape}")
    if not np.isfinite(dc).all():
        raise ValueError("d_capacity must be finite numbers (bytes/s per link)")
    unit, reach = _unit_direction(der, dc)
    if reach == 0.0:
        return 0.0
    if der.tuned is None:
        value = _bounded(_flow_directional(der, unit, side), _p2p_state(der), side)
    else:
        dn = _nvlink_along(der, unit) if der.tuned.nvlinks() else None
        value = float(_tuned(der, lambda d, s: _flow_directional(d, unit, s), lambda d: False, dn, side,
                             _net_dual(der, unit))[1])
    with np.errstate(over="ignore"):
        return float(np.float64(value) * reach)


def sensitivity_table(links, time: float, gradient, directional, side: str = "up"):
    """Tidy DataFrame: one row per link (``group_by="link"``) and per tier, technology and
    cable group (tier/technology); ``saved_s_per_GBps`` is the time saved (s) per GB/s added
    to each link of the row (``side="down"``: the time lost per GB/s taken away),
    ``saved_percent_per_GBps`` the same as a percentage of ``time``. A link that is no
    bottleneck anywhere has exactly 0."""
    import pandas as pd

    grad = gradient(side)
    src, dst = np.asarray(links.src, dtype=object), np.asarray(links.dst, dtype=object)
    tier, tech = np.asarray(links.tier, dtype=str), np.asarray(links.tech, dtype=str)
    cable = np.char.add(np.char.add(tier, "/"), tech)
    cap = np.asarray(links.capacity, dtype=np.float64) / GB
    rows = [dict(group_by="link", group=f"{s}->{d}", tier=t, tech=k, links=1, capacity_GBps=c,
                 saved_s_per_GBps=-g * GB + 0.0)
            for s, d, t, k, c, g in zip(src, dst, tier, tech, cap, grad)]
    for name, keys in (("tier", tier), ("tech", tech), ("cable_group", cable)):
        for key in np.unique(keys):
            mask = keys == key
            saved = -directional(mask.astype(np.float64), side) * GB + 0.0
            rows.append(dict(group_by=name, group=str(key), tier=str(key) if name == "tier" else "",
                             tech=str(key) if name == "tech" else "", links=int(mask.sum()),
                             capacity_GBps=float(cap[mask].mean()), saved_s_per_GBps=saved))
    df = pd.DataFrame(rows)
    df["saved_percent_per_GBps"] = df["saved_s_per_GBps"] / time * 100.0
    return df

