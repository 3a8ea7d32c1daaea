"""What :func:`~flowsolver.serving.serve` returns and the request streams it simulates:
Poisson arrivals with token lengths, the event simulation of a stream on an engine's step
tables (``_events``), and the result's latencies, throughput and goodput."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import _checks
from ._steady import check_fits, run_engine, verdict


def _real(value) -> float:
    """``value`` as a float, NaN where it is not a real number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _lengths(name: str, spec, count: int, rng) -> np.ndarray:
    """Token counts: an int (fixed), a tuple ``(lo, hi)`` (uniform integers, both included) or
    a list / array of samples drawn from with replacement."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return np.full(count, _checks.integer(name, spec), dtype=np.int64)
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise ValueError(f"{name} as a tuple is a range (lo, hi) of token counts, got {spec!r}")
        lo, hi = (_checks.integer(name, v) for v in spec)
        if hi < lo:
            raise ValueError(f"{name} range (lo, hi) needs lo <= hi, got {spec!r}")
        return rng.integers(lo, hi + 1, size=count)
    if isinstance(spec, (list, np.ndarray)) and len(spec):
        samples = np.asarray(spec)
        if samples.ndim != 1 or not np.issubdtype(samples.dtype, np.integer) or samples.min() < 1:
            raise ValueError(f"{name} as samples must be a 1-D list of positive integer token counts")
        return rng.choice(samples, size=count).astype(np.int64)
    raise TypeError(f"{name} must be an int (tokens), a tuple (lo, hi) or a list of samples, got {spec!r}")


#: the most requests one run draws: the event loop took 46 s and 1.6 GB for 6 million (llama-3-8b on
#: one DGX H100, measured 2026-12-05), so 10 million is about 80 s and 3 GB
MAX_REQUESTS = 10_000_000


def request_stream(rate: float, duration: float, prompt=1024, output=256, *, seed: int = 0) -> tuple:
    """Poisson arrivals at ``rate`` requests/s over ``duration`` s with their prompt and output
    lengths (tokens): ``(arrival, prompt, output)`` arrays, reproducible from ``seed``.

    >>> a, p, o = request_stream(10.0, 60.0, prompt=(100, 200), output=50, seed=1)
    >>> 500 < len(a) < 700, bool(a.max() <= 60.0), int(p.min()) >= 100, set(o.tolist())
    (True, True, True, {50})
    """
    rate = _checks.positive_number("rate", rate, "requests/s")
    duration = _checks.positive_number("duration", duration, "s")
    if rate * duration > MAX_REQUESTS:
        raise ValueError(f"rate x duration = {rate * duration:.3g} requests, more than the {MAX_REQUESTS:,} a run "
                         "simulates (about 0.3 KB and 8 us each): lower rate or duration")
    rng = np.random.default_rng(_checks.integer("seed", seed, minimum=0))
    count = rng.poisson(rate * duration)
    arrival = np.sort(rng.uniform(0.0, duration, size=count))   # a Poisson process, given its count
    return arrival, _lengths("prompt", prompt, count, rng), _lengths("output", output, count, rng)


@dataclass(frozen=True)
class ServeResult:
    """What :func:`serve` measured. Times in seconds, per request in arrays (NaN: unfinished).

    ``ttft`` arrival to first token; ``tpot`` (finish - first token) / (output - 1) for the
    requests with more than one output token; ``throughput`` output tokens/s per GPU in steady
    state: the tokens made between ``steady_window`` = (the first first token plus the longest
    decode, 99th percentile: the batch has filled; the last first token: after it the batch only
    drains), over its length (a stable queue: rate x mean output / GPUs; an overloaded one: what
    the cluster serves); ``utilization`` the offered load over what the instances serve (rho:
    the larger of rate over the engine's service rate, measured on a saturated stream of the
    spec, and the run's offered over served output tokens where that is significantly above 1,
    :mod:`flowsolver.serving._steady`),
    ``sustainable_rate`` = rate / rho (requests/s); ``steady`` whether the run reached steady
    state: ``utilization < 1`` (else the queue grows without bound: TTFT grows with the duration,
    and a RuntimeWarning gives rho and the sustainable rate) and some requests decode wholly
    inside that window, arriving over at least half the arrival window: ``duration >= 2 x`` (the
    window's start + the longest decode), and enough for the window to expect 5 requests
    (:func:`flowsolver.serving._steady.needed_duration`), else a RuntimeWarning naming
    ``needed_duration``, the duration a rerun needs (the figures then hold the ramp up and the
    drain; with no steady request ``throughput`` is the output tokens over the first arrival to
    the last completion / GPUs, at most the service rate's);
    ``goodput`` requests/s per GPU within both targets over the arrival window (NaN without targets);
    ``network_share_ttft`` / ``network_share_tpot``: communication over the whole, summed over the
    requests (disaggregated, the KV transfer counts in the decode time and its share: the first
    token is the prefill instance's, docs/serving.md); ``bottleneck``: per communication kind
    (``prefill.tp``, ``decode.ep``, ``kv``...) the links that held it
    (:class:`flowsolver.routing.Bottleneck`); ``decode_step(batch, context)`` and
    ``prefill_step(tokens)`` the step tables (s, communication s); ``kv_capacities`` the KV
    tokens one attention rank of an instance of each pool holds (``{"colocated": ...}`` or
    ``{"prefill": ..., "decode": ...}``; a request's cache sits whole on one rank, an instance
    holds ``ep`` times it), ``kv_capacity`` the decoding pool's (co-located: the instances';
    disaggregated: the decode pool's)."""

    mode: str
    gpus: int
    duration: float
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    throughput: float
    goodput: float
    network_share_ttft: float
    network_share_tpot: float
    kv_seconds: np.ndarray
    bottleneck: dict
    layouts: dict
    kv_capacity: float
    events: int
    kv_capacities: dict = field(default_factory=dict)
    steady: bool = True
    utilization: float = float("nan")
    sustainable_rate: float = float("nan")
    needed_duration: float = float("nan")
    steady_window: tuple = (float("nan"), float("nan"))
    in_steady: np.ndarray = field(repr=False, default=None)
    step_tables: dict = field(repr=False, default_factory=dict)
    engine: dict = field(repr=False, default_factory=dict)

    def _pct(self, values, q):
        values = values[np.isfinite(values)]
        return float(np.percentile(values, q)) if len(values) else float("nan")

    @property
    def ttft_p50(self) -> float:
        return self._pct(self.ttft, 50)

    @property
    def ttft_p99(self) -> float:
        return self._pct(self.ttft, 99)

    @property
    def tpot_p50(self) -> float:
        return self._pct(self.tpot, 50)

    @property
    def tpot_p99(self) -> float:
        return self._pct(self.tpot, 99)

    @property
    def completed(self) -> int:
        return int(np.sum(np.isfinite(self.ttft)))

    def decode_step(self, batch: int, context: float = 0.0) -> tuple:
        """(seconds, communication seconds) of a decode step of ``batch`` sequences (an
        instance's total, 1 to the most it can run at once: its ``max_batch x ep``, and no more
        whole requests of the least length than its ranks' KV caches hold) holding ``context``
        tokens (>= 0; decode pool), at most what the batch can hold: ``batch`` x the model's
        context (a sequence never holds more) and the instance's KV cache (its ranks'
        ``kv_capacity`` x ``ep``).

        >>> import topologies as tp, flowsolver as fs
        >>> r = fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=2.0, prompt=128, output=8)
        >>> r.decode_step(2, 20000)
        Traceback (most recent call last):
        ValueError: context 20000 tokens is beyond what a decode step of 2 sequences holds: 2 x llama-3-8b's context of 8192 tokens = 16384
        """
        most = self.engine.get("decode_at_once")
        batch = _checks.integer("batch", batch, maximum=most)     # a -1 read the table from its end
        if isinstance(context, (bool, np.bool_)) or not np.isfinite(_real(context)) or context < 0:
            raise ValueError(f"context must be a finite number of tokens >= 0, got {context!r}")
        per_sequence = self.engine.get("context")
        if per_sequence is not None and context > batch * per_sequence:
            raise ValueError(f"context {context:g} tokens is beyond what a decode step of {batch} sequence"
                             f"{'s' if batch != 1 else ''} holds: {batch} x {self.engine.get('model', 'the model')}'s "
                             f"context of {per_sequence} tokens = {batch * per_sequence}")
        held = self.engine.get("decode_capacity", np.inf) * self.engine.get("decode_ranks", 1)
        if context > held:
            raise ValueError(f"context {context:g} tokens is beyond the KV cache of a decoding instance: "
                             f"{held:.0f} tokens ({self.engine.get('decode_capacity'):.0f} a rank x "
                             f"{self.engine.get('decode_ranks')} attention ranks)")
        return self.step_tables["decode"](batch, float(context))

    def prefill_step(self, tokens: int, sequences: int = 1) -> tuple:
        """(seconds, communication seconds) of a prefill step of ``sequences`` equal prompts of
        ``tokens`` tokens in all (integers >= 1, ``sequences <= tokens``, ``tokens`` up to serve's
        ``token_budget`` or its prompt's longest length, whichever is more; prefill pool), each
        prompt whole on one of the ``ep`` attention ranks (one prompt runs its attention on
        one rank). ``step_tables["prefill"](lengths)`` times prompts of unequal lengths (each >= 1
        token; as here, no prompt is refused)."""
        tokens = _checks.integer("tokens", tokens)
        sequences = _checks.integer("sequences", sequences, maximum=tokens)
        try:
            return self.step_tables["prefill"](np.full(sequences, tokens / sequences))
        except ValueError as err:      # beyond the communication tables this run timed
            raise ValueError(f"tokens {tokens}: {err}") from None

    def static_batch(self, batch: int, prompt: int | None = None, output: int | None = None):
        """``batch`` requests of ``prompt`` and ``output`` tokens (default this run's, where they
        are one value) arriving together on one instance (disaggregated: one prefill and one
        decode instance), as vLLM's ``benchmark_latency.py`` and TensorRT-LLM's static-batch
        tables measure: a :class:`flowsolver.serving.StaticBatch` (``ttft``, ``tpot``,
        ``latency`` s; ``throughput`` output tokens/s, ``throughput_per_gpu``). The batch runs
        on this run's step tables and limits: prompts beyond ``token_budget`` or more sequences
        than ``max_batch x ep`` (or the KV cache) run in several waves (``waves``).

        >>> import topologies as tp
        >>> from flowsolver import serve
        >>> r = serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=2.0, prompt=128, output=32, tp=8)
        >>> b = r.static_batch(16)
        >>> b.waves, abs(b.latency - (b.ttft + 31 * b.tpot)) < 1e-12
        (1, True)
        """
        from ._static import static_batch

        return static_batch(self.engine, batch, prompt, output)

    def at_rate(self, rate: float, *, duration: float | None = None, seed: int = 0, ttft_target=None,
                tpot_target=None) -> "ServeResult":
        """The same cluster, layout and step tables under another request stream: ``rate``
        requests/s for ``duration`` s (default this run's), lengths as this run's, ``seed``.
        Only the event simulation runs again (disaggregated: the KV-transfer rates stay those
        solved beside this run's load).

        >>> import topologies as tp
        >>> from flowsolver import serve
        >>> r = serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=5.0, duration=4.0, prompt=256, output=32, tp=8)
        >>> r.at_rate(50.0).ttft_p99 > r.ttft_p99          # ten times the load queues longer
        True
        """
        e = self.engine
        duration = self.duration if duration is None else _checks.positive_number("duration", duration, "s")
        stream = request_stream(rate, duration, e["prompt"], e["output"], seed=seed)
        if not len(stream[0]):
            raise ValueError(f"rate x duration = {rate * duration:g} requests drew none (seed {seed})")
        return _result(e, stream, duration=duration, rate=rate, ttft_target=ttft_target, tpot_target=tpot_target)

    def rate_at_targets(self, ttft_target: float | None = None, tpot_target: float | None = None, *,
                        attainment: float = 0.9, seed: int = 0, tolerance: float = 0.02,
                        max_rounds: int = 30, duration: float | None = None) -> tuple:
        """The largest request rate (requests/s) at which ``attainment`` of the steady requests
        (those decoding wholly in steady state, :func:`steady_state`) meet both targets (s),
        DistServe's goodput, over runs of ``duration`` s (default this run's): from this run's
        rate, doubling while it meets them or halving while it misses, then bisection between
        the last rate that meets them and the first that misses, to ``tolerance`` (relative).
        Returns ``(rate, ServeResult at that rate)``; an overloaded run (``utilization >= 1``:
        its queue grows with the run) misses the targets whatever its latencies. A ValueError (never a rate that looks
        found) when a run tried does not reach steady state (naming the duration it needs), when
        no rate meets the targets after ``max_rounds`` halvings or before a run draws fewer than
        one request on average, or when ``max_rounds`` doublings or bisections do not settle it.

        >>> import topologies as tp
        >>> from flowsolver import serve
        >>> r = serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=5.0, duration=4.0, prompt=256, output=32, tp=8)
        >>> best, at = r.rate_at_targets(ttft_target=0.2, tpot_target=0.01)
        >>> best > 5.0, at.throughput > r.throughput
        (True, True)
        """
        if ttft_target is None and tpot_target is None:
            raise ValueError("rate_at_targets needs ttft_target or tpot_target (seconds)")
        for name, target in (("ttft_target", ttft_target), ("tpot_target", tpot_target)):
            if target is not None:
                _checks.positive_number(name, target, "s")
        attainment = _checks.fraction("attainment", attainment, zero_ok=False)
        tolerance = _checks.positive_number("tolerance", tolerance)
        max_rounds = _checks.integer("max_rounds", max_rounds)
        duration = self.duration if duration is None else _checks.positive_number("duration", duration, "s")
        base = len(self.arrival) / self.duration

        def meets(rate):
            with warnings.catch_warnings():         # a run short of steady state is refused below, by name
                warnings.simplefilter("ignore", RuntimeWarning)
                r = self.at_rate(rate, duration=duration, seed=seed, ttft_target=ttft_target, tpot_target=tpot_target)
            if r.utilization >= 1.0:        # overloaded: its latencies grow with the run, never steady
                return False, r
            many = r.output > 1
            done = np.isfinite(r.ttft) & (np.isfinite(r.tpot) | ~many)
            ok = _within(r.ttft, r.tpot, done, many, ttft_target, tpot_target)
            if r.steady:
                return ok[r.in_steady].mean() >= attainment, r
            # short of steady state: its ramp and drain ran lighter batches and shorter queues than a
            # steady run, so a miss is a miss; a pass proves nothing
            if ok.mean() < attainment:
                return False, r
            raise ValueError(f"rate_at_targets: at {rate:.4g} requests/s a run of duration {duration:g} s does not "
                             f"reach steady state (the running batch is full from {r.steady_window[0]:.3g} s); it needs "
                             f"duration >= {r.needed_duration:.3g} s: pass duration= (or serve one that long)")

        fine, run = meets(base)
        if not fine:                # halve until a rate meets the targets: the bracket's low end
            high, low = base, base
            for _ in range(max_rounds):
                low = high / 2.0
                if low * duration < 1.0:
                    raise ValueError(f"rate_at_targets: no rate meets the targets: {high:.4g} requests/s misses "
                                     f"them (TTFT p50 {run.ttft_p50 * 1e3:.4g} ms, TPOT p50 "
                                     f"{run.tpot_p50 * 1e3:.4g} ms) and a run of {duration:g} s at half of it draws "
                                     f"under one request: the targets are below what an idle instance gives")
                fine, run = meets(low)
                if fine:
                    break
                high = low
            else:
                raise ValueError(f"rate_at_targets: {low:.4g} requests/s still misses the targets after max_rounds "
                                 f"({max_rounds}) halvings from {base:.4g}: raise max_rounds")
            good = run
        else:
            low, good, high = base, run, base * 2.0
            cap = MAX_REQUESTS / duration                 # the most requests/s one run of this duration draws
            while cap * duration > MAX_REQUESTS:          # (to the ulp: 1e7 / 9.1 x 9.1 is over 1e7)
                cap = math.nextafter(cap, 0.0)
            for _ in range(max_rounds):
                if high > cap and low >= cap:
                    raise ValueError(f"rate_at_targets: {low:.4g} requests/s still meets the targets, and a run of "
                                     f"{duration:g} s holds at most {MAX_REQUESTS:,} requests "
                                     f"({cap:.4g} requests/s): serve a shorter duration")
                high = min(high, cap)
                fine, run = meets(high)
                if not fine:
                    break
                low, good, high = high, run, high * 2.0
            else:
                raise ValueError(f"rate_at_targets: {low:.4g} requests/s still meets the targets after max_rounds "
                                 f"({max_rounds}) doublings: raise max_rounds")
        for _ in range(max_rounds):
            if high - low <= tolerance * low:
                break
            mid = (low + high) / 2.0
            fine, run = meets(mid)
            if fine:
                low, good = mid, run
            else:
                high = mid
        if high - low <= tolerance * low:
            return low, good
        raise ValueError(f"rate_at_targets: the rate lies in [{low:.4g}, {high:.4g}] requests/s after max_rounds "
                         f"({max_rounds}) bisections, wider than tolerance ({tolerance:g}): raise max_rounds")

    def summary(self) -> dict:
        """The headline figures as a plain dict (ms for latencies); ``kv_capacity_tokens`` is
        :attr:`kv_capacity` (the decoding pool's), ``kv_capacity_prefill_tokens`` the prefill
        pool's (co-located: the same instances, the same figure)."""
        return dict(mode=self.mode, gpus=self.gpus, requests=len(self.arrival), completed=self.completed,
                    ttft_p50_ms=self.ttft_p50 * 1e3, ttft_p99_ms=self.ttft_p99 * 1e3,
                    tpot_p50_ms=self.tpot_p50 * 1e3, tpot_p99_ms=self.tpot_p99 * 1e3,
                    throughput_tokens_per_gpu=self.throughput, goodput_requests_per_gpu=self.goodput,
                    network_share_ttft=self.network_share_ttft, network_share_tpot=self.network_share_tpot,
                    kv_transfer_p50_ms=self._pct(np.where(self.kv_seconds > 0, self.kv_seconds, np.nan), 50) * 1e3,
                    bottleneck={k: (v[0].src, v[0].dst, v[0].tier) for k, v in self.bottleneck.items() if v},
                    layouts=self.layouts, kv_capacity_tokens=self.kv_capacity,
                    kv_capacity_prefill_tokens=self.kv_capacities.get("prefill", self.kv_capacity),
                    steady=self.steady, needed_duration_s=self.needed_duration, utilization=self.utilization,
                    sustainable_rate_rps=self.sustainable_rate)


def _result(engine: dict, stream, *, duration: float, rate: float, ttft_target, tpot_target) -> ServeResult:
    """Simulate ``stream`` (arrival, prompt, output; ``rate`` requests/s) on the step tables of ``engine``."""
    arrival, prompt_t, output_t = stream
    check_fits(engine, prompt_t, output_t)
    trace = run_engine(engine, arrival, prompt_t, output_t, window=duration)
    n_gpus = engine["gpus"]
    ttft = trace.first_token - arrival
    many = output_t > 1
    tpot = np.where(many, (trace.finish - trace.first_token) / np.maximum(output_t - 1, 1), np.nan)
    done = np.isfinite(trace.finish)
    net_ttft = float(np.nansum(trace.ttft_network[done]) / np.nansum(ttft[done])) if done.any() else float("nan")
    span = (trace.finish - trace.first_token)[done & many]
    net_tpot = float(np.sum(trace.decode_network[done & many]) / np.sum(span)) if span.sum() > 0 else float("nan")
    goodput = float("nan")
    if ttft_target is not None or tpot_target is not None:
        goodput = float(_within(ttft, tpot, done, many, ttft_target, tpot_target).sum()) / duration / n_gpus
    steady = verdict(engine, trace, arrival, prompt_t, output_t, duration, rate, n_gpus)
    return ServeResult(mode=engine["mode"], gpus=n_gpus, duration=duration, arrival=arrival, prompt=prompt_t,
                       output=output_t, ttft=ttft, tpot=tpot, **steady, goodput=goodput, network_share_ttft=net_ttft,
                       network_share_tpot=net_tpot,
                       kv_seconds=trace.kv_seconds, bottleneck=engine["bottleneck"], layouts=engine["layouts"],
                       kv_capacity=engine["decode_capacity"], kv_capacities=dict(engine["kv_capacities"]),
                       events=trace.events,
                       step_tables=dict(decode=engine["decode_time"], prefill=engine["prefill_time"]),
                       engine=engine)


def _within(ttft, tpot, done, many, ttft_target, tpot_target) -> np.ndarray:
    """Requests that finished within both targets (a missing target holds everything)."""
    ok = done.copy()
    if ttft_target is not None:
        ok &= ttft <= ttft_target
    if tpot_target is not None:
        ok &= ~many | (tpot <= tpot_target)
    return ok
