"""Calibration from nccl-tests logs: the model's physical quantities (a call's and a network
hop's latency, the links', LL's and a P2P channel's bandwidth, the chunk pipeline's floors and fills)
fitted by robust least squares to the measured times with a prior at the library's values;
what a log cannot tell stays at the library's value and is named. The result is a model
:func:`flowsolver.collective` takes."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

import topologies as tp

from .. import _checks, nccl_tests
from ..routing import link_efficiency
from ._calibrate_checks import ranks_from_busbw  # noqa: F401  (tests read it here)
from ._calibrate_rows import _rows, fit_over
from ._calibration import Calibration, FittedParameter
from ._calibrate_model import RowModel, row_time
from ._nccl import OPS
from ._option_values import nccl_release
from ._options import Options, check_call
from ._pipeline import PIPELINE
from ._nccl_timing import transfer_of
from ._calibrate_fit import _FACTORS, _LAUNCH, _NET, _QUANTITIES, _fit
from ._algorithms import NCCL_ALGORITHMS

__all__ = ["Calibration", "FittedParameter", "calibrate"]

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
    given = dict(options)           # as the caller gave them (the fit without NVLS is given them again)
    options.setdefault("protocol", "auto")
    if options.get("policy_options") is None:
        options.pop("policy_options", None)
    opts = Options(tuner=options.pop("step_latency", None) is None, **options)      # checked before any log is read
    if op in OPS:
        check_call(op, algorithm, 8.0, opts, several=True)    # as collective() words it, before any log is read
    # placed: each row's ranks; settings: its log's NCCL settings as collective() keywords (pxn, channels)
    rows, n, allowed, reductions, per_thread, placed, settings, unmodelled = _rows(logs, graph, ranks, op)
    if options.get("nccl_version") is not None:     # the call's release wins over the logs' version lines: said
        logged = sorted({str(s["nccl_version"]) for s in settings if s.get("nccl_version")
                         and nccl_release(s["nccl_version"]) != opts.nccl_version})
        if logged:
            _checks.warn_at_caller(f"nccl_version={options['nccl_version']!r} is applied to every row, over the logs' "
                                   f"NCCL version lines ({', '.join(logged)}): leave it out to fit each log with "
                                   f"its own release's rules")
    chosen = {o: check_call(o, algorithm, 8.0, opts, several=True) for o in sorted({o for o, _, _ in rows})}
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
        previous, picked = [], []
        for r, t_meas in zip(models, measured):
            t, a = r.time(lam, m, ll, pipeline, net, launch, pp)
            previous.append(t)
            picked.append(a)
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
    notes += capped_efficiencies(cal)
    notes += _idle_efficiency(cal, model, times)
    notes += _misfit(residuals)
    if algorithm == "auto" and _NVLS & {a for a, (own, _) in zip(picked, allowed) if own == "auto"}:
        # a release named (the call's, or every log's version line) ran NVLS, so is 2.17 or later
        named = given.get("nccl_version") is not None or all(s.get("nccl_version") for s in settings)
        notes += _without_nvls(graph, logs, cal, residuals, ranks=ranks, op=op, iterations=iterations,
                               options=given, release_named=named)
    return replace(cal, residuals=residuals, converged=converged, message="; ".join(notes))


def _idle_efficiency(cal, model, times) -> list:
    """A note where the fitted efficiency moves none of the rows' times (newuser24: a 2 x DGX H100
    log's large rows, NVLSTree bound by NVLink, put the factor on the InfiniBand links, 0.924,
    and every row stayed as the library's): that technology does not bound the rows at what
    NCCL's choice runs."""
    if not cal.efficiency:
        return []
    change = max(abs(math.log(e / link_efficiency(t))) for t, e in cal.efficiency.items())
    plain = times(replace(cal, efficiency={}))
    moved = float(np.max(np.abs(np.log(model / plain)))) if len(model) else 0.0
    # a link that bounds a row's transfer moves its time about as much as its efficiency moved: less
    # than half of that at most is a link the rows mostly do not wait on
    if not change > 0 or moved >= 0.5 * change:
        return []
    said = ", ".join(f"{t} {e:.3f} (library {link_efficiency(t):.3f})" for t, e in sorted(cal.efficiency.items()))
    return [f"the fitted efficiency ({said}, {change:.1%} from the library's) moves the logs' times by at most "
            f"{moved:.2%}: that technology mostly does not bound these rows as NCCL's choice runs them (the "
            "bandwidth the logs show is another link's or NCCL's own cap; an algorithm forced as the run had it, "
            "e.g. --algorithm ring, can tell it)"]


#: The uncalibrated model's median |error| over the validation corpus, every point held out
#: (1,955 nccl-tests points, ``benchmarks/validate.py``, 2026-12-07; docs/accuracy.md): a
#: calibration that misses its own logs by more has not made the model follow them
HELD_OUT_MEDIAN = 0.111


def _misfit(residuals) -> list:
    """A note where the calibrated model misses its own logs by a median |error| above
    :data:`HELD_OUT_MEDIAN`, naming the worst row (newuser23: a poor fit under an explicit
    algorithm list said nothing)."""
    errors = residuals["error"].abs()
    median = float(errors.median())
    if not median > HELD_OUT_MEDIAN:
        return []
    worst = residuals.loc[errors.idxmax()]
    return [f"the calibrated model misses these logs by a median {median:.1%} (worst: {worst['op']} at "
            f"{int(worst['size'])} B, {worst['error']:+.0%}), more than the uncalibrated model misses measurements "
            f"it never saw ({HELD_OUT_MEDIAN:.1%}): the logs' run may differ from the call's (NCCL_ALGO / "
            "NCCL_PROTO, the GPUs, NICs or nodes of the graph)"]


#: NCCL's NVLink SHARP algorithms: what a run without NVLS (NCCL_NVLS_ENABLE=0, an NCCL before
#: 2.17, a VM or container without the fabric manager's multicast) does not run
_NVLS = {"nvls", "nvls_tree"}


def _without_nvls(graph, logs, cal, residuals, *, ranks, op, iterations, options, release_named=False) -> list:
    """A note where NCCL's choice ran NVLS in the fit's rows though the logs do not say NVLS ran
    (newuser22: an 8 x H100 all-reduce log at ring speed, ~360 GB/s busbw, was fitted as NVLS on a
    derated NVLink, 0.63 of its rate, and every ring collective after it ran ~25 % slow): the
    same logs fitted with NVLS off, so that the user can tell which the run was. None where
    the logs are faster than a run without NVLS allows (its efficiency capped at 1)."""
    names = sorted({a for o in cal.ops for a in NCCL_ALGORITHMS[o]} - _NVLS)
    try:
        with warnings.catch_warnings():     # what the logs hold was said by the fit itself, once
            warnings.simplefilter("ignore")
            other = calibrate(graph, logs, ranks=ranks, op=op, algorithm=names, iterations=iterations, **options)
    except ValueError:          # an op that runs only NVLS here: nothing to compare
        return []
    if not other.efficiency or any(e >= 1.0 for e in other.efficiency.values()):
        return []
    said = lambda c: ", ".join(f"{t} {e:.3f}" for t, e in sorted(c.efficiency.items())) or "unchanged"  # noqa: E731
    misfit = lambda r: float(r["error"].abs().median())  # noqa: E731
    older = "" if release_named else "an NCCL before 2.17, "      # (a release named ran NVLS: 2.17 or later)
    return [f"fitted as NCCL's choice, NVLS / NVLSTree on this NVSwitch server (efficiency {said(cal)}, median "
            f"misfit {misfit(residuals):.1%}); fitted with NVLS off (NCCL_NVLS_ENABLE=0, {older}"
            f"a VM without NVLink multicast) the logs give {said(other)} (median misfit "
            f"{misfit(other.residuals):.1%}): if the run had no NVLS, calibrate with algorithm="
            f"{names!r} (the CLI: --algorithm {','.join(names)})"]


def capped_efficiencies(cal) -> list:
    """A note per technology whose efficiency the fit left at its cap of 1 where the bandwidth
    factor asked for more: the logs are faster than the raw rate allows, so the calibrated times
    are the cap's, not the logs' (the model's shape at the logs' sizes is off, not the link)."""
    factor = {p.name: p for p in cal.parameters}.get("bandwidth")
    out = []
    for tech, eff in sorted(cal.efficiency.items()):
        wanted = None if factor is None else factor.value * link_efficiency(tech, None)
        if eff >= 1.0 and wanted is not None and wanted > 1.0:
            out.append(f"{tech} at 1.000, its cap: the fit asked for {wanted:.2f} of the raw rate, more than the "
                       "link has: the model's shape at these sizes is off, not the link (the residuals show "
                       "where); the calibrated times are the cap's, not the logs'")
    return out
