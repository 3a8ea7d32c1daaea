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
import math
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from flowsolver.collectives import _nccl_timing as _tuned  # noqa: E402
from flowsolver.collectives._host import with_host  # noqa: E402
from flowsolver.collectives._pipeline import Pipeline, pipeline_time  # noqa: E402

NAMES = [f.name for f in fields(Pipeline)]
#: the optimiser works in microseconds and steps
SCALE = np.array([1e-6 if n.startswith("floor") else 1.0 for n in NAMES])
START = np.array([2.0 if n.startswith("floor") else 1.0 for n in NAMES])


class Capture:
    """While active, what NCCL's cost model hands the pipeline, per ``(algorithm, protocol)``
    of the last collective timed: ``with Capture() as seen: collective(...)``, then
    :func:`pipe_of` picks the chosen pair's."""

    def __enter__(self):
        self.seen: dict = {}

        def spy(a, proto, op, size, ranks, nodes, channels, latency, algbw, params=None):
            self.seen[a, proto] = dict(algorithm=a, protocol=proto, op=op, size=size, ranks=ranks, nodes=nodes,
                                       channels=channels, latency=float(latency), algbw=float(algbw))
            return pipeline_time(a, proto, op, size, ranks, nodes, channels, latency, algbw, params)

        _tuned.pipeline_time = spy
        return self

    def __exit__(self, *exc):
        _tuned.pipeline_time = pipeline_time
        return False

    def pipe_of(self, algorithm, protocol):
        """The pipeline's inputs for the chosen pair (None: its time is not the pipeline's)."""
        return self.seen.get((algorithm, protocol))


def record(pt: dict, pipe) -> dict:
    """A fit record of a modelled ``ok`` corpus point."""
    return dict(source=pt["source"], curve=pt["curve"], band=pt["band"], measured=pt["measured"],
                model=pt["model"], pipe=pipe)


def capture(quick=False) -> list[dict]:
    """Model the corpus's collective points; one record per ``ok`` point (``pipe``: the
    pipeline's inputs for NCCL's pick, None where the time does not come from it)."""
    import validate as V

    points = V.collective_points(V.read_csv("collectives.csv"))
    if quick:
        points = V._quick_collectives(points)
    return [record(pt, pt.get("pipe")) for pt in map(V.run_collective, points) if pt.get("status") == "ok"]


def held_out(records: list[dict]) -> list[float]:
    """Each record's model time with the pipeline fitted on the other sources only."""
    out = [math.nan] * len(records)
    for source in sorted({r["source"] for r in records}):
        params = fit([r for r in records if r["source"] != source])
        for i, r in enumerate(records):
            if r["source"] == source:
                out[i] = predict(r, params)
    return out


def predict(rec: dict, params: Pipeline) -> float:
    p = rec["pipe"]
    if p is None:
        return rec["model"]
    # the host's floor where one thread issued the call for several GPUs (nccl-tests -g N), and
    # the host's work before a call timed on its own from an idle device (torch.distributed)
    return with_host(pipeline_time(p["algorithm"], p["protocol"], p["op"], p["size"], p["ranks"], p["nodes"],
                                   p["channels"], p["latency"], p["algbw"], params),
                     p.get("gpus_per_thread", 1), p.get("host_overhead", 0.0))


def estimate(rec: dict) -> float:
    """NCCL's estimate of its pick (the model before the pipeline)."""
    p = rec["pipe"]
    return rec["model"] if p is None else p["latency"] + p["size"] / p["algbw"]


def fit(records: list[dict], start=START) -> Pipeline:
    from scipy.optimize import least_squares

    use = [r for r in records if r["pipe"] is not None and r["pipe"]["protocol"] != "LL"]
    weight = Counter(r["source"] for r in use)

    def residual(x):
        params = Pipeline(**dict(zip(NAMES, x * SCALE)))
        return np.array([math.log(predict(r, params) / r["measured"]) / math.sqrt(weight[r["source"]]) for r in use])

    res = least_squares(residual, start, bounds=(np.zeros(len(NAMES)), np.full(len(NAMES), 1e3)),
                        loss="soft_l1", f_scale=0.1)
    x = np.array(res.x)
    base = residual(x)
    for i in range(len(NAMES)):                 # a parameter whose removal no point feels: 0 (none)
        moved = x.copy()
        moved[i] = 0.0
        if np.max(np.abs(residual(moved) - base)) < 1e-9:
            x[i] = 0.0
    return Pipeline(**dict(zip(NAMES, x * SCALE)))


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
