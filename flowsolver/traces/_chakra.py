"""Chakra ET files read into a :class:`Workload`: one file per rank (``NAME.<rank>.et``,
optionally gzipped), process groups from ASTRA-sim's communicator-group JSON or from the
trace's metadata nodes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ._schema import COLLECTIVE_TYPES, NODE_TYPES, TraceError, read_stream
from ._workload import COLLECTIVE, COMPUTE, DELAY, RECV, SEND, RankTrace, TraceNode, build_workload, paused_gc

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


def _attributes(node) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        if kind is not None:
            value = getattr(a, kind)
            out[a.name] = list(value.values) if kind[-5:] == "_list" else value
    return out


def _pg_metadata(text: str, where: str) -> dict:
    """Process groups from a metadata node's ``inputs.values`` (PyTorch's converter writes a
    JSON list of ``{"pg_name", "ranks", ...}``, possibly wrapped in a list of one string)."""
    candidates = [text, text[2:-2]]
    for candidate in candidates:
        try:
            items = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(items, list) and len(items) == 1 and isinstance(items[0], str):
            try:
                items = json.loads(items[0])
            except ValueError:
                continue
        if isinstance(items, list) and all(isinstance(i, dict) and "pg_name" in i for i in items):
            return {str(i["pg_name"]): tuple(i.get("ranks") or ()) for i in items}
    raise TraceError(f"{where}: metadata node's inputs.values is not a JSON list of process groups")


def _node(msg, where_file: str) -> TraceNode:
    kind_number = msg.type
    if kind_number not in _KNOWN:
        raise TraceError(f"{where_file}: node {msg.id} ({msg.name!r}): unknown node type {kind_number} (Chakra "
                         f"NodeType is 0 ... {max(NODE_TYPES.values())})")
    attr = _attributes(msg)
    ctrl = msg.ctrl_deps
    deps = tuple(msg.data_deps) if not ctrl else tuple(dict.fromkeys((*msg.data_deps, *ctrl)))
    duration = msg.duration_micros * 1e-6
    if kind_number == _COMP:
        return TraceNode(msg.id, msg.name, DELAY if attr.get("is_cpu_op") else COMPUTE, deps, duration,
                         float(attr.get("num_ops") or 0))
    if kind_number in _TIMED or kind_number in _SKIPPED:
        return TraceNode(msg.id, msg.name, DELAY, deps, 0.0 if kind_number in _SKIPPED else duration)
    where = f"{where_file}: node {msg.id} ({msg.name!r})"
    size = attr.get("comm_size")
    if size is None or size < 0:
        raise TraceError(f"{where}: a communication node needs a comm_size attribute (bytes >= 0)")
    if kind_number == NODE_TYPES["COMM_COLL_NODE"]:
        op = OPS_OF_CHAKRA.get(attr.get("comm_type"))
        if op is None:
            names = {v: k for k, v in COLLECTIVE_TYPES.items()}
            raise TraceError(f"{where}: collective type {attr.get('comm_type')!r} "
                             f"({names.get(attr.get('comm_type'), 'unknown')}) is not supported; supported: "
                             f"{', '.join(names[k] for k in OPS_OF_CHAKRA)}")
        return TraceNode(msg.id, msg.name, COLLECTIVE, deps, duration, op=op, bytes=float(size),
                         group=str(attr.get("pg_name") or ""))
    send = kind_number == NODE_TYPES["COMM_SEND_NODE"]
    peer = attr.get("comm_dst" if send else "comm_src")
    if peer is None:
        raise TraceError(f"{where}: a {'send' if send else 'recv'} node needs a "
                         f"{'comm_dst' if send else 'comm_src'} attribute")
    return TraceNode(msg.id, msg.name, SEND if send else RECV, deps, duration, op="send_recv", bytes=float(size),
                     peer=int(peer), tag=int(attr.get("comm_tag") or 0))


def _decoded(msg, f):
    """A node message as (TraceNode fields, its process groups as name -> (ranks, node id),
    or None)."""
    groups = None
    if msg.type == NODE_TYPES["METADATA_NODE"] and msg.inputs.values:
        groups = {k: (v, msg.id) for k, v in _pg_metadata(msg.inputs.values, f"{f}: node {msg.id}").items()}
    node = _node(msg, str(f))
    return tuple(getattr(node, k) for k in TraceNode.__slots__), groups


def trace_files(path) -> list:
    """The per-rank files of a trace: ``path`` is a folder holding ``NAME.<rank>.et[.gz]``
    files, or the ``NAME`` prefix itself (ASTRA-sim's ``--workload-configuration``)."""
    path = Path(path)
    folder, prefix = (path, None) if path.is_dir() else (path.parent, path.name)
    found = {}
    for f in sorted(folder.iterdir()) if folder.is_dir() else ():
        m = _FILE.match(f.name)
        if m and (prefix is None or m.group("prefix") == prefix):
            rank = int(m.group("rank"))
            if rank in found:
                raise TraceError(f"{f}: rank {rank} has two files ({found[rank].name} and {f.name})")
            found[rank] = f
    if not found:
        raise TraceError(f"{path}: no Chakra trace files (NAME.<rank>.et or .et.gz)")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise TraceError(f"{path}: ranks must be 0 ... {max(found)}, one file each; missing rank {missing[0]}")
    return [found[r] for r in range(len(found))]


def _given_groups(groups, group_file):
    """(name -> ranks, where they came from) from the caller or the communicator-group file."""
    if groups is not None:
        return {str(k): tuple(int(r) for r in v) for k, v in groups.items()}, "the groups passed"
    if group_file is None:
        return {}, ""
    try:
        raw = json.loads(Path(group_file).read_text())
        return {str(k): tuple(int(r) for r in v) for k, v in raw.items()}, str(group_file)
    except (ValueError, AttributeError, TypeError) as err:
        raise TraceError(f"{group_file}: not a communicator-group JSON object (name -> ranks): {err}") from None


def _groups_from(files, given, given_from, metadata_groups) -> dict:
    """The given groups and those of the metadata nodes (name -> (ranks, node id) per
    file), which must all agree."""
    seen = {}
    for f, found in zip(files, metadata_groups):
        for name, (ranks, node) in found.items():
            ranks = ranks or tuple(range(len(files)))
            here = f"{f}: node {node}"
            if name in seen and seen[name][1] != ranks:
                raise TraceError(f"process group {name!r}: {seen[name][0]} gives ranks {list(seen[name][1])[:16]} but "
                                 f"{here} gives {list(ranks)[:16]}")
            if name in given and given[name] != ranks:
                raise TraceError(f"process group {name!r}: {given_from} give{'' if given_from.startswith('the') else 's'} "
                                 f"ranks {list(given[name])[:16]} but {here} gives {list(ranks)[:16]}")
            seen[name] = (here, ranks)
    return given | {k: v for k, (_, v) in seen.items()}


def read_chakra(path, *, groups: dict | None = None):
    """Read a Chakra execution trace (one ET file per rank) into a replayable
    :class:`~flowsolver.traces.Workload`.

    ``path`` is the folder holding ``NAME.<rank>.et`` (or ``.et.gz``) files, or the ``NAME``
    prefix. Process groups (``pg_name`` attribute of collective nodes): ``groups`` (name ->
    ranks), else the folder's ``comm_group.json`` (ASTRA-sim's communicator-group file),
    plus those PyTorch's converter records in metadata nodes; no group (``""`` or ``"0"``)
    means every rank. Node attributes read: ``comm_type``, ``comm_size`` (bytes, as
    nccl-tests counts them for the op), ``pg_name``, ``comm_src`` / ``comm_dst`` /
    ``comm_tag``, ``num_ops`` (FLOPs), ``is_cpu_op``; ``duration_micros`` is the recorded
    duration. The root of a broadcast / reduce is its group's first rank. Needs
    ``protobuf`` (``pip install 'flowsolver[traces]'``).

    Errors (:class:`TraceError`, a ValueError): a truncated or undecodable message, an
    unknown node type, a missing dependency, a dependency cycle, process groups whose
    ranks disagree, collectives that do not match across ranks, each naming file and node.
    """
    with paused_gc():
        return _read(path, groups)


def _read(path, groups):
    files = trace_files(path)
    folder = files[0].parent
    given, given_from = _given_groups(groups, folder / GROUP_FILE if (folder / GROUP_FILE).exists() else None)
    ranks, metadata_groups, memo = [], [], {}
    for rank, f in enumerate(files):
        _, decoded = read_stream(f, lambda msg: _decoded(msg, f), memo)
        found = {}
        for _, groups_here in decoded:
            if groups_here:
                found |= groups_here
        # each rank its own nodes, though ranks share what identical messages decode to
        nodes = [TraceNode(*fields) for fields, _ in decoded]
        ranks.append(RankTrace(rank=rank, nodes=nodes, source=str(f)))
        metadata_groups.append(found)
    merged = _groups_from(files, given, given_from, metadata_groups)
    return build_workload(ranks, merged, source=str(path))
