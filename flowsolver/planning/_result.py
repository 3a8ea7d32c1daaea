"""What plan returns: the ranked layouts, the Pareto front of throughput against memory, the
pruning counts and the search's own figures."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .._design import pareto_front
from ._space import Layout

__all__ = ["Plan", "PlanRow", "pareto_rows"]

_KINDS = ("tp", "cp", "pp", "ep", "dp")


@dataclass(frozen=True)
class PlanRow:
    """One layout timed on the cluster: ``step_time`` (s), ``tokens_per_gpu`` (tokens/s per
    GPU), ``mfu`` (model FLOP/s over the GPUs' dense peak of the precision), ``memory``
    (bytes per GPU, the largest stage's estimate), ``compute`` and ``bubble`` (s of the
    step), ``exposed`` (s of exposed communication per kind: tp, cp, pp, ep, dp; tp is the TP
    groups' traffic, a mixture of experts' token-dispatcher collectives included: the step's
    ``etp`` phase),
    ``bottleneck_tier`` (the tier of the link that holds back the most exposed kind, ``""``
    without communication), ``bound`` (the lower bound it was ranked by before timing, s)
    and ``result`` (the :class:`flowsolver.StepResult`)."""

    layout: Layout
    step_time: float
    tokens_per_gpu: float
    mfu: float
    memory: float
    compute: float
    bubble: float
    exposed: dict
    bottleneck_tier: str
    bound: float
    result: object = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, layout: Layout, result, bound: float, memory: float) -> "PlanRow":
        parts = result.breakdown
        exposed = {k: float(parts.get(k, 0.0)) for k in _KINDS}
        exposed["tp"] += float(parts.get("etp", 0.0))       # the TP groups' traffic: a MoE's dispatcher's too
        return cls(layout=layout, step_time=float(result.step_time), tokens_per_gpu=float(result.tokens_per_gpu),
                   mfu=float(result.mfu), memory=float(memory), compute=float(result.compute_time),
                   bubble=float(result.bubble_time), exposed=exposed, bottleneck_tier=result.bottleneck_tier,
                   bound=float(bound), result=result)

    def as_dict(self) -> dict:
        """Flat columns: the layout's fields, the figures, ``exposed_<kind>`` per kind."""
        lay = self.layout
        out = dict(layout=lay.label, tp=lay.tp, cp=lay.cp, pp=lay.pp, vp=lay.vp, dp=lay.dp, ep=lay.ep,
                   micro_batch=lay.micro_batch, recompute=lay.recompute, zero=lay.zero,
                   sequence_parallel=lay.sequence_parallel, order="-".join(lay.order),
                   **({"placement": lay.placement} if lay.placement else {}),
                   step_time=self.step_time, tokens_per_gpu=self.tokens_per_gpu, mfu=self.mfu,
                   memory_gb=self.memory / 1e9, compute=self.compute, bubble=self.bubble)
        out.update({f"exposed_{k}": v for k, v in self.exposed.items()})
        out.update(bottleneck_tier=self.bottleneck_tier, bound=self.bound)
        return out


def pareto_rows(rows) -> list:
    """The rows no other row beats on both step time and memory (fastest first)."""
    rows = list(rows)
    keep = pareto_front([(r.step_time, r.memory) for r in rows])
    return sorted((rows[i] for i in keep), key=lambda r: (r.step_time, r.memory))


@dataclass(frozen=True)
class Plan:
    """The result of :func:`flowsolver.plan`.

    ``rows``: the fastest layouts timed, fastest first (:class:`PlanRow`); ``timed``: every
    layout timed exactly; ``front``: the Pareto front of throughput against memory among
    them. ``total`` combinations were enumerated, ``feasible`` kept, ``pruned`` maps each
    reason (:data:`flowsolver.planning.PRUNE_REASONS`) to its count. ``proven``: the search
    stopped because the slowest returned row is no slower than the best bound not timed
    (``next_bound``, s) made ``tolerance`` faster, so ``rows`` are the best of the feasible
    layouts under the model (within ``tolerance``: 0 exactly); False when ``max_solves``
    ended it first. ``profiles_solved`` profiles were solved
    on the network, from ``kinds_solved`` distinct collective kinds (``kinds_reused`` found
    already solved) in ``solver_calls`` batched calls; ``seconds``: wall time of each part of
    the search (enumerate, bound, exact, total).
    """

    model: str
    gpus: int
    global_batch: int
    seq_len: int
    precision: str
    rows: tuple
    timed: tuple
    front: tuple
    total: int
    feasible: int
    pruned: dict
    usable_memory: float
    proven: bool
    next_bound: float | None
    tolerance: float
    profiles_solved: int
    kinds_solved: int
    kinds_reused: int
    solver_calls: int
    seconds: dict

    @property
    def best(self) -> PlanRow:
        """The fastest layout."""
        if not self.rows:
            raise ValueError("no feasible layout: see .pruned for why each was dropped")
        return self.rows[0]

    def summary(self) -> str:
        """The search in a few lines: combinations, pruning per reason, solves, times."""
        reasons = ", ".join(f"{k} {v:,}" for k, v in self.pruned.items() if v)
        s = self.seconds
        within = f" by more than {self.tolerance:.1%}" if self.tolerance else ""
        proof = (f"proven: no untimed layout can beat the last row{within}" if self.proven else
                 f"NOT proven: stopped at max_solves, best untimed bound {self.next_bound:.3f} s")
        if not self.feasible:
            proof = "no feasible layout: the pruning above says why each combination was dropped"
        return "\n".join([
            f"# {self.model} on {self.gpus:,} GPUs, global batch {self.global_batch:,} x {self.seq_len:,} tokens, "
            f"{self.precision}",
            f"{self.total:,} combinations, {self.feasible:,} feasible (memory <= {self.usable_memory / 1e9:.1f} GB); "
            f"pruned: {reasons or 'none'}",
            f"{len(self.timed):,} layouts timed from {self.profiles_solved:,} profiles, {self.kinds_solved:,} "
            f"collective kinds solved ({self.kinds_reused:,} reused) in {self.solver_calls:,} solver calls; {proof}",
            f"search {s['total']:.1f} s (enumerate {s['enumerate']:.1f}, bound {s['bound']:.1f}, "
            f"exact {s['exact']:.1f})"])

    def table(self, rows=None) -> str:
        """The ranked rows (or ``rows``) as aligned text: layout, step time (s), tokens/s per
        GPU, MFU, GB per GPU, exposed communication (s) per kind, bottleneck tier; layouts that
        differ only in their rank order and take the same time share a row, which names the
        orders (``tp-cp-pp-dp | tp-cp-dp-pp``) and keeps the first one's number in ``rows``."""
        rows = self.rows if rows is None else rows
        head = (f"{'#':>3s} {'layout':52s} {'step s':>8s} {'tok/s/GPU':>9s} {'MFU':>6s} {'GB':>6s} "
                + " ".join(f"{k:>6s}" for k in _KINDS) + "  tier")
        # layouts that differ only in their rank order and take the same time (to 1e-9) are one
        # row naming the orders (newuser27 #8: a symmetric fabric gave each layout twice)
        shown: list = []        # (its number in ``rows``, the row, the orders it stands for)
        for n, r in enumerate(rows, 1):
            twin = next((x for x in shown if replace(x[1].layout, order=()) == replace(r.layout, order=())
                         and abs(x[1].step_time - r.step_time) <= 1e-9 * r.step_time), None)
            if twin is None:
                shown.append((n, r, ["-".join(r.layout.order)]))
            else:
                twin[2].append("-".join(r.layout.order))
        lines = [head]
        for n, r, orders in shown:
            label = r.layout.label.replace("-".join(r.layout.order), " | ".join(orders), 1)
            lines.append(f"{n:3d} {label:52s} {r.step_time:8.3f} {r.tokens_per_gpu:9,.0f} {r.mfu:6.1%} "
                         f"{r.memory / 1e9:6.1f} " + " ".join(f"{r.exposed[k]:6.3f}" for k in _KINDS)
                         + f"  {r.bottleneck_tier}")
        return "\n".join(lines)

    def to_dataframe(self, which: str = "rows"):
        """``rows``, ``timed`` or ``front`` as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        if which not in ("rows", "timed", "front"):
            raise ValueError(f"which must be rows, timed or front, got {which!r}")
        return pd.DataFrame([r.as_dict() for r in getattr(self, which)])

    def __str__(self) -> str:
        return self.summary() + "\n" + self.table()



