"""Paths wider than the frontier's path table: all-to-alls on fat_tree(k) with fluid ECMP.

    python benchmarks/wide_paths.py            # k = 12 and 16, ~5 min on 2 cores
    python benchmarks/wide_paths.py 12         # one size

fat_tree(16)'s fluid-ECMP paths are 148 links wide (fat_tree(12): 88): copied per flow they
would make a 1 M x 148 path table and ~155 M (link, flow) pairs, so the frontier keeps the
wide (leaf-pair) segments apart and reads one lower-bound share per wide slot
(``flowsolver.solver._frontier_wide``): 5 items per flow. Two workloads per size:

* log-normal weights (~1,000 distinct levels): the dense method needs a pass over all flows
  per level, the frontier's rounds cost the same whatever the flow count;
* no weights (every NIC ties): one dense round finishes it, in ``auto``'s dense warm-up,
  before the frontier's set-up would cost more than the solve;
* no weights, 1 % of the links failed (a few tens of levels): ``auto``'s dense rounds keep
  freezing more than 1 % of the flows left each, so it stays with them to the end.

Prints, per workload and method (``auto``, ``frontier``, ``dense``), the rounds and the best
of two calls after a first (compiling) call, the ratio to dense measured in the same run, and
the max-min certificate's verdict on auto's rates.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import topologies as tp
from flowsolver import Flows, max_min_fair, route
from flowsolver.solver import _certificate, _frontier_paths


def _best(rm, weights, method):
    max_min_fair(rm, weights=weights, method=method)          # compile this problem's shapes
    times = []
    for _ in range(2):
        t = time.perf_counter()
        alloc = max_min_fair(rm, weights=weights, method=method)
        times.append(time.perf_counter() - t)
    return min(times), alloc


def main(sizes) -> int:
    for k in sizes:
        graph = tp.fat_tree(k)
        rm = route(graph, Flows.all_to_all(len(tp.gpus(graph))))
        failed = tp.fail_links(graph, 0.01, seed=1)
        print(f"fat_tree({k}): {rm.n_flows:,} flows, path width {_frontier_paths.path_width(rm)}, "
              f"frontier items per flow {_frontier_paths.split_width(rm)}")
        for label, weights, rm in (("log-normal weights", np.random.default_rng(0).lognormal(0.0, 1.0, rm.n_flows), rm),
                                   ("no weights", None, rm),
                                   ("1 % links failed", None, route(failed, Flows.all_to_all(len(tp.gpus(failed)))))):
            try:
                dense_s, dense = _best(rm, weights, "dense")
            except ValueError as err:       # the conditioning bound's refusal (docs/performance.md)
                print(f"  {label:18s} refused: {str(err)[:100]}")
                continue
            for method in ("auto", "frontier"):
                t, alloc = _best(rm, weights, method)
                if method == "auto":
                    w = np.ones(rm.n_flows) if weights is None else weights
                    bad = _certificate.violation(rm, rm.capacity, w, rm.demands, alloc.rates, alloc.bottleneck)
                    gap = float(np.max(np.abs(np.asarray(alloc.rates) - dense.rates) / dense.rates))
                print(f"  {label:18s} {method:8s} {int(alloc.rounds):5d} rounds {t:7.2f} s "
                      f"({dense_s / t:5.1f}x dense)")
            print(f"  {label:18s} {'dense':8s} {int(dense.rounds):5d} rounds {dense_s:7.2f} s; auto's rates: "
                  f"certificate {bad or 'max-min fair'}, largest difference to dense {gap:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main([int(a) for a in sys.argv[1:]] or [12, 16]))
