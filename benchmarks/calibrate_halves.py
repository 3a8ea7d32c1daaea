"""A user's own log, calibrated on half of its sizes, predicting the other half (issue 28's
target: the lower half predicts the upper within 5 %, the upper half the lower within 10 %).

    python benchmarks/calibrate_halves.py                 # every curve of >= 6 sizes (about 10 minutes)
    python benchmarks/calibrate_halves.py --max 6         # at most 6 curves of each kind
    python benchmarks/calibrate_halves.py --logs-only     # the ../shared/data logs only (a minute)
    python benchmarks/calibrate_halves.py --max-ranks 2048  # also curves of up to 2,048 ranks (default 1,024)

Two kinds of curve: every nccl-tests log of ``../shared/data/nccl-tests`` that
``benchmarks/nccl_logs.py`` models (its cluster, ranks and algorithm; read in place, not
shipped: docs/guide/data.md), and every nccl-tests curve of the validation corpus
(``benchmarks/validation/collectives.csv``, one curve per node count and environment) on the
cluster ``benchmarks/validate.py`` builds for it, written back as an nccl-tests log. Each is
split at its median size; ``flowsolver.calibrate`` is fitted on one half (NCCL's choice, or
the algorithm the run forced; a curve whose setup names candidate algorithms is calibrated with
each and keeps the one that fits its half best, as a user trying ``NCCL_ALGO`` would) and the
other half is predicted with the calibration. A quantity a half does not constrain stays at the
library's value, so where a half cannot tell the other's regime the prediction is the
uncalibrated model's (printed beside it: ``uncal``).

Printed per curve: the median and worst |error| of each direction, the uncalibrated median of
the predicted half, and which quantities the half constrained; then per kind and overall the
median over curves of the per-curve medians, the worst, and how many curves meet the targets.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import topologies as tp  # noqa: E402
from flowsolver import calibrate, collective, nccl_tests  # noqa: E402

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
#: short names of the fitted quantities in the per-curve table
SHORT = {"latency": "lat", "net_latency": "net", "bandwidth": "bw", "ll_bandwidth": "ll", "floor_simple": "fS", "floor_nvls": "fN",
         "fill_ring": "ring", "fill_tree": "tree", "fill_nvls": "nvls"}
TARGET_UP, TARGET_DOWN = 0.05, 0.10


def _log(rows, ranks: int, per_host: int, op: str) -> str:
    """An nccl-tests log (device list and out-of-place rows) of ``(size, time s)`` rows of ``op``,
    its ranks on hosts of ``per_host`` GPUs each (calibrate checks the hosts against the servers);
    the count is a rank's elements where nccl-tests' size is every rank's (all-gather,
    reduce-scatter, all-to-all: src/*.cu), as the reader checks."""
    per = ranks if op in ("all_gather", "reduce_scatter", "all_to_all") else 1
    devices = "".join(f"#  Rank {r:3d} Group  0 Pid {r} on host{r // per_host} device {r % per_host} [0x0f] GPU\n"
                      for r in range(ranks))
    return devices + HEADER + "".join(f"{int(s):12d} {int(s) // 4 // per:12d} float sum -1 {t * 1e6:10.2f} 0 0 0\n"
                                      for s, t in rows)


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def log_curves(min_points: int) -> list[dict]:
    """The shared logs of ``nccl_logs.CASES`` with at least ``min_points`` sizes."""
    import nccl_logs as N

    out = []
    if not N.LOGS.is_dir():
        return out
    for stem in sorted(N.CASES):
        build, ranks, algorithm, note = N.CASES[stem]
        path = N.LOGS / f"{stem}.txt"
        df = nccl_tests.read(path)
        rows = df[(df["placement"] == "out-of-place") & (df["time"] > 0)].sort_values("size")
        if rows["size"].nunique() < min_points:
            continue
        if ranks is None:           # a log whose table does not say its rank count: its sidecar's
            ranks = list(range(json.loads(path.with_suffix(".json").read_text())["ranks"]))

        def frame(part, df=df):
            part = part.copy()
            part.attrs.update(df.attrs)
            return part

        out.append(dict(name=stem, kind="log", graph=build(), ranks=ranks, op=df.attrs["op"], algorithms=(algorithm,),
                        sizes=[float(s) for s in rows["size"]], times=[float(t) * 1e-6 for t in rows["time"]],
                        table=lambda idx, rows=rows, frame=frame: frame(rows.iloc[idx]), note=note))
    return out


def corpus_curves(min_points: int, cache: str | None = None) -> list[dict]:
    """The corpus's nccl-tests curves (per node count and environment) with at least
    ``min_points`` modelled, comparable sizes (``cache``: a file keeping the modelled points
    between runs)."""
    import pickle

    import validate as V
    from validate import S

    if cache and Path(cache).is_file():
        grouped = pickle.loads(Path(cache).read_bytes())
    else:
        grouped = defaultdict(list)
        for pt in V.collective_points(V.read_csv("collectives.csv")):
            pt = V.run_collective(pt)
            if pt.get("status") == "ok":
                grouped[pt["curve"], pt["nodes"], pt["gpus_per_node"], pt["env"]].append(pt)
        if cache:
            Path(cache).write_bytes(pickle.dumps(grouped))
    names = defaultdict(int)
    for curve, *_ in grouped:
        names[curve] += 1
    out = []
    for (curve, nodes, gpn, env), points in sorted(grouped.items()):
        points = sorted(points, key=lambda p: p["size"])
        if len({p["size"] for p in points}) < min_points:
            continue
        setup = S.CURVES[curve]
        graph, ranks = S.curve_placement(setup, nodes, gpn)
        algorithm = S.ROW_ALGORITHM.get((curve, env), setup.algorithm)
        algorithms = setup.candidates if algorithm == "auto" and setup.candidates else (algorithm,)
        n = len(ranks) if ranks is not None else len(tp.gpus(graph))
        sizes, times = [float(p["size"]) for p in points], [p["measured"] for p in points]
        name = curve if names[curve] == 1 else f"{curve} [{nodes}x{gpn}{' ' + env[:12] if env else ''}]"

        def table(idx, sizes=sizes, times=times, n=n, gpn=gpn, op=S.OPS[points[0]["op"]]):
            return _log([(sizes[i], times[i]) for i in idx], n, gpn, op)

        # how the run was timed: nccl-tests -g N (one thread, N GPUs), one torch.distributed call from idle
        timing = dict(gpus_per_thread=S.gpus_per_thread(env), host_overhead=S.host_overhead(env))
        # calibrate models a send / receive log as the ring shift nccl-tests runs, over the ranks in
        # their order (rank i to i + 1); the curve's network pair first is for collective()'s pair
        log_ranks = sorted(ranks) if ranks is not None and setup.network_pair_first else ranks
        out.append(dict(name=name, kind="corpus", graph=graph, ranks=ranks, op=S.OPS[points[0]["op"]],
                        algorithms=algorithms, sizes=sizes, times=times, table=table, note="", timing=timing,
                        log_ranks=log_ranks))
    return out


def predict(curve: dict, fit: list[int], test: list[int]) -> dict:
    """Calibrate on the rows ``fit`` of ``curve``, predict the rows ``test``: their errors
    calibrated and uncalibrated and the quantities the fit constrained."""
    graph, ranks, op, timing = curve["graph"], curve["ranks"], curve["op"], curve.get("timing", {})
    best = None
    for algorithm in curve["algorithms"]:
        cal = calibrate(graph, [curve["table"](fit)], ranks=curve.get("log_ranks", ranks), op=op,
                        algorithm=algorithm, **timing)
        spread = statistics.median(abs(e) for e in cal.residuals["error"])
        if best is None or spread < best[0]:
            best = (spread, algorithm, cal)
    _, algorithm, cal = best
    errors, bare = [], []
    for i in test:
        size, measured = curve["sizes"][i], curve["times"][i]
        errors.append(collective(graph, op, size, ranks=ranks, algorithm=algorithm, model=cal, **timing).time
                      / measured - 1)
        bare.append(collective(graph, op, size, ranks=ranks, algorithm=algorithm, **timing).time / measured - 1)
    return dict(median=statistics.median(abs(e) for e in errors), worst=max(abs(e) for e in errors),
                bare=statistics.median(abs(e) for e in bare), told=[p.name for p in cal.parameters if p.constrained],
                fit_error=best[0])


def halves(curve: dict) -> tuple[dict, dict]:
    """(lower half -> upper half, upper half -> lower half) of ``curve``, split at its median size."""
    n = len(curve["sizes"])
    half = n // 2
    lower, upper = list(range(half)), list(range(half, n))
    return predict(curve, lower, upper), predict(curve, upper, lower)


def _summary(label: str, results: list[tuple]) -> None:
    if not results:
        return
    up = [r[1]["median"] for r in results]
    down = [r[2]["median"] for r in results]
    worst_up = max(results, key=lambda r: r[1]["worst"])
    worst_down = max(results, key=lambda r: r[2]["worst"])
    print(f"{label} ({len(results)} curves):\n"
          f"  lower half -> upper: median of curve medians {statistics.median(up):.1%} (target {TARGET_UP:.0%}); "
          f"{sum(u <= TARGET_UP for u in up)}/{len(up)} curves within; worst row {worst_up[1]['worst']:.1%} "
          f"({worst_up[0]['name']}); uncalibrated {statistics.median(r[1]['bare'] for r in results):.1%}\n"
          f"  upper half -> lower: median of curve medians {statistics.median(down):.1%} (target {TARGET_DOWN:.0%}); "
          f"{sum(d <= TARGET_DOWN for d in down)}/{len(down)} curves within; worst row {worst_down[2]['worst']:.1%} "
          f"({worst_down[0]['name']}); uncalibrated {statistics.median(r[2]['bare'] for r in results):.1%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=None, help="at most this many curves of each kind")
    ap.add_argument("--min-points", type=int, default=6, help="curves with at least this many sizes (3 a half)")
    ap.add_argument("--logs-only", action="store_true", help="the ../shared/data logs only, not the corpus")
    ap.add_argument("--only", default=None, help="curves whose name contains this")
    ap.add_argument("--max-ranks", type=int, default=1024,
                    help="leave out curves of more ranks (a fit solves its curve dozens of times, and each result "
                         "keeps its steps' routing: CoreWeave's 1,440 ranks held ~20 GB after a few)")
    ap.add_argument("--points-cache", default=None, metavar="FILE",
                    help="keep the corpus's modelled points in FILE between runs (delete it after a model change)")
    args = ap.parse_args(argv)
    kinds = [log_curves(args.min_points)]
    if not kinds[0]:
        print("note: ../shared/data/nccl-tests is absent (optional data, not shipped: docs/guide/data.md)")
    if not args.logs_only:
        kinds.append(corpus_curves(args.min_points, args.points_cache))
    if args.only:
        kinds = [[c for c in curves if args.only in c["name"]] for curves in kinds]
    print(f"{'curve':58s} {'sizes':>5s} {'split at':>9s} | {'low->up':>7s} {'worst':>7s} {'uncal':>7s} "
          f"{'constrained':18s} | {'up->low':>7s} {'worst':>7s} {'uncal':>7s} constrained")
    results = []
    for curves in kinds:
        for curve in curves[: args.max] if args.max else curves:
            n = len(curve["ranks"]) if curve["ranks"] is not None else len(tp.gpus(curve["graph"]))
            if n > args.max_ranks:
                print(f"{curve['name'][:58]:58s} left out: {n} ranks (over --max-ranks {args.max_ranks})")
                continue
            try:
                up, down = halves(curve)
            except ValueError as exc:
                print(f"{curve['name'][:58]:58s} refused: {exc}")
                continue
            results.append((curve, up, down))
            split = _size(curve["sizes"][len(curve["sizes"]) // 2])
            print(f"{curve['name'][:58]:58s} {len(curve['sizes']):5d} {split:>9s} | {up['median']:7.1%} "
                  f"{up['worst']:7.1%} {up['bare']:7.1%} {','.join(SHORT.get(t, t) for t in up['told']):18s} | "
                  f"{down['median']:7.1%} {down['worst']:7.1%} {down['bare']:7.1%} "
                  f"{','.join(SHORT.get(t, t) for t in down['told'])}", flush=True)
    print()
    _summary("shared logs", [r for r in results if r[0]["kind"] == "log"])
    _summary("validation corpus", [r for r in results if r[0]["kind"] == "corpus"])
    _summary("all", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
