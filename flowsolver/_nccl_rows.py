"""The table of an nccl-tests log (:func:`flowsolver.nccl_tests.read`): its header's column
names, its data rows (wrapped rows joined, rows an NCCL message broke stitched again, every
value checked against what its column allows) and the records of one row per size and placement."""

from __future__ import annotations

import math
import re

__all__ = ["table_rows", "records"]

#: nccl-tests -S 1 (v2.18.5 on, src/util.cu writeTimestamp: strftime "%Y-%m-%d %H:%M:%S" after the
#: in-place part, under a ``timestamp`` header): the row's last two values
_DATE, _TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), re.compile(r"[0-9]{2}:[0-9]{2}:[0-9]{2}")
_CLOCK = "timestamp (clock)"          # the second value's column, the timestamp's clock time
_MESSAGE = re.compile(r":\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)\b")   # NCCL's "host:pid:tid [dev] NCCL INFO", after the host
#: the units line under the header, as nccl-tests prints it (src/util.cu writeResultHeader)
_UNITS = {"(B)", "(elements)", "(us)", "(GB/s)", "(%)"}


def message(line):
    """(start, end, host) of NCCL's ``host:pid:tid [dev] NCCL INFO`` (or ``WARN``) in ``line``,
    else None: ``host`` is the run of non-blanks before ``:pid`` (a row's value printed before the
    message runs into it, :func:`_stitched`), found by looking back from the message, not by a
    pattern that tries a run of non-blanks from each of its characters (quadratic on a long line)."""
    found = _MESSAGE.search(line)
    if found is None:
        return None
    head = line[:found.start()]
    host = head.split()[-1] if head and not head[-1].isspace() else ""
    return found.start() - len(host), found.end(), host


def _header(line):
    """nccl-tests' column names if ``line`` is the table header, else None."""
    names = [w.rstrip(".") for w in line.lstrip("#").split()]
    if names[:2] == ["size", "count"] and all(c in names for c in ("time", "algbw", "busbw")):
        if names[-1] == "timestamp":      # -S 1: the row ends with a date and a clock time, two values
            names.append(_CLOCK)
        return names
    return None


def _integer(token):
    return token.isascii() and token.isdigit()


# what nccl-tests prints for a time or a bandwidth: ASCII digits, a point, an exponent (Python's
# float() would also take "3_0.1" and other scripts' digits, a damaged row read as other numbers)
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?")


def _is_number(token) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _starts_row(tokens) -> bool:
    """A data row starts with its size and its count, two integers."""
    return len(tokens) > 1 and _integer(tokens[0]) and _integer(tokens[1])


_MISSING = ("N/A", "-")
_INT_MAX = 2**63 - 1            # pandas' int64


def _value(column, token, where, tokens):
    """A column's value; ValueError naming ``where`` (FILE:LINE) and the column otherwise."""
    if column in ("size", "count"):
        if _integer(token) and len(token) <= 19 and int(token) <= _INT_MAX:
            return int(token)
        what = "an integer >= 0 (bytes or elements)"
    elif column == "root":
        if token in _MISSING:
            return math.nan
        if _integer(token.removeprefix("-")) and len(token) < 12:
            return int(token)
        what = "an integer (a rank, or -1)"
    elif column == "#wrong":
        if token in _MISSING:
            return math.nan
        if _integer(token) and len(token) < 19:
            return int(token)
        what = "an integer >= 0 or N/A"
    elif column in ("time", "algbw", "busbw", "error"):     # error: older nccl-tests' max deviation (2e+00)
        if token in _MISSING:
            return math.nan
        value = float(token) if _DECIMAL.fullmatch(token) else math.nan
        if math.isfinite(value):
            return value
        what = "a finite number >= 0 or N/A"
    else:
        return token
    raise ValueError(f"{where}: column {column!r} is {token[:40]!r}, not {what} (row {' '.join(tokens)[:120]!r})")


def _stitched(line, found, names, hosts, where):
    """The tokens of a data row whose printing an NCCL message interrupted, else None (a message
    line). nccl-tests prints a row in three parts: sizes, type and root before it runs the size,
    the out-of-place figures, the in-place ones (``  2147483648  536870912  float  sum
    -1host:490:520 [0] NCCL INFO ...``, the rest of the row on a later line): the value and
    the host name that ran together are told apart by the ``hosts`` of the log's other NCCL
    lines. ValueError where the row part is none of those or its end is ambiguous."""
    head, (_, end, glued) = line[:found[0]].split(), found
    if not head or not _integer(head[0]):
        return None
    first = names.index("time")
    parts = (first, names.index("time", first + 1) if names.count("time") > 1 else len(names), len(names))
    if len(head) in parts:
        return head                       # the host name stands apart
    values = {glued[:-len(h)] for h in hosts if glued.endswith(h) and _is_number(glued[:-len(h)])}
    if len(head) + 1 in parts and len(values) == 1:
        return head + [values.pop()]
    raise ValueError(f"{where}: an NCCL message is printed into a data row and the row's values cannot be told "
                     f"apart from it ({line[:end][:120]!r}): mend the row by hand")


def table_rows(lines, source):
    """(column names, rows of (line number, tokens)) of the table; ValueError where there is
    none, where a row is cut short or has a value too many, or a line with a row's shape holds
    a size or count that is not one (``2K``)."""
    names, rows, pending, pending_line, whole, numbers = None, [], [], 0, 0, ()
    hosts = {m[2] for line in lines if (m := message(line.lstrip())) and m[0] == 0}      # NCCL's lines' own

    def flush():
        if len(pending) > len(names):
            raise ValueError(f"{source}:{pending_line}: the row has {len(pending)} values, the header {len(names)} "
                             f"columns (row {' '.join(pending)[:120]!r})")
        if whole < len(pending) < len(names):
            raise ValueError(f"{source}:{pending_line}: the row has {len(pending)} values, neither the header's "
                             f"{whole} columns out-of-place nor its {len(names)} with in-place (row "
                             f"{' '.join(pending)[:120]!r})")
        rows.append((pending_line, pending))

    for no, line in enumerate(lines, 1):
        if names is None:
            names = _header(line) if "size" in line else None
            if names is None and "cputime" in line and _header(line.replace("cputime", "time")):
                raise ValueError(f"{source}:{no}: the table times 'cputime' (nccl-tests -C 1): the host's time to "
                                 "issue an iteration, not the collective's (its algbw and busbw are the elapsed "
                                 "time's, src/common.cu); flowsolver reads the elapsed time: run the test with -C 0")
            if names:
                first = names.index("time")
                whole = names.index("time", first + 1) if names.count("time") > 1 else len(names)
                numbers = [i for i, c in enumerate(names[:whole]) if c in ("time", "algbw", "busbw")]
            continue
        if (found := message(line)) is not None:
            tokens = _stitched(line, found, names, hosts, f"{source}:{no}")
            if tokens is None:
                continue                  # NCCL's own line among the rows: neither a row nor a wrapped row's end
            line = " ".join(tokens)
        elif "NCCL INFO" in line or "NCCL WARN" in line:
            continue                      # NCCL's line in another dress (a launcher's tag, no host prefix)
        units = line.lstrip("#").split()
        if units and all(u.startswith("(") and u.endswith(")") for u in units):
            if odd := [u for u in units if u not in _UNITS]:
                raise ValueError(f"{source}:{no}: the table's units line says {', '.join(odd)}; nccl-tests prints "
                                 "sizes in (B), times in (us), bandwidths in (GB/s), as flowsolver reads them")
            continue
        if "size" in line and _header(line):
            raise ValueError(f"{source}:{no}: a second nccl-tests table (tests or runs written one after another "
                             "into one log): read each on its own")
        tokens = line.split()
        comment = not tokens or line.lstrip().startswith("#")
        if pending:
            # a row wrapped over lines: its out-of-place part cut short takes the next line
            # whatever it holds; a whole out-of-place part takes a line of in-place numbers
            if not comment and not _starts_row(tokens) and (len(pending) < whole or _is_number(tokens[0])):
                pending = pending + tokens
                if len(pending) >= len(names):
                    flush()
                    pending = []
                continue
            flush()
            pending = []
        if comment:
            continue
        shaped = len(tokens) in (whole, len(names)) and all(_is_number(tokens[i]) for i in numbers)
        if _starts_row(tokens) or (len(tokens) in (whole, len(names)) and (_integer(tokens[0]) or shaped)):
            pending, pending_line = tokens, no          # (the second: a row's shape, a damaged size or count)
            if len(pending) >= len(names):
                flush()
                pending = []
        # anything else among the rows is not a data row: a note, a warning, a banner
    if names is None:
        raise ValueError(f"{source}: no nccl-tests table (no header line with 'size count ... time algbw busbw')")
    if pending:
        flush()
    if not rows:
        raise ValueError(f"{source}: the nccl-tests table has a header but no result rows")
    return names, rows


def records(names, rows, source):
    """One record per row and placement (the row's ``timestamp``, where ``-S 1`` printed one, on both)."""
    stamped = names[-1] == _CLOCK
    names = names[:-2] if stamped else names
    first_time = names.index("time")
    second = names.index("time", first_time + 1) if names.count("time") > 1 else len(names)
    common, groups = names[:first_time], [(names[first_time:second], first_time)]
    if second < len(names):
        groups.append((names[second:], second))
    out = []
    for no, tokens in rows:
        if len(tokens) < second:
            raise ValueError(f"{source}: the table is truncated at line {no}: {len(tokens)} of its "
                             f"{len(names)} columns ({' '.join(tokens)[:120]!r})")
        where = f"{source}:{no}"
        base = {c: _value(c, t, where, tokens) for c, t in zip(common, tokens)}
        if stamped:
            date, clock = tokens[-2:] if len(tokens) == len(names) + 2 else ("", "")
            if not (_DATE.fullmatch(date) and _TIME.fullmatch(clock)):
                raise ValueError(f"{where}: the row's timestamp is {' '.join(tokens[len(names):])[:40]!r}, not "
                                 f"nccl-tests' YYYY-MM-DD HH:MM:SS (row {' '.join(tokens)[:120]!r})")
            base["timestamp"] = f"{date} {clock}"
        for placement, (cols, start) in zip(("out-of-place", "in-place"), groups):
            part = tokens[start:start + len(cols)]
            if len(part) < len(cols):
                continue                # a row without its in-place columns
            out.append(dict(base, placement=placement, **{c: _value(c, t, where, tokens) for c, t in zip(cols, part)}))
    return out
