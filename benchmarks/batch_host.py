"""The host's own time per scenario of a failure batch (the 1024-GPU ring of benchmarks/gpu.py's
``batch`` section, 1 % of its links failed per scenario): every device call of a batched solve
(the kernel, and the gathers and layout around it) answered from fresh copies of a recording
of the same call, made before the clock starts, so the wall time is the host's work alone
(checks, transfers, copies of the rows). Issue 31: this must not grow with the batch.

    python benchmarks/batch_host.py                    # 256, 1,024, 4,096 and 8,192 scenarios
    python benchmarks/batch_host.py --sizes 256,1024   # some sizes
    python benchmarks/batch_host.py --kernel-only      # replay the kernel alone (the gathers run)

On this repository's 2-core CPU: 57-93 us a scenario at every size (docs/performance.md).
With several devices (a batch sharded over them) only the single-device kernel is replayed:
the sharded kernel runs for real and its time counts as the host's; run it on one device.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import jax  # noqa: E402

import flowsolver as fs  # noqa: E402
import topologies as tp  # noqa: E402
from flowsolver.solver import _batch  # noqa: E402
from gpu import failure_caps  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096,8192", help="comma-separated scenarios per call")
    ap.add_argument("--kernel-only", action="store_true", help="replay the kernel alone")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per size (the best is printed)")
    ap.add_argument("--device", default="auto", help="max_min_fair's device= (auto: the accelerator if any)")
    args = ap.parse_args(argv)
    names = ["_JITTED"] + ([] if args.kernel_only else ["_prepare", "_layout"])
    recorded, queue, mode = [], [], {"record": True}

    def replaying(real):
        def call(*a, **k):
            if mode["record"]:
                out = jax.block_until_ready(real(*a, **k))
                recorded.append(out)
                return out
            return queue.pop(0)
        return call

    for name in names:
        setattr(_batch, name, replaying(getattr(_batch, name)))
    g = tp.rail_optimized(128)
    rm = fs.route(g, fs.Flows.ring(len(tp.gpus(g)), 1e9))
    print(f"ring over {len(tp.gpus(g))} GPUs, {rm.n_links:,} links; device={args.device} ({jax.default_backend()}); "
          f"replayed: {', '.join(names)}")
    print(f"{'scenarios':>10} {'host ms':>9} {'us a scenario':>14}")
    for B in (int(x) for x in args.sizes.split(",")):
        caps = failure_caps(rm, B)
        mode["record"] = True
        recorded.clear()
        ref = fs.max_min_fair(rm, capacity=caps, device=args.device)
        mode["record"] = False
        best = np.inf
        for _ in range(args.repeat):
            queue[:] = jax.block_until_ready([jax.tree.map(lambda x: x.copy(), o) for o in recorded])
            t = time.perf_counter()
            a = fs.max_min_fair(rm, capacity=caps, device=args.device)
            best = min(best, time.perf_counter() - t)
        assert np.array_equal(a.rates, ref.rates) and np.array_equal(a.link_load, ref.link_load)
        print(f"{B:10,d} {best * 1e3:9.1f} {best / B * 1e6:14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
