"""The ``flowsolver`` command (argparse), a thin layer over the Python API.

Run with no sub-command, it describes the built-in default cluster (8 DGX H100 servers on
a rail-optimised InfiniBand NDR fabric); ``flowsolver study`` is the main job (``make run``).
"""

from __future__ import annotations

import argparse
import json
import sys

import topologies as tp

_EXAMPLES = """examples:
  flowsolver                                        describe the default cluster
  flowsolver study                                  the network study (make run), writes flowsolver-study.png
  flowsolver study --quick --out none               a shorter study, no figure
  flowsolver topology --family fat_tree --k 16      a 1024-GPU fat-tree
  flowsolver topology --family rail_optimized --nodes 128 --link ib_hdr --json
  flowsolver topology --family dragonfly --p 4 --a 8 --h 4 --export df.json
  flowsolver topology --family torus --dims 4 4 4
"""

_FAMILIES = ("rail_optimized", "fat_tree", "leaf_spine", "dragonfly", "torus")


def _build(args):
    server = args.server
    if args.family == "rail_optimized":
        return tp.rail_optimized(args.nodes, server=server or "dgx_h100", link=args.link,
                                 oversubscription=args.oversubscription)
    if args.family == "fat_tree":
        return tp.fat_tree(args.k, link=args.link, server=server)
    if args.family == "leaf_spine":
        return tp.leaf_spine(args.leaves, args.spines, args.hosts_per_leaf, link=args.link,
                             oversubscription=args.oversubscription, server=server)
    if args.family == "dragonfly":
        return tp.dragonfly(args.p, args.a, args.h, g=args.g, link_local=args.link,
                            link_global=args.link, server=server)
    return tp.torus(args.dims, link=args.link, wrap=not args.mesh, server=server)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowsolver", description="What your GPU cluster's network costs you.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    topo = sub.add_parser("topology", help="describe a cluster, export node-link JSON",
                          epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    topo.add_argument("--family", choices=_FAMILIES, default="rail_optimized")
    topo.add_argument("--nodes", type=int, default=8, help="servers (rail_optimized)")
    topo.add_argument("--k", type=int, default=8, help="radix (fat_tree)")
    topo.add_argument("--leaves", type=int, default=4)
    topo.add_argument("--spines", type=int, default=2)
    topo.add_argument("--hosts-per-leaf", type=int, default=8)
    topo.add_argument("--p", type=int, default=2)
    topo.add_argument("--a", type=int, default=4)
    topo.add_argument("--h", type=int, default=2)
    topo.add_argument("--g", type=int, default=None)
    topo.add_argument("--dims", type=int, nargs="+", default=[4, 4, 4])
    topo.add_argument("--mesh", action="store_true", help="torus without wrap-around")
    topo.add_argument("--server", default=None,
                      help=f"server model: {', '.join(tp.server_names())}")
    topo.add_argument("--link", default="ib_ndr", help=f"link: {', '.join(tp.link_names())}")
    topo.add_argument("--oversubscription", type=float, default=1.0)
    topo.add_argument("--json", action="store_true", help="print the description as JSON")
    topo.add_argument("--export", metavar="PATH", help="write the graph as node-link JSON")
    study = sub.add_parser("study", help="the 64-GPU network study against the article (the main job)",
                           epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    study.add_argument("--out", default="flowsolver-study.png",
                       help="PNG of the comparison ('none' for no figure; default %(default)s)")
    study.add_argument("--quick", action="store_true",
                       help="smaller search and only 256 GPUs in the topology comparison")
    study.add_argument("--model", default="llama-3-70b", help="model preset (default %(default)s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input).

    >>> main(["topology", "--family", "torus", "--dims", "2", "2", "--json"]) == 0  # doctest: +ELLIPSIS
    {...
    True
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            graph = tp.default_cluster()
            print(tp.format_description(tp.describe(graph)))
            return 0
        if args.command == "study":
            from .study import run

            run(out=None if args.out.lower() == "none" else args.out, quick=args.quick, model=args.model)
            return 0
        graph = _build(args)
        desc = tp.describe(graph)
        if args.export:
            tp.save(graph, args.export)
        if args.json:
            print(json.dumps(desc, indent=2, default=str))
        else:
            print(tp.format_description(desc))
            if args.export:
                print(f"graph written to {args.export}")
        return 0
    except ValueError as err:
        print(f"flowsolver: error: {err}", file=sys.stderr)
        return 2
