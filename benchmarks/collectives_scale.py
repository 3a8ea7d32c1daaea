"""Collectives end to end: route + solve + time model, wall-clock seconds.

    python benchmarks/collectives_scale.py

Targets (issue: collectives): ring all-reduce with 8 channels over 4096 GPUs
(rail_optimized(nodes=512)) in under 10 s; all-to-all over the same 4096 GPUs (16.7 M flows)
in under 60 s with peak memory under 8 GiB; (issue: route once, solve in batches) the
default all-to-all over those 4096 GPUs, 1 MiB per pair, under 20 s and 6 GiB (the last
row; its time excludes building the graph and importing); (issue: solve the steps in bounded
groups) a tree all-reduce over 8 NVL72 racks. Each case runs in its own process.
"""

from __future__ import annotations

import sys

from _child import run_child

CASES = [
    ("ring all-reduce 1 GiB, 8 channels", "rail_optimized(512)", "'all_reduce', 2**30, algorithm='ring'"),
    ("ring all-reduce 1 GiB, 8 channels", "rail_optimized(128)", "'all_reduce', 2**30, algorithm='ring'"),
    ("tree all-reduce 1 GiB, 8 channels", "rail_optimized(128)", "'all_reduce', 2**30, algorithm='tree'"),
    # a tree's chain through each NVL72 rack's 72 GPUs: ~300 distinct pipeline steps, 24 M flows
    # (2026-12-06, 2 cores, warm compilation cache: 21-22 s, 3.6 GiB; 91-103 s, 9.6 GiB at e1e3052, which
    # routed every step flow and solved every step in one call)
    ("tree all-reduce 16 GiB, NVL72 racks", "rail_optimized(8, server='nvl72')", "'all_reduce', 2**34, algorithm='tree'"),
    ("auto all-reduce 1 GiB (4 candidates)", "rail_optimized(16)", "'all_reduce', 2**30"),
    ("direct all-to-all 1 GiB", "rail_optimized(16)", "'all_to_all', 2**30, algorithm='direct'"),
    ("direct all-to-all 1 GiB", "rail_optimized(64)", "'all_to_all', 2**30, algorithm='direct'"),
    ("direct all-to-all 1 GiB", "rail_optimized(128)", "'all_to_all', 2**30, algorithm='direct'"),
    ("direct all-to-all 1 GiB", "rail_optimized(512)", "'all_to_all', 2**30, algorithm='direct'"),
    ("default all-to-all 1 MiB per pair", "rail_optimized(512)", "'all_to_all', 2**20 * 4095"),
]

CHILD = """
import json, resource, time
import topologies as tp
from flowsolver import collective
g = tp.{graph}
t = time.perf_counter()
r = collective(g, {call})
dt = time.perf_counter() - t
print(json.dumps(dict(time=dt, peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      gpus=len(tp.gpus(g)), busbw=r.busbw, model_time=r.time,
                      flows=sum(s.flows for s in r.steps), tier=r.steps[0].bottleneck_tier,
                      algorithm=r.algorithm)))
"""


def main() -> int:
    print(f"{'case':38s} {'cluster':22s} {'GPUs':>6s} {'flows':>9s} {'wall s':>7s} {'peak GiB':>9s} "
          f"{'busbw GB/s':>11s} {'bottleneck tier':>16s} algorithm")
    for name, graph, call in CASES:
        r, error = run_child(CHILD.format(graph=graph, call=call), timeout=1800)
        if error:
            print(f"{name:38s} {graph:22s} failed: {error}")
            continue
        print(f"{name:38s} {graph:22s} {r['gpus']:6d} {r['flows']:9d} {r['time']:7.1f} {r['peak']:9.2f} "
              f"{r['busbw'] / 1e9:11.1f} {r['tier']:>16s} {r['algorithm']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
