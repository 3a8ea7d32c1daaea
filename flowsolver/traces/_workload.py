"""A workload: per rank a DAG of compute and communication nodes, its process groups, and
the communication matched across ranks (one :class:`Comm` per collective call or
send/recv pair). Built from Chakra traces (``_chakra``), SimAI files (``_simai``) or our
writer; checked here whatever the source."""

from __future__ import annotations

import gc
import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass, field

from ._schema import TraceError

__all__ = ["TraceNode", "RankTrace", "Comm", "Workload", "build_workload", "pipeline_ranks", "paused_gc", "rank_tuple",
           "COMPUTE",
           "COLLECTIVE", "SEND", "RECV", "DELAY"]

COMPUTE, COLLECTIVE, SEND, RECV, DELAY = "compute", "collective", "send", "recv", "delay"
_KINDS = (COMPUTE, DELAY, COLLECTIVE, SEND, RECV)


@dataclass(slots=True)
class TraceNode:
    """One node of a rank's DAG.

    ``kind``: ``compute`` (GPU work, one at a time per rank: ``duration`` seconds, or
    ``flops`` at the replay's compute rate when no duration is recorded), ``delay`` (other
    timed work that occupies no GPU stream: CPU ops, memory, storage), ``collective``
    (``op``, ``bytes`` as nccl-tests counts them, process group ``group``), ``send`` /
    ``recv`` (``bytes`` to / from rank ``peer``, ``tag``). ``deps``: node ids this one waits
    for (data and control dependencies).
    """

    id: int
    name: str
    kind: str
    deps: tuple = ()
    duration: float = 0.0
    flops: float = 0.0
    op: str = ""
    bytes: float = 0.0
    group: str = ""
    peer: int = -1
    tag: int = 0


@dataclass
class RankTrace:
    """One rank's nodes (``source`` names the file they came from, for messages)."""

    rank: int
    nodes: list
    source: str = ""


@dataclass(frozen=True)
class Comm:
    """One communication matched across ranks: ``op`` on ``bytes`` among ``ranks`` (the
    process group's ranks in order; ``(src, dst)`` for send/recv); ``members`` is one
    ``(rank, node index)`` per taking part (for send/recv the send, then the recv)."""

    op: str
    bytes: float
    ranks: tuple
    members: tuple
    group: str = ""


@dataclass
class Workload:
    """Per-rank DAGs, the process groups (name -> ranks) and the matched communication.

    Build one with :func:`flowsolver.traces.read_chakra`, :func:`read_simai_workload` or
    :func:`workload_from_step`; replay it with :func:`flowsolver.traces.replay`.
    """

    ranks: list
    groups: dict
    comms: list = field(default_factory=list)
    comm_of: dict = field(default_factory=dict)      # (rank, node index) -> comm index
    index: list = field(default_factory=list)        # per rank: node id -> node index
    source: str = ""

    def __repr__(self) -> str:
        return (f"Workload({self.n_ranks} ranks, {self.n_nodes} nodes, {len(self.comms)} communications, "
                f"{len(self.groups)} process groups, source={self.source!r})")

    @property
    def n_ranks(self) -> int:
        """Number of ranks."""
        return len(self.ranks)

    @property
    def n_nodes(self) -> int:
        """Nodes over all ranks."""
        return sum(len(r.nodes) for r in self.ranks)


def rank_tuple(value, where: str) -> tuple:
    """``value`` (an iterable of ranks: a list, a range, a numpy array) as a tuple of
    Python ints; a :class:`TraceError` starting with ``where`` unless every rank is a
    non-negative integer (a bool, a float such as ``1.0``, a string are not ranks).

    >>> rank_tuple(range(3), "group 'a'")
    (0, 1, 2)
    """
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise TraceError(f"{where}: ranks must be a list of non-negative integers, got {value!r:.80}")
    out = []
    for r in value:
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 0:
            raise TraceError(f"{where}: ranks must be non-negative integers, got {r!r:.80}")
        out.append(int(r))
    return tuple(out)


def _where(trace: RankTrace, node: TraceNode) -> str:
    return f"{trace.source or f'rank {trace.rank}'}: node {node.id} ({node.name!r})"


def _in(trace: RankTrace) -> str:
    """`` (FILE)`` for a rank read from a file, else nothing."""
    return f" ({trace.source})" if trace.source else ""


def check_dag(trace: RankTrace) -> dict:
    """Node id -> index; raises on a duplicate id, a missing dependency or a cycle."""
    index = {}
    for i, node in enumerate(trace.nodes):
        if node.id in index:
            raise TraceError(f"{_where(trace, node)}: duplicate node id {node.id}")
        index[node.id] = i
        if node.kind not in _KINDS:
            raise TraceError(f"{_where(trace, node)}: kind must be one of {', '.join(_KINDS)}, got {node.kind!r}")
        for field in ("duration", "flops", "bytes"):        # a hand-built node: -1 s ran the clock backwards
            value = getattr(node, field)
            # float and int first: the ABC check is the slow one, and a bool is not type int
            if type(value) not in (float, int) and (isinstance(value, bool) or not isinstance(value, numbers.Real)) \
                    or not 0 <= value < math.inf:
                raise TraceError(f"{_where(trace, node)}: {field} must be a finite number >= 0, got {value!r}")
    indegree = [0] * len(trace.nodes)
    children = [[] for _ in trace.nodes]
    for i, node in enumerate(trace.nodes):
        for d in node.deps:
            j = index.get(d)
            if j is None:
                raise TraceError(f"{_where(trace, node)}: depends on node {d}, which is not in the trace")
            if j == i:
                raise TraceError(f"{_where(trace, node)}: depends on itself (a dependency cycle)")
            indegree[i] += 1
            children[j].append(i)
    stack = [i for i, n in enumerate(indegree) if n == 0]
    seen = 0
    while stack:
        i = stack.pop()
        seen += 1
        for c in children[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                stack.append(c)
    if seen < len(trace.nodes):
        node = trace.nodes[next(i for i, n in enumerate(indegree) if n)]
        raise TraceError(f"{_where(trace, node)}: is on a dependency cycle")
    return index


def _group_ranks(workload_groups, trace, node, n_ranks):
    if node.group in ("", "0") and node.group not in workload_groups:
        return tuple(range(n_ranks))             # ASTRA-sim's convention: no / "0" group = every rank
    ranks = workload_groups.get(node.group)
    if ranks is None:
        raise TraceError(f"{_where(trace, node)}: process group {node.group!r} is defined nowhere "
                         f"(known: {sorted(workload_groups)[:8]})")
    if trace.rank not in ranks:
        raise TraceError(f"{_where(trace, node)}: rank {trace.rank} is not in its process group {node.group!r} "
                         f"(ranks {list(ranks)[:16]})")
    return ranks


def _match_collectives(w: Workload) -> None:
    calls = {}                                   # (group, ranks) -> {rank: [node index, ...]}
    for trace in w.ranks:
        order = sorted(range(len(trace.nodes)), key=lambda i: trace.nodes[i].id)   # issue order: node ids
        for i in order:
            node = trace.nodes[i]
            if node.kind == COLLECTIVE:
                ranks = _group_ranks(w.groups, trace, node, w.n_ranks)
                calls.setdefault((node.group, ranks), {}).setdefault(trace.rank, []).append(i)
    for (group, ranks), per_rank in calls.items():
        counts = {r: len(per_rank.get(r, ())) for r in ranks}
        if len(set(counts.values())) > 1:
            lo, hi = min(counts, key=counts.get), max(counts, key=counts.get)
            extra = w.ranks[hi].nodes[per_rank[hi][counts[lo]]]
            raise TraceError(f"process group {group!r}: rank {lo} issues {counts[lo]} collectives, rank {hi} "
                             f"{counts[hi]}; the first unmatched is rank {hi}'s node {extra.id} ({extra.name!r})"
                             f"{_in(w.ranks[hi])}")
        for k in range(counts[ranks[0]]):
            nodes = [(r, per_rank[r][k]) for r in ranks]
            first = w.ranks[ranks[0]].nodes[nodes[0][1]]
            for r, i in nodes[1:]:
                other = w.ranks[r].nodes[i]
                if (other.op, other.bytes) != (first.op, first.bytes):
                    raise TraceError(f"process group {group!r}, collective {k}: rank {ranks[0]} node {first.id}"
                                     f"{_in(w.ranks[ranks[0]])} is {first.op} of {first.bytes:g} B but rank {r} node "
                                     f"{other.id}{_in(w.ranks[r])} is {other.op} of {other.bytes:g} B")
            _add(w, Comm(op=first.op, bytes=first.bytes, ranks=tuple(ranks), members=tuple(nodes), group=group))


def _match_p2p(w: Workload) -> None:
    sends, recvs = {}, {}
    for trace in w.ranks:
        for i in sorted(range(len(trace.nodes)), key=lambda i: trace.nodes[i].id):
            node = trace.nodes[i]
            if node.kind in (SEND, RECV):
                if not 0 <= node.peer < w.n_ranks or node.peer == trace.rank:
                    raise TraceError(f"{_where(trace, node)}: peer rank {node.peer} is not another rank of the "
                                     f"trace (0 ... {w.n_ranks - 1})")
                key = (trace.rank, node.peer, node.tag) if node.kind == SEND else (node.peer, trace.rank, node.tag)
                (sends if node.kind == SEND else recvs).setdefault(key, []).append(i)
    for key in sends.keys() | recvs.keys():
        src, dst, tag = key
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            side, rank, nodes = ("send", src, s) if len(s) > len(r) else ("recv", dst, r)
            node = w.ranks[rank].nodes[nodes[min(len(s), len(r))]]
            raise TraceError(f"rank {src} -> rank {dst} (tag {tag}): {len(s)} sends but {len(r)} recvs; rank "
                             f"{rank}'s {side} node {node.id} ({node.name!r}){_in(w.ranks[rank])} has no partner")
        for i, j in zip(s, r):
            a, b = w.ranks[src].nodes[i], w.ranks[dst].nodes[j]
            if a.bytes != b.bytes:
                raise TraceError(f"rank {src} node {a.id}{_in(w.ranks[src])} sends {a.bytes:g} B to rank {dst} but "
                                 f"its recv node {b.id}{_in(w.ranks[dst])} expects {b.bytes:g} B")
            _add(w, Comm(op="send_recv", bytes=a.bytes, ranks=(src, dst), members=((src, i), (dst, j))))


def _add(w: Workload, comm: Comm) -> None:
    for member in comm.members:
        w.comm_of[member] = len(w.comms)
    w.comms.append(comm)


def build_workload(ranks, groups=None, source: str = "") -> Workload:
    """A :class:`Workload` from per-rank :class:`RankTrace` values (rank ``i`` at position
    ``i``) and process groups (name -> ranks): every DAG checked (duplicate ids, missing
    dependencies, cycles), collectives matched across ranks by process group and order
    (node-id order within a rank: the order PyTorch issued them), sends matched to recvs
    by (source, destination, tag) and order. Any inconsistency is a :class:`TraceError` naming the file (or rank) and node.

    >>> a = RankTrace(0, [TraceNode(1, "mm", COMPUTE, duration=1e-3),
    ...                   TraceNode(2, "ar", COLLECTIVE, deps=(1,), op="all_reduce", bytes=1e6)])
    >>> b = RankTrace(1, [TraceNode(7, "ar", COLLECTIVE, op="all_reduce", bytes=1e6)])
    >>> w = build_workload([a, b])
    >>> w.comms[0].ranks, w.comms[0].members
    ((0, 1), ((0, 1), (1, 0)))
    """
    ranks = list(ranks)
    if not ranks:
        raise TraceError("a workload needs at least one rank")
    for k, trace in enumerate(ranks):
        if trace.rank != k:
            raise TraceError(f"{trace.source or 'a trace'}: rank {trace.rank} at position {k}: ranks must be 0 ... "
                             f"{len(ranks) - 1}, one each")
    groups = {str(k): rank_tuple(v, f"process group {str(k)!r}") for k, v in (groups or {}).items()}
    for name, members in groups.items():
        if not members or len(set(members)) != len(members) or not all(0 <= r < len(ranks) for r in members):
            raise TraceError(f"process group {name!r}: ranks {list(members)[:16]} must be distinct ranks in "
                             f"0 ... {len(ranks) - 1}")
    w = Workload(ranks=ranks, groups=groups, source=source)
    w.index = [check_dag(trace) for trace in ranks]
    _match_collectives(w)
    _match_p2p(w)
    return w


@contextmanager
def paused_gc():
    """Python's cyclic garbage collector paused inside (as it was after): reading, building
    or replaying a trace makes millions of long-lived objects and no cycles, and each of the
    collector's full passes walks them all (half of the read and replay time of a 128-rank
    trace)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def pipeline_ranks(layout):
    """``(rank, stage, (previous stage's rank, next stage's rank))`` of every GPU of a
    :class:`~flowsolver.training.ParallelLayout`, stage by stage (None at the ends): how a
    per-rank trace writer walks a pipeline."""
    for q in range(layout.pp):
        for d in range(layout.dp):
            for t in range(layout.tp):
                yield layout.rank(t, d, q), q, (layout.rank(t, d, q - 1) if q else None,
                                                layout.rank(t, d, q + 1) if q < layout.pp - 1 else None)
