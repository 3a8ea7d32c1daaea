"""Cost of training_step's vp / micro_batch "auto" against one step: llama-3-70b on 64 H100
(rail_optimized(8)), TP4 PP8, 128 sequences; each in a fresh process (JAX compiles included),
then again in the same process (compiled).

    FLOWSOLVER_CACHE_DIR=off python benchmarks/training_auto.py
"""
import subprocess
import sys
import time

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step

LAYOUTS = {"one": dict(tp=4, pp=8, vp=5), "auto": dict(tp=4, pp=8, vp="auto", micro_batch="auto")}


def run(name):
    out = []
    for _ in range(2):
        t = time.perf_counter()
        r = training_step(tp.rail_optimized(8), "llama-3-70b", Parallelism(**LAYOUTS[name]), Schedule(global_batch=128))
        out.append(time.perf_counter() - t)
    chosen = f", {len(r.chosen.timed)} timed, {len(r.chosen.excluded)} excluded, picked vp={r.vp} " \
             f"micro_batch={r.micro_batch}" if r.chosen else ""
    print(f"{name}: {out[0]:.2f} s cold, {out[1]:.2f} s compiled; {r.step_time:.3f} s/step{chosen}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        for name in LAYOUTS:
            subprocess.run([sys.executable, __file__, name], check=True)
