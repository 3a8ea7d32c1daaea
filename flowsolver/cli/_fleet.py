"""The fleet-level sub-commands: ``flowsolver design`` (which fabric to buy: candidates billed
and timed, the Pareto front) and ``flowsolver goodput`` (useful training time over failure
trajectories, or placements of neighbouring jobs): their arguments and what they run."""

from __future__ import annotations

import topologies as tp

from ..collectives import OPS
from ..training import MODELS
from ._arguments import (_EXAMPLES, _add_output, _add_topology, _int_or_auto, build_graph, cluster_label, parse_count,
                         parse_size)
from ._model_file import model_of
from ._output import emit, to_json
from ._words import CliError, sharp_note

__all__ = ["add_design", "add_goodput", "design", "goodput"]


def add_design(sub, fmt) -> None:
    """``flowsolver design``: candidate fabrics billed and timed, the Pareto front."""
    from .._design import DESIGN_FAMILIES

    d = sub.add_parser("design", help="which fabric to buy: candidates billed and timed, Pareto front of "
                       "price, power and time", epilog=_EXAMPLES, formatter_class=fmt)
    d.add_argument("--gpus", type=int, required=True, help="GPUs of the cluster")
    d.add_argument("--server", default="dgx_h100", help="server model (default %(default)s)")
    d.add_argument("--model", default=None, metavar="PRESET|FILE",
                   help=f"time a training step of this model: a preset ({', '.join(MODELS)}) or a .json / .toml file "
                        "of its shape, as train takes (else a collective: --op, --size)")
    d.add_argument("--tp", type=int, default=None, help="tensor-parallel size, with --model (default 8)")
    d.add_argument("--pp", type=int, default=None, help="pipeline stages, with --model (default 1)")
    # the rest of the step's layout, as train takes them (newuser27 #2: a 405B step at train's
    # default batch and vp 1 spent 31 % in the pipeline bubble, and a MoE could not be asked)
    for name, text in (("vp", "virtual pipeline stages per stage (default 1; auto: the fastest of 1-8 that fits)"),
                       ("ep", "expert-parallel size (default 1)"),
                       ("etp", "expert layers' tensor-parallel size: 1 or the tp (default: tp)"),
                       ("cp", "context-parallel size (default 1)"),
                       ("global-batch", "sequences per step (default: train's, 512 rounded to micro-batches)"),
                       ("micro-batch", "sequences per micro-batch (default 1; auto: the fastest of 1, 2, 4, 8)"),
                       ("seq-len", "tokens per sequence (default: the model's)")):
        d.add_argument(f"--{name}", type=_int_or_auto if name in ("vp", "micro-batch") else int, default=None,
                       help=text + ", with --model")
    d.add_argument("--precision", default=None, choices=("bf16", "fp8"), help="GEMM precision, with --model "
                                                                            "(default bf16)")
    d.add_argument("--op", default="all_reduce", choices=OPS, help="collective over all GPUs (default %(default)s)")
    d.add_argument("--size", default="1G", help="collective bytes, nccl-tests style (default %(default)s)")
    d.add_argument("--budget", type=float, default=None,
                   help="most USD for the network: its bill less what the servers come with (their own NICs, a "
                        "rack's NVLink switch trays)")
    d.add_argument("--power", type=float, default=None, help="most W for the network (the same parts left out)")
    d.add_argument("--families", nargs="+", default=["rail_optimized", "leaf_spine", "fat_tree"],
                   choices=DESIGN_FAMILIES, help="fabric families (default %(default)s, the API's; add rail_only, "
                                                  "dragonfly_plus)")
    d.add_argument("--links", nargs="+", default=["ib_ndr", "ib_xdr", "roce_400g"],
                   help="link technologies (default %(default)s)")
    d.add_argument("--oversubscriptions", nargs="+", type=float, default=[1.0, 2.0],
                   help="leaf oversubscriptions (default %(default)s)")
    d.add_argument("--radixes", nargs="+", type=int, default=[64], help="switch radixes (default %(default)s)")
    d.add_argument("--nics", nargs="+", type=int, default=None,
                   help="NICs per server (default: the server's own, 8 on a DGX, 72 on an NVL72 rack)")
    d.add_argument("--optics", nargs="+", default=["multimode", "singlemode"], choices=("multimode", "singlemode"),
                   help="optics (default both)")
    d.add_argument("--gpu-price", type=float, default=None,
                   help="USD per GPU, its share of its server's price with the server's own compute NICs, added "
                        "to each network bill (capex) less the value of those NICs (a dearer NIC on the bill, such "
                        "as XDR's ConnectX-8 in place of a DGX H100's ConnectX-7, pays the difference), a number; "
                        "the parts catalogue's DGX H100 figure, which includes the InfiniBand cards, is 38750 "
                        "(topologies.get_part('hgx_h100_server').price / 8)")
    d.add_argument("--gpu-price-without-nics", action="store_true",
                   help="the servers come without their compute NICs: the bill's NICs are network spend (--budget, "
                        "USD/GPU) and added to capex")
    d.add_argument("--lifetime-days", type=float, default=None,
                   help="days of training the hardware is paid over: gives tokens per USD (with --model)")
    d.add_argument("--policy", nargs="+", default=None, metavar="POLICY|LINK=POLICY",
                   help="routing each link technology's fabrics are timed with: one policy for all, or LINK=POLICY "
                        "pairs (e.g. roce_400g=ecmp_hash: RoCE hashing each flow onto one path; default ecmp, every "
                        "equal-cost path used, as adaptive routing spreads traffic)")
    d.add_argument("--all", action="store_true", help="list every candidate, not only the front")
    _add_output(d)


def add_goodput(sub, fmt) -> None:
    """``flowsolver goodput``: a run's useful training time over failure trajectories, or a
    placement comparison of neighbouring jobs (``--jobs``)."""
    gp = sub.add_parser("goodput", help="useful training time, tokens/day and losses over failure trajectories; "
                                        "--jobs: placement of neighbouring jobs", epilog=_GOODPUT_HELP,
                        formatter_class=fmt)
    _add_topology(gp, default_nodes=8)
    _add_output(gp)
    gp.add_argument("--op", default="all_reduce", choices=OPS, help="the step's collective (default %(default)s)")
    gp.add_argument("--size", default="1G", help="its bytes, nccl-tests style (default %(default)s)")
    gp.add_argument("--algorithm", default=None,
                    help="its algorithm (default: ring where the op has one, else auto)")
    gp.add_argument("--compute", type=float, default=1.0, help="seconds of computation per step (default 1)")
    gp.add_argument("--tokens", default="4194304", help="tokens per step, K/M/G/T suffixes decimal (1e3 ... 1e12; "
                                                        "default 4194304: 512 sequences of 8,192)")
    gp.add_argument("--days", type=float, default=30.0, help="length of the run (default %(default)s)")
    gp.add_argument("--budget", default=None, help="tokens to train (K/M/G/T suffixes decimal, 15T = 15e12): days to "
                                                   "train them, per trajectory (a run of --days must reach them)")
    gp.add_argument("--trajectories", type=int, default=1000, help="Monte Carlo trajectories (default %(default)s)")
    gp.add_argument("--mc-seed", type=int, default=0, help="seed of the trajectories (default %(default)s)")
    gp.add_argument("--checkpoint-cost", type=float, required=False, default=None,
                    help="seconds to write a checkpoint (required unless --jobs)")
    gp.add_argument("--checkpoint-bytes", default=None, metavar="SIZE",
                    help="checkpoint bytes per GPU (K/M/G suffixes, powers of 1024), written through --storage-ports "
                         "front-end storage ports: the checkpoint cost, instead of --checkpoint-cost")
    gp.add_argument("--storage-ports", type=int, default=0,
                    help="400 GbE storage ports on the front-end network, for --checkpoint-bytes")
    gp.add_argument("--restart", type=float, default=None, help="seconds from a failure to computing again "
                                                                "(required unless --jobs)")
    gp.add_argument("--interval", type=float, default=None, help="seconds between checkpoints (default Daly's)")
    gp.add_argument("--intervals", nargs="+", default=None,
                    help="checkpoint intervals (s) to compare on the same trajectories, or 'auto' (around Daly's, in whole steps)")
    gp.add_argument("--no-spares", action="store_true", help="no hot spares: wait --repair hours (or --shrink)")
    gp.add_argument("--shrink", action="store_true", help="without spares, shrink data parallelism until repaired")
    gp.add_argument("--repair", type=float, default=0.0, help="hours to repair a node without spares")
    gp.add_argument("--dp", type=int, default=None, help="data-parallel degree (for --shrink)")
    gp.add_argument("--rate", action="append", default=[], metavar="KIND=PER_DAY",
                    help="override an interruption rate, events per unit per day (gpu, hbm, nic, network, host, "
                         "software; 0 removes it)")
    gp.add_argument("--degrade", action="append", default=[], metavar="TIER=PER_DAY,HOURS,FACTOR",
                    help="cables of TIER degrade to FACTOR of their rate, PER_DAY times per physical cable per day "
                         "(an edge bundling n parallel cables counts n, as the bill does), for HOURS")
    gp.add_argument("--reroute", default="stay", choices=("stay", "around"),
                    help="traffic on a degraded cable: stays on it, or is routed around it (default %(default)s)")
    gp.add_argument("--straggler", default=None, metavar="PER_DAY,HOURS,FACTOR",
                    help="GPUs compute at FACTOR of their speed, PER_DAY times per GPU per day, for HOURS")
    gp.add_argument("--jobs", type=int, nargs="+", default=None, metavar="GPUS",
                    help="compare placements of jobs of these sizes (their collectives at once) instead")


_GOODPUT_HELP = """examples:
  flowsolver goodput --nodes 64 --checkpoint-cost 30 --restart 300 --compute 5 --tokens 16M
  flowsolver goodput --nodes 64 --checkpoint-cost 30 --restart 300 --degrade leaf-spine=0.001,4,0.5
  flowsolver goodput --nodes 64 --checkpoint-bytes 4G --storage-ports 4 --restart 300
  flowsolver goodput --nodes 8 --jobs 16 16 32 --size 256M
Token counts (--tokens, --budget) are decimal: K, M, G, T = 1e3, 1e6, 1e9, 1e12 (the Llama 3
paper's "15T tokens" is --budget 15T); byte sizes (--size, --checkpoint-bytes) are binary, as
nccl-tests' (1G = 2^30 bytes).
Interruption rates default to the Llama 3 paper's (Table 5: 419 in 54 days on 16,384 H100).
"""


def design(args) -> None:
    """Candidate fabrics for ``--gpus`` billed and timed; the Pareto front (or ``--all``)."""
    from .._design import design as search

    if args.lifetime_days is not None and not 0 < args.lifetime_days < float("inf"):   # the library says seconds
        raise CliError(f"--lifetime-days must be a finite number of days > 0, got {args.lifetime_days:g}")
    layout = {name: getattr(args, name) for name in _STEP_FLAGS if getattr(args, name) is not None}
    if args.model is not None:
        tp_, pp_ = 8 if args.tp is None else args.tp, 1 if args.pp is None else args.pp
        workload = dict(model=model_of(args.model), tp=tp_, pp=pp_, **layout)
        label = f"{args.model} step (tp {tp_}, pp {pp_}" + "".join(
            f", {name.replace('_', ' ')} {value}" for name, value in layout.items()) + ")"
    else:
        flags = (("--tp", args.tp), ("--pp", args.pp), ("--lifetime-days", args.lifetime_days),
                 *((f"--{name.replace('_', '-')}", value) for name, value in layout.items()))
        given = [flag for flag, value in flags if value is not None]
        if given:   # a collective has no layout and no tokens per step: they would be ignored
            raise ValueError(f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} --model (a training "
                             "step: --tp, --pp and the others are its layout, --lifetime-days gives tokens per USD from "
                             f"its tokens per step); the collective --op {args.op} has neither")
        workload = [(args.op, parse_size(args.size, "--size"))]
        label = f"{args.op} of {args.size}"
    r = search(args.gpus, workload, budget=args.budget, power=args.power, families=tuple(args.families),
               links=tuple(args.links), oversubscriptions=tuple(args.oversubscriptions), radixes=tuple(args.radixes),
               nics=None if args.nics is None else tuple(args.nics), optics=tuple(args.optics), server=args.server, gpu_price=args.gpu_price,
               lifetime=None if args.lifetime_days is None else args.lifetime_days * 86400.0,
               gpu_price_includes_nics=not args.gpu_price_without_nics, policy=_policy_option(args.policy))
    if r.candidates and all(c.status == "failed" for c in r.candidates):     # bad input: exit 2, with why
        reasons = list(dict.fromkeys(c.message for c in r.candidates))
        raise ValueError(f"no fabric could be built or timed: {'; '.join(reasons[:3])}"
                         + (f" (and {len(reasons) - 3} more reasons: --all lists them)" if len(reasons) > 3 else ""))
    rows = [row for row in r.to_rows() if args.all or row["pareto"]]
    if args.model is not None:          # the batch the step ran (train's default where not given), from its tokens
        spec = workload["model"]
        seq = workload.get("seq_len") or (MODELS[spec] if isinstance(spec, str) else spec).seq_len
        tokens = next((c.tokens for c in r.candidates if c.tokens == c.tokens), None)
        if tokens is not None:
            label += f", {tokens / seq:,.0f} sequences of {seq:,} tokens a step"
    text = (f"# {label} on {args.gpus} GPUs; prices: topologies' parts catalogue (each with its source; "
            "estimates are flagged there)\n")
    text += r.format(every=args.all)
    text += "".join("\n" + note for note in sharp_note(args.links, None if args.model is not None else args.op))
    emit(rows, args, text)


#: train's layout flags design takes beside --tp and --pp (their training_step keywords)
_STEP_FLAGS = ("vp", "ep", "etp", "cp", "global_batch", "micro_batch", "seq_len", "precision")


def _policy_option(given):
    """``--policy``: None, one policy name, or ``LINK=POLICY`` pairs as a dict."""
    if not given:
        return None
    pairs = [item.partition("=") for item in given]
    if len(given) == 1 and not pairs[0][1]:
        return given[0]
    if any(not sep or not link or not name for link, sep, name in pairs):
        raise CliError(f"--policy takes one policy or LINK=POLICY pairs (e.g. --policy roce_400g=ecmp_hash), got "
                       f"{' '.join(given)}")
    return {link: name for link, _, name in pairs}


def _numbers(flag, text, count):
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count:
        raise ValueError(f"{flag} {text!r}: expected {count} comma-separated numbers")
    return values


def _factor(flag, item, factor):
    """A ``CliError`` naming ``flag`` and the value typed where FACTOR is not in (0, 1] (the library
    names the component it builds, which the user never named)."""
    if not 0 < factor <= 1:
        raise CliError(f"{flag} {item!r}: FACTOR must be in (0, 1] (the fraction of the rate kept), got {factor:g}")


def _per_day(flag, item, rate, hours=None):
    """A ``CliError`` naming ``flag`` and the value typed (per day, hours) where the rate is not a
    finite number >= 0 or the duration not one > 0 (the library would report them converted,
    per second and in seconds)."""
    if not (rate >= 0 and rate < float("inf")):
        raise CliError(f"{flag} {item!r}: PER_DAY must be a finite number >= 0 (events per unit per day), got {rate:g}")
    if hours is not None and not (0 < hours < float("inf")):
        raise CliError(f"{flag} {item!r}: HOURS must be a finite number > 0, got {hours:g}")


#: goodput's flags of a run over failure trajectories, each with its default: a placement
#: comparison (``--jobs``) times the jobs' collectives only, so any of them given beside it
#: would be ignored
_TRAJECTORY_FLAGS = (("--compute", "compute", 1.0), ("--tokens", "tokens", "4194304"), ("--days", "days", 30.0),
                     ("--budget", "budget", None), ("--trajectories", "trajectories", 1000),
                     ("--mc-seed", "mc_seed", 0), ("--checkpoint-cost", "checkpoint_cost", None),
                     ("--checkpoint-bytes", "checkpoint_bytes", None), ("--storage-ports", "storage_ports", 0),
                     ("--restart", "restart", None), ("--interval", "interval", None),
                     ("--intervals", "intervals", None), ("--no-spares", "no_spares", False),
                     ("--shrink", "shrink", False), ("--repair", "repair", 0.0), ("--dp", "dp", None),
                     ("--rate", "rate", []), ("--degrade", "degrade", []), ("--reroute", "reroute", "stay"),
                     ("--straggler", "straggler", None))


def _refuse_beside_jobs(args) -> None:
    """A ``ValueError`` naming every trajectory flag given beside ``--jobs`` (it would be ignored)."""
    given = [flag for flag, name, default in _TRAJECTORY_FLAGS if getattr(args, name) != default]
    if given:
        raise ValueError(f"--jobs compares placements of the jobs' collectives (--op, --size, --algorithm) and "
                         f"times nothing else: {', '.join(given)} would be ignored beside it; run them without --jobs")


def goodput(args) -> None:
    """A run's goodput over failure trajectories, or (``--jobs``) a placement comparison."""
    from ..reliability import (Component, JobResponse, default_components, fixed_algorithm, goodput as run_goodput,
                               placement_slowdowns)

    graph = build_graph(args)
    size = parse_size(args.size, "--size")
    tokens = parse_count(args.tokens, "--tokens")
    budget = None if args.budget is None else parse_count(args.budget, "--budget")
    if args.jobs is not None:
        _refuse_beside_jobs(args)
        have = len(tp.gpus(graph))
        if sum(args.jobs) > have:        # the library says "sizes" and "the cluster" (read as --cluster)
            raise CliError(f"--jobs {' '.join(map(str, args.jobs))} ask for {sum(args.jobs)} GPUs; the cluster "
                           f"({cluster_label(args, graph)}) has {have}")
        rows = placement_slowdowns(graph, args.jobs, args.op, size, algorithm=args.algorithm)  # None: fixed_algorithm
        lines = [f"# {args.op} of {args.size} per job, jobs of {' '.join(map(str, args.jobs))} GPUs at once on "
                 f"{len(tp.gpus(graph))} GPUs ({cluster_label(args)})",
                 f"{'policy':>13s} {'job':>4s} {'gpus':>5s} {'servers':>8s} {'alone (us)':>11s} "
                 f"{'together (us)':>14s} {'slowdown':>9s}"]
        lines += [f"{r['policy']:>13s} {r['job']:4d} {r['gpus']:5d} {r['servers']:8d} {r['alone'] * 1e6:11.1f} "
                  f"{r['together'] * 1e6:14.1f} {r['slowdown']:9.3f}" for r in rows]
        # (newuser25 #1: the columns read as collective's times, 4-7x them at 1-16 MiB)
        lines.append("note: times of the event engine (flowsolver.concurrent: a latency every step, no NCCL chunk "
                     "pipeline), above `flowsolver collective`'s for one job below ~256 MiB; its fixed part does not "
                     "grow with contention, so slowdowns there are understated: compare policies, not these times "
                     "with collective's")
        emit(rows, args, "\n".join(lines))
        return
    if args.checkpoint_bytes is not None:
        from ..reliability import checkpoint_write_time

        if args.checkpoint_cost is not None:
            raise ValueError("--checkpoint-bytes sets the checkpoint cost: give it or --checkpoint-cost, not both")
        if args.storage_ports < 1:
            raise ValueError("--checkpoint-bytes needs --storage-ports >= 1 (the storage tier it is written to)")
        tp.add_storage(graph, args.storage_ports, link="eth_400g")
        args.checkpoint_cost = checkpoint_write_time(graph, parse_size(args.checkpoint_bytes))
    if not (args.repair >= 0 and args.repair != float("inf")):     # hours here; the library's message says seconds
        raise CliError(f"--repair must be a finite number of hours >= 0, got {args.repair!r}")
    if not args.no_spares:                # flags of the response without spares would be ignored
        for flag, given in (("--repair", args.repair), ("--shrink", args.shrink)):
            if given:
                raise ValueError(f"{flag} is the response without hot spares (they replace a failed node at once, "
                                 "no repair wait): give --no-spares with it")
    if args.dp is not None and not args.shrink:
        raise ValueError("--dp is the data-parallel degree a job shrinks by: give it with --shrink (it is used for "
                         "nothing else)")
    if args.checkpoint_cost is None or args.restart is None:
        raise ValueError("--checkpoint-cost (or --checkpoint-bytes) and --restart (seconds) are required "
                         "(or --jobs for placements)")
    if not 0 <= args.compute < float("inf"):     # the library names it workload['compute']
        raise CliError(f"--compute must be a finite number of seconds >= 0, got {args.compute:g}")
    if args.mc_seed < 0:               # numpy's own message would not name it
        raise CliError(f"--mc-seed must be an integer >= 0, got {args.mc_seed}")
    day = 86400.0
    overrides = {}
    for item in args.rate:
        kind, _, value = item.partition("=")
        try:
            per_day = float(value)
        except ValueError:
            raise ValueError(f"--rate {item!r}: expected KIND=PER_DAY") from None
        known = default_components()
        if kind not in known:          # said in events a second, the unit it was not given in
            raise ValueError(f"--rate {item!r}: KIND must be one of {', '.join(known)}")
        _per_day("--rate", item, per_day)
        overrides[kind] = per_day / day
    comps = default_components(**overrides)
    for item in args.degrade:
        tier, _, spec = item.partition("=")
        rate, hours, factor = _numbers("--degrade", spec, 3)
        _per_day("--degrade", item, rate, hours)
        _factor("--degrade", item, factor)
        comps[f"degraded:{tier}"] = Component(f"degraded:{tier}", "degrade", rate / day, unit="link",
                                              duration=hours * 3600.0, factor=factor, links=tier)
    if args.straggler:
        rate, hours, factor = _numbers("--straggler", args.straggler, 3)
        _per_day("--straggler", args.straggler, rate, hours)
        _factor("--straggler", args.straggler, factor)
        comps["straggler"] = Component("straggler", "straggler", rate / day, unit="gpu", duration=hours * 3600.0,
                                       factor=factor)
    response = JobResponse(checkpoint_cost=args.checkpoint_cost, restart_time=args.restart,
                           checkpoint_interval=args.interval, spares=not args.no_spares, shrink=args.shrink,
                           repair_time=args.repair * 3600.0)
    workload = dict(op=args.op, size=size, algorithm=args.algorithm or fixed_algorithm(args.op), compute=args.compute,
                    tokens=tokens)
    intervals = args.intervals
    if intervals is not None and intervals != ["auto"]:
        try:
            intervals = [float(x) for x in intervals]
        except ValueError:
            raise ValueError(f"--intervals: seconds or 'auto', got {' '.join(args.intervals)}") from None
    elif intervals is not None:
        intervals = "auto"
    r = run_goodput(graph, workload, response, components=comps, days=args.days, trajectories=args.trajectories,
                    seed=args.mc_seed, intervals=intervals, dp=args.dp, reroute=args.reroute)
    s = r.summary()
    lost = s.pop("lost_fraction")
    lines = [f"# {args.days:g} days on {len(tp.gpus(graph))} GPUs ({cluster_label(args)}), {s['trajectories']} "
             f"trajectories: step {s['healthy_step_time']:.3f} s healthy"
             # which collective a step times, and by what (newuser26 #8: ring where collective's default is auto)
             + (f" ({workload['op']} of {args.size} by {workload['algorithm']} each step)"
                if isinstance(workload, dict) and "op" in workload else ""),
             f"interruptions per run {s['interruptions_mean']:.1f} (MTBF {s['mtbf_hours']:.2f} h); checkpoint "
             f"{s['checkpoint_cost']:.1f} s"
             + (f" ({args.checkpoint_bytes} per GPU through {args.storage_ports} storage ports)"
                if args.checkpoint_bytes is not None else "") + ", every "
             f"{s['checkpoint_interval']:.0f} s (Young {s['young_interval']:.0f} s, Daly {s['daly_interval']:.0f} s)",
             f"useful training time: mean {s['useful_fraction_mean'] * 100:.2f} % "
             f"(5 % {s['useful_fraction_p5'] * 100:.2f}"
             f", 95 % {s['useful_fraction_p95'] * 100:.2f}); Daly's closed form {s['daly_fraction'] * 100:.2f} %",
             f"tokens/day: mean {s['tokens_per_day_mean']:.4g} of {s['healthy_tokens_per_day']:.4g} healthy; "
             f"{s['distinct_states']} distinct states met, {s['distinct_fabrics']} degraded fabrics "
             f"({s['fabrics_solved']} re-solved, {s['fabrics_rerouted']} routed around)"]
    if "simulated_optimum" in s:
        lines.append(f"simulated optimum interval: {s['simulated_optimum']:.0f} s (" + ", ".join(
            f"{t:.0f} s: {f * 100:.2f} %" for t, f in r.curve) + ")")
    if args.budget is not None:
        import numpy as np

        days = r.time_to_train(budget) / day
        done = days[np.isfinite(days)]
        s["budget_reached"] = float(len(done) / len(days))
        if len(done):
            s.update(days_to_train_p50=float(np.percentile(done, 50)), days_to_train_p95=float(np.percentile(done, 95)))
        lines.append(f"time to train {args.budget} = {budget:.4g} tokens: " + (
            f"median {s['days_to_train_p50']:.2f} days, 95 % {s['days_to_train_p95']:.2f} days"
            if len(done) else "not reached") + f" ({s['budget_reached'] * 100:.0f} % of trajectories reach it in "
            f"{args.days:g} days)")
    lines.append("lost (fraction of wall time): "
                 + ", ".join(f"{k} {v * 100:.2f} %" for k, v in lost.items() if v >= 5e-5))
    rows = [dict(cause=k, lost_fraction=v) for k, v in lost.items()]
    if args.json:
        print(to_json(dict(s, lost_fraction=lost)))
    else:
        emit(rows, args, "\n".join(lines))
