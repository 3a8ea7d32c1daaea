"""Calibration from nccl-tests logs: per-technology efficiency, a latency scale and a scale on
the chunk pipeline's floors and fills fitted by robust least squares to the measured times, as
a model :func:`flowsolver.collective` takes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from .. import nccl_tests
from ..routing import gpu_nodes, link_efficiency, unchanged
from ._choice import is_tuned
from ._collective import _plans, collective_with
from ._nccl import OPS
from ._options import Options
from ._solve import time_plans
from ._pipeline import PIPELINE, Pipeline
from ._nccl_timing import nccl_pick, transfer_of, tuned_times

__all__ = ["Calibration", "calibrate"]

_US = 1e-6


@dataclass(frozen=True)
class Calibration:
    """Fitted constants: ``efficiency`` (technology name -> fraction of the raw rate),
    ``latency_scale`` (NCCL's predicted latencies are multiplied by it), ``pipeline`` (the
    :class:`~._pipeline.Pipeline` of step floors and fills, the library's scaled by the fit),
    ``unconstrained`` (the fitted quantities the logs could not tell: left at the library's
    value, e.g. ``"latency"`` from large messages only), the ``ranks`` and
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
    pipeline: Pipeline = PIPELINE
    unconstrained: tuple = ()

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


#: busbw = algbw x SCALE (p - 1) / p (nccl-tests' PERFORMANCE.md); other ops' busbw is their algbw
_BUSBW_SCALE = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}
_PRINTED = 0.0050001        # nccl-tests prints algbw and busbw (GB/s) to 2 decimals (a hair over half a unit)


def ranks_from_busbw(df, op):
    """(the rank count the log's busbw / algbw ratios allow, or None, and why not).

    nccl-tests prints ``busbw = algbw x s (p - 1) / p`` (s = 2 for all-reduce, 1 for
    all-gather, reduce-scatter, all-to-all), both rounded to 2 decimals: every row bounds
    the ratio, so ``p``; the rows together give the range of ``p``, and the count when
    one integer is left.

    >>> import pandas as pd
    >>> ranks_from_busbw(pd.DataFrame(dict(algbw=[355.81], busbw=[311.34])), "reduce_scatter")
    (8, '')
    """
    scale = _BUSBW_SCALE.get(op)
    if scale is None:
        return None, f"busbw / algbw is 1 for {op} whatever the rank count"
    lo, hi = 1.0, math.inf
    for a, b in zip(df["algbw"], df["busbw"]):
        if not (a > _PRINTED and b >= 0):          # NaN, or printed as 0.00
            continue
        f_lo, f_hi = max(b - _PRINTED, 0.0) / (a + _PRINTED), (b + _PRINTED) / (a - _PRINTED)
        lo = max(lo, scale / (scale - f_lo) if f_lo < scale else math.inf)
        hi = min(hi, scale / (scale - f_hi) if f_hi < scale else math.inf)
    if lo > hi + 1e-9:
        return None, "busbw / algbw disagree between rows"
    first, last = math.ceil(lo - 1e-9), math.floor(hi + 1e-9) if hi < math.inf else math.inf
    if first == last:
        return int(first), ""
    return None, "busbw / algbw is printed too coarsely to tell"


def _rows(logs, graph, ranks, op):
    """(op, size bytes, measured time s) of every out-of-place row, logs checked against the graph."""
    n = len(gpu_nodes(graph)) if ranks is None else len(list(ranks))
    out, algorithms = [], set()
    for log in ([logs] if isinstance(logs, str) or not hasattr(logs, "__iter__") else list(logs)):
        df = log if hasattr(log, "attrs") and hasattr(log, "columns") else nccl_tests.read(log, op=op)
        log_op = df.attrs.get("op") or op
        where = df.attrs.get("source", "log")
        if log_op not in OPS:
            raise ValueError(f"{where}: the log does not say which collective it ran; pass op=")
        if op is not None and log_op != op:
            raise ValueError(f"{where}: the log tests {log_op}, not {op}")
        _check_ranks(df, log_op, where, n, ranks is not None)
        if df.attrs.get("algorithm"):
            algorithms.add(df.attrs["algorithm"])
        rows = df[(df["placement"] == "out-of-place") & (df["time"] > 0)]
        out += [(log_op, float(s), float(t) * _US) for s, t in zip(rows["size"], rows["time"])]
    if not out:
        raise ValueError("logs hold no result rows to calibrate on")
    return out, n, algorithms


def _check_ranks(df, op, where, n, given):
    """ValueError unless the log ran on ``n`` ranks (the graph's GPUs, or ``ranks=`` when
    ``given``): the count its device list or NCCL INFO lines state, else the one its busbw /
    algbw ratios allow; a log that says none is taken at ``ranks=`` only."""
    said, how = df.attrs.get("ranks"), df.attrs.get("ranks_from") or "its device list"
    if said is None:
        said, why = ranks_from_busbw(df, op)
        how = "busbw / algbw"
        if said is None:
            if given:
                return
            raise ValueError(f"{where}: the log does not say how many ranks it ran on (no device list, no NCCL INFO "
                             f"nranks; {why}): pass ranks= the GPU ranks it ran on (the graph has {n} GPUs; "
                             "--ranks on the command line)")
    if said != n:
        ours = "given by ranks=" if given else "the graph's GPUs"
        raise ValueError(f"{where}: the log ran on {said} ranks, the graph (ranks=) has {n} ({said} from {how}, {n} "
                         f"{ours}): pass ranks= the {said} GPU ranks it ran on (e.g. ranks=range({said}); --ranks on "
                         f"the command line) or a graph of {said} GPUs")


class _RowModel:
    """One log row's model, solved once: its time for a latency scale ``lam``, a factor ``m``
    on every flow-solved bandwidth and a scale ``f`` on the pipeline's floors and fills
    (NCCL's choice and caps re-evaluated exactly)."""

    def __init__(self, graph, op, size, ranks, algorithm, options, cal):
        options = cal.apply(options)
        with unchanged(graph):
            planned = _plans(graph, op, size, [ranks], algorithm, options)
            self.p, self.hw = planned.p, planned.hw
            scenario, = time_plans(graph, planned.ranks, planned.plans, options, [graph])
            self.links, self.results = scenario.links, scenario.results
        self.op, self.size, self.options, self.cal = op, size, options, cal
        self.only = None if algorithm == "auto" else algorithm

    def time(self, lam, m, f=1.0):
        """(time s, algorithm) at latency scale ``lam``, bandwidth factor ``m``, pipeline scale ``f``."""
        scaled = {a: replace(r, steps=tuple(replace(st, transfer=st.transfer / m) for st in r.steps))
                  for a, r in self.results.items()}
        hw = replace(self.hw, nvlink_bw=self.hw.nvlink_bw * m)
        model = replace(self.cal, latency_scale=self.cal.latency_scale * lam, pipeline=_scaled(self.cal.pipeline, f))
        tuned = {k: v for k, v in tuned_times(self.op, self.size, self.p, scaled, hw, self.options, model).items()
                 if self.only in (None, k[0])}
        pick = nccl_pick(tuned)
        entries = [] if pick is None else [(pick[1][0], pick[0][0])]
        for a, r in self.results.items():
            if self.only in (None, a) and not is_tuned(a, self.op, self.options):
                transfer = transfer_of(r.steps)
                entries.append((lam * (r.time - transfer) + transfer / m, a))
        return min(entries)

    def bottleneck_tech(self, algorithm) -> str:
        steps = self.results[algorithm].steps
        longest = max(steps, key=lambda st: st.count * st.transfer)
        return str(self.links.tech[longest.bottleneck[0].index]) if longest.bottleneck else ""


def _scaled(pipeline: Pipeline, f: float) -> Pipeline:
    """``pipeline`` with every floor and fill times ``f``."""
    return pipeline if f == 1.0 else Pipeline(**{k: v * f for k, v in asdict(pipeline).items()})


#: the fitted quantities, in the order of the least squares' vector
_FITTED = ("latency", "bandwidth", "pipeline")
#: a quantity whose 10 % change moves no row's time by 0.1 % is not constrained by the logs (nccl-tests
#: prints times to 3-4 digits)
_UNCONSTRAINED = 1e-3
#: ... and whose library value moves none by 1 % (a quantity fitted to a bound is told by the logs)
_RESET = 1e-2


def _fit(rows, measured):
    """Robust least squares (soft-L1 on the relative error) of a latency scale, a bandwidth
    factor and a pipeline scale: (lam, m, f, converged, unconstrained names); a quantity the
    rows cannot tell apart from the others stays at 1."""
    from scipy.optimize import least_squares

    def times(x):
        return np.array([r.time(*np.exp(x))[0] for r in rows])

    def residual(x):
        return times(x) / measured - 1.0

    fits = [least_squares(residual, np.log(start), bounds=(np.log(1e-2), np.log(1e2)), loss="soft_l1",
                          f_scale=0.05, diff_step=1e-3)
            for start in ((1.0, 1.0, 1.0), (3.0, 1.0, 1.0), (0.3, 1.0, 1.0), (1.0, 0.5, 1.0), (1.0, 1.0, 0.3))]
    fit = min(fits, key=lambda f: f.cost)     # NCCL's choice makes the cost piecewise
    x = np.array(fit.x)
    base = times(x)
    loose = []
    for i, name in enumerate(_FITTED):
        moved, reset = x.copy(), x.copy()
        moved[i] += math.log(1.1)
        reset[i] = 0.0
        # flat where it was fitted, and the library's value fits as well: the logs cannot tell
        if np.max(np.abs(times(moved) / base - 1.0)) < _UNCONSTRAINED and \
                np.max(np.abs(times(reset) / base - 1.0)) < _RESET:
            loose.append(name)
            x[i] = 0.0                        # not told by the logs: the library's value
    lam, m, f = np.exp(x)
    return float(lam), float(m), float(f), bool(fit.success), tuple(loose)


def calibrate(graph, logs, *, ranks=None, op: str | None = None, algorithm: str = "auto", iterations: int = 2,
              **options) -> Calibration:
    """Fit per-technology efficiency and NCCL's latency scale to nccl-tests logs.

    ``logs`` are paths, texts or DataFrames of :func:`flowsolver.nccl_tests.read`; each
    must have been run on as many ranks as ``ranks`` (default every GPU of ``graph``) and
    test ``op`` (default what the log says). A log's rank count is its device list's or
    its NCCL INFO lines' (``nranks``), else the one its busbw / algbw ratios allow
    (all-reduce, all-gather, reduce-scatter, all-to-all); one that differs is a
    ValueError, and a log that says none (a broadcast table without a device list) is
    fitted only when ``ranks`` is passed. A missing log is FileNotFoundError.
    ``algorithm`` is the log's (``"auto"``: NCCL's choice, or the ``NCCL_ALGO`` the logs'
    NCCL INFO lines say was forced; ``"ring"`` for a run with ``NCCL_ALGO=Ring``) and
    ``options`` the other keywords of :func:`flowsolver.collective`. Each row's flows are solved once; a robust least
    squares (soft-L1 on the relative error) then fits a scale on NCCL's latencies, a
    factor on the flow-solved bandwidths and a scale on the chunk pipeline's step floors and
    fills (:mod:`~._pipeline`), NCCL's caps and choice of algorithm and protocol
    re-evaluated at every trial (a quantity the logs cannot tell, e.g. the latency from
    large messages only, stays at the library's value and is named in ``unconstrained``); the factor becomes the efficiency of the technology that
    bottlenecks most of the transfer, and the whole is re-solved with the fit
    ``iterations`` times (the bottleneck may move). Efficiencies are capped at 1
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
    options.setdefault("protocol", "auto")
    if options.get("policy_options") is None:
        options.pop("policy_options", None)
    opts = Options(tuner=options.pop("step_latency", None) is None, **options)
    rows, n, forced = _rows(logs, graph, ranks, op)
    if algorithm == "auto" and len(forced) == 1:
        algorithm = forced.pop()                    # the logs' NCCL_ALGO
    measured = np.array([t for _, _, t in rows])
    cal = Calibration(efficiency={}, latency_scale=1.0, ranks=n, ops=tuple(sorted({o for o, _, _ in rows})))
    converged = True
    for _ in range(max(1, int(iterations))):
        models = [_RowModel(graph, o, size, ranks, algorithm, opts, cal) for o, size, _ in rows]
        lam, m, f, converged, loose = _fit(models, measured)
        # the factor goes to the technology that holds most of the rows' transfer
        weight: dict = {}
        for r, t_meas in zip(models, measured):
            t, a = r.time(lam, m, f)
            tech = r.bottleneck_tech(a)
            weight[tech] = weight.get(tech, 0.0) + transfer_of(r.results[a].steps) / t_meas
        tech = max(weight, key=weight.get)
        efficiency = dict(cal.efficiency)
        if tech:
            efficiency[tech] = min(1.0, efficiency.get(tech, link_efficiency(tech, opts.efficiency)) * m)
        cal = replace(cal, efficiency=efficiency, latency_scale=cal.latency_scale * lam,
                      pipeline=_scaled(cal.pipeline, f), unconstrained=loose)
    model = np.array([collective_with(graph, o, s, ranks, algorithm, opts, cal).time for o, s, _ in rows])
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("flowsolver.calibrate needs pandas: pip install 'flowsolver[analysis]'") from None

    residuals = pd.DataFrame(dict(op=[o for o, _, _ in rows], size=[s for _, s, _ in rows], measured=measured,
                                  model=model, error=(model - measured) / measured))
    notes = [] if converged else ["the least-squares fit did not converge"]
    if cal.unconstrained:
        notes.append(f"the logs do not constrain: {', '.join(cal.unconstrained)} (left at the library's value)")
    return replace(cal, residuals=residuals, converged=converged, message="; ".join(notes))
