"""The host's own time per scenario of a failure batch (the 1024-GPU ring of benchmarks/gpu.py's
``batch`` section, 1 % of its links failed per scenario): every device call of a batched solve
(the kernel, and the gathers and layout around it) answered from fresh copies of a recording
of the same call, made before the clock starts, so the wall time is the host's work alone
(checks, transfers, copies of the rows). Issue 31: this must not grow with the batch.

    python benchmarks/batch_host.py                    # 256, 1,024, 4,096 and 8,192 scenarios
    python benchmarks/batch_host.py --sizes 256,1024   # some sizes
    python benchmarks/batch_host.py --kernel-only      # replay the kernel alone (the gathers run)

Each size is timed with every link's load and utilization returned (``per_link=True``, the
default) and without (``per_link=False``: rates and bottlenecks only), alternately.

On this repository's 2-core CPU: 57-93 us a scenario at every size (docs/performance.md).
With several devices the sharded kernel is replayed in place of the single-device one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import jax  # noqa: E402

import flowsolver as fs  # noqa: E402
import topologies as tp  # noqa: E402
from gpu import failure_caps, host_seconds  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096,8192", help="comma-separated scenarios per call")
    ap.add_argument("--kernel-only", action="store_true", help="replay the kernel alone")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per size (the best is printed)")
    ap.add_argument("--device", default="auto", help="max_min_fair's device= (auto: the accelerator if any)")
    args = ap.parse_args(argv)
    replay = ("_JITTED",) if args.kernel_only else ("_JITTED", "_prepare", "_layout")
    g = tp.rail_optimized(128)
    rm = fs.route(g, fs.Flows.ring(len(tp.gpus(g)), 1e9))
    print(f"ring over {len(tp.gpus(g))} GPUs, {rm.n_links:,} links; device={args.device} ({jax.default_backend()}); "
          f"replayed: {', '.join(replay)}")
    print(f"{'scenarios':>10} {'per_link':>9} {'host ms':>9} {'us a scenario':>14}")
    for B in (int(x) for x in args.sizes.split(",")):
        caps = failure_caps(rm, B)
        for per_link in (True, False):
            best, _ = host_seconds(lambda: fs.max_min_fair(rm, capacity=caps, device=args.device, per_link=per_link),
                                   args.repeat, replay)
            print(f"{B:10,d} {str(per_link):>9} {best * 1e3:9.1f} {best / B * 1e6:14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
