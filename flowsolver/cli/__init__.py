"""The ``flowsolver`` command (argparse), a thin layer over the Python API.

Sub-commands: ``topology`` (describe a cluster, export node-link JSON), ``collective`` (an
nccl-tests-style table over message sizes; ``--compare LOG`` puts a log's times beside
the model's), ``calibrate LOG...`` (fit link efficiency and NCCL's latency scale), ``train``
(one training step and its breakdown), ``study`` (the network study, the main job: ``make
run``), ``sweep CONFIG.toml``, ``replay TRACE`` (a Chakra trace or SimAI workload on a
cluster), ``upgrade`` (what to upgrade for a collective, under a budget) and ``goodput``
(useful training time over failure trajectories; ``--jobs``: placements of neighbouring jobs) and ``serve``
(a request stream served, co-located or disaggregated: TTFT, TPOT, the network's share). With no
sub-command it describes the built-in default cluster (8 DGX H100
servers on a rail-optimised InfiniBand NDR fabric). Bad input (an output folder that does
not exist included, checked before any computation) exits with status 2 and a one-line
reason on stderr; a sweep in which some scenarios failed finishes the rest, then exits
with status 1 and a one-line summary. ``--json`` output is strict JSON (``null``, never
``NaN``).
"""

from __future__ import annotations

import os
import sys
import warnings

import topologies as tp

from . import _commands, _fleet, _nccl_commands, _plan, _serving
from ._arguments import CliError, build_graph, in_cli_words, parse_size
from ._output import emit, to_json, writable
from ._parser import build_parser

__all__ = ["main", "parse_size"]


def _catalogue(args) -> None:
    """``topology --catalogue``: every link technology and server model, with what it is."""
    links = [dict(kind="link", name=t.name, gbit_s=t.bandwidth * 8 / 1e9, family=t.family,
                  transport=t.transport or "", detail=t.source) for t in map(tp.get_link, tp.link_names())]
    servers = []
    for name in tp.server_names():
        m = tp.get_server(name)
        nic = f"{m.nics} x " + (f"{getattr(m.nic, 'name', m.nic)} (the slower of it and the --link)" if m.nic else
                                "the --link") + (f", {m.nic_ports} ports each" if m.nic_ports > 1 else "") \
            if m.nics else "none"
        servers.append(dict(kind="server", name=name, gbit_s=None, family=m.gpu, transport="",
                            detail=f"{m.gpus} GPUs, NICs {nic}, GPU links {m.nvlink or 'PCIe'}"))
    lines = ["# link technologies (--link): one direction's raw rate", f"{'name':<18s} {'Gb/s':>7s} "
             f"{'family':<11s} {'transport':<13s} what it is"]
    lines += [f"{r['name']:<18s} {r['gbit_s']:7.0f} {r['family']:<11s} {r['transport'] or '-':<13s} {r['detail']}"
              for r in links]
    lines += ["", "# server models (--server)", f"{'name':<18s} {'GPU':<14s} what it has"]
    lines += [f"{r['name']:<18s} {r['family']:<14s} {r['detail']}" for r in servers]
    emit(links + servers, args, "\n".join(lines))


def _topology(args) -> None:
    if args.catalogue:
        return _catalogue(args)
    args.export = writable("--export", args.export)
    graph = build_graph(args)
    desc = tp.describe(graph)
    if args.export:
        tp.save(graph, args.export)
    if args.json:
        print(to_json(desc))
    elif args.csv:
        emit([{k: v for k, v in desc.items() if not isinstance(v, (dict, list))}], args, "")
    else:
        print(tp.format_description(desc))
        if args.export:
            print(f"graph written to {args.export}")


_COMMANDS = {"study": _commands.study, "collective": _nccl_commands.collective_table,
             "calibrate": _nccl_commands.calibrate_logs,
             "train": _commands.train, "sweep": _commands.sweep_file, "topology": _topology,
             "replay": _commands.replay, "upgrade": _commands.upgrade, "design": _fleet.design,
             "goodput": _fleet.goodput, "serve": _serving.serve, "plan": _plan.plan}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 a sweep with failed scenarios or a
    closed output pipe, 2 bad input).

    >>> main(["topology", "--family", "torus", "--dims", "2", "2", "--json"]) == 0  # doctest: +ELLIPSIS
    {...
    True
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:          # --help (0) or a usage error (2, message already printed)
        return int(stop.code or 0)
    try:
        with warnings.catch_warnings():
            # --calibration says this in its own words (newuser25 #6: both printed, one as a Python line)
            warnings.filterwarnings("ignore", message="model: its fitted efficiencies", category=UserWarning)
            # collective says this once in its own words before its sizes
            warnings.filterwarnings("ignore", message="nccl_version .*: newer than", category=UserWarning)
            if args.command is None:
                print(tp.format_description(tp.describe(tp.default_cluster())))
            else:
                _COMMANDS[args.command](args)
        return 0
    except ValueError as err:           # TopologyError and RoutingError are ValueErrors
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        if not isinstance(err, CliError):
            message = in_cli_words(message, parser, args.command)
        print(f"flowsolver: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:             # the reader went away (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:              # a file that could not be read or written after all
        print(f"flowsolver: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except _commands.Failed as err:
        print(f"flowsolver: {err}", file=sys.stderr)
        return 1

