"""A :func:`flowsolver.training_step` as a workload: per GPU the DAG of one iteration.

Per pipeline stage, microbatches in 1F1B order (``pp - 1 - stage`` warm-up forwards, then a
forward and a backward in turn, then the cool-down backwards; with ``pp = 1`` forward and
backward alternate). A microbatch's forward is, per layer of the stage, two compute nodes
(attention, MLP: half the layer's forward each) each followed by the TP all-reduce (with
sequence parallelism a reduce-scatter and an all-gather) and, with
experts, preceded by the EP dispatch and followed by the combine all-to-all; the backward
the same at twice the forward's compute (the step's ``compute_time`` split 1 : 2). Stage
boundaries are send/recv pairs, the receives posted up front. The DP reduction (all-reduce,
or reduce-scatter then all-gather; dense gradients, then the experts') starts when
``1 - dp_overlap`` of the last backward's layers are done, beside the rest of it; with
ZeRO 3 every microbatch gathers the parameters twice and reduce-scatters its gradients,
starting when ``1 - dp_overlap`` of the microbatch's compute is done, and the next
microbatch's work waits for them.
"""

from __future__ import annotations

from ..training import StepResult
from ._workload import COLLECTIVE, COMPUTE, RECV, SEND, RankTrace, TraceNode, build_workload, pipeline_ranks

__all__ = ["workload_from_step"]


class _Rank:
    """Builds one rank's node list: a chain of work, plus nodes beside it."""

    def __init__(self, rank):
        self.rank, self.nodes, self.tail = rank, [], None

    def add(self, name, kind, *, chain=True, deps=(), **kw):
        node_id = len(self.nodes)
        deps = tuple(deps) + ((self.tail,) if chain and self.tail is not None else ())
        self.nodes.append(TraceNode(node_id, name, kind, deps=deps, **kw))
        if chain:
            self.tail = node_id
        return node_id


def _one_f_one_b(stage, pp, m):
    """The (direction, microbatch) order of 1F1B on ``stage``."""
    warm = min(pp - 1 - stage, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    return order + [("B", i) for i in range(m - warm, m)]


class _Builder:
    def __init__(self, step: StepResult):
        prof = step.profile
        self.lay, self.comms = prof.layout, prof.comms
        self.m, self.layers = step.microbatches, prof.model.layers // self.lay.pp
        t_mb = step.compute_time / step.microbatches
        peak = prof.gpu.peak_fp8_flops if step.precision == "fp8" else prof.gpu.peak_bf16_flops
        self.rate = peak * step.compute_efficiency                    # FLOP/s while computing (annotation)
        # per half-layer (attention, MLP), as the step counts them: forward, the output
        # reduce-scattered and the next input all-gathered; backward, the output gradient
        # and the input (for the weight gradient) all-gathered, the input gradient
        # reduce-scattered (Transformer Engine's overlapped ops); without sequence
        # parallelism one all-reduce each way
        self.tp_ops = ({"F": ("reduce_scatter", "all_gather"), "B": ("all_gather", "all_gather", "reduce_scatter")}
                       if prof.sequence_parallel else {"F": ("all_reduce",), "B": ("all_reduce",)})
        self.t_layer = {"F": t_mb / 3 / self.layers, "B": 2 * t_mb / 3 / self.layers}
        self.dp_overlap, self.zero = step.dp_overlap, prof.zero
        self.group_name, self.groups = {}, {}
        for kind in ("tp", "ep", "dp", "dp_experts"):
            if kind in self.comms:
                for g in self.lay.groups(kind):
                    name = str(len(self.groups) + 1)          # ASTRA-sim: integer names, "0" is every rank
                    self.groups[name] = tuple(g)
                    for r in g:
                        self.group_name[(kind, r)] = name

    def coll(self, rank: _Rank, kind, op, size, name, **kw):
        return rank.add(name, COLLECTIVE, op=op, bytes=size, group=self.group_name[(kind, rank.rank)], **kw)

    def layer(self, rank: _Rank, d, mb, layer):
        half = self.t_layer[d] / 2
        for part in ("attn", "mlp"):
            tag = f"{d}{mb}.L{layer}.{part}"
            if part == "mlp" and "ep" in self.comms:
                self.coll(rank, "ep", "all_to_all", self.comms["ep"].bytes, f"{tag}.dispatch")
            rank.add(tag, COMPUTE, duration=half, flops=half * self.rate)
            if part == "mlp" and "ep" in self.comms:
                self.coll(rank, "ep", "all_to_all", self.comms["ep"].bytes, f"{tag}.combine")
            if "tp" in self.comms:
                for j, op in enumerate(self.tp_ops[d]):
                    self.coll(rank, "tp", op, self.comms["tp"].bytes, f"{tag}.tp{j}.{op}")

    def dp(self, rank: _Rank, after, tag=""):
        """The DP chain (dense gradients, then the experts') after node ``after``; its last node.
        ZeRO 0: all-reduce; 1 / 2: reduce-scatter, all-gather; 3 (per microbatch): the
        parameters all-gathered for the forward and the backward, the gradients reduce-scattered."""
        prev = after
        ops = {0: ["all_reduce"], 3: ["all_gather", "all_gather", "reduce_scatter"]}.get(self.zero,
                                                                                    ["reduce_scatter", "all_gather"])
        for kind in ("dp", "dp_experts"):
            if kind not in self.comms:
                continue
            for op in ops:
                prev = self.coll(rank, kind, op, self.comms[kind].bytes, f"{tag}{kind}.{op}", chain=False,
                                 deps=() if prev is None else (prev,))
        return prev

    def cut(self):
        """Where a microbatch's DP traffic starts: before layer pass ``k`` of direction ``d``
        (``("B", layers)``: after the backward), so that ``dp_overlap`` of the compute it may
        hide behind (ZeRO 3: the microbatch's; else the last backward's) is still to come."""
        late = 1.0 - self.dp_overlap
        if self.zero != 3:
            return "B", round(late * self.layers)
        units = late * 3 * self.layers                    # a backward layer pass costs 2 forward ones
        return ("F", round(units)) if units < self.layers else ("B", round((units - self.layers) / 2))

    def rank(self, g, stage, neighbours):
        lay, rank = self.lay, _Rank(g)
        prev_stage, next_stage = neighbours
        pp_bytes = self.comms["pp"].bytes if "pp" in self.comms else 0.0
        order = _one_f_one_b(stage, lay.pp, self.m)
        recv = {}
        for d, i in order:
            peer = prev_stage if d == "F" else next_stage
            if peer is not None:
                recv[(d, i)] = rank.add(f"{d}{i}.recv", RECV, chain=False, bytes=pp_bytes, peer=peer,
                                        tag=2 * i + (d == "B"))
        has_dp = "dp" in self.comms or "dp_experts" in self.comms
        cut_d, cut_k = self.cut()
        dp_end = {}
        for d, i in order:
            if (d, i) in recv:
                rank.tail = rank.add(f"{d}{i}.wait", COMPUTE, deps=(recv[(d, i)],))
            mine = has_dp and (self.zero == 3 or i == self.m - 1)
            for k in range(self.layers + 1):
                if mine and d == cut_d and k == cut_k:
                    dp_end[i] = self.dp(rank, rank.tail, f"mb{i}." if self.zero == 3 else "")
                if k < self.layers:
                    self.layer(rank, d, i, k if d == "F" else self.layers - 1 - k)
            peer = next_stage if d == "F" else prev_stage
            if peer is not None:
                rank.add(f"{d}{i}.send", SEND, chain=False, deps=(rank.tail,), bytes=pp_bytes, peer=peer,
                         tag=2 * i + (d == "B"))
            if d == "B" and self.zero == 3 and i in dp_end:  # the next microbatch's work waits for this one's
                rank.tail = rank.add(f"B{i}.dp_done", COMPUTE, deps=(dp_end[i],))
        return RankTrace(rank=g, nodes=rank.nodes)


def workload_from_step(step: StepResult):
    """The DAG of one iteration of ``step`` on every GPU (trace rank = GPU rank), as a
    :class:`~flowsolver.traces.Workload`: replay it with :func:`replay`, write it with
    :func:`write_chakra` (for ASTRA-sim). Process groups are named ``"1"``, ``"2"``, ... (TP,
    EP, DP, expert-DP groups in that order).

    TP calls are all-reduces, or with sequence parallelism (the default) a reduce-scatter
    and an all-gather. Replayed on the cluster it was solved on, a step with one pipeline
    stage and ``tp_overlap=0`` takes the step's ``step_time`` when its DP traffic is exposed
    (``dp_overlap=0``): the same compute, every TP / EP call exposed. The DAG has every TP
    call on the critical path (the step hides ``tp_overlap`` of them) and hides the DP
    reduction and the parameter all-gather together behind the last backward up to
    ``dp_overlap`` (to a layer), where the step gives the all-gather the next forward and
    exposes one bucket of each. With ``pp > 1`` the
    replay times the 1F1B schedule itself: ``(m + pp - 1)`` microbatches of compute and
    TP calls plus a forward and a backward transfer per stage boundary on the critical
    path, where the closed form counts the TP calls of ``m`` and every transfer.

    >>> import topologies as tp
    >>> from flowsolver import training_step
    >>> step = training_step(tp.rail_optimized(2), model="llama-3-8b", tp=8, global_batch=4, dp_overlap=0,
    ...                      sequence_parallel=False)
    >>> w = workload_from_step(step)
    >>> w.n_ranks, len(w.ranks[0].nodes), sorted({c.op for c in w.comms})   # 2 microbatches x 2 x 32 layers x 4 + 2
    (16, 514, ['all_gather', 'all_reduce', 'reduce_scatter'])
    """
    if not isinstance(step, StepResult):
        raise TypeError(f"step must be a flowsolver.StepResult (from training_step), got {type(step).__name__}")
    lay = step.profile.layout
    if lay.vp > 1 or lay.cp > 1 or len(set(step.stage_layers)) > 1:
        raise ValueError(f"workload_from_step builds 1F1B over even stages without context parallelism; got "
                         f"vp={lay.vp}, cp={lay.cp}, layers per stage {sorted(set(step.stage_layers))}")
    b = _Builder(step)
    lay = b.lay
    traces = [None] * lay.gpus
    for g, q, neighbours in pipeline_ranks(lay):
        traces[g] = b.rank(g, q, neighbours)
    return build_workload(traces, b.groups, source=f"training_step {step.model} on {lay.gpus} GPUs")
