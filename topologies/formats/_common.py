"""Private: what the machine-description readers share (node-link JSON, NCCL topology XML,
ASTRA-sim network YAML, SimAI topology files).

A reader owes a bad file one clear error: a ``ValueError`` whose one-line message starts with
the file's path and names the field (and line or element) at fault and what is allowed. It
never returns a silently wrong number, and it bounds what a file can make it allocate before
allocating: the file's size (``max_bytes``) and every count the file announces (GPUs, links)
are checked against keyword limits, and the error names the limit to raise.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .._graph import check_int

MIB = 2**20

# a decimal number as configuration files write it (no "nan", "inf", hex or "_" separators)
# (one way to match each string: no backtracking blow-up on long digit runs)
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def check_limit(name: str, value) -> int:
    """A reader's limit argument: an integer >= 1."""
    return check_int(name, value, 1)


def read_bytes(path, max_bytes: int, limit_name: str = "max_bytes", *, too_large=None,
               error=ValueError) -> bytes:
    """The file's bytes. A missing file is ``FileNotFoundError`` and a folder
    ``IsADirectoryError`` (as the workload readers raise them), each naming the path; a file
    that cannot be read otherwise, or holds more than ``max_bytes`` (checked on its size
    before reading, and while reading: a pipe, ``/dev/stdin`` or a device says size 0, a file
    may grow), is an ``error`` (a ValueError class) naming it. ``too_large(size)`` gives the
    message for a file over the limit (``size``: the bytes its size says, or None where reading
    went past the limit) where a reader words it its own way.

    >>> import os, threading, tempfile
    >>> fifo = os.path.join(tempfile.mkdtemp(), "fifo"); os.mkfifo(fifo)
    >>> def feed():
    ...     with open(fifo, "wb") as w:
    ...         try:
    ...             w.write(b"x" * 100_000)
    ...         except BrokenPipeError:
    ...             pass
    >>> threading.Thread(target=feed).start()
    >>> read_bytes(fifo, 1000)
    Traceback (most recent call last):
    ...
    ValueError: ...fifo: the file holds more than max_bytes=1000 bytes (pass a larger max_bytes to read it)
    """
    check_limit(limit_name, max_bytes)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a file")
    try:
        with open(path, "rb") as f:
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            if size > max_bytes:
                raise error(too_large(size) if too_large else
                            f"{path}: the file has {size} bytes, more than {limit_name}={max_bytes} "
                            f"(pass a larger {limit_name} to read it)")
            # read what the size says, then in chunks (a file without a size, or one that
            # grows): never a buffer of max_bytes for a small file
            parts = [f.read(size + 1)] if size else []
            total = sum(map(len, parts))
            while total <= max_bytes:
                chunk = f.read(min(MIB, max_bytes + 1 - total))
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
            data = parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError as err:
        raise error(f"{path}: cannot read the file ({err.strerror or err})") from None
    if len(data) > max_bytes:
        raise error(too_large(None) if too_large else
                    f"{path}: the file holds more than {limit_name}={max_bytes} bytes "
                    f"(pass a larger {limit_name} to read it)")
    return data


def decode(data: bytes, path) -> str:
    """``data`` as UTF-8 text; a ValueError naming the file, line and byte otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path} line {line}: byte {data[err.start]:#04x} at offset {err.start} "
                         "is not UTF-8 text") from None


def read_text(path, max_bytes: int, limit_name: str = "max_bytes") -> str:
    """:func:`read_bytes` then :func:`decode`."""
    return decode(read_bytes(path, max_bytes, limit_name), path)


def finite(text, where: str, field: str, allowed: str) -> float:
    """``text`` (a decimal string or a number) as a finite float; a ValueError naming
    ``where`` and ``field`` and saying what is ``allowed`` otherwise (no NaN, no infinity, no
    overflow: ``"1e400"`` and 400-digit integers are refused)."""
    if isinstance(text, bool):
        value = None
    elif isinstance(text, (int, float)):
        try:
            value = float(text)
        except OverflowError:
            value = math.inf
    elif isinstance(text, str) and DECIMAL.fullmatch(text.strip()):
        value = float(text)
    else:
        value = None
    if value is None or not math.isfinite(value):
        raise ValueError(f"{where}: {field} must be {allowed}, got {short(text)}")
    return value


def over(where: str, field: str, value, limit_name: str, limit: int):
    """The error for a count beyond its limit."""
    return ValueError(f"{where}: {field} {value} exceeds {limit_name}={limit} (pass a larger "
                      f"{limit_name} to read this file)")


def short(value) -> str:
    """``repr(value)`` for a one-line message, cut after 30 characters when long."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


class DuplicateKey(ValueError):
    """A JSON object gives one key twice (:func:`unique_keys`)."""


def unique_keys(pairs) -> dict:
    """``json.loads``' ``object_pairs_hook``: a JSON object's dict, a key given twice a
    :class:`DuplicateKey` (``json`` keeps the last value, whichever was meant).

    >>> import json
    >>> json.loads('{"layers": 80, "layers": 2}', object_pairs_hook=unique_keys)
    Traceback (most recent call last):
    ...
    topologies.formats._common.DuplicateKey: the key 'layers' appears twice in one JSON object
    """
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"the key {key!r} appears twice in one JSON object")
        out[key] = value
    return out


class _Root(Exception):
    """The scan for a DOCTYPE reached the root element (a DOCTYPE can only come before it)."""


def doctype_before_root(data: bytes) -> bool:
    """Whether expat, decoding ``data`` in its declared encoding, meets a DOCTYPE before the
    root element (the scan stops there; a malformed prologue is left to the parse)."""
    import xml.parsers.expat

    seen = []
    scan = xml.parsers.expat.ParserCreate()

    def doctype(*_):
        seen.append(True)
        raise _Root

    def root(*_):
        raise _Root

    scan.StartDoctypeDeclHandler, scan.StartElementHandler = doctype, root
    try:
        for start in range(0, len(data), 1 << 16):
            scan.Parse(data[start:start + (1 << 16)], False)
    except (_Root, xml.parsers.expat.ExpatError, LookupError, ValueError):    # LookupError: an unknown encoding
        pass
    return bool(seen)
