"""The robust least-squares fit of a calibration (:func:`flowsolver.collectives.calibrate`): the
quantities a log may tell (:data:`_QUANTITIES`), which rows tell each, the prior at the library's
values, and what a fit leaves unconstrained."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from ._pipeline import PIPELINE, Pipeline


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
