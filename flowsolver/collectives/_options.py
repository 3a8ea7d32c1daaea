"""The options of a collective run, checked and resolved once at the entry and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import _checks
from ._nccl import ALGORITHMS, DEFAULT_CHUNK, OPS, PROTOCOLS, base_latency

__all__ = ["Options", "check_call"]


@dataclass(frozen=True)
class Options:
    """How collectives are routed and timed (see :func:`flowsolver.collective`).

    ``policy`` / ``policy_options`` the routing policy and its options, ``pxn`` PXN for
    cross-rail hops (folded into the ECMP policies' options by :attr:`route_options`),
    ``protocol`` the NCCL protocol of the latency constants, ``chunk`` the pipeline chunk
    (bytes), ``efficiency`` the link efficiency override, ``step_latency`` /
    ``base_latency`` latency overrides (s), ``channels`` rings side by side (None: default).
    ``tuner``: time NCCL's algorithms with NCCL's cost model (:mod:`._tuner`; off where
    ``step_latency`` fixes an alpha per step, and for :func:`flowsolver.concurrent`'s event
    engine); ``candidates`` ``"nccl"`` (``"auto"`` picks among what NCCL runs) or ``"all"``.
    """

    policy: str = "ecmp"
    policy_options: dict = field(default_factory=dict)
    pxn: bool = True
    protocol: str = "Simple"
    chunk: float = float(DEFAULT_CHUNK)
    efficiency: object = None
    step_latency: float | None = None
    base_latency: float | None = None
    channels: int | None = None
    tuner: bool = False
    candidates: str = "nccl"

    @property
    def step_protocol(self) -> str:
        """The protocol of the per-step latency constants (``"auto"`` counts as Simple)."""
        return "Simple" if self.protocol == "auto" else self.protocol

    @property
    def route_options(self) -> dict:
        """Keyword options of :func:`flowsolver.route` (PXN for the ECMP policies)."""
        options = dict(self.policy_options or {})
        if self.policy in ("ecmp", "ecmp_hash"):
            options.setdefault("pxn", self.pxn)
        return options

    @property
    def base(self) -> float:
        """The per-collective base latency (s)."""
        return base_latency(self.step_protocol, self.base_latency)


def check_call(op, algorithm, size, options: Options) -> None:
    """ValueError naming the first bad argument of a collective call."""
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    allowed = ALGORITHMS[op]
    if algorithm != "auto" and algorithm not in allowed:
        raise ValueError(f"algorithm for {op} must be 'auto' or one of {', '.join(allowed)}, got {algorithm!r}")
    if options.protocol != "auto" and options.protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be 'auto' or one of {', '.join(PROTOCOLS)}, got {options.protocol!r}")
    if options.candidates not in ("nccl", "all"):
        raise ValueError(f"candidates must be 'nccl' or 'all', got {options.candidates!r}")
    _checks.positive_number("size", size, "bytes")
    _checks.positive_number("chunk", options.chunk, "bytes")
