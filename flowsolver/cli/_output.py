"""What the command prints and writes: strict JSON, CSV, and output paths checked before
any computation."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

def plain(value):
    """A value JSON can hold: NumPy scalars as Python ones, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:                                  # pandas' missing values (NA, NaT)
        import pandas as pd

        if pd.isna(value):
            return None
    except (ImportError, TypeError, ValueError):
        pass
    return str(value)



def to_json(obj) -> str:
    """Strict JSON (``null`` where a value is missing, never ``NaN``)."""
    return json.dumps(plain(obj), indent=2, allow_nan=False)



def writable(name: str, path):
    """``path`` with ``~`` expanded, or a one-line error, before any computation, when it
    cannot be written (a folder that does not exist or is not writable, or a folder itself)."""
    if path is None:
        return None
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is a folder; give a file name")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{name}: folder {str(folder)!r} does not exist (for {str(path)!r})")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{name}: folder {str(folder)!r} is not writable (for {str(path)!r})")
    return str(path)



def emit(rows: list, args, text: str) -> None:
    if args.json:
        print(to_json(rows))
    elif args.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        print(buf.getvalue(), end="")
    else:
        print(text)



@contextmanager
def said_warnings():
    """The library's warnings raised inside (a log's NCCL settings the model does not express,
    read by ``collective --compare`` and ``calibrate``) printed on stderr as the CLI's own
    ``flowsolver: warning: ...`` lines, without Python's source line; other than UserWarnings
    passed on as they were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")        # recorded, each once, whatever the caller's filters
        yield
    for w in caught:
        if issubclass(w.category, UserWarning):
            print(f"flowsolver: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
