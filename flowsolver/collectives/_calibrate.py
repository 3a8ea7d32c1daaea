"""Calibration from nccl-tests logs: the model's physical quantities (a call's and a network
hop's latency, the links', LL's and a P2P channel's bandwidth, the chunk pipeline's floors and fills)
fitted by robust least squares to the measured times with a prior at the library's values;
what a log cannot tell stays at the library's value and is named. The result is a model
:func:`flowsolver.collective` takes."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

import topologies as tp

from .. import nccl_tests
from ..routing import link_efficiency
from ._calibrate_rows import _rows, fit_over, ranks_from_busbw  # noqa: F401  (ranks_from_busbw: tests read it here)
from ._calibration import Calibration, FittedParameter
from ._calibrate_model import RowModel, row_time
from ._nccl import OPS
from ._options import Options, check_call
from ._pipeline import PIPELINE, Pipeline
from ._nccl_timing import transfer_of

__all__ = ["Calibration", "FittedParameter", "calibrate"]

@dataclass(frozen=True)
class _Quantity:
    """A fitted quantity: its name, unit, whether it is fitted as the log of a factor, its prior
    spread (one standard deviation in the fit's coordinate: log units for factors, microseconds
    for latencies and floors, steps for fills) and whether it is a slope or intercept of the
    time (a factor that must carry at least :data:`_DOMINANT` of some row's time to be told)."""

    name: str
    unit: str
    log: bool
    spread: float
    dominant: float = 0.0
    fitted: bool = True


#: a latency or bandwidth factor is told only by rows whose time it carries at least half of in
#: the library's model (its elasticity): a slope read off rows its intercept dominates (or an
#: intercept off rows its slope dominates) carries their misfit, multiplied, to the sizes it then
#: dominates (the 8 B - 64 KiB half of a sweep put LL's bandwidth at 0.06x and predicted 1 MiB 3x
#: slow)
_DOMINANT = 0.5
#: ... and the links' bandwidth by rows it carries at least 80 % of: at mid sizes the rest is the
#: pipeline's fill and the channels NCCL drops, whose misfit a bandwidth read there would carry
#: to the large sizes (on the corpus's sweeps, with this fit before the launch latency and the
#: rows' ownership, a 0.5 share gave a lower half's bandwidth that predicted the upper half 10.1 %
#: off, median over curves, against 8.6 % at 0.8; benchmarks/calibrate_halves.py, 2026-12-04).
#: LL keeps 0.5: NCCL leaves LL before its transfer dominates.
_DOMINANT_BANDWIDTH = 0.8
#: The fitted quantities, in the order of the fit's vector. Spreads: the range a cluster's value
#: is expected in before its logs are read. latency (a scale on NCCL's constants): not fitted, its
#: rows only tell the network hop's and the launch latency: NCCL's cost model is within 3.4 % of
#: NCCL's own estimate on DGX-H100 (docs/accuracy.md) and a platform's extra is additive (per
#: call, per network hop); fitting the scale as well (spread log 1.2) made the upper half of the
#: sweeps predict the lower 34.1 % off (median over 27 curves) against 24.2 % without, and the
#: lower the upper 7.2 % against 6.6 % (benchmarks/calibrate_halves.py, 2026-12-04, before
#: main's tree LL depth: 23.0 % and 6.7 % after). launch_latency (added to every
#: call: a VM's or framework's launch path): Azure VMs measure 26-42 us against 14-17 us on bare
#: metal (docs/collective-timing.md): 10 us. net_latency (added to each network hop as NCCL adds its network
#: plugin's, twice for Simple): aws-ofi-nccl reports 35-75 us on EFA, Azure VMs measure 10-25 us
#: over bare metal (docs/collective-timing.md): 20 us. bandwidth: uncalibrated large-message errors
#: of the shared logs are 5-56 % (docs/accuracy.md): log 1.5. P2P channel: measured 18.7-26.2 GB/s a
#: channel on H100 against the library's 21.1 (docs/accuracy.md): log 1.5. LL: measured 2-3x below NCCL's LL
#: cap on A100 systems (collective-timing.md): log 3. floors: the corpus fits give 0-2.1 us;
#: fills: 0-4.85 steps over the leave-one-source-out folds (_pipeline.PIPELINE's comment): 2 us
#: and 2 steps.
_QUANTITIES = (
    _Quantity("latency", "x", True, math.log(1.2), dominant=_DOMINANT, fitted=False),
    _Quantity("bandwidth", "x", True, math.log(1.5), dominant=_DOMINANT_BANDWIDTH),
    _Quantity("ll_bandwidth", "x", True, math.log(3.0), dominant=_DOMINANT),
    _Quantity("p2p_bandwidth", "x", True, math.log(1.5), dominant=_DOMINANT_BANDWIDTH),
    _Quantity("net_latency", "s", False, 20.0),
    _Quantity("launch_latency", "s", False, 10.0),
    _Quantity("floor_simple", "s", False, 2.0),
    _Quantity("floor_nvls", "s", False, 2.0),
    _Quantity("fill_ring", "steps", False, 2.0),
    _Quantity("fill_tree", "steps", False, 2.0),
    _Quantity("fill_nvls", "steps", False, 2.0),
)
_FACTORS, _NET, _LAUNCH, _PIPE = 4, 4, 5, 6   # the vector: 4 log factors, 2 latencies (us), the pipeline
#: a row's relative time is taken as known to 1 % at best (the model's own median error on the
#: published large-message figures is 0.9 %, docs/accuracy.md): the fit's noise floor
_NOISE = 0.01
#: a quantity is constrained when the logs shrink its spread at least this much (posterior
#: standard deviation over the prior's); otherwise it is reported "not constrained" and stays
#: at the library's value
_CONSTRAINED = 0.5
#: a row a quantity's prior spread moves by less than this (relative) does not tell it
_MOVED = 0.02
#: the fit's first noise guess (relative), before its residuals give one
_NOISE_START = 0.02
_LOG_BOUND = math.log(100.0)


class _Fit:
    """The fit's vector ``x`` (latency, bandwidth and LL factors as logs relative to the library,
    the network hop's latency in us, then the pipeline's floors in us and fills in steps) mapped
    onto the rows' models, solved with a calibration whose factors are ``done`` (logs) relative
    to the library's; ``z`` is ``x`` less the library's value over the prior spread."""

    def __init__(self, rows, measured, done):
        self.rows, self.measured, self.done = rows, np.asarray(measured), np.asarray(done, dtype=float)
        # rows of one size repeated (nccl-tests -N, logs pasted together) are one measurement's
        # repeats: each weighs 1 / its copies, so k copies tell what one row tells
        self.sizes = [(r.op, r.size) for r in rows]
        copies = Counter(self.sizes)
        self.weight = np.array([1.0 / copies[k] for k in self.sizes])
        self.center = np.array([0.0] * _PIPE + [getattr(PIPELINE, q.name) * (1e6 if q.unit == "s" else 1.0)
                                                for q in _QUANTITIES[_PIPE:]])
        self.spread = np.array([q.spread for q in _QUANTITIES])
        lower = [-_LOG_BOUND] * _FACTORS + [0.0] * (len(_QUANTITIES) - _FACTORS)
        upper = [_LOG_BOUND] * _FACTORS + [np.inf] * (len(_QUANTITIES) - _FACTORS)
        self.lower = (np.array(lower) - self.center) / self.spread
        self.upper = (np.array(upper) - self.center) / self.spread

    def x(self, z):
        return self.center + np.asarray(z) * self.spread

    def pipeline(self, x) -> Pipeline:
        return replace(PIPELINE, **{q.name: max(float(v), 0.0) * (1e-6 if q.unit == "s" else 1.0)
                                    for q, v in zip(_QUANTITIES[_PIPE:], x[_PIPE:])})

    def times(self, z):
        x = self.x(z)
        lam, m, ll, pp = np.exp(x[:_FACTORS] - self.done)
        pipe, net, launch = self.pipeline(x), max(float(x[_NET]), 0.0) * 1e-6, max(float(x[_LAUNCH]), 0.0) * 1e-6
        return np.array([r.time(lam, m, ll, pipe, net, launch, pp)[0] for r in self.rows])

    def errors(self, z):
        return self.times(z) / self.measured - 1.0

    def sensitivity(self, z, step=0.1):
        """d log(time) / dz per row and quantity (a finite step of ``step`` prior spreads, one-sided at a bound)."""
        jac = np.zeros((len(self.rows), len(z)))
        for i in range(len(z)):
            hi, lo = np.array(z, dtype=float), np.array(z, dtype=float)
            hi[i] = min(hi[i] + step, self.upper[i])
            lo[i] = max(lo[i] - step, self.lower[i])
            if hi[i] - lo[i] <= 0:
                continue
            jac[:, i] = (np.log(self.times(hi)) - np.log(self.times(lo))) / (hi[i] - lo[i])
        return jac

    def dominated(self):
        """Per quantity, the rows whose time it carries at least its ``dominant`` share of (its
        elasticity at the library's values) as a mask, or None for a pipeline quantity. The
        network hop's latency is told by the rows NCCL's latency dominates."""
        out = []
        for i, q in enumerate(_QUANTITIES):
            if not q.dominant:
                out.append(out[0] if q.name in ("net_latency", "launch_latency") else None)
                continue
            hi, lo = np.zeros(len(_QUANTITIES)), np.zeros(len(_QUANTITIES))
            hi[i], lo[i] = 0.05 / q.spread, -0.05 / q.spread          # +-5 %
            elasticity = (np.log(self.times(hi)) - np.log(self.times(lo))) / 0.1
            out.append(np.abs(elasticity) >= q.dominant)
        return out

    def solve(self, free, noise, starts, rows):
        """Least robust (soft-L1) relative error of the ``rows`` (a mask) over ``noise`` plus the
        prior's pull, ``free`` quantities only, the best of ``starts``; (z, converged)."""
        from scipy.optimize import least_squares

        free = np.asarray(free)
        if not free.any() or not rows.any():
            return np.zeros(len(free)), True

        def full(zf):
            z = np.zeros(len(free))
            z[free] = zf
            return z

        root = np.sqrt(self.weight[rows])

        def residual(zf):
            return np.concatenate([self.errors(full(zf))[rows] * root / noise, zf])

        fits = []
        for start in starts:
            s = np.clip(np.asarray(start, dtype=float)[free], self.lower[free] + 1e-9, self.upper[free] - 1e-9)
            fits.append(least_squares(residual, s, bounds=(self.lower[free], self.upper[free]), loss="soft_l1",
                                      f_scale=3.0, diff_step=1e-3))
        best = min(fits, key=lambda f: f.cost)          # NCCL's choice makes the cost piecewise
        return full(best.x), bool(best.success)

    def noise(self, z, rows) -> float:
        """The relative noise of the ``rows``' errors at ``z`` (robust: 1.4826 x their median
        absolute error), at least :data:`_NOISE`."""
        errors = self.errors(z)[rows]
        return max(_NOISE, 1.4826 * float(np.median(np.abs(errors)))) if len(errors) else _NOISE

    def posterior(self, z, free, noise, masks, rows):
        """(joint, alone): standard deviations (in prior spreads) of the ``free`` quantities,
        ``joint`` from the inverse of the information of the ``rows`` (a mask; their
        sensitivities over ``noise``) plus the prior's, ``alone`` each one's from the rows that
        tell it (its mask in ``masks``) at their own misfit (root mean square error, at least
        :data:`_NOISE`): rows that a quantity dominates but the model does not fit cannot tell it."""
        jac = self.sensitivity(z)
        free = np.asarray(free)
        told = jac[rows][:, free]
        info = (told * self.weight[rows, None]).T @ told / noise**2 + np.eye(int(np.sum(free)))
        joint = np.ones(len(z))
        joint[free] = np.sqrt(np.diag(np.linalg.inv(info)))
        errors = self.errors(z)
        alone = np.ones(len(z))
        for i, mask in enumerate(masks):
            if mask.any():
                w = self.weight[mask]
                misfit = max(_NOISE, float(np.sqrt(np.sum(w * errors[mask] ** 2) / np.sum(w))))
                alone[i] = 1.0 / math.sqrt(1.0 + float(np.sum(w * jac[mask, i] ** 2)) / misfit**2)
        return joint, alone


def _fit(rows, measured, done):
    """Fit every quantity of :data:`_QUANTITIES` to the rows: (x, standard deviation per quantity
    in its coordinate or None where not constrained, converged, the fit).

    Each quantity tells its own rows: a factor the rows whose time it carries at least its
    ``dominant`` share of, the network hop's latency those of NCCL's latency, a pipeline
    quantity the rows its prior spread moves by :data:`_MOVED` (all at the library's values);
    the fit weighs only the rows some fitted quantity tells (a row none can explain does not
    pull the others), and a quantity needs rows of two sizes of its own (one it would fit
    exactly, whatever its misfit, however often it is repeated). A quantity whose spread the rows do not shrink by :data:`_CONSTRAINED`,
    jointly or alone, is put back at the library's value and the rest refitted."""
    fit = _Fit(rows, measured, done)
    n = len(_QUANTITIES)
    at_library = fit.sensitivity(np.zeros(n))
    masks = [np.abs(at_library[:, i]) >= _MOVED if m is None else m for i, m in enumerate(fit.dominated())]
    fit.masks = masks                   # the rows each quantity is told by (_network_first reads the bandwidth's)

    def told_rows(free):
        return np.any([masks[i] for i in range(n) if free[i]], axis=0) if free.any() else np.zeros(len(rows), bool)

    # one size is fitted exactly, its misfit untold: two distinct sizes (rows of one size
    # repeated, nccl-tests -N or logs pasted together, are one measurement's repeats)
    eligible = np.array([len({fit.sizes[j] for j in np.flatnonzero(m)}) >= 2 for m in masks])
    eligible &= np.array([q.fitted for q in _QUANTITIES])
    starts = [np.zeros(n)] + [np.eye(n)[_NET] * s for s in (1.0, 3.0)] + [np.eye(n)[_LAUNCH]]
    z, converged = fit.solve(eligible, _NOISE_START, starts, told_rows(eligible))
    noise = fit.noise(z, told_rows(eligible))
    joint, alone = fit.posterior(z, eligible, noise, masks, told_rows(eligible))
    told = eligible & (joint < _CONSTRAINED) & (alone < _CONSTRAINED)
    if not np.array_equal(told, eligible):
        z, converged = fit.solve(told, noise, [np.where(told, z, 0.0), np.zeros(n)], told_rows(told))
        noise = fit.noise(z, told_rows(told))
    sd = fit.posterior(z, told, noise, masks, told_rows(told))[0] * fit.spread
    return fit.x(z), [float(s) if t else None for s, t in zip(sd, told)], converged, fit


#: how much worse (median |error| over the rows the bandwidth is told by) a network technology's
#: derating may fit the log than the server link's and still be taken for it
_TIE = 0.002
#: trials of the network's own factor in _network_first (each re-times every row)
_REFITS = 3


def _network_first(graph, cal, model, measured, times, told):
    """``(cal, model times)`` with a derating the fit put on a link inside the servers (NVLink)
    moved to a network technology where that fits the log as well (within :data:`_TIE`): on
    DGX-class servers a ring's NVLink and NICs run at the same utilisation, the flow solve names
    NVLink, and a slow network would derate NVLink (a 2 x 8 log made with IB at 0.70 calibrated
    NVLink to 0.62, then priced one node's NVLink collectives 32 % slow). NVLink's rate is the GPU
    generation's, measured on one node; the network's is what differs between clusters.

    "As well" is judged on ``told`` (a mask): the rows the bandwidth factor was fitted on, those
    whose time it carries at least :data:`_DOMINANT_BANDWIDTH` of. Over every row the latency-bound
    ones (12 of a 16-row 8 B - 8 GiB sweep) fit either way and tie the median: a 2 x DGX H100 log
    20 % slow from 64 MiB moved its NVLink factor (0.837) to the network, which NVLSTree barely
    sees, and the calibration missed its own 128 MiB - 8 GiB rows by 15-17 %."""
    if len(cal.efficiency) != 1 or not np.any(told):
        return cal, model
    (tech, eff), = cal.efficiency.items()
    tiers = {d.get("tech"): d.get("tier") for *_, d in graph.edges(data=True)}
    factor = eff / link_efficiency(tech)
    if tiers.get(tech) not in tp.SERVER_TIERS or not factor < 1:
        return cal, model
    told = np.asarray(told, dtype=bool)

    def median_error(t):             # signed: the told rows' median relative error
        return float(np.median(t[told] / measured[told] - 1))

    best = (abs(median_error(model)), cal, model)
    for other in sorted({t for t, tier in tiers.items() if t and tier not in tp.SERVER_TIERS}):
        # the factor refitted on the network: NVLink and the NICs do not run at exactly the same
        # utilisation (a 2 x 8 ring made with IB at 0.70: NVLink's factor put on IB is 1.3 % fast),
        # so the network's own best factor is what "fits as well" compares; a secant on log(factor)
        # against the told rows' median error, _REFITS trials
        tried, f = [], factor
        for _ in range(_REFITS):
            eff = min(1.0, link_efficiency(other) * f)
            trial_times = times(replace(cal, efficiency={other: eff}))
            e = median_error(trial_times)
            tried.append((abs(e), eff, math.log(eff), e, trial_times))
            if abs(e) < 1e-4 or eff >= 1.0:
                break
            slope = -1.0                        # d error / d log(factor): the bandwidth term ~ 1 / factor
            if len(tried) > 1 and tried[-1][2] != tried[-2][2]:
                slope = (tried[-1][3] - tried[-2][3]) / (tried[-1][2] - tried[-2][2])
            if not slope < -1e-3:               # the network barely moves the told rows: no factor fits
                break
            f = eff / link_efficiency(other) * math.exp(-e / slope)
        err, eff, _, _, trial_times = min(tried, key=lambda t: t[0])
        trial = replace(cal, efficiency={other: eff})
        if err <= best[0] + _TIE and (best[1] is cal or err < best[0]):
            best = (err, _with_factor(trial, eff / link_efficiency(other) / factor), trial_times)
    return best[1], best[2]


def _with_factor(cal, ratio):
    """``cal`` with its ``bandwidth`` parameter (value and uncertainty) multiplied by ``ratio``."""
    return replace(cal, parameters=tuple(
        replace(p, value=p.value * ratio, uncertainty=None if p.uncertainty is None else p.uncertainty * ratio)
        if p.name == "bandwidth" else p for p in cal.parameters))


def _parameters(x, sd, tech) -> tuple:
    """A :class:`FittedParameter` per quantity of the fit's vector ``x`` (sd: its standard deviations or None)."""
    out = []
    for q, v, s in zip(_QUANTITIES, x, sd):
        if not q.fitted:
            continue
        if q.log:
            value, default, unc = math.exp(v), 1.0, None if s is None else math.exp(v) * s
        else:
            k = 1e-6 if q.unit == "s" else 1.0
            default = getattr(PIPELINE, q.name) if hasattr(PIPELINE, q.name) else 0.0
            value, unc = v * k, None if s is None else s * k
        out.append(FittedParameter(q.name, float(value), float(default), unc, s is not None, q.unit))
    return tuple(out)


def calibrate(graph, logs, *, ranks=None, op: str | None = None, algorithm: str = "auto", iterations: int = 2,
              **options) -> Calibration:
    """Fit the model's physical quantities to nccl-tests logs, and say which the logs could not tell.

    ``logs`` are paths, texts or DataFrames of :func:`flowsolver.nccl_tests.read`; each
    must have been run on as many ranks as ``ranks`` (default every GPU of ``graph``) and
    test ``op`` (default what the log says). A log's rank count is its device list's or
    its NCCL INFO lines' (``nranks``), else the one its busbw / algbw ratios allow
    (all-reduce, all-gather, reduce-scatter, all-to-all); one that differs is a
    ValueError, and a log that says none (a broadcast table without a device list) is
    fitted only when ``ranks`` is passed. A missing log is FileNotFoundError. ``ranks`` are in
    the log's rank order: a sendrecv log is timed as nccl-tests runs it, the ring shift of
    ``ranks`` (rank i to rank i + 1 mod n, all at once) solved together, its slowest pair's time,
    each rank on the server of the host its device list names (``--map-by node`` places them
    round-robin: :func:`~._calibrate_rows.log_ranks`).
    ``algorithm`` is the log's (``"auto"``: NCCL's choice among what each log's ``NCCL_ALGO``
    allowed its op, as its NCCL INFO lines say and NCCL reads it: ``Ring,Tree``, ``^NVLS``,
    ``allreduce:ring;allgather:nvls``; a name or a list of names as :func:`flowsolver.collective`
    takes them), ``protocol`` likewise (``"auto"``: NCCL's choice among what ``NCCL_PROTO``
    allowed); a log's other NCCL settings are applied as NCCL applies them
    (``NCCL_NVLS_ENABLE=0``: no NVLS nor NVLSTree; ``NCCL_MIN_NCHANNELS`` /
    ``NCCL_MAX_NCHANNELS``: the channels; ``NCCL_PXN_DISABLE=1``: no PXN;
    :func:`~._calibrate_rows.log_settings`) and those the model cannot express are named in a
    warning and in ``message`` (the fit may absorb their effect); a log of GPUs of another
    generation than the graph's is refused. ``options`` the other keywords of
    :func:`flowsolver.collective` (``channels=`` and ``pxn=`` given here win over a log's);
    ``gpus_per_thread`` defaults to the logs' header (``nGpus``, nccl-tests ``-g``: one thread driving several
    GPUs puts a host floor under small sizes, :class:`~flowsolver.CollectiveOptions`; 1 where
    the header says ``graph:`` >= 1, ``-G``, whose timed loop holds no host calls); logs
    whose ``nGpus`` differ, or of which some state it and some do not, are refused unless
    ``gpus_per_thread`` is given.

    Each row's flows are solved once; a robust least squares (soft-L1 on the relative error,
    with a prior at the library's values) then fits a latency added to every call, one added
    to each network hop (NCCL's own latency constants are kept: ``latency_scale`` stays 1), a factor on the flow-solved bandwidths, one on LL's and the chunk
    pipeline's step floors and fills (:mod:`~._pipeline`), NCCL's caps and choice re-evaluated
    at every trial. A quantity is constrained when the logs shrink its prior spread at least
    twofold, jointly and from the rows that tell it at their own misfit (a latency or bandwidth
    factor only from rows whose time it carries at least half of); the others stay at the
    library's value and are named in ``unconstrained`` (e.g. the latencies from large messages
    only, the bandwidth from small ones). ``parameters`` gives each quantity's value and
    uncertainty. The bandwidth factor becomes the efficiency of the technology that
    bottlenecks most of the transfer, and the whole is re-solved with the fit up to
    ``iterations`` times (the bottleneck may move). Efficiencies are capped at 1 (a measured
    rate above the raw one is the model's fault, not the link's: the residuals show it). Links
    in series (NVLink, PCIe, NIC on one path) cannot be told apart by one log: the fit moves the
    technology that bottlenecks the model's rows, or, where that is a link inside the servers
    and a network technology's derating fits the log as well, the network's (NVLink's rate is the
    GPU generation's, measured on one node; the network's is what differs between clusters).

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=1)
    >>> log = '''#       size         count      type   redop    root     time   algbw   busbw #wrong
    ...   134217728       4194304     float     sum      -1    377.2  355.81  311.34      0
    ...   268435456       8388608     float     sum      -1    709.7  378.22  330.94      0
    ...   536870912      16777216     float     sum      -1   1377.8  389.65  340.94      0'''
    >>> cal = calibrate(g, [log], op="reduce_scatter")
    >>> sorted(cal.efficiency), round(float(cal.residuals["error"].abs().max()), 2) <= 0.05
    (['nvlink4'], True)
    >>> "launch_latency" in cal.unconstrained   # 128-512 MiB rows cannot tell a latency
    True
    """
    options.setdefault("protocol", "auto")
    if options.get("policy_options") is None:
        options.pop("policy_options", None)
    opts = Options(tuner=options.pop("step_latency", None) is None, **options)      # checked before any log is read
    if op in OPS:
        check_call(op, algorithm, 1.0, opts, several=True)    # as collective() words it, before any log is read
    # placed: each row's ranks; settings: its log's NCCL settings as collective() keywords (pxn, channels)
    rows, n, allowed, reductions, per_thread, placed, settings, unmodelled = _rows(logs, graph, ranks, op)
    chosen = {o: check_call(o, algorithm, 1.0, opts, several=True) for o in sorted({o for o, _, _ in rows})}
    # each row NCCL's choice among what its log's NCCL_ALGO / NCCL_PROTO allowed, unless given here
    algos = [chosen[o] if algorithm != "auto" else a for (o, _, _), (a, _) in zip(rows, allowed)]
    protos = [None if opts.protocol != "auto" else p for _, p in allowed]
    if "gpus_per_thread" not in options and per_thread != {None}:       # the logs' nGpus (nccl-tests -g)
        if len(per_thread) > 1:
            said = sorted(str(k) if k else "not stated" for k in per_thread)
            raise ValueError(f"the logs' GPUs per thread differ (nGpus: {', '.join(said)}): calibrate them apart, "
                             "or pass gpus_per_thread=")
        opts = replace(opts, gpus_per_thread=per_thread.pop())
    measured = np.array([t for _, _, t in rows])
    fitted = fit_over(graph, opts)

    def with_fit(cal, i):           # (algorithm, options, calibration) of row i under the fit in cal
        o, c = fitted(cal)          # (the row's reduction op and data type: which algorithms NCCL runs)
        o = replace(o, redop=reductions[i][0], dtype=reductions[i][1],
                    **{k: v for k, v in settings[i].items() if k not in options})     # the call's own win
        return algos[i], o if protos[i] is None else replace(o, protocol=protos[i]), c
    cal = Calibration(efficiency={}, latency_scale=1.0, ranks=n, ops=tuple(sorted({o for o, _, _ in rows})))
    done = np.zeros(_FACTORS)     # log factors of latency, bandwidth, LL, P2P already in cal (vs the library's)
    converged, previous = True, None
    for _ in range(max(1, int(iterations))):
        models = [RowModel(graph, o, size, placed[i], *with_fit(cal, i)) for i, (o, size, _) in enumerate(rows)]
        if previous is not None and np.allclose([r.time()[0] for r in models], previous, rtol=1e-4):
            break                 # re-solved with the fit, the rows take what the fit said: no bottleneck moved
        x, sd, converged, fit = _fit(models, measured, done)
        lam, m, ll, pp = np.exp(x[:_FACTORS] - done)
        pipeline, net, launch = fit.pipeline(x), max(float(x[_NET]), 0.0) * 1e-6, max(float(x[_LAUNCH]), 0.0) * 1e-6
        # the bandwidth factor goes to the technology that holds most of the rows' transfer
        weight: dict = {}
        previous = []
        for r, t_meas in zip(models, measured):
            t, a = r.time(lam, m, ll, pipeline, net, launch, pp)
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
                      p2p_bandwidth=math.exp(x[3]), net_latency=net, launch_latency=launch, pipeline=pipeline,
                      parameters=_parameters(x, sd, tech),
                      unconstrained=tuple(q.name for q, s in zip(_QUANTITIES, sd) if s is None and q.fitted))
        done = np.array([x[0], applied, x[2], x[3]])
    def times(c):
        return np.array([row_time(graph, o, s, placed[i], *with_fit(c, i)) for i, (o, s, _) in enumerate(rows)])

    model = times(cal)
    cal, model = _network_first(graph, cal, model, measured, times, fit.masks[1])
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("flowsolver.calibrate needs pandas: pip install 'flowsolver[analysis]'") from None

    residuals = pd.DataFrame(dict(op=[o for o, _, _ in rows], size=[s for _, s, _ in rows], measured=measured,
                                  model=model, error=(model - measured) / measured))
    notes = [] if converged else ["the least-squares fit did not converge"]
    if unmodelled:          # (each warned of as its log was read)
        notes.append("the fit may have absorbed the effect of what the model does not express: "
                     + "; ".join(dict.fromkeys(unmodelled)))
    if cal.unconstrained:
        notes.append(f"the logs do not constrain: {', '.join(cal.unconstrained)} (left at the library's value)")
    return replace(cal, residuals=residuals, converged=converged, message="; ".join(notes))
