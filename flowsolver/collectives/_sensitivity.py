"""Derivatives of a collective's time with respect to every link capacity, and the tidy
table of time saved per added GB/s by link, tier, technology and cable group.

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

import numpy as np

from .._completion_sensitivity import completion_sensitivity

__all__ = ["time_gradient", "time_directional", "one_sided", "sensitivity_table", "GB"]

#: bytes per GB (decimal, as link rates are quoted)
GB = 1e9


def _steps(der):
    """Each distinct step's CompletionSensitivity (computed once per result)."""
    if "steps" not in der.cache:
        der.cache["steps"] = [(completion_sensitivity(rm, sizes, der.effective), count)
                              for rm, sizes, count in der.steps]
    return der.cache["steps"]


def _efficiency(der) -> np.ndarray:
    raw = np.asarray(der.raw, dtype=np.float64)
    return np.where(raw > 0, der.effective / np.where(raw > 0, raw, 1.0), 0.0)


def time_gradient(der, side: str = "up") -> np.ndarray:
    """d time / d raw capacity of each link alone, s per byte/s."""
    if side not in ("up", "down"):
        raise ValueError(f"side must be 'up' or 'down', got {side!r}")
    total = np.zeros(len(der.raw))
    for cs, count in _steps(der):
        total += count * cs.gradient(side)
    return total * _efficiency(der)


def one_sided(der) -> np.ndarray:
    """Links whose time derivative may depend on the sign of the change (any step's)."""
    out = np.zeros(len(der.raw), dtype=bool)
    for cs, _ in _steps(der):
        out |= cs.one_sided()
    return out


def time_directional(der, d_capacity, side: str = "up") -> float:
    """One-sided derivative of the time (s) along ``d_capacity`` (bytes/s per link, raw)."""
    if side not in ("up", "down"):
        raise ValueError(f"side must be 'up' or 'down', got {side!r}")
    dc = np.asarray(d_capacity, dtype=np.float64)
    if dc.shape != (len(der.raw),):
        raise ValueError(f"d_capacity must have shape ({len(der.raw)},) - one entry per link - got {dc.shape}")
    eff = dc * _efficiency(der)
    return float(sum(count * cs.directional(eff, side) for cs, count in _steps(der)))


def sensitivity_table(links, time: float, gradient, directional, side: str = "up"):
    """Tidy DataFrame: one row per link (``group_by="link"``) and per tier, technology and
    cable group (tier/technology); ``saved_s_per_GBps`` is the time saved (s) per GB/s added
    to each link of the row (``side="down"``: the time lost per GB/s taken away),
    ``saved_percent_per_GBps`` the same as a percentage of ``time``. A link that is no
    bottleneck anywhere has exactly 0; NaN marks a value the event order leaves open."""
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

