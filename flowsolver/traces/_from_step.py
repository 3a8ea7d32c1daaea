"""A :func:`flowsolver.training_step` as a workload: per GPU the DAG of one iteration,
built to the rules of :func:`flowsolver.training.compose`.

Each pipeline rank runs its passes in Megatron's order (:mod:`._schedule`: 1F1B with
blocking batched transfers, or interleaved 1F1B with ``vp`` model chunks and overlapped
transfers, the wrap from the last stage to the first included). A pass runs its chunk's
layers (the per-stage counts of ``training_step``: Megatron's lighter end stages when the
layers do not split evenly; the output projection closes the last chunk's forward and opens
its backward), the forward and the backward each its share of the layer's compute (every
duration is read from :func:`flowsolver.training._compose.layer_compute`, the times ``compose``
uses: the flat model's GEMMs at ``compute_efficiency`` and attention at
``attention_efficiency``, a third forward; or, with ``compute_efficiency=None``, the kernel
tables' forward and backward; a recomputed layer's extra forward in its backward). Per layer
and direction:

* CP (ring attention, step by step as ``compose``'s ``cp_ring_exposed``): ``cp - 1`` steps,
  each the rank's KV chunk sent to the next rank of its CP ring and the previous rank's
  received (backward: the KV gradients too), beside ``1 / cp`` of the layer's attention in
  that direction, then the last chunk's block; a recomputed layer's backward runs the
  forward ring again, and so does every layer's under selective recompute (the checkpointed
  core attention's forward, ring included, runs again).
* The attention and MLP blocks, each its share of the rest of the compute (by GEMM time),
  with the TP collectives of ``training._exposed.tp_layer_ops`` (Transformer Engine's ten
  per layer with sequence parallelism: forward all-gather / QKV, reduce-scatter / proj,
  all-gather / FC1, reduce-scatter / FC2; backward the FC2 and proj output-gradient
  all-gathers, and for FC1 and QKV the input all-gathered again and the input gradient
  reduce-scattered; four all-reduces without). Each collective of ``t`` seconds runs beside
  ``h = tp_overlap x min(t, g)`` of compute, ``g`` its GEMM's time, joined: ``t - h``
  exposed, as ``compose``. A layer full recompute recomputes (all, or the first
  ``recompute_layers`` of each model chunk) starts its backward with its forward blocks
  again, their TP collectives included. Should the hidden shares of a direction exceed its
  compute they are scaled down to it (``compose`` does not cap there; with its per-GEMM
  cap that needs the backward of a recomputed layer and ``tp_overlap`` above 8/9).
* EP: the dispatch all-to-all before the MLP block, the combine after it, exposed.
* ETP (a mixture of experts with expert TP ``etp = tp > 1``; none at ``Parallelism(etp=1)``,
  whose MLP block runs no TP collective and whose EP groups span the TP ranks, as the
  profile's): the MLP block's TP collectives are the token
  dispatcher's, not Transformer Engine's (the attention block keeps its own): the routed
  tokens' all-gather after the dispatch all-to-all and the reduce-scatter of the experts'
  output before the combine, ``top_k x capacity_factor`` the TP bytes, in the TP group,
  exposed (backward: the same two, the gradients' way), as ``compose``'s ``etp`` phase.

DP (ZeRO 0 / 1 / 2), in ``compose``'s windows and buckets (``chunks``: one per layer of a
stage without interleaving, pipelined or not; one per model chunk with it): the gradients of
every bucket but the last are reduced in one call from the moment the first bucket is final
(``1 - dp_overlap`` into the last backward without interleaving, to a layer; the last
backward of the last model chunk with it), the last bucket's after the backward and that
call, so that ``max(R / chunks, R - W)`` is exposed as ``compose`` exposes it. With the
distributed optimizer the first bucket's parameters are all-gathered at the start, before
the first forward, the other buckets' in one call after it, waited for by the end of the
first forward (before the first forward of model chunk 1 with interleaving; at once with
``dp_overlap = 0``). One call per bucket would pay each bucket's latency, which ``compose``
does not count. These windows run beside the passes' exposed communication too, which
``compose``'s windows (compute only) do not count: where DP's traffic outlasts the compute
the replay hides more of it.

ZeRO 3 (FSDP, ``vp = 1``), per layer as ``compose``'s ``fsdp_exposed``: forward, the root
unit's and the first layer's parameters gathered before the first layer, each next layer's
beside the current one, the next layer waiting for it; backward, beside each layer the next
layer's gather and the previous layer's gradient reduce-scatter, the next layer waiting for
both; the last reduce-scatters after the last compute, waited for by the next pass. Every
microbatch without pipelining; with it, the first forward's gathers and the last backward's
reduce-scatters (on their own stream, holding no compute and no transfer). A CPU-side
delay node before each window's calls leaves them ``dp_overlap`` of the layer's run (its
compute and its share of the layer's exposed TP / CP / EP waits), as ``compose`` does. The
experts' shards (ZeRO 3 with EP) are gathered twice and reduced per microbatch from the point
where ``dp_overlap`` of its compute is still to come (a delay node places it inside a layer),
the next microbatch waiting for them.

FLOPs (``TraceNode.flops``, Chakra's ``num_ops``), one meaning whatever the compute model:
the floating-point operations the GPU executes, from the model's arithmetic
(:func:`~._flops.executed_flops`), not from seconds at a rate. A layer's forward: its weight GEMMs,
``2 x`` the active parameters per token (a mixture of experts' expert GEMMs on
``capacity_factor x`` their routed tokens, as they run), and causal attention, ``2 h s`` per
token; the backward twice the forward; the recompute executed on top (selective: the
attention forward again in every layer; full: the whole forward again in each recomputed
layer); the output projection ``2 V h`` per token forward, twice that backward; all of it
split over the ``tp x cp`` GPUs of a stage. Without recompute a GPU's nodes add up to its share
of the model FLOPs the step's MFU counts (:attr:`~flowsolver.StepResult.flops_per_token`, the
dropped tokens' expert GEMMs aside); full recompute of every layer adds a third of the layers'
part. Ring attention's blocks each carry their own attention FLOPs; the other compute nodes of
a layer pass (its blocks, split by time) share the rest of the pass's FLOPs by their
durations, the output projection its own.
"""

from __future__ import annotations

from ..training import StepResult, chunk_layers, layer_compute, tp_layer_ops
from ._dp_traffic import DataParallelTraffic
from ._flops import executed_flops
from ._from_step_layers import _LayerNodes, _Rank
from ._schedule import blocking_program, p2p_tag, pass_order, source, target
from ._workload import COLLECTIVE, COMPUTE, RECV, SEND, RankTrace, build_workload, paused_gc

__all__ = ["workload_from_step"]


class _Builder(_LayerNodes):
    def __init__(self, step: StepResult):
        prof, s = step.profile, step.schedule
        if s.recompute not in ("none", "selective", "full"):
            raise ValueError(f"recompute={s.recompute!r}: a trace lays out recompute none, selective or full (a "
                             f"partial mode's own saved set is not drawn as nodes); time this step with training_step")
        self.profile = prof
        self.lay, self.comms, self.m, model = prof.layout, prof.comms, step.microbatches, prof.model
        compute = layer_compute(prof, s)                 # compose's own per-part compute times
        self.t_plain, self.t_recomputed = compute["layer"], compute["layer_recomputed"]
        self.t_forward = compute["forward"]
        self.t_output, self.t_output_fwd = compute["output"], compute["output_fwd"]
        self.attention, self.gemms = {"F": compute["attention_fwd"], "B": compute["attention_bwd"]}, compute["gemms"]
        self.recompute_layers = (None if s.recompute != "full" else model.layers if s.recompute_layers is None
                                 else s.recompute_layers)
        self.selective = s.recompute == "selective"
        self.flops = executed_flops(prof)
        self.rate = 0.0                  # FLOPs per second of the compute being laid out (:meth:`compute`)
        self.chunks = chunk_layers(model.layers, self.lay.pp, self.lay.vp)
        self.tp_overlap = s.tp_overlap
        tp = self.comms.get("tp")
        self.tp_ops = tp_layer_ops(prof.sequence_parallel, moe=model.experts > 1)
        self.tp_seconds = {} if tp is None else dict(all_gather=tp.gather, reduce_scatter=tp.per_call,
                                                     all_reduce=tp.per_call)
        self.cp_ring = {}                                  # rank: (previous, next) on its CP ring
        if "cp" in self.comms:
            for g in self.lay.groups("cp"):
                for i, r in enumerate(g):
                    self.cp_ring[r] = (g[i - 1], g[(i + 1) % len(g)])
        self.group_name, self.groups = {}, {}
        for kind in ("tp", "cp", "ep", "dp", "dp_experts"):
            if kind in self.comms:
                for g in self.lay.groups(kind):
                    name = str(len(self.groups) + 1)          # ASTRA-sim: integer names, "0" is every rank
                    self.groups[name] = tuple(g)
                    for r in g:
                        self.group_name[(kind, r)] = name
        self.dp = DataParallelTraffic(self, s, compute)

    def coll(self, rank: _Rank, kind, op, size, name, **kw):
        return rank.add(name, COLLECTIVE, op=op, bytes=size, group=self.group_name[(kind, rank.rank)], **kw)

    def compute(self, rank: _Rank, name, seconds):
        """A compute node of ``seconds``, its FLOPs its time's share of the executed FLOPs of
        the part being laid out (``self.rate``: that part's FLOPs over its seconds)."""
        if seconds > 0:
            rank.add(name, COMPUTE, duration=seconds, flops=seconds * self.rate)

    def use(self, flops, seconds):
        """Annotate the compute laid out next (``seconds`` of it in all) with ``flops``."""
        self.rate = flops / seconds if seconds > 0 else 0.0

    def pass_flops(self, d, again):
        """Executed FLOPs of one layer pass in direction ``d`` on one GPU: the forward's GEMMs
        and attention; the backward twice that, plus the attention forward again under selective
        recompute, plus the whole forward again in a layer full recompute recomputes (``again``)."""
        forward = self.flops["gemms"] + self.flops["attention"]
        if d == "F":
            return forward
        return 2.0 * forward + (self.flops["attention"] if self.selective else 0.0) + (forward if again else 0.0)

    def beside(self, rank: _Rank, calls, seconds, name):
        """The collectives ``calls`` (``(kind, op, bytes, name)``, one after the other) beside
        ``seconds`` of compute, both from the current point; the next chained node waits for
        both. (The calls wait for the chain's tail and what it joins directly, the compute as
        a chained node: no empty join node between two of these.)"""
        deps = ((rank.tail,) if rank.tail is not None else ()) + tuple(rank.join)
        for kind, op, size, call in calls:
            prev = self.coll(rank, kind, op, size, call, chain=False, deps=deps)
            deps = (prev,)
        self.compute(rank, name, seconds)
        rank.join.append(prev)

    def recomputed(self, layer_in_chunk) -> bool:
        """Whether full recompute recomputes the chunk's ``layer_in_chunk``-th layer (its
        first ``recompute_layers``: Megatron's block method)."""
        return self.recompute_layers is not None and layer_in_chunk < self.recompute_layers

    def pass_seconds(self, d, again):
        """One layer's compute in direction ``d``: the forward ``compose``'s forward share of a
        plain layer; the backward the rest, with a recomputed layer's forward again (``again``)
        in it."""
        if d == "F":
            return self.t_forward
        return (self.t_recomputed if again else self.t_plain) - self.t_forward


    def first_layer(self, stage, chunk) -> int:
        """The model's index of the first layer of ``chunk`` on ``stage`` (virtual stages in
        model order: chunk 0 of every stage, then chunk 1, ...)."""
        before = sum(self.chunks[q][c] for c in range(chunk) for q in range(self.lay.pp))
        return before + sum(self.chunks[q][chunk] for q in range(stage))

    def segments(self, stage, chunk) -> int:
        """Compute segments of a pass of ``chunk`` on ``stage``: its layers, and the output
        projection on the model's last chunk."""
        return self.chunks[stage][chunk] + (stage == self.lay.pp - 1 and chunk == self.lay.vp - 1)

    def run_pass(self, rank: _Rank, stage, d, mb, chunk, hooks):
        """The layers of model chunk ``chunk`` of ``stage`` in direction ``d`` for microbatch
        ``mb`` (the output projection last forward, first backward); ``hooks(k)`` runs before
        segment ``k`` and ``hooks(segments)`` after the last."""
        n, first = self.chunks[stage][chunk], self.first_layer(stage, chunk)
        order = [("L", first + k) for k in range(n)]
        if self.segments(stage, chunk) > n:
            order.append(("output", None))
        for k, (what, layer) in enumerate(order if d == "F" else order[::-1]):
            hooks(k)
            if what == "output":
                forward = self.t_output_fwd
                seconds = forward if d == "F" else self.t_output - forward
                self.use(self.flops["output"] * (1 if d == "F" else 2), seconds)
                self.compute(rank, f"{d}{mb}.output", seconds)
            else:
                self.layer(rank, d, f"{d}{mb}.c{chunk}.L{layer}", self.recomputed(layer - first))
        hooks(len(order))

    # -- one rank -----------------------------------------------------------------------------
    def rank(self, g, stage, lane):
        """The DAG of GPU ``g``, stage ``stage`` of the pipeline whose stages are on GPU
        ranks ``lane``."""
        lay, rank = self.lay, _Rank(g)
        gathers = self.dp.start(rank)
        passes = pass_order(stage, lay.pp, lay.vp, self.m)
        zero3_end, fsdp = {}, []

        def run(d, mb, chunk):
            rank.join.extend(fsdp)                       # FSDP: a pass waits for the traffic the pass before
            fsdp.clear()                                 # left (not the transfers between: they carry activations)
            self.run_pass(rank, stage, d, mb, chunk, self.dp.hooks(rank, stage, d, mb, chunk, passes, gathers,
                                                                   zero3_end, fsdp))
            if d == "B" and mb in zero3_end:
                fsdp.append(zero3_end.pop(mb))

        if lay.vp == 1:
            self.blocking(rank, stage, lane, run)
        else:
            self.overlapped(rank, stage, lane, passes, run)
        rank.join.extend(fsdp)
        rank.point()
        return RankTrace(rank=g, nodes=rank.nodes)

    def blocking(self, rank: _Rank, stage, lane, run):
        """1F1B: the passes and, between them, the batched transfers the next pass waits for."""
        size = self.comms["pp"].bytes if "pp" in self.comms else 0.0
        for step in blocking_program(stage, self.lay.pp, self.m):
            if step[0] == "pass":
                run(step[1], step[2], 0)
                continue
            at, posted = rank.point(), []
            for kind, d, mb in step[1]:
                peer = lane[stage + (1 if (kind, d) in (("send", "F"), ("recv", "B")) else -1)]
                posted.append(rank.add(f"{d}{mb}.{kind}", SEND if kind == "send" else RECV, chain=False,
                                       deps=() if at is None else (at,), bytes=size, peer=peer,
                                       tag=p2p_tag(d, mb, 0, 1)))
            rank.join.extend(posted)

    def overlapped(self, rank: _Rank, stage, lane, passes, run):
        """Interleaved 1F1B: every receive posted up front and waited for by its pass, every
        send leaving when its pass is done."""
        lay, size = self.lay, self.comms["pp"].bytes
        recv = {}
        for d, mb, chunk in passes:
            src = source(d, stage, chunk, lay.pp, lay.vp)
            if src is not None:
                recv[(d, mb, chunk)] = rank.add(f"{d}{mb}.c{chunk}.recv", RECV, chain=False, bytes=size,
                                                peer=lane[src[0]], tag=p2p_tag(d, mb, chunk, lay.vp))
        for d, mb, chunk in passes:
            if (d, mb, chunk) in recv:
                rank.join.append(recv[(d, mb, chunk)])
            run(d, mb, chunk)
            dst = target(d, stage, chunk, lay.pp, lay.vp)
            if dst is not None:
                rank.add(f"{d}{mb}.c{chunk}.send", SEND, chain=False, deps=(rank.point(),), bytes=size,
                         peer=lane[dst[0]], tag=p2p_tag(d, mb, dst[1], lay.vp))


def _check(step) -> None:
    if not isinstance(step, StepResult):
        raise TypeError(f"step must be a flowsolver.StepResult (from training_step), got {type(step).__name__}")
    lay, m = step.profile.layout, step.microbatches
    if lay.vp > 1 and m % lay.pp:
        raise ValueError(f"workload_from_step: interleaved 1F1B (vp={lay.vp}) runs the microbatches in groups of "
                         f"pp={lay.pp} (Megatron-Core's requirement); the step has {m}: pass a global_batch giving a "
                         f"multiple of pp microbatches")
    if lay.vp > 1 and step.profile.zero == 3:
        raise ValueError(f"workload_from_step: zero=3 (FSDP) with vp={lay.vp} model chunks is not written (compose "
                         f"times FSDP per layer of a stage, not per model chunk); use vp=1 or zero <= 2")
    if "dp_broadcast" in step.profile.comms:
        raise ValueError("workload_from_step: param_sync='broadcast' (InternLM's ZeRO: the parameters broadcast by "
                         "each shard's owner after the step) is not written; use param_sync='all_gather'")


def workload_from_step(step: StepResult):
    """The DAG of one iteration of ``step`` on every GPU (trace rank = GPU rank), as a
    :class:`~flowsolver.traces.Workload`: replay it with :func:`replay`, write it with
    :func:`write_chakra` (for ASTRA-sim). Process groups are named ``"1"``, ``"2"``, ... (TP,
    CP, EP, DP, expert-DP groups in that order).

    Every part of ``training_step``'s model is in the DAG (module docstring): the pipeline
    schedule (1F1B or interleaved, uneven stages), the TP overlap as compute beside each TP
    call, CP's ring attention step by step, EP's all-to-alls, DP's gradient buckets behind
    the last backward and the parameter all-gather before the first forward, or FSDP's
    per-layer gathers and reduce-scatters (ZeRO 3); the flat compute model or the kernel
    tables (``compute_efficiency=None``). Each compute node's ``flops`` are the FLOPs it
    executes, recompute included, the same in both compute models (module docstring). Replayed
    on the cluster it was solved on it takes ``step_time`` to within -1.8 % to +2.3 % in the cases
    tested without pipelining (Llama 3 8B on 2 DGX H100: tp 8, tp 4 x dp 4, tp 2 x dp 8, tp 4 x
    cp 2 / 4, tp 8 ZeRO 3; Mixtral tp 2 x ep 8), 1-2.5 % less with it (tp 8 x pp 2 -1.2 %, tp 4 x
    pp 2 x dp 2 -2.0 %, tp 2 x pp 4 x vp 2 -2.5 %); what is left is where the replay is the more exact (README, "Workloads from traces":
    stages paced each at its own speed, interleaving's fill and drain crossing every virtual
    stage, links shared). ZeRO 3 with ``vp > 1``, and ``vp > 1`` with microbatches not a
    multiple of ``pp``, and ZeRO's ``param_sync="broadcast"``, are refused (``ValueError``).

    >>> import topologies as tp
    >>> from flowsolver import Parallelism, Schedule, training_step
    >>> step = training_step(tp.rail_optimized(2), "llama-3-8b", Parallelism(tp=8, sequence_parallel=False),
    ...                      Schedule(global_batch=4, dp_overlap=0, tp_overlap=0))
    >>> w = workload_from_step(step)
    >>> # 2 microbatches x 2 directions x (32 layers x 2 parts x (compute, all-reduce) + the output
    >>> # projection), 2 parameter all-gathers and 2 gradient reduce-scatters (first / last bucket, the rest)
    >>> w.n_ranks, len(w.ranks[0].nodes), sorted({c.op for c in w.comms})
    (16, 520, ['all_gather', 'all_reduce', 'reduce_scatter'])
    """
    _check(step)
    b = _Builder(step)
    lay = b.lay
    traces = [None] * lay.gpus
    with paused_gc():
        for q in range(lay.pp):
            for d in range(lay.dp):
                for c in range(lay.cp):
                    for t in range(lay.tp):
                        lane = [lay.rank(t, d, s, c) for s in range(lay.pp)]
                        traces[lane[q]] = b.rank(lane[q], q, lane)
        return build_workload(traces, b.groups, source=f"training_step {step.model} on {lay.gpus} GPUs")
