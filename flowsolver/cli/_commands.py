"""The sub-commands: each reads its parsed arguments, calls the Python API and prints."""

from __future__ import annotations

import math
import numbers
import re

import topologies as tp

from ._arguments import compute_choice, build_graph, cluster_label, parse_size
from ._model_file import model_of
from ._output import emit, to_json, writable
from ._settings import calibration_of
from ._words import CliError


def _tp_overlap_said(r) -> str:
    """The header's words for the step's TP overlap ('' without TP)."""
    s = r.schedule
    if r.tp <= 1:
        return ""
    if not s.tp_overlap:
        return ", TP overlap off"
    return f", TP overlap {s.tp_overlap:g} ({'userbuffers' if s.tp_overlap_impl == 'te' else 'async TP'})"


def train(args) -> None:
    from ..training import FITS_RESERVE, step_arguments, training_step, usable_memory

    graph = build_graph(args)
    kw = dict(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, etp=args.etp, cp=args.cp, vp=args.vp, micro_batch=args.micro_batch,
              zero=args.zero, dp_overlap=args.dp_overlap, precision=args.precision, recompute=args.recompute,
              gpu=args.gpu, tp_overlap_impl=args.tp_overlap_impl)
    if args.tp_overlap is not None:
        kw["tp_overlap"] = args.tp_overlap
    if args.global_batch is not None:
        kw["global_batch"] = args.global_batch
    kw.update(compute_choice(args))
    if args.seq_len is not None:
        kw["seq_len"] = args.seq_len
    if args.ranks is not None:
        kw["ranks"] = args.ranks
    options = dict(policy=args.policy, model=calibration_of(args, graph))       # a saved calibration: every collective's
    r = training_step(graph, **step_arguments(model=model_of(args.model), collective_options=options, **kw))
    rows = [dict(phase=p.name, op=p.op, algorithm=p.algorithm, bytes=p.bytes, calls=p.calls,
                 per_call_s=p.per_call, exposed_s=p.exposed, tier=p.bottleneck_tier) for p in r.phases.values()]
    summary = dict(model=r.model, gpus=r.gpus, tp=r.tp, pp=r.pp, dp=r.dp, ep=r.ep, etp=r.profile.layout.etp, vp=r.vp, micro_batch=r.micro_batch,
                   global_batch=r.global_batch, recompute=r.schedule.recompute,
                   tp_overlap=r.schedule.tp_overlap, tp_overlap_impl=r.schedule.tp_overlap_impl,
                   step_time_s=r.step_time, tokens_per_s=r.tokens_per_s, speedup=r.speedup,
                   comm_overhead=r.comm_overhead, compute_s=r.compute_time, bubble_s=r.bubble_time,
                   memory_per_gpu_gb=r.memory_per_gpu / 1e9, fits=r.fits)
    if args.json:
        print(to_json(dict(summary=summary, phases=rows)))
        return
    if args.csv:
        emit([{**summary, **row} for row in rows] or [summary], args, "")
        return
    etp = r.profile.layout.etp
    lines = [f"{r.model} on {r.gpus} GPUs (tp {r.tp}, pp {r.pp}, dp {r.dp}, ep {r.ep}"
             + (f", expert tp {etp}" if r.ep > 1 or etp != r.tp else "")
             # what --vp / --micro-batch auto chose, in the first line (newuser26 #8)
             + (f", vp {r.vp}" if r.pp > 1 else "") + f", micro-batch {r.micro_batch}), "
             f"{r.global_batch} sequences per step, recompute {r.schedule.recompute}{_tp_overlap_said(r)}"
             + (f"; collectives calibrated by {args.calibration}" if options["model"] is not None else ""),
             # a layout over the GPU's memory says so before its figures (newuser27 #8: only line 3 did)
             ("" if r.fits else f"DOES NOT FIT in memory (~{r.memory_per_gpu / 1e9:.0f} GB per GPU of "
                                f"{usable_memory(r.gpu_memory) / 1e9:.1f} usable): ")
             + f"step {r.step_time:.3f} s, {r.tokens_per_s:,.0f} tokens/s, speed-up {r.speedup:.1f}x "
             f"(ideal {r.gpus}), communication overhead {r.comm_overhead:.1%}, MFU {r.mfu:.1%} "
             f"({r.tflops_per_gpu:.0f} TFLOP/s per GPU)",
             f"compute {r.compute_time:.3f} s, pipeline bubble {r.bubble_time:.3f} s, "
             f"~{r.memory_per_gpu / 1e9:.0f} GB per GPU of its {r.gpu_memory / 1e9:.0f} GB "
             f"({r.gpu_memory / 2**30:.0f} GiB)"
             + ("" if r.fits else f" (does not fit: {usable_memory(r.gpu_memory) / 1e9:.1f} GB usable after the "
                                  f"CUDA context's {FITS_RESERVE / 1e9:.1f} GB)"),
             f"{'phase':10s} {'op':26s} {'algorithm':17s} {'calls':>8s} {'per call ms':>12s} {'exposed s':>10s}  tier"]
    lines += [f"{p['phase']:10s} {p['op']:26s} {p['algorithm']:17s} {p['calls']:8.0f} {p['per_call_s'] * 1e3:12.3f} "
              f"{p['exposed_s']:10.3f}  {p['tier']}" for p in rows]
    if r.chosen is not None:        # --vp / --micro-batch auto: what was picked, every candidate
        lines += ["", str(r.chosen)]
    print("\n".join(lines))



#: the most bytes a sweep file (TOML) is read to: a grid or a list of scenarios is a few kB, and a
#: grid is counted before it is expanded (``flowsolver._sweep_grid``); 16 MiB keeps a pipe or a
#: mistaken file from filling memory
SWEEP_FILE_BYTES = 16 << 20


def _sizes_in_bytes(grid):
    """A sweep file's ``size`` values written as every other command takes them (``"64M"``,
    nccl-tests' binary multiples) in bytes; numbers as they are (newuser25 #7: "64M" made every
    row an error while the sweep's own summary printed size=64M)."""
    def bytes_of(value):
        if isinstance(value, str):
            try:
                return parse_size(value)
            except ValueError as err:
                raise ValueError(f"config: size: {err}") from None
        return value

    def one(table):
        if not isinstance(table, dict) or "size" not in table:
            return table
        size = table["size"]
        return dict(table, size=[bytes_of(v) for v in size] if isinstance(size, list) else bytes_of(size))
    return [one(t) for t in grid] if isinstance(grid, list) else one(grid)


def sweep_file(args) -> None:
    import tomllib

    from .._sweep import sweep

    from topologies.formats import read_bytes

    def too_large(size):
        return (f"config: {args.config!r} {'holds more' if size is None else f'is {size:,} bytes, more'} than a "
                f"sweep file's {SWEEP_FILE_BYTES:,}-byte limit (a sweep file is a few tables of lists)")

    try:        # read at most the limit: a pipe or /dev/stdin says size 0 whatever it streams
        data = read_bytes(args.config, SWEEP_FILE_BYTES, too_large=too_large)
    except (FileNotFoundError, IsADirectoryError) as err:
        raise ValueError(f"config: cannot read {args.config!r}: {err.strerror or 'no such file or a folder'}") from None
    try:
        config = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"config: {args.config!r} is not UTF-8 text (TOML is)") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"config: {args.config!r} is not valid TOML: {err}") from None
    except RecursionError:
        raise ValueError(f"config: {args.config!r} nests too deep to read") from None
    tables = set(config) - {"grid", "scenario", "sweep"}
    if tables:              # a [Sweep] or [grids] would be ignored, and its settings with it
        raise ValueError(f"config: unknown table(s) or key(s) {sorted(tables)}; known: [grid] or [[scenario]], "
                         "[sweep]")
    if "grid" in config and "scenario" in config:
        raise ValueError(f"config: {args.config!r} has both a [grid] table and [[scenario]] entries: give one")
    grid = config.get("grid", config.get("scenario"))
    if grid is None:
        raise ValueError(f"config: {args.config!r} needs a [grid] table or [[scenario]] entries")
    grid = _sizes_in_bytes(grid)
    options = dict(config.get("sweep", {}))
    unknown = set(options) - {"out", "cache_dir", "resume", "progress", "max_scenarios"}
    if unknown:
        raise ValueError(f"config: unknown [sweep] key(s) {sorted(unknown)}; known: out, cache_dir, resume, progress, "
                         "max_scenarios")
    for key in ("resume", "progress"):
        if key in options and not isinstance(options[key], bool):
            raise ValueError(f"config: [sweep] {key} must be true or false, got {options[key]!r}")
    if args.out:
        options["out"] = args.out
    options["out"] = writable("--out", options.get("out"))
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
    text = sweep_table(df) + f"\n{ok} of {len(df)} scenarios ok"
    if ok < len(df):
        text += "; errors:\n" + "\n".join(f"  {r['id']}: {r['error']}" for r in rows if r["status"] != "ok")
    emit(rows, args, text)
    failed = len(df) - ok
    if failed:
        where = f"the 'error' column of {options['out']}" if options.get("out") else "the 'error' column above"
        raise Failed(f"{ok} ok, {failed} failed; the errors are in {where}")



def _size_text(value) -> str:
    """Bytes as nccl-tests writes sizes (binary multiples): 1048576 -> '1M' (a row's value that
    is no number, whose row the sweep recorded as an error, as it was given)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    for suffix, scale in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if value >= scale and value % scale == 0:
            return f"{int(value // scale)}{suffix}"
    return f"{value:g}"


#: result columns of the terminal table: (column, heading, scale, format), in the units the other
#: commands print (ms, GB/s, %)
_SWEEP_RESULTS = (("gpus", "gpus", 1, "{:.0f}"), ("time", "time ms", 1e3, "{:.3f}"),
                  ("algbw", "algbw GB/s", 1e-9, "{:.1f}"), ("busbw", "busbw GB/s", 1e-9, "{:.1f}"),
                  ("chosen_algorithm", "algorithm", None, "{}"), ("step_time", "step s", 1, "{:.4g}"),
                  ("tokens_per_s", "tokens/s", 1, "{:,.0f}"), ("speedup", "speed-up", 1, "{:.1f}"),
                  ("comm_overhead", "overhead %", 100, "{:.1f}"), ("bottleneck_tier", "bottleneck tier", None, "{}"))


def sweep_table(df) -> str:
    """A sweep's rows for the terminal: the parameters that vary (those that apply to the sweep's
    tasks), one line for those every scenario shares, and the results in ms, GB/s and %.
    CSV, JSON and the output file keep every column in base units (s, bytes/s).

    >>> import pandas as pd
    >>> df = pd.DataFrame([dict(task="collective", family="fat_tree", k=4, op="all_reduce", size=2**20,
    ...                         model="llama-3-70b", status="ok", time=1e-4, algbw=1e10, busbw=2e10),
    ...                    dict(task="collective", family="fat_tree", k=8, op="all_reduce", size=2**20,
    ...                         model="llama-3-70b", status="ok", time=2e-4, algbw=5e9, busbw=1e10)])
    >>> print(sweep_table(df))
    every scenario: task=collective, family=fat_tree, op=all_reduce, size=1M
    k status time ms algbw GB/s busbw GB/s
    4     ok   0.100       10.0       20.0
    8     ok   0.200        5.0       10.0
    """
    import pandas as pd

    from .._sweep import COLLECTIVE_KEYS, TRAIN_KEYS

    tasks = set(df["task"]) if "task" in df else {"collective"}
    drop = {"id", "error"} | ({*TRAIN_KEYS} if "train" not in tasks else set()) \
        | ({*COLLECTIVE_KEYS} if "collective" not in tasks else set())
    results = {c for c, *_ in _SWEEP_RESULTS} | {"status"}
    params = [c for c in df.columns if c not in drop and c not in results and df[c].notna().any()]
    varying = [c for c in params if df[c].astype(str).nunique() > 1]
    shared = [c for c in params if c not in varying]
    table = df[varying].copy()
    for c in varying:
        if c == "size":
            table[c] = [_size_text(v) for v in df[c]]
    table["status"] = df["status"]
    for column, heading, scale, fmt in _SWEEP_RESULTS:
        if column in df and df[column].notna().any():
            table[heading] = ["" if pd.isna(v) else fmt.format(v * scale if scale else v) for v in df[column]]
    first = df.iloc[0]
    line = ", ".join(f"{c}={_size_text(first[c]) if c == 'size' else first[c]}" for c in shared)
    return (f"every scenario: {line}\n" if line else "") + table.to_string(index=False)


class Failed(Exception):
    """Some scenarios of a sweep failed after the rest ran: exit status 1."""



def study(args) -> None:
    from ..study import run

    out = writable("--out", None if args.out.lower() == "none" else args.out)
    quiet = args.json or args.csv
    result = run(out=out, quick=args.quick, model=args.model, echo=(lambda *_: None) if quiet else print)
    rows = [dict(network=r.network, label=r.label, gpus=r.step.gpus, step_time_s=r.step.step_time,
                 tokens_per_s=r.step.tokens_per_s, speedup=r.step.speedup, comm_overhead=r.step.comm_overhead,
                 article_speedup=r.article.get("speedup"), article_overhead=r.article.get("overhead"))
            for r in result["rows"]]
    if args.json:
        print(to_json(dict(networks=rows, search=result["search"], topology=result["topology"],
                         figure=result["figure"])))
    elif args.csv:
        emit(rows, args, "")



def replay(args) -> None:
    from pathlib import Path

    from ..traces import read, replay as run_replay

    chrome = writable("--chrome", args.chrome)
    graph = build_graph(args)
    path = Path(args.trace)
    workload = read(path)
    r = run_replay(graph, workload, gpu=args.gpu, compute_efficiency=args.compute_efficiency, policy=args.policy)
    if chrome:
        r.chrome_trace(chrome)
    longest = sorted(r.critical_path, key=lambda p: p.start - p.end)[:args.top]
    path_rows = [dict(rank=p.rank, node=p.id, name=p.name, kind=p.kind, start_s=p.start, seconds=p.end - p.start)
                 for p in longest]
    links = [dict(src=str(a), dst=str(b), mean_utilization=u) for a, b, u in r.busiest_links(args.top)]
    summary = dict(trace=str(path), ranks=workload.n_ranks, nodes=workload.n_nodes, communications=len(workload.comms),
                   iteration_time_s=r.iteration_time, exposed_communication_s=r.exposed_communication,
                   path_compute_s=r.path_compute, critical_path_nodes=len(r.critical_path))
    if args.json:
        print(to_json(dict(summary=summary, critical_path=path_rows, busiest_links=links)))
        return
    if args.csv:
        emit([summary], args, "")
        return
    lines = [f"{path}: {workload.n_ranks} ranks, {workload.n_nodes} nodes, {len(workload.comms)} communications",
             f"iteration {r.iteration_time * 1e3:.3f} ms; critical path {len(r.critical_path)} nodes: compute "
             f"{r.path_compute * 1e3:.3f} ms, exposed communication {r.exposed_communication * 1e3:.3f} ms",
             "longest nodes on the critical path:"]
    lines += [f"  rank {p['rank']:5d} node {p['node']:7d} {p['kind']:10s} {p['seconds'] * 1e3:10.3f} ms  {p['name']}"
              for p in path_rows]
    lines += ["busiest links (mean utilisation over the iteration):"]
    lines += [f"  {lk['src']} -> {lk['dst']}: {lk['mean_utilization']:.1%}" for lk in links]
    if chrome:
        lines.append(f"timelines written to {chrome} (open in https://ui.perfetto.dev)")
    print("\n".join(lines))


def _cost_said(row, cost: str) -> str:
    """An upgrade row's cost as the table prints it: a tier the bill holds no part of costs
    nothing on it, which is not free (newuser26 #5: NVLink and PCIe printed at 0 USD)."""
    if cost == "bill" and row["kind"] == "alone" and row["cost"] == 0:
        return "not billed"
    return format(row["cost"], ".3g")


def upgrade(args) -> None:
    """Each tier upgraded alone (exact re-solve beside the linear estimate), then the greedy
    plan under ``--budget``."""
    from ..upgrade import tier_upgrades, upgrade_cost, upgrade_plan, what_if

    graph = build_graph(args)
    if not (args.factor > 0 and math.isfinite(args.factor)):
        raise ValueError(f"--factor must be a finite number > 0, got {args.factor!r}")
    if args.cost == "bandwidth" and args.factor <= 1:      # (it read "--cost of 'access' must be > 0")
        raise CliError(f"--factor must be > 1 with --cost bandwidth (which prices the GB/s an upgrade adds), "
                       f"got {args.factor:g}")
    if not (args.budget >= 0 and math.isfinite(args.budget)):     # (the library's message names its own costs)
        raise CliError(f"--budget must be a finite number >= 0 (in the unit of --cost: 1 per tier with 'uniform', "
                       f"GB/s added with 'bandwidth', USD with 'bill'), got {args.budget!r}")
    workload = dict(op=args.op, size=parse_size(args.size, "--size"), policy=args.policy)
    ups = tier_upgrades(graph, args.factor)

    def bandwidth_cost(name, up, g):        # GB/s added over every link of the tier
        return sum(d["capacity"] * (args.factor - 1) for u, v, d in g.edges(data=True) if up.selects(u, v, d)) / 1e9

    def bill_cost(name, up, g):             # USD; nan where the catalogue cannot price it
        try:
            return upgrade_cost(g, up)
        except ValueError:
            return float("nan")

    # the README's "a budget in USD for upgrades": the library's default cost (newuser25 #3)
    cost = {"uniform": lambda *_: 1.0, "bandwidth": bandwidth_cost, "bill": bill_cost}[args.cost]
    table = what_if(graph, workload, ups)
    plan = upgrade_plan(graph, workload, args.budget, "bill" if args.cost == "bill" else cost, ups)
    rows = [dict(kind="alone", upgrade=r.upgrade, time_us=r.exact_s * 1e6, linear_us=r.linear_s * 1e6,
                 saved_percent=r.saved_percent, cost=float(cost(r.upgrade, ups[r.upgrade], graph)))
            for r in table.itertuples()]
    rows += [dict(kind="plan", upgrade=r.upgrade, time_us=r.time_s * 1e6, linear_us=float("nan"),
                  saved_percent=r.saved_s / table.time_s.iloc[0] * 100.0, cost=r.cost) for r in plan.itertuples()]
    unit = {"uniform": "1 per tier", "bandwidth": "GB/s added", "bill": "USD"}[args.cost]
    lines = [f"# {args.op} of {args.size} on {len(tp.gpus(graph))} GPUs ({cluster_label(args, graph)}; routing "
             f"{args.policy}): {table.time_s.iloc[0] * 1e6:.1f} us; each tier's capacity x{args.factor:g}",
             "# time: re-solved with the upgrade; linear: what the derivative at today's capacities "
             "predicts (first order; n/a where it falls below zero)",
             f"{'':5s} {'upgrade':>14s} {'time (us)':>11s} {'linear (us)':>12s} {'saved %':>8s} {'cost':>9s}"]
    # a first-order estimate below zero is past where the derivative says anything (newuser25 #3)
    lines += [f"{r['kind']:5s} {r['upgrade']:>14s} {r['time_us']:11.1f} "
              f"{'' if r['linear_us'] != r['linear_us'] else 'n/a' if r['linear_us'] < 0 else format(r['linear_us'], '.1f'):>12s} "
              f"{r['saved_percent']:8.2f} {_cost_said(r, args.cost):>9s}" for r in rows]
    if plan.empty:
        cheapest = min((float(cost(name, up, graph)) for name, up in ups.items()), default=float("nan"))
        saving = table.saved_percent.max() if len(table) else 0.0
        lines.append(f"plan: empty: no upgrade within the budget of {args.budget:g} ({unit}) saves time"
                     + (f" (the cheapest costs {cheapest:.3g})" if cheapest > args.budget
                        else f" (the best saves {saving:.2f} %)"))
    lines.append(f"# cost: {unit}; plan: upgrades picked greedily by time saved per cost, re-solved after each"
                 + ("; not billed: a tier inside the servers (NVLink, PCIe) has no part on the bill, and the plan "
                    "leaves it out" if args.cost == "bill" and any(_cost_said(r, "bill") == "not billed" for r in rows)
                    else ""))
    emit(rows, args, "\n".join(lines))
