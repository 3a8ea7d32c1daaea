"""Fit and hold out the LL network proxy's rate (``flowsolver.collectives._pipeline.LL_PROXY_RATE``)
on a corpus run (units: bytes, seconds, bytes/s).

    python benchmarks/validate.py --by-curve --json run.json      # the corpus run (minutes)
    python benchmarks/ll_proxy_fit.py run.json                    # seconds

The points: every multi-node ring or tree LL point of the run (NCCL's pick or the curve's forced
algorithm) whose pipeline inputs were recorded. Each is re-timed with the shipped pipeline
constants (``pipeline_records.predict``) at a proxy rate ``R``: its time is ``latency +
max(transfer, lines a proxy hands on / R)`` (:func:`~flowsolver.collectives._pipeline.ll_proxy_seconds`).
Printed: the median |error| with no proxy and at the shipped rate; ``R`` chosen on the other
sources for each source held out (the grid's least median |error|) and the held-out medians, all
sizes and 64 KiB-16 MiB; the same for three other ways of counting the lines (per channel, per GPU,
per node) at their own best rate; then, as a diagnostic only, each source's own best rate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pipeline_records import predict  # noqa: E402
from flowsolver.collectives import _pipeline  # noqa: E402
from flowsolver.collectives._pipeline import PIPELINE, channels_used  # noqa: E402

GRID = [x * 0.5e9 for x in range(2, 41)]          # 1 to 20 GB/s of lines
MID = 64 * 1024


def load(path) -> list[dict]:
    points = json.loads(Path(path).read_text())["points"]
    return [p for p in points if p.get("kind") == "collective" and p.get("status") == "ok" and p.get("pipe")
            and p["pipe"]["protocol"] == "LL" and p["pipe"]["nodes"] > 1
            and p["pipe"]["algorithm"] in ("ring", "tree") and p["pipe"].get("senders", 0) > 0]


def timed(p: dict, rate: float | None, count: str = "proxy") -> float:
    """``p``'s time with the lines counted by ``count`` at ``rate`` (None: no proxy)."""
    pipe = dict(p["pipe"])
    rec = {"pipe": dict(pipe, senders=0), "model": p["model"]}
    base = predict(rec, PIPELINE)
    if rate is None:
        return base
    running = channels_used(pipe["algorithm"], "LL", pipe["size"], pipe["ranks"], pipe["channels"])
    one = _pipeline.ll_proxy_seconds(pipe["algorithm"], pipe["op"], pipe["size"], pipe["ranks"], pipe["nodes"],
                                     running, running, rate)          # one channel's lines
    per = {"proxy": math.ceil(running / pipe["senders"]), "channel": 1,
           "gpu": running / max(1, pipe["ranks"] // pipe["nodes"]), "node": running}[count]
    return max(base, pipe["latency"] + pipe.get("host_overhead", 0.0) + per * one)


def err(p, rate, count="proxy") -> float:
    return timed(p, rate, count) / p["measured"] - 1


def med(errs) -> float:
    return statistics.median(abs(e) for e in errs) if errs else math.nan


def hold_out(points, count="proxy"):
    """Each source's errors at the rate chosen on the others; the rates chosen."""
    held, chosen = {}, Counter()
    for source in sorted({p["source"] for p in points}):
        train = [p for p in points if p["source"] != source]
        rate = min(GRID, key=lambda r: med([err(p, r, count) for p in train]))
        chosen[rate / 1e9] += 1
        for i, p in enumerate(points):
            if p["source"] == source:
                held[i] = err(p, rate, count)
    return [held[i] for i in range(len(points))], chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="benchmarks/validate.py --json output")
    args = ap.parse_args(argv)
    points = load(args.run)
    mid = [i for i, p in enumerate(points) if p["size"] >= MID]
    print(f"{len(points)} multi-node LL points ({len(mid)} at 64 KiB-16 MiB) from "
          f"{len({p['source'] for p in points})} sources")
    for label, rate in (("no proxy", None), (f"shipped {_pipeline.LL_PROXY_RATE / 1e9:g} GB/s", _pipeline.LL_PROXY_RATE)):
        e = [err(p, rate) for p in points]
        print(f"  {label:22s} all {med(e) * 100:5.1f} %   64 KiB-16 MiB {med([e[i] for i in mid]) * 100:5.1f} %")
    for count in ("proxy", "channel", "gpu", "node"):
        e, chosen = hold_out(points, count)
        print(f"  held out, per {count:8s} all {med(e) * 100:5.1f} %   64 KiB-16 MiB {med([e[i] for i in mid]) * 100:5.1f} %"
              f"   rates chosen (GB/s: folds) {dict(sorted(chosen.items()))}")
    print("each source's own rate at 64 KiB-16 MiB (diagnostic, not a model):")
    by = defaultdict(list)
    for i in mid:
        by[points[i]["source"]].append(points[i])
    for source, sel in sorted(by.items()):
        rate = min(GRID, key=lambda r: med([err(p, r) for p in sel]))
        print(f"  {source:30s} {len(sel):3d} points  {rate / 1e9:5.1f} GB/s   median error no proxy "
              f"{statistics.median(err(p, None) for p in sel) * 100:+6.1f} %, shipped "
              f"{statistics.median(err(p, _pipeline.LL_PROXY_RATE) for p in sel) * 100:+6.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
