"""The checks of :func:`~flowsolver.max_min_fair`'s per-link and per-flow inputs: real numbers
of the right shape as float64 copies, a batch's bad rows, subnormal numbers (which XLA on a
CPU flushes to zero)."""

from __future__ import annotations

import numpy as np


def bad_entries(mask, name, rule, arr, harmless, invalid) -> np.ndarray:
    """``arr`` with the bad entries (``mask``) of a batch's rows replaced by ``harmless``, each
    such row's first one's message in ``invalid`` (scenario -> message); raises as
    :func:`first_bad` for a row every scenario shares (1-D)."""
    if arr.ndim != 2:
        first_bad(mask, name, rule, arr)
    rows = np.flatnonzero(mask.any(axis=1))
    for i in rows:
        j = int(np.flatnonzero(mask[i])[0])
        invalid.setdefault(int(i), f"{name}[scenario {i}, {j}] must be {rule}, got {arr[i, j].item()!r}")
    out = arr.copy()
    out[mask] = harmless
    return out


def real_array(name, value) -> np.ndarray:
    """``value`` as a float64 array; complex, boolean, ragged or non-numeric input is an error."""
    try:
        raw = np.asarray(value)
    except ValueError:                                  # ragged nested lists
        raise ValueError(f"{name} must be a rectangular array of numbers (rows of equal length)") from None
    if raw.dtype == object:
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be real numbers, got {raw.ravel()[:3].tolist()!r}...") from None
    if np.iscomplexobj(raw):
        raise ValueError(f"{name} must be real numbers, got complex values (dtype {raw.dtype})")
    if raw.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be real numbers, got dtype {raw.dtype}")
    return raw.astype(np.float64)        # a copy: the Allocation keeps it (the caller may change theirs)


def per_item(name, value, n, default, *, what):
    """Broadcast a per-item input to (n,) or (B, n) float64, checking its shape."""
    if value is None:
        return np.asarray(default, dtype=np.float64)
    arr = real_array(name, value)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise ValueError(f"{name} must have shape ({n},) or (batch, {n}) - one entry per {what} - "
                         f"got shape {arr.shape}")
    return arr


def lowest(arr) -> float:
    """The smallest entry of ``arr`` (NaN if it holds one: ``np.min`` propagates it; +inf if empty)."""
    return float(np.min(arr, initial=np.inf))


def has_subnormal(arr, least: float, chunk: int = 1 << 22) -> bool:
    """Whether ``arr`` holds a number in (0, ``least``), a chunk at a time (a batch of 65,536
    scenarios of 7,168 links would otherwise take a 470 MB mask)."""
    flat = arr.reshape(-1)
    return any(((part > 0) & (part < least)).any() for part in (flat[i:i + chunk] for i in range(0, flat.size, chunk)))


def subnormal_rule(dtype) -> str:
    """What a positive capacity or cap must be in ``dtype`` (:meth:`Problem.check_range`'s words)."""
    least = float(np.finfo(dtype).tiny)
    return f"0 or at least {least:.3g} bytes/s with dtype={np.dtype(dtype).name!r} (a subnormal number is flushed to zero)"


def first_bad(mask, name, rule, arr):
    """Raise for the first entry of ``arr`` where ``mask`` holds, naming its position."""
    idx = np.argwhere(mask)[0]
    where = f"[{idx[0]}]" if len(idx) == 1 else f"[scenario {idx[0]}, {idx[1]}]"
    raise ValueError(f"{name}{where} must be {rule}, got {arr[tuple(idx)].item()!r}")
