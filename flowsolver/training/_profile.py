"""A job's communication solved once: per parallelism the collective, its algorithm, bytes
and per-call time with every group of its kind running at once."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topologies import GpuSpec

from ..collectives import concurrent_kinds
from ..routing import first_tier
from ._layout import ParallelLayout
from ._models import BF16, ModelSpec

__all__ = ["CommTiming", "CommProfile", "solve_profile", "kv_bytes"]


@dataclass(frozen=True)
class CommTiming:
    """One parallelism's collective, solved on the cluster.

    ``name`` is ``tp``, ``etp`` (a mixture of experts' MLP-side TP collectives: the token
    dispatcher's all-gather of the routed tokens and reduce-scatter of the experts' output, over
    the TP groups), ``cp``, ``pp``, ``ep``, ``dp`` or ``dp_experts`` (the gradients of the
    experts' shards, reduced among the DP ranks holding the same shard), or ``cp_step`` (one
    ring-attention step: every CP rank's KV chunk to the next rank of its ring, ``groups``
    pairs), ``dp_gather`` / ``dp_reduce`` (ZeRO 3: one layer's parameters and gradients); ``op`` the
    collective solved (``all_reduce``, ``send_recv``, ``all_to_all``, ``all_gather`` for CP's
    ring attention, or ``reduce_scatter`` for DP with ZeRO >= 1, TP with sequence
    parallelism and ETP), of ``bytes`` per call (nccl-tests sizes); ``per_call`` seconds
    with all ``groups`` groups of ``group_size`` ranks at once, in lockstep; ``gather`` the
    seconds of the matching ``all_gather`` of the same bytes (DP with ZeRO >= 1: the updated
    parameters; TP with sequence parallelism: the activations; ETP: the routed tokens; 0
    otherwise); ``bottleneck`` the links that set the first step's time
    (:class:`flowsolver.routing.Bottleneck` records, most utilised first).
    """

    name: str
    op: str
    algorithm: str
    bytes: float
    per_call: float
    groups: int
    group_size: int
    gather: float = 0.0
    bottleneck: tuple = ()
    result: object = field(default=None, repr=False, compare=False)          # the CollectiveResult timed
    gather_result: object = field(default=None, repr=False, compare=False)   # its all_gather's

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the link that holds this collective back most (``""`` if none)."""
        return first_tier(self.bottleneck)


@dataclass(frozen=True)
class CommProfile:
    """What a step's communication costs, independent of batch, overlap and compute.

    ``model``, ``layout`` (degrees and placement), ``micro_batch`` (sequences; it sets the
    activation sizes), ``zero`` (it sets the DP collectives), ``sequence_parallel`` (TP as
    reduce-scatter + all-gather instead of all-reduce) and the MoE routing (``top_k``
    experts per token, ``capacity_factor``: the all-to-all carries ``capacity_factor x`` the
    routed tokens, 1 for dropless, below 1 the tokens over capacity dropped) fix the collectives; ``gpu``
    (:class:`topologies.GpuSpec`) its peaks and memory; ``comms`` maps each communicating
    parallelism to its :class:`CommTiming`, in the order ``tp``, ``etp`` (a mixture of
    experts with expert TP ``etp = tp > 1``), ``cp``, ``pp``, ``ep``, ``dp``, ``dp_experts`` (a degree of 1
    communicates nothing and has no entry).
    """

    model: ModelSpec
    layout: ParallelLayout
    micro_batch: int
    zero: int
    gpu: GpuSpec
    comms: dict = field(default_factory=dict)
    sequence_parallel: bool = True
    top_k: int = 1
    capacity_factor: float = 1.0
    reduce_bytes: float = BF16
    gather_bytes: float = BF16
    param_sync: str = "all_gather"

    def fsdp_unit_scale(self) -> float:
        """Bytes of the FSDP root unit (embedding, output projection, final norm: the
        parameters outside the transformer layers) over one layer's, per GPU (``/ tp``), for
        timing its all-gather and reduce-scatter from the per-layer ones."""
        m = self.model
        layer = m.attention_params + (0 if m.experts > 1 else m.mlp_params)
        return m.embedding_params / layer


def time_collectives(graph, calls, options) -> list:
    """Per call ``(op, size, groups, algorithm)``: the seconds with every group at once (in
    lockstep: the groups of one parallelism are symmetric), the algorithm, the links that
    set the time and the CollectiveResult; the calls solved together in one batched call."""
    kinds = [[dict(op=op, size=size, ranks=g, algorithm=algorithm) for g in groups]
             for op, size, groups, algorithm in calls]
    return [(float(t.makespan), t.algorithms[0], t.bottleneck, t.lockstep)
            for t in concurrent_kinds(graph, kinds, **options)] if kinds else []


def kv_bytes(model: ModelSpec, micro_batch: int, tp: int, cp: int) -> float:
    """Bytes of one CP rank's keys and values for one layer (bf16): ``2 b (s / cp) k d``
    with ``k`` the KV heads on one TP rank (``kv_heads / tp``, at least one: GQA replicates
    a KV head over the TP ranks that share it) and ``d`` the head dimension.

    >>> from flowsolver.training import get_model
    >>> kv_bytes(get_model("llama-3-405b"), 1, 8, 16) == 2 * (8192 // 16) * 1 * 128 * 2
    True
    """
    heads = max(1, model.kv_heads // tp)
    return 2.0 * micro_batch * (model.seq_len / cp) * heads * (model.hidden // model.heads) * BF16


def ring_pairs(groups) -> list:
    """Each rank of each group with the next one of its ring (``[a, b]``: ``a`` sends to ``b``).

    >>> ring_pairs([[0, 2, 4]])
    [(0, 2), (2, 4), (4, 0)]
    """
    sizes = {len(g) for g in groups}
    if len(sizes) == 1 and sizes.pop() > 1:     # equal groups (a layout's): one array shift
        ranks = np.asarray(groups)
        if ranks.dtype.kind in "iu":
            return list(zip(ranks.ravel().tolist(), np.roll(ranks, -1, axis=1).ravel().tolist()))
    return [(g[i], g[(i + 1) % len(g)]) for g in groups for i in range(len(g))]


def step_collectives(model: ModelSpec, layout: ParallelLayout, micro_batch: int, zero: int,
                     sequence_parallel: bool, top_k: int, capacity_factor: float, reduce_bytes: float = BF16,
                     gather_bytes: float = BF16, groups=None, param_sync: str = "all_gather") -> list:
    """The collectives of a step: ``(name, kind, op, bytes, groups)`` per parallelism that
    communicates (``kind`` names the entry of ``algorithms`` that applies).

    * TP: all-reduces (or, with sequence parallelism, reduce-scatters and all-gathers) of
      ``micro_batch x seq_len / cp x hidden`` bf16 activations;
    * ETP (a mixture of experts with expert TP ``etp = tp > 1``; none at ``etp = 1``): the MoE
      layer's TP collectives, over the TP
      groups: Megatron-Core's all-to-all token dispatcher all-gathers the routed tokens after
      the EP all-to-all and reduce-scatters the experts' output before the combine, ``top_k x
      capacity_factor x`` the TP bytes (the routed copies of every token); with ``ep = 1`` too
      (the all-to-all dispatcher whatever ``ep``; Megatron's ``allgather`` dispatcher, which
      gathers the ``s b`` tokens before routing, is not modelled);
    * CP: ring all-gathers of every CP rank's keys and values (``cp x`` :func:`kv_bytes`):
      ring attention passes each rank's KV chunk around the CP ring, step by step; one step
      (``cp_step``) is every rank's chunk sent to the next rank of its ring, all at once;
    * PP: ``micro_batch x seq_len / cp x hidden`` bytes to the next stage (``/ tp`` with
      sequence parallelism: Megatron-Core's p2p tensor shape);
    * EP: all-to-alls of ``micro_batch x seq_len / cp x hidden x top_k x capacity_factor / tp``
      bytes per rank (each rank routes its sequence-parallel share), among ``ep`` consecutive
      DP ranks (at ``etp = 1``: ``ep`` consecutive ranks of a stage, TP ranks included);
    * DP: the gradients (``reduce_bytes`` per value: bf16, or fp32 when reduced in fp32) of a
      GPU's dense shard ``(N - N_experts) / (tp pp)``, and of its expert shard ``N_experts / (etp
      pp ep)`` among the ranks holding it (CP ranks included, TP ranks too at ``etp = 1``); with ZeRO 3 (FSDP) also one
      transformer layer's parameters all-gathered (``gather_bytes`` per value: bf16, or 1 with
      FP8 all-gather) and its gradients reduce-scattered, ``dp_gather`` / ``dp_reduce``: FSDP's
      unit of communication. With ``param_sync="broadcast"`` (ZeRO 1 / 2 as InternLM's
      ``HybridZeroOptimizer`` runs them) the dense gradients are all-reduced, and
      ``dp_broadcast`` is one shard owner's broadcast of its ``1 / dp`` of the dense parameters
      (``gather_bytes`` per value) to its DP group, rooted at the group's first rank.

    ``groups`` (default the layout's, :meth:`ParallelLayout.groups`, and ``"cp_step"``: the
    ring neighbours of the CP groups, :func:`ring_pairs`) maps a kind to its rank groups: a
    caller that plans many layouts passes one that remembers them.
    """
    lay = layout
    of = groups or (lambda kind: ring_pairs(lay.groups("cp")) if kind == "cp_step" else lay.groups(kind))
    activation = micro_batch * model.seq_len / lay.cp * model.hidden * BF16
    plan = []
    if lay.tp > 1:
        plan.append(("tp", "tp", "reduce_scatter" if sequence_parallel else "all_reduce", activation, of("tp")))
        if model.experts > 1 and lay.etp > 1:
            # Megatron-Core's MoEAlltoAllTokenDispatcher (moe/token_dispatcher.py, NVIDIA/Megatron-LM
            # d98e8a6): after the EP all-to-all, dispatch_postprocess all-gathers the routed tokens
            # over the expert-TP group (gather_from_sequence_parallel_region, group=expt_tp), and
            # combine_preprocess reduce-scatters the experts' output back: each carries the top_k x
            # capacity_factor routed copies of the s b tokens, not the s b of a dense layer's
            # TP collective. Expert TP is the TP group: expert_tensor_parallel_size defaults to
            # tensor_model_parallel_size (megatron/training/arguments.py), both innermost. At
            # expert TP 1 the expt_tp group has one rank and neither runs ("if self.tp_size > 1")
            plan.append(("etp", "tp", "reduce_scatter", activation * top_k * capacity_factor, of("tp")))
    if lay.cp > 1:
        kv = kv_bytes(model, micro_batch, lay.tp, lay.cp)
        plan.append(("cp", "cp", "all_gather", lay.cp * kv, of("cp")))
        # one ring-attention step: every CP rank sends its KV chunk to the next rank of its ring
        plan.append(("cp_step", "cp_step", "send_recv", kv, of("cp_step")))
    if lay.pp > 1:
        # Megatron-Core's p2p tensor shape, [seq_length / cp, micro_batch, hidden], is split over
        # tp only with sequence parallelism (schedules.py get_tensor_shapes, NVIDIA/Megatron-LM
        # d98e8a6: "if config.sequence_parallel: effective_seq_length //= tp_group.size()");
        # without it every TP rank sends its whole copy to the same TP rank of the next stage
        plan.append(("pp", "pp", "send_recv", activation / (lay.tp if sequence_parallel else 1), of("pp")))
    if lay.ep > 1:
        plan.append(("ep", "ep", "all_to_all", activation * top_k * capacity_factor / lay.tp, of("ep")))
    shard = lay.tp * lay.pp
    dp_op = "all_reduce" if zero == 0 else "reduce_scatter"
    if lay.dp * lay.cp > 1:
        dense = (model.params - model.expert_params) / shard
        plan.append(("dp", "dp", "all_reduce" if param_sync == "broadcast" else dp_op, dense * reduce_bytes,
                     of("dp")))
        if param_sync == "broadcast":
            # InternLM 20fe5ac internlm/solver/optimizer/hybrid_zero_optim.py: _reduce_and_copy calls
            # reduce_tensor(..., dst_rank=None), "if rank is None, all reduce will be used"; after
            # the optimizer step broadcast_params() loops "for rank in range(self._zero_world_size)"
            # over dist.broadcast(fp16_param, src=g_rank, ...), "TODO: support broadcast overlap"
            groups_dp = of("dp")
            plan.append(("dp_broadcast", "dp", "broadcast", dense * gather_bytes / len(groups_dp[0]), groups_dp))
        if zero == 3:
            layer = (model.attention_params + (0 if model.experts > 1 else model.mlp_params)) / lay.tp
            plan.append(("dp_gather", "dp", "all_gather", layer * gather_bytes, of("dp")))
            plan.append(("dp_reduce", "dp", "reduce_scatter", layer * reduce_bytes, of("dp")))
    if model.expert_params and lay.tp * lay.dp * lay.cp // (lay.etp * lay.ep) > 1:
        # the expert shard: N_experts / (etp pp ep), among the expert DP ranks (expert_ranks / ep)
        plan.append(("dp_experts", "dp", dp_op, model.expert_params / (lay.etp * lay.pp * lay.ep) * reduce_bytes,
                     of("dp_experts")))
    return plan


def solve_profile(graph, model: ModelSpec, layout: ParallelLayout, *, micro_batch: int, zero: int, gpu,
                  algorithms: dict, options: dict, sequence_parallel: bool = True,
                  capacity_factor: float = 1.0, reduce_bytes: float = BF16, gather_bytes: float = BF16,
                  timed=None, steps=None, param_sync: str = "all_gather") -> CommProfile:
    """Solve every collective of the step once on ``graph`` (lockstep, every group of a kind
    at once; the kinds in one batched call, :func:`flowsolver.collectives.concurrent_kinds`)
    into a :class:`CommProfile`; ``algorithms``
    maps ``tp``, ``cp``, ``pp``, ``ep``, ``dp`` to an algorithm (or ``"auto"``), ``options``
    goes to every collective. A reduce-scatter (TP with sequence parallelism, DP with ZeRO
    >= 1) is solved with its all-gather of the same bytes (``gather``; DP: of the parameters,
    ``gather_bytes`` per value where the gradients take ``reduce_bytes``). The MoE routing is
    ``model.top_k`` experts per token, at ``capacity_factor``. ``timed`` (default
    :func:`time_collectives`) times a list of ``(op, size, groups, algorithm)`` calls: a planner passes
    one that remembers what it solved (:func:`flowsolver.plan`); ``steps``, the step's
    collectives as :func:`step_collectives` lists them for these arguments, when the caller has them.
    ``param_sync``: how ZeRO 1 / 2 return the parameters (:class:`~flowsolver.training.Parallelism`).

    >>> import topologies as tp
    >>> from flowsolver.training import ParallelLayout, get_model
    >>> prof = solve_profile(tp.rail_optimized(2), get_model("llama-3-8b"), ParallelLayout(tp=8, pp=1, dp=2),
    ...                      micro_batch=1, zero=1, gpu=tp.get_gpu("h100_sxm"),
    ...                      algorithms=dict(tp="auto", cp="ring", dp="ring"), options={})
    >>> list(prof.comms), prof.comms["dp"].op, prof.comms["dp"].group_size, prof.comms["dp"].gather > 0
    (['tp', 'dp'], 'reduce_scatter', 2, True)
    """
    plan = steps if steps is not None else step_collectives(model, layout, micro_batch, zero, sequence_parallel,
                                                            model.top_k, capacity_factor, reduce_bytes,
                                                            gather_bytes, param_sync=param_sync)
    # every parallelism's collective solved in one batched call, then the all-gathers that
    # follow the reduce-scatters (with the algorithm each reduce-scatter chose) in another:
    # the parameters' (DP: gather_bytes per value, not the gradients' reduce_bytes)
    timer = time_collectives if timed is None else timed
    timed = timer(graph, [(op, size, groups, algorithms.get(kind, "auto")) for _, kind, op, size, groups in plan],
                  options)
    scattered = [i for i, (name, _, op, _, _) in enumerate(plan) if op == "reduce_scatter" and name != "dp_reduce"]
    gather_size = {i: plan[i][3] * (gather_bytes / reduce_bytes if plan[i][0].startswith("dp") else 1.0)
                   for i in scattered}
    gathers = dict(zip(scattered, timer(graph, [("all_gather", gather_size[i], plan[i][4], timed[i][1])
                                                 for i in scattered], options)))
    comms = {}
    for i, ((name, _, op, size, groups), (per_call, algorithm, bottleneck, result)) in enumerate(zip(plan, timed)):
        gather, _, _, gather_result = gathers.get(i, (0.0, None, None, None))
        comms[name] = CommTiming(name=name, op=op, algorithm=algorithm, bytes=size, per_call=per_call,
                                 groups=len(groups), group_size=len(groups[0]), gather=gather,
                                 bottleneck=bottleneck, result=result, gather_result=gather_result)
    return CommProfile(model=model, layout=layout, micro_batch=micro_batch, zero=zero, gpu=gpu, comms=comms,
                       sequence_parallel=sequence_parallel, top_k=model.top_k, capacity_factor=capacity_factor,
                       reduce_bytes=reduce_bytes, gather_bytes=gather_bytes, param_sync=param_sync)
