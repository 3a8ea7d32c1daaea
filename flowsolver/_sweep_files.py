"""The files of a sweep (:func:`flowsolver.sweep`): the results file's columns, reading a
previous run's rows back (dropping rows a cut or damaged file left incomplete, so their
scenarios run again), writing the file atomically after every batch, and the persistent
JAX compilation cache a sweep may use (only where a folder is named; JAX's settings are
restored afterwards)."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import secrets
import stat
import warnings
from pathlib import Path

import topologies as tp
from topologies.links import _BUILTIN as _BUILTIN_LINKS
from topologies.servers import _BUILTIN_SERVERS

#: result columns and their types, each named as the result field it copies (CollectiveResult.time
#: / algbw / busbw, StepResult.step_time / tokens_per_s / speedup / comm_overhead; ``chosen_algorithm``
#: / ``chosen_protocol`` the result's ``algorithm`` / ``protocol``: the parameters hold what was asked)
METRICS = {"status": str, "error": str, "gpus": "Int64", "time": float, "algbw": float, "busbw": float,
           "chosen_algorithm": str, "chosen_protocol": str, "bottleneck_tier": str, "step_time": float,
           "tokens_per_s": float, "speedup": float, "comm_overhead": float}

#: the range each numeric metric of a finished (status ok) row lies in: (least, whether it may
#: equal it, greatest). An ok collective has a finite time (an infinite one is "stalled") for a
#: size > 0, so time > 0 and algbw = size / time > 0, busbw = algbw x NCCL's factor > 0
#: (collectives._collective._result); an ok step has step_time = compute + bubble + exposed > 0,
#: tokens_per_s = tokens / step_time > 0, speedup = tokens_per_s / one GPU's > 0 and
#: comm_overhead = exposed / step_time in [0, 1] (training._compose); gpus counts at least one GPU
OK_RANGES = {"gpus": (1, True, math.inf), "time": (0.0, False, math.inf), "algbw": (0.0, False, math.inf),
             "busbw": (0.0, False, math.inf), "step_time": (0.0, False, math.inf),
             "tokens_per_s": (0.0, False, math.inf), "speedup": (0.0, False, math.inf),
             "comm_overhead": (0.0, True, 1.0)}


#: the column naming the flowsolver version that computed a row (``flowsolver.__version__``): a
#: resumed sweep runs again the rows of another version, and those of a file written before
#: rows named their version (the cell missing or empty)
VERSION_COLUMN = "flowsolver_version"


def ok_row_problem(row: dict, keys) -> str | None:
    """What is wrong with the metrics ``keys`` of a row read back with status ok, if anything:
    a metric that is missing, empty, not a number, NaN, infinite or out of its range
    (:data:`OK_RANGES`), or an empty ``chosen_algorithm`` where ``keys`` names it.

    >>> ok_row_problem({"gpus": 8, "time": 2.8e-05}, ("gpus", "time")) is None
    True
    >>> ok_row_problem({"gpus": 8, "time": -1.0}, ("gpus", "time"))
    'time -1.0 is not > 0'
    >>> ok_row_problem({"gpus": 8}, ("gpus", "time"))
    'time is missing'
    """
    for key in keys:
        if key not in row:
            return f"{key} is missing"
        value = row[key]
        if key not in OK_RANGES:                           # a text metric: filled
            if not isinstance(value, str) or not value:
                return f"{key} is empty"
            continue
        if empty(value):                                  # (an empty CSV cell reads as NaN)
            return f"{key} is empty or NaN"
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"{key} {value!r} is not a number"
        least, inclusive, most = OK_RANGES[key]
        if not math.isfinite(number):
            return f"{key} {number!r} is not finite"
        if number < least or (number == least and not inclusive):
            return f"{key} {number!r} is not {'>=' if inclusive else '>'} {least:g}"
        if number > most:
            return f"{key} {number!r} is more than {most:g}"
    return None


def empty(value) -> bool:
    """Whether a cell holds nothing: None, "", NaN or pandas' NA (which has no truth value)."""
    try:
        return bool(value is None or value == "" or value != value)
    except TypeError:
        return True


#: environment variable naming the compilation cache folder ("off" or empty: no cache)
CACHE_ENV = "FLOWSOLVER_CACHE_DIR"
_OFF = ("", "off", "none", "0")


def default_cache_dir(environ=None) -> Path | None:
    """The persistent JAX compilation cache a sweep uses when not told (``environ``: the
    environment, ``os.environ`` unless given): the folder ``$FLOWSOLVER_CACHE_DIR`` names,
    or None (no cache) when it is not set or is ``off``, ``none`` or empty. A sweep writes
    nothing outside its ``out`` file unless a cache folder is named here or as ``cache_dir``.

    >>> print(default_cache_dir({"FLOWSOLVER_CACHE_DIR": "off"}), default_cache_dir({"HOME": "/home/me"}))
    None None
    >>> default_cache_dir({"FLOWSOLVER_CACHE_DIR": "/scratch/me/jax"}).as_posix()
    '/scratch/me/jax'
    """
    from .solver import cache_folder     # (loads JAX: only when asked)

    env = os.environ if environ is None else environ
    return cache_folder(env) if CACHE_ENV in env else None     # named, or switched off


def cache_path(cache_dir) -> Path | None:
    """The folder ``cache_dir`` names (None: no cache), checked before any scenario runs."""
    name = "cache_dir"
    if isinstance(cache_dir, str) and cache_dir == "default":
        cache_dir, name = default_cache_dir(), f"${CACHE_ENV}"
    if cache_dir is None or cache_dir is False or (isinstance(cache_dir, str) and cache_dir.strip().lower() in _OFF):
        return None
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a folder (str or Path), None or 'off', got {cache_dir!r}")
    path = Path(os.path.expanduser(os.fspath(cache_dir)))
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is not a folder")
    return path


#: the JAX settings a sweep with a cache changes, and puts back when it returns or raises
_CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


@contextlib.contextmanager
def compilation_cache_for(path):
    """JAX's persistent compilation cache in ``path`` for the duration of the block (nothing
    when ``path`` is None); every setting changed is restored afterwards, and the cache JAX
    opened is closed, so that later compiles go where they went before."""
    if path is None:
        yield
        return
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    from .solver import ensure_compilation_cache

    ensure_compilation_cache()       # the solver's own choice made first: restored to it afterwards
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cache_dir: cannot create {str(path)!r}: {err.strerror or err}") from None
    saved = {name: getattr(jax.config, name) for name in _CACHE_SETTINGS}
    try:
        jax.config.update("jax_compilation_cache_dir", str(path))
        # small compiles too (JAX's default is 1 s), unless the user already set a lower bar
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          min(0.5, saved["jax_persistent_cache_min_compile_time_secs"]))
        compilation_cache.reset_cache()        # JAX opens its cache once: open the one named here
        yield
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()        # ... and the user's own (if any) again afterwards


#: the largest results file a sweep resumes from (bytes): a sweep's CSV row is ~190 bytes
#: (250 with an error message), so 64 MiB holds 100,000 scenarios (MAX_SCENARIOS) of rows up to
#: 670 bytes; reading 64 MiB of such rows took 1.4 GB peak RSS and 26 s (/usr/bin/time, 351,356
#: rows, 2026-12-06); the environment's FLOWSOLVER_RESULTS_MAX_BYTES raises it
MAX_RESULTS_BYTES = 64 << 20
#: the most rows of a Parquet results file read (its size says little: it is compressed), the
#: rows 64 MiB of CSV holds at 190 bytes a row; 340,000 such rows (1.9 MB of Parquet) took
#: 1.2 GB peak RSS and 9.8 s to read (/usr/bin/time, 2026-12-06)
MAX_RESULTS_ROWS = 350_000
#: the most bytes of a results file's first line (its column names: ~400 bytes)
_HEADER_BYTES = 1 << 16
_LIMIT_ENV = "FLOWSOLVER_RESULTS_MAX_BYTES"


def results_limit(environ=None) -> int:
    """The largest results file read (bytes): ``$FLOWSOLVER_RESULTS_MAX_BYTES``, else
    :data:`MAX_RESULTS_BYTES` (64 MiB).

    >>> results_limit({}), results_limit({"FLOWSOLVER_RESULTS_MAX_BYTES": "1000"})
    (67108864, 1000)
    """
    given = (os.environ if environ is None else environ).get(_LIMIT_ENV, "").strip()
    if not given:
        return MAX_RESULTS_BYTES
    if not (given.isascii() and given.isdigit() and int(given) >= 1):
        raise ValueError(f"{_LIMIT_ENV} must be an integer >= 1 (bytes), got {given!r}")
    return int(given)


def read_rows(path: Path, max_bytes: int | None = None):
    """The rows a previous run left in ``path`` (a list of dicts; None when there is no file
    or it is empty). CSV rows that a cut or damaged file left incomplete (the file ends in
    the middle of a row, a row with the wrong number of fields or a metric that is not a
    number) are dropped with a warning, so that their scenarios run again; a file that cannot
    be read at all, or that is not a sweep's, is a ValueError naming it (it is left as it is).
    Its column names (a CSV's first line, a Parquet file's schema) are checked before the
    rest is read; a file over ``max_bytes`` (default :func:`results_limit`, 64 MiB) or a
    Parquet file of more than :data:`MAX_RESULTS_ROWS` rows is refused unread."""
    import pandas as pd

    if not path.exists() or path.stat().st_size == 0:
        return None
    limit = results_limit() if max_bytes is None else max_bytes
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = _parquet(path, pq.read_metadata)
        _check_columns(path, list(meta.schema.names))
        _check_size(path, limit)
        if meta.num_rows > MAX_RESULTS_ROWS:
            raise _unreadable(path, f"it holds {meta.num_rows} rows, more than the {MAX_RESULTS_ROWS} "
                                    "a sweep resumes from")
        return _parquet(path, pd.read_parquet).to_dict("records")
    _check_header(path)
    _check_size(path, limit)
    return _read_csv(path, limit)


def _parquet(path: Path, read):
    try:
        return read(path)
    except Exception as err:   # pyarrow's errors are not all ValueErrors; any failure means the same
        raise _unreadable(path, f"it is not a readable Parquet file ({type(err).__name__}: {err})") from None


def _check_header(path: Path):
    """A CSV's first line names the id and status columns (read alone: a large file that is
    not a sweep's is refused without reading the rest)."""
    with open(path, "rb") as fh:
        first = fh.readline(_HEADER_BYTES)
    if not first.endswith(b"\n"):
        if len(first) >= _HEADER_BYTES:
            raise _unreadable(path, f"its first line (the column names) is longer than {_HEADER_BYTES} bytes")
        return                            # the whole file is one line: _read_csv says what is wrong
    try:
        header = next(csv.reader([first.decode("utf-8").rstrip("\r\n")], strict=True), [])
    except (UnicodeDecodeError, csv.Error):
        raise _unreadable(path, "its first line (the column names) is not UTF-8 CSV") from None
    _check_columns(path, header)


def _check_size(path: Path, limit: int, size=None):
    size = path.stat().st_size if size is None else size
    if size > limit:
        raise _unreadable(path, f"it holds {size} bytes, more than the {limit} a sweep resumes from "
                                f"({_LIMIT_ENV} raises the limit; reading takes ~20 x the file's size "
                                "in memory)")


def _unreadable(path, why):
    return ValueError(f"out: cannot resume from {str(path)!r}: {why}; move it away, or pass resume=False "
                      f"(flowsolver sweep --no-resume) to overwrite it")


def _check_columns(path, columns):
    missing = [c for c in ("id", "status") if c not in columns]
    if missing:
        raise _unreadable(path, f"it has no {', '.join(repr(c) for c in missing)} column, so it is not a sweep's "
                                f"results")


def _read_csv(path: Path, limit: int) -> list:
    with open(path, "rb") as fh:
        raw = fh.read(limit + 1)          # (a file may grow after its size was checked)
    _check_size(path, limit, len(raw))
    whole = raw.endswith(b"\n")          # every row a run writes ends with a newline
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        if whole or err.start <= raw.rfind(b"\n"):
            raise _unreadable(path, f"it is not UTF-8 text ({err.reason} at byte {err.start})") from None
        text = raw.decode("utf-8", errors="replace")      # a character cut in the last row, dropped below
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records, bad = [], {}                 # (line, fields) read; line -> why a row is dropped
    while True:
        line = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            bad[line] = f"not CSV ({err})"
            records.append((line, None))
            continue
        if fields:                        # (a blank line holds nothing)
            records.append((line, fields))
    if records and not whole:
        bad[records[-1][0]] = "the file ends in the middle of it"
        records[-1] = (records[-1][0], None)
    if not records or records[0][1] is None:
        raise _unreadable(path, "its first line (the column names) is incomplete or not CSV")
    header = records[0][1]
    _check_columns(path, header)
    rows = []
    for line, fields in records[1:]:
        if fields is None:
            continue
        if len(fields) != len(header):
            bad[line] = f"{len(fields)} fields, the header has {len(header)}"
            continue
        row, why = {}, None
        for key, value in zip(header, fields):
            row[key], problem = _metric(key, value)
            if problem:
                why = f"{key} {value!r} {problem}"
        if why:
            bad[line] = why
        else:
            rows.append(row)
    if bad:
        lines = sorted(bad)
        one = len(lines) == 1
        warnings.warn(f"out {str(path)!r}: {'line' if one else 'lines'} {', '.join(map(str, lines))} "
                      f"{'is' if one else 'are'} incomplete or unreadable "
                      f"({'; '.join(f'line {n}: {bad[n]}' for n in lines)}): dropped, "
                      f"{'its scenario' if one else 'their scenarios'} will run again", RuntimeWarning, stacklevel=5)
    return rows


def _metric(key, value):
    """A CSV field as its column's type (metrics; other columns stay text) and what is wrong
    with it, if anything."""
    kind = METRICS.get(key)
    if kind not in (float, "Int64"):
        return value, None
    if value == "":
        return math.nan, None
    try:
        number = float(value)
    except ValueError:
        return value, "is not a number"
    if kind == "Int64":
        if not number.is_integer():
            return value, "is not a whole number"
        return int(number), None
    return number, None


def write_atomic(df, path: Path) -> None:
    """``df`` written to ``path`` (CSV or Parquet, by its suffix) all at once: into a new file
    beside it, then renamed over it, so that a run stopped at any moment leaves the previous
    version or the new one, never a part of one."""
    target = Path(os.path.realpath(path))            # through a symbolic link, to the file it names
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        if path.suffix == ".parquet":
            with open(tmp, "xb") as fh:
                df.to_parquet(fh, index=False)
                fh.flush()
                os.fsync(fh.fileno())
        else:
            with open(tmp, "x", encoding="utf-8", newline="") as fh:
                df.to_csv(fh, index=False)
                fh.flush()
                os.fsync(fh.fileno())
        with contextlib.suppress(OSError):           # a file that is there keeps its permissions
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def typed_frame(rows: list, columns: list):
    import pandas as pd

    df = pd.DataFrame(rows, columns=columns)
    for key, kind in METRICS.items():
        if key not in df:
            continue
        if kind is float:
            df[key] = pd.to_numeric(df[key], errors="coerce").astype("float64")
        elif kind == "Int64":
            df[key] = pd.to_numeric(df[key], errors="coerce").astype("Int64")
        else:
            df[key] = df[key].astype(object).where(df[key].notna(), "").astype(str)
    return df


def _plain(value):
    """A scenario value as its id reads it: an integral finite float as its int, lists alike."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


_ADDED_LATER = {"protocol": None}       # grid parameters added since the first results files: defaults


def scenario_id(s: dict, options: str | None = None, definitions: tuple = ()) -> str:
    """A stable id of a scenario's parameters and the sweep's options (``options``: their
    ``repr``; what a rerun uses to skip it: a row computed under other options is not this
    scenario's). ``definitions``: what the user-registered catalogue names the scenario uses
    stand for (reprs): a name registered again with other values is another scenario.

    An integral float is its integer (``size = 1048576.0`` is the scenario of ``1048576``: a
    grid written either way resumes the same rows).

    >>> one = scenario_id({"nodes": 1})
    >>> scenario_id({"nodes": 1}) == one, scenario_id({"nodes": 1}, options="efficiency=0.5") == one
    (True, False)
    >>> scenario_id({"size": 1048576.0}) == scenario_id({"size": 1048576})
    True
    >>> scenario_id({"link": "mine"}, definitions=("400G",)) == scenario_id({"link": "mine"}, definitions=("100G",))
    False
    """
    # (a parameter added since, at its default, keeps the earlier ids: results files resume)
    s = {k: _plain(v) for k, v in s.items() if not (k in _ADDED_LATER and v == _ADDED_LATER[k])}
    key = {k: s[k] for k in sorted(s)} if options is None else {"scenario": s, "options": options}
    if definitions:             # only where a user entry is named: built-in names keep their ids
        key = {"scenario": key, "definitions": list(definitions)}
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _catalogued(params: dict) -> list:
    """What the link and server names of ``params`` stand for in the catalogues now (reprs;
    a name the catalogues lack is left for the build to refuse)."""
    out = []
    try:
        if isinstance(params.get("link"), str):
            out.append(repr(tp.get_link(params["link"])))
        if isinstance(params.get("server"), str):
            model = tp.get_server(params["server"])
            out.append(repr(model))
            out += [repr(tp.get_link(t)) for t in (model.nvlink, model.nic, model.host_link, model.socket_link)
                    if isinstance(t, str) and t in tp.link_names()]
    except ValueError:
        pass
    return out


def _user_definitions(s: dict) -> tuple:
    """What the user-registered (not built-in) link and server names of scenario ``s`` stand
    for now (reprs), for its id: a resumed sweep must not keep a row computed when such a name
    meant other values (``register_link(..., overwrite=True)``). Built-in entries cannot be
    replaced, so they add nothing (and their scenarios keep their ids)."""
    names = [s.get("link"), s.get("server")]
    if not any(isinstance(n, str) and n not in _BUILTIN_LINKS | _BUILTIN_SERVERS for n in names):
        return ()
    return tuple(_catalogued({"link": s.get("link"), "server": s.get("server")}))
