"""The command's arguments: the parser, its sub-commands, sizes as nccl-tests writes them,
and the cluster an invocation describes."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import topologies as tp
from topologies.formats.astra import MAX_YAML_BYTES
from topologies.formats.node_link import MAX_JSON_BYTES
from topologies.formats.simai import MAX_SIMAI_BYTES

from ..collectives import ALGORITHMS, OPS, PROTOCOLS
from ..routing import POLICIES
from ..training import DEFAULT_COMPUTE_EFFICIENCY, MODELS
from ._files import cluster_file, server_of
from ._settings import ALGORITHM_HELP, PROTOCOL_HELP, algorithm_setting, protocol_setting
from ._words import CliError, in_cli_words  # noqa: F401  (in_cli_words: read from here by the package and tests)

_EXAMPLES = """examples:
  flowsolver                                        describe the default cluster
  flowsolver study                                  the network study (make run), writes flowsolver-study.png
  flowsolver study --quick --out none               a shorter study, no figure
  flowsolver topology --family fat_tree --k 16      a 1024-GPU fat-tree
  flowsolver topology --family rail_optimized --nodes 128 --link ib_hdr --json
  flowsolver topology --family dragonfly --p 4 --a 8 --h 4 --export df.json
  flowsolver collective --nodes 4 --op all_reduce -b 1M -e 8G -f 4
  flowsolver collective --family fat_tree --k 8 --server dgx_h100 --policy ecmp_hash --csv
  flowsolver collective --nodes 2 --compare all_reduce_perf.log --plot compare.png
  flowsolver calibrate all_reduce_perf.log --nodes 2 --server dgx_h100 --link ib_ndr
  flowsolver train --nodes 8 --model llama-3-70b --tp 8 --global-batch 512
  flowsolver sweep examples/sweep.toml --out results.csv
  flowsolver replay traces/ --nodes 2 --chrome timeline.json   replay a Chakra trace (one .et file per rank)
  flowsolver upgrade --family fat_tree --k 4 --op all_to_all --size 16M --budget 2
  flowsolver design --gpus 512 --model llama-3-70b --tp 8 --pp 4 --budget 5e6   which fabric to buy
  flowsolver plan --model llama-3-70b --gpus 1024 --global-batch 512   the fastest layouts of a job
"""



def _accepted() -> str:
    algorithms = "\n".join(f"    {op}: {', '.join(ALGORITHMS[op])}" for op in OPS)
    return (f"accepted values:\n  families: {', '.join(tp.FAMILIES)}\n  routing policies: {', '.join(POLICIES)}\n"
            f"  ops and their algorithms (or auto):\n{algorithms}\n  protocols: {', '.join(PROTOCOLS)}\n"
            "  --algorithm / --protocol also take NCCL_ALGO / NCCL_PROTO values: Ring,Tree  ^LL128  "
            "allreduce:tree;allgather:ring\n"
            f"  models: {', '.join(MODELS)}\n  servers: {', '.join(tp.server_names())}\n"
            f"  links: {', '.join(tp.link_names())}\n")


def _size_parameters() -> list:
    """Every registered family's size parameters, once each (a parameter two families share
    is one flag), in registration order: the cluster's size flags."""
    seen = {}
    for name in tp.FAMILIES:
        for param in tp.get_family(name).parameters:
            seen.setdefault(param.name, param)
    return list(seen.values())

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.I)



def parse_size(text: str, whole: str | None = None) -> float:
    """Bytes from ``"8"``, ``"64K"``, ``"1M"``, ``"8G"`` (binary multiples, as nccl-tests)
    or a plain number such as ``"1e9"``; ``whole``: the option of a message size, which must be
    a whole number of bytes (``-b 1.5`` would model 1.5 B and print 1). Token counts and
    checkpoint bytes may be fractions (``--tokens 1.3M``).

    >>> parse_size("1M"), parse_size("8G") == 8 * 2**30, parse_size("1e9"), parse_size("0.3K"), parse_size("2KiB")
    (1048576.0, True, 1000000000.0, 307.2, 2048.0)
    """
    m = _SIZE.match(str(text))
    if not m:       # the option named where the caller gives it (newuser26 #8: -b 1X said "size")
        raise ValueError(f"{whole or 'size'} must be a number of bytes (like 1e9) with an optional K, M, G or T "
                         f"suffix, got {text!r}")
    number, prefix, unit = m.group(1), m.group(2).upper(), m.group(3).lower()
    # bytes ("8B") or a binary prefix's ("1KiB"); "1GB" is refused: nccl-tests' G is 2^30, yet GB
    # means 1e9 bytes (docs' concepts page)
    if unit and (unit, bool(prefix)) not in (("b", False), ("ib", True)):
        if not prefix:
            raise ValueError(f"size {text!r}: iB needs a K, M, G or T before it (1KiB), or none (bytes)")
        raise ValueError(f"size {text!r} is ambiguous: write {number}{prefix} or {number}{prefix}iB for binary "
                         f"multiples (as nccl-tests), or a plain number such as 1e9")
    value = float(number) * 1024 ** "_KMGT".index(prefix or "_")
    if not math.isfinite(value):
        raise ValueError(f"size must be a finite number of bytes, got {text!r}")
    if whole and value != math.floor(value):
        raise CliError(f"{whole} must be a whole number of bytes, got {text!r} = {value:g}")
    return value


_COUNT = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([KMGT]?)\s*$", re.I)


def parse_count(text: str, option: str) -> float:
    """A count of tokens from ``"4096"``, ``"16M"``, ``"15T"`` (decimal multiples: K, M, G, T =
    1e3, 1e6, 1e9, 1e12, as token budgets are written: the Llama 3 paper's "15T tokens" is
    15e12) or a plain number such as ``"1.5e12"``; ``option`` names the flag in the message.
    Byte sizes keep nccl-tests' binary multiples (:func:`parse_size`).

    >>> parse_count("1T", "--budget"), parse_count("16M", "--tokens"), parse_count("2.5e6", "--tokens")
    (1000000000000.0, 16000000.0, 2500000.0)
    """
    m = _COUNT.match(str(text))
    value = float(m.group(1)) * 1000 ** "_KMGT".index((m.group(2) or "_").upper()) if m else math.nan
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"{option} must be a positive number of tokens (like 4096, 1.5e12) with an optional "
                       f"K, M, G or T suffix (1e3, 1e6, 1e9, 1e12), got {text!r}")
    return value



def _step_factor(text: str) -> int:
    """``-f``: an integer >= 2, as nccl-tests reads it (``strtol`` in ``src/common.cu``; its
    factor 1 means ``-i``'s linear steps): ``-f 1.5`` modelled 1.5 and 2.25 B and printed 1, 2.

    >>> _step_factor("2"), _step_factor("4.0")
    (2, 4)
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value == math.floor(value) and value >= 2):
        raise argparse.ArgumentTypeError(f"must be an integer >= 2 (nccl-tests' -f is a whole factor), got {text!r}")
    return int(value)


class _SizeGiven(argparse.Action):
    """Stores a size flag and notes that it was given (``namespace.sizes_given``), so a flag the
    chosen family does not take is an error rather than ignored."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
        given = set(getattr(namespace, "sizes_given", ()) or ())
        setattr(namespace, "sizes_given", given | {option_string})


def _add_topology(p: argparse.ArgumentParser, default_family="rail_optimized", default_nodes=8) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--family", choices=tuple(tp.FAMILIES), default=default_family,
                   help="topology family (default %(default)s)")
    for param in _size_parameters():
        default = default_nodes if param.name == "nodes" else param.default
        if param.type is bool:
            g.add_argument(param.flag, action=_SizeGiven, nargs=0, default=False, help=param.help)
        else:
            g.add_argument(param.flag, action=_SizeGiven, type=param.type, nargs=param.nargs, help=param.help,
                           default=list(default) if param.nargs and default is not None else default)
    g.add_argument("--server", default=None,
                   help=f"server model: {', '.join(tp.server_names())}, or an NCCL topology file "
                        "(NCCL_TOPO_DUMP_FILE's XML, *.xml)")
    g.add_argument("--link", default=None, help=f"link: {', '.join(tp.link_names())} (default ib_ndr; "
                                                "each described by topology --catalogue)")
    g.add_argument("--nic", default=None, metavar="LINK",
                   help="the servers' NIC technology, a link name (default: the server's own, run at the slower of "
                        "it and --link: a DGX H100's ConnectX-7 stays 400G under --link ib_xdr); e.g. --link ib_xdr "
                        "--nic ib_xdr gives ConnectX-8s, as design's XDR candidates have")
    g.add_argument("--oversubscription", type=float, default=None,
                   help="leaf downlink / uplink bandwidth (rail_optimized, leaf_spine; default 1.0)")
    g.add_argument("--cluster", metavar="PATH", default=None,
                   help="the cluster from a file instead of --family and its sizes: node-link JSON "
                        "(topology --export), an ASTRA-sim analytical network (*.yml, *.yaml) or a SimAI "
                        "topology file (any other name)")
    g.add_argument("--cluster-max-bytes", metavar="SIZE", default=None,
                   help="the largest --cluster file read, a size such as 96M (default: the format's own: "
                        f"node-link JSON {MAX_JSON_BYTES // 2**20}M, about 30,000 GPUs, read in up to ~30x "
                        f"its size of memory; ASTRA-sim YAML {MAX_YAML_BYTES // 2**20}M; SimAI "
                        f"{MAX_SIMAI_BYTES // 2**20}M)")
    g.add_argument("--fail-fraction", type=float, default=0.0, help="switch cables failed at random")
    g.add_argument("--seed", type=int, default=0, help="seed of the failures")


def _add_output(p: argparse.ArgumentParser) -> None:
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--csv", action="store_true", help="print CSV")


def cluster_label(args, graph=None) -> str:
    """What the printed headers call the cluster: the family with its servers and link (and
    oversubscription and failed cables where given), or the ``--cluster`` file's name."""
    if args.cluster is not None:
        return Path(args.cluster).name
    params = (graph.graph.get("params") or {}) if graph is not None else {}
    server = params.get("server")
    parts = [args.family]
    if isinstance(server, dict) and server.get("name"):
        parts.append(f"{server['name']} servers")
    if params.get("link"):
        parts.append(f"{params['link']} links")
    if args.oversubscription not in (None, 1.0):
        built = params.get("oversubscription")
        # whole cables: the ratio built can be below the one asked (newuser26 #4: 3 built 2:1 on 4 nodes)
        parts.append(f"oversubscription {args.oversubscription:g}" if built is None or
                     abs(built - args.oversubscription) < 1e-9 else
                     f"oversubscription {built:.3g} built ({args.oversubscription:g} asked; whole uplinks)")
    if args.fail_fraction:
        parts.append(f"{args.fail_fraction:.0%} of switch cables failed (seed {args.seed})")
    return ", ".join(parts)


def cluster_limit(args) -> int | None:
    """The largest ``--cluster`` file read, in bytes (``--cluster-max-bytes``: a size such as
    96M; None when not given: the reader's own limit, node-link JSON 48 MiB).

    >>> import argparse
    >>> cluster_limit(argparse.Namespace(cluster_max_bytes="96M")) == 96 * 2**20
    True
    """
    text = getattr(args, "cluster_max_bytes", None)
    if text is None:
        return None
    try:
        value = parse_size(text)
    except ValueError as err:
        raise CliError(f"--cluster-max-bytes: {err}") from None
    if value < 1:
        raise CliError(f"--cluster-max-bytes must be at least 1 byte, got {text!r}")
    return int(value)


#: the server topologies.build gives the rail families where none is named
_RAIL_SERVER = "dgx_h100"


def build_graph(args):
    """The cluster graph the ``--family`` / size / link arguments describe, or the
    ``--cluster`` file (with ``--fail-fraction`` of its switch cables failed)."""
    sizes = sorted(getattr(args, "sizes_given", ()) or ())
    if not 0.0 <= args.fail_fraction <= 1.0:            # (a --cluster file's failures are fail_links' "fraction")
        raise CliError(f"--fail-fraction must be in [0, 1], got {args.fail_fraction!r}")
    if args.seed < 0:
        raise CliError(f"--seed must be an integer >= 0, got {args.seed}")
    if args.cluster is None and getattr(args, "cluster_max_bytes", None) is not None:
        raise CliError("--cluster-max-bytes: the limit of a --cluster file's size; give --cluster PATH "
                       "or leave it out")
    if args.cluster is not None and sizes:
        raise ValueError(f"{', '.join(sizes)}: a --cluster file holds its own size; leave these out")
    takes = {p.flag for p in tp.get_family(args.family).parameters}
    if args.cluster is None and (foreign := [f for f in sizes if f not in takes]):
        raise ValueError(f"{', '.join(foreign)}: not a size of the {args.family} family (its sizes: "
                         f"{', '.join(sorted(takes))}); name the family with --family")
    if args.cluster is not None:
        given = [f"--{k}" for k in ("server", "link", "nic", "oversubscription") if getattr(args, k, None) is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: a --cluster file holds its own servers and links; "
                             "leave these out or describe a generated cluster")
        g = cluster_file(args.cluster, cluster_limit(args))
        return tp.fail_links(g, args.fail_fraction, seed=args.seed) if args.fail_fraction else g
    server = server_of(args.server)
    if getattr(args, "nic", None) is not None:
        if args.nic not in tp.link_names():
            raise CliError(f"--nic must be a link technology ({', '.join(tp.link_names())}), got {args.nic!r}")
        # the server the family would build (review27 H1: a DGX H100 put in place of a family's own
        # one-GPU hosts, a 2 x 2 torus of 4 GPUs became 32)
        server = server or (_RAIL_SERVER if args.family in ("rail_optimized", "rail_only") else None)
        if server is None:
            raise CliError(f"--nic needs --server with --family {args.family}: its default hosts are single GPUs "
                           "cabled into the fabric, with no NIC to change")
        server = tp.get_server(server).with_(nic=args.nic)
    return tp.build(args.family, link=args.link or "ib_ndr", server=server,
                    oversubscription=1.0 if args.oversubscription is None else args.oversubscription,
                    fail_fraction=args.fail_fraction, seed=args.seed,
                    **{p.name: p.from_cli(getattr(args, p.dest)) for p in tp.get_family(args.family).parameters})


def _add_topology_command(sub, fmt) -> None:
    """``flowsolver topology``: describe a cluster, export node-link JSON."""
    topo = sub.add_parser("topology", help="describe a cluster, export node-link JSON", epilog=_EXAMPLES,
                          formatter_class=fmt)
    _add_topology(topo)
    _add_output(topo)
    topo.add_argument("--export", metavar="PATH", help="write the graph as node-link JSON")
    topo.add_argument("--catalogue", action="store_true",
                      help="list the link technologies (--link: rate, family, NCCL transport, source) and the "
                           "server models (--server: GPUs, NICs), then stop")


def _add_collective(sub, fmt) -> None:
    """``flowsolver collective``: an nccl-tests-style table over message sizes."""
    coll = sub.add_parser("collective", help="nccl-tests-style table: size, time, algbw, busbw, bottleneck tier",
                          epilog=_EXAMPLES, formatter_class=fmt)
    _add_topology(coll, default_nodes=2)
    _add_output(coll)
    coll.add_argument("--op", default=None, choices=OPS, help="collective (default all_reduce, or the --compare log's)")
    coll.add_argument("--algorithm", default="auto", type=algorithm_setting, help=ALGORITHM_HELP)
    coll.add_argument("--protocol", default="auto", type=protocol_setting, help=PROTOCOL_HELP)
    coll.add_argument("--candidates", default="nccl", choices=("nccl", "all"),
                      help="what auto picks from: NCCL's algorithms, or all (what-if; default %(default)s)")
    coll.add_argument("--compare", metavar="LOG", default=None,
                      help="an nccl-tests log: the model at its sizes, side by side with the measured times")
    coll.add_argument("--plot", metavar="PNG", default=None, help="with --compare: busbw against size, model and log")
    coll.add_argument("-b", "--min-bytes", default=None, help="smallest size (default 1M; with --compare: the "
                      "log's rows from it)")
    coll.add_argument("-e", "--max-bytes", default=None, help="largest size, included (default 1G; with --compare: "
                      "the log's rows up to it)")
    coll.add_argument("-f", "--step-factor", type=_step_factor, default=4,
                      help="size multiplier, an integer >= 2 as nccl-tests' (default %(default)s)")
    coll.add_argument("--ranks", type=int, nargs="+", default=None, help="GPU ranks taking part (default all)")
    coll.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")
    coll.add_argument("--subflows", type=int, default=1, help="sub-flows per flow (ecmp_hash)")
    coll.add_argument("--channels", type=int, default=None,
                      help="NCCL's ring and tree channels, as NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS (default: as NCCL "
                           "sets them from the hardware; NVLS keeps its own). The table's ch column: the channels each "
                           "time used (NVLS's for NVLS rows, fewer for ring / tree at small sizes)")
    coll.add_argument("--nccl-version", default=None,
                      help="the NCCL release the run uses, e.g. 2.18 or 2.18.3-1 (default: the model's, 2.30's rules; "
                           "with --compare: the log's NCCL version line, which this overrides): an older release's "
                           "rules where the model keeps one that changed (its tuner's LL / LL128 bandwidth caps, before "
                           "2.20 tree Simple's chunk: docs/collective-timing.md) and only the algorithms it has (NVLS "
                           "from 2.17, NVLSTree from 2.18, PAT from 2.23)")
    coll.add_argument("--redop", default=None, help="reduction op, nccl-tests' -o name: sum, prod, max, min, avg, "
                      "mulsum (default sum, or each --compare row's); NCCL's NVLS and PAT run only some")
    coll.add_argument("--dtype", default=None, help="data type, nccl-tests' -d name (float, half, bfloat16, int8, "
                      "...; default float, or each --compare row's)")


def _add_calibrate(sub, fmt) -> None:
    """``flowsolver calibrate LOG...``: fit efficiency and latency to nccl-tests logs."""
    cal = sub.add_parser("calibrate", help="fit link efficiency, a launch and a per-hop latency and the chunk "
                         "pipeline to nccl-tests logs",
                         epilog=_EXAMPLES, formatter_class=fmt)
    cal.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests output files")
    _add_topology(cal, default_nodes=2)
    _add_output(cal)
    cal.add_argument("--op", default=None, choices=OPS, help="the logs' collective (default: what they say)")
    cal.add_argument("--algorithm", default="auto", type=algorithm_setting,
                     help="the logs' algorithms (default: what each log's NCCL_ALGO allowed), " + ALGORITHM_HELP)
    cal.add_argument("--protocol", default="auto", type=protocol_setting,
                     help="the logs' protocols (default: what each log's NCCL_PROTO allowed), " + PROTOCOL_HELP)
    cal.add_argument("--save", metavar="FILE.json", default=None,
                     help="write the fitted calibration as JSON (collective / train --calibration read it)")
    cal.add_argument("--ranks", type=int, nargs="+", default=None, help="GPU ranks taking part (default all)")


def _add_study(sub, fmt) -> None:
    """``flowsolver study``: the network study (the main job)."""
    study = sub.add_parser("study", help="the 64-GPU network study against the article (the main job)",
                           epilog=_EXAMPLES, formatter_class=fmt)
    study.add_argument("--out", default="flowsolver-study.png",
                       help="PNG of the comparison ('none' for no figure; default %(default)s)")
    study.add_argument("--quick", action="store_true", help="smaller search and only 256 GPUs in the topology part")
    study.add_argument("--model", default="llama-3-70b", choices=list(MODELS), help="model preset (default %(default)s)")
    _add_output(study)


def _add_sweep(sub, fmt) -> None:
    """``flowsolver sweep CONFIG.toml``."""
    sw = sub.add_parser("sweep", help="run a sweep described by a TOML file", epilog=_SWEEP_HELP,
                        formatter_class=fmt)
    sw.add_argument("config", help="TOML file with a [grid] table (or [[scenario]] list) and optional [sweep]")
    sw.add_argument("--out", default=None, help="results file, .csv or .parquet (overrides [sweep] out)")
    sw.add_argument("--shard", default=None, metavar="I/N", help="run every N-th scenario from the I-th")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.add_argument("--no-resume", action="store_true", help="rerun scenarios already in the results file")
    _add_output(sw)


def _add_replay(sub, fmt) -> None:
    """``flowsolver replay TRACE``: a Chakra trace (or a SimAI workload file) on a cluster."""
    rp = sub.add_parser("replay", help="replay a Chakra execution trace (or a SimAI workload) on a cluster",
                        epilog=_EXAMPLES, formatter_class=fmt)
    rp.add_argument("trace", help="folder of NAME.<rank>.et[.gz] files (or the NAME prefix), or a SimAI workload .txt")
    _add_topology(rp)
    _add_output(rp)
    rp.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")
    rp.add_argument("--gpu", default=None, help="GPU type for compute given by FLOPs (default: the cluster's)")
    rp.add_argument("--compute-efficiency", type=float, default=DEFAULT_COMPUTE_EFFICIENCY,
                    help="fraction of the bf16 peak for compute given by FLOPs (default %(default)s, the flat "
                         "model's)")
    rp.add_argument("--chrome", metavar="PATH", default=None, help="write the per-rank timelines (Chrome-trace JSON)")
    rp.add_argument("--top", type=_count, default=5,
                    help="busiest links and longest path nodes shown (default %(default)s)")


def _add_upgrade(sub, fmt) -> None:
    """``flowsolver upgrade``: what to upgrade for one collective, under a budget."""
    up = sub.add_parser("upgrade", help="what to upgrade: each tier's exact gain, and a greedy plan under a budget",
                        epilog=_EXAMPLES, formatter_class=fmt)
    _add_topology(up, default_nodes=2)
    _add_output(up)
    up.add_argument("--op", default="all_reduce", choices=OPS, help="collective (default %(default)s)")
    up.add_argument("--size", default="1G", help="bytes, nccl-tests style (default %(default)s)")
    up.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")
    up.add_argument("--factor", type=float, default=2.0, help="capacity multiplier of a tier upgrade (default 2)")
    up.add_argument("--cost", default="uniform", choices=("uniform", "bandwidth", "bill"),
                    help="uniform: every tier upgrade costs 1; bandwidth: the GB/s it adds over all its links; "
                         "bill: the USD the network's bill grows by (parts catalogue; tiers inside servers are not "
                         "on it and are left out)")
    up.add_argument("--budget", type=float, default=1.0, help="total cost allowed (default %(default)s)")


_SWEEP_HELP = """config example (sweep.toml):
  [sweep]
  out = "results.csv"

  [grid]
  family = "rail_optimized"
  nodes = [2, 4, 8]
  link = ["ib_ndr", "ib_hdr", "roce_400g"]
  op = "all_reduce"
  size = ["1M", "1G"]             # bytes, or nccl-tests style sizes
"""


#: ``--compute-efficiency kernels`` (compute_efficiency=None: the kernel tables), told apart from "not given"
KERNELS = "kernels"


def compute_choice(args) -> dict:
    """``compute_efficiency=`` as a command's ``--compute-efficiency`` names it (``kernels``: None,
    the tables); {} where the option was not given (the function's own default)."""
    value = args.compute_efficiency
    return {} if value is None else dict(compute_efficiency=None if value == KERNELS else value)


def compute_model(text: str):
    """``--compute-efficiency``: ``auto``, ``kernels`` (the tables: ``None``) or a number."""
    if text in ("auto", KERNELS):
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto, kernels or a fraction such as 0.44, got {text!r}") from None


def _count(text: str) -> int:
    """A whole number >= 0 (``--top``: a negative one sliced all but that many off)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _int_or_auto(text: str):
    """``auto`` or a whole number, for the options training_step can choose itself."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None
