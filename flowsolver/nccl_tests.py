"""Read nccl-tests output (``all_reduce_perf`` and friends) into a pandas DataFrame.

Handles the classic header (``# nThread ... # Using devices ... #wrong``), the newer one
(``# nccl-tests version``, ``# Collective test starting: all_reduce_perf``), srun / mpirun
rank prefixes (``0: ``), NCCL INFO lines and tuner tables interleaved with the table, the
``NCCL version`` line, a missing footer, hand-edited tables without ``#``, rows without the
in-place columns and rows wrapped over two lines.

Columns keep nccl-tests' names and units: ``size`` (bytes), ``count``, ``type``, ``redop``,
``root``, ``time`` (us), ``algbw`` and ``busbw`` (GB/s), ``#wrong``; ``placement`` says
``"out-of-place"`` or ``"in-place"`` (one row per size and placement). ``df.attrs`` holds
``op`` (flowsolver's name, or None where the log does not say), ``ranks``, ``nodes`` (hosts
in the device list), ``devices`` (rank -> (host, device, GPU name)), ``nccl_version``,
``avg_busbw`` (GB/s, the footer's; None without one), ``algorithm`` (flowsolver's name of
the ``NCCL_ALGO`` the NCCL INFO lines say was forced, else None) and ``source``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

__all__ = ["read", "OP_NAMES", "ALGO_NAMES"]

#: nccl-tests binaries / words -> flowsolver op names
OP_NAMES = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
            "allgather": "all_gather", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
            "alltoall": "all_to_all", "all_to_all": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
            "sendrecv": "send_recv", "send_recv": "send_recv"}
_PREFIX = re.compile(r"^\s*\d+:\s")                     # srun / mpirun "-l" rank prefix
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_ALGO = re.compile(r"NCCL_ALGO set by environment to (\w+)")
#: NCCL_ALGO values -> flowsolver algorithm names
ALGO_NAMES = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
_OP_WORDS = re.compile(r"(all_reduce|allreduce|all_gather|allgather|reduce_scatter|reducescatter|alltoall|"
                       r"all_to_all|sendrecv|send_recv|broadcast|reduce)(?:_perf)?", re.IGNORECASE)


def _text_of(path_or_text):
    if isinstance(path_or_text, Path) or (isinstance(path_or_text, str) and "\n" not in path_or_text
                                          and len(path_or_text) < 4096 and Path(path_or_text).is_file()):
        path = Path(path_or_text)
        return path.read_text(errors="replace"), str(path), path.name
    if isinstance(path_or_text, str):
        return path_or_text, "<text>", ""
    raise TypeError(f"path_or_text must be a path or the log's text, got {type(path_or_text).__name__}")


def _lines(text):
    """The log's lines, rank prefixes stripped, NCCL's own INFO / WARN lines left out."""
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw, count=1).rstrip()
        if " NCCL INFO " in line or " NCCL WARN " in line:
            continue
        yield line


def _op_of(text, name):
    started = re.search(r"Collective test starting:\s*(\w+)", text)
    for candidate in ([started.group(1)] if started else []) + _OP_WORDS.findall(text[:2000]) + \
            _OP_WORDS.findall(name):
        key = candidate.lower().removesuffix("_perf")
        if key in OP_NAMES:
            return OP_NAMES[key]
    return None


def _header(line):
    """nccl-tests' column names if ``line`` is the table header, else None."""
    names = [w.rstrip(".") for w in line.lstrip("#").split()]
    if names[:2] == ["size", "count"] and "time" in names and "busbw" in names:
        return names
    return None


def _number(token):
    if token in ("N/A", "-"):
        return math.nan
    try:
        return int(token)
    except ValueError:
        return float(token)


def _rows(lines, source):
    """(column names, rows of tokens) of the table; ValueError where there is none or it is cut."""
    names, rows, pending, pending_line = None, [], [], 0
    for no, line in enumerate(lines, 1):
        if names is None:
            names = _header(line) if "size" in line else None
            first = names.index("time") if names else 0
            whole = names.index("time", first + 1) if names and names.count("time") > 1 else len(names or ())
            continue
        tokens = line.split()
        if pending and tokens and tokens[0].isdigit() and "." not in tokens[0] and len(pending) >= whole:
            rows.append((pending_line, pending))        # a new row: the last had no in-place columns
            pending = []
        if not tokens or line.lstrip().startswith("#") or not (tokens[0].isdigit() or pending):
            if pending:
                rows.append((pending_line, pending))
                pending = []
            continue
        if not pending:
            pending_line = no
        pending = pending + tokens
        if len(pending) >= len(names):
            rows.append((pending_line, pending[:len(names)]))
            pending = []
    if names is None:
        raise ValueError(f"{source}: no nccl-tests table (no header line with 'size count ... time algbw busbw')")
    if pending:
        rows.append((pending_line, pending))
    if not rows:
        raise ValueError(f"{source}: the nccl-tests table has a header but no result rows")
    return names, rows


def _records(names, rows, source):
    first_time = names.index("time")
    second = names.index("time", first_time + 1) if names.count("time") > 1 else len(names)
    common, groups = names[:first_time], [(names[first_time:second], first_time)]
    if second < len(names):
        groups.append((names[second:], second))
    out = []
    for no, tokens in rows:
        if len(tokens) < second:
            raise ValueError(f"{source}: the table is truncated at line {no}: {len(tokens)} of its "
                             f"{len(names)} columns ({' '.join(tokens)!r})")
        base = {c: (_number(t) if c in ("size", "count", "root") else t) for c, t in zip(common, tokens)}
        for placement, (cols, start) in zip(("out-of-place", "in-place"), groups):
            part = tokens[start:start + len(cols)]
            if len(part) < len(cols):
                continue                # a row without its in-place columns
            out.append(dict(base, placement=placement, **{c: _number(t) for c, t in zip(cols, part)}))
    return out


def read(path_or_text, *, op: str | None = None):
    """Parse nccl-tests output (a file path, or the text itself) into a DataFrame (needs pandas).

    ``op`` (flowsolver's name, e.g. ``"all_reduce"``) is checked against what the log says
    it ran, and fills ``df.attrs["op"]`` where the log does not say. A log without a table,
    a truncated one, or one of another op raises ValueError.

    >>> text = '''# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20
    ... #  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3
    ... #  Rank  1 Group  0 Pid 2 on hostB device  0 [0x0f] NVIDIA H100 80GB HBM3
    ... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    ...            8             2     float     sum      -1    20.10    0.00    0.00      0    20.00    0.00    0.00      0
    ... # Avg bus bandwidth    : 0.00
    ... '''
    >>> df = read(text, op="all_reduce")
    >>> list(df["placement"]), float(df["time"][0]), df.attrs["ranks"], df.attrs["nodes"]
    (['out-of-place', 'in-place'], 20.1, 2, 2)
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("flowsolver.nccl_tests.read needs pandas: pip install 'flowsolver[analysis]'") from None

    text, source, name = _text_of(path_or_text)
    if not text.strip():
        raise ValueError(f"{source}: the log is empty")
    lines = list(_lines(text))
    names, rows = _rows(lines, source)
    said = _op_of(text, name)
    if op is not None:
        if op not in set(OP_NAMES.values()):
            raise ValueError(f"op must be one of {', '.join(sorted(set(OP_NAMES.values())))}, got {op!r}")
        if said is not None and said != op:
            raise ValueError(f"{source}: the log tests {said}, not {op}")
    devices = {}
    for line in lines:
        if m := _RANK.match(line.strip()):
            devices[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(4).strip())
    df = pd.DataFrame(_records(names, rows, source))
    version = _VERSION.search(text)
    avg = _AVG.search(text)
    algo = _ALGO.search(text)
    df.attrs.update(op=op or said, ranks=max(devices) + 1 if devices else None,
                    nodes=len({host for host, _, _ in devices.values()}) or None, devices=devices,
                    nccl_version=version.group(1) if version else None,
                    avg_busbw=float(avg.group(1)) if avg else None, source=source,
                    algorithm=ALGO_NAMES.get(algo.group(1).lower()) if algo else None)
    return df
