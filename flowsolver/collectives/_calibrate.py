"""Calibration from nccl-tests logs: per-technology efficiency and a latency scale fitted by
robust least squares to the measured times, as a model :func:`flowsolver.collective` takes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import nccl_tests
from ..routing import gpu_nodes, link_efficiency
from ._collective import collective_with
from ._nccl import OPS
from ._options import Options

__all__ = ["Calibration", "calibrate"]

_US = 1e-6


@dataclass(frozen=True)
class Calibration:
    """Fitted constants: ``efficiency`` (technology name -> fraction of the raw rate),
    ``latency_scale`` (NCCL's predicted latencies are multiplied by it), the ``ranks`` and
    ``ops`` of the logs, ``residuals`` (a DataFrame per fitted row: ``op``, ``size`` bytes,
    ``measured`` and ``model`` s, ``error`` relative), ``converged`` and ``message``.
    Pass it as ``collective(..., model=cal)``."""

    efficiency: dict
    latency_scale: float
    ranks: int
    ops: tuple
    residuals: object = None
    converged: bool = True
    message: str = ""
    _gpus: int = field(default=0, repr=False)

    def apply(self, options: Options) -> Options:
        """``options`` with the fitted efficiencies (the call's own ``efficiency=`` wins)."""
        own = options.efficiency
        if isinstance(own, (int, float)):
            return options
        return replace(options, efficiency={**self.efficiency, **(own or {})})

    def latency(self, latency: float, algorithm: str, protocol: str) -> float:
        """A latency of NCCL's cost model (s), calibrated."""
        return latency * self.latency_scale

    def check(self, graph) -> None:
        """ValueError unless ``graph`` has GPUs enough for the calibrated rank count."""
        if len(gpu_nodes(graph)) < self.ranks:
            raise ValueError(f"model was calibrated on {self.ranks} ranks; this graph has {len(gpu_nodes(graph))} GPUs")


def _rows(logs, graph, ranks, op):
    """(op, size bytes, measured time s) of every out-of-place row, logs checked against the graph."""
    n = len(gpu_nodes(graph)) if ranks is None else len(list(ranks))
    out = []
    for log in ([logs] if isinstance(logs, str) or not hasattr(logs, "__iter__") else list(logs)):
        df = log if hasattr(log, "attrs") and hasattr(log, "columns") else nccl_tests.read(log, op=op)
        log_op = df.attrs.get("op") or op
        where = df.attrs.get("source", "log")
        if log_op not in OPS:
            raise ValueError(f"{where}: the log does not say which collective it ran; pass op=")
        if op is not None and log_op != op:
            raise ValueError(f"{where}: the log tests {log_op}, not {op}")
        if df.attrs.get("ranks") not in (None, n):
            raise ValueError(f"{where}: the log ran on {df.attrs['ranks']} ranks, the graph (ranks=) has {n}")
        rows = df[(df["placement"] == "out-of-place") & (df["time"] > 0)]
        out += [(log_op, float(s), float(t) * _US) for s, t in zip(rows["size"], rows["time"])]
    if not out:
        raise ValueError("logs hold no result rows to calibrate on")
    return out, n


def _terms(graph, rows, ranks, algorithm, options, cal):
    """Per row: the model's latency part, transfer part (s) and bottleneck technology."""
    lat, transfer, techs = [], [], []
    for op, size, _ in rows:
        r = collective_with(graph, op, size, ranks, algorithm, options, cal)
        latency = sum((st.latency_count if st.latency_count is not None else st.count) * st.latency
                      for st in r.steps) + (r.time - sum(st.time for st in r.steps))
        lat.append(latency)
        transfer.append(r.time - latency)
        b = r.bottleneck
        techs.append(str(r.links.tech[b[0].index]) if b else "")
    return np.array(lat), np.array(transfer), techs


_STEP = 0.9     # the efficiency factor of the finite difference


def _sensitivity(graph, rows, ranks, algorithm, options, cal, tech, transfer):
    """Per row, how the transfer part scales with ``tech``'s efficiency: the exponent ``s``
    of ``transfer ~ efficiency ** -s`` (1 where the technology is the bottleneck, 0 where
    a cap of NCCL's or another link holds the row)."""
    now = cal.efficiency.get(tech, link_efficiency(tech))
    probe = replace(cal, efficiency={**cal.efficiency, tech: now * _STEP})
    _, moved, _ = _terms(graph, rows, ranks, algorithm, options, probe)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.log(np.where(transfer > 0, moved / transfer, 1.0)) / np.log(1 / _STEP)
    return np.clip(np.nan_to_num(s), 0.0, 2.0)


def _fit(measured, lat, transfer, exponents):
    """Robust least squares of ``measured = scale x lat + transfer x prod(m_t ** -s_t)``
    on the relative error (soft-L1): (scale, [m_t], converged)."""
    from scipy.optimize import least_squares

    s = np.array(exponents).reshape(len(exponents), -1)

    def residual(x):
        model = np.exp(x[0]) * lat + transfer * np.exp(-(x[1:, None] * s).sum(axis=0))
        return (model - measured) / measured

    fit = least_squares(residual, np.zeros(1 + len(s)), bounds=(np.log(1e-3), np.log(1e3)), loss="soft_l1",
                        f_scale=0.05)
    return float(np.exp(fit.x[0])), [float(np.exp(v)) for v in fit.x[1:]], bool(fit.success)


def calibrate(graph, logs, *, ranks=None, op: str | None = None, algorithm: str = "auto", iterations: int = 2,
              **options) -> Calibration:
    """Fit per-technology efficiency and NCCL's latency scale to nccl-tests logs.

    ``logs`` are paths, texts or DataFrames of :func:`flowsolver.nccl_tests.read`; each
    must have been run on as many ranks as ``ranks`` (default every GPU of ``graph``) and
    test ``op`` (default what the log says); ``algorithm`` is the log's (``"auto"``: NCCL's
    choice; ``"ring"`` for a run with ``NCCL_ALGO=Ring``) and ``options`` the other keywords
    of :func:`flowsolver.collective`. The model is split per row into its latency and
    transfer parts, and the transfer's sensitivity to the efficiency of each technology
    that bottlenecks some row is measured (a finite difference: 0 where one of NCCL's caps
    holds the row); a robust least squares (soft-L1 on the relative error) fits a latency
    scale and a factor per technology; the model is re-solved with the fit (its choice of
    algorithm and protocol may change) ``iterations`` times. Efficiencies are capped at 1
    (a measured rate above the raw one is the model's fault, not the link's: the
    residuals show it). Links in series (NVLink, PCIe, NIC on one path) cannot be told apart
    by one log: the fit moves the technology that bottlenecks the model's rows.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=1)
    >>> log = '''#       size         count      type   redop    root     time   algbw   busbw #wrong
    ...   134217728       4194304     float     sum      -1    377.2  355.81  311.34      0
    ...   268435456       8388608     float     sum      -1    709.7  378.22  330.94      0
    ...   536870912      16777216     float     sum      -1   1377.8  389.65  340.94      0'''
    >>> cal = calibrate(g, [log], op="reduce_scatter")
    >>> sorted(cal.efficiency), round(float(cal.residuals["error"].abs().max()), 2) <= 0.05
    (['nvlink4'], True)
    """
    opts = Options(tuner=options.pop("step_latency", None) is None, **options)
    rows, n = _rows(logs, graph, ranks, op)
    measured = np.array([t for _, _, t in rows])
    cal = Calibration(efficiency={}, latency_scale=1.0, ranks=n, ops=tuple(sorted({o for o, _, _ in rows})))
    converged = True
    for _ in range(max(1, int(iterations))):
        lat, transfer, techs = _terms(graph, rows, ranks, algorithm, opts, cal)
        names = sorted({t for t in techs if t})
        exponents = [_sensitivity(graph, rows, ranks, algorithm, opts, cal, t, transfer) for t in names]
        scale, factors, converged = _fit(measured, lat, transfer, exponents or [np.zeros(len(rows))])
        efficiency = dict(cal.efficiency)
        for t, m in zip(names, factors):
            efficiency[t] = min(1.0, efficiency.get(t, link_efficiency(t)) * m)
        cal = replace(cal, efficiency=efficiency, latency_scale=cal.latency_scale * scale)
    model = np.array([collective_with(graph, o, s, ranks, algorithm, opts, cal).time for o, s, _ in rows])
    import pandas as pd

    residuals = pd.DataFrame(dict(op=[o for o, _, _ in rows], size=[s for _, s, _ in rows], measured=measured,
                                  model=model, error=(model - measured) / measured))
    return replace(cal, residuals=residuals, converged=converged,
                   message="" if converged else "the least-squares fit did not converge")
