"""The nodes of one layer pass in a step's workload (:mod:`._from_step`): ring attention step by
step under CP, the layer's blocks with the TP collectives beside the compute each hides, MoE's
EP all-to-alls and the expert-TP dispatcher's all-gather / reduce-scatter around the MLP; and
:class:`_Rank`, one rank's node list."""

from __future__ import annotations

from ..training import cp_ring_sm_share, tp_hidden
from ._workload import COMPUTE, RECV, SEND, TraceNode

CP_TAG = 1 << 20          # the tag of ring attention's transfers (matched in order per pair of ranks)


class _Rank:
    """One rank's node list: a chain of work (``tail``), nodes beside it, and the nodes the
    next chained node must also wait for (``join``)."""

    def __init__(self, rank):
        self.rank, self.nodes, self.tail, self.join = rank, [], None, []

    def add(self, name, kind, *, chain=True, deps=(), **kw):
        node_id = len(self.nodes)
        deps = tuple(deps)
        if chain:
            deps += ((self.tail,) if self.tail is not None else ()) + tuple(self.join)
            self.join = []
        self.nodes.append(TraceNode(node_id, name, kind, deps=deps, **kw))
        if chain:
            self.tail = node_id
        return node_id

    def point(self):
        """A node after everything chained and joined so far (None at the start)."""
        if self.join:
            self.add("join", COMPUTE)
        return self.tail


class _LayerNodes:
    """The layer-pass half of :class:`._from_step._Builder` (its attributes: ``comms``, ``gemms``,
    ``attention``, ``flops``, ``tp_ops``, ``tp_seconds``, ``tp_overlap``, ``cp_ring``, ``selective``)."""

    def rings(self, d, again):
        """The ring-attention passes of a layer in direction ``d``: the forward's, or the
        backward's preceded by the forward's again in a recomputed layer, and in every layer
        under selective recompute (its checkpointed core attention, the ring included, runs
        its forward again: ``compose``'s ``core_again``)."""
        return ("F",) if d == "F" else ("F", "B") if again or self.selective else ("B",)

    def groups_of(self, d, again):
        """The layer's blocks in direction ``d``, in order: ``(name, GEMM weight, TP ops)``;
        a recomputed layer's backward starts with its forward again (its TP ops; its MLP's EP
        all-to-alls, :meth:`layer`)."""
        forward, backward = self.tp_ops if "tp" in self.comms else ((), ())
        g, attn, mlp = self.gemms, ("qkv", "proj"), ("fc1", "fc2")
        block = lambda name, gemms, ops, n: (name, n * sum(g[k] for k in gemms),
                                             tuple(o for o in ops if o[1] in gemms))
        if d == "F":
            return [block("attn", attn, forward, 1), block("mlp", mlp, forward, 1)]
        redo = [block("recompute.attn", attn, forward, 1), block("recompute.mlp", mlp, forward, 1)] if again else []
        return redo + [block("mlp", mlp, backward, 2), block("attn", attn, backward, 2)]

    def blocks(self, d, again):
        """``(blocks, hidden, scale, rest)``: the layer's blocks (:meth:`groups_of`), the
        seconds each TP call hides (``tp_hidden``: ``tp_overlap x min(its time, its GEMM's)``,
        compose's rule), the factor that keeps them within the compute (1 but in extreme
        cases) and the compute left beside the ring attention."""
        rest = self.pass_seconds(d, again)
        if "cp" in self.comms:
            rest -= sum(self.attention[r] for r in self.rings(d, again))
        blocks = self.groups_of(d, again)
        hidden = [[tp_hidden(self.tp_seconds[op], self.gemms[gemm], self.tp_overlap, (op, gemm))
                   for op, gemm in ops]
                  for _, _, ops in blocks]
        total = sum(map(sum, hidden))
        scale = min(1.0, rest / total) if total > 0 else 1.0           # never more hidden than compute
        return blocks, hidden, scale, rest

    def exposed(self, d, again):
        """Seconds of communication ``compose`` leaves exposed in one layer pass: the TP calls
        less what they hide, the ring attention's steps beyond their blocks, EP's two
        all-to-alls."""
        blocks, hidden, scale, _ = self.blocks(d, again)
        out = sum(self.tp_seconds[op] - h * scale for (_, _, ops), hides in zip(blocks, hidden)
                  for (op, _), h in zip(ops, hides))
        if "cp" in self.comms:
            c = self.comms["cp"]
            step, share = self.comms["cp_step"].per_call, cp_ring_sm_share(self.profile)
            for r in self.rings(d, again):
                k = 1 if r == "F" else 2
                out += (c.group_size - 1) * max(share * k * step, k * step - self.attention[r] / c.group_size)
        if "ep" in self.comms:             # dispatch and combine; again in a recomputed forward
            out += 2 * self.comms["ep"].per_call * (2 if d == "B" and again else 1)
        if "etp" in self.comms:            # the dispatcher's all-gather and reduce-scatter; likewise
            etp = self.comms["etp"]
            out += (etp.gather + etp.per_call) * (2 if d == "B" and again else 1)
        return out

    def ring(self, rank: _Rank, r, tag):
        """Ring attention, step by step (``compose``'s ``cp_ring_exposed``): ``cp - 1`` steps,
        each the rank's KV chunk sent to the next rank of its CP ring and the previous rank's
        received (the backward ring: then the KV gradients the same way), beside the blockwise
        attention of the chunk already held, ``1 / cp`` of the layer's attention in direction
        ``r``, lengthened by what the step's NCCL send / receive kernels take from it (their
        CTAs' share of the SMs x the step's solved time, ``compose``'s ``cp_ring_sm_share``);
        then the last chunk's block. The next step waits for both."""
        c, (prev, succ) = self.comms["cp_step"], self.cp_ring[rank.rank]
        block = self.attention[r] / self.comms["cp"].group_size
        taken = cp_ring_sm_share(self.profile) * c.per_call * (1 if r == "F" else 2)
        self.use(self.flops["attention"] * (1 if r == "F" else 2), self.attention[r])
        for j in range(self.comms["cp"].group_size - 1):
            deps = ((rank.tail,) if rank.tail is not None else ()) + tuple(rank.join)
            rank.join = []
            for what in ("kv",) if r == "F" else ("kv", "dkv"):
                name = f"{tag}.cp.{r}{j}.{what}"
                deps = (rank.add(f"{name}.send", SEND, chain=False, deps=deps, bytes=c.bytes, peer=succ, tag=CP_TAG),
                        rank.add(f"{name}.recv", RECV, chain=False, deps=deps, bytes=c.bytes, peer=prev, tag=CP_TAG))
            self.compute(rank, f"{tag}.attention.{r}{j}", block)
            if taken > 0:           # no FLOPs: the block's own, run on fewer SMs
                rank.add(f"{tag}.cp.{r}{j}.contention", COMPUTE, duration=taken, flops=0.0)
            rank.join.extend(deps)
        self.compute(rank, f"{tag}.attention.{r}{self.comms['cp'].group_size - 1}", block)

    def layer(self, rank: _Rank, d, tag, again):
        """One layer pass: the ring attention (CP) step by step, then the blocks, each its share
        of the rest of the compute (by GEMM time) with its TP collectives beside exactly the
        compute each hides (:meth:`blocks`); EP's all-to-alls around the MLP."""
        if "cp" in self.comms:
            for r in self.rings(d, again):
                self.ring(rank, r, tag)
        blocks, hidden, scale, rest = self.blocks(d, again)
        ring = sum(self.flops["attention"] * (1 if r == "F" else 2) for r in self.rings(d, again)) \
            if "cp" in self.comms else 0.0
        self.use(self.pass_flops(d, again) - ring, rest)         # the blocks' nodes share the rest by time
        total = sum(map(sum, hidden))
        spare, weight = rest - scale * total, sum(w for _, w, _ in blocks)
        ep, etp = self.comms.get("ep"), self.comms.get("etp")
        for (name, w, ops), hides in zip(blocks, hidden):
            experts = name in ("mlp", "recompute.mlp")
            if experts and ep is not None:
                self.coll(rank, "ep", "all_to_all", ep.bytes, f"{tag}.{name}.dispatch")
            if experts and etp is not None:     # the dispatcher's all-gather of the routed tokens (backward:
                # the gradient of its reduce-scatter), then the experts, then the reduce-scatter
                self.coll(rank, "tp", "all_gather", etp.bytes, f"{tag}.{name}.etp.all_gather")
            self.compute(rank, f"{tag}.{name}", spare * w / weight)
            for j, ((op, _), h) in enumerate(zip(ops, hides)):
                call = [("tp", op, self.comms["tp"].bytes, f"{tag}.{name}.tp{j}.{op}")]
                if h * scale > 0:
                    self.beside(rank, call, h * scale, f"{tag}.{name}.tp{j}.hidden")
                else:
                    self.coll(rank, *call[0])
            if experts and etp is not None:
                self.coll(rank, "tp", "reduce_scatter", etp.bytes, f"{tag}.{name}.etp.reduce_scatter")
            if experts and ep is not None:
                self.coll(rank, "ep", "all_to_all", ep.bytes, f"{tag}.{name}.combine")
