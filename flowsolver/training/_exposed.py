"""The exposed communication of a step: per parallelism (tp, etp, cp, pp, ep, dp) its
:class:`Phase`, how many calls of its solved collective the step makes and how much of them
the schedule hides (pure arithmetic on a profile). A phase is one parallelism's
communication in a step (``StepResult.phases``), nothing else in training."""

from __future__ import annotations

from dataclasses import dataclass

from ..routing import first_tier
from ._pipeline import critical_sends

__all__ = ["Phase", "microbatch_phases", "tp_layer_ops", "tp_hidden", "tp_layer_exposed", "etp_layer_exposed",
           "pipeline_phase", "dp_phases", "fsdp_exposed", "cp_ring_exposed", "overlap_cost", "NCCL_HBM_PASSES"]

#: HBM bytes an NCCL ring moves per byte it receives (its FIFO written by the peer or the NIC, read
#: back, and the user buffer read or written): "300GB/s needs to be multiplied by at least 2x for
#: memory bandwidth, as we need to store to memory, then read back from it. If you add reading from
#: or writing to user data, it can be 3x." (S. Jeaugey, NCCL's maintainer, NVIDIA/nccl issue 1428,
#: 2024-09-06); a reduce-scatter / all-gather reads or writes the user's buffers: 3
NCCL_HBM_PASSES = 3.0


def overlap_cost(seconds: float, *, sm_share: float, hbm_seconds: float, memory_share: float) -> float:
    """Seconds of compute an NCCL collective of ``seconds`` takes from the compute it runs beside.

    NCCL runs one CTA per channel and "NCCL CTAs won't share an SM with compute kernels" (NCCL's
    maintainer, NVIDIA/nccl issue 689): while it runs, the SM-bound kernels beside it (GEMMs,
    attention; the flat model's whole compute) run on the ``1 - sm_share`` of the SMs its CTAs
    leave (``sm_share`` = CTAs / SMs), as the GEMMs beside Transformer Engine's TP overlap run on the
    SMs its ``num_sm`` leave, and the memory-bound ones (``memory_share`` of the compute's time)
    share the HBM with its copies, which need ``hbm_seconds`` of it (its HBM bytes at the achieved
    bandwidth). A compute of ``W`` seconds beside it then ends at ``W + cost`` (the work it could not
    do while the collective ran), so the pair exposes ``max(seconds - W, cost)``.

    >>> overlap_cost(2.0, sm_share=0.125, hbm_seconds=0.5, memory_share=0.2)   # 0.8 x 0.25 + 0.2 x 0.5
    0.30000000000000004
    """
    return (1.0 - memory_share) * sm_share * seconds + memory_share * min(seconds, hbm_seconds)


@dataclass(frozen=True)
class Phase:
    """The communication of one parallelism in a step.

    ``calls`` collectives of ``op`` on ``bytes`` each (nccl-tests sizes), ``per_call``
    seconds each with every group at once; ``total`` = calls x per_call; ``exposed`` the
    part on the critical path (s; DP's also counts the compute its hidden calls' NCCL kernels take
    from the compute beside them, :func:`overlap_cost`); ``groups`` and ``group_size``; ``bottleneck`` the links
    that set the first step's time (:class:`flowsolver.routing.Bottleneck` records, most
    utilised first).
    """

    name: str
    op: str
    algorithm: str
    bytes: float
    calls: float
    per_call: float
    exposed: float
    groups: int
    group_size: int
    bottleneck: tuple = ()

    @property
    def total(self) -> float:
        """Seconds of all calls, exposed or hidden."""
        return self.calls * self.per_call

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the link that holds this phase back most (``""`` if none)."""
        return first_tier(self.bottleneck)


def _phase(comm, op, calls, exposed, per_call) -> Phase:
    return Phase(name=comm.name, op=op, algorithm=comm.algorithm, bytes=comm.bytes, calls=calls, per_call=per_call,
                 exposed=exposed, groups=comm.groups, group_size=comm.group_size, bottleneck=comm.bottleneck)


# Which GEMM each TP collective of a layer overlaps, in the order they run: Transformer
# Engine's userbuffers overlap as Megatron-Bridge configures it (TransformerLayerTPOverlapCfg
# in megatron/bridge/training/comm_overlap.py lists ten overlapped ops per layer). Forward:
# all-gather of the sequence-parallel input before the QKV and FC1 GEMMs, reduce-scatter of
# the proj and FC2 outputs (ring exchange); backward: all-gather of the output gradient
# before the FC2 and proj data-gradient GEMMs (ring exchange), and for QKV and FC1 the input
# all-gathered again beside the data-gradient GEMM (the weight gradient needs the full
# input, kept sharded) and the input gradient reduce-scattered beside the weight-gradient
# GEMM ("bulk"). Each backward GEMM takes as long as its forward. Without sequence
# parallelism: an all-reduce after proj and FC2 forward, fully exposed (it reduces the GEMM's
# output, so it cannot start before the GEMM ends, and Megatron-LM refuses TP communication /
# GEMM overlap without sequence parallelism: megatron/training/arguments.py, "Tensor parallel
# communication/GEMM overlap can happen only when sequence parallelism is enabled"), and of
# the QKV and FC1 input gradients backward (Megatron's async all-reduce beside the weight
# gradient, hidden as above).
_SP_FORWARD = (("all_gather", "qkv"), ("reduce_scatter", "proj"), ("all_gather", "fc1"), ("reduce_scatter", "fc2"))
_SP_BACKWARD = (("all_gather", "fc2"), ("all_gather", "fc1"), ("reduce_scatter", "fc1"), ("all_gather", "proj"),
                ("all_gather", "qkv"), ("reduce_scatter", "qkv"))
_AR_FORWARD = (("all_reduce", "proj"), ("all_reduce", "fc2"))
_AR_BACKWARD = (("all_reduce", "fc1"), ("all_reduce", "qkv"))


def tp_layer_ops(sequence_parallel: bool, moe: bool = False) -> tuple:
    """``(forward, backward)``: one layer's TP collectives in the order they run, each
    ``(op, gemm)`` with the GEMM it overlaps (a recomputed layer runs ``forward`` again at
    the start of its backward). The trace writer lays its DAG out from the same lists.
    ``moe``: a mixture of experts' layer, whose MLP side is not Transformer Engine's linear
    layers but the experts behind the token dispatcher: only the attention's (``qkv``,
    ``proj``) are listed; the dispatcher's own TP collectives are :func:`etp_layer_exposed`'s.

    >>> [len(ops) for ops in tp_layer_ops(True)], tp_layer_ops(False)[0]
    ([4, 6], (('all_reduce', 'proj'), ('all_reduce', 'fc2')))
    >>> [len(ops) for ops in tp_layer_ops(True, moe=True)]
    [2, 3]
    """
    forward, backward = (_SP_FORWARD, _SP_BACKWARD) if sequence_parallel else (_AR_FORWARD, _AR_BACKWARD)
    if moe:
        forward, backward = (tuple(o for o in ops if o[1] in ("qkv", "proj")) for ops in (forward, backward))
    return forward, backward


def etp_layer_exposed(comm, *, again: int = 0) -> tuple:
    """``(calls, seconds, exposed)`` of one mixture-of-experts layer's dispatcher TP
    collectives (``comms["etp"]``) for one microbatch, ``again`` = 1 when the layer's MLP
    forward runs again in its backward (a recomputed layer).

    Megatron-Core's ``MoEAlltoAllTokenDispatcher`` (moe/token_dispatcher.py, NVIDIA/Megatron-LM
    d98e8a6): forward, the routed tokens all-gathered over the expert-TP group after the EP
    all-to-all (``dispatch_postprocess``) and the experts' output reduce-scattered before the
    combine (``combine_preprocess``); backward, their transposes (the all-gather's backward a
    reduce-scatter, ``_GatherFromSequenceParallelRegion``; the reduce-scatter's an all-gather).
    The grouped GEMM keeps its gathered input, so nothing is gathered again for the weight
    gradient (4 calls, not a dense MLP's 5). The experts' linear layers run with
    ``explicit_expert_comm`` (no Transformer Engine communication, no userbuffers overlap) and the
    dispatcher's collectives run on the compute stream between the GEMMs: all exposed, as the EP
    all-to-alls are.

    >>> from types import SimpleNamespace
    >>> etp_layer_exposed(SimpleNamespace(per_call=2.0, gather=1.0), again=1)
    (6, 9.0, 9.0)
    """
    calls = 2 * (2 + again)
    seconds = (2 + again) * (comm.per_call + comm.gather)
    return calls, seconds, seconds


def tp_hidden(seconds: float, gemm: float, tp_overlap: float, op: tuple = ()) -> float:
    """Seconds of a TP collective of ``seconds`` hidden behind its GEMM of ``gemm``
    seconds: ``tp_overlap x min(seconds, gemm)`` (:func:`tp_layer_exposed`); none for ``op``
    (its ``(op, gemm)`` pair) a forward all-reduce without sequence parallelism, which
    reduces the GEMM's output after it.

    >>> tp_hidden(2.0, 0.5, 0.5), tp_hidden(1.0, 4.0, 0.5), tp_hidden(1.0, 4.0, 0.5, ("all_reduce", "fc2"))
    (0.25, 0.5, 0.0)
    """
    return 0.0 if tuple(op) in _AR_FORWARD else tp_overlap * min(seconds, gemm)


def tp_layer_exposed(comm, gemms: dict, *, tp_overlap: float, recompute_forward=False, moe: bool = False) -> tuple:
    """``(calls, seconds, exposed)`` of one layer's TP collectives for one microbatch.

    A collective of ``t`` seconds beside a GEMM of ``g`` seconds hides ``tp_overlap x
    min(t, g)``: the overlap pipelines ``tp`` chunks, each chunk's transfer under the
    previous chunk's GEMM, so ``t - (tp - 1) / tp x min(t, g)`` stays exposed (a two-stage
    pipeline of ``tp`` steps; when the GEMM is the shorter, the transfer sets the pace) --
    hidden time never exceeds the compute that hides it. ``gemms``: seconds of each forward
    GEMM (:func:`flowsolver.training._compute.gemm_seconds`); ``recompute_forward`` runs the
    forward collectives twice: ``True`` all of them (full recompute), or a collection of the
    ``(op, gemm)`` pairs that run again (a partial recompute mode); ``moe``, a mixture of
    experts' layer: the attention's collectives only (:func:`tp_layer_ops`).

    >>> from types import SimpleNamespace
    >>> c = SimpleNamespace(op="reduce_scatter", per_call=2.0, gather=1.0)
    >>> tp_layer_exposed(c, dict(qkv=0.5, proj=4.0, fc1=4.0, fc2=4.0), tp_overlap=1.0)
    (10, 14.0, 2.5)
    """
    forward, backward = tp_layer_ops(comm.op == "reduce_scatter", moe)
    if recompute_forward is True:
        again = forward
    else:
        again = tuple(o for o in forward if o in (recompute_forward or ()))
    ops = forward + again + backward
    seconds = dict(all_gather=comm.gather, reduce_scatter=comm.per_call, all_reduce=comm.per_call)
    times = [(seconds[op], gemms[gemm], (op, gemm)) for op, gemm in ops]
    exposed = sum(t - tp_hidden(t, g, tp_overlap, o) for t, g, o in times)
    return len(times), sum(t for t, _, _ in times), exposed


def cp_ring_exposed(step_seconds: float, cp: int, attention_fwd: float, attention_bwd: float,
                    recompute_forward: bool = False, sm_share: float = 0.0) -> float:
    """Seconds of one layer's ring-attention KV exchange left exposed for one microbatch.

    Ring attention (Megatron-Core / Transformer Engine ``cp_comm_type="p2p"``; PyTorch's
    context parallel): the ``cp`` ranks pass key-value chunks around the ring, ``cp - 1`` steps
    per attention, each step's transfer overlapped with the blockwise attention of the chunk
    already held, ``1 / cp`` of the attention (load-balanced causal chunks). Forward: one KV
    chunk per step (``step_seconds``); backward: the KV chunk and its gradient (``2 x``)
    beside ``1 / cp`` of the backward attention; ``recompute_forward``: the forward ring runs
    again in the backward (a fully recomputed layer; selective recompute's checkpointed core
    attention). Each step exposes what its transfer outlasts its block, and at least what the
    transfer's NCCL kernels take from the block beside it: the sends are NCCL send / receive
    kernels (Transformer Engine's ``cp_comm_type="p2p"`` exchanges the chunks with
    ``torch.distributed``'s ``batch_isend_irecv``) on their own stream beside the attention
    kernels, one CTA per channel on SMs the attention then lacks (:func:`overlap_cost`'s SM term:
    ``sm_share`` x the transfer's seconds; flash attention is SM-bound, so no HBM term).

    >>> cp_ring_exposed(1.0, 4, 2.0, 4.0)        # 3 x (1 - 0.5) + 3 x (2 - 1)
    4.5
    >>> cp_ring_exposed(0.1, 4, 2.0, 4.0, sm_share=0.25)     # every step hidden: 3 x 0.025 + 3 x 0.05
    0.22500000000000003
    """
    fwd = (cp - 1) * max(sm_share * step_seconds, step_seconds - attention_fwd / cp)
    bwd = (cp - 1) * max(sm_share * 2.0 * step_seconds, 2.0 * step_seconds - attention_bwd / cp)
    return fwd * (2 if recompute_forward else 1) + bwd


def microbatch_phases(comms: dict, *, layers: int, tp_overlap: float, attention_seconds: float, gemms: dict,
                      recomputed: int = 0, attention_fwd: float | None = None,
                      attention_bwd: float | None = None, tp_again=True, attention_again: bool = True,
                      mlp_again: bool = True, core_again: bool = False, moe: bool | None = None,
                      cp_sm_share: float = 0.0) -> dict:
    """TP, CP and EP phases of ONE microbatch through a stage of ``layers`` layers.

    * TP (Megatron with Transformer Engine): per layer four all-reduces' worth with
      sequence parallelism as reduce-scatter + all-gather, plus the inputs all-gathered
      again for the weight gradients: 6 all-gathers and 4 reduce-scatters (4 all-reduces
      without sequence parallelism), each beside the GEMM it overlaps
      (:func:`tp_layer_exposed`: ``tp_overlap`` of it hides, at most that share of the GEMM);
      the ``recomputed`` layers run their forward collectives again (``tp_again``: all of them,
      full recompute, or the ``(op, gemm)`` pairs a partial mode runs again). A mixture of
      experts' layer (``moe``; ``None``: whether ``comms`` holds ``etp``, which an expert TP of
      1 leaves out) counts the attention's here (2 forward, 3 backward with sequence
      parallelism).
    * ETP (a mixture of experts with expert TP ``etp = tp > 1``, :func:`etp_layer_exposed`): the token
      dispatcher's all-gather and reduce-scatter of the routed tokens, forward and backward,
      4 calls per MoE layer, exposed; a recomputed layer whose MLP runs again (``mlp_again``)
      runs the forward pair again.
    * CP (ring attention, :func:`cp_ring_exposed`): the KV exchange of every layer, step by
      step beside the blockwise attention (``attention_fwd`` / ``attention_bwd`` seconds per
      layer; when not given, a third / two thirds of ``attention_seconds``). The solved
      collective is the ring all-gather of the ``cp`` chunks, ``cp - 1`` ring steps: a step
      takes what ``comms["cp_step"]`` solved: every rank's KV chunk sent to the next rank of
      its ring, all at once (Transformer Engine's P2P exchange, a latency per step; without
      it, ``per_call / (cp - 1)``). Three all-gathers' worth per layer (forward KV, backward
      KV and KV gradients); a fourth where the forward ring runs again: in a recomputed layer
      whose attention runs again (``attention_again``), and in every layer with ``core_again``
      (selective recompute: the checkpointed core attention's forward, ring attention's KV
      exchange included, runs again in each layer's backward: Megatron-Core's
      ``_checkpointed_attention_forward`` re-runs Transformer Engine's context-parallel
      attention, whose forward passes the KV chunks around the ring). ``cp_sm_share``: the
      share of the SMs the ring's NCCL send / receive kernels hold (:func:`cp_ring_exposed`).
    * EP: 4 all-to-alls per MoE layer (dispatch and combine, forward and backward), exposed; a
      recomputed layer whose MLP runs again (``mlp_again``) dispatches and combines again.
    """
    out = {}
    if "tp" in comms:
        c = comms["tp"]
        moe = "etp" in comms if moe is None else moe
        plain = tp_layer_exposed(c, gemms, tp_overlap=tp_overlap, moe=moe)
        again = tp_layer_exposed(c, gemms, tp_overlap=tp_overlap, recompute_forward=tp_again, moe=moe)
        calls, seconds, exposed = ((layers - recomputed) * p + recomputed * q for p, q in zip(plain, again))
        op = "reduce_scatter+all_gather" if c.op == "reduce_scatter" else "all_reduce"
        out["tp"] = _phase(c, op, calls, exposed, seconds / calls)
    if "etp" in comms:
        c = comms["etp"]
        plain, again = etp_layer_exposed(c), etp_layer_exposed(c, again=int(bool(mlp_again)))
        calls, seconds, exposed = ((layers - recomputed) * p + recomputed * q for p, q in zip(plain, again))
        out["etp"] = _phase(c, "reduce_scatter+all_gather", calls, exposed, seconds / calls)
    if "cp" in comms:
        c = comms["cp"]
        cp = c.group_size
        fwd = attention_seconds / 3.0 if attention_fwd is None else attention_fwd
        bwd = 2.0 * attention_seconds / 3.0 if attention_bwd is None else attention_bwd
        step = comms["cp_step"].per_call if "cp_step" in comms else c.per_call / (cp - 1)
        again = recomputed if attention_again else 0        # layers whose forward ring runs again
        if core_again:
            again = layers
        exposed = ((layers - again) * cp_ring_exposed(step, cp, fwd, bwd, sm_share=cp_sm_share)
                   + again * cp_ring_exposed(step, cp, fwd, bwd, recompute_forward=True, sm_share=cp_sm_share))
        out["cp"] = _phase(c, "all_gather", 3 * layers + again, exposed, c.per_call)
    if "ep" in comms:
        c = comms["ep"]
        calls = 4 * layers + 2 * recomputed * mlp_again
        out["ep"] = _phase(c, "all_to_all", calls, calls * c.per_call, c.per_call)
    return out


def pipeline_phase(comms: dict, *, pp: int, vp: int, microbatches: int) -> dict:
    """The PP phase: stage-boundary sends, ``vp x`` as many with interleaving, those on the
    critical path exposed (:func:`flowsolver.training._pipeline.critical_sends`)."""
    if "pp" not in comms:
        return {}
    c = comms["pp"]
    calls = 2 * microbatches * vp + 2 * (pp - 1)
    return {"pp": _phase(c, "send_recv", calls, critical_sends(pp, vp, microbatches) * c.per_call, c.per_call)}


def fsdp_exposed(*, layers: int, gather: float, reduce: float, forward: float, backward: float,
                 root_gather: float = 0.0, root_reduce: float = 0.0, keep_params: bool = False,
                 gather_cost: float = 0.0, reduce_cost: float = 0.0) -> tuple:
    """``(forward, backward)`` seconds of FSDP traffic exposed for one pass of a microbatch
    through ``layers`` FSDP units (transformer layers), as PyTorch FSDP2 (``fully_shard`` per
    block, as torchtitan wraps Llama) and DeepSpeed ZeRO-3 schedule it: forward, the root
    unit's parameters (embedding, output projection: ``root_gather``) and the first layer's
    (``gather``) are gathered before any compute, then each next layer's gather is prefetched
    beside the current layer's ``forward`` seconds, exposing what it outlasts them. Backward
    (the last layer's parameters kept from the forward, FSDP2's ``reshard_after_forward``
    except for the last block): beside each layer's ``backward`` seconds the next layer's
    gather and the previous layer's gradient reduce-scatter (``reduce``) share the
    communication stream: the first layer of the backward overlaps a gather only, the last a
    reduce-scatter only; the last layer's reduce-scatter and the root's (``root_reduce``) come
    after the last compute, exposed. ``keep_params`` (parameters not resharded, as FSDP2 with
    pipeline parallelism: gathered on the first microbatch, gradients reduced on the last):
    the backward gathers nothing. ``gather_cost`` / ``reduce_cost``: the seconds of compute one
    gather / reduce-scatter takes from the layer it runs beside (:func:`overlap_cost`); each
    overlapped layer exposes at least them.

    >>> fsdp_exposed(layers=4, gather=1.0, reduce=2.0, forward=0.5, backward=2.5)
    (2.5, 3.0)
    >>> fsdp_exposed(layers=4, gather=1.0, reduce=2.0, forward=0.5, backward=2.5, gather_cost=0.1, reduce_cost=0.2)
    (2.5, 3.3)
    """
    fwd = root_gather + gather + (layers - 1) * max(gather - forward, gather_cost)
    if layers == 1:
        return fwd, reduce + root_reduce
    if keep_params:
        bwd = (layers - 1) * max(reduce - backward, reduce_cost)
    else:
        bwd = (max(gather - backward, gather_cost) + (layers - 2) * max(gather + reduce - backward,
                                                                          gather_cost + reduce_cost)
               + max(reduce - backward, reduce_cost))
    return fwd, bwd + reduce + root_reduce


def dp_phases(comms: dict, *, zero: int, m: int, t_mb: float, dp_overlap: float, chunks: int, pp: int = 1,
              vp: int = 1, layers: int = 1, layer_forward: float | None = None, layer_backward: float | None = None,
              root_scale: float = 0.0, t_run: float | None = None, costs: dict | None = None) -> dict:
    """DP phases, dense gradients first then the experts', sharing the overlap windows.

    ``zero = 3`` (FSDP, per layer: :func:`fsdp_exposed`): the ``layers`` of the stage each
    gather their parameters (``comms["dp_gather"]``) beside the previous layer's forward and
    reduce-scatter their gradients (``comms["dp_reduce"]``) beside the next layer's backward
    (``layer_forward`` / ``layer_backward`` seconds each, scaled by ``dp_overlap``; default a
    third and two thirds of ``t_mb / layers``); the root unit's traffic is ``root_scale`` x a
    layer's; the experts' shards (``dp_experts``) beside ``dp_overlap`` of the microbatch's run
    ``t_run`` (its compute and exposed TP / CP / EP waits; default ``t_mb``). Every microbatch
    gathers and reduces again without pipelining; with ``pp > 1`` the
    parameters are gathered once per step, in the first microbatch's forward (FSDP2 issues a
    stage's gathers when its forward starts, after the activations arrive: the ``pp`` stages'
    forward exposures add up on the pipeline's fill) and the gradients reduced once, during
    the last microbatch's backward (on their own stream, not holding the backward: the first
    stage's, the last to finish, is exposed). Otherwise the gradients are reduced bucket by bucket during the
    last microbatch's backward pass (2/3 of ``t_mb``) and, with the distributed optimizer
    (``zero`` 1 / 2), the updated parameters are all-gathered bucket by bucket during the next
    step's first forward pass (1/3 of ``t_mb``), each window scaled by ``dp_overlap``; ``zero = 2``
    (sharded gradients, as DeepSpeed's ZeRO-2) reduces them in every microbatch's backward
    instead, ``m`` reduce-scatters a step, each beside its own backward. With
    ``vp`` interleaved model chunks the windows stretch to ``1 + (vp - 1) pp / vp`` of these: a
    stage's chunks run their last backward (first forward) about ``pp`` chunk-slots apart, so
    the first chunk's gradients are final (the last chunk's parameters needed) that much
    earlier (later) than the stage's last backward (first forward). One bucket of each (of
    ``chunks``: a layer; a virtual stage's layers with interleaving) is always exposed:
    Megatron's chunked DP overlap "exposes only one DP communication chunk" (Megatron-Bridge
    docs, Communication Overlap). Without interleaving (``vp = 1``) the buckets are layers
    whatever ``pp``: Megatron-Core launches each gradient bucket's reduce-scatter as soon as
    its parameters' gradients are final in the last microbatch's backward, pipelined or not.

    ``dp_broadcast`` in ``comms`` (ZeRO 1 / 2 with ``param_sync="broadcast"``, InternLM's
    ``HybridZeroOptimizer``): the dense gradients are all-reduced (``comms["dp"]``, an
    all-reduce, in the buckets above) and no parameter is all-gathered; after the optimizer step
    every one of the ``group_size`` shard owners broadcasts its shard, one broadcast after the
    other on the DP communicator's stream, waited for before the next forward ("TODO: support
    broadcast overlap"): ``group_size x`` its per-call time, exposed.

    ``costs`` maps a DP collective (``dp``, ``dp_experts``, ``dp_gather``, ``dp_reduce``) to
    ``(per_call, gather)``: the seconds of compute its reduce-scatter (all-reduce) and its
    all-gather take from the compute they run beside (:func:`overlap_cost`, NCCL's CTAs on the
    SMs and its copies in the HBM); a call hidden in a window exposes at least that (the
    bucket always exposed runs after the compute: no cost). None: no cost (the traffic alone).
    """
    costs = costs or {}
    phases = {}
    keys = [k for k in ("dp", "dp_experts") if k in comms]
    if zero == 3:
        fwd = dp_overlap * (t_mb / (3.0 * layers) if layer_forward is None else layer_forward)
        bwd = dp_overlap * (2.0 * t_mb / (3.0 * layers) if layer_backward is None else layer_backward)
        if "dp_gather" in comms:
            g, r = comms["dp_gather"].per_call, comms["dp_reduce"].per_call
            keep = pp > 1
            f_exp, b_exp = fsdp_exposed(layers=layers, gather=g, reduce=r, forward=fwd, backward=bwd,
                                        root_gather=root_scale * g, root_reduce=root_scale * r, keep_params=keep,
                                        gather_cost=costs.get("dp_gather", (0.0, 0.0))[0],
                                        reduce_cost=costs.get("dp_reduce", (0.0, 0.0))[0])
            passes = 1 if keep else m
            gathers = layers + root_scale + (0 if keep else max(0, layers - 1))
            reduces = layers + root_scale
            calls = passes * (gathers + reduces)
            total = passes * (gathers * g + reduces * r)
            # pipelined: every stage's first forward waits for its own gathers, one stage after
            # the other on the pipeline's fill; the last backward's reduce-scatters run on
            # their own stream, the first stage's finishing last
            exposed = pp * f_exp + b_exp if keep else m * (f_exp + b_exp)
            phases["dp"] = _phase(comms["dp"], "reduce_scatter+all_gather", calls, exposed, total / calls)
        window = dp_overlap * (t_mb if t_run is None else t_run)    # beside the microbatch's whole run
        for k in keys:
            if k == "dp" and "dp_gather" in comms:
                continue
            per_mb = comms[k].per_call + 2 * comms[k].gather
            c_reduce, c_gather = costs.get(k, (0.0, 0.0))
            phases[k] = _phase(comms[k], "reduce_scatter+all_gather", 3 * m,
                               m * max(per_mb - window, c_reduce + 2 * c_gather), per_mb / 3)
            window = max(0.0, window - per_mb)
        return phases
    stretch = 1.0 + (vp - 1) * pp / vp          # interleaved: chunks finish / start pp slots apart
    backward, forward = dp_overlap * (2.0 / 3.0) * t_mb * stretch, dp_overlap * (1.0 / 3.0) * t_mb * stretch
    op, calls = ("all_reduce", 1) if zero == 0 else ("reduce_scatter+all_gather", 2)
    # ZeRO 2 (DeepSpeed, engine.py allreduce_gradients: "ZeRO stage >= 2 communicates during non
    # gradient accumulation boundaries as well"): sharded gradients are reduce-scattered in every
    # microbatch's backward, each beside that backward; the parameters all-gathered once a step
    reduces = m if zero == 2 else 1
    for k in keys:
        reduce, gather = comms[k].per_call, comms[k].gather
        c_reduce, c_gather = costs.get(k, (0.0, 0.0))
        beside = 1.0 - 1.0 / chunks         # the buckets beside the compute: the last one runs after it
        exposed = reduces * max(reduce / chunks + beside * c_reduce, reduce - backward)
        backward = max(0.0, backward - reduce)
        if gather:
            exposed += max(gather / chunks + beside * c_gather, gather - forward)
            forward = max(0.0, forward - gather)
        n = calls + reduces - 1
        total = reduces * reduce + gather
        if k == "dp" and "dp_broadcast" in comms:
            b = comms["dp_broadcast"]
            op, n = "all_reduce+broadcast", reduces + b.group_size
            exposed += b.group_size * b.per_call
            total += b.group_size * b.per_call
        phases[k] = _phase(comms[k], op, n, exposed, total / n)
    return phases
