"""The result of :func:`flowsolver.calibrate`: the fitted quantities, each with its
uncertainty and whether the logs constrained it, and the hooks through which
:func:`flowsolver.collective` applies them (``model=``)."""

from __future__ import annotations

import math

from dataclasses import dataclass, replace

from .. import _checks
from ..routing import gpu_nodes
from ._calibration_file import read_calibration, save_calibration
from ._nccl_model import tuner_hops
from ._option_values import graph_technologies
from ._options import Options, check_efficiency_keys
from ._pipeline import PIPELINE, Pipeline

__all__ = ["Calibration", "FittedParameter"]


@dataclass(frozen=True)
class FittedParameter:
    """One physical quantity of a :class:`Calibration`: ``name``, the fitted ``value`` and the
    library's ``default`` (in ``unit``: ``"x"`` a factor on the library's, ``"s"`` seconds,
    ``"steps"`` pipeline steps), ``uncertainty`` (one standard deviation, same unit; None where
    the logs did not constrain it) and ``constrained`` (False: the logs' sizes do not move it
    enough to tell, so it stays at ``default``).

    >>> print(FittedParameter("fill_ring", 2.5, 1.88, 0.4, True, "steps"))
    fill_ring          2.500 steps  +- 0.400  (library 1.880)
    """

    name: str
    value: float
    default: float
    uncertainty: float | None
    constrained: bool
    unit: str

    def __str__(self) -> str:
        scale, unit = (1e6, "us") if self.unit == "s" else (1.0, self.unit)
        head = f"{self.name:14s} {self.value * scale:9.3f} {unit:6s}"
        if not self.constrained:
            return f"{head} not constrained (library value)"
        return f"{head} +- {self.uncertainty * scale:.3f}  (library {self.default * scale:.3f})"


@dataclass(frozen=True)
class Calibration:
    """Fitted constants: ``efficiency`` (technology name -> fraction of the raw rate),
    ``latency_scale`` (NCCL's predicted latencies are multiplied by it; not fitted, 1 unless
    set), ``launch_latency``
    (s, added to every call), ``net_latency`` (s, added to each network hop NCCL's latency
    counts, twice for Simple), ``ll_bandwidth``
    (LL's kernel bandwidth as a factor on NCCL's), ``p2p_bandwidth`` (a send / receive channel's
    rate as a factor on :data:`~._p2p.P2P_CHANNEL_SHARE`'s), ``pipeline`` (the
    :class:`~._pipeline.Pipeline` of step floors and fills), ``parameters`` (a
    :class:`FittedParameter` per fitted quantity: value, library default, uncertainty, whether
    the logs constrained it), ``unconstrained`` (the names of those the logs could not tell:
    left at the library's value, e.g. ``"latency"`` from large messages only), the ``ranks``
    and ``ops`` of the logs, ``residuals`` (a DataFrame per fitted row: ``op``, ``size`` bytes,
    ``measured`` and ``model`` s, ``error`` relative), ``converged`` and ``message``.
    Pass it as ``collective(..., model=cal)``."""

    efficiency: dict
    latency_scale: float
    ranks: int
    ops: tuple
    residuals: object = None
    converged: bool = True
    message: str = ""
    pipeline: Pipeline = PIPELINE
    unconstrained: tuple = ()
    ll_bandwidth: float = 1.0
    p2p_bandwidth: float = 1.0
    net_latency: float = 0.0
    launch_latency: float = 0.0
    parameters: tuple = ()

    def __post_init__(self):
        # a negative latency makes small messages take negative times; a factor <= 0 none at all
        for name, positive in (("latency_scale", True), ("ll_bandwidth", True), ("p2p_bandwidth", True),
                               ("net_latency", False), ("launch_latency", False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or (value <= 0 if positive else value < 0):
                raise ValueError(f"Calibration: {name} must be a number {'> 0' if positive else '>= 0 (s)'}, "
                                 f"got {value!r}")

    def apply(self, options: Options) -> Options:
        """``options`` with the fitted efficiencies (the call's own ``efficiency=`` wins)."""
        own = options.efficiency
        if isinstance(own, (int, float)):
            return options
        return replace(options, efficiency={**self.efficiency, **(own or {})})

    def latency(self, latency: float, algorithm: str, protocol: str, op: str | None = None, hw=None) -> float:
        """A latency of NCCL's cost model (s), calibrated: NCCL's constants times
        :attr:`latency_scale`, plus :attr:`launch_latency`, plus :attr:`net_latency` on each of its hops between nodes (twice
        for Simple, as NCCL adds its network plugin's latency; needs ``op`` and ``hw``, the
        :class:`~._nccl_model.Hardware`)."""
        return latency * self.latency_scale + self.launch_latency + self.hop_cost(algorithm, protocol, op, hw)

    def hop_cost(self, algorithm: str, protocol: str, op: str | None = None, hw=None) -> float:
        """Seconds :attr:`net_latency` adds to ``algorithm`` / ``protocol``'s latency: on each of
        its hops between nodes (twice for Simple); 0 without ``op`` and ``hw`` or on one node. What
        the hops cost on the fabric the logs came from, which NCCL's choice does not see (it
        chooses with what its network plugin reports)."""
        if not (self.net_latency and hw is not None and op is not None and hw.nodes > 1):
            return 0.0
        _, (hops, _) = tuner_hops(algorithm, protocol, op, hw)
        return self.net_latency * hops * (2 if protocol == "Simple" else 1)

    def flow_timed(self, latency: float, transfer: float) -> float:
        """Seconds of a call of an algorithm NCCL's cost model does not time (all-to-all,
        broadcast and reduce chains, sends: their latencies are the solved steps' hop
        latencies): ``latency`` (s) times :attr:`latency_scale`, plus :attr:`launch_latency`,
        plus ``transfer`` (s). :attr:`net_latency` is NCCL's model's alone (its hops)."""
        return transfer + latency * self.latency_scale + self.launch_latency

    def bandwidth(self, algbw, algorithm: str, protocol: str):
        """The bandwidth (bytes/s) a kernel of ``algorithm`` / ``protocol`` achieves, given the
        one NCCL's cost model grants (LL's times :attr:`ll_bandwidth`; NCCL's choice keeps its own)."""
        return algbw * self.ll_bandwidth if protocol == "LL" and self.ll_bandwidth != 1.0 else algbw

    def check(self, graph) -> None:
        """ValueError unless ``graph`` has GPUs enough for the calibrated rank count and every
        :attr:`efficiency` key is a technology of ``graph`` or of the link catalogue (as an
        ``efficiency=`` dict is checked: a mistyped key would apply to no link, silently; a
        ``model=`` that is not a Calibration: :func:`checked_model`)."""
        if len(gpu_nodes(graph)) < self.ranks:
            raise ValueError(f"model was calibrated on {self.ranks} ranks; this graph has {len(gpu_nodes(graph))} GPUs: "
                             f"use it on a cluster of at least {self.ranks} GPUs (ranks= / --ranks pick the ones a "
                             f"call runs on), or calibrate a log of at most {len(gpu_nodes(graph))} ranks")
        try:
            check_efficiency_keys(self.efficiency, [graph])
        except ValueError as err:
            raise ValueError(f"model (a Calibration): {err}") from None
        absent, kept, present = self.technologies_absent(graph)
        if absent:      # fitted on another machine (adv25 F7; review25 F8: also where some are present)
            rest = f"its {', '.join(kept)} and latencies apply" if kept else "only its latencies apply"
            _checks.warn_at_caller(
                f"model: its fitted efficiencies for {', '.join(absent)} apply to no link of this graph (its "
                f"technologies: {', '.join(sorted(present)) or 'none named'}); {rest}: a calibration speaks for "
                "the machine its logs came from")

    def technologies_absent(self, graph) -> tuple:
        """``(absent, kept, present)``: the fitted :attr:`efficiency` technologies no link of
        ``graph`` has and those it has (sorted), and the graph's own technologies (a set)."""
        present = graph_technologies(graph)
        fitted = set(self.efficiency or {})
        return sorted(fitted - present), sorted(fitted & present), present

    def report(self) -> str:
        """One line per fitted quantity: value, uncertainty, or "not constrained"."""
        return "\n".join(str(p) for p in self.parameters)

    def save(self, path) -> None:
        """Write the calibration to ``path`` as JSON with a format version, every field but
        ``residuals`` (:mod:`~._calibration_file`; ``flowsolver calibrate LOG... --save FILE.json``)."""
        save_calibration(self, path)

    @classmethod
    def load(cls, path) -> "Calibration":
        """The calibration :meth:`save` wrote to ``path``, every field as it was but ``residuals``
        (None); ValueError naming the file and what is wrong where it is not JSON, not a
        calibration, of another format version, or holds a value out of range.

        >>> import os, tempfile
        >>> cal = Calibration(efficiency={"ib_ndr": 0.8}, latency_scale=1.0, ranks=16, ops=("all_reduce",))
        >>> path = os.path.join(tempfile.mkdtemp(), "cal.json"); cal.save(path)
        >>> Calibration.load(path) == cal
        True
        """
        kw = read_calibration(path)
        return cls(**{**kw, "parameters": tuple(FittedParameter(**p) for p in kw["parameters"])})


def checked_model(model, graph):
    """``model`` (a :class:`Calibration` or None) checked against ``graph``; TypeError for
    anything else (``model=3`` was an AttributeError)."""
    if model is None:
        return None
    if not isinstance(model, Calibration):
        raise TypeError(f"model must be a flowsolver.Calibration (what calibrate returns) or None, "
                        f"got {type(model).__name__}")
    model.check(graph)
    return model
