"""Speed of flowsolver.serve: one simulated minute at 10,000 requests per minute on 1,024 GPUs
(issue 35's target: < 60 s on 2 cores), co-located and disaggregated, printing the measured figures.

Run: ``python benchmarks/serving.py`` (``--quick``: 128 GPUs, 1,000 requests per minute).
"""

from __future__ import annotations

import argparse
import time

import topologies as tp

import flowsolver as fs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 GPUs, 1,000 requests per minute")
    args = parser.parse_args(argv)
    nodes, per_minute = (16, 1000) if args.quick else (128, 10000)
    graph = tp.rail_optimized(nodes=nodes, server="dgx_h100", link="ib_ndr")
    gpus = len(tp.gpus(graph))
    cases = {
        "colocated llama-3-70b tp8": dict(model="llama-3-70b", tp=8),
        "disaggregated llama-3-70b tp8, 1/4 prefill": dict(model="llama-3-70b", tp=8, prefill_gpus=gpus // 4),
        "colocated mixtral-8x7b tp1 ep8": dict(model="mixtral-8x7b", tp=1, ep=8),
    }
    print(f"{gpus} GPUs (rail-optimised, DGX H100, IB NDR), {per_minute} requests/min for 60 s, "
          f"prompts 256-2048, outputs 64-512 tokens")
    worst = 0.0
    for name, kwargs in cases.items():
        start = time.perf_counter()
        r = fs.serve(graph, rate=per_minute / 60.0, duration=60.0, prompt=(256, 2048), output=(64, 512),
                     ttft_target=1.0, tpot_target=0.05, seed=0, **kwargs)
        wall = time.perf_counter() - start
        worst = max(worst, wall)
        s = r.summary()
        print(f"{name:46s} wall {wall:6.1f} s  events {r.events:8d}  requests {s['requests']}  "
              f"TTFT p50/p99 {s['ttft_p50_ms']:.0f}/{s['ttft_p99_ms']:.0f} ms  "
              f"TPOT p50/p99 {s['tpot_p50_ms']:.1f}/{s['tpot_p99_ms']:.1f} ms  "
              f"{s['throughput_tokens_per_gpu']:.1f} tok/s/GPU  network {s['network_share_ttft']:.0%} of TTFT, "
              f"{s['network_share_tpot']:.0%} of TPOT")
    print(f"slowest case: {worst:.1f} s for one simulated minute (target < 60 s): "
          f"{'met' if worst < 60 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
