"""SimAI's workload file (as AICB writes it, SimAI's ``astra-sim-alibabacloud`` reads it)
read into a replayable :class:`Workload`.

The file: a header line (the parallelism policy, e.g. ``HYBRID_TRANSFORMER_FWD_IN_BCKWD``,
then ``model_parallel_NPU_group: TP ep: EP pp: PP vpp: V ga: GA all_gpus: N`` and, with
``pp > 1``, ``pp_comm BYTES``), the number of layers, then one row per layer: ``name
reserved fwd_compute fwd_comm_type fwd_comm_size ig_compute ig_comm_type ig_comm_size
wg_compute wg_comm_type wg_comm_size wg_update``. Compute times are SimAI ticks,
nanoseconds (its reports divide ticks by FREQ = 1e9); sizes are bytes. A forward or
input-gradient collective runs in the TP group, ``_EP`` in the EP group, ``_DP_EP`` among
the DP ranks holding the same experts; a weight-gradient one in the DP group (``_EP``,
``_DP_EP`` likewise), as SimAI's ``Workload::initialize_workload`` assigns them (``_DP``,
which AICB writes and SimAI leaves without a group, is taken as the DP group). ``vpp`` and
the activation-checkpoint fields are read past and not modelled.

Values are checked as they are read: the header starts with the policy and gives each key at
most once (``all_gpus`` always, ``model_parallel_NPU_group`` for a transformer or model policy); a
key spelled close to one the replay reads (``model_parallel_npu_group:``) is an error, other keys
are read past as SimAI reads them (``checkpoints: N`` and its N layer ids); header counts are
integers >= 1 (``pp_comm`` >= 0, written ``2097152.0`` by AICB),
the layer count an integer >= 1 with exactly that many layer rows, compute times and comm
sizes finite numbers >= 0 (ASCII digits, a point, an exponent: ``1_048_576`` or another
script's digits is damage, not a number); anything else is a :class:`TraceError` naming the file, the
line and the field. What a file can make the reader allocate is bounded before it is
allocated: ``max_file_bytes`` (default 4 MiB, :data:`MAX_WORKLOAD_BYTES`) for the file,
``max_ranks`` (default 2**20) for ``all_gpus`` and ``max_nodes`` (default 10 million, up to
about 9 GB) for the nodes of all ranks, which grow as ``all_gpus x ga x`` layers.

Every rank runs the file's layers (Megatron placement: TP innermost, then DP, then PP
stages): per microbatch (``ga`` of them) the forward (each layer's compute, then its
collective, which the next layer waits for), then the backward in reverse (input-gradient
compute and collective, weight-gradient compute; the weight-gradient collective of the
last microbatch runs beside the rest of the backward, the iteration ends when all are
done). With ``pp > 1`` the stages pass ``pp_comm`` bytes forward and back (send/recv).
"""

from __future__ import annotations

import difflib
import errno
import math
from pathlib import Path

from topologies.formats import read_bytes

from .._nccl_rows import _DECIMAL
from ..training import ParallelLayout
from ._schema import MAX_NODES, MAX_RANKS, TraceError, check_limit
from ._workload import COLLECTIVE, COMPUTE, RECV, SEND, RankTrace, TraceNode, build_workload, pipeline_ranks

__all__ = ["read_simai_workload"]

#: bytes of a SimAI workload file read (the default of ``max_file_bytes``): a header and one row per
#: layer call, as AICB writes them: SimAI's own examples are 86 kB (example/workload_gpt13b_128g.txt,
#: 1,338 rows) and 190 kB (its server's DeepSeek-16B tp2 pp2 ep4 workload, 2,581 rows), so 4 MiB is
#: 20x the larger. Read under the 1 GiB of a binary Chakra trace, /dev/zero peaked at 2.24 GB over 15 s
#: before the error (adv21b F3); now it is refused at 4 MiB in 0.01 s, and the worst file under the
#: limit, 2 million one-character lines, peaks at 0.21 GB (tracemalloc, 2026-12-07)
MAX_WORKLOAD_BYTES = 4 * 2**20

_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "REDUCESCATTER": "reduce_scatter",
        "ALLTOALL": "all_to_all"}
_HEADER = {"model_parallel_NPU_group:": "tp", "ep:": "ep", "pp:": "pp", "vpp:": "vpp", "ga:": "ga",
           "all_gpus:": "gpus", "pp_comm": "pp_comm", "pp_comm:": "pp_comm"}
#: header keys followed by a count and that many layer ids (SimAI's ``Workload.cc``: activation
#: checkpointing, not modelled), read past
_LISTS = ("checkpoints:", "checkpoint_initiates:")
#: the modelled keys by their lower case: an unknown key this close to one is a misspelling of it
_LOWER = {k.lower(): k for k in _HEADER}


def _whole(text: str):
    """An integer from ``text`` ("4", or "2097152.0" as AICB writes pp_comm), else None."""
    whole, _, zeros = text.partition(".")
    digits = whole[1:] if whole.startswith("-") else whole
    if not (digits.isascii() and digits.isdecimal() and zeros.strip("0") == ""):
        return None
    return int(whole) if len(whole) <= 18 else 10**18       # beyond every limit (and Python's 4300 digits)
_COLUMNS = ("name", "reserved", "fwd_compute", "fwd_comm_type", "fwd_comm_size", "ig_compute", "ig_comm_type",
            "ig_comm_size", "wg_compute", "wg_comm_type", "wg_comm_size", "wg_update")
_TICKS_PER_S = 1e9    # SimAI: a tick is a nanosecond (its reports divide ticks by FREQ = 1e9)


def _header(line: str, path, max_ranks: int, no: int = 1) -> dict:
    """The header's values (``no``: its line number, for messages)."""
    tokens = line.split()
    out = dict(tp=1, ep=1, pp=1, vpp=1, ga=1, gpus=None, pp_comm=0)
    if not tokens or tokens[0].endswith(":") or tokens[0] in _HEADER:
        raise TraceError(f"{path}: line {no} must start with the parallelism policy (e.g. "
                         f"HYBRID_TRANSFORMER_FWD_IN_BCKWD), then its keys, got {line!r:.200}")
    seen, i = set(), 1
    while i < len(tokens):
        key, value = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
        name = _HEADER.get(key)
        if name is None and (near := difflib.get_close_matches(key.lower(), _LOWER, n=1, cutoff=0.9)):
            raise TraceError(f"{path}: line {no}: {key!r:.40} is not a key of SimAI's header: "
                             f"{_LOWER[near[0]]!r}? (a key spelled otherwise is not read)")
        if (name or key) in seen or value is None:
            raise TraceError(f"{path}: line {no}: {key.rstrip(':')} is given " +
                             ("twice" if (name or key) in seen else "no value"))
        seen.add(name or key)
        i += 2
        if name is None and key not in _LISTS:
            continue            # another key (AICB's expert_parallel_npu_group:, ...): read past, as SimAI does
        low = 0 if name in ("pp_comm", None) else 1
        number = _whole(value)
        if number is None or number < low:
            raise TraceError(f"{path}: line {no}: {key.rstrip(':')} must be an integer >= {low}, got {value!r:.40}")
        if key in _LISTS:       # SimAI's Workload.cc: the count, then that many layer ids
            if i + number > len(tokens):
                raise TraceError(f"{path}: line {no}: {key.rstrip(':')} announces {number} layer ids, the line "
                                 f"holds {len(tokens) - i}")
            i += number
        else:
            out[name] = number
    if "gpus" not in seen:
        raise TraceError(f"{path}: line {no} must give all_gpus: N (SimAI's header), got {line!r:.200}")
    if "tp" not in seen and ("TRANSFORMER" in tokens[0] or "MODEL" in tokens[0]):
        raise TraceError(f"{path}: line {no}: a {tokens[0]} header must give model_parallel_NPU_group: N, got "
                         f"{line!r:.200}")
    tp, pp, gpus = out["tp"], out["pp"], out["gpus"]
    if gpus > max_ranks:
        raise TraceError(f"{path}: line {no}: all_gpus: {gpus} is more than max_ranks={max_ranks}; pass max_ranks= to "
                         "read it")
    if gpus % (tp * pp):
        raise TraceError(f"{path}: line {no}: tp ({tp}) x pp ({pp}) must divide all_gpus ({gpus}), all >= 1")
    out["dp"] = gpus // (tp * pp)
    if out["dp"] % out["ep"]:
        raise TraceError(f"{path}: line {no}: ep ({out['ep']}) must divide dp = all_gpus / (tp pp) = {out['dp']}")
    return out


def _amount(token: str, where: str, column: int, unit: str) -> float:
    """A layer row's number (``column`` indexes :data:`_COLUMNS`): finite and >= 0, written
    with ASCII digits, a point and an exponent only (Python's float() would also take
    ``1_048_576`` and other scripts' digits, where SimAI's C++ stream read stops at the ``_``:
    a damaged row read as other numbers)."""
    value = float(token) if _DECIMAL.fullmatch(token) else math.nan
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: {_COLUMNS[column]} (column {column + 1}) must be a number of {unit} >= 0, got "
                         f"{token!r:.40}")
    return value


def _comm(kind: str, size: str, where: str, weight: bool, column: int):
    """(op, group kind, bytes) of a comm column, or None for NONE / 0 bytes."""
    nbytes = _amount(size, where, column, "bytes")
    if kind == "NONE" or nbytes == 0:
        return None
    base, _, scope = kind.partition("_")
    if base not in _OPS or scope not in ("", "DP", "EP", "DP_EP"):
        raise TraceError(f"{where}: comm type {kind!r:.40} is not one of {', '.join(_OPS)} (with _DP, _EP or _DP_EP) "
                         "or NONE")
    group = {"": "dp" if weight else "tp", "DP": "dp", "EP": "ep", "DP_EP": "dp_experts"}[scope]
    return _OPS[base], group, nbytes


def _rows(lines, path):
    """The layer rows; ``lines`` are (line number, text) of the file's non-blank lines."""
    no, text = lines[1]
    token = text.split()[0]
    # ASCII digits only (int() would also take "1_0" and other scripts' digits)
    count = (int(token) if len(token) <= 18 else 10**18) if token.isascii() and token.isdecimal() else 0
    if count < 1:
        raise TraceError(f"{path}: line {no}: the layer count must be an integer >= 1, got {token:.40}")
    if count + 2 < len(lines):
        raise TraceError(f"{path}: line {lines[count + 2][0]}: the layer count (line {no}) announces {count} "
                         f"layer{'s' if count > 1 else ''} but the file has {len(lines) - 2} layer rows")
    rows = []
    for k in range(count):
        if k + 2 >= len(lines):
            raise TraceError(f"{path}: line {lines[-1][0] + 1}: missing (the header announces {count} layers, the "
                             f"file has {len(lines) - 2})")
        no, text = lines[k + 2]
        where, f = f"{path}: line {no}", text.split()
        if len(f) != 12:          # more would be read by SimAI as the next row's first fields
            raise TraceError(f"{where}: a layer row has 12 columns (name, reserved, then compute, comm type, comm "
                             f"size for fwd, ig and wg, then wg update), got {len(f)}")
        times = [_amount(f[i], where, i, "ns") / _TICKS_PER_S for i in (2, 5, 8)]
        _amount(f[11], where, 11, "ns")            # read past, but a damaged value is still an error
        rows.append(dict(name=f[0], fwd=times[0], ig=times[1], wg=times[2],
                         fwd_comm=_comm(f[3], f[4], where, False, 4), ig_comm=_comm(f[6], f[7], where, False, 7),
                         wg_comm=_comm(f[9], f[10], where, True, 10)))
    return rows


def _node_count(h, rows) -> int:
    """The nodes :func:`_rank` makes over all ranks (a collective only where its group has
    two ranks or more; a pipeline's end stages pass activations one way, the others both)."""
    size = dict(tp=h["tp"], dp=h["dp"], ep=h["ep"], dp_experts=h["dp"] // h["ep"])
    calls = {key: sum(1 for r in rows if r[key] and size[r[key][1]] > 1) for key in ("fwd_comm", "ig_comm", "wg_comm")}
    per_rank = h["ga"] * (3 * len(rows) + calls["fwd_comm"] + calls["ig_comm"]) + calls["wg_comm"]
    return h["gpus"] * per_rank + h["tp"] * h["dp"] * h["ga"] * 6 * (h["pp"] - 1)


class _Chain:
    def __init__(self):
        self.nodes, self.tail = [], None

    def add(self, name, kind, *, chain=True, deps=(), **kw):
        deps = tuple(deps) + ((self.tail,) if chain and self.tail is not None else ())
        self.nodes.append(TraceNode(len(self.nodes), name, kind, deps=deps, **kw))
        if chain:
            self.tail = len(self.nodes) - 1
        return self.tail if chain else len(self.nodes) - 1


def _rank(g, stage, h, rows, group_of, neighbours):
    c = _Chain()
    prev_stage, next_stage = neighbours

    def comm(spec, name, chain=True):
        op, kind, nbytes = spec
        deps = () if chain else (c.tail,)        # beside the chain: after the compute that produced it
        return c.add(name, COLLECTIVE, chain=chain, deps=deps, op=op, bytes=nbytes, group=group_of[(kind, g)])

    for mb in range(h["ga"]):
        if prev_stage is not None:
            r = c.add(f"mb{mb}.fwd.recv", RECV, chain=False, bytes=h["pp_comm"], peer=prev_stage, tag=2 * mb)
            c.tail = c.add(f"mb{mb}.fwd.wait", COMPUTE, deps=(r,))
        for k, row in enumerate(rows):
            c.add(f"mb{mb}.fwd.{k}.{row['name']}", COMPUTE, duration=row["fwd"])
            if row["fwd_comm"] and group_of.get((row["fwd_comm"][1], g)):
                comm(row["fwd_comm"], f"mb{mb}.fwd.{k}.{row['name']}.comm")
        if next_stage is not None:
            c.add(f"mb{mb}.fwd.send", SEND, chain=False, deps=(c.tail,), bytes=h["pp_comm"], peer=next_stage, tag=2 * mb)
            r = c.add(f"mb{mb}.bwd.recv", RECV, chain=False, bytes=h["pp_comm"], peer=next_stage, tag=2 * mb + 1)
            c.tail = c.add(f"mb{mb}.bwd.wait", COMPUTE, deps=(r,))
        for k in reversed(range(len(rows))):
            row, tag = rows[k], f"mb{mb}.bwd.{k}.{rows[k]['name']}"
            c.add(f"{tag}.ig", COMPUTE, duration=row["ig"])
            if row["ig_comm"] and group_of.get((row["ig_comm"][1], g)):
                comm(row["ig_comm"], f"{tag}.ig.comm")
            c.add(f"{tag}.wg", COMPUTE, duration=row["wg"])
            if mb == h["ga"] - 1 and row["wg_comm"] and group_of.get((row["wg_comm"][1], g)):
                comm(row["wg_comm"], f"{tag}.wg.comm", chain=False)
        if prev_stage is not None:
            c.add(f"mb{mb}.bwd.send", SEND, chain=False, deps=(c.tail,), bytes=h["pp_comm"], peer=prev_stage,
                  tag=2 * mb + 1)
    return RankTrace(rank=g, nodes=_wg_in_order(c.nodes), source=f"rank {g}")


def _wg_in_order(nodes):
    """Weight-gradient collectives run in issue order on their group (NCCL serialises a
    communicator): each waits for the one issued before it."""
    last = None
    for node in nodes:
        if node.kind == COLLECTIVE and node.name.endswith(".wg.comm"):
            if last is not None:
                node.deps = node.deps + (last,)
            last = node.id
    return nodes


def _lines(path, max_file_bytes):
    """(line number, text) of the file's non-blank lines; one clear error for a file that
    is missing, a folder, too large or not UTF-8."""
    path_text = str(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a SimAI workload file", path_text)
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such SimAI workload file", path_text)
    # read at most the limit: a pipe, /dev/stdin or a device says size 0
    data = read_bytes(path, max_file_bytes, "max_file_bytes", error=TraceError, too_large=lambda size: (
        f"{path}: the file {'holds more' if size is None else f'is {size} bytes, more'} than "
        f"max_file_bytes={max_file_bytes} (SimAI workloads are tens to hundreds of kB; pass a larger "
        "max_file_bytes to read_simai_workload to read it)"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TraceError(f"{path}: line {line}: byte 0x{data[err.start]:02x} (offset {err.start}) is not UTF-8 "
                         "text") from None
    return [(no, ln) for no, ln in enumerate(text.splitlines(), 1) if ln.strip()]


def read_simai_workload(path, *, max_file_bytes: int = MAX_WORKLOAD_BYTES, max_ranks: int = MAX_RANKS,
                        max_nodes: int = MAX_NODES):
    """Read a SimAI workload file (AICB's output, ``SimAI -w FILE``) into a replayable
    :class:`~flowsolver.traces.Workload` of ``all_gpus`` ranks (see the module notes for the
    columns, units and the schedule built from them).

    Limits, checked before anything is allocated: ``max_file_bytes`` (bytes of the file,
    default 4 MiB: AICB's files are tens to hundreds of kB),
    ``max_ranks`` (``all_gpus``), ``max_nodes`` (nodes over all ranks: about ``all_gpus x
    ga x 3 x`` layers). A missing file is FileNotFoundError, a folder IsADirectoryError;
    a value out of range, a byte that is not UTF-8 or a limit passed a :class:`TraceError`
    (a ValueError) naming the file, the line and the field.

    >>> import tempfile, os
    >>> text = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 ga: 1 all_gpus: 8\\n1\\n"
    ...         "embedding_layer -1 556000 ALLREDUCE 536870912 1 NONE 0 1 NONE 0 1\\n")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "w.txt"); _ = open(p, "w").write(text)
    ...     w = read_simai_workload(p)
    >>> w.n_ranks, [(c.op, c.bytes, len(c.ranks)) for c in w.comms], w.ranks[0].nodes[0].duration
    (8, [('all_reduce', 536870912.0, 8)], 0.000556)
    """
    for name, value in (("max_file_bytes", max_file_bytes), ("max_ranks", max_ranks), ("max_nodes", max_nodes)):
        check_limit(name, value)
    path = Path(path)
    lines = _lines(path, max_file_bytes)
    if len(lines) < 2:
        raise TraceError(f"{path}: a SimAI workload has a header line, a layer count and layer rows")
    h = _header(lines[0][1], path, max_ranks, lines[0][0])
    rows = _rows(lines, path)
    total = _node_count(h, rows)
    if total > max_nodes:
        raise TraceError(f"{path}: all_gpus ({h['gpus']}) x ga ({h['ga']}) x {len(rows)} layer"
                         f"{'s' if len(rows) > 1 else ''} make {total} nodes, more than max_nodes={max_nodes}; pass "
                         "max_nodes= to read it")
    lay = ParallelLayout(tp=h["tp"], pp=h["pp"], dp=h["dp"], ep=h["ep"])
    groups, group_of = {}, {}
    for kind in ("tp", "ep", "dp", "dp_experts"):
        for members in lay.groups(kind):
            if len(members) < 2:
                continue
            name = str(len(groups) + 1)
            groups[name] = tuple(members)
            for r in members:
                group_of[(kind, r)] = name
    traces = [None] * lay.gpus
    for g, q, neighbours in pipeline_ranks(lay):
        traces[g] = _rank(g, q, h, rows, group_of, neighbours)
    for trace in traces:
        trace.source = f"{path} (rank {trace.rank})"
    return build_workload(traces, groups, source=str(path))
