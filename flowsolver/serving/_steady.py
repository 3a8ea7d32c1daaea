"""A run's steady state: the window in which the batch is full, the tokens made in it, and
whether the engine can serve the stream's load at all (its utilisation ``rho``)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ._events import simulate

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


def spec_lengths(spec) -> np.ndarray:
    """The token counts a length spec of :func:`flowsolver.serving.request_stream` draws, each
    equally likely: an int, every integer of ``(lo, hi)``, the samples of a list.

    >>> spec_lengths(4).tolist(), spec_lengths((2, 4)).tolist(), spec_lengths([3, 3, 9]).tolist()
    ([4.0], [2.0, 3.0, 4.0], [3.0, 3.0, 9.0])
    """
    if isinstance(spec, tuple):
        return np.arange(int(spec[0]), int(spec[1]) + 1, dtype=np.float64)
    return np.atleast_1d(np.asarray(spec, dtype=np.float64))


def spec_bounds(spec) -> tuple:
    """``(fewest, most)`` tokens a length spec of :func:`flowsolver.serving.request_stream` draws,
    from the bounds of ``(lo, hi)`` (no array of the integers between: ``(1, 10**10)`` costs
    nothing) or the samples of a list.

    >>> spec_bounds(4), spec_bounds((2, 10 ** 12)), spec_bounds([3, 3, 9])
    ((4, 4), (2, 1000000000000), (3, 9))
    """
    if isinstance(spec, tuple):
        return int(spec[0]), int(spec[1])
    lengths = spec_lengths(spec)
    return int(lengths.min()), int(lengths.max())


def spec_mean(spec) -> float:
    """Mean token count of a length spec (every integer of ``(lo, hi)`` equally likely: the
    midpoint).

    >>> spec_mean(4), spec_mean((2, 10 ** 12)), spec_mean([3, 3, 9])
    (4.0, 500000000001.0, 5.0)
    """
    if isinstance(spec, tuple):
        return (int(spec[0]) + int(spec[1])) / 2.0
    return float(np.mean(spec_lengths(spec)))


def run_engine(engine: dict, arrival, prompt, output, window: float = np.inf):
    """:func:`flowsolver.serving._events.simulate` of the requests on ``engine``'s instances and
    step tables (the dict :func:`flowsolver.serve` builds)."""
    return simulate(arrival, prompt, output, prefill_instances=engine["prefill_instances"],
                    decode_instances=engine["decode_instances"], max_seqs=engine["max_seqs"],
                    decode_max_seqs=engine["decode_max_seqs"], decode_kv_capacity=engine["decode_capacity"],
                    decode_ranks=engine["decode_ranks"], token_budget=engine["token_budget"],
                    kv_capacity=engine["capacity"], prefill_time=engine["prefill_time"],
                    decode_time=engine["decode_time"], kv_seconds=engine["kv_seconds"],
                    kv_bytes_per_token=engine["kv_bytes_per_token"], kv_ranks=engine["kv_ranks"], window=window)


#: requests of the saturated run that measures an engine's service rate (:func:`service_rate`),
#: at least: its steady window then holds ~1,000 of them, a ratio within ~3 % (2 sigma at the
#: outputs' cv ~0.5 of U(32, 544))
SATURATED_REQUESTS = 2000
#: the most requests of that run but for 4 batches' worth (~1 s)
MAX_REQUESTS = 50_000
#: the decode steps an instance of that run takes at most (the event loop's ~10 us each: ~2 s),
#: fewer requests where each is long and the batch small (at least 4 batches' worth)
MAX_STEPS = 200_000


def service_rate(engine: dict) -> float:
    """The requests/s ``engine`` serves with its queue never empty, measured as an overloaded
    run measures it: :data:`SATURATED_REQUESTS` requests (at least 20 batches' worth of the
    longest, so the steady window is most of the run; at most :data:`MAX_STEPS` steps) of the
    workload's spec (``engine["prompt"]`` / ``["output"]``, drawn with seed 0: a property of the
    spec, not of one run's draw, so a short run prices a rate as a long one) all arriving at 0 s,
    the output tokens made in the steady window (:func:`steady_state`) over its length and the
    spec's mean output. Cached in ``engine``.

    Measured, not priced from the step tables: the engine's steps are what its queue makes them.
    Co-located, a full batch has room for the prompts that finished a step: outputs of spread
    lengths free one sequence at a time and each prefill step takes one prompt (Llama 3 8B TP 8
    max_batch 64, 512 / U(32, 544): 44.2 requests/s, an overloaded run at 56 serving 43.7 over 60 s, where
    steps of the 16 prompts an idle instance takes read 51.5), while equal outputs finish the
    prompts of one step together and the next step refills all of them (512 / 256, max_batch
    256: 103.9, an overloaded run at 150 serving 101.5 over 20 s, where steps of one prompt read 76). Busy
    periods of the run itself or a trend in its TTFT would need a run long enough to show them;
    this needs none."""
    if "service_rate" in engine:
        return engine["service_rate"]
    prompt, output = spec_lengths(engine["prompt"]), spec_lengths(engine["output"])
    steps = np.maximum(output - 1.0, 0.0)
    batch = max(engine["decode_at_once"] * max(engine["decode_instances"], engine["prefill_instances"]), 1)
    n = max(SATURATED_REQUESTS, 20 * batch * (steps.max() + 1) / (steps.mean() + 1))
    # no more than ~MAX_STEPS decode steps an instance (a step each of the requests' tokens over its batch)
    n = int(min(n, max(4 * batch, min(MAX_REQUESTS, MAX_STEPS * engine["decode_at_once"] / (steps.mean() + 1)))))
    rng = np.random.default_rng(0)
    p = rng.choice(prompt, size=n).astype(np.int64)
    o = rng.choice(output, size=n).astype(np.int64)
    trace = run_engine(engine, np.zeros(n), p, o)
    start, end, inside, _ = steady_state(trace.first_token, trace.finish, o, 0.0)
    if inside.any() and end > start:
        made = tokens_between(trace.first_token, trace.finish, o, start, end) / (end - start)
    else:                   # (a batch that never turns over: what it made over the run)
        made = float(o.sum()) / float(np.nanmax(trace.finish))
    engine["service_rate"] = made / float(np.mean(output))
    return engine["service_rate"]


def utilization(engine: dict, rate: float) -> tuple:
    """``(rho, sustainable requests/s)``: ``rate`` over the engine's :func:`service_rate` (the
    share of its time it would need at that rate: rho >= 1, the queue grows without bound) and
    that service rate."""
    mu = service_rate(engine)
    return rate / mu, mu


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
    the larger of :func:`utilization` (rate over the measured service rate) and
    :func:`rho_measured`, ``sustainable_rate``:
    ``rate / utilization``), warning (RuntimeWarning) where it is not steady: overloaded (the queue
    grows without bound) or too short (naming the duration a steady run needs)."""
    rho, sustainable = utilization(engine, rate)
    first, finish = trace.first_token, trace.finish
    start, end, inside, needed = steady_state(first, finish, output, duration)
    done = np.isfinite(finish)
    own = needed
    if np.isfinite(needed):
        own, needed = needed_duration(arrival, start, needed, rate)
    if inside.any() and end > start:    # the tokens made while the batch is full
        throughput = tokens_between(first, finish, output, start, end) / (end - start) / gpus
    elif done.any():            # no request decoded wholly in it: what the run served over the time it
        # took, its first arrival to its last completion (not the arrival window: a short run's
        # requests finish long after it), and never above the engine's service rate
        span = float(np.max(finish[done])) - float(np.min(arrival))
        capacity = service_rate(engine) * spec_mean(engine["output"])
        throughput = min(float(np.sum(output[done])) / span if span > 0 else capacity, capacity) / gpus
    else:
        throughput = 0.0
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


def check_fits(engine: dict, prompt, output) -> None:
    """A ValueError naming the request and the pool when a request cannot fit the KV cache it
    needs on one attention rank: co-located, prompt + output; disaggregated, its prompt on a
    prefill instance's rank and (more than one output token) prompt + output on a decode
    instance's."""
    need = np.asarray(prompt) + np.asarray(output)
    if "decode" in engine["kv_capacities"]:
        checks = [(np.asarray(prompt), engine["capacity"], "a prompt of {} tokens", "a prefill instance"),
                  (need[np.asarray(output) > 1], engine["decode_capacity"], "a request of {} tokens (prompt + output)",
                   "a decode instance")]
    else:
        checks = [(need, engine["capacity"], "a request of {} tokens (prompt + output)", "an instance")]
    for tokens, capacity, what, where in checks:
        if len(tokens) and tokens.max() > capacity:
            raise ValueError(f"{what.format(int(tokens.max()))} exceeds the KV cache of one attention rank of "
                             f"{where} ({capacity:.0f} tokens; a request's cache sits whole on one of its ep ranks): "
                             f"shorten prompt / output or raise tp or pp")
