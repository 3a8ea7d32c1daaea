"""Training steps and pairwise all-to-all at scale: wall-clock seconds and peak memory, each
case in its own process (first call includes compilation; "again" is a second call on the
same graph, with routes and kernels cached).

    python benchmarks/training_scale.py            # 1,024 to 16,384 GPUs
    python benchmarks/training_scale.py --small    # only up to 4,096 GPUs

Targets (issue: route once, solve in batches): a training step on 16,384 H100
(rail_optimized(2048), TP8 PP16 DP128) in under 30 s and 4 GiB on CPU, with how the cost
grows from 1,024 GPUs; a pairwise all-to-all over 1024 GPUs (1023 steps) in under 10 s.
The cases run Llama-3-405B (126 layers on 16 stages: Megatron's lighter end stages).
"""

from __future__ import annotations

import sys

from _child import run_child

CHILD = """
import json, resource, sys, time
import topologies as tp
from flowsolver import Parallelism, collective, training_step
from flowsolver.routing import path_computations
kind, n = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
g = tp.rail_optimized(n) if kind == "train" else tp.fat_tree(n)
build = time.perf_counter() - t
def once():
    if kind == "train":
        return training_step(g, "llama-3-405b", Parallelism(tp=8, pp=16, dp=n // 16)).step_time
    return collective(g, "all_to_all", 2**20 * (len(tp.gpus(g)) - 1), algorithm="pairwise", efficiency=1.0).time
times = []
for _ in range(2):
    t = time.perf_counter()
    result = once()
    times.append(time.perf_counter() - t)
print(json.dumps(dict(gpus=len(tp.gpus(g)), build=build, first=times[0], again=times[1], result=result,
                      paths=path_computations(), rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)))
"""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    nodes = [128, 512] if "--small" in argv else [128, 512, 1024, 2048]
    cases = [("train", n, "Llama-3-405B step, TP8 PP16") for n in nodes] + \
        [("pairwise", k, "pairwise all-to-all 1 MiB/pair") for k in (12, 16)]
    print(f"{'case':34s} {'GPUs':>6s} {'graph s':>8s} {'first s':>8s} {'again s':>8s} {'result s':>10s} "
          f"{'paths':>6s} {'peak GiB':>9s}")
    status = 0
    for kind, n, label in cases:
        r, error = run_child(CHILD, kind, str(n))
        if error:
            print(f"{label:34s} failed: {error}")
            status = 1
            continue
        print(f"{label:34s} {r['gpus']:6d} {r['build']:8.1f} {r['first']:8.1f} {r['again']:8.1f} "
              f"{r['result']:10.4g} {r['paths']:6d} {r['rss']:9.2f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
