"""A run's steady state: the window in which the batch is full, the tokens made in it, and
whether the engine can serve the stream's load at all (its utilisation ``rho``)."""

from __future__ import annotations

import math
import warnings

import numpy as np

#: requests a steady run's window is sized to expect: a Poisson count of mean 5 is 0 (no steady
#: request at all) with probability e^-5 < 1 %
STEADY_REQUESTS = 5

def steady_state(first, finish, output, duration: float) -> tuple:
    """``(start, end, steady requests, needed duration)`` of a run's steady state: the batch has
    filled once every request decoding started after the first first token, ``start`` = the
    first first token + the longest decode (99th percentile of finish - first token); it drains
    after the last first token, ``end``. The steady requests decode wholly inside ``[start,
    end]``; they arrive over ``end - longest - start`` s of the ``duration``, at least half of it
    when ``duration >= 2 (start + longest)`` (a stable queue's ``end`` is about ``duration``):
    about four request lifetimes.

    >>> a, b, ok, need = steady_state(np.array([1.0, 3.0, 5.0]), np.array([2.0, 4.0, 6.0]), np.array([3, 3, 3]), 5.0)
    >>> a, b, ok.tolist(), need           # every decode 1 s: full from 2 s, steady requests 2 ... 4 s
    (2.0, 5.0, [False, True, False], 6.0)
    """
    ok = np.isfinite(first) & np.isfinite(finish)
    if not ok.any():
        return float("nan"), float("nan"), ok, float("inf")
    longest = float(np.quantile((finish - first)[ok], 0.99))
    start = float(np.min(first[ok])) + longest
    end = float(np.max(first[ok]))
    with np.errstate(invalid="ignore"):
        inside = ok & (first >= start) & (finish <= end)
    return start, end, inside, 2.0 * (start + longest)


def tokens_between(first, finish, output, start: float, end: float) -> float:
    """Output tokens made in ``[start, end]``: each request's first at ``first``, the other
    ``output - 1`` evenly over ``(first, finish]``."""
    ok = np.isfinite(first) & np.isfinite(finish)
    f, e, o = first[ok], finish[ok], output[ok].astype(np.float64)
    made = np.sum((f >= start) & (f <= end)).astype(np.float64)
    span = e - f
    overlap = np.clip(np.minimum(e, end) - np.maximum(f, start), 0.0, None)
    rest = np.where(span > 0, (o - 1) * overlap / np.where(span > 0, span, 1.0), 0.0)
    return float(made + rest.sum())


def utilization(engine: dict, rate: float, prompt, output) -> tuple:
    """``(rho, sustainable requests/s)``: the share of its time the engine would need to serve
    ``rate`` requests/s of the stream's lengths at its service rate (its queue never empty), and
    ``rate / rho``. A decode instance then runs ``B`` sequences a step (its ``max_batch x ep``, no
    more whole requests of ``p + o`` tokens than its ranks' KV caches hold, nor than the run
    has): a request's ``s = o - 1`` decode tokens cost ``s decode_step(B) / B``, the batch holding
    ``p + E[s^2] / (2 E[s])`` tokens a sequence (a request stays in it ``s`` steps, so a long one
    is there longer: the time average of ``p + j`` over its steps, weighted by ``s``).

    A co-located instance prefills first, but only into the room its full batch has: a decode
    step frees ``B / E[s]`` sequences on average, so each prefill step takes ``k = max(1, B /
    E[s])`` prompts (and no more than ``token_budget`` allows), not the ``token_budget / p`` of an
    idle instance: Llama 3 8B TP 8 max_batch 64, prompts 512, outputs U(32, 544) takes one at a
    time, and priced at 16 the service read ~18 % high (an overloaded run serves 43.6
    requests/s). A disaggregated prefill instance's queue is full at its service rate: ``k`` as
    ``token_budget`` and ``max_batch x ep`` allow. Co-located, ``rho = rate (prefill_step(k) / k
    + decode) / instances``; disaggregated, the busier pool's. The alternatives, measuring the
    rate from the run's busy periods or a trend of its TTFT, need a run long enough to show it;
    this prices it from the step tables for any run (and :func:`rho_measured` still checks it)."""
    p, o = float(np.mean(prompt)), float(np.mean(output))
    s = np.maximum(np.asarray(output, dtype=np.float64) - 1.0, 0.0)
    steps = float(np.mean(s))
    fits = engine["decode_ranks"] * int(engine["decode_capacity"] // (p + o))
    batch = max(1, min(engine["decode_at_once"], fits, len(prompt)))     # (the tables hold the run's requests)
    held = p + (float(np.mean(s * s)) / (2.0 * steps) if steps > 0 else 0.0)
    decode = steps * engine["decode_time"](batch, batch * held)[0] / batch
    k = max(1, min(int(engine["token_budget"] // p), engine["max_seqs"]))
    if not engine["decode_instances"] and steps > 0:     # co-located: the room its full batch frees a step
        k = max(1, min(k, int(round(batch / steps))))
    prefill = engine["prefill_time"](np.full(k, p))[0] / k
    if engine["decode_instances"]:          # disaggregated: two pools, each its own servers
        rho = max(rate * prefill / engine["prefill_instances"], rate * decode / engine["decode_instances"])
    else:
        rho = rate * (prefill + decode) / engine["prefill_instances"]
    return rho, rate / rho


def rho_measured(rate: float, output, served: float, first, start: float, end: float) -> float:
    """``rate x mean output / served`` (offered over served output tokens/s in the steady window)
    where it is above 1 by more than four standard deviations of a stable queue's ratio (the
    window's requests a Poisson count ``n``, their outputs of variation ``cv``:
    ``sqrt((1 + cv^2) / n)``), else 0: an overloaded run serves its service rate, whatever
    arrives."""
    o = np.asarray(output, dtype=np.float64)
    n = int(np.sum((first >= start) & (first <= end)))
    ratio = rate * float(np.mean(o)) / served if served > 0 else float("inf")
    spread = np.sqrt((1.0 + (np.std(o) / np.mean(o)) ** 2) / max(n, 1))
    return ratio if ratio > 1.0 + 4.0 * spread else 0.0


def needed_duration(arrival, start: float, needed: float, rate: float) -> tuple:
    """``(this run's, a rerun's)`` duration for steady state, from this run's window (``start``,
    ``needed`` of :func:`steady_state`) and ``rate``. This run's: ``2 (start + longest)`` and
    enough for the window to expect :data:`STEADY_REQUESTS` requests, ``start + longest +
    (STEADY_REQUESTS + 1) / rate`` (the last request arrives ``1 / rate`` before the end on
    average). A rerun's: the same with the batch's fill after the first arrival, ``start -
    arrival[0]``, plus that arrival's 99th percentile ``ln(100) / rate`` in place of ``start``
    (another draw's first request may come later), so that a rerun of it is steady but for about
    1 % of draws.

    >>> own, rerun = needed_duration(np.array([0.5, 3.0]), 2.0, 6.0, rate=0.5)     # fill 1.5 s, longest 1 s
    >>> own, round(rerun, 2)
    (15.0, 23.71)
    """
    longest = needed / 2.0 - start
    fill = start - float(np.min(arrival))
    late = math.log(100.0) / rate
    window = (STEADY_REQUESTS + 1) / rate
    own = max(needed, start + longest + window)
    return own, max(own, 2.0 * (fill + late + longest), fill + late + longest + window)


def verdict(engine: dict, trace, arrival, prompt, output, duration: float, rate: float, gpus: int) -> dict:
    """The steady-state fields of a run (``steady``, ``throughput``, the window, ``utilization``:
    the larger of :func:`utilization`'s bound and :func:`rho_measured`, ``sustainable_rate``:
    ``rate / utilization``), warning (RuntimeWarning) where it is not steady: overloaded (the queue
    grows without bound) or too short (naming the duration a steady run needs)."""
    rho, sustainable = utilization(engine, rate, prompt, output)
    first, finish = trace.first_token, trace.finish
    start, end, inside, needed = steady_state(first, finish, output, duration)
    done = np.isfinite(finish)
    own = needed
    if np.isfinite(needed):
        own, needed = needed_duration(arrival, start, needed, rate)
    if inside.any() and end > start:    # the tokens made while the batch is full
        throughput = tokens_between(first, finish, output, start, end) / (end - start) / gpus
    else:                       # no request decoded wholly in it: what the run served over its arrivals
        throughput = float(np.sum(output[done])) / duration / gpus
    long_enough = bool(duration >= own and inside.any())
    if inside.any() and end > start:    # the run's own service: a stable queue serves what arrives
        measured = rho_measured(rate, output, throughput * gpus, first, start, end)
        if measured > rho:
            rho, sustainable = measured, rate / measured
    if rho >= 1.0:
        warnings.warn(f"serve: overloaded: {rate:.4g} requests/s offer {rho:.3g} x what the instances serve "
                      f"(rho = offered / service rate; about {sustainable:.4g} requests/s sustainable), so the queue "
                      f"grows without bound and no steady state exists: TTFT grows with duration and the throughput "
                      f"is the service rate; lower rate below {sustainable:.4g} requests/s or add instances",
                      RuntimeWarning, stacklevel=4)
    elif not long_enough:
        advice = (f"a steady run needs duration >= {needed:.3g} s (about four request lifetimes, and "
                  f"{STEADY_REQUESTS} requests expected in the window at {rate:.4g} requests/s)" if duration < own
                  else f"this draw is the rare one: rerun with another seed or a longer duration")
        warnings.warn(f"serve: duration {duration:g} s does not reach steady state: the batch is full only from "
                      f"{start:.3g} s and {int(inside.sum())} requests decoded wholly inside the steady window, so "
                      f"the throughput, goodput and latencies hold its ramp up and drain; {advice}",
                      RuntimeWarning, stacklevel=4)
    return dict(steady=long_enough and rho < 1.0, throughput=throughput, needed_duration=needed,
                steady_window=(start, end), in_steady=inside, utilization=rho, sustainable_rate=sustainable)
