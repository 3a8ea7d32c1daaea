"""131,072 GPUs (16,384 DGX H100 on a three-tier rail-optimised fabric of 128-port switches):
build the graph, validate it, and time a Llama-3-405B training step (TP8 PP16 DP1024), with
wall-clock seconds and peak resident memory for each stage.

    python benchmarks/scale_131k.py                  # 16,384 servers
    python benchmarks/scale_131k.py 4096             # a smaller run (servers)

Target (issue 34): graph + routing a training step's groups + the step in < 60 s and < 8 GiB
on 2 cores.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

# the checkout this script sits in, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    nodes = int(argv[0]) if argv else 16384
    import topologies as tp
    from flowsolver import Parallelism, training_step

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    start = time.perf_counter()
    t = time.perf_counter()
    g = tp.rail_optimized(nodes, radix=128)
    build = time.perf_counter() - t
    print(f"graph: {len(tp.gpus(g))} GPUs, {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, "
          f"{build:.1f} s, peak {peak():.2f} GiB", flush=True)
    t = time.perf_counter()
    tp.validate(g)
    print(f"validate (schema + every GPU joined): {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    pp = 16
    r = training_step(g, model="llama-3-405b", parallelism=Parallelism(tp=8, pp=pp, dp=nodes * 8 // 8 // pp))
    step = time.perf_counter() - t
    total = time.perf_counter() - start
    print(f"training step (llama-3-405b TP8 PP{pp} DP{nodes // pp}): {step:.1f} s, "
          f"step time {r.step_time:.3f} s ({r.step_time.hex()}: bit for bit across versions)", flush=True)
    print(f"total {total:.1f} s, peak resident {peak():.2f} GiB "
          f"(target < 60 s, < 8 GiB: {'met' if total < 60 and peak() < 8 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
