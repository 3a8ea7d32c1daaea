"""Generation time and peak memory of the largest standard clusters.

Each case runs in its own process so that peak resident memory is its own.
Targets (issue: foundation and topologies): under 30 s and under 4 GiB on a 2-core machine.

    python benchmarks/topology_scale.py
"""

from __future__ import annotations

import json
import subprocess
import sys

CASES = {
    "rail_optimized(nodes=2048)  16384 GPUs": "tp.rail_optimized(nodes=2048)",
    "rail_optimized(16384, radix=128) 131072": "tp.rail_optimized(16384, radix=128)",
    "fat_tree(48)                27648 GPUs": "tp.fat_tree(48)",
    "dragonfly(8, 16, 8)         16512 GPUs": "tp.dragonfly(8, 16, 8)",
    "torus((16, 16, 16))          4096 GPUs": "tp.torus((16, 16, 16))",
}

CHILD = """
import json, resource, time
import topologies as tp
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
g = {expr}
build = time.perf_counter() - t
t = time.perf_counter()
d = tp.describe(g)
describe = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(build=build, describe=describe, peak_gib=peak / 2**20,
                      graph_gib=(peak - base) / 2**20, nodes=g.number_of_nodes(),
                      edges=g.number_of_edges(), gpus=d["gpus"])))
"""


def main() -> int:
    print(f"{'case':40s} {'build s':>8s} {'describe s':>10s} {'peak GiB':>9s} {'nodes':>8s} {'edges':>8s}")
    ok = True
    for name, expr in CASES.items():
        out = subprocess.run([sys.executable, "-c", CHILD.format(expr=expr)], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out)
        ok &= r["build"] < 30 and r["peak_gib"] < 4
        print(f"{name:40s} {r['build']:8.2f} {r['describe']:10.2f} {r['peak_gib']:9.2f} "
              f"{r['nodes']:8d} {r['edges']:8d}")
    print("targets (< 30 s, < 4 GiB):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
