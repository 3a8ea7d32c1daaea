"""What every machine-description reader owes a bad file: one clear error that names the file
(and whatever else the caller asks), never a traceback of another type, and bounded memory."""

import re
import tracemalloc

import pytest

# what a reader may raise for a bad file: ValueError (TopologyError is one) or OSError, but not
# the ValueErrors that are really a decoder's traceback
_NOT_CLEAR = (UnicodeError,)


def assert_clear_error(err, path, *words):
    """``err`` is one clear error about ``path``: a ValueError/OSError (not a UnicodeError),
    one line, naming the file and every one of ``words``."""
    assert isinstance(err, (ValueError, OSError)) and not isinstance(err, _NOT_CLEAR), repr(err)
    message = str(err)
    assert "\n" not in message, message
    assert str(path) in message, message
    for word in words:
        assert word in message, (word, message)


def raises_clearly(read, path, *words):
    """``read(path)`` raises one clear error naming ``path`` and ``words``; returns it."""
    with pytest.raises((ValueError, OSError)) as info:
        read(path)
    assert_clear_error(info.value, path, *words)
    return info.value


def read_or_refuse(read, path, max_bytes=64 * 2**20):
    """``read(path)`` returns, or raises one clear error naming ``path``; its peak Python
    memory stays under ``max_bytes``. Any other exception escapes to the test."""
    tracemalloc.start()
    try:
        try:
            read(path)
        except (ValueError, OSError) as err:
            assert_clear_error(err, path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < max_bytes, f"peak {peak} bytes reading {path}"


def peak_memory(call) -> int:
    """Peak Python memory (bytes, tracemalloc) while ``call()`` runs; what it raises escapes."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# numbers a hostile or broken file may hold in place of a good one
BAD_NUMBERS = ["1e400", "-1e400", "-400000", "-1", "0", "nan", "NaN", "inf", "-inf", "1e9",
               "999999999999999999999", "1" * 5000, "abc", "", "1e-400", "0x1f", "-0", "1.2.3"]
_NUMBER = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def mutate(data: bytes, draw, st) -> bytes:
    """A few random edits of ``data`` (hypothesis ``draw`` and ``strategies``): truncation,
    byte flips, and numbers replaced by bad ones."""
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["truncate", "flip", "number", "number"]))
        if op == "truncate" and data:
            data = data[:draw(st.integers(0, len(data) - 1))]
        elif op == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
        elif op == "number":
            spans = [m.span() for m in _NUMBER.finditer(data)]
            if spans:
                a, b = spans[draw(st.integers(0, len(spans) - 1))]
                data = data[:a] + draw(st.sampled_from(BAD_NUMBERS)).encode() + data[b:]
    return data
