"""The published training runs of ../shared/REFERENCE.md ("Training") beside the model, with
the published parallelism and the model's defaults (the table in README.md, "Training steps
against published runs"; tests/training/test_training_published.py checks each row): tokens/s per
GPU and MFU, published and modelled, their relative error, TFLOP/s per GPU, and the memory
estimate of the stage that needs the most (GB, 1e9 bytes) with that stage's index.

    python benchmarks/training_published.py            # all rows (~2-3 min on 2 cores), the
                                                       # default compute (the kernel tables)
    python benchmarks/training_published.py --small    # the Megatron-Bridge rows only
    python benchmarks/training_published.py --flat     # the flat model (DEFAULT_COMPUTE_EFFICIENCY, 0.44)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import topologies as tp  # noqa: E402
from flowsolver import training_step  # noqa: E402
from flowsolver.training import DEFAULT_COMPUTE_EFFICIENCY, step_arguments  # noqa: E402
# the rows (servers, training_step arguments, published figures) and their published
# tokens/s and MFU are the test's, so the table and the assertions cannot drift apart
from tests.training.test_training_published import ROWS, _published  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(f"{'run':22s} {'tok/s/GPU pub':>13s} {'model':>7s} {'err':>7s} {'MFU pub':>8s} {'model':>6s} {'err':>7s} "
          f"{'TFLOP/s pub':>11s} {'model':>6s} {'GB/GPU':>7s} {'stage':>5s}")
    for name, (nodes, kw, pub) in ROWS.items():
        if "--small" in argv and nodes > 128:
            continue
        extra = dict(compute_efficiency=DEFAULT_COMPUTE_EFFICIENCY) if "--flat" in argv else {}
        r = training_step(tp.rail_optimized(nodes), **step_arguments(**kw, **extra))
        tokens, mfu = _published(kw, pub)
        stage = r.stage_memory.index(r.memory_per_gpu)
        print(f"{name:22s} {tokens:13,.0f} {r.tokens_per_gpu:7,.0f} {r.tokens_per_gpu / tokens - 1:+7.1%} "
              f"{mfu:8.1%} {r.mfu:6.1%} {r.mfu / mfu - 1:+7.1%} {pub['tflops']:11.0f} {r.tflops_per_gpu:6.0f} "
              f"{r.memory_per_gpu / 1e9:7.1f} {stage:5d}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
