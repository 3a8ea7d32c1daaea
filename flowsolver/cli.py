"""The ``flowsolver`` command (argparse), a thin layer over the Python API.

Sub-commands: ``topology`` (describe a cluster, export node-link JSON), ``collective`` (an
nccl-tests-style table over message sizes), ``train`` (one training step and its
breakdown), ``study`` (the network study, the main job: ``make run``) and ``sweep
CONFIG.toml``. With no sub-command it describes the built-in default cluster (8 DGX H100
servers on a rail-optimised InfiniBand NDR fabric). Bad input (an output folder that does
not exist included, checked before any computation) exits with status 2 and a one-line
reason on stderr; a sweep in which some scenarios failed finishes the rest, then exits
with status 1 and a one-line summary. ``--json`` output is strict JSON (``null``, never
``NaN``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

import topologies as tp

from . import __version__
from .collectives import ALGORITHMS, OPS, PROTOCOLS
from .routing import POLICIES
from .training import MODELS

_EXAMPLES = """examples:
  flowsolver                                        describe the default cluster
  flowsolver study                                  the network study (make run), writes flowsolver-study.png
  flowsolver study --quick --out none               a shorter study, no figure
  flowsolver topology --family fat_tree --k 16      a 1024-GPU fat-tree
  flowsolver topology --family rail_optimized --nodes 128 --link ib_hdr --json
  flowsolver topology --family dragonfly --p 4 --a 8 --h 4 --export df.json
  flowsolver collective --nodes 4 --op all_reduce -b 1M -e 8G -f 4
  flowsolver collective --family fat_tree --k 8 --server dgx_h100 --policy ecmp_hash --csv
  flowsolver train --nodes 8 --model llama-3-70b --tp 8 --global-batch 512
  flowsolver sweep examples/sweep.toml --out results.csv
"""


def _accepted() -> str:
    algorithms = "\n".join(f"    {op}: {', '.join(ALGORITHMS[op])}" for op in OPS)
    return (f"accepted values:\n  families: {', '.join(tp.FAMILIES)}\n  routing policies: {', '.join(POLICIES)}\n"
            f"  ops and their algorithms (or auto):\n{algorithms}\n  protocols: {', '.join(PROTOCOLS)}\n"
            f"  models: {', '.join(MODELS)}\n  servers: {', '.join(tp.server_names())}\n"
            f"  links: {', '.join(tp.link_names())}\n")

_FAMILIES = tuple(tp.FAMILIES)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.I)


def parse_size(text: str) -> float:
    """Bytes from ``"8"``, ``"64K"``, ``"1M"``, ``"8G"`` (binary multiples, as nccl-tests)
    or a plain number such as ``"1e9"``.

    >>> parse_size("1M"), parse_size("8G") == 8 * 2**30, parse_size("1e9")
    (1048576.0, True, 1000000000.0)
    """
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"size must be a number of bytes (like 1e9) with an optional K, M, G or T suffix, "
                         f"got {text!r}")
    value = float(m.group(1)) * 1024 ** "_KMGT".index(m.group(2).upper() or "_")
    if not math.isfinite(value):
        raise ValueError(f"size must be a finite number of bytes, got {text!r}")
    return value


def _add_topology(p: argparse.ArgumentParser, default_family="rail_optimized", default_nodes=8) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--family", choices=_FAMILIES, default=default_family,
                   help="topology family (default %(default)s)")
    g.add_argument("--nodes", type=int, default=default_nodes, help="servers (rail_optimized; default %(default)s)")
    g.add_argument("--k", type=int, default=8, help="radix (fat_tree; default %(default)s)")
    g.add_argument("--leaves", type=int, default=4, help="leaf switches (leaf_spine; default %(default)s)")
    g.add_argument("--spines", type=int, default=2, help="spine switches (leaf_spine; default %(default)s)")
    g.add_argument("--hosts-per-leaf", type=int, default=8, help="hosts under a leaf (leaf_spine; default %(default)s)")
    g.add_argument("--p", type=int, default=2, help="hosts per router (dragonfly; default %(default)s)")
    g.add_argument("--a", type=int, default=4, help="routers per group (dragonfly; default %(default)s)")
    g.add_argument("--h", type=int, default=2, help="global links per router (dragonfly; default %(default)s)")
    g.add_argument("--g", type=int, default=None, help="groups (dragonfly; default a*h+1)")
    g.add_argument("--dims", type=int, nargs="+", default=[4, 4, 4], help="torus dimensions (default 4 4 4)")
    g.add_argument("--mesh", action="store_true", help="torus without wrap-around")
    g.add_argument("--server", default=None, help=f"server model: {', '.join(tp.server_names())}")
    g.add_argument("--link", default="ib_ndr", help=f"link: {', '.join(tp.link_names())}")
    g.add_argument("--oversubscription", type=float, default=1.0,
                   help="leaf downlink / uplink bandwidth (rail_optimized, leaf_spine; default %(default)s)")
    g.add_argument("--fail-fraction", type=float, default=0.0, help="switch cables failed at random")
    g.add_argument("--seed", type=int, default=0, help="seed of the failures")


def _add_output(p: argparse.ArgumentParser) -> None:
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--csv", action="store_true", help="print CSV")


def _build(args):
    return tp.build(args.family, link=args.link, server=args.server, oversubscription=args.oversubscription,
                    fail_fraction=args.fail_fraction, seed=args.seed, nodes=args.nodes, k=args.k,
                    leaves=args.leaves, spines=args.spines, hosts_per_leaf=args.hosts_per_leaf, p=args.p, a=args.a,
                    h=args.h, g=args.g, dims=args.dims, wrap=not args.mesh)


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="flowsolver", description="What your GPU cluster's network costs you.",
                                     epilog=_EXAMPLES + "\n" + _accepted(), formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"flowsolver {__version__}")
    sub = parser.add_subparsers(dest="command")
    topo = sub.add_parser("topology", help="describe a cluster, export node-link JSON", epilog=_EXAMPLES,
                          formatter_class=fmt)
    _add_topology(topo)
    _add_output(topo)
    topo.add_argument("--export", metavar="PATH", help="write the graph as node-link JSON")

    coll = sub.add_parser("collective", help="nccl-tests-style table: size, time, algbw, busbw, bottleneck tier",
                          epilog=_EXAMPLES, formatter_class=fmt)
    _add_topology(coll, default_nodes=2)
    _add_output(coll)
    coll.add_argument("--op", default="all_reduce", choices=OPS, help="collective (default %(default)s)")
    coll.add_argument("--algorithm", default="auto",
                      help="auto (the fastest) or one of the op's: " + "; ".join(
                          f"{op}: {', '.join(ALGORITHMS[op])}" for op in OPS))
    coll.add_argument("--protocol", default="Simple", choices=PROTOCOLS,
                      help="NCCL protocol whose latency constants apply (default %(default)s)")
    coll.add_argument("-b", "--min-bytes", default="1M", help="smallest size (default %(default)s)")
    coll.add_argument("-e", "--max-bytes", default="1G", help="largest size, included (default %(default)s)")
    coll.add_argument("-f", "--step-factor", type=float, default=4.0, help="size multiplier (default %(default)s)")
    coll.add_argument("--ranks", type=int, nargs="+", default=None, help="GPU ranks taking part (default all)")
    coll.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")
    coll.add_argument("--subflows", type=int, default=1, help="sub-flows per flow (ecmp_hash)")
    coll.add_argument("--channels", type=int, default=None,
                      help="rings / trees side by side (default: NICs per server across servers, else 1)")

    train = sub.add_parser("train", help="one training step: time, tokens/s, speed-up, overhead, breakdown",
                           epilog=_EXAMPLES, formatter_class=fmt)
    _add_topology(train)
    _add_output(train)
    train.add_argument("--model", default="llama-3-70b", choices=list(MODELS), help="model preset (default %(default)s)")
    for name, default, text in (("tp", 8, "tensor-parallel size"), ("pp", 1, "pipeline stages"),
                                ("dp", None, "data-parallel size (default: GPUs / (tp x pp))"),
                                ("ep", 1, "expert-parallel size"),
                                ("global-batch", None, "sequences per step (default: 512 rounded to microbatches)"),
                                ("micro-batch", 1, "sequences per microbatch"), ("zero", 1, "ZeRO stage 0-3")):
        train.add_argument(f"--{name}", type=int, default=default,
                           help=text + ("" if default is None else " (default %(default)s)"))
    train.add_argument("--dp-overlap", type=float, default=1.0,
                       help="share of the DP reduction hidden behind compute (default %(default)s)")
    train.add_argument("--mfu", type=float, default=None, help="model FLOPs utilisation while computing")
    train.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")

    study = sub.add_parser("study", help="the 64-GPU network study against the article (the main job)",
                           epilog=_EXAMPLES, formatter_class=fmt)
    study.add_argument("--out", default="flowsolver-study.png",
                       help="PNG of the comparison ('none' for no figure; default %(default)s)")
    study.add_argument("--quick", action="store_true", help="smaller search and only 256 GPUs in the topology part")
    study.add_argument("--model", default="llama-3-70b", choices=list(MODELS), help="model preset (default %(default)s)")
    _add_output(study)

    sw = sub.add_parser("sweep", help="run a sweep described by a TOML file", epilog=_SWEEP_HELP,
                        formatter_class=fmt)
    sw.add_argument("config", help="TOML file with a [grid] table (or [[scenario]] list) and optional [sweep]")
    sw.add_argument("--out", default=None, help="results file, .csv or .parquet (overrides [sweep] out)")
    sw.add_argument("--shard", default=None, metavar="I/N", help="run every N-th scenario from the I-th")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.add_argument("--no-resume", action="store_true", help="rerun scenarios already in the results file")
    _add_output(sw)
    return parser


_SWEEP_HELP = """config example (sweep.toml):
  [sweep]
  out = "results.csv"

  [grid]
  family = "rail_optimized"
  nodes = [2, 4, 8]
  link = ["ib_ndr", "ib_hdr", "roce_400g"]
  op = "all_reduce"
  size = [1048576, 1073741824]
"""


def _plain(value):
    """A value JSON can hold: NumPy scalars as Python ones, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:                                  # pandas' missing values (NA, NaT)
        import pandas as pd

        if pd.isna(value):
            return None
    except (ImportError, TypeError, ValueError):
        pass
    return str(value)


def _json(obj) -> str:
    """Strict JSON (``null`` where a value is missing, never ``NaN``)."""
    return json.dumps(_plain(obj), indent=2, allow_nan=False)


def _writable(name: str, path):
    """``path`` with ``~`` expanded, or a one-line error, before any computation, when it
    cannot be written (a folder that does not exist or is not writable, or a folder itself)."""
    if path is None:
        return None
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is a folder; give a file name")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{name}: folder {str(folder)!r} does not exist (for {str(path)!r})")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{name}: folder {str(folder)!r} is not writable (for {str(path)!r})")
    return str(path)


def _emit(rows: list, args, text: str) -> None:
    if args.json:
        print(_json(rows))
    elif args.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        print(buf.getvalue(), end="")
    else:
        print(text)


def _collective_table(args) -> None:
    from .collectives import collective

    graph = _build(args)
    lo, hi = parse_size(args.min_bytes), parse_size(args.max_bytes)
    if not (lo > 0 and hi >= lo and args.step_factor > 1):
        raise ValueError(f"sizes must satisfy 0 < min-bytes <= max-bytes and step-factor > 1, got "
                         f"{args.min_bytes!r}, {args.max_bytes!r}, {args.step_factor!r}")
    if math.log(hi / lo) / math.log(args.step_factor) > 10_000:
        raise ValueError(f"sizes: {args.min_bytes!r} to {args.max_bytes!r} by {args.step_factor!r} is more than "
                         "10000 sizes; raise -f / --step-factor")
    sizes, s = [], lo
    while s <= hi * (1 + 1e-12):
        sizes.append(s)
        s *= args.step_factor
    if sizes[-1] < hi * (1 - 1e-12):      # the end is included, as in nccl-tests
        sizes.append(hi)
    opts = dict(subflows=args.subflows) if args.policy == "ecmp_hash" else None
    rows = []
    for size in sizes:
        r = collective(graph, args.op, size, ranks=args.ranks, algorithm=args.algorithm, policy=args.policy,
                       policy_options=opts, channels=args.channels, protocol=args.protocol)
        tier = r.steps[0].bottleneck_tier if r.steps else ""
        rows.append(dict(size=int(size), time_us=r.time * 1e6, algbw_gbs=r.algbw / 1e9, busbw_gbs=r.busbw / 1e9,
                         algorithm=r.algorithm, bottleneck_tier=tier))
    head = f"# {args.op} on {len(tp.gpus(graph)) if args.ranks is None else len(args.ranks)} GPUs ({args.family})"
    lines = [head, f"{'size (B)':>14s} {'time (us)':>12s} {'algbw (GB/s)':>13s} {'busbw (GB/s)':>13s} "
                   f"{'algorithm':>17s}  bottleneck tier"]
    lines += [f"{r['size']:14d} {r['time_us']:12.1f} {r['algbw_gbs']:13.2f} {r['busbw_gbs']:13.2f} "
              f"{r['algorithm']:>17s}  {r['bottleneck_tier']}" for r in rows]
    _emit(rows, args, "\n".join(lines))


def _train(args) -> None:
    from .training import training_step

    graph = _build(args)
    kw = dict(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, micro_batch=args.micro_batch, zero=args.zero,
              dp_overlap=args.dp_overlap)
    if args.global_batch is not None:
        kw["global_batch"] = args.global_batch
    if args.mfu is not None:
        kw["mfu"] = args.mfu
    r = training_step(graph, model=args.model, collective_options=dict(policy=args.policy), **kw)
    rows = [dict(phase=p.name, op=p.op, algorithm=p.algorithm, bytes=p.bytes, calls=p.calls,
                 per_call_s=p.per_call, exposed_s=p.exposed, tier=p.tier) for p in r.phases.values()]
    summary = dict(model=r.model, gpus=r.gpus, tp=r.tp, pp=r.pp, dp=r.dp, ep=r.ep, global_batch=r.global_batch,
                   step_time_s=r.step_time, tokens_per_s=r.tokens_per_s, speedup=r.speedup,
                   comm_overhead=r.comm_overhead, compute_s=r.compute_time, bubble_s=r.bubble_time,
                   memory_per_gpu_gb=r.memory_per_gpu / 1e9, fits=r.fits)
    if args.json:
        print(_json(dict(summary=summary, phases=rows)))
        return
    if args.csv:
        _emit([{**summary, **row} for row in rows] or [summary], args, "")
        return
    lines = [f"{r.model} on {r.gpus} GPUs (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep}), "
             f"{r.global_batch} sequences per step",
             f"step {r.step_time:.3f} s, {r.tokens_per_s:,.0f} tokens/s, speed-up {r.speedup:.1f}x "
             f"(ideal {r.gpus}), communication overhead {r.comm_overhead:.1%}",
             f"compute {r.compute_time:.3f} s, pipeline bubble {r.bubble_time:.3f} s, "
             f"~{r.memory_per_gpu / 1e9:.0f} GB per GPU of {r.gpu_memory / 1e9:.0f}"
             + ("" if r.fits else " (does not fit)"),
             f"{'phase':10s} {'op':26s} {'algorithm':17s} {'calls':>8s} {'per call ms':>12s} {'exposed s':>10s}  tier"]
    lines += [f"{p['phase']:10s} {p['op']:26s} {p['algorithm']:17s} {p['calls']:8.0f} {p['per_call_s'] * 1e3:12.3f} "
              f"{p['exposed_s']:10.3f}  {p['tier']}" for p in rows]
    print("\n".join(lines))


def _sweep(args) -> None:
    import tomllib

    from .sweep import sweep

    try:
        with open(args.config, "rb") as fh:
            config = tomllib.load(fh)
    except OSError as err:
        raise ValueError(f"config: cannot read {args.config!r}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"config: {args.config!r} is not valid TOML: {err}") from None
    grid = config.get("grid", config.get("scenario"))
    if grid is None:
        raise ValueError(f"config: {args.config!r} needs a [grid] table or [[scenario]] entries")
    options = dict(config.get("sweep", {}))
    unknown = set(options) - {"out", "cache_dir", "resume", "progress"}
    if unknown:
        raise ValueError(f"config: unknown [sweep] key(s) {sorted(unknown)}; known: out, cache_dir, resume, progress")
    if args.out:
        options["out"] = args.out
    options["out"] = _writable("--out", options.get("out"))
    if args.no_progress:
        options["progress"] = False
    if args.no_resume:
        options["resume"] = False
    if args.shard:
        m = re.fullmatch(r"(\d+)/(\d+)", args.shard)
        if not m:
            raise ValueError(f"shard must be I/N, got {args.shard!r}")
        options["shard"] = (int(m.group(1)), int(m.group(2)))
    df = sweep(grid, **options)
    rows = df.to_dict("records")
    ok = int((df["status"] == "ok").sum())
    keep = [c for c in df.columns if c not in ("id", "error") and df[c].notna().any()]
    text = df[keep].to_string(index=False) + f"\n{ok} of {len(df)} scenarios ok"
    if ok < len(df):
        text += "; errors:\n" + "\n".join(f"  {r['id']}: {r['error']}" for r in rows if r["status"] != "ok")
    _emit(rows, args, text)
    failed = len(df) - ok
    if failed:
        where = f"the 'error' column of {options['out']}" if options.get("out") else "the 'error' column above"
        raise _Failed(f"{ok} ok, {failed} failed; the errors are in {where}")


class _Failed(Exception):
    """Some scenarios of a sweep failed after the rest ran: exit status 1."""


def _study(args) -> None:
    from .study import run

    out = _writable("--out", None if args.out.lower() == "none" else args.out)
    quiet = args.json or args.csv
    result = run(out=out, quick=args.quick, model=args.model, echo=(lambda *_: None) if quiet else print)
    rows = [dict(network=r.network, label=r.label, gpus=r.step.gpus, step_time_s=r.step.step_time,
                 tokens_per_s=r.step.tokens_per_s, speedup=r.step.speedup, comm_overhead=r.step.comm_overhead,
                 article_speedup=r.article.get("speedup"), article_overhead=r.article.get("overhead"))
            for r in result["rows"]]
    if args.json:
        print(_json(dict(networks=rows, search=result["search"], topology=result["topology"],
                         figure=result["figure"])))
    elif args.csv:
        _emit(rows, args, "")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 a sweep with failed scenarios or a
    closed output pipe, 2 bad input).

    >>> main(["topology", "--family", "torus", "--dims", "2", "2", "--json"]) == 0  # doctest: +ELLIPSIS
    {...
    True
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:          # --help (0) or a usage error (2, message already printed)
        return int(stop.code or 0)
    try:
        if args.command is None:
            graph = tp.default_cluster()
            print(tp.format_description(tp.describe(graph)))
            return 0
        if args.command == "study":
            _study(args)
            return 0
        if args.command == "collective":
            _collective_table(args)
            return 0
        if args.command == "train":
            _train(args)
            return 0
        if args.command == "sweep":
            _sweep(args)
            return 0
        args.export = _writable("--export", args.export)
        graph = _build(args)
        desc = tp.describe(graph)
        if args.export:
            tp.save(graph, args.export)
        if args.json:
            print(_json(desc))
        elif args.csv:
            flat = {k: v for k, v in desc.items() if not isinstance(v, (dict, list))}
            _emit([flat], args, "")
        else:
            print(tp.format_description(desc))
            if args.export:
                print(f"graph written to {args.export}")
        return 0
    except ValueError as err:           # TopologyError and RoutingError are ValueErrors
        print(f"flowsolver: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except BrokenPipeError:             # the reader went away (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:              # a file that could not be read or written after all
        print(f"flowsolver: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except _Failed as err:
        print(f"flowsolver: {err}", file=sys.stderr)
        return 1
