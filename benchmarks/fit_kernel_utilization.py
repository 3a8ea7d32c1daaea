"""The kernel-table compute model's one figure taken from training runs, ``kernel_utilization``
(the share of a step's compute time the kernels run at their benchmarked speed), fitted on
the training rows of the validation corpus (benchmarks/validation/) leave-one-source-out, as
the corpus README asks of any fitted parameter: each source's rows are predicted with the
value that minimises the median |error| of the *other* sources' rows (a grid of 0.01).

    python benchmarks/fit_kernel_utilization.py               # the corpus (~5.5 min on 2 cores)
    python benchmarks/fit_kernel_utilization.py --published   # and the six published runs of
                                                              # tests/training/test_training_published.py
                                                              # (their best value each; +5 min)

Every row is solved once with the kernel tables (``compute_efficiency=None``) and re-timed for
each value with ``StepResult.recompose`` (no new solve). Prints the in-sample median per value,
the value each fold takes, the held-out median |error| and bias by source, GPU, network,
framework and precision, and the FP8 / BF16 speed-up on the identical published pairs at the
shipped value (``DEFAULT_KERNEL_UTILIZATION``). Error convention: validate.py's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import validate as V  # noqa: E402
from flowsolver.training import DEFAULT_KERNEL_UTILIZATION  # noqa: E402

GRID = tuple(round(0.60 + 0.01 * k, 2) for k in range(31))


def corpus_errors() -> tuple[list[dict], dict]:
    """The compared training points (validate.py's, kernel tables) and their error at each
    value of :data:`GRID`: ``{row index: {value: error}}``."""
    rows = V.read_csv("training.csv")
    points = [pt for i, row in enumerate(rows) if (pt := V.run_training(row, i, "kernels")).get("status") == "ok"]
    errors = {}
    for pt in points:
        row = rows[pt["row"]]
        cluster, kw, _ = V.S.training_call(row, "kernels")
        result = V._STEP_CACHE[(cluster, V.S.servers_for(cluster, int(row["gpus"])), V._freeze(kw))]
        # validate.py's comparison: a publisher's TFLOP/s as tokens/s by its own FLOP count
        errors[pt["row"]] = {u: V.training_error(pt["compared_metric"], pt["compared_value"],
                                       result.recompose(kernel_utilization=u))
                             for u in GRID}
    return points, errors


def _median_abs(points, errors, u) -> float:
    return statistics.median(abs(errors[p["row"]][u]) for p in points)


def leave_one_source_out(points: list[dict], errors: dict) -> tuple[dict, dict]:
    """``({source: fitted value}, {row: held-out error})``: each source predicted with the value
    that minimises the median |error| of the other sources."""
    fitted, held = {}, {}
    for source in sorted({p["source"] for p in points}):
        others = [p for p in points if p["source"] != source]
        fitted[source] = min(GRID, key=lambda u: _median_abs(others, errors, u))
        held.update({p["row"]: errors[p["row"]][fitted[source]] for p in points if p["source"] == source})
    return fitted, held


def published_best() -> list[tuple]:
    """``(run, best kernel_utilization, error at the shipped value)`` for the six published runs
    of tests/training/test_training_published.py (bisection on ``recompose``)."""
    import topologies as tp
    from flowsolver import training_step
    from flowsolver.training import step_arguments
    from tests.training.test_training_published import ROWS, _published

    out = []
    for name, (nodes, kw, pub) in ROWS.items():
        r = training_step(tp.rail_optimized(nodes), **step_arguments(**kw, compute_efficiency=None))
        tokens, _ = _published(kw, pub)
        low, high = 0.3, 1.0
        for _ in range(30):                      # tokens/s rises with the utilization
            mid = (low + high) / 2
            low, high = (mid, high) if r.recompose(kernel_utilization=mid).tokens_per_gpu < tokens else (low, mid)
        out.append((name, (low + high) / 2, r.tokens_per_gpu / tokens - 1))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--published", action="store_true", help="also the six published runs' best values")
    args = parser.parse_args(argv)
    points, errors = corpus_errors()
    print(f"TRAINING ROWS: {len(points)}, kernel tables; in-sample median |err| by kernel_utilization:")
    print("  " + ", ".join(f"{u:.2f} {_median_abs(points, errors, u):.1%}" for u in GRID))
    fitted, held = leave_one_source_out(points, errors)
    print("  value fitted without each source: " + ", ".join(f"{s} {u:.2f}" for s, u in fitted.items()))
    all_held = list(held.values())
    print(f"HELD OUT: median |err| {statistics.median(abs(e) for e in all_held):.1%}, bias "
          f"{statistics.median(all_held):+.1%}, within 10 %: {sum(abs(e) <= 0.1 for e in all_held) / len(all_held):.0%}, "
          f"within 25 %: {sum(abs(e) <= 0.25 for e in all_held) / len(all_held):.0%}"
          f"  (n = {len(all_held)})")
    for name, key in V.GROUPINGS["training"]:
        groups = defaultdict(list)
        for p in points:
            groups[key(p)].append(held[p["row"]])
        print(f"  by {name}:")
        for g in sorted(groups, key=str):
            e = groups[g]
            print(f"    {str(g):40s} {len(e):4d}   median |err| {statistics.median(abs(x) for x in e):6.1%}"
                  f"   bias {statistics.median(e):+6.1%}")
    u = DEFAULT_KERNEL_UTILIZATION
    print(f"SHIPPED kernel_utilization {u}: in-sample median |err| {_median_abs(points, errors, u):.1%}")
    if args.published:
        print("PUBLISHED RUNS (tests/training/test_training_published.py): best value, error at the shipped one")
        for name, best, err in published_best():
            print(f"    {name:24s} best {best:.3f}   tokens/s per GPU {err:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
