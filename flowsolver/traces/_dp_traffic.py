"""A step's data-parallel traffic in its trace (:mod:`._from_step`): DP's gradient and
parameter calls in ``compose``'s windows and buckets (ZeRO 0 - 2), FSDP's per-layer and the
experts' per-microbatch traffic (ZeRO 3), and the hooks that place them between a pass's
segments. The trace writer owns one; it asks the writer for the layers' compute and
exposed times and adds the calls to a rank's node list through it."""

from __future__ import annotations

from ..training import dp_overlap_costs
from ._workload import COMPUTE, DELAY

__all__ = ["DataParallelTraffic"]


class DataParallelTraffic:
    """The DP calls of one step's trace: ``step`` the trace writer (its ``comms``, layout,
    chunks, compute times and ``coll``), ``schedule`` and ``compute`` (``layer_compute``'s
    parts) what ``compose`` timed the step with. ``rest_reduce``: the current rank's call
    reducing all gradient buckets but the last (reset per rank by :meth:`start`)."""

    def __init__(self, step, schedule, compute: dict):
        prof = step.profile
        self.step, self.comms, self.lay, self.m, self.chunks = step, step.comms, step.lay, step.m, step.chunks
        self.zero, self.dp_overlap = prof.zero, schedule.dp_overlap
        # FSDP: the compute each layer's traffic hides behind (compose: dp_overlap of a layer's
        # forward, of its backward with the forward again when full recompute takes every layer)
        again = schedule.recompute == "full" and schedule.recompute_layers is None
        self.fsdp_window = {"F": schedule.dp_overlap * compute["forward"],
                            "B": schedule.dp_overlap * (compute["backward"] + (compute["forward"] if again else 0.0))}
        self.fsdp_root = prof.fsdp_unit_scale() / self.lay.pp
        self.buckets = self.lay.vp if self.lay.vp > 1 else max(self.chunks[q][0] for q in range(self.lay.pp))
        self.dp_kinds = [k for k in ("dp", "dp_experts") if k in self.comms]
        self.rest_reduce = None
        # what each hidden DP call takes from the compute beside it (compose's dp_overlap_costs:
        # NCCL's CTAs on the SMs, its copies in the HBM): a compute node of that many seconds
        # where the call starts, so the compute beside it ends that much later, as compose counts
        self.costs = dp_overlap_costs(prof, compute)

    def contention(self, rank, seconds, name, after=()):
        """The compute a hidden DP call takes from the compute beside it, chained from here and
        after the nodes ``after`` (none at ``dp_overlap`` 0: no call runs beside the compute)."""
        if seconds > 0 and self.dp_overlap > 0:
            rank.add(f"contention.{name}", COMPUTE, duration=seconds, flops=0.0, deps=after)

    def cost(self, kinds, which) -> float:
        """Seconds of compute the calls of ``kinds`` take beside it (``which``: 0 the reduce, 1
        the gather)."""
        return sum(self.costs.get(k, (0.0, 0.0))[which] for k in kinds)

    def start(self, rank):
        """A new rank: its parameter gathers (:meth:`param_gathers`)."""
        self.rest_reduce = None
        return self.param_gathers(rank)

    def dp_calls(self, rank, op, share, name, deps) -> int:
        """``op`` on ``share`` of every DP kind's bytes (dense, then experts), one after the
        other from ``deps``; the last node."""
        prev = None
        for kind in self.dp_kinds:
            prev = self.step.coll(rank, kind, op, self.comms[kind].bytes * share, f"{name}.{kind}.{op}", chain=False,
                             deps=tuple(deps) if prev is None else (prev,))
        return prev

    def param_gathers(self, rank):
        """ZeRO 1 / 2: the first bucket's parameters all-gathered from the start, then the
        other buckets' in one call: ``(first, rest)`` nodes (``rest`` None with one bucket)."""
        if self.zero not in (1, 2) or not self.dp_kinds:
            return None
        c = self.buckets
        first = self.dp_calls(rank, "all_gather", 1.0 / c, "params.first", ())
        if c == 1:
            return first, None
        rest = self.dp_calls(rank, "all_gather", (c - 1) / c, "params.rest", (first,))
        # beside the forward, which starts once the first bucket's (exposed) gather is in: not
        # beside that gather at the rank's start (review21 F2: the charge vanished under it)
        self.contention(rank, (1.0 - 1.0 / c) * self.cost(self.dp_kinds, 1), "params.rest", after=(first,))
        return first, rest

    def reduce(self, rank, which):
        """The gradients of every bucket but the last (``which="rest"``, from the first
        bucket's completion) or of the last (after the rest and the backward)."""
        c, op = self.buckets, "all_reduce" if self.zero == 0 else "reduce_scatter"
        if which == "rest":
            if c > 1:
                self.rest_reduce = self.dp_calls(rank, op, (c - 1) / c, "grads.rest", (rank.point(),))
                self.contention(rank, (1.0 - 1.0 / c) * self.cost(self.dp_kinds, 0), "grads.rest")
            return
        deps = (rank.point(),) + ((self.rest_reduce,) if self.rest_reduce is not None else ())
        self.dp_calls(rank, op, 1.0 / c, "grads.last", deps)

    def zero3(self, rank, mb, delay):
        """ZeRO 3, the experts' shards, one microbatch: their parameters gathered twice and
        their gradients reduce-scattered, one after the other, after node ``delay``; the last
        node (the dense layers' FSDP traffic: :meth:`fsdp`)."""
        prev = delay
        self.contention(rank, self.cost(["dp_experts"], 0) + 2 * self.cost(["dp_experts"], 1), f"mb{mb}.dp_experts")
        for op in ("all_gather", "all_gather", "reduce_scatter"):
            prev = self.step.coll(rank, "dp_experts", op, self.comms["dp_experts"].bytes, f"mb{mb}.dp_experts.{op}",
                             chain=False, deps=(prev,))
        return prev

    def zero3_cut(self, stage):
        """Where a microbatch's expert ZeRO-3 traffic starts on ``stage`` (``vp = 1``): ``(d, k,
        seconds)``, ``seconds`` after the boundary before segment ``k`` of direction ``d``, so
        that ``dp_overlap`` of the microbatch's run (its compute and exposed TP / CP / EP waits,
        as ``compose`` counts it) is still to come."""
        layers, last = self.chunks[stage][0], stage == self.lay.pp - 1
        run = lambda d, again: self.step.pass_seconds(d, again) + self.step.exposed(d, again)  # noqa: E731
        forward = [run("F", False)] * layers + ([self.step.t_output_fwd] if last else [])
        backward = [run("B", self.step.recomputed(k)) for k in range(layers)]
        backward += [self.step.t_output - self.step.t_output_fwd] if last else []
        segments = [("F", k, t) for k, t in enumerate(forward)] + [("B", k, t) for k, t in enumerate(backward[::-1])]
        left = (1.0 - self.dp_overlap) * sum(t for *_, t in segments)
        for d, k, t in segments:
            if left < t:
                return d, k, left
            left -= t
        return "B", len(forward), 0.0

    def fsdp_calls(self, rank, calls, deps, delay=0.0):
        """FSDP's calls ``(op, layers, name)`` one after the other on its stream, from ``deps``:
        an all-gather of ``layers`` layers' parameters (``dp_gather``), a reduce-scatter of
        their gradients (``dp_reduce``); then, when ``delay`` is positive, a CPU-side delay of
        that many seconds after them (what the compute waiting for them waits the longer);
        the last node.

        The calls start where FSDP issues them (the layer's start) whatever ``dp_overlap``;
        the delay after them is the window the overlap does not give (``compose`` counts
        ``dp_overlap`` as a shorter window, not as traffic issued later). A delay before them
        (review21 F3) moved the traffic into the layer's last ``dp_overlap`` share, beside its
        TP collectives, which then shared links with it and ran slower than ``compose``'s
        (which has no such sharing): +5.2 % at ``dp_overlap`` 0.3 against +1.4 % at 1."""
        prev = None
        for op, layers, name in calls:
            comm = self.comms["dp_gather" if op == "all_gather" else "dp_reduce"]
            prev = self.step.coll(rank, "dp", op, comm.bytes * layers, name, chain=False, deps=deps)
            deps = (prev,)
        if delay > 0 and prev is not None:
            prev = rank.add("fsdp.window", DELAY, chain=False, deps=(prev,), duration=delay)
        return prev

    def fsdp_delay(self, d, again):
        """The delay that makes a window of FSDP traffic launched at a layer's start expose what
        ``compose`` exposes (``fsdp_exposed``: what the traffic outlasts ``dp_overlap`` of the
        layer's run, its compute and its share of the layer's exposed TP / CP / EP waits): the
        layer's compute and exposed communication less that window."""
        waits = self.step.exposed("F", False) + self.step.exposed("B", again)
        total = self.fsdp_window["F"] + self.fsdp_window["B"]
        share = (self.fsdp_window[d] / total) if total > 0 else 0.0
        window = self.fsdp_window[d] + self.dp_overlap * share * waits
        return max(0.0, self.step.pass_seconds(d, again) + self.step.exposed(d, again) - window)

    def fsdp(self, stage, d, mb, rank, when, later):
        """FSDP per layer (``compose``'s ``fsdp_exposed``, as PyTorch FSDP2 and DeepSpeed
        ZeRO-3 schedule it): forward, the root unit's and the first layer's parameters gathered
        before the first layer, each next layer's gathered beside the current one, the next
        layer waiting for it; backward, each layer beside the next layer's gather and the
        previous layer's gradient reduce-scatter, the next layer waiting for both, the last
        layer's and the root's reduce-scatters after the last compute, waited for by the next
        pass (``later``). Without pipelining every microbatch does this. With it (parameters
        kept between microbatches) the first forward gathers and the last backward
        reduce-scatters, each layer's gradients as the layer's backward ends, one after the
        other on their own stream (each taking the delay of :meth:`fsdp_delay` with it: the
        window ``compose`` gives it), which holds no compute and no transfer."""
        keep, n = self.lay.pp > 1, self.chunks[stage][0]
        first = self.step.first_layer(stage, 0)
        root = [("all_gather" if d == "F" else "reduce_scatter", self.fsdp_root, f"{d}{mb}.fsdp.root")] \
            if self.fsdp_root > 0 else []
        name = lambda layer, what: f"{d}{mb}.c0.L{layer}.fsdp.{what}"
        pending = []

        def taken(calls):
            """What ``calls`` take from the layer they run beside (compose's fsdp_exposed costs)."""
            return sum(self.cost(["dp_gather" if op == "all_gather" else "dp_reduce"], 0) * layers
                       for op, layers, _ in calls)

        def window(calls, again):
            """The calls beside the layer starting now, joined before the next one starts."""
            if pending:
                rank.join.append(pending.pop())
            if calls:
                pending.append(self.fsdp_calls(rank, calls, (rank.point(),), self.fsdp_delay(d, again)))
                self.contention(rank, taken(calls), calls[0][2])

        def stream(calls, again):
            """The calls after the previous ones on the stream and the compute so far."""
            at = rank.point()
            deps = ((at,) if at is not None else ()) + tuple(pending)
            pending[:] = [self.fsdp_calls(rank, calls, deps, self.fsdp_delay(d, again))]
            self.contention(rank, taken(calls), calls[0][2])

        if d == "F" and (not keep or mb == 0):
            def head():
                at = rank.point()
                rank.join.append(self.fsdp_calls(rank, root + [("all_gather", 1, name(first, "gather"))],
                                                 () if at is None else (at,)))
            when(0, head)
            for k in range(n):
                calls = [("all_gather", 1, name(first + k + 1, "gather"))] if k < n - 1 else []
                when(k, lambda calls=calls: window(calls, False))
        elif d == "B" and (not keep or mb == self.m - 1):
            off = 1 if stage == self.lay.pp - 1 else 0                    # the output projection's backward first
            for i in range(n):
                layer = first + n - 1 - i
                again = self.step.recomputed(layer - first)
                if keep:
                    if i > 0:
                        when(off + i, lambda layer=layer, again=again:
                             stream([("reduce_scatter", 1, name(layer + 1, "reduce"))], again))
                    continue
                calls = ([("all_gather", 1, name(layer - 1, "gather"))] if i < n - 1 else []) + \
                        ([("reduce_scatter", 1, name(layer + 1, "reduce"))] if i > 0 else [])
                when(off + i, lambda calls=calls, again=again: window(calls, again))

            def tail():
                at = rank.point()
                deps = ((at,) if at is not None else ()) + tuple(pending)
                later.append(self.fsdp_calls(rank, [("reduce_scatter", 1, name(first, "reduce"))] + root, deps))
            when(off + n, tail)

    def zero3_start(self, rank, seconds):
        """A delay node of ``seconds`` from the current point (CPU side, no GPU time): the
        FSDP traffic starts no earlier."""
        at = rank.point()
        return rank.add("fsdp.window", DELAY, chain=False, deps=() if at is None else (at,), duration=seconds)

    def hooks(self, rank, stage, d, mb, chunk, passes, gathers, zero3_end, later):
        """What runs between the segments of this pass: the DP calls it waits for or
        launches (ZeRO 0 - 2, ``compose``'s windows: the gradients of all buckets but the last
        reduced from the first bucket's completion, the last after the backward, in the last
        microbatch's backward, in every one with ZeRO 2; the first
        bucket's parameters before the first forward, the others' before the first forward
        of chunk 1 or, without pipelining, by the end of the first forward), or the FSDP
        traffic of its microbatch (ZeRO 3: the dense layers' per layer, :meth:`fsdp`, the
        experts' per microbatch; what the next pass waits for goes to ``later``)."""
        n, o, at = self.step.segments(stage, chunk), self.dp_overlap, passes.index((d, mb, chunk))
        todo = {}

        def when(k, action):
            todo.setdefault(k, []).append(action)

        if self.zero == 3 and "dp_gather" in self.comms:
            self.fsdp(stage, d, mb, rank, when, later)
        if self.zero == 3 and "dp_experts" in self.comms:
            cut_d, cut_k, seconds = self.zero3_cut(stage)
            if d == cut_d:
                when(cut_k, lambda: zero3_end.__setitem__(mb, self.zero3(rank, mb, self.zero3_start(rank, seconds))))
        first_f = d == "F" and not any(p[0] == "F" and p[2] == chunk for p in passes[:at])
        if gathers is not None and first_f:
            head, rest = gathers
            if chunk == 0:
                when(0, lambda: rank.join.append(head))
            if rest is not None and self.lay.vp == 1:
                when(round(o * n), lambda: rank.join.append(rest))
            elif rest is not None and chunk == (1 if o > 0 else 0):
                when(0, lambda: rank.join.append(rest))
        last_b = d == "B" and not any(p[0] == "B" and p[2] == chunk for p in passes[at + 1:])
        last_b = last_b or (d == "B" and self.zero == 2)        # ZeRO 2 reduces every microbatch's gradients
        if self.zero != 3 and self.dp_kinds and last_b:
            if self.lay.vp == 1:
                when(round((1.0 - o) * n), lambda: self.reduce(rank, "rest"))
            elif chunk == self.lay.vp - 1 - round((1.0 - o) * (self.lay.vp - 1)):
                when(n, lambda: self.reduce(rank, "rest"))
            if chunk == 0:
                when(n, lambda: self.reduce(rank, "last"))
        return lambda k: [action() for action in todo.get(k, ())]

