"""Chakra ET files read into a :class:`Workload`: one file per rank (``NAME.<rank>.et``,
optionally gzipped), process groups from ASTRA-sim's communicator-group JSON or from the
trace's metadata nodes.

Where the traces that ASTRA-sim runs stray from the schema's letter, the reader does as
ASTRA-sim and Chakra's feeders do:

* A communication node marked ``is_cpu_op`` (PyTorch's converter writes the host-side call
  of a collective, ``c10d::broadcast_`` say, as a COMM_COLL_NODE on the CPU, often without a
  ``comm_size``; the GPU kernel that moves the bytes is a node of its own) is a CPU delay of
  its recorded duration, moving nothing. ASTRA-sim ran any ``is_cpu_op`` node as compute from
  November 2023 (astra-sim commit cf0a7ea) to its FeederV3 port (80ffc62, August 2025):
  ``Workload::issue`` sent it to ``issue_comp``, which without a roofline replays the node's
  ``duration_micros`` (``issue_replay``). Since then ``Workload::issue_comm`` refuses it ("Comm
  node should not be on CPU") except under ``--replay-only``, where every node takes its
  recorded duration: the same delay.
* A node waits for its ``data_deps`` and its ``ctrl_deps``, as ASTRA-sim's FeederV3 resolves
  both (astra-sim/chakra src/feeder_v3/dependancy_solver.cpp, ``DependancyResolver::add_node``,
  with data and control dependencies both enabled in common.h), where the
  ``ctrl_deps`` of the rank's file make a DAG with its ``data_deps``. Where they do not (one
  names a node not in the file or the node itself, or they close a cycle: FeederV3 refuses
  the file, "not found in index", or never frees the node), the file's ``ctrl_deps`` are
  left out, with a ``RuntimeWarning``, and its nodes wait for their ``data_deps`` only, as
  Chakra's ETFeeder, which ASTRA-sim used before FeederV3, reads a trace: it resolves
  ``data_deps`` only and never reads ``ctrl_deps`` (src/feeder/et_feeder.cpp, ``readNode``,
  ``freeChildrenNodes``). Chakra's own feeder-test trace (tests/data/feeder_tests_trace.tar.gz)
  is such a file: 1,277 of its ``ctrl_deps`` name nodes not in it and 383 the node itself.
  ``data_deps`` that are not a DAG stay an error: no feeder would issue the nodes.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import warnings
from pathlib import Path

from topologies.formats import read_bytes, unique_keys

from ._schema import (COLLECTIVE_TYPES, MAX_FILE_BYTES, MAX_NODES, MAX_RANKS, NODE_TYPES, TraceError, check_limit,
                      read_stream)
from ._workload import (COLLECTIVE, COMPUTE, DELAY, RECV, SEND, RankTrace, TraceNode, build_workload, check_dag,
                        paused_gc, rank_tuple)

__all__ = ["read_chakra", "trace_files", "OPS_OF_CHAKRA"]

#: CollectiveCommType -> our op (REDUCE_SCATTER_BLOCK is NCCL's reduce-scatter; BARRIER moves no bytes)
OPS_OF_CHAKRA = {COLLECTIVE_TYPES["ALL_REDUCE"]: "all_reduce", COLLECTIVE_TYPES["REDUCE"]: "reduce",
                 COLLECTIVE_TYPES["ALL_GATHER"]: "all_gather", COLLECTIVE_TYPES["BROADCAST"]: "broadcast",
                 COLLECTIVE_TYPES["ALL_TO_ALL"]: "all_to_all", COLLECTIVE_TYPES["REDUCE_SCATTER"]: "reduce_scatter",
                 COLLECTIVE_TYPES["REDUCE_SCATTER_BLOCK"]: "reduce_scatter", COLLECTIVE_TYPES["BARRIER"]: "barrier"}
_TIMED = {NODE_TYPES[k] for k in ("MEM_LOAD_NODE", "MEM_STORE_NODE", "STORAGE_NODE", "BATCH_NODE",
                                  "CHECKPOINT_NODE")}
_SKIPPED = {NODE_TYPES["INVALID_NODE"], NODE_TYPES["METADATA_NODE"]}
_KNOWN, _COMP = frozenset(NODE_TYPES.values()), NODE_TYPES["COMP_NODE"]
_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)\.et(?:\.gz)?$")
#: the communicator-group file ASTRA-sim takes (--comm-group-configuration): {"1": [0, 1, ...], ...}
GROUP_FILE = "comm_group.json"
#: bytes of process-group JSON read: the communicator-group file and each metadata node's
#: ``inputs.values`` (the default of ``max_group_bytes``). ASTRA-sim's files are tens of bytes (its
#: examples: 78); a job of 131,072 ranks in three group families (TP, DP, PP) lists about 3 x 131,072
#: ranks of up to 8 characters, 3.1 MB. JSON of many small lists parses to ~24x its size (measured
#: 2026-12-07 by adv21b: a 30 MB file of empty lists raised the peak by 0.72 GB, 90 MB by 2.07 GB), so
#: 4 MiB is at most ~0.1 GB; under the 1 GiB of a trace file it was ~25 GB before the error
MAX_GROUP_BYTES = 4 * 2**20


def _attributes(node) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        if kind is not None:
            value = getattr(a, kind)
            out[a.name] = list(value.values) if kind[-5:] == "_list" else value
    return out


def _not_a_number(name):
    raise ValueError(f"{name} is not a number JSON allows")


def json_of(text: str, where: str):
    """``text`` parsed as JSON; a :class:`TraceError` naming ``where`` for anything else,
    ``NaN`` / ``Infinity`` (not JSON) and nesting too deep for the parser included."""
    try:
        return json.loads(text, parse_constant=_not_a_number, object_pairs_hook=unique_keys)
    except RecursionError:
        raise TraceError(f"{where}: the JSON is nested too deep to read") from None
    except ValueError as err:
        raise TraceError(f"{where}: not JSON ({err})") from None


def _pg_metadata(text: str, where: str, max_group_bytes: int = MAX_GROUP_BYTES) -> dict:
    """Process groups from a metadata node's ``inputs.values`` (PyTorch's converter writes a
    JSON list of ``{"pg_name", "ranks", ...}``, possibly wrapped in a list of one string):
    name -> ranks (``()``: every rank); a text of more than ``max_group_bytes`` bytes (UTF-8)
    is refused before it is parsed."""
    if len(text) > max_group_bytes or (4 * len(text) > max_group_bytes
                                       and len(text.encode("utf-8", "surrogatepass")) > max_group_bytes):
        raise TraceError(f"{where}: metadata node's inputs.values holds more than max_group_bytes={max_group_bytes} "
                         "bytes of process groups (pass a larger max_group_bytes to read_chakra to read it)")
    for candidate in (text, text[2:-2]):
        try:
            items = json_of(candidate, where)
            if isinstance(items, list) and len(items) == 1 and isinstance(items[0], str):
                items = json_of(items[0], where)
        except TraceError as err:
            if "nested too deep" in str(err):
                raise TraceError(f"{where}: metadata node's inputs.values is nested too deep to read") from None
            continue
        if isinstance(items, list) and all(isinstance(i, dict) and "pg_name" in i for i in items):
            out = {}
            for i in items:
                name, ranks = str(i["pg_name"]), i.get("ranks")
                out[name] = () if ranks is None or ranks == [] else rank_tuple(ranks, f"{where}: process group "
                                                                                     f"{name!r}")
            return out
    raise TraceError(f"{where}: metadata node's inputs.values is not a JSON list of process groups")


def _count(attr, name, where, what, default=None):
    """Attribute ``name`` as a finite float >= 0 (``what``: the unit, for the message)."""
    value = attr.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: attribute {name} must be a number of {what} >= 0, got {value!r:.80}")
    return float(value)


def _integer(attr, name, where, what="an integer", minimum=None, default=None):
    value = attr.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (minimum is not None and value < minimum):
        raise TraceError(f"{where}: attribute {name} must be {what}, got {value!r:.80}")
    return int(value)


def _flag(attr, name, where) -> bool:
    value = attr.get(name, False)
    if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
        raise TraceError(f"{where}: attribute {name} must be a bool, got {value!r:.80}")
    return bool(value)


def _node(msg, where_file: str) -> TraceNode:
    kind_number = msg.type
    where = f"{where_file}: node {msg.id} ({msg.name!r})"
    if kind_number not in _KNOWN:
        raise TraceError(f"{where}: unknown node type {kind_number} (Chakra NodeType is 0 ... "
                         f"{max(NODE_TYPES.values())})")
    attr = _attributes(msg)
    ctrl = msg.ctrl_deps
    deps = tuple(msg.data_deps) if not ctrl else tuple(dict.fromkeys((*msg.data_deps, *ctrl)))
    duration = msg.duration_micros * 1e-6
    if kind_number == _COMP:
        cpu = _flag(attr, "is_cpu_op", where)
        return TraceNode(msg.id, msg.name, DELAY if cpu else COMPUTE, deps, duration,
                         _count(attr, "num_ops", where, "FLOPs", 0.0))
    if kind_number in _TIMED or kind_number in _SKIPPED:
        return TraceNode(msg.id, msg.name, DELAY, deps, 0.0 if kind_number in _SKIPPED else duration)
    if _flag(attr, "is_cpu_op", where):     # a collective's host-side call: its duration (module docstring)
        return TraceNode(msg.id, msg.name, DELAY, deps, duration)
    if attr.get("comm_size") is None:
        raise TraceError(f"{where}: a communication node needs a comm_size attribute (bytes >= 0)")
    size = _count(attr, "comm_size", where, "bytes")
    if kind_number == NODE_TYPES["COMM_COLL_NODE"]:
        kind = _integer(attr, "comm_type", where, "a CollectiveCommType number", default=None)
        op = OPS_OF_CHAKRA.get(kind)
        if op is None:
            names = {v: k for k, v in COLLECTIVE_TYPES.items()}
            raise TraceError(f"{where}: collective type {kind!r} ({names.get(kind, 'unknown')}) is not supported; "
                             f"supported: {', '.join(names[k] for k in OPS_OF_CHAKRA)}")
        group = attr.get("pg_name") or ""
        if isinstance(group, bool) or not isinstance(group, (str, numbers.Integral)):
            raise TraceError(f"{where}: attribute pg_name must be a process group's name, got {group!r:.80}")
        return TraceNode(msg.id, msg.name, COLLECTIVE, deps, duration, op=op, bytes=size, group=str(group))
    send = kind_number == NODE_TYPES["COMM_SEND_NODE"]
    key = "comm_dst" if send else "comm_src"
    if attr.get(key) is None:
        raise TraceError(f"{where}: a {'send' if send else 'recv'} node needs a {key} attribute")
    peer = _integer(attr, key, where, "a rank (an integer >= 0)", minimum=0)
    return TraceNode(msg.id, msg.name, SEND if send else RECV, deps, duration, op="send_recv", bytes=size,
                     peer=peer, tag=_integer(attr, "comm_tag", where, default=0))


def _decoded(msg, f, max_group_bytes: int = MAX_GROUP_BYTES):
    """A node message as (TraceNode fields, its process groups as name -> (ranks, node id),
    or None, its control dependencies that are not also data dependencies)."""
    groups = None
    if msg.type == NODE_TYPES["METADATA_NODE"] and msg.inputs.values:
        groups = {k: (v, msg.id) for k, v in _pg_metadata(msg.inputs.values, f"{f}: node {msg.id}",
                                                          max_group_bytes).items()}
    node = _node(msg, str(f))
    ctrl = tuple(d for d in msg.ctrl_deps if d not in msg.data_deps) if msg.ctrl_deps else ()
    return tuple(getattr(node, k) for k in TraceNode.__slots__), groups, ctrl


_DEPS = TraceNode.__slots__.index("deps")


def _rank_trace(rank, f, decoded) -> RankTrace:
    """The RankTrace of one file's decoded nodes: waiting for their data and control
    dependencies, or for their data dependencies only where the control ones do not make a DAG
    with them (as Chakra's ETFeeder reads a trace, with a RuntimeWarning: module docstring)."""
    trace = RankTrace(rank=rank, nodes=[TraceNode(*fields) for fields, _, _ in decoded], source=str(f))
    if not any(ctrl for _, _, ctrl in decoded):
        return trace
    try:
        check_dag(trace)
        return trace
    except TraceError as with_ctrl:
        nodes = [TraceNode(*fields[:_DEPS], tuple(d for d in fields[_DEPS] if d not in ctrl), *fields[_DEPS + 1:])
                 if ctrl else TraceNode(*fields) for fields, _, ctrl in decoded]
        data_only = RankTrace(rank=rank, nodes=nodes, source=str(f))
        check_dag(data_only)                        # data_deps that are not a DAG: that error
        left = sum(len(ctrl) for _, _, ctrl in decoded)
        why = str(with_ctrl).splitlines()[0].removeprefix(f"{f}: ")
        warnings.warn(f"{f}: its ctrl_deps do not make a DAG with its data_deps ({why}): its {left} ctrl_deps are left "
                      f"out, its nodes waiting for their data_deps only, as Chakra's ETFeeder reads a trace",
                      RuntimeWarning, stacklevel=4)
        return data_only


def trace_files(path, *, max_ranks: int = MAX_RANKS) -> list:
    """The per-rank files of a trace: ``path`` is a folder holding ``NAME.<rank>.et[.gz]``
    files, or the ``NAME`` prefix itself (ASTRA-sim's ``--workload-configuration``). A rank
    of ``max_ranks`` or more, an entry named like a trace file that is not a file, two
    files of one rank or a missing rank is a :class:`TraceError` naming the file."""
    path = Path(path)
    folder, prefix = (path, None) if path.is_dir() else (path.parent, path.name)
    found = {}
    for f in sorted(folder.iterdir()) if folder.is_dir() else ():
        m = _FILE.match(f.name)
        if m and (prefix is None or m.group("prefix") == prefix):
            digits = m.group("rank")
            if len(digits.lstrip("0")) > len(str(max_ranks)) or int(digits) >= max_ranks:
                raise TraceError(f"{f}: rank {digits} is beyond max_ranks={max_ranks} (ranks 0 ... {max_ranks - 1}); "
                                 "pass max_ranks= to read more")
            if not f.is_file():
                raise TraceError(f"{f} is not a file (a folder or other entry named like a trace file)")
            rank = int(digits)
            if rank in found:
                raise TraceError(f"{f}: rank {rank} has two files ({found[rank].name} and {f.name})")
            found[rank] = f
    if not found:
        raise TraceError(f"{path}: no Chakra trace files (NAME.<rank>.et or .et.gz)")
    ranks = sorted(found)
    missing = next((k for k, r in enumerate(ranks) if k != r), None)
    if missing is not None:
        raise TraceError(f"{path}: ranks must be 0 ... {ranks[-1]}, one file each; missing rank {missing}")
    return [found[r] for r in ranks]


def _groups_of(raw, where) -> dict:
    """name -> ranks of a mapping (the caller's ``groups`` or the group file's object)."""
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: not a JSON object of process groups (name -> ranks), got {type(raw).__name__}")
    return {str(k): rank_tuple(v, f"{where}: process group {str(k)!r}") for k, v in raw.items()}


def _given_groups(groups, group_file, max_group_bytes):
    """(name -> ranks, where they came from) from the caller or the communicator-group file."""
    if groups is not None:
        return _groups_of(groups, "groups"), "the groups passed"
    if group_file is None:
        return {}, ""
    # read at most the limit: a pipe, /dev/stdin or a device says size 0
    data = read_bytes(group_file, max_group_bytes, "max_group_bytes", error=TraceError, too_large=lambda size: (
        f"{group_file}: the file {'holds more' if size is None else f'is {size} bytes, more'} than "
        f"max_group_bytes={max_group_bytes} bytes of process groups (pass a larger max_group_bytes to "
        "read_chakra to read it)"))
    try:
        text = data.decode()
    except UnicodeDecodeError as err:
        raise TraceError(f"{group_file}: not UTF-8 text (byte {err.start})") from None
    return _groups_of(json_of(text, str(group_file)), str(group_file)), str(group_file)


def _check_members(name, ranks, n, where) -> None:
    if not ranks or len(set(ranks)) != len(ranks) or max(ranks) >= n:
        raise TraceError(f"{where}: process group {name!r}: ranks {list(ranks)[:16]} must be distinct ranks of the "
                         f"trace, 0 ... {n - 1}")


def _groups_from(files, given, given_from, metadata_groups) -> dict:
    """The given groups and those of the metadata nodes (name -> (ranks, node id) per
    file), which must all agree."""
    seen, n = {}, len(files)
    for name, ranks in given.items():
        _check_members(name, ranks, n, given_from)
    for f, found in zip(files, metadata_groups):
        for name, (ranks, node) in found.items():
            ranks = ranks or tuple(range(n))
            here = f"{f}: node {node}"
            _check_members(name, ranks, n, here)
            if name in seen and seen[name][1] != ranks:
                raise TraceError(f"process group {name!r}: {seen[name][0]} gives ranks {list(seen[name][1])[:16]} but "
                                 f"{here} gives {list(ranks)[:16]}")
            if name in given and given[name] != ranks:
                raise TraceError(f"process group {name!r}: {given_from} give{'' if given_from.startswith('the') else 's'} "
                                 f"ranks {list(given[name])[:16]} but {here} gives {list(ranks)[:16]}")
            seen[name] = (here, ranks)
    return given | {k: v for k, (_, v) in seen.items()}


def read_chakra(path, *, groups: dict | None = None, max_file_bytes: int = MAX_FILE_BYTES,
                max_nodes: int = MAX_NODES, max_ranks: int = MAX_RANKS, max_group_bytes: int = MAX_GROUP_BYTES):
    """Read a Chakra execution trace (one ET file per rank) into a replayable
    :class:`~flowsolver.traces.Workload`.

    ``path`` is the folder holding ``NAME.<rank>.et`` (or ``.et.gz``) files, or the ``NAME``
    prefix. Process groups (``pg_name`` attribute of collective nodes): ``groups`` (name ->
    ranks), else the folder's ``comm_group.json`` (ASTRA-sim's communicator-group file),
    plus those PyTorch's converter records in metadata nodes; no group (``""`` or ``"0"``)
    means every rank. Ranks are non-negative integers (not floats, strings or bools).
    Node attributes read: ``comm_type``, ``comm_size`` (bytes, as
    nccl-tests counts them for the op), ``pg_name``, ``comm_src`` / ``comm_dst`` /
    ``comm_tag``, ``num_ops`` (FLOPs), ``is_cpu_op`` (a CPU op, a communication node's too,
    is a delay of its duration); ``duration_micros`` is the recorded duration. A node waits
    for its ``data_deps`` and ``ctrl_deps``; a file whose ``ctrl_deps`` do not make a DAG with
    its ``data_deps`` (one names a node not in it) is read with ``data_deps`` only, as Chakra's
    ETFeeder reads it, with a ``RuntimeWarning`` (the module docstring says why). The root of
    a broadcast / reduce is its group's first rank. Needs ``protobuf`` (``pip install
    'flowsolver[traces]'``).

    Limits (what a file can make the reader allocate, checked before it does):
    ``max_file_bytes`` (default 1 GiB) bytes per file once inflated (a gzipped file is
    inflated a chunk at a time) and per message; ``max_nodes`` (default 10 million, up to
    about 9 GB while read) nodes over all ranks; ``max_ranks`` (default 2**20) rank files;
    ``max_group_bytes`` (default 4 MiB, :data:`MAX_GROUP_BYTES`: JSON parses to ~24x its size)
    bytes of process-group JSON, the ``comm_group.json`` file and each metadata node's.

    Errors (:class:`TraceError`, a ValueError): a truncated or undecodable message or
    gzip stream, a limit passed, an unknown node type, an attribute of the wrong type or
    out of range, a missing dependency, a dependency cycle, ranks that are not
    non-negative integers, process groups whose ranks disagree, collectives that do not
    match across ranks, each naming file and node (or field).

    >>> import tempfile
    >>> from flowsolver.traces import build_workload, write_chakra, RankTrace, TraceNode
    >>> w = build_workload([RankTrace(r, [TraceNode(1, "ar", "collective", op="all_reduce", bytes=2**20)])
    ...                     for r in range(2)])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_chakra(w, d)
    ...     back = read_chakra(d)
    >>> back.n_ranks, [(c.op, c.bytes, c.ranks) for c in back.comms]
    (2, [('all_reduce', 1048576.0, (0, 1))])
    """
    for name, value in (("max_file_bytes", max_file_bytes), ("max_nodes", max_nodes), ("max_ranks", max_ranks),
                        ("max_group_bytes", max_group_bytes)):
        check_limit(name, value)
    with paused_gc():
        return _read(path, groups, max_file_bytes, max_nodes, max_ranks, max_group_bytes)


def _read(path, groups, max_file_bytes, max_nodes, max_ranks, max_group_bytes=MAX_GROUP_BYTES):
    files = trace_files(path, max_ranks=max_ranks)
    folder = files[0].parent
    given, given_from = _given_groups(groups, folder / GROUP_FILE if (folder / GROUP_FILE).exists() else None,
                                      max_group_bytes)
    ranks, metadata_groups, memo, count = [], [], {}, 0
    for rank, f in enumerate(files):
        _, decoded = read_stream(f, lambda msg: _decoded(msg, f, max_group_bytes), memo, max_file_bytes=max_file_bytes,
                                 max_nodes=max_nodes, nodes_before=count)
        count += len(decoded)
        found = {}
        for _, groups_here, _ in decoded:
            for name, (members, node) in (groups_here or {}).items():
                if name in found and found[name][0] != members:     # the same file naming one group twice
                    raise TraceError(f"process group {name!r}: {f}: node {found[name][1]} gives ranks "
                                     f"{list(found[name][0])[:16]} but node {node} gives {list(members)[:16]}")
                found[name] = (members, node)
        # each rank its own nodes, though ranks share what identical messages decode to
        ranks.append(_rank_trace(rank, f, decoded))
        metadata_groups.append(found)
    merged = _groups_from(files, given, given_from, metadata_groups)
    return build_workload(ranks, merged, source=str(path))
