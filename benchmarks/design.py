"""Design search speed: candidates billed and timed for a training job, on this machine.

    python benchmarks/design.py                 # 4,096 GPUs, Llama-3-70B TP8 PP4 (DP128)
    python benchmarks/design.py --gpus 512      # a smaller job

Target (issue 34): >= 500 candidate fabrics for a 4,096-GPU training job in < 5 minutes on
2 cores. The grid: 4 families x 5 link technologies x 4 oversubscriptions x 2 radixes x
3 NIC counts x 2 optics = 960 candidates; those that cannot be built (a fat-tree or a
rail-only fabric is non-blocking only, two tiers too small) are reported as failed and not
counted as valid; optics variants share a timing, and so do fabrics that are the same graph.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

# the checkout this script sits in, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    gpus = int(argv[argv.index("--gpus") + 1]) if "--gpus" in argv else 4096
    import topologies as tp
    from flowsolver import design

    workload = dict(model="llama-3-70b", tp=8, pp=4)
    t0 = time.perf_counter()
    last = [t0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 30 or done == total:
            print(f"  timed {done}/{total} fabrics, {now - t0:.0f} s", flush=True)
            last[0] = now

    r = design(gpus, workload, families=("rail_optimized", "leaf_spine", "fat_tree", "rail_only"),
               links=("ib_ndr", "ib_xdr", "ib_hdr", "roce_400g", "eth_400g"),
               oversubscriptions=(1.0, 1.5, 2.0, 4.0), radixes=(64, 128), nics=(8, 4, 2),
               optics=("multimode", "singlemode"), progress=progress,
               gpu_price=tp.get_part("hgx_h100_server").price / 8, lifetime=30 * 86400.0)
    status = Counter(c.status for c in r.candidates)
    print(r.format())
    print(f"\n{gpus} GPUs, {len(r.candidates)} candidates ({dict(status)}), {r.timed} distinct fabrics timed, "
          f"front {len(r.front)}, dominated {r.dominated}")
    best = r.best()
    print(f"most tokens per USD (GPUs at the catalogue's published server price, 30 days): {best.family} "
          f"{best.link} os {best.oversubscription:g} radix {best.radix} nics {best.nics} {best.optics}: "
          f"{best.tokens_per_usd:,.0f} tokens/USD, network {best.price / best.gpus:,.0f} USD/GPU")
    valid = status.get("ok", 0)
    print(f"wall {r.seconds:.1f} s ({r.seconds / max(r.timed, 1):.2f} s per timed fabric); target >= 500 valid "
          f"candidates (billed and timed) in < 300 s: {'met' if valid >= 500 and r.seconds < 300 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
