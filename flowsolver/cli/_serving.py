"""``flowsolver serve``: a request stream served on the cluster, co-located or disaggregated:
TTFT and TPOT percentiles, throughput per GPU, goodput, the network's share, bottleneck links."""

from __future__ import annotations

import math
import warnings

import topologies as tp

from ..training import MODELS
from ._arguments import (CliError, _add_output, _add_topology, build_graph, cluster_label, compute_choice,
                         compute_model)
from ._model_file import model_of
from ._output import emit

__all__ = ["add_serve", "serve"]

_HELP = """examples:
  flowsolver serve --nodes 8 --model llama-3-70b --tp 8 --rate 20
  flowsolver serve --nodes 8 --model llama-3-70b --tp 8 --rate 20 --prefill-gpus 16 --decode-tp 8
  flowsolver serve --nodes 4 --model mixtral-8x7b --tp 1 --ep 8 --rate 50 --prompt 256:2048 --output 64:512
  flowsolver serve --nodes 1 --model llama-3-70b --tp 8 --batch 32 --prompt 2048 --output 256
--batch N: a static batch of N requests arriving together on one instance (vLLM's
benchmark_latency.py, TensorRT-LLM's static-batch tables) instead of a --rate stream.
Lengths: N tokens, or LO:HI (uniform). Latency targets in ms.
"""


def _length(flag: str, text: str):
    lo, sep, hi = text.partition(":")
    try:
        return (int(lo), int(hi)) if sep else int(lo)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected tokens N or a range LO:HI") from None


def add_serve(sub, fmt) -> None:
    """``flowsolver serve``: its arguments."""
    s = sub.add_parser("serve", help="serve a request stream: TTFT / TPOT, tokens/s per GPU, the network's share",
                       epilog=_HELP, formatter_class=fmt)
    _add_topology(s, default_nodes=8)
    _add_output(s)
    s.add_argument("--model", default="llama-3-70b", metavar="PRESET|FILE",
                   help=f"model preset ({', '.join(MODELS)}; default %(default)s) or a .json / .toml file of the "
                        "model's shape, as train --model takes")
    s.add_argument("--rate", type=float, default=None, help="requests per second (Poisson); or --batch")
    s.add_argument("--batch", type=int, default=None,
                   help="a static batch of N requests arriving together on one instance (instead of --rate)")
    s.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (default %(default)s)")
    s.add_argument("--prompt", default="1024", help="prompt tokens, N or LO:HI (default %(default)s)")
    s.add_argument("--output", default="256", help="output tokens, N or LO:HI (default %(default)s)")
    s.add_argument("--tp", type=int, default=8, help="tensor parallel per instance (default %(default)s)")
    s.add_argument("--pp", type=int, default=1, help="pipeline stages per instance (default %(default)s)")
    s.add_argument("--ep", type=int, default=1, help="expert-parallel attention ranks per instance (default 1)")
    s.add_argument("--prefill-gpus", type=int, default=None,
                   help="disaggregated: the first N GPUs prefill (tp/pp/ep above), the rest decode")
    s.add_argument("--decode-tp", type=int, default=None, help="decode pool's tp (default --tp)")
    s.add_argument("--decode-pp", type=int, default=None, help="decode pool's pp (default --pp)")
    s.add_argument("--decode-ep", type=int, default=None, help="decode pool's ep (default --ep)")
    s.add_argument("--max-batch", type=int, default=256, help="sequences per attention rank (default %(default)s)")
    s.add_argument("--token-budget", type=int, default=8192, help="prompt tokens per prefill step (default 8192)")
    s.add_argument("--precision", default="bf16", choices=("bf16", "fp8"), help="weights (default %(default)s)")
    s.add_argument("--memory-utilization", type=float, default=None,
                   help="the engine's memory fraction, read as --memory-accounting says (default 0.9, vLLM's "
                        "gpu_memory_utilization); the KV cache is what it leaves after the weights, the peak "
                        "prefill step's activation and the runtime's memory")
    s.add_argument("--memory-accounting", default="vllm", choices=("vllm", "trtllm"),
                   help="whose fraction --memory-utilization is: vllm (of the total memory, default) or trtllm "
                        "(TensorRT-LLM's kv_cache_free_gpu_mem_fraction, of the memory left free; below 1)")
    s.add_argument("--compute-efficiency", type=compute_model, default="auto",
                   help="step model: auto (default: the kernel tables where the GPU has them), kernels, "
                        "or a fraction of the peak (the flat model)")
    s.add_argument("--hbm-efficiency", type=float, default=None,
                   help="share of the datasheet HBM bandwidth reached (default: BabelStream Triad's, where "
                        "measured; a GPU without a measurement needs it)")
    s.add_argument("--comm-overlap", type=float, default=0.0,
                   help="share of each step's communication hidden behind its compute (default 0)")
    s.add_argument("--ttft-target", type=float, default=None, help="TTFT target (ms) for the goodput")
    s.add_argument("--tpot-target", type=float, default=None, help="TPOT target (ms) for the goodput")
    s.add_argument("--request-seed", type=int, default=0, help="seed of the request stream (default 0)")
    s.add_argument("--max-rate", action="store_true",
                   help="also find the largest rate at which 90%% of requests meet the targets (needs a target)")


def _memory(args) -> dict:
    """serve()'s memory keywords from --memory-utilization / --memory-accounting (the library's
    default fraction where none is given)."""
    out = {"memory_accounting": args.memory_accounting}
    if args.memory_utilization is not None:
        out["memory_utilization"] = args.memory_utilization
    return out


def _why_waves(b, args, layouts) -> str:
    """What split a static batch into waves, with the flag that lifts it (newuser23: the note
    listed every possible cause)."""
    ep = next(iter(layouts.values()))["ep"]
    why = []
    if b.batch * b.prompt > args.token_budget:
        why.append(f"its {b.batch * b.prompt:,} prompt tokens exceed --token-budget {args.token_budget} (one wave "
                   f"needs --token-budget {b.batch * b.prompt})")
    if b.batch > args.max_batch * ep:
        why.append(f"its {b.batch} requests exceed --max-batch {args.max_batch} x ep {ep} sequences")
    return "; ".join(why) or "its requests' KV cache exceeds what an instance holds (raise --tp or --pp, or " \
        "--memory-utilization)"


def serve(args) -> None:
    """Run :func:`flowsolver.serve` and print its summary."""
    from ..serving import serve as run

    for flag, value in (("--decode-tp", args.decode_tp), ("--decode-pp", args.decode_pp),
                        ("--decode-ep", args.decode_ep)):
        if value is not None and value < 1:     # refused like --tp 0, not replaced by --tp
            raise CliError(f"{flag} must be an integer >= 1, got {value}")
    if args.request_seed < 0:                   # the API's seed=; --seed is the cable-failure seed
        raise CliError(f"--request-seed must be an integer >= 0, got {args.request_seed}")
    for flag, value in (("--ttft-target", args.ttft_target), ("--tpot-target", args.tpot_target)):
        if value is not None and not 0 < value < float("inf"):   # the library says it in seconds
            raise CliError(f"{flag} must be a finite number of ms > 0, got {value:g}")
    if (args.rate is None) == (args.batch is None):
        raise CliError("give one of --rate (requests per second, a Poisson stream) or --batch (a static batch of "
                       "N requests arriving together)")
    if args.batch is not None and args.max_rate:
        raise CliError("--max-rate searches request rates: it needs --rate, not --batch")
    for flag, value in (("--ttft-target", args.ttft_target), ("--tpot-target", args.tpot_target)):
        if args.batch is not None and value is not None:       # (newuser25: ignored without a word)
            raise CliError(f"{flag} counts a stream's requests within it (goodput); a static batch (--batch) "
                           "prints its TTFT and TPOT: leave it out, or give --rate")
    model = model_of(args.model)       # a preset's name, or the file's ModelSpec
    graph = build_graph(args)
    decode = None
    if args.prefill_gpus is not None:
        decode = {k: own for k, own in (("tp", args.decode_tp), ("pp", args.decode_pp), ("ep", args.decode_ep))
                  if own is not None}           # a degree not given: the prefill pool's (serve's decode=)
        gpus = len(tp.gpus(graph)) - args.prefill_gpus
        size = math.prod(decode.get(k, getattr(args, k)) for k in ("tp", "pp", "ep"))
        if decode and gpus > 0 and gpus % size:  # (the library's "decode: tp * pp * ep" read as --tp: newuser25 #4)
            raise CliError(f"--decode-tp x --decode-pp x --decode-ep (each --tp / --pp / --ep where not given) = "
                           f"{size} must divide the decode pool's {gpus} GPUs (the cluster's less --prefill-gpus)")
    elif any(v is not None for v in (args.decode_tp, args.decode_pp, args.decode_ep)):
        raise ValueError("--decode-tp / --decode-pp / --decode-ep need --prefill-gpus (disaggregated)")
    ms = lambda v: None if v is None else v / 1e3   # noqa: E731
    with warnings.catch_warnings():     # a run short of steady state: said in the output below
        warnings.simplefilter("ignore", RuntimeWarning)
        if args.batch is not None:
            return _static_batch(args, graph, decode, run, model)
        r = run(graph, model, rate=args.rate, duration=args.duration, prompt=_length("--prompt", args.prompt),
                output=_length("--output", args.output), tp=args.tp, pp=args.pp, ep=args.ep,
                prefill_gpus=args.prefill_gpus, decode=decode, max_batch=args.max_batch,
                token_budget=args.token_budget, precision=args.precision, ttft_target=ms(args.ttft_target),
                tpot_target=ms(args.tpot_target), comm_overlap=args.comm_overlap, seed=args.request_seed,
                hbm_efficiency=args.hbm_efficiency, **_memory(args), **compute_choice(args))
    s = r.summary()
    overloaded = s["utilization"] >= 1.0
    state = ("steady state" if s["steady"] else "overloaded: the service rate" if overloaded
             else "not steady: see the warning")
    lay = ", ".join(f"{name} {v['instances']} x (tp {v['tp']}, pp {v['pp']}, ep {v['ep']})"
                    for name, v in s["layouts"].items())
    lines = [f"# {getattr(model, 'name', model)}, {args.rate:g} requests/s for {args.duration:g} s on {s['gpus']} GPUs "
             f"({cluster_label(args)}): {lay}",
             f"requests {s['requests']} completed {s['completed']}",
             f"TTFT p50 {s['ttft_p50_ms']:.1f} ms  p99 {s['ttft_p99_ms']:.1f} ms  "
             f"(network {s['network_share_ttft']:.1%})",
             f"TPOT p50 {s['tpot_p50_ms']:.2f} ms  p99 {s['tpot_p99_ms']:.2f} ms  "
             f"(network {s['network_share_tpot']:.1%})" if s["tpot_p50_ms"] == s["tpot_p50_ms"] else
             "TPOT -- (one output token: no decode step)",
             f"throughput {s['throughput_tokens_per_gpu']:.1f} output tokens/s per GPU "
             f"({state})"]
    if overloaded:
        lines.append(f"warning: overloaded: {args.rate:g} requests/s offer {s['utilization']:.3g} x what the instances "
                     f"serve (rho = offered / service rate), so the queue grows without bound: TTFT grows with "
                     f"--duration and no steady state exists; about {s['sustainable_rate_rps']:.4g} requests/s is "
                     f"sustainable: lower --rate or add GPUs")
    elif not s["steady"]:
        rerun = (f"--duration {s['needed_duration_s']:.3g} or more" if s["needed_duration_s"] > args.duration
                 else "another --request-seed or a longer --duration (no request of this draw decoded wholly in "
                      "the steady window)")
        lines.append(f"warning: --duration {args.duration:g} s does not reach steady state (the batch is full only "
                     f"from {r.steady_window[0]:.3g} s): the figures hold the ramp up and the drain; rerun with "
                     f"{rerun}")
    if s["goodput_requests_per_gpu"] == s["goodput_requests_per_gpu"]:
        lines.append(f"goodput {s['goodput_requests_per_gpu']:.4g} requests/s per GPU within the targets")
    if s["kv_transfer_p50_ms"] == s["kv_transfer_p50_ms"]:
        lines.append(f"KV transfer p50 {s['kv_transfer_p50_ms']:.2f} ms")
    lines += [f"bottleneck {kind}: {src} -> {dst} ({tier})" for kind, (src, dst, tier) in s["bottleneck"].items()]
    row = {k: v for k, v in s.items() if k not in ("bottleneck", "layouts")}
    failed = None
    if args.max_rate:
        if args.ttft_target is None and args.tpot_target is None:
            raise ValueError("--max-rate needs --ttft-target or --tpot-target (ms)")
        try:
            best, at = r.rate_at_targets(ms(args.ttft_target), ms(args.tpot_target))
        except ValueError as err:       # no rate found: said, never printed as a rate
            failed = str(err).replace("pass duration= (or serve one that long)", "rerun with --duration")
            row["max_rate"] = row["throughput_at_max_rate"] = None
            lines.append("largest rate with 90 % of requests within the targets: not found (the error below says why)")
        else:
            row["max_rate"], row["throughput_at_max_rate"] = best, at.throughput
            lines.append(f"largest rate with 90 % of requests within the targets: {best:.3g} requests/s, "
                         f"{at.throughput:.1f} output tokens/s per GPU")
    row["bottleneck"] = "; ".join(f"{k}: {a}->{b}" for k, (a, b, _) in s["bottleneck"].items())
    emit([row], args, "\n".join(lines))
    if failed:
        raise ValueError(f"--max-rate: {failed}")


def _static_batch(args, graph, decode, run, model) -> None:
    """``serve --batch N``: the step tables of a short stream of fixed lengths, then
    :meth:`flowsolver.serving.ServeResult.static_batch` of N requests on one instance."""
    from ..serving import MAX_REQUESTS
    if not 1 <= args.batch <= MAX_REQUESTS:      # (its step tables run a stream of --batch requests a second)
        raise CliError(f"--batch must be an integer in 1 ... {MAX_REQUESTS:,}, got {args.batch}")
    lengths = {}
    for flag, text in (("--prompt", args.prompt), ("--output", args.output)):
        lengths[flag] = _length(flag, text)
        if isinstance(lengths[flag], tuple):
            raise CliError(f"{flag} {text!r}: a static batch takes one length (N tokens), not a range")
    # a 1 s stream of about N requests, run for its step tables only (never reported)
    r = run(graph, model, rate=float(args.batch), duration=1.0, prompt=lengths["--prompt"],
            output=lengths["--output"], tp=args.tp, pp=args.pp, ep=args.ep, prefill_gpus=args.prefill_gpus,
            decode=decode, max_batch=args.max_batch, token_budget=args.token_budget, precision=args.precision,
            comm_overlap=args.comm_overlap, hbm_efficiency=args.hbm_efficiency, **_memory(args), **compute_choice(args))
    b = r.static_batch(args.batch)
    lay = ", ".join(f"{name} (tp {v['tp']}, pp {v['pp']}, ep {v['ep']})" for name, v in r.layouts.items())
    lines = [f"# {getattr(model, 'name', model)}, a static batch of {b.batch} requests, {b.prompt} prompt / {b.output} output tokens, "
             f"on one instance of {b.gpus} GPUs ({cluster_label(args)}): {lay}",
             f"TTFT {b.ttft * 1e3:.1f} ms (every prompt prefilled{'' if b.waves == 1 else f', {b.waves} waves'})",
             f"TPOT {b.tpot * 1e3:.2f} ms" if b.output > 1 else "TPOT -- (one output token)",
             f"latency {b.latency * 1e3:.1f} ms to the last token",
             f"throughput {b.throughput:.1f} output tokens/s ({b.throughput_per_gpu:.1f} per GPU; network "
             + (f"{b.network_share:.1%} of the time)" if b.waves == 1 else
                f"{b.network_share:.1%} of the time in the steps of the last request, not the earlier waves' "
                "prefills)")]
    if b.waves > 1:
        lines.append(f"note: the batch ran in {b.waves} prefill waves: " + _why_waves(b, args, r.layouts))
    emit([b.summary()], args, "\n".join(lines))
