"""Read nccl-tests output (``all_reduce_perf`` and friends) into a pandas DataFrame.

Handles the classic header (``# nThread ... # Using devices ... #wrong``), the newer one
(``# nccl-tests version``, ``# Collective test starting: all_reduce_perf``), older
nccl-tests' ``error`` column, launcher prefixes (srun / mpirun ``-l``'s ``0: ``, OpenMPI
``--tag-output``'s ``[1,0]<stdout>:``, MPICH ``mpiexec -l``'s ``[0] ``, pdsh's ``node1: ``), NCCL INFO lines and
tuner tables interleaved with the table, the ``NCCL version`` line, a missing footer,
hand-edited tables without ``#``, rows without the in-place columns, rows wrapped over two
lines and rows an NCCL message broke in two, gzipped and UTF-16 files, lines ending in ``\\n``,
``\\r\\n`` or a bare ``\\r`` (read in time linear in the log's size).

Columns keep nccl-tests' names and units: ``size`` (bytes), ``count``, ``type``, ``redop``,
``root``, ``time`` (us), ``algbw`` and ``busbw`` (GB/s), ``#wrong`` (or ``error``, the
largest deviation, in older nccl-tests); ``placement`` says ``"out-of-place"`` or
``"in-place"`` (one row per data row and placement: a size once per type, reduction and root,
unless the table repeats it, below); ``timestamp`` where nccl-tests ran with ``-S 1``
(v2.18.5 on: the row's local date and time, ``YYYY-MM-DD HH:MM:SS``, a string). ``df.attrs`` holds ``op`` (flowsolver's
name: the log's ``Collective test starting:`` line, else the one ``*_perf`` binary it
names, else the file name's op word; None where none says: an op word elsewhere, a hostname
or NCCL's algorithm matrix, says nothing), ``ranks``, ``ranks_from`` (which witnesses gave
it), ``nodes`` (hosts in the device list), ``devices`` (rank -> (host, device, GPU name)),
``nccl_version`` (NCCL's ``NCCL version`` line, else nccl-tests' ``nccl-library=`` code), ``avg_busbw``
(GB/s, the footer's; None without one), ``nccl_env`` (every
``NCCL_X set by environment to V`` line's setting, ``{"NCCL_X": "V"}``, the first where lines
differ; calibrate and ``--compare`` apply what the model can express and warn of the rest,
:func:`flowsolver._nccl_env.log_environment`), ``coll_channels`` (NCCL's ``N coll channels`` line,
src/init.cc; None without one or where its lines differ), ``nccl_algo`` and
``nccl_proto`` (the NCCL INFO lines' ``NCCL_ALGO`` / ``NCCL_PROTO``, else None), ``algorithms``
and ``protocols`` (flowsolver's names of what they allowed the op, read as NCCL reads them:
:func:`flowsolver._nccl_env.allowed`; None where they set nothing for it), ``algorithm`` and
``protocol`` (the one name where they allowed one, else None), ``out_of_bounds`` (the footer's count of wrong values; None
without one), ``gpus_per_thread`` (the header's ``nGpus``: the GPUs one thread drove,
``-g``; None without the header, or where headers of one log disagree), ``graph`` (the header's
``graph:``, ``-G``: the CUDA graph launches that timed the iterations, 0 for none; None likewise),
``zero_time_lines`` (the lines of rows of a size > 0 whose out-of-place time is 0: no
measurement; calibrate and ``--compare`` leave them out with a warning naming them) and ``source``.

``ranks``: the log's witnesses are its device list (highest rank + 1: at least that many, a
list may be cut short), NCCL INFO's ``nranks``, the busbw / algbw ratio (all-reduce,
all-gather, reduce-scatter, all-to-all, where ``op`` is known) and, for all-gather,
reduce-scatter and all-to-all, ``size / (count x type bytes)``. Where they disagree the read
is a ValueError giving each figure; NCCL's ``nranks``, the ratio and the sizes win over a
device list naming fewer ranks only where the list is evidently cut short (ranks missing
between its first and last) or two of them agree (:func:`~flowsolver._nccl_log.reconciled_ranks`).

Rows: a data row starts with two integers (size, count), or has the header's shape with
numbers for its time and bandwidths. Lines among the rows that are not data rows (notes,
warnings, NCCL's INFO / WARN lines, comments) are skipped. A data row that does not have
the header's shape (a value too many, an in-place part cut short), holds a value that is not
what its column allows (sizes and counts: integers >= 0, ``2K`` is not one; time, algbw,
busbw: finite numbers >= 0 or ``N/A``) or a size that is not its count of its type's bytes
(times the rank count for all-gather, reduce-scatter, all-to-all: nccl-tests' src/*.cu) or a
time that contradicts its algbw (nccl-tests prints ``algbw = size / time``: compared to the
digits printed, where algbw has nccl-tests' 2 decimals) is a ValueError naming ``FILE:LINE`` and what is wrong: a damaged log is never read as other
numbers; so is a units line other than nccl-tests' ``(B) (elements) (us) (GB/s)``. A row an
NCCL message broke (``... -1host:490:520 [0] NCCL INFO ...``, the rest on a later line) is
joined again where the log's other NCCL lines name the host, else a ValueError naming the
line. A log that holds several tests or runs one after another (two ``Collective test
starting:`` ops, a second table header), one of a test flowsolver has no model of
(``gather_perf``, ``scatter_perf``, ``hypercube_perf``, ``alltoallv_perf``), or one whose device
list names several groups (``NCCL_TESTS_SPLIT_MASK``: a communicator per group, all at once) is a
ValueError. A table that gives a size twice for one type, reduction and root (``-d all``, ``-o
all`` and ``-r -1`` print each size once per type, reduction and root) is read with every row
kept, in the log's order, and a RuntimeWarning naming the sizes: nccl-tests' ``-N`` cycles
print the whole table again with no line between cycles (src/common.cu), so a table repeated
whole and in order is said to be ``-N`` cycles or two runs' tables run together, and any other
repeat (rows interleaved) rows of two runs run together; a comparison or a fit takes every row.
A path that does not exist is FileNotFoundError, a folder IsADirectoryError, a file over
``max_bytes`` (default 16 MiB, :data:`MAX_BYTES`) or one of other packed or binary data a
ValueError saying what it is.
"""

from __future__ import annotations

import errno
import math
import os
import re
import warnings
from pathlib import Path

from topologies.formats import read_bytes

from . import _nccl_env as _env
from ._nccl_env import forced
from ._nccl_log import _PRINTED, busbw_range, decoded, limit, reconciled_ranks, repeated_sizes, size_ratio
from ._nccl_rows import records, table_rows

__all__ = ["read", "OP_NAMES", "ALGO_NAMES", "PROTO_NAMES", "MAX_BYTES"]

#: nccl-tests binaries / words -> flowsolver op names
OP_NAMES = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
            "allgather": "all_gather", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
            "alltoall": "all_to_all", "all_to_all": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
            "sendrecv": "send_recv", "send_recv": "send_recv"}
#: nccl-tests binaries flowsolver has no model of (src/Makefile BIN_FILES_LIST): a log of one is refused
UNSUPPORTED = ("alltoallv", "gather", "scatter", "hypercube")
# No pattern here scans past a line's end or runs an open gap (``.*``) between two words: a log
# with bare \r line endings, where ``.`` matches a line break, read in quadratic time (a 0.4 MB
# log 35 s); tests/collectives/test_nccl_tests_lines.py checks every pattern of the readers.
_PREFIX = re.compile(r"^[ \t]*\d+:[ \t]")                 # srun / mpirun "-l" rank prefix
#: other launchers' line prefixes, stripped where the log's table header or first comment line
#: carries one: OpenMPI ``--tag-output`` (``[1,0]<stdout>:``; OpenMPI 5's ``--output tag`` adds a
#: blank), MPICH / Hydra ``mpiexec -l`` (``[0] ``), pdsh / clush (``node1: ``)
_LAUNCHERS = (re.compile(r"^\[\d{1,9},\d{1,9}\]<std(?:out|err)>:[ \t]?"), re.compile(r"^\[\d{1,9}\][ \t]"),
              re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}:[ \t]"))
_RANK = re.compile(r"^#?[ \t]*Rank[ \t]+(\d{1,9})[ \t]+Group[ \t]+(\d{1,9})[ \t]+Pid[ \t]+\d+[ \t]+on[ \t]+(\S+)[ \t]+device"
                   r"[ \t]+(\d{1,9})[ \t]+\[[^\]\r\n]{0,128}\][ \t]*([^\r\n]*)$")   # (src/util.cu: [%128[^]]])
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
#: nccl-tests' own header, ``# nccl-tests version %s nccl-headers=%d nccl-library=%d`` (src/common.cu
#: writeDeviceReport): the library's NCCL_VERSION_CODE, what a log without NCCL_DEBUG=INFO says of
#: its release (newuser24: such a log ran under 2.30's rules)
_LIBRARY = re.compile(r"#[ \t]*nccl-tests version \S+[ \t]+nccl-headers=\d+[ \t]+nccl-library=(\d{4,6})\b")
_AVG = re.compile(r"Avg bus bandwidth[ \t]*:[ \t]*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?!\S)")
_NRANKS = re.compile(r"\bn[Rr]anks (\d{1,9})\b")        # searched in an NCCL INFO line, after "NCCL INFO"
_NGPUS = re.compile(r"^[ \t]*#[ \t]*nThread[ \t]+\d{1,9}[ \t]+nGpus[ \t]+(\d{1,9})\b")
_GRAPH = re.compile(r"\bgraph:[ \t]*(\d{1,9})\b")       # the header's -G (cudaGraphLaunches), src/util.cu
#: the largest log read by default (bytes): ``read``'s ``max_bytes``, else the environment's
#: FLOWSOLVER_LOG_MAX_BYTES. Real logs are under 1 MB (../shared/data/nccl-tests: 1-15 kB, NCCL INFO
#: lines included); reading one takes 23-47 x its size in memory (peak RSS less the 0.11 GB of Python
#: and pandas, /usr/bin/time -v on generated 16 MB logs: 0.48 GB of nccl-tests' 115-byte rows, 0.87 GB
#: of 45-byte ones; a 50 MB log under the former 256 MiB limit took 2.4 GB): 16 MiB stays under 1 GB.
MAX_BYTES = 2**24
#: NCCL's "NCCL_X set by environment to V" lines (src/misc/param.cc:100 prints an integer setting
#: with a full stop after it, "%s set by environment to %lld."; tuning.cc, socket.cc and the others
#: a string's value as it is)
_SET = re.compile(r"\b(NCCL_[A-Z0-9_]{1,64}) set by environment to (\S{1,256})")
#: NCCL's channel counts (src/init.cc:1646, "%d coll channels, %d collnet channels, %d nvls channels,
#: %d p2p channels, %d p2p channels per peer"; NCCL 2.12-2.17: "%d coll channels, %d p2p channels, ...")
_CHANNELS = re.compile(r"\b(\d{1,4}) coll channels,")
_ALGO = re.compile(r"NCCL_ALGO set by environment to (\S+)")
_PROTO = re.compile(r"NCCL_PROTO set by environment to (\S+)")
#: NCCL_ALGO values -> flowsolver algorithm names (CollNet, which flowsolver does not model, left out)
ALGO_NAMES = {k: v for k, v in _env.ALGO_NAMES.items() if v is not None}
#: NCCL_PROTO values -> flowsolver protocol names
PROTO_NAMES = dict(_env.PROTO_NAMES)
_OOB = re.compile(r"^#?[ \t]*Out of bounds values[ \t]*:[ \t]*(\d{1,12})[ \t]+(OK|FAILED)", re.MULTILINE)
_STARTED = re.compile(r"Collective test starting:[ \t]*(\w+)")
_OPS = "(" + "|".join(sorted(OP_NAMES, key=len, reverse=True)) + ")"      # the longest first: all_reduce, reduce
_PERF = re.compile(rf"\b({_OPS[1:-1]}|{'|'.join(UNSUPPORTED)})_perf(?:_mpi)?\b", re.IGNORECASE)  # all_gather_perf(_mpi)
_NAMED = re.compile(r"(?<![a-z])((?:all_|reduce_)?(?:gather|scatter)|hypercube|alltoallv?)_perf")   # a file name's
_OP_WORDS = re.compile(rf"{_OPS}(?:_perf)?", re.IGNORECASE)


def _text_of(path_or_text, max_bytes):
    """(text, source for messages, file name) of a path or of the log's text: a string
    without a line break is a path (a log has a header and rows, on lines of their own)."""
    if isinstance(path_or_text, str) and ("\n" in path_or_text or "\r" in path_or_text or not path_or_text.strip()):
        return path_or_text.removeprefix("\ufeff"), "<text>", ""
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise TypeError(f"path_or_text must be a path or the log's text, got {type(path_or_text).__name__}")
    path = Path(path_or_text)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not an nccl-tests log", str(path))
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such nccl-tests log", str(path))

    def too_large(size):        # (the command line's in_cli_words reads max_bytes as its --log-max-bytes option)
        return (f"{path}: the file {'holds more' if size is None else f'is {size} bytes, more'} than the "
                f"{max_bytes}-byte limit on an nccl-tests log (real logs are under 1 MB; reading takes up to ~50x the "
                "file's size in memory): to read it anyway pass a larger max_bytes (or set the environment variable "
                "FLOWSOLVER_LOG_MAX_BYTES)")

    # read at most the limit: a pipe, /dev/stdin or a device says size 0
    return decoded(read_bytes(path, max_bytes, too_large=too_large), str(path), max_bytes), str(path), path.name


def _lines(text):
    """The log's lines, rank prefixes stripped (NCCL's own INFO / WARN lines kept: a row's left
    part may stand before one, :func:`~._nccl_rows.table_rows`): srun's ``0: `` on any line, and
    the launcher prefix of :data:`_LAUNCHERS` that the log's first prefixed comment line (``#``,
    nccl-tests' header) carries, from every line that carries it."""
    lines = [_PREFIX.sub("", raw, count=1).rstrip() for raw in text.splitlines()]
    for line in lines:
        if "#" in line and not line.lstrip().startswith("#"):
            tag = next((p for p in _LAUNCHERS if (m := p.match(line)) and line[m.end():].lstrip().startswith("#")),
                       None)
            if tag is not None:
                return [tag.sub("", line, count=1) for line in lines]
    return lines


def _op_of(text, name, source):
    """The op the log says it tests: its ``Collective test starting:`` line, else the one
    ``*_perf`` binary it names, else its file name's op word; None where none says (a bare op
    word elsewhere, a hostname such as ``reduce-node1`` or NCCL's algorithm matrix with its
    ``Broadcast`` row, says nothing). ValueError where the log holds several tests, or says so
    of a test flowsolver has no model of (``gather_perf``, ``scatter_perf``: :data:`UNSUPPORTED`)."""
    started = {_base(m) for m in _STARTED.findall(text)}
    named = {_base(m) for m in _PERF.findall(text)}
    for said in (started, set() if started else named, set() if started or len(named) == 1 else
                 set(_NAMED.findall(name.lower()))):
        if unknown := sorted(said & set(UNSUPPORTED)):
            raise ValueError(f"{source}: the log is of nccl-tests' {unknown[0]}_perf, which flowsolver has no model "
                             f"of (it models {', '.join(sorted(set(OP_NAMES.values())))})")
    started = {OP_NAMES.get(m) for m in started} - {None}
    if len(started) > 1:
        raise ValueError(f"{source}: the log holds several tests ({', '.join(sorted(started))}): read each test's "
                         "part on its own")
    if started:
        return started.pop()
    named = {OP_NAMES.get(m) for m in named} - {None}
    if len(named) == 1:
        return named.pop()
    for word in _OP_WORDS.findall(name):
        if (key := _op_key(word)) is not None:
            return key
    return None


def _times_agree(rows, names, source):
    """ValueError naming the line where a row's time contradicts its algbw: nccl-tests prints
    ``algbw = size / 1e9 / seconds`` (src/common.cu: each test's GetBw of the elapsed time;
    the size column is the same bytes) to 2 decimals and the time (us) to the digits it shows,
    so a damaged time (a digit flipped) is not read as another collective's. An algbw not
    printed so (``0`` in a table made by hand from other timings) is not compared."""
    times = [i for i, c in enumerate(names) if c == "time"]
    pairs = [(i, names.index("algbw", i)) for i in times if "algbw" in names[i:]]
    for no, tokens in rows:
        size = float(tokens[0])
        for t_at, a_at in pairs:
            if a_at >= len(tokens):
                continue                                  # a row without its in-place part
            t_text, a_text = tokens[t_at], tokens[a_at]
            try:
                t, a = float(t_text), float(a_text)
            except ValueError:
                continue                                  # N/A: nothing to compare
            if not (math.isfinite(t) and math.isfinite(a)) or "e" in t_text.lower() \
                    or len(a_text.partition(".")[2]) != 2:
                continue
            half = 0.5 * 10.0 ** -len(t_text.partition(".")[2]) * 1.0001    # half its last digit
            fast = size / ((t - half) * 1e3) if t > half else math.inf      # GB/s at each end
            slow = size / ((t + half) * 1e3)
            if slow > a + _PRINTED or fast < a - _PRINTED:
                # a time of 0 (a row a failed or cut-short run printed) has no finite size / time
                said = f"{size / (t * 1e3):.2f} GB/s" if t > 0 else "no finite bandwidth"
                raise ValueError(f"{source}:{no}: the row's time {t_text} us and algbw {a_text} GB/s "
                                 f"disagree: nccl-tests prints algbw = size / time ({size:.0f} B / "
                                 f"{t_text} us = {said}): a damaged row "
                                 f"(row {' '.join(tokens)[:120]!r})")


def _base(word):
    """A binary's test name: ``all_gather_perf_mpi`` -> ``all_gather``."""
    return word.lower().removesuffix("_mpi").removesuffix("_perf")


def _op_key(word):
    """flowsolver's op of a word (``all_gather``, ``all_gather_perf``, ``all_gather_perf_mpi``:
    the binaries NGC's containers ship), or None."""
    return OP_NAMES.get(_base(word))



def _library_version(text) -> str | None:
    """``"2.21.5"`` from nccl-tests' ``nccl-library=22105`` (NCCL_VERSION_CODE: ``X*10000 + Y*100 +
    Z``, ``X*1000 + Y*100 + Z`` before 2.9, src/nccl.h.in), or None without the header.

    >>> _library_version("# nccl-tests version 2.13.10 nccl-headers=22105 nccl-library=22105"), _library_version(
    ...     "# nccl-tests version 2.10.0 nccl-headers=2708 nccl-library=2708")
    ('2.21.5', '2.7.8')
    """
    m = _LIBRARY.search(text)
    if m is None:
        return None
    code = int(m.group(1))
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def read(path_or_text, *, op: str | None = None, max_bytes: int | None = None):
    """Parse nccl-tests output (a file path, or the text itself) into a DataFrame (needs pandas).

    ``path_or_text``: a path (a ``str`` without a line break, or a ``PathLike``), or the
    log's text. ``op`` (flowsolver's name, e.g. ``"all_reduce"``) is checked against what
    the log says it ran, and fills ``df.attrs["op"]`` where the log does not say. A log
    without a table, a truncated one, a damaged row (``FILE:LINE`` and the column named),
    one of another op or a file over ``max_bytes`` bytes (default: the environment's
    ``FLOWSOLVER_LOG_MAX_BYTES``, else :data:`MAX_BYTES`, 16 MiB) raises ValueError; a missing
    file FileNotFoundError. A file may be gzipped or UTF-16 (PowerShell's ``>``).

    Examples
    --------
    >>> text = '''# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20
    ... #  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3
    ... #  Rank  1 Group  0 Pid 2 on hostB device  0 [0x0f] NVIDIA H100 80GB HBM3
    ... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    ...            8             2     float     sum      -1    20.10    0.00    0.00      0    20.00    0.00    0.00      0
    ... # Avg bus bandwidth    : 0.00
    ... '''
    >>> df = read(text, op="all_reduce")
    >>> list(df["placement"]), float(df["time"][0]), df.attrs["ranks"], df.attrs["nodes"], df.attrs["gpus_per_thread"]
    (['out-of-place', 'in-place'], 20.1, 2, 2, 1)
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("flowsolver.nccl_tests.read needs pandas: pip install 'flowsolver[analysis]'") from None

    text, source, name = _text_of(path_or_text, limit(max_bytes, MAX_BYTES))
    if not text.strip():
        raise ValueError(f"{source}: the log is empty")
    said = _op_of(text, name, source)
    lines = _lines(text)
    names, rows = table_rows(lines, source)
    if op is not None:
        if op not in set(OP_NAMES.values()):
            raise ValueError(f"op must be one of {', '.join(sorted(set(OP_NAMES.values())))}, got {op!r}")
        if said is not None and said != op:
            raise ValueError(f"{source}: the log tests {said}, not {op}")
    devices, groups = {}, {}
    for no, line in enumerate(lines, 1):
        if m := _RANK.match(line.strip()):
            device = (m.group(3), int(m.group(4)), m.group(5).strip())
            if devices.setdefault(int(m.group(1)), device) != device:
                raise ValueError(f"{source}:{no}: the device list names rank {m.group(1)} twice, on "
                                 f"{devices[int(m.group(1))][0]} and {device[0]}: logs of two runs run together?")
            groups.setdefault(int(m.group(2)), []).append(int(m.group(1)))
    if len(groups) > 1:
        raise ValueError(f"{source}: the device list names {len(groups)} groups ("
                         + "; ".join(f"Group {g}: {len(r)} ranks" for g, r in sorted(groups.items())[:4])
                         + "): nccl-tests ran with NCCL_TESTS_SPLIT_MASK (or NCCL_TESTS_SPLIT), a communicator "
                         "per group, all at once, each row one group's; flowsolver reads a log of one communicator "
                         "(one Group in its device list): run the test without the split (or model the groups' "
                         "collectives at once with flowsolver.concurrent)")
    df = pd.DataFrame(records(names, rows, source))
    version = _VERSION.search(text)
    version = version.group(1) if version else _library_version(text)
    avg = _AVG.search(text)
    algo, proto, failed = _ALGO.search(text), _PROTO.search(text), _OOB.search("\n".join(lines))
    nranks = {int(m.group(1)) for line in lines if " NCCL INFO " in line
              if (m := _NRANKS.search(line.partition(" NCCL INFO ")[2]))}
    ranks, ranks_from = reconciled_ranks(devices, nranks.pop() if len(nranks) == 1 else None,
                                         busbw_range(df, op or said), size_ratio(rows, names, op or said, source),
                                         op or said, source)
    _times_agree(rows, names, source)
    if said_twice := repeated_sizes(df, source):
        warnings.warn(said_twice, RuntimeWarning, stacklevel=2)
    settings = {}
    for name, value in _SET.findall(text):       # integers: "4." -> "4" (param.cc's full stop)
        settings.setdefault(name, value[:-1] if value.endswith(".") and value[:-1].lstrip("-").isdigit() else value)
    channels = {int(c) for c in _CHANNELS.findall(text)}
    headers = [(m, line) for line in lines if (m := _NGPUS.match(line))]
    per_thread = {int(m.group(1)) for m, _ in headers} - {0}
    graph = {int(g.group(1)) if (g := _GRAPH.search(line)) else None for _, line in headers}
    df.attrs.update(op=op or said, ranks=ranks, ranks_from=ranks_from,
                    nodes=len({host for host, _, _ in devices.values()}) or None, devices=devices,
                    nccl_version=version,
                    avg_busbw=float(avg.group(1)) if avg and math.isfinite(float(avg.group(1))) else None,
                    source=source, gpus_per_thread=per_thread.pop() if len(per_thread) == 1 else None,
                    graph=graph.pop() if len(graph) == 1 else None,
                    nccl_algo=algo and algo.group(1), nccl_proto=proto and proto.group(1), nccl_env=settings,
                    coll_channels=channels.pop() if len(channels) == 1 else None,
                    **_env.log_sets(algo and algo.group(1), proto and proto.group(1), op or said,
                                    version, source),
                    out_of_bounds=int(failed.group(1)) if failed else None,
                    zero_time_lines=_zero_time_lines(rows, names))
    return df


def _zero_time_lines(rows, names):
    """The log's line numbers of the rows whose out-of-place time is 0 with a size > 0 (a row
    nccl-tests timed as nothing, or a table made by hand: no measurement; calibrate and
    ``--compare`` leave them out and say so, :func:`flowsolver.collectives.log_rows`)."""
    at = names.index("time")
    out = []
    for no, tokens in rows:
        try:
            if float(tokens[0]) > 0 and float(tokens[at]) == 0:
                out.append(no)
        except (ValueError, IndexError):
            continue                                      # N/A: no time
    return out


def forced_algorithm(value: str):
    """flowsolver's name of the one algorithm an ``NCCL_ALGO`` value forces, else None: a list
    (``Ring,Tree``), an exclusion (``^NVLS``) or per-collective settings (``allreduce:tree``)
    leave NCCL a choice (the sets a run allowed: ``df.attrs["algorithms"]``).

    >>> forced_algorithm("Ring"), forced_algorithm("Ring,Tree"), forced_algorithm("^NVLS")
    ('ring', None, None)
    """
    return forced(value, ALGO_NAMES)


def forced_protocol(value: str):
    """flowsolver's name of the one protocol an ``NCCL_PROTO`` value forces, else None (as
    :func:`forced_algorithm`: a list, an exclusion or per-collective settings leave a choice).

    >>> forced_protocol("Simple"), forced_protocol("LL128"), forced_protocol("LL,LL128"), forced_protocol("^LL")
    ('Simple', 'LL128', None, None)
    """
    return forced(value, PROTO_NAMES)

