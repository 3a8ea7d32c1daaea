"""The case the frontier method cannot take yet: a weighted all-to-all on fat_tree(16).

    python benchmarks/wide_paths.py          # ~2 min on 2 cores

1 M flows whose fluid-ECMP paths are 148 links wide (the frontier method's path table takes
at most ``_frontier.MAX_PATH`` = 32, and its per-link flow lists would hold ~155 M pairs),
with log-normal weights, so progressive filling has ~1,000 distinct levels. The dense
method, the only one ``auto`` may use here, needs one round per level, each a pass over all
flows. The frontier's rounds cost ``B x path width`` whatever the flow count; a frontier on
the factored (segment -> flow) form would make this a few seconds (the open point of the
speed issue). Prints the width, the dense method's rounds and time (best of two calls
after compiling), and the rate certificate's verdict.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import topologies as tp
from flowsolver import Flows, max_min_fair, route
from flowsolver.solver import _certificate, _frontier


def main() -> int:
    graph = tp.fat_tree(16)
    rm = route(graph, Flows.all_to_all(len(tp.gpus(graph))))
    weights = np.random.default_rng(0).lognormal(0.0, 1.0, rm.n_flows)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        alloc = max_min_fair(rm, weights=weights)
        times.append(time.perf_counter() - t)
    bad = _certificate.violation(rm, rm.capacity, weights, rm.demands, alloc.rates, alloc.bottleneck)
    print(f"flows {rm.n_flows:,}, path width {_frontier.path_width(rm)} (frontier takes {_frontier.MAX_PATH})")
    print(f"dense (auto): {int(alloc.rounds)} rounds, {min(times):.1f} s (calls: "
          f"{', '.join(f'{x:.1f}' for x in times)}); certificate: {bad or 'max-min fair'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
