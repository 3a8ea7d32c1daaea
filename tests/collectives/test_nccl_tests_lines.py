"""nccl-tests logs whose lines end in bare \r (an old Mac editor, a terminal capture): read as
the same log with \n, in time linear in its size. Timing a read proves nothing on a loaded
machine, so the patterns themselves are checked: none of the readers' regular expressions can
scan past a line's end or run an open gap between two words (a 0.4 MB log with \r endings took
35 s when ``_NRANKS`` read `` NCCL INFO .*?nranks`` across the whole text); the read's speed
is benchmarks/nccl_log_read.py's."""

import re
from re import _constants as C
from re import _parser as P

import pytest

from flowsolver import _nccl_env, _nccl_log, _nccl_rows, nccl_tests

READERS = (nccl_tests, _nccl_rows, _nccl_log, _nccl_env)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
#: patterns whose leading open repeat is fine: used with fullmatch on one token, never searched
FULLMATCH_ONLY = {"_DECIMAL"}


def _patterns():
    for module in READERS:
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                yield f"{module.__name__}.{name}", name, value


def _one_char(item, flags):
    """A pattern matching what the one-character ``item`` matches, or None for another item."""
    op, _ = item
    if op not in (C.ANY, C.IN, C.LITERAL, C.NOT_LITERAL):
        return None
    state = P.State()
    state.flags = flags
    from re import _compiler
    return _compiler.compile(P.SubPattern(state, [item]), flags)


def _items(sub):
    """Every item of a parsed pattern, nested ones included."""
    for op, av in sub:
        yield op, av
        if op in _REPEATS:
            yield from _items(av[2])
        elif op in (C.SUBPATTERN, C.ATOMIC_GROUP):
            yield from _items(av[-1])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            yield from _items(av[1])
        elif op is C.BRANCH:
            for branch in av[1]:
                yield from _items(branch)


def _end_repeat(sub, end):
    """The repeat that starts (``end`` 0) or ends (-1) the pattern, anchors aside, inside
    groups; None where another item does."""
    items = [(op, av) for op, av in sub if op is not C.AT]
    if not items:
        return None
    op, av = items[end]
    if op in _REPEATS:
        return av
    return _end_repeat(av[-1], end) if op in (C.SUBPATTERN, C.ATOMIC_GROUP) else None


def _faults(pattern):
    """What in ``pattern`` can make a search of a log superlinear (empty: nothing)."""
    parsed = P.parse(pattern.pattern, pattern.flags)
    out = []
    top, last = list(parsed), _end_repeat(parsed, -1)
    for op, av in _items(parsed):
        if op not in _REPEATS or av[1] != C.MAXREPEAT:
            continue
        chars = [c for c in map(lambda it: _one_char(it, pattern.flags), _items(av[2])) if c is not None]
        if any(c.fullmatch(b) for c in chars for b in "\r\n"):
            out.append("an open repeat matches a line break")
        if any(c.fullmatch(" ") for c in chars) and any(c.fullmatch("a") for c in chars):
            if av is not last:
                out.append("an open gap (a repeat of blanks and words) before more of the pattern")
    first = _end_repeat(parsed, 0)
    if first is not None and first[1] == C.MAXREPEAT and not (top and top[0][0] is C.AT):
        out.append("the pattern starts with an open repeat, tried again from every character of a long run")
    return out


def test_the_checker_finds_the_quadratic_patterns():
    # (what the readers held: each read a long line or a \r log in quadratic time)
    assert _faults(re.compile(r" NCCL INFO .*?\bn[Rr]anks (\d{1,9})\b"))             # crosses \r
    assert _faults(re.compile(r" NCCL INFO [^\r\n]*?\bn[Rr]anks (\d{1,9})\b"))         # a gap on one line
    assert _faults(re.compile(r"^\s*#\s*nThread\s+(\d+)", re.MULTILINE))               # \s* over blank lines
    assert _faults(re.compile(r"(\S*):\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)\b"))           # from every character
    assert not _faults(re.compile(r"^#?[ \t]*Rank[ \t]+(\d{1,9})[ \t]*([^\r\n]*)$"))


@pytest.mark.parametrize("where, name, pattern", list(_patterns()), ids=lambda x: x if isinstance(x, str) else "")
def test_no_reader_pattern_scans_past_a_line_or_an_open_gap(where, name, pattern):
    faults = _faults(pattern)
    if name in FULLMATCH_ONLY:
        faults = [f for f in faults if not f.startswith("the pattern starts")]
    assert not faults, (where, pattern.pattern, faults)


def test_the_readers_compile_every_pattern_where_the_check_sees_it():
    for module in READERS:
        source = open(module.__file__).read()
        assert not re.search(r"\bre\.(search|match|fullmatch|findall|finditer|sub|split)\(", source), module.__name__


def _log(sep, infos=3000):
    """An all-reduce log on 2 ranks, NCCL INFO lines between header and table, lines ending in ``sep``."""
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20",
             "#  Rank  0 Group  0 Pid 11 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3",
             "#  Rank  1 Group  0 Pid 12 on hostB device  0 [0x0f] NVIDIA H100 80GB HBM3",
             "hostA:11:11 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]
    lines += ["hostA:11:13 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/1"] * infos
    lines += ["launcher: 3 tasks, nranks 3 requested",          # not NCCL's: no rank count of the log
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
              "busbw #wrong",
              "           8             2     float     sum      -1    20.10    0.00    0.00      0    20.00    0.00    "
              "0.00      0",
              "     1048576        262144     float     sum      -1    40.00   26.21   26.21      0    40.00   26.21   "
              "26.21      0",
              "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 13.1", ""]
    return sep.join(lines)


@pytest.mark.parametrize("sep", ["\r", "\r\n", "\n"])
def test_a_log_with_bare_cr_line_endings_reads_as_with_newlines(sep):
    df = nccl_tests.read(_log(sep), op="all_reduce")
    # busbw = algbw x 2 (p - 1) / p = algbw for p = 2 (nccl-tests PERFORMANCE.md); 1 MiB / 40 us = 26.21 GB/s
    assert list(df["size"]) == [8, 8, 1048576, 1048576] and list(df["time"]) == [20.1, 20.0, 40.0, 40.0]
    assert df.attrs["ranks"] == 2 and df.attrs["nodes"] == 2 and df.attrs["gpus_per_thread"] == 1
    assert df.attrs["devices"][1] == ("hostB", 0, "NVIDIA H100 80GB HBM3")
    assert df.attrs["out_of_bounds"] == 0 and df.attrs["avg_busbw"] == 13.1
    # NCCL's own nranks line, not the launcher's 'nranks 3' a line further on (read across \r before)
    assert "NCCL INFO nranks" in df.attrs["ranks_from"]


def test_nccl_info_nranks_is_read_on_its_own_line_only():
    text = _log("\r", infos=1).replace("rank 0 nranks 2", "rank 0 of two")       # NCCL says no count now
    df = nccl_tests.read(text, op="all_reduce")
    # the launcher's 'nranks 3' follows an NCCL INFO line but is no NCCL line (read as NCCL's before:
    # 3 against busbw / algbw's 2, a ValueError): the device list and busbw / algbw say 2
    assert df.attrs["ranks"] == 2 and df.attrs["ranks_from"] == "busbw / algbw"
