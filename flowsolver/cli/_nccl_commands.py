"""The commands that time collectives and read nccl-tests logs: ``collective`` (a table over
sizes, ``--compare LOG``) and ``calibrate LOG...``."""

from __future__ import annotations

import sys
import warnings

from dataclasses import asdict

import topologies as tp

from ..routing import link_efficiency, policy_of
from ._arguments import CliError, build_graph, cluster_label, parse_size
from ._output import emit, said_warnings, to_json, writable
from ._settings import calibration_of
from ._words import sharp_note

__all__ = ["collective_table", "calibrate_logs", "log_limit", "settings_for"]


def _sizes_range(args):
    """(-b, -e) in bytes, checked (the defaults 1M and 1G where not given)."""
    given = (args.min_bytes or "1M", args.max_bytes or "1G")
    lo, hi = parse_size(given[0], "-b"), parse_size(given[1], "-e")
    if not (lo > 0 and hi >= lo):      # (-f is an integer >= 2: at most ~1,000 sizes up to the largest float)
        raise ValueError(f"sizes must satisfy 0 < min-bytes <= max-bytes, got {given[0]!r}, {given[1]!r}")
    return lo, hi


def _sizes(args):
    lo, hi = _sizes_range(args)
    sizes, s = [], lo
    while s <= hi * (1 + 1e-12):
        sizes.append(s)
        s *= args.step_factor
    if sizes[-1] < hi * (1 - 1e-12):      # the end is included, as in nccl-tests
        sizes.append(hi)
    return sizes


def log_limit(args) -> int | None:
    """The largest nccl-tests log to read, in bytes (``--log-max-bytes``: a size such as 512M;
    None when not given: the reader's own, FLOWSOLVER_LOG_MAX_BYTES else 16 MiB)."""
    if args.log_max_bytes is None:
        return None
    value = parse_size(args.log_max_bytes, "--log-max-bytes")
    if value < 1:
        raise CliError(f"--log-max-bytes must be at least 1 byte, got {args.log_max_bytes!r}")
    return int(value)


def settings_for(args, op) -> tuple:
    """``(algorithm, protocol)`` of ``collective(op, ...)`` that ``--algorithm`` / ``--protocol``
    name (NCCL_ALGO / NCCL_PROTO values: :func:`flowsolver.collectives.setting_choices`)."""
    from ..collectives import setting_choices

    try:
        return setting_choices(args.algorithm, args.protocol, op)
    except ValueError as err:
        raise CliError(str(err)) from None


def _reduction(args, where="--"):
    """``(redop, dtype)`` of ``--redop`` / ``--dtype`` (nccl-tests' ``-o`` / ``-d`` names; None
    where not given: sum, float), checked; a bad name is an error naming the option."""
    from ..collectives import reduction

    try:
        return reduction(args.redop or "sum", args.dtype or "float", where)
    except ValueError as err:
        raise CliError(str(err)) from None


def _measured(args, graph):
    """(op, sizes, measured times in s or None, GPUs one thread drove, each size's (redop,
    dtype), the log's NCCL settings as collective() keywords: ``pxn``, ``channels``, where
    ``--channels`` does not set them) of the table; a log compared must have run on the ranks modelled, as calibrate
    requires. ``args.algorithm`` / ``args.protocol`` become what ``collective`` takes for the op
    (a log's where not given), ``--redop`` / ``--dtype`` the reduction of every row (a log's
    ``redop`` / ``type`` columns where not given)."""
    if not args.compare:
        op = args.op or "all_reduce"
        args.algorithm, args.protocol = settings_for(args, op)
        sizes = _sizes(args)
        return op, sizes, None, 1, [_reduction(args)] * len(sizes), {}
    from .. import nccl_tests
    from ..collectives import log_rows

    df = nccl_tests.read(args.compare, op=args.op, max_bytes=log_limit(args))
    op = df.attrs["op"] or args.op
    if op is None:
        raise ValueError(f"--compare: {args.compare!r} does not say which collective it ran; pass --op")
    log = log_rows(df, op, graph, args.ranks)          # as calibrate times it
    args.ranks = log.ranks                              # a sendrecv log's ranks on the hosts its device list names
    algorithm, protocol = log.allowed                   # what the log's NCCL_ALGO / NCCL_PROTO allowed
    given = settings_for(args, op)
    args.algorithm = algorithm if args.algorithm == "auto" else given[0]
    args.protocol = protocol if args.protocol == "auto" else given[1]
    keep = [True] * len(log.rows)
    if args.min_bytes is not None or args.max_bytes is not None:     # -b / -e: the log's rows within them
        lo, hi = _sizes_range(args)
        keep = [lo <= s <= hi for s in log.rows["size"]]
        if not any(keep):
            raise CliError(f"--compare {args.compare}: no row between -b {lo:g} and -e {hi:g} bytes")
    given = _reduction(args)                            # each row's -o / -d, as NCCL ran it, unless given
    reductions = [(given[0] if args.redop else r, given[1] if args.dtype else d)
                  for (r, d), k in zip(log.reductions, keep) if k]
    rows = log.rows[keep]
    # nccl-tests -g N: one thread, N GPUs (none under -G)
    settings = {k: v for k, v in log.keywords.items() if not (k == "channels" and args.channels is not None)}
    return op, [float(s) for s in rows["size"]], [float(t) * 1e-6 for t in rows["time"]], log.per_thread or 1, \
        reductions, settings


#: below this share of the time in transfers a row's time is its latencies'; below this mean
#: utilization of the busiest link during them, the channels' rate (NCCL's per-channel figures),
#: not a link, sets the transfers
_BOUND = 0.5
#: other tiers within this much utilization of the busiest are named with it (newuser23: a 2 x
#: DGX H100 1 GiB all-gather named NVLink at 0.94, its NICs at 0.93)
_NEAR = 0.05


def _tier_utilization(r) -> dict:
    """Each tier's busiest link's mean utilization during the transfers (``r.link_utilization``)."""
    import numpy as np

    util = np.asarray(r.link_utilization, dtype=float)
    tiers = np.asarray(r.links.tier).astype(str)
    return {str(t): float(util[tiers == t].max()) for t in dict.fromkeys(tiers) if t}


def _transfer_fraction(r) -> float:
    """The share of ``r.time`` its steps spend in transfers (the rest: latencies, the host)."""
    import math

    from ..collectives import transfer_of

    moved = transfer_of(r.steps)
    return float(moved / r.time) if math.isfinite(moved) and math.isfinite(r.time) and r.time > 0 else 0.0


def _bound_said(busy: dict, share: float, tier: str) -> str:
    """The table's bottleneck column from each tier's busiest link's utilization ``busy``, the
    share of the time in transfers and the result's bottleneck ``tier``: ``latency`` where
    transfers take less than :data:`_BOUND` of the time; ``channels`` where no link is that busy during them; else the bottleneck tier
    and its busiest link's utilization, with the other tiers as busy within :data:`_NEAR`."""
    top = max(busy.values(), default=0.0)
    if share < _BOUND:
        return f"latency (transfers {share:.0%} of the time)"
    if top < _BOUND:
        return f"channels (links <= {top:.0%} busy)"
    named = tier if tier in busy else max(busy, key=busy.get)
    near = [t for t, u in sorted(busy.items(), key=lambda kv: -kv[1]) if t != named and u >= top - _NEAR]
    return ", ".join(f"{t} {busy[t]:.0%}" for t in [named, *near])


def _release_lacks(algorithm, op, version) -> str:
    """What of an ``--algorithm`` list the release ``version`` (``--nccl-version`` or the log's
    line; None: the newest) does not have for ``op``, in words ('' where nothing)."""
    from ..collectives import lacking_algorithms

    release, lacks = lacking_algorithms(algorithm, op, version)
    return f"NCCL {release[0]}.{release[1]} runs no {', '.join(lacks)} for {op}" if lacks else ""


def collective_table(args) -> None:
    from ..collectives import SizeBelowElement, algorithm_of, collective, nccl_release, nccl_tests_collective

    args.plot = writable("--plot", args.plot)
    if args.plot and not args.compare:
        raise ValueError("--plot needs --compare LOG")
    graph = build_graph(args)
    model = calibration_of(args, graph)      # before any solve: a bad file fails at once
    with said_warnings():                    # the log's unmodelled NCCL settings, in the CLI's words
        op, sizes, measured, per_thread, reductions, settings = _measured(args, graph)
    settings = dict(dict(channels=args.channels), **settings)       # the log's NCCL settings (pxn, channels)
    if args.nccl_version is not None:                               # --nccl-version over the log's version line
        settings["nccl_version"] = args.nccl_version
    if settings.get("nccl_version") is not None:    # a release newer than the model's, said once in the CLI's words
        with said_warnings(), warnings.catch_warnings():
            warnings.filterwarnings("always", message="nccl_version .*: newer than", category=UserWarning)
            nccl_release(settings["nccl_version"])
    opts = dict(subflows=args.subflows) if policy_of(args.policy).subflows else None
    rows, results = [], []
    timed = collective if measured is None else nccl_tests_collective    # a log's rows: the test as nccl-tests runs it
    below = []          # sizes of less than one element (a rank): nccl-tests runs them as 0-byte calls
    for i, size in enumerate(sizes):
        try:
            r = timed(graph, op, size, ranks=args.ranks, algorithm=args.algorithm, policy=args.policy,
                      policy_options=opts, **settings, protocol=args.protocol,
                      candidates=args.candidates, gpus_per_thread=per_thread, model=model,
                      redop=reductions[i][0], dtype=reductions[i][1])
        except SizeBelowElement as err:
            if measured is not None:
                raise
            below.append((int(size), str(err)))
            continue
        results.append(r)
        row = dict(size=int(size), time_us=r.time * 1e6, algbw_gbs=r.algbw / 1e9, busbw_gbs=r.busbw / 1e9,
                   algorithm=r.algorithm, protocol=r.protocol, channels=r.channels_run,     # those the time used
                   bottleneck_tier=r.bottleneck_tier)
        busy, share = _tier_utilization(r), _transfer_fraction(r)
        said = _bound_said(busy, share, r.bottleneck_tier)
        if algorithm_of(r.algorithm).derived(op) and not said.startswith("latency"):
            # NVLS / NVLSTree / PAT: timed by NCCL's model from the ring's solve, whose links these are
            said += " (the ring's links)"
        row.update(bound=said, transfer_fraction=share,
                   **{f"utilization_{t}": u for t, u in busy.items()})
        if measured is not None:
            row.update(measured_us=measured[i] * 1e6, error=r.time / measured[i] - 1)
        rows.append(row)
    if below and not rows:
        raise CliError(f"-b / -e: every size is below one element{' a rank' if 'a rank' in below[0][1] else ''} "
                       f"({below[0][1].partition(', got')[0]}); raise -b")
    n_gpus = len(tp.gpus(graph)) if args.ranks is None else len(args.ranks)
    on = f"on {n_gpus} GPUs" if op != "send_recv" or measured is not None else \
        f"from the first to the second of {n_gpus} GPUs"        # collective()'s send: ranks[0] -> ranks[1]
    head = (f"# {op} {on} "
            f"({cluster_label(args, graph)}; routing {args.policy}"
            + (f"; calibration {args.calibration})" if model is not None else ")"))
    cmp_head = f" {'measured (us)':>13s} {'error':>7s}" if measured is not None else ""
    lines = [head, f"{'size (B)':>14s} {'time (us)':>12s}{cmp_head} {'algbw (GB/s)':>13s} {'busbw (GB/s)':>13s} "
                   f"{'algorithm':>17s} {'protocol':>8s} {'ch':>3s}  bound by"]
    for r in rows:
        cmp = f" {r['measured_us']:13.1f} {r['error']:+7.1%}" if measured is not None else ""
        lines.append(f"{r['size']:14d} {r['time_us']:12.1f}{cmp} {r['algbw_gbs']:13.2f} {r['busbw_gbs']:13.2f} "
                     f"{r['algorithm']:>17s} {r['protocol']:>8s} {r['channels']:3d}  {r['bound']}")
    if measured is not None:
        errors = sorted(abs(r["error"]) for r in rows)
        lines.append(f"# median |error| {errors[len(errors) // 2]:.1%}, max {errors[-1]:.1%} (error = model / measured "
                     "time - 1: below 0, the model is faster than the log)")
    if args.algorithm != "auto" or args.protocol != "auto":
        said = lambda v: v if isinstance(v, str) else ",".join(v)       # noqa: E731
        whose = "the log's NCCL_ALGO / NCCL_PROTO / NCCL_NVLS_ENABLE, or --algorithm / --protocol" \
            if args.compare else \
            "--algorithm / --protocol, as NCCL_ALGO / NCCL_PROTO"
        lacking = _release_lacks(args.algorithm, op, settings.get("nccl_version"))
        lines.insert(1, f"# algorithm {said(args.algorithm)}, protocol {said(args.protocol)} ({whose})"
                        + (f"; {lacking}" if lacking else ""))
    if args.compare and (said := _said_settings(settings, args.channels, args.nccl_version)):
        lines.insert(1, f"# the log's NCCL settings: {said}")
    if below:
        lines.insert(1, f"# {', '.join(str(b) for b, _ in below)} B left out: {below[0][1].partition(', got')[0]} "
                        "(nccl-tests runs such a size as a call of 0 bytes)")
    if set(reductions) != {("sum", "float")}:
        if op in ("all_reduce", "reduce_scatter", "reduce"):
            kinds = ", ".join(f"{r} of {d}" for r, d in dict.fromkeys(reductions))
            lines.insert(1, f"# reduction {kinds} (nccl-tests -o / -d: NCCL's NVLS and PAT run only some)")
        elif any(d != "float" for _, d in reductions):  # no reduction to name (newuser26 #8: "reduction sum")
            kinds = ", ".join(dict.fromkeys(d for _, d in reductions))
            lines.insert(1, f"# data type {kinds} (nccl-tests -d)")
    if per_thread > 1:
        lines.insert(1, f"# one host thread drives {per_thread} GPUs (the log's nccl-tests -g {per_thread}): its calls "
                        "put a floor under small sizes")
    if args.compare and op == "send_recv":
        lines.insert(1, "# send_recv as sendrecv_perf runs it: the ring shift, every rank to the next at once")
    # the network's link technologies (a graph edge's tech): a note where SHARP would change an
    # all-reduce across servers
    gpus = tp.gpus(graph)
    used = gpus if args.ranks is None else [gpus[r] for r in args.ranks if 0 <= r < len(gpus)]
    if len({graph.nodes[g].get("server") for g in used}) > 1:
        lines += sharp_note({str(e.get("tech", "")) for _, _, e in graph.edges(data=True)}, op)
    emit(rows, args, "\n".join(lines))
    if args.plot:
        _comparison_plot(args.plot, results, sizes, measured, op)
        print(f"# figure written to {args.plot}", file=sys.stderr)     # (stdout stays the table / JSON)


def _said_settings(settings, given, release=None) -> str:
    """The log's NCCL settings the comparison applied (PXN off, a channel count, its release:
    ``release``, --nccl-version, over its version line), in words."""
    out = ["PXN off (NCCL_PXN_DISABLE=1)"] if settings.get("pxn") is False else []
    if settings.get("channels") is not None and given is None:
        out.append(f"{settings['channels']} ring / tree channels (NCCL_MIN / MAX_NCHANNELS, or its coll channels "
                   "line; NVLS keeps its own)")
    if settings.get("nvls_channels") is not None:
        out.append(f"{settings['nvls_channels']} NVLS channels (NCCL_NVLS_NCHANNELS, NCCL_MIN / MAX_CTAS)")
    if settings.get("nccl_version"):
        out.append(f"NCCL {settings['nccl_version']}'s rules "
                   + ("(--nccl-version)" if release is not None else "(the log's version line)"))
    return ", ".join(out)


def _comparison_plot(path, results, sizes, measured, op):
    from matplotlib.figure import Figure

    from ..collectives import busbw_factor
    from ..plot import busbw_vs_size

    fig = Figure(figsize=(7, 4))
    p = results[0].ranks
    busbw = [s / t * busbw_factor(op, p) for s, t in zip(sizes, measured)]
    busbw_vs_size(fig.subplots(), {"model": results}, measured={"nccl-tests": (sizes, busbw)})
    fig.savefig(path, dpi=120, bbox_inches="tight")


def calibrate_logs(args) -> None:
    from ..collectives import calibrate

    from .. import nccl_tests

    args.save = writable("--save", args.save)
    if args.op is not None:      # --algorithm / --protocol checked before the logs are read
        settings_for(args, args.op)
    graph = build_graph(args)
    limit = log_limit(args)      # the logs read here, so that --log-max-bytes applies (calibrate reads as read does)
    with said_warnings():                    # the logs' unmodelled NCCL settings, in the CLI's words
        logs = [nccl_tests.read(log, op=args.op, max_bytes=limit) for log in args.logs]
        algorithm, protocol = _logs_settings(args, logs)
        cal = calibrate(graph, logs, ranks=args.ranks, op=args.op, algorithm=algorithm, protocol=protocol)
    if args.save:
        cal.save(args.save)
    rows = cal.residuals.to_dict("records")
    if args.json:
        print(to_json(dict(efficiency=cal.efficiency, latency_scale=cal.latency_scale, ranks=cal.ranks,
                           pipeline=asdict(cal.pipeline), unconstrained=list(cal.unconstrained),
                           net_latency=cal.net_latency, ll_bandwidth=cal.ll_bandwidth,
                           p2p_bandwidth=cal.p2p_bandwidth, launch_latency=cal.launch_latency,
                           parameters=[asdict(p) for p in cal.parameters],
                           ops=list(cal.ops), converged=cal.converged, message=cal.message, residuals=rows)))
        return
    if args.csv:
        emit(rows, args, "")
        return
    lines = [f"# calibrated on {len(rows)} rows of {len(args.logs)} log(s), {cal.ranks} ranks, {', '.join(cal.ops)}"
             + (f" ({said})" if (said := _header_message(cal)) else ""),
             "efficiency: " + (", ".join(f"{t} {e:.3f} (library {link_efficiency(t):.3f})"
                                         for t, e in sorted(cal.efficiency.items())) or "unchanged"),
             f"latency scale: {cal.latency_scale:.3f} x NCCL's",
             "pipeline: " + ", ".join(f"{k} {v * 1e6:.2f} us" if k.startswith("floor") else f"{k} {v:.2f} steps"
                                      for k, v in asdict(cal.pipeline).items()),
             *cal.report().splitlines(),
             f"{'op':>15s} {'size (B)':>14s} {'measured (us)':>14s} {'model (us)':>11s} {'error':>7s}"]
    lines += [f"{r['op']:>15s} {int(r['size']):14d} {r['measured'] * 1e6:14.1f} {r['model'] * 1e6:11.1f} "
              f"{r['error']:+7.1%}" for r in rows]
    lines += _at_limits(cal)
    if args.save:
        lines.append(f"calibration written to {args.save} (collective / train --calibration {args.save})")
    print("\n".join(lines))


def _at_limits(cal) -> list:
    """Notes on the fitted quantities a limit stopped: an efficiency at its cap of 1 where the
    bandwidth factor asked for more (:func:`flowsolver.collectives.capped_efficiencies`, which
    ``cal.message`` carries too), a latency at its lower bound 0 the logs constrained (they ask
    for less than NCCL's constants give)."""
    from ..collectives import capped_efficiencies

    out = [f"# note: {note}" for note in capped_efficiencies(cal)]
    out += [f"# note: {p.name} at its lower bound 0: the logs ask for less latency than NCCL's constants give"
            for p in cal.parameters if p.unit == "s" and p.constrained and p.value < 1e-9]     # (the bound, to 1 ns)
    return out


def _header_message(cal) -> str:
    """``cal.message`` less the capped-efficiency notes (the report ends with them)."""
    from ..collectives import capped_efficiencies

    capped = set(capped_efficiencies(cal))
    return "; ".join(part for part in cal.message.split("; ") if part and part not in capped)


def _logs_settings(args, logs) -> tuple:
    """``(algorithm, protocol)`` for ``calibrate`` of ``logs`` from ``--algorithm`` /
    ``--protocol``: one for every op the logs test (a value that allows their ops different
    ones, ``allreduce:tree;allgather:ring``, is refused: calibrate them apart)."""
    ops = sorted({args.op or df.attrs.get("op") for df in logs} - {None})
    found = {op: settings_for(args, op) for op in ops}
    if len(set(found.values())) > 1:
        raise CliError(f"--algorithm {args.algorithm!r} / --protocol {args.protocol!r} allow the logs' ops different "
                       f"choices ({'; '.join(f'{op}: {a}, {p}' for op, (a, p) in found.items())}): calibrate each "
                       "op's logs apart, with --op")
    return next(iter(found.values()), ("auto", "auto"))
