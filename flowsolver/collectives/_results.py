"""Result types of collectives: one distinct step, one collective, collectives run together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._status import Status
from ..routing import first_tier

__all__ = ["CollectiveStep", "CollectiveResult", "ConcurrentResult", "Derivation", "TunedFormula",
           "KEEP_ROUTING_BYTES"]

#: the most bytes of routing (its steps' routing matrices) a result keeps for its derivatives,
#: read at each result: past it the result keeps none and says why (``Derivation.why_not``:
#: ``sensitivity()``, ``time_gradient()`` and the failure what-ifs' fast path then refuse or
#: re-solve), so that a caller keeping many large results does not hold them all (a tree
#: all-reduce over 20 NVL72 racks keeps ~3.4 GB; all-to-all over 256 DGX H100 0.12 GB).
#: Set ``flowsolver.collectives._results.KEEP_ROUTING_BYTES`` higher before a call to keep more.
KEEP_ROUTING_BYTES = 1 << 30


@dataclass(frozen=True)
class CollectiveStep:
    """One distinct step: ``count`` identical steps of ``flows`` flows of ``bytes`` each
    (bytes on the wire; for ``nvls`` the in-switch reduction's NCCL efficiency is counted as
    extra wire bytes).

    ``transfer`` and ``latency`` are seconds per step; ``bottleneck`` the saturated links
    that are the max-min bottleneck of some flow of the step (:class:`flowsolver.routing.Bottleneck`
    records), the link whose flows would take longest at the step's first rates first (the
    links that set the step time).

    ``slow_paths``: the step's paths slower than the link catalogue makes them (a machine
    file's latencies, an edited graph), as ``(between_nodes, path, excess)`` triples (s:
    the path's latency, the sum of its links' fluid-weighted; its excess over the same
    links at their catalogue latency, 0 for a technology the catalogue lacks), those no
    other triple of the step's kind exceeds in both; ``()`` on catalogue graphs. NCCL's cost
    model prices a hop at least at its path (:func:`flowsolver.collectives._nccl_timing.path_excess`).
    """

    count: int
    flows: int
    bytes: float
    transfer: float
    latency: float
    bottleneck: tuple
    latency_count: int | None = None
    slow_paths: tuple = field(default=(), repr=False, compare=False)

    @property
    def time(self) -> float:
        """Seconds for all ``count`` steps: ``count`` transfers and ``latency_count`` (default
        ``count``) latencies; a pipeline pays its depth in latencies, not one per chunk."""
        paid = self.count if self.latency_count is None else self.latency_count
        return self.count * self.transfer + paid * self.latency

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the link that holds the step back most ("" if none)."""
        return first_tier(self.bottleneck)


@dataclass(eq=False)
class Derivation:
    """What a collective's transfers were solved on, kept for its derivatives: per distinct
    step ``(routing, sizes, count)``, the effective capacities (bytes/s) the steps ran on and
    the raw link capacities (bytes/s) they come from."""

    steps: tuple
    effective: np.ndarray
    raw: np.ndarray
    cache: dict = field(default_factory=dict, repr=False)
    why_not: str = ""          # why the time has no derivative here (else "")
    tuned: "TunedFormula | None" = None   # NCCL's cost model set the time: its formula
    # a send / receive: (least transfer its P2P channels allow, its flows' solved transfer), s;
    # the time is the steps' with max(least, transfer) for their transfer (None: no such bound)
    p2p: "tuple | None" = None

    def __post_init__(self):
        kept = {id(rm): rm for rm, *_ in (*self.steps, *(() if self.tuned is None else
                                                        (*self.tuned.ring, *self.tuned.own)))}
        size = sum(int(getattr(rm, "nbytes", 0)) for rm in kept.values())
        if size > KEEP_ROUTING_BYTES:       # (read at each result: a caller may change it)
            self.why_not = (f"the result keeps no routing for its derivatives: its steps' ({size / 1e9:.2f} GB) is more "
                            f"than KEEP_ROUTING_BYTES ({KEEP_ROUTING_BYTES / 1e9:.2f} GB; set "
                            "flowsolver.collectives._results.KEEP_ROUTING_BYTES higher before the call to keep it)")
            self.steps, self.tuned, self.cache = (), None, {}


@dataclass(eq=False)
class TunedFormula:
    """A time set by NCCL's cost model, kept for its derivative: ``formula(ring, own,
    nvlink)`` the time (s) from the ring's transfer (s; the graph's bus bandwidth), the
    algorithm's own steady-state transfer (s) and a GPU's NVLink bandwidth (bytes/s), which
    are ``values``; ``ring`` and ``own`` the ``(routing, sizes, multiplier)`` of the solved
    steps that add up to the first two; ``nvlink`` the indices (graph edge order) of the ranks'
    NVLink links, or a function of no arguments giving them, whose least effective capacity is
    the third (() if none); ``net`` the cells
    (:func:`~._net_cells.net_cells`, or a function of no arguments giving them,
    :func:`~._nccl_timing.lazy_net_cells`) whose least weighted sum of effective capacities is
    the fourth value, NCCL's view of the NICs (``Hardware.net_bw``, bytes/s), which ``formula``
    takes as an optional fourth argument (() if none)."""

    formula: object
    ring: tuple
    own: tuple
    values: tuple
    nvlink: object = ()
    net: object = ()

    def nvlinks(self) -> tuple:
        """:attr:`nvlink`'s indices (found on first use where it is a function)."""
        return self.nvlink() if callable(self.nvlink) else self.nvlink


@dataclass(frozen=True)
class CollectiveResult:
    """Result of :func:`flowsolver.collective`.

    ``time`` seconds; ``algbw = size / time`` and ``busbw`` bytes/s (nccl-tests);
    ``steps`` the distinct steps; ``link_utilization`` per link (graph edge order), the
    time-weighted mean over the transfers, at most 1 (NVLS, NVLSTree and PAT, timed by NCCL's
    model from the ring's solve: the ring solve's where NCCL's time is shorter than its bytes allow); ``candidates`` the time of every algorithm solved;
    ``pruned`` the algorithms ``"auto"`` did not solve, with the lower bound (s) that showed
    they cannot beat the chosen one. ``bottleneck`` the links that set the time: those of
    the step that takes longest in all (its ``count`` repetitions included), and
    ``bottleneck_tier`` the tier of its first ("" if none). ``status`` is ``Status.OK``, or
    ``Status.STALLED`` for a variant of :func:`flowsolver.collective_variants` whose flows
    cannot complete (``time`` inf, the reason in ``message``). ``protocol`` and
    ``channels`` the NCCL protocol and the communicator's channel count (a send / receive: the
    channels its send is striped over; where they bind, no link is the bottleneck and
    ``bottleneck_tier`` is ""); ``channels_run`` the channels NCCL runs at this size (ring and
    tree drop channels below their size thresholds: where a time steps with the size, this says
    which regime it is in); ``nccl`` whether NCCL runs the
    chosen algorithm (False: a what-if of ``candidates="all"`` or an explicit choice);
    ``choices`` the time of every ``"algorithm/protocol"`` pair NCCL's cost model timed
    (what its kernels would take: :mod:`~flowsolver.collectives._pipeline`), ``estimates``
    NCCL's own estimate of each (``latency + size / bandwidth``): NCCL runs the least one.
    """

    op: str
    algorithm: str
    size: float
    ranks: int
    time: float
    algbw: float
    busbw: float
    # (per-link arrays and the steps left out of the printed form: thousands of values; newuser23)
    steps: tuple = field(repr=False)
    link_utilization: np.ndarray = field(repr=False)
    links: object = field(repr=False)
    candidates: dict = field(default_factory=dict)
    pruned: dict = field(default_factory=dict)
    status: Status = Status.OK
    message: str = ""
    protocol: str = "Simple"
    channels: int = 0
    channels_run: int = 0
    nccl: bool = True
    choices: dict = field(default_factory=dict)
    estimates: dict = field(default_factory=dict)
    solved_on: Derivation | None = field(default=None, repr=False, compare=False)

    def time_gradient(self, side: str = "up") -> np.ndarray:
        """d time / d capacity of each link alone (graph edge order), seconds per byte/s
        (``side="down"``: for a decrease). Exact: through every step's event-driven solve
        (:func:`flowsolver.completion_sensitivity`), the new event order included where
        the change moves apart flows that finish together."""
        from ._sensitivity import time_gradient

        return time_gradient(self._derivation(), side)

    def time_directional(self, d_capacity, side: str = "up") -> float:
        """The one-sided derivative of ``time`` (s) along a change ``d_capacity`` (bytes/s per
        link, graph edge order) of the raw link capacities."""
        from ._sensitivity import time_directional

        return time_directional(self._derivation(), d_capacity, side)

    def sensitivity(self, side: str = "up"):
        """Time saved per added GB/s, for every link and aggregated by tier, technology and
        cable group (tier and technology): a tidy pandas DataFrame (see
        :func:`flowsolver.collectives.sensitivity_table`; needs pandas)."""
        from ._sensitivity import sensitivity_table

        return sensitivity_table(self.links, self.time, lambda s: self.time_gradient(s),
                                 lambda dc, s: self.time_directional(dc, s), side)

    def _derivation(self) -> Derivation:
        if self.solved_on is None or self.status != Status.OK:
            raise ValueError("sensitivity: this result carries no solved steps (a stalled collective, or one built "
                             "by hand); time it with flowsolver.collective")
        if self.solved_on.why_not:
            raise ValueError(f"sensitivity: {self.solved_on.why_not}")
        return self.solved_on

    @property
    def bottleneck(self) -> tuple:
        """The :class:`~flowsolver.routing.Bottleneck` records of the longest step."""
        if not self.steps:
            return ()
        return max(self.steps, key=lambda st: st.time).bottleneck

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the first link of :attr:`bottleneck` ("" if none)."""
        return first_tier(self.bottleneck)

    def to_dataframe(self):
        """The steps as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame([dict(count=s.count, latency_count=s.latency_count, flows=s.flows, bytes=s.bytes,
                                  transfer=s.transfer, latency=s.latency, time=s.time,
                                  bottleneck_tier=s.bottleneck_tier,
                                  bottleneck=" ".join(f"{b.src}->{b.dst}" for b in s.bottleneck[:3]))
                             for s in self.steps])


@dataclass(frozen=True)
class ConcurrentResult:
    """Result of :func:`flowsolver.concurrent`: per collective, its time alone and together
    (s) and the slowdown (together / alone); ``makespan`` is when the last one finished;
    ``bottleneck`` the links that set the time of the collectives' first steps run together
    (:class:`~flowsolver.routing.Bottleneck` records), ``bottleneck_tier`` the first one's
    tier; ``status`` ``Status.OK``, or ``Status.NOT_CONVERGED`` where the event engine hit
    its bound before every collective finished (their times are then inf)."""

    alone: tuple
    together: tuple
    slowdown: tuple
    makespan: float
    algorithms: tuple
    bottleneck: tuple = ()
    status: Status = Status.OK
    lockstep: CollectiveResult | None = field(default=None, repr=False, compare=False)

    @property
    def bottleneck_tier(self) -> str:
        """Tier of the first link of :attr:`bottleneck` ("" if none)."""
        return first_tier(self.bottleneck)
