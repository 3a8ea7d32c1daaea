"""A :class:`~._calibration.Calibration` as a JSON file (:meth:`Calibration.save`,
:meth:`Calibration.load`): what the command line carries from ``calibrate --save`` to
``collective`` and ``train --calibration``.

The file is one JSON object: ``format`` (``"flowsolver-calibration"``), ``version``
(:data:`VERSION`), the fitted quantities (``efficiency`` by technology, ``latency_scale``,
``ll_bandwidth``, ``p2p_bandwidth``, ``net_latency`` and ``launch_latency`` in s, ``pipeline``:
the :class:`~._pipeline.Pipeline`'s floors in s and fills in steps), ``ranks``, ``ops``,
``unconstrained``, ``parameters`` (each :class:`~._calibration.FittedParameter`), ``converged``
and ``message``. The residuals (a DataFrame of the logs' rows) are left out: a loaded
calibration's ``residuals`` is None.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields

from ._nccl import OPS
from ._pipeline import Pipeline

__all__ = ["VERSION", "FORMAT", "calibration_dict", "save_calibration", "read_calibration"]

#: the file's ``format`` value and the ``version`` this flowsolver writes and reads
FORMAT = "flowsolver-calibration"
VERSION = 1
#: the most bytes a calibration file is read to (one is under 10 kB: a few numbers per quantity)
MAX_BYTES = 1 << 20

_FACTORS = ("latency_scale", "ll_bandwidth", "p2p_bandwidth")      # factors on the library's: > 0
#: s, added to every call / network hop: >= 0 (calibrate bounds them at 0; a negative one makes
#: small messages take negative times)
_SECONDS = ("net_latency", "launch_latency")
_PARAMETER = {"name": str, "value": float, "default": float, "uncertainty": float, "constrained": bool, "unit": str}
_KINDS = {str: "a string", bool: "true or false"}


def calibration_dict(cal) -> dict:
    """The JSON object of ``cal`` (plain Python numbers, strings and lists)."""
    return {"format": FORMAT, "version": VERSION,
            "efficiency": {str(k): float(v) for k, v in cal.efficiency.items()},
            **{name: float(getattr(cal, name)) for name in _FACTORS + _SECONDS},
            "pipeline": {k: float(v) for k, v in asdict(cal.pipeline).items()},
            "ranks": int(cal.ranks), "ops": [str(o) for o in cal.ops],
            "unconstrained": [str(u) for u in cal.unconstrained],
            "parameters": [{k: (float(v) if isinstance(v, float) else v) for k, v in asdict(p).items()}
                           for p in cal.parameters],
            "converged": bool(cal.converged), "message": str(cal.message)}


def save_calibration(cal, path) -> None:
    """Write ``cal`` to ``path`` as JSON (:func:`calibration_dict`); ValueError where a value is
    not a finite number (JSON has none)."""
    try:
        text = json.dumps(calibration_dict(cal), indent=1, allow_nan=False)
    except ValueError:
        raise ValueError(f"{path}: the calibration holds a value that is not a finite number; it is not saved") \
            from None
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def _number(data, key, where, positive=False, nonnegative=False) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (positive and value <= 0) or (nonnegative and value < 0):
        want = "a number > 0" if positive else "a number >= 0" if nonnegative else "a finite number"
        raise ValueError(f"{where}: {key!r} must be {want}, got {value!r}")
    return float(value)


def _strings(data, key, where, allowed=None) -> tuple:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: {key!r} must be a list of strings, got {value!r}")
    if allowed is not None and (bad := [v for v in value if v not in allowed]):
        raise ValueError(f"{where}: {key!r} names {', '.join(map(repr, bad))}, not among {', '.join(allowed)}")
    return tuple(value)


def _parameters(data, where) -> list:
    """The ``parameters`` entries, checked: each a dict of a FittedParameter's fields."""
    value = data.get("parameters", [])
    if not isinstance(value, list):
        raise ValueError(f"{where}: 'parameters' must be a list of objects, got {value!r}")
    out = []
    for i, p in enumerate(value):
        if not isinstance(p, dict) or set(p) != set(_PARAMETER):
            got = sorted(p) if isinstance(p, dict) else p
            raise ValueError(f"{where}: parameters[{i}] must be an object with keys {', '.join(_PARAMETER)}, "
                             f"got {got!r}")
        p = dict(p)
        for k, kind in _PARAMETER.items():
            if k == "uncertainty" and p[k] is None:
                continue
            if kind is float:       # a factor ("x") > 0; seconds, steps and an uncertainty >= 0
                unit = p.get("unit")
                p[k] = _number(p, k, f"{where}: parameters[{i}]", positive=k != "uncertainty" and unit == "x",
                               nonnegative=k == "uncertainty" or unit in ("s", "steps"))
            elif not isinstance(p[k], kind):
                raise ValueError(f"{where}: parameters[{i}][{k!r}] must be {_KINDS[kind]}, got {p[k]!r}")
        out.append(p)
    return out


def read_calibration(path) -> dict:
    """The keywords of the :class:`~._calibration.Calibration` a file of :func:`save_calibration`
    holds (every field but ``residuals``; ``parameters`` a list of dicts of a
    :class:`~._calibration.FittedParameter`'s fields); ValueError naming the file and what is
    wrong where it is not JSON, gives a key twice in one object, is not a calibration, of
    another format version, or holds a value out of range."""
    from topologies.formats import DuplicateKey, read_bytes, unique_keys

    where = f"calibration file {str(path)!r}"
    data = read_bytes(path, MAX_BYTES, too_large=lambda size: f"{where} holds more than {MAX_BYTES:,} bytes "
                      "(a calibration is a few kB): not a calibration file")
    try:
        data = json.loads(data.decode("utf-8"), object_pairs_hook=unique_keys)
    except DuplicateKey as err:
        raise ValueError(f"{where}: {err} (JSON keeps the last; which was meant?)") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"{where} is not JSON ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        said = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{where} is not a flowsolver calibration (its 'format' is {said!r}, not {FORMAT!r}: "
                         "write one with flowsolver calibrate LOG... --save FILE.json, or Calibration.save)")
    if data.get("version") != VERSION:
        raise ValueError(f"{where} is of format version {data.get('version')!r}; this flowsolver reads version "
                         f"{VERSION}: calibrate the logs again with it (flowsolver calibrate LOG... --save)")
    known = {"format", "version", "efficiency", "pipeline", "ranks", "ops", "unconstrained", "parameters",
             "converged", "message", *_FACTORS, *_SECONDS}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    efficiency = data.get("efficiency")
    if not isinstance(efficiency, dict):
        raise ValueError(f"{where}: 'efficiency' must be an object of technology: fraction, got {efficiency!r}")
    for tech in efficiency:
        if _number(efficiency, tech, f"{where}: efficiency", positive=True) > 1:
            raise ValueError(f"{where}: efficiency[{tech!r}] must be in (0, 1], got {efficiency[tech]!r}")
    pipeline = data.get("pipeline")
    names = [f.name for f in fields(Pipeline)]
    if not isinstance(pipeline, dict) or set(pipeline) != set(names):
        raise ValueError(f"{where}: 'pipeline' must be an object with keys {', '.join(names)}, got {pipeline!r}")
    ranks = data.get("ranks")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"{where}: 'ranks' must be a whole number >= 1, got {ranks!r}")
    for key, kind in (("converged", bool), ("message", str)):
        if not isinstance(data.get(key), kind):
            raise ValueError(f"{where}: {key!r} must be {_KINDS[kind]}, got {data.get(key)!r}")
    return dict(
        efficiency={k: float(v) for k, v in efficiency.items()},
        **{k: _number(data, k, where, positive=True) for k in _FACTORS},
        **{k: _number(data, k, where, nonnegative=True) for k in _SECONDS},
        pipeline=Pipeline(**{k: _number(pipeline, k, f"{where}: pipeline", nonnegative=True) for k in names}),
        ranks=ranks, ops=_strings(data, "ops", where, OPS), unconstrained=_strings(data, "unconstrained", where),
        parameters=_parameters(data, where), converged=data["converged"], message=data["message"])
