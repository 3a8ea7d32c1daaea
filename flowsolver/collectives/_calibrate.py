"""Calibration from nccl-tests logs: per-technology efficiency, a latency scale and a scale on
the chunk pipeline's floors and fills fitted by robust least squares to the measured times, as
a model :func:`flowsolver.collective` takes."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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

__all__ = ["Calibration", "FittedParameter", "calibrate"]

_US = 1e-6


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
    ``latency_scale`` (NCCL's predicted latencies are multiplied by it), ``ll_bandwidth``
    (LL's kernel bandwidth as a factor on NCCL's), ``pipeline`` (the
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
    parameters: tuple = ()

    def apply(self, options: Options) -> Options:
        """``options`` with the fitted efficiencies (the call's own ``efficiency=`` wins)."""
        own = options.efficiency
        if isinstance(own, (int, float)):
            return options
        return replace(options, efficiency={**self.efficiency, **(own or {})})

    def latency(self, latency: float, algorithm: str, protocol: str) -> float:
        """A latency of NCCL's cost model (s), calibrated."""
        return latency * self.latency_scale

    def bandwidth(self, algbw, algorithm: str, protocol: str):
        """The bandwidth (bytes/s) a kernel of ``algorithm`` / ``protocol`` achieves, given the
        one NCCL's cost model grants (LL's times :attr:`ll_bandwidth`; NCCL's choice keeps its own)."""
        return algbw * self.ll_bandwidth if protocol == "LL" and self.ll_bandwidth != 1.0 else algbw

    def check(self, graph) -> None:
        """ValueError unless ``graph`` has GPUs enough for the calibrated rank count."""
        if len(gpu_nodes(graph)) < self.ranks:
            raise ValueError(f"model was calibrated on {self.ranks} ranks; this graph has {len(gpu_nodes(graph))} GPUs")

    def report(self) -> str:
        """One line per fitted quantity: value, uncertainty, or "not constrained"."""
        return "\n".join(str(p) for p in self.parameters)


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
    on every flow-solved bandwidth, a factor ``ll`` on LL's bandwidth and a chunk
    ``pipeline`` (NCCL's choice and caps re-evaluated exactly); ``lam``, ``m`` and ``ll``
    relative to the calibration the rows were solved with."""

    def __init__(self, graph, op, size, ranks, algorithm, options, cal):
        options = cal.apply(options)
        with unchanged(graph):
            planned = _plans(graph, op, size, [ranks], algorithm, options)
            self.p, self.hw = planned.p, planned.hw
            scenario, = time_plans(graph, planned.ranks, planned.plans, options, [graph])
            self.links, self.results = scenario.links, scenario.results
        self.op, self.size, self.options, self.cal = op, size, options, cal
        self.only = None if algorithm == "auto" else algorithm

    def time(self, lam=1.0, m=1.0, ll=1.0, pipeline=None):
        """(time s, algorithm) at latency scale ``lam``, bandwidth factor ``m``, LL factor ``ll``
        and ``pipeline`` (default the calibration's)."""
        scaled = {a: replace(r, steps=tuple(replace(st, transfer=st.transfer / m) for st in r.steps))
                  for a, r in self.results.items()}
        hw = replace(self.hw, nvlink_bw=self.hw.nvlink_bw * m)
        model = replace(self.cal, latency_scale=self.cal.latency_scale * lam,
                        ll_bandwidth=self.cal.ll_bandwidth * ll,
                        pipeline=self.cal.pipeline if pipeline is None else pipeline)
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


@dataclass(frozen=True)
class _Quantity:
    """A fitted quantity: its name, unit, whether it is fitted as the log of a factor, and
    its prior spread (one standard deviation in the fit's coordinate: log units for factors,
    microseconds for floors, steps for fills)."""

    name: str
    unit: str
    log: bool
    spread: float


#: The fitted quantities, in the order of the fit's vector. Spreads: the range a cluster's value
#: is expected in before its logs are read. latency: RoCE / EFA / cloud VMs measure 1.5-3x NCCL's
#: predicted latency (docs/accuracy.md, docs/collective-timing.md "Platform floors"): log 3.
#: bandwidth: uncalibrated large-message errors of the shared logs are 5-56 % (docs/accuracy.md):
#: log 1.5. LL: measured 2-3x below NCCL's LL cap on A100 systems (collective-timing.md): log 3,
#: wider than the bandwidth's so that rows run in LL alone move LL's factor, not the links'.
#: floors: the corpus fits give 0-2.1 us; fills: 0-4.85 steps over the leave-one-source-out
#: folds (_pipeline.PIPELINE's comment): 2 us and 2 steps.
_QUANTITIES = (
    _Quantity("latency", "x", True, math.log(3.0)),
    _Quantity("bandwidth", "x", True, math.log(1.5)),
    _Quantity("ll_bandwidth", "x", True, math.log(3.0)),
    _Quantity("floor_simple", "s", False, 2.0),
    _Quantity("floor_nvls", "s", False, 2.0),
    _Quantity("fill_ring", "steps", False, 2.0),
    _Quantity("fill_tree", "steps", False, 2.0),
    _Quantity("fill_nvls", "steps", False, 2.0),
)
#: a row's relative time is taken as known to 1 % at best (the model's own median error on the
#: published large-message figures is 0.9 %, docs/accuracy.md): the fit's noise floor
_NOISE = 0.01
#: a quantity is constrained when the logs shrink its spread at least this much (posterior
#: standard deviation over the prior's); otherwise it is reported "not constrained" and stays
#: at the library's value
_CONSTRAINED = 0.5
#: the fit's first noise guess (relative), before its residuals give one
_NOISE_START = 0.02
_LOG_BOUND = math.log(100.0)


class _Fit:
    """The fit's vector ``x`` (latency, bandwidth and LL factors as logs relative to the library,
    then the pipeline's floors in us and fills in steps) mapped onto the rows' models, solved
    with the calibration ``solved`` whose factors are ``done`` (log) relative to the library."""

    def __init__(self, rows, measured, done):
        self.rows, self.measured, self.done = rows, np.asarray(measured), np.asarray(done, dtype=float)
        self.center = np.array([0.0, 0.0, 0.0] + [getattr(PIPELINE, q.name) * (1e6 if q.unit == "s" else 1.0)
                                                  for q in _QUANTITIES[3:]])
        self.spread = np.array([q.spread for q in _QUANTITIES])
        lower = [-_LOG_BOUND] * 3 + [0.0] * 5
        upper = [_LOG_BOUND] * 3 + [np.inf] * 5
        self.lower = (np.array(lower) - self.center) / self.spread
        self.upper = (np.array(upper) - self.center) / self.spread

    def x(self, z):
        return self.center + np.asarray(z) * self.spread

    def pipeline(self, x) -> Pipeline:
        return replace(PIPELINE, **{q.name: max(float(v), 0.0) * (1e-6 if q.unit == "s" else 1.0)
                                    for q, v in zip(_QUANTITIES[3:], x[3:])})

    def times(self, z):
        x = self.x(z)
        lam, m, ll = np.exp(x[:3] - self.done)
        pipe = self.pipeline(x)
        return np.array([r.time(lam, m, ll, pipe)[0] for r in self.rows])

    def errors(self, z):
        return self.times(z) / self.measured - 1.0

    def sensitivity(self, z, step=0.1):
        """d log(time) / dz per row and quantity (a finite step of ``step`` prior spreads, one-sided at a bound)."""
        base = self.times(z)
        jac = np.zeros((len(base), len(z)))
        for i in range(len(z)):
            hi, lo = np.array(z, dtype=float), np.array(z, dtype=float)
            hi[i] = min(hi[i] + step, self.upper[i])
            lo[i] = max(lo[i] - step, self.lower[i])
            if hi[i] - lo[i] <= 0:
                continue
            jac[:, i] = (np.log(self.times(hi)) - np.log(self.times(lo))) / (hi[i] - lo[i])
        return jac

    def solve(self, free, noise, starts):
        """Least robust (soft-L1) relative error over ``noise`` plus the prior's pull, ``free``
        quantities only, the best of ``starts``; (z, converged)."""
        from scipy.optimize import least_squares

        free = np.asarray(free)
        if not free.any():
            return np.zeros(len(free)), True

        def full(zf):
            z = np.zeros(len(free))
            z[free] = zf
            return z

        def residual(zf):
            return np.concatenate([self.errors(full(zf)) / noise, zf])

        fits = []
        for start in starts:
            s = np.clip(np.asarray(start, dtype=float)[free], self.lower[free] + 1e-9, self.upper[free] - 1e-9)
            fits.append(least_squares(residual, s, bounds=(self.lower[free], self.upper[free]), loss="soft_l1",
                                      f_scale=3.0, diff_step=1e-3))
        best = min(fits, key=lambda f: f.cost)          # NCCL's choice makes the cost piecewise
        return full(best.x), bool(best.success)

    def posterior(self, z, free, noise):
        """Standard deviations (in prior spreads) of the ``free`` quantities given the rows: the
        inverse of the rows' information (their sensitivities over ``noise``) plus the prior's."""
        jac = self.sensitivity(z)[:, free]
        info = jac.T @ jac / noise**2 + np.eye(int(np.sum(free)))
        out = np.ones(len(z))
        out[free] = np.sqrt(np.diag(np.linalg.inv(info)))
        return out


def _fit(rows, measured, done):
    """Fit every quantity of :data:`_QUANTITIES` to the rows: (x, standard deviation per quantity
    in its coordinate or None where not constrained, converged). A quantity whose spread the rows
    do not shrink by :data:`_CONSTRAINED` is put back at the library's value and the rest refitted."""
    fit = _Fit(rows, measured, done)
    n = len(_QUANTITIES)
    everything = np.ones(n, dtype=bool)
    lat = 1.0 / _QUANTITIES[0].spread
    starts = [np.zeros(n)] + [np.eye(n)[0] * s for s in (lat, -lat)]
    z, converged = fit.solve(everything, _NOISE_START, starts)
    errors = fit.errors(z)
    noise = max(_NOISE, 1.4826 * float(np.median(np.abs(errors))))
    told = fit.posterior(z, everything, noise) < _CONSTRAINED
    if not told.all():
        z, converged = fit.solve(told, noise, [np.where(told, z, 0.0), np.zeros(n)])
        noise = max(_NOISE, 1.4826 * float(np.median(np.abs(fit.errors(z)))))
    sd = fit.posterior(z, told, noise) * fit.spread
    return fit.x(z), [float(s) if t else None for s, t in zip(sd, told)], converged, fit


def _parameters(x, sd, tech) -> tuple:
    """A :class:`FittedParameter` per quantity of the fit's vector ``x`` (sd: its standard deviations or None)."""
    out = []
    for q, v, s in zip(_QUANTITIES, x, sd):
        if q.log:
            value, default, unc = math.exp(v), 1.0, None if s is None else math.exp(v) * s
        else:
            k = 1e-6 if q.unit == "s" else 1.0
            value, default, unc = v * k, getattr(PIPELINE, q.name), None if s is None else s * k
        out.append(FittedParameter(q.name, float(value), float(default), unc, s is not None, q.unit))
    return tuple(out)


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
    done = np.zeros(3)            # log factors of latency, bandwidth, LL already in cal (relative to the library's)
    converged, previous = True, None
    for _ in range(max(1, int(iterations))):
        models = [_RowModel(graph, o, size, ranks, algorithm, opts, cal) for o, size, _ in rows]
        if previous is not None and np.allclose([r.time()[0] for r in models], previous, rtol=1e-4):
            break                 # re-solved with the fit, the rows take what the fit said: no bottleneck moved
        x, sd, converged, fit = _fit(models, measured, done)
        lam, m, ll = np.exp(x[:3] - done)
        pipeline = fit.pipeline(x)
        # the bandwidth factor goes to the technology that holds most of the rows' transfer
        weight: dict = {}
        previous = []
        for r, t_meas in zip(models, measured):
            t, a = r.time(lam, m, ll, pipeline)
            previous.append(t)
            tech = r.bottleneck_tech(a)
            weight[tech] = weight.get(tech, 0.0) + transfer_of(r.results[a].steps) / t_meas
        tech = max(weight, key=weight.get)
        efficiency, applied = {}, 0.0
        if tech and sd[1] is not None:
            library = link_efficiency(tech, opts.efficiency)
            efficiency[tech] = min(1.0, library * math.exp(x[1]))
            applied = math.log(efficiency[tech] / library)
        cal = replace(cal, efficiency=efficiency, latency_scale=math.exp(x[0]), ll_bandwidth=math.exp(x[2]),
                      pipeline=pipeline, parameters=_parameters(x, sd, tech),
                      unconstrained=tuple(q.name for q, s in zip(_QUANTITIES, sd) if s is None))
        done = np.array([x[0], applied, x[2]])
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
