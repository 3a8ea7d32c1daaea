"""A :class:`Workload` written as a Chakra execution trace: one ET file per rank and
ASTRA-sim's communicator-group file, readable by :func:`read_chakra` and by ASTRA-sim."""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from ._chakra import GROUP_FILE, OPS_OF_CHAKRA
from ._schema import NODE_TYPES, SCHEMA_VERSION, messages, write_stream
from ._workload import COLLECTIVE, COMPUTE, DELAY, SEND, Workload, check_dag, paused_gc

__all__ = ["write_chakra"]

_CHAKRA_OF_OP = {op: number for number, op in OPS_OF_CHAKRA.items() if number != 8}   # not REDUCE_SCATTER_BLOCK
_TYPE_OF_KIND = {COMPUTE: NODE_TYPES["COMP_NODE"], DELAY: NODE_TYPES["COMP_NODE"],
                 COLLECTIVE: NODE_TYPES["COMM_COLL_NODE"], SEND: NODE_TYPES["COMM_SEND_NODE"],
                 "recv": NODE_TYPES["COMM_RECV_NODE"]}


def _micros(trace, index=None) -> list:
    """Integer microseconds per node (Chakra's ``duration_micros``), each the difference of
    two rounded finish times, so that rounding errors do not add up along any chain of work.

    The finish time of a node is taken on the rank's own schedule with communication free:
    ``C(v) = duration(v) + max C(p)`` over ``v``'s dependencies and, for a compute node, the
    compute node before it on the GPU (nodes in dependency order, the lowest index first, as
    :func:`replay` picks among ready nodes). ``v`` is written as ``round(C(v)) -
    round(C(p*))`` microseconds, ``p*`` the predecessor that gave the maximum (``0`` for none).
    Rounding is monotone, so the written durations give every node the finish time
    ``round(C(v))`` on that schedule: within 0.5 us of the exact one, however many nodes come
    before it and whichever serial chain (the GPU stream, a chain of CPU delays, the two
    mixed) sets it. (A running sum over the node list instead kept only the list's prefixes
    so: a 0.6 us kernel chain with a 0.4 us delay beside each kernel was written as 1 us
    kernels, 1,000 us for 600 us.) Never negative: ``C(v) >= C(p*)``.

    >>> from flowsolver.traces import RankTrace, TraceNode
    >>> nodes = []
    >>> for i in range(4):   # kernels of 0.6 us in a chain, a 0.4 us CPU delay beside each
    ...     nodes += [TraceNode(2 * i, "k", "compute", deps=(2 * i - 2,) if i else (), duration=0.6e-6),
    ...               TraceNode(2 * i + 1, "d", "delay", duration=0.4e-6)]
    >>> w = _micros(RankTrace(0, nodes))
    >>> w[0::2], w[1::2]
    ([1, 0, 1, 0], [0, 0, 0, 0])
    """
    nodes = trace.nodes
    if index is None:       # node id -> position (check_dag's, where the trace has been checked)
        index = {node.id: i for i, node in enumerate(nodes)}
    deps = [[index[d] for d in node.deps] for node in nodes]
    order = range(len(nodes))
    if any(d >= i for i, ds in enumerate(deps) for d in ds):      # not in dependency order: Kahn's, lowest first
        pending = [len(ds) for ds in deps]
        children = [[] for _ in nodes]
        for i, ds in enumerate(deps):
            for d in ds:
                children[d].append(i)
        ready = [i for i, n in enumerate(pending) if n == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for c in children[i]:
                pending[c] -= 1
                if not pending[c]:
                    heapq.heappush(ready, c)
    finish = [0.0] * len(nodes)             # exact finish time, seconds
    written = [0] * len(nodes)              # its rounded value, microseconds
    out = [0] * len(nodes)
    gpu = -1                                # the last compute node in order
    for i in order:
        node = nodes[i]
        before = deps[i] + [gpu] if node.kind == COMPUTE and gpu >= 0 else deps[i]
        start, base = 0.0, 0
        for p in before:
            if finish[p] > start:
                start, base = finish[p], written[p]
        finish[i] = start + node.duration
        written[i] = max(base, round(finish[i] * 1e6))
        out[i] = written[i] - base
        if node.kind == COMPUTE:
            gpu = i
    return out


#: the largest values of the Chakra fields written (et_def.proto: duration_micros is a uint64;
#: AttributeProto's int64_val an int64, as num_ops, comm_size, comm_src / comm_dst and comm_tag go)
_UINT64, _INT64 = 2**64 - 1, 2**63 - 1


def _fields(node, micros) -> list:
    """(Chakra field, the node's own field, integer written) of each integer field of
    ``node``'s message but the ids."""
    out = [("duration_micros", "duration", micros)]
    if node.kind == COMPUTE and node.flops > 0 and (micros > 0 or node.duration <= 0):
        out.append(("num_ops", "flops", int(round(node.flops))))
    if node.kind in (COLLECTIVE, SEND, "recv"):
        out.append(("comm_size", "bytes", int(round(node.bytes))))
    if node.kind in (SEND, "recv"):
        out += [("comm_src" if node.kind == "recv" else "comm_dst", "peer", node.peer), ("comm_tag", "tag", node.tag)]
    return out


def _check_ranges(workload, micros_of) -> None:
    """A ValueError naming the rank, node and field of the first value a Chakra field cannot
    hold (protobuf's own says only "Value out of range: N"), before any file is written
    (``micros_of``: each rank's rounded durations, as written)."""
    for trace in workload.ranks:
        for node, micros in zip(trace.nodes, micros_of[trace.rank]):
            if node.kind == COLLECTIVE and node.op not in _CHAKRA_OF_OP:
                raise ValueError(f"write_chakra: rank {trace.rank}, node {node.id} ({node.name!r}): Chakra has no "
                                 f"collective type for op {node.op!r} (it has {', '.join(sorted(_CHAKRA_OF_OP))}; "
                                 "a point-to-point transfer is a pair of send and recv nodes)")
            for chakra, field, value in _fields(node, micros):
                lo, hi, kind = (0, _UINT64, "a uint64") if chakra == "duration_micros" else \
                    (-_INT64 - 1, _INT64, "an int64")
                if not lo <= value <= hi:
                    s, us = (" s", " us") if chakra == "duration_micros" else ("", "")
                    raise ValueError(f"write_chakra: rank {trace.rank}, node {node.id} ({node.name!r}): {field} "
                                     f"{getattr(node, field)!r}{s} does not fit Chakra's {chakra} ({kind}: "
                                     f"{value}{us} is not in {lo} ... {hi})")


def _node_message(Node, node, micros, rank, ids):
    msg = Node(id=ids[node.id], name=node.name, type=_TYPE_OF_KIND[node.kind], duration_micros=micros)
    msg.data_deps.extend(ids[d] for d in node.deps)
    msg.attr.add(name="is_cpu_op", bool_val=node.kind == DELAY)
    # (a node that ran but rounds to 0 us goes without its FLOPs: a reader times a node of 0 us
    # and FLOPs from the FLOPs, 4.3 us for a 0.4 us node of 1 GFLOP)
    if node.kind == COMPUTE and node.flops > 0 and (micros > 0 or node.duration <= 0):
        msg.attr.add(name="num_ops", int64_val=int(round(node.flops)))
    if node.kind == COLLECTIVE:
        msg.attr.add(name="comm_type", int64_val=_CHAKRA_OF_OP[node.op])
        msg.attr.add(name="comm_size", int64_val=int(round(node.bytes)))
        if node.group:
            msg.attr.add(name="pg_name", string_val=node.group)
    elif node.kind in (SEND, "recv"):
        src, dst = (rank, node.peer) if node.kind == SEND else (node.peer, rank)
        msg.attr.add(name="comm_src", int64_val=src)
        msg.attr.add(name="comm_dst", int64_val=dst)
        msg.attr.add(name="comm_size", int64_val=int(round(node.bytes)))
        msg.attr.add(name="comm_tag", int64_val=node.tag)
    return msg


def write_chakra(workload: Workload, folder, *, prefix: str = "trace", compress: bool = False) -> list:
    """Write ``workload`` as a Chakra ET trace in ``folder`` (created if needed):
    ``PREFIX.<rank>.et`` (``.et.gz`` when ``compress``) per rank, node ids renumbered 0 ...
    in node order, and ``comm_group.json`` (process group -> ranks, ASTRA-sim's
    ``--comm-group-configuration``). Durations go to ``duration_micros`` (integer
    microseconds, rounded so that every node's finish time on the rank's own schedule is within
    0.5 us of the exact one, however long the chain of work before it), FLOPs to ``num_ops`` (not
    for a node that ran but rounds to 0 us: a reader would time it from its FLOPs),
    bytes to ``comm_size``. Returns the files written. Needs ``protobuf``. A value a field
    cannot hold (``comm_size`` and ``num_ops`` are int64s: more than 2**63 - 1 bytes or FLOPs;
    ``duration_micros`` a uint64) is a ValueError naming its rank, node and field, and a
    missing dependency or a cycle a TraceError naming the node, raised before any file is written.

    ASTRA-sim reads it with ``--workload-configuration=FOLDER/PREFIX
    --comm-group-configuration=FOLDER/comm_group.json``.
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a flowsolver.traces.Workload, got {type(workload).__name__}")
    GlobalMetadata, Node, _ = messages()
    bad = [g for g in workload.groups if not g.isdigit() or g == "0"]
    if bad:
        raise ValueError(f"process group names must be integers >= 1 for ASTRA-sim (\"0\" is every rank), got {bad[:4]}")
    # build_workload checked each rank's DAG and kept its index; a Workload built by hand is checked here
    index_of = workload.index if getattr(workload, "index", None) else [check_dag(t) for t in workload.ranks]
    micros_of = {trace.rank: _micros(trace, index) for trace, index in zip(workload.ranks, index_of)}   # rounded once
    _check_ranges(workload, micros_of)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    with paused_gc():
        for trace in workload.ranks:
            ids = {node.id: k for k, node in enumerate(trace.nodes)}
            nodes = [_node_message(Node, node, us, trace.rank, ids)
                     for node, us in zip(trace.nodes, micros_of[trace.rank])]
            path = folder / f"{prefix}.{trace.rank}.et{'.gz' if compress else ''}"
            write_stream(path, GlobalMetadata(version=SCHEMA_VERSION), nodes, compress=compress)
            files.append(path)
    (folder / GROUP_FILE).write_text(json.dumps({k: list(v) for k, v in workload.groups.items()}))
    return files
