"""The data-parallel part of the trace writer (:mod:`._from_step`): DP's gradient and
parameter calls in ``compose``'s windows and buckets (ZeRO 0 - 2), FSDP's per-microbatch
traffic (ZeRO 3), and the hooks that place them between a pass's segments."""

from __future__ import annotations

from ._workload import DELAY

__all__ = ["DataParallelWriter"]


class DataParallelWriter:
    """Methods of the writer's builder for data parallelism; they read the builder's
    ``comms``, ``dp_kinds``, ``zero``, ``dp_overlap``, ``buckets``, ``lay``, ``chunks`` and
    its compute times, and add to a rank's node list (``_Rank``)."""

    def dp_calls(self, rank, op, share, name, deps) -> int:
        """``op`` on ``share`` of every DP kind's bytes (dense, then experts), one after the
        other from ``deps``; the last node."""
        prev = None
        for kind in self.dp_kinds:
            prev = self.coll(rank, kind, op, self.comms[kind].bytes * share, f"{name}.{kind}.{op}", chain=False,
                             deps=tuple(deps) if prev is None else (prev,))
        return prev

    def param_gathers(self, rank):
        """ZeRO 1 / 2: the first bucket's parameters all-gathered from the start, then the
        other buckets' in one call: ``(first, rest)`` nodes (``rest`` None with one bucket)."""
        if self.zero not in (1, 2) or not self.dp_kinds:
            return None
        c = self.buckets
        first = self.dp_calls(rank, "all_gather", 1.0 / c, "params.first", ())
        return first, (self.dp_calls(rank, "all_gather", (c - 1) / c, "params.rest", (first,)) if c > 1 else None)

    def reduce(self, rank, which):
        """The gradients of every bucket but the last (``which="rest"``, from the first
        bucket's completion) or of the last (after the rest and the backward)."""
        c, op = self.buckets, "all_reduce" if self.zero == 0 else "reduce_scatter"
        if which == "rest":
            if c > 1:
                self.rest_reduce = self.dp_calls(rank, op, (c - 1) / c, "grads.rest", (rank.point(),))
            return
        deps = (rank.point(),) + ((self.rest_reduce,) if self.rest_reduce is not None else ())
        self.dp_calls(rank, op, 1.0 / c, "grads.last", deps)

    def zero3(self, rank, mb, delay):
        """FSDP, one microbatch: the parameters gathered twice and the gradients
        reduce-scattered, one after the other, after node ``delay``; the last node."""
        prev = delay
        for kind in self.dp_kinds:
            for op in ("all_gather", "all_gather", "reduce_scatter"):
                prev = self.coll(rank, kind, op, self.comms[kind].bytes, f"mb{mb}.{kind}.{op}", chain=False,
                                 deps=(prev,))
        return prev

    def zero3_cut(self, stage):
        """Where a microbatch's FSDP traffic starts on ``stage`` (``vp = 1``): ``(d, k,
        seconds)``, ``seconds`` of compute after the boundary before segment ``k`` of
        direction ``d``, so that ``dp_overlap`` of the microbatch's compute is still to come."""
        layers, last = self.chunks[stage][0], stage == self.lay.pp - 1
        forward = [self.pass_seconds("F", False)] * layers + ([self.t_output / 3] if last else [])
        backward = [self.pass_seconds("B", self.recomputed(k)) for k in range(layers)]
        backward += [2 * self.t_output / 3] if last else []
        segments = [("F", k, t) for k, t in enumerate(forward)] + [("B", k, t) for k, t in enumerate(backward[::-1])]
        left = (1.0 - self.dp_overlap) * sum(t for *_, t in segments)
        for d, k, t in segments:
            if left < t:
                return d, k, left
            left -= t
        return "B", len(forward), 0.0

    def zero3_start(self, rank, seconds):
        """A delay node of ``seconds`` from the current point (CPU side, no GPU time): the
        FSDP traffic starts no earlier."""
        at = rank.point()
        return rank.add("fsdp.window", DELAY, chain=False, deps=() if at is None else (at,), duration=seconds)

    def hooks(self, rank, stage, d, mb, chunk, passes, gathers, zero3_end):
        """What runs between the segments of this pass: the DP calls it waits for or
        launches (ZeRO 0 - 2, ``compose``'s windows: the gradients of all buckets but the last
        reduced from the first bucket's completion, the last after the backward; the first
        bucket's parameters before the first forward, the others' before the first forward
        of chunk 1 or, without pipelining, by the end of the first forward), or the FSDP
        traffic of its microbatch."""
        n, o, at = self.segments(stage, chunk), self.dp_overlap, passes.index((d, mb, chunk))
        todo = {}

        def when(k, action):
            todo.setdefault(k, []).append(action)

        if self.zero == 3 and self.dp_kinds:
            cut_d, cut_k, seconds = self.zero3_cut(stage)
            if d == cut_d:
                when(cut_k, lambda: zero3_end.__setitem__(mb, self.zero3(rank, mb, self.zero3_start(rank, seconds))))
        first_f = d == "F" and not any(p[0] == "F" and p[2] == chunk for p in passes[:at])
        if gathers is not None and first_f:
            head, rest = gathers
            if chunk == 0:
                when(0, lambda: rank.join.append(head))
            if rest is not None and self.lay.pp == 1:
                when(round(o * n), lambda: rank.join.append(rest))
            elif rest is not None and chunk == (1 if o > 0 else 0):
                when(0, lambda: rank.join.append(rest))
        last_b = d == "B" and not any(p[0] == "B" and p[2] == chunk for p in passes[at + 1:])
        if self.zero != 3 and self.dp_kinds and last_b:
            if self.lay.pp == 1:
                when(round((1.0 - o) * n), lambda: self.reduce(rank, "rest"))
            elif chunk == self.lay.vp - 1 - round((1.0 - o) * (self.lay.vp - 1)):
                when(n, lambda: self.reduce(rank, "rest"))
            if chunk == 0:
                when(n, lambda: self.reduce(rank, "last"))
        return lambda k: [action() for action in todo.get(k, ())]

