"""The published training runs of ../shared/REFERENCE.md ("Training") beside the model, with
the published parallelism and the model's defaults (the table in README.md, "Training steps
against published runs"; tests/test_training_published.py checks each row).

    python benchmarks/training_published.py            # all rows (~2-3 min on 2 cores)
    python benchmarks/training_published.py --small    # the Megatron-Bridge rows only
"""

from __future__ import annotations

import sys

import topologies as tp
from flowsolver import training_step

FP8_PEAK = 1979e12          # H100 SXM dense FP8, datasheet
# name: (servers, training_step arguments, published figures); sources in REFERENCE.md
ROWS = {
    "Llama 3 405B bf16, 8,192 GPUs": (1024, dict(model="llama-3-405b", tp=8, pp=16, dp=64, vp=8, global_batch=2048),
                                      dict(tflops=430, mfu=0.43)),
    "Llama 3 405B bf16, 16,384 GPUs": (2048, dict(model="llama-3-405b", tp=8, pp=16, dp=128, vp=8, global_batch=2048),
                                       dict(tflops=400, mfu=0.41)),
    "Llama 3 405B bf16, 128 K": (2048, dict(model="llama-3-405b", tp=8, cp=16, pp=16, dp=8, vp=8, seq_len=131072,
                                            global_batch=128), dict(tflops=380, mfu=0.38)),
    "Llama 3 70B FP8, 64 GPUs": (8, dict(model="llama-3-70b", tp=4, pp=8, vp=5, global_batch=128, precision="fp8"),
                                 dict(tokens=1602, tflops=719)),
    "Llama 3.1 405B FP8, 1,024 GPUs": (128, dict(model="llama-3-405b", tp=8, pp=8, cp=2, vp=8, global_batch=512,
                                                 precision="fp8"), dict(tokens=292, tflops=737)),
    "Llama 3 8B FP8, 8 GPUs": (1, dict(model="llama-3-8b", dp=8, global_batch=128, precision="fp8",
                                                  recompute="full", recompute_layers=5),
                               dict(tokens=14451, tflops=744)),
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(f"{'run':32s} {'pub TFLOP/s':>11s} {'model':>7s} {'pub MFU':>8s} {'model':>7s} "
          f"{'pub tok/s/GPU':>13s} {'model':>8s} {'gap':>7s}")
    for name, (nodes, kw, pub) in ROWS.items():
        if "--small" in argv and nodes > 128:
            continue
        r = training_step(tp.rail_optimized(nodes), **kw)
        flops = r.tflops_per_gpu * 1e12 / r.tokens_per_gpu      # model FLOPs per token at this sequence length
        tokens = pub.get("tokens", pub["tflops"] * 1e12 / flops)
        mfu = pub.get("mfu", pub["tflops"] * 1e12 / FP8_PEAK)
        print(f"{name:32s} {pub['tflops']:11.0f} {r.tflops_per_gpu:7.0f} {mfu:8.1%} {r.mfu:7.1%} "
              f"{tokens:13,.0f} {r.tokens_per_gpu:8,.0f} {r.tokens_per_gpu / tokens - 1:+7.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
