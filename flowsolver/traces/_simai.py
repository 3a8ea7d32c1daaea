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

Every rank runs the file's layers (Megatron placement: TP innermost, then DP, then PP
stages): per microbatch (``ga`` of them) the forward (each layer's compute, then its
collective, which the next layer waits for), then the backward in reverse (input-gradient
compute and collective, weight-gradient compute; the weight-gradient collective of the
last microbatch runs beside the rest of the backward, the iteration ends when all are
done). With ``pp > 1`` the stages pass ``pp_comm`` bytes forward and back (send/recv).
"""

from __future__ import annotations

from pathlib import Path

from ..training import ParallelLayout
from ._schema import TraceError
from ._workload import COLLECTIVE, COMPUTE, RECV, SEND, RankTrace, TraceNode, build_workload, pipeline_ranks

__all__ = ["read_simai_workload"]

_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "REDUCESCATTER": "reduce_scatter",
        "ALLTOALL": "all_to_all"}
_HEADER = {"model_parallel_NPU_group:": "tp", "ep:": "ep", "pp:": "pp", "vpp:": "vpp", "ga:": "ga",
           "all_gpus:": "gpus", "pp_comm": "pp_comm", "pp_comm:": "pp_comm"}
_TICKS_PER_S = 1e9    # SimAI: a tick is a nanosecond (its reports divide ticks by FREQ = 1e9)


def _header(line: str, path) -> dict:
    tokens = line.split()
    out = dict(tp=1, ep=1, pp=1, vpp=1, ga=1, gpus=None, pp_comm=0)
    for key, value in zip(tokens[1:], tokens[2:]):
        if key in _HEADER:
            try:
                out[_HEADER[key]] = int(value)
            except ValueError:
                raise TraceError(f"{path}: line 1: {key} must be followed by an integer, got {value!r}") from None
    if not tokens or out["gpus"] is None:
        raise TraceError(f"{path}: line 1 must name the policy and give all_gpus: N (SimAI's header), got {line!r}")
    tp, pp, gpus = out["tp"], out["pp"], out["gpus"]
    if min(tp, pp, out["ep"], out["ga"], gpus) < 1 or gpus % (tp * pp):
        raise TraceError(f"{path}: line 1: tp ({tp}) x pp ({pp}) must divide all_gpus ({gpus}), all >= 1")
    out["dp"] = gpus // (tp * pp)
    if out["dp"] % out["ep"]:
        raise TraceError(f"{path}: line 1: ep ({out['ep']}) must divide dp = all_gpus / (tp pp) = {out['dp']}")
    return out


def _comm(kind: str, size: str, where: str, weight: bool):
    """(op, group kind, bytes) of a comm column, or None for NONE / 0 bytes."""
    try:
        nbytes = float(size)
    except ValueError:
        raise TraceError(f"{where}: comm size must be a number of bytes, got {size!r}") from None
    if kind == "NONE" or nbytes == 0:
        return None
    base, _, scope = kind.partition("_")
    if base not in _OPS or scope not in ("", "DP", "EP", "DP_EP"):
        raise TraceError(f"{where}: comm type {kind!r} is not one of {', '.join(_OPS)} (with _DP, _EP or _DP_EP) "
                         "or NONE")
    group = {"": "dp" if weight else "tp", "DP": "dp", "EP": "ep", "DP_EP": "dp_experts"}[scope]
    return _OPS[base], group, nbytes


def _rows(lines, path):
    try:
        count = int(lines[1].split()[0])
    except (IndexError, ValueError):
        raise TraceError(f"{path}: line 2 must be the number of layers") from None
    rows = []
    for k in range(count):
        where = f"{path}: line {k + 3}"
        if k + 2 >= len(lines):
            raise TraceError(f"{where}: missing (the header announces {count} layers, the file has {len(lines) - 2})")
        f = lines[k + 2].split()
        if len(f) < 12:
            raise TraceError(f"{where}: a layer row has 12 columns (name, reserved, then compute, comm type, comm "
                             f"size for fwd, ig and wg, then wg update), got {len(f)}")
        try:
            times = [float(f[i]) / _TICKS_PER_S for i in (2, 5, 8)]
        except ValueError:
            raise TraceError(f"{where}: compute times (columns 3, 6, 9) must be numbers of ns") from None
        rows.append(dict(name=f[0], fwd=times[0], ig=times[1], wg=times[2],
                         fwd_comm=_comm(f[3], f[4], where, False), ig_comm=_comm(f[6], f[7], where, False),
                         wg_comm=_comm(f[9], f[10], where, True)))
    return rows


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


def read_simai_workload(path):
    """Read a SimAI workload file (AICB's output, ``SimAI -w FILE``) into a replayable
    :class:`~flowsolver.traces.Workload` of ``all_gpus`` ranks (see the module notes for the
    columns, units and the schedule built from them).

    >>> import tempfile, os
    >>> text = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 ga: 1 all_gpus: 8\\n1\\n"
    ...         "embedding_layer -1 556000 ALLREDUCE 536870912 1 NONE 0 1 NONE 0 1\\n")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "w.txt"); _ = open(p, "w").write(text)
    ...     w = read_simai_workload(p)
    >>> w.n_ranks, [(c.op, c.bytes, len(c.ranks)) for c in w.comms], w.ranks[0].nodes[0].duration
    (8, [('all_reduce', 536870912.0, 8)], 0.000556)
    """
    path = Path(path)
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if len(lines) < 2:
        raise TraceError(f"{path}: a SimAI workload has a header line, a layer count and layer rows")
    h = _header(lines[0], path)
    rows = _rows(lines, path)
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
