"""Fit the collective pipeline's step floors and fills (flowsolver.collectives._pipeline) on
the validation corpus, and report their held-out error by leave-one-source-out.

    python benchmarks/fit_pipeline.py                      # models the corpus (minutes), fits, reports
    python benchmarks/fit_pipeline.py --records r.json     # keeps what the corpus run captured ...
    python benchmarks/fit_pipeline.py --records r.json     # ... and refits from it in seconds

Each corpus point is modelled once as ``benchmarks/validate.py`` models it; what NCCL's pick
hands the pipeline (its latency, its all-channel bandwidth, the channels, ranks and nodes) is
captured, so a trial of the parameters is arithmetic. NCCL's choice is made by its estimate,
which the parameters do not change. The fit minimises a soft-L1 loss of ``log(model /
measured)`` over the points NCCL runs with LL128 or Simple (LL has no fitted constant), each
source weighted by ``1 / sqrt(its points)`` so the largest sources do not set the constants
alone; a parameter no point is sensitive to is not fitted (0: no floor, no fill). Printed: the in-sample parameters (the shipped :data:`PIPELINE`), each parameter's
range over the folds, and the held-out |error| medians (fit on every source but one, predict
that one) overall, by size band, by algorithm / protocol and by source, beside NCCL's own
estimate (the tuner's ``latency + size / bandwidth``, the model before the pipeline).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pipeline_records import NAMES, SCALE, estimate, fit, predict, record  # noqa: E402


def capture(quick=False) -> list[dict]:
    """Model the corpus's collective points; one record per ``ok`` point (``pipe``: the
    pipeline's inputs for NCCL's pick, None where the time does not come from it)."""
    import validate as V            # the corpus run, not needed to refit from records

    points = V.collective_points(V.read_csv("collectives.csv"))
    if quick:
        points = V._quick_collectives(points)
    return [record(pt, pt.get("pipe")) for pt in map(V.run_collective, points) if pt.get("status") == "ok"]


def _group(held, key):
    groups = defaultdict(list)
    for rec, err, base in held:
        groups[key(rec)].append((err, base))
    return sorted(groups.items(), key=lambda kv: str(kv[0]))


def report(records: list[dict]) -> dict:
    whole = fit(records)
    folds, held = {}, []
    for source in sorted({r["source"] for r in records}):
        params = fit([r for r in records if r["source"] != source])
        folds[source] = params
        held += [(r, predict(r, params) / r["measured"] - 1, estimate(r) / r["measured"] - 1)
                 for r in records if r["source"] == source]
    print("in-sample fit (the shipped PIPELINE):")
    for name, s in zip(NAMES, SCALE):
        values = [getattr(p, name) / s for p in folds.values()]
        unit = "us" if s < 1 else "steps"
        print(f"  {name:13s} {getattr(whole, name) / s:8.2f} {unit:5s}  over the folds {min(values):.2f} .. {max(values):.2f}")
    med = lambda xs: statistics.median(abs(x) for x in xs)  # noqa: E731
    print(f"\nheld out (leave one source out), {len(held)} points: median |error| {med(e for _, e, _ in held):.3f} "
          f"(NCCL's estimate: {med(b for _, _, b in held):.3f})")
    for title, key in (("size band", lambda r: r["band"]),
                       ("algorithm / protocol", lambda r: "other" if r["pipe"] is None
                        else f"{r['pipe']['algorithm']}/{r['pipe']['protocol']}"),
                       ("source", lambda r: r["source"])):
        print(f"  by {title}:")
        for k, v in _group(held, key):
            print(f"    {k:38s} n={len(v):4d}  held out {med(e for e, _ in v):.3f}  "
                  f"(bias {statistics.median(e for e, _ in v):+.3f})  estimate {med(b for _, b in v):.3f}")
    return dict(params=asdict(whole), folds={k: asdict(v) for k, v in folds.items()},
                held_out_median=med(e for _, e, _ in held), estimate_median=med(b for _, _, b in held))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, help="JSON file of captured points: read if it exists, else written")
    ap.add_argument("--quick", action="store_true", help="the corpus subset of validate.py --quick")
    args = ap.parse_args(argv)
    if args.records and args.records.exists():
        records = json.loads(args.records.read_text())
    else:
        records = capture(args.quick)
        if args.records:
            args.records.write_text(json.dumps(records))
    report(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
