"""``flowsolver plan``: the fastest layouts of a model on a cluster (:func:`flowsolver.plan`),
ranked, with the search's pruning counts and the Pareto front of throughput against memory."""

from __future__ import annotations

import topologies as tp

from ..training import MODELS
from ._arguments import (CliError, _add_output, _add_topology, build_graph, cluster_label, compute_choice,
                         compute_model, server_of)
from ._model_file import model_of
from ._output import emit, to_json

__all__ = ["add_plan", "plan"]

_HELP = """examples:
  flowsolver plan --model llama-3-70b --gpus 1024 --global-batch 512
  flowsolver plan --model llama-3-405b --gpus 2048 --global-batch 2048 --tp 8 --max-solves 20 --csv
  flowsolver plan --model llama-3-8b --nodes 2 --global-batch 32 --zero 1 --recompute selective --front
  flowsolver plan --model llama-3-8b --gpus 1024 --job-gpus 256 --placement packed spread --global-batch 256
"""


def add_plan(sub, fmt) -> None:
    """``flowsolver plan``: the arguments."""
    p = sub.add_parser("plan", help="the fastest memory-feasible layouts (TP, CP, PP, VP, DP, EP, micro-batch, "
                                    "recompute, ZeRO, placement) of a model on a cluster", epilog=_HELP,
                       formatter_class=fmt)
    _add_topology(p)
    _add_output(p)
    p.add_argument("--gpus", type=int, default=None,
                   help="GPUs of the cluster (rail_optimized: sets --nodes to GPUs / the server's GPUs)")
    p.add_argument("--model", default="llama-3-70b", metavar="PRESET|FILE",
                   help=f"model preset ({', '.join(MODELS)}; default %(default)s) or a .json / .toml shape file")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default: the model's)")
    p.add_argument("--precision", default="bf16", choices=("bf16", "fp8"), help="GEMM precision (default %(default)s)")
    p.add_argument("--top", type=int, default=20, help="layouts to list (default %(default)s)")
    p.add_argument("--headroom", type=float, default=0.0,
                   help="fraction of the GPU's memory a layout must leave free (default %(default)s)")
    p.add_argument("--max-solves", type=int, default=None,
                   help="most profiles solved on the network (default: until the top are proven)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="stop once no untimed layout can beat the last row by more than this fraction "
                        "(default 0: the exact top)")
    p.add_argument("--max-tp", type=int, default=None, help="largest TP searched (default: the GPUs of a server)")
    for name in ("tp", "cp", "pp", "vp", "ep", "micro-batch", "zero"):
        p.add_argument(f"--{name}", type=int, nargs="+", default=None, help=f"{name} values to search")
    p.add_argument("--recompute", nargs="+", default=None,
                   choices=("none", "selective", "full", "save_qkv_proj", "selective_op"),
                   help="recompute modes to search (default none, selective, full; save_qkv_proj is MaxText's "
                        "remat policy, selective_op torchtitan's per-op checkpointing)")
    p.add_argument("--sequence-parallel", default="both", choices=("on", "off", "both"),
                   help="sequence parallelism (default %(default)s)")
    p.add_argument("--orders", nargs="+", default=None,
                   help="rank orders to search, fastest-varying first (default tp-cp-dp-pp tp-cp-pp-dp)")
    p.add_argument("--compute-efficiency", type=compute_model, default=None,
                   help="auto (the default), kernels (the kernel tables) or the flat model's fraction of the "
                        "GEMMs' peak")
    p.add_argument("--gpu", default=None, help="GPU type (default: the cluster's own)")
    p.add_argument("--front", action="store_true", help="list the Pareto front of throughput against memory")
    p.add_argument("--job-gpus", type=int, default=None,
                   help="GPUs of the job, whole servers (default: the whole cluster)")
    p.add_argument("--placement", nargs="+", default=None,
                   choices=("packed", "rail_aligned", "spread", "rail_unaligned"),
                   help="placement policies to search (default: the cluster's GPUs in rank order)")


def plan(args) -> None:
    """Run ``flowsolver plan``."""
    from ..planning import plan as run_plan

    if args.gpus is not None:
        if args.family != "rail_optimized" or args.cluster is not None:
            raise ValueError("--gpus sizes a rail_optimized cluster; give the family's own size arguments instead")
        if "--nodes" in (getattr(args, "sizes_given", None) or ()):
            raise ValueError("--gpus and --nodes both size the cluster: give one")
        server = tp.get_server(server_of(args.server) if args.server is not None else "dgx_h100")
        if args.gpus < 1 or args.gpus % server.gpus:
            raise ValueError(f"--gpus must be a positive multiple of the server's {server.gpus} GPUs, got {args.gpus}")
        args.nodes = args.gpus // server.gpus
    graph = build_graph(args)
    sp = dict(on=True, off=False, both=None)[args.sequence_parallel]
    searched = dict(tp=args.tp, cp=args.cp, pp=args.pp, vp=args.vp, ep=args.ep, micro_batch=args.micro_batch,
                    zero=args.zero, recompute=args.recompute, orders=args.orders, sequence_parallel=sp)
    extra = compute_choice(args)
    try:
        result = run_plan(graph, model=model_of(args.model), global_batch=args.global_batch, seq_len=args.seq_len,
                          precision=args.precision, top=args.top, headroom=args.headroom, max_solves=args.max_solves,
                          tolerance=args.tolerance, max_tp=args.max_tp, gpu=args.gpu, gpus=args.job_gpus,
                          placement=args.placement, **{k: v for k, v in searched.items() if v is not None}, **extra)
    except ValueError as err:       # the API's gpus= is --job-gpus here (--gpus sizes the cluster)
        text = str(err)
        if args.job_gpus is not None and not isinstance(err, CliError) and text.startswith(("gpus (", "gpus must")):
            raise CliError("--job-gpus" + text[len("gpus"):]) from None
        raise
    rows = [r.as_dict() for r in (result.front if args.front else result.rows)]
    if args.json:
        print(to_json(dict(model=result.model, gpus=result.gpus, cluster=cluster_label(args, graph),
                           total=result.total, feasible=result.feasible, pruned=result.pruned,
                           proven=result.proven, next_bound=result.next_bound,
                           profiles_solved=result.profiles_solved, kinds_solved=result.kinds_solved,
                           seconds=result.seconds, rows=rows)))
    else:
        text = result.summary().replace("\n", f" ({cluster_label(args, graph)})\n", 1) + "\n" + \
            result.table(result.front if args.front else None)
        emit(rows, args, text)
