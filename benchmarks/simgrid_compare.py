"""flowsolver's default all-to-all against SimGrid 4.1's figures for the same job.

    python benchmarks/simgrid_compare.py

The job: ``collective(fat_tree(k), "all_to_all", 1 MiB per pair, efficiency=1.0)`` as a
user calls it (default ``algorithm="auto"``), compiled (the second call in one process),
k = 12 (432 GPUs) and k = 16 (1024 GPUs). SimGrid is not a dependency and is not built here
(it needs Boost and cmake, ~25 minutes on 2 cores); the SimGrid figures below are the ones
measured side by side on this project's 2-core machine when the speed issue was filed
(SimGrid 4.1, native fat-tree zone, LMM solver). The target is at least 50x SimGrid's wall
time with the same completion time within 1 %.
"""

from __future__ import annotations

import sys
import time

import topologies as tp
from flowsolver import collective

#: SimGrid 4.1 on the project's 2-core machine (the speed issue's table): wall seconds and
#: the all-to-all's completion time (ms)
SIMGRID = {12: (6.1, 9.039), 16: (36.1, 21.454)}


def main() -> int:
    print(f"{'k':>3s} {'GPUs':>5s} {'flowsolver s':>13s} {'SimGrid s':>10s} {'speed-up':>9s} "
          f"{'time ms':>9s} {'SimGrid ms':>11s} {'diff':>7s} algorithm")
    for k, (sim_wall, sim_ms) in SIMGRID.items():
        g = tp.fat_tree(k)
        n = len(tp.gpus(g))
        run = lambda: collective(g, "all_to_all", 2**20 * (n - 1), efficiency=1.0)  # noqa: E731
        run()                                      # compile, route
        t = time.perf_counter()
        r = run()
        wall = time.perf_counter() - t
        print(f"{k:3d} {n:5d} {wall:13.2f} {sim_wall:10.1f} {sim_wall / wall:8.1f}x "
              f"{r.time * 1e3:9.3f} {sim_ms:11.3f} {r.time * 1e3 / sim_ms - 1:+7.2%} {r.algorithm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
