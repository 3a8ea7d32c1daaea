"""A user's own log, calibrated on part of its sizes, predicting the rest (issue 28's target:
the lower half predicts the upper within 5 %, the upper half the lower within 10 %).

    python benchmarks/calibrate_halves.py              # every corpus curve of >= 8 sizes (minutes)
    python benchmarks/calibrate_halves.py --max 6      # at most 6 curves

Each nccl-tests curve of the validation corpus (benchmarks/validation/collectives.csv) on the
cluster ``benchmarks/validate.py`` builds for it is written back as an nccl-tests log, split at
its median size, and ``flowsolver.calibrate`` is fitted on one half (NCCL's choice of algorithm
as the curve ran it); the other half is predicted with the calibration. Printed per curve and
overall: the median |error| of each direction.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import validate as V  # noqa: E402
from validate import S  # noqa: E402

import topologies as tp  # noqa: E402
from flowsolver import calibrate, collective  # noqa: E402

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"


def _log(rows, ranks: int) -> str:
    devices = "".join(f"#  Rank {r:3d} Group  0 Pid {r} on host{r} device 0 [0x0f] GPU\n" for r in range(ranks))
    return devices + HEADER + "".join(f"{int(s):12d} {int(s) // 4:12d} float sum -1 {t * 1e6:10.2f} 0 0 0\n"
                                      for s, t in rows)


def curves(min_points: int) -> dict:
    """curve -> its ``ok`` points (measured, size, setup), by size."""
    out = defaultdict(list)
    for pt in V.collective_points(V.read_csv("collectives.csv")):
        pt = V.run_collective(pt)
        if pt.get("status") == "ok" and pt["op"] in ("all_reduce", "all_gather", "reduce_scatter"):
            out[pt["curve"]].append(pt)
    return {c: sorted(v, key=lambda p: p["size"]) for c, v in out.items() if len({p["size"] for p in v}) >= min_points}


def halves(points: list[dict]) -> tuple[float, float]:
    """(median |error| of the upper half calibrated on the lower, and of the lower on the upper)."""
    first = points[0]
    setup = S.CURVES[first["curve"]]
    graph, ranks = S.curve_placement(setup, first["nodes"], first["gpus_per_node"])
    op = S.OPS[first["op"]]
    algorithm = S.ROW_ALGORITHM.get((first["curve"], first["env"]), setup.algorithm)
    n = len(ranks) if ranks is not None else len(tp.gpus(graph))
    rows = [(p["size"], p["measured"]) for p in points]
    half = len(rows) // 2
    out = []
    for fit_rows, test_rows in ((rows[:half], rows[half:]), (rows[half:], rows[:half])):
        cal = calibrate(graph, [_log(fit_rows, n)], ranks=ranks, op=op, algorithm=algorithm)
        errs = [collective(graph, op, float(s), ranks=ranks, algorithm=algorithm, model=cal).time / t - 1
                for s, t in test_rows]
        out.append(statistics.median(abs(e) for e in errs))
    return tuple(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=None, help="at most this many curves")
    ap.add_argument("--min-points", type=int, default=8, help="curves with at least this many sizes")
    args = ap.parse_args(argv)
    found = curves(args.min_points)
    names = sorted(found)[: args.max] if args.max else sorted(found)
    up, down = [], []
    print(f"{'curve':48s} {'sizes':>5s} {'low->up':>8s} {'up->low':>8s}")
    for name in names:
        try:
            a, b = halves(found[name])
        except ValueError as exc:
            print(f"{name:48s} refused: {exc}")
            continue
        up.append(a)
        down.append(b)
        print(f"{name:48s} {len(found[name]):5d} {a:8.1%} {b:8.1%}")
    if up:
        print(f"\nmedian over {len(up)} curves: lower half -> upper {statistics.median(up):.1%} (target 5 %), "
              f"upper half -> lower {statistics.median(down):.1%} (target 10 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
