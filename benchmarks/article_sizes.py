"""The article's recommendations by cluster size checked by the design search: "fat-tree for
64-256 GPUs, DragonFly for 256-1000+" and RoCE 400G for 64-256 GPUs.

    python benchmarks/article_sizes.py                  # 64, 256, 1024 GPUs
    python benchmarks/article_sizes.py --gpus 256 4096

For each size: Clos families (fat-tree, leaf-spine, rail-optimised) and DragonFly+ on
InfiniBand NDR and RoCE 400G, non-blocking and 2:1, a Llama-3-70B step (TP8 PP4), GPUs at the
catalogue's published 8-GPU server price, 30 days. Prints the candidate with the most tokens
per USD, the best of each family and of each technology, and the wall time.
"""

from __future__ import annotations

import math
import sys
import time


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sizes = [int(a) for a in argv[argv.index("--gpus") + 1:]] if "--gpus" in argv else [64, 256, 1024]
    import topologies as tp
    from flowsolver import design

    gpu = tp.get_part("hgx_h100_server").price / 8
    for gpus in sizes:
        t0 = time.perf_counter()
        r = design(gpus, dict(model="llama-3-70b", tp=8, pp=4),
                   families=("fat_tree", "leaf_spine", "rail_optimized", "dragonfly_plus"),
                   links=("ib_ndr", "roce_400g"), oversubscriptions=(1.0, 2.0), optics=("multimode",),
                   gpu_price=gpu, lifetime=30 * 86400.0)
        ok = [c for c in r.candidates if c.status == "ok" and math.isfinite(c.tokens_per_usd)]
        print(f"\n{gpus} GPUs: {len(r.candidates)} candidates, {len(ok)} timed, {time.perf_counter() - t0:.0f} s")
        for label, key in (("family", "family"), ("technology", "link")):
            for name in sorted({getattr(c, key) for c in ok}):
                best = max((c for c in ok if getattr(c, key) == name), key=lambda c: c.tokens_per_usd)
                print(f"  best {label} {name:15s} {best.family:15s} {best.link:10s} os {best.oversubscription:g}: "
                      f"{best.tokens_per_usd:9,.0f} tokens/USD, network {best.price / best.gpus:7,.0f} USD/GPU, "
                      f"step {best.time:.3f} s")
        b = r.best()
        print(f"  most tokens per USD: {b.family} {b.link} os {b.oversubscription:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
