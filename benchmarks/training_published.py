"""The published training runs of ../shared/REFERENCE.md ("Training") beside the model, with
the published parallelism and the model's defaults (the table in README.md, "Training steps
against published runs"; tests/test_training_published.py checks each row).

    python benchmarks/training_published.py            # all rows (~2-3 min on 2 cores)
    python benchmarks/training_published.py --small    # the Megatron-Bridge rows only
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import topologies as tp  # noqa: E402
from flowsolver import training_step  # noqa: E402
# the rows (servers, training_step arguments, published figures) and their published
# tokens/s and MFU are the test's, so the table and the assertions cannot drift apart
from tests.test_training_published import ROWS, _published  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(f"{'run':32s} {'pub TFLOP/s':>11s} {'model':>7s} {'pub MFU':>8s} {'model':>7s} "
          f"{'pub tok/s/GPU':>13s} {'model':>8s} {'gap':>7s}")
    for name, (nodes, kw, pub) in ROWS.items():
        if "--small" in argv and nodes > 128:
            continue
        r = training_step(tp.rail_optimized(nodes), **kw)
        tokens, mfu = _published(kw, pub)
        print(f"{name:32s} {pub['tflops']:11.0f} {r.tflops_per_gpu:7.0f} {mfu:8.1%} {r.mfu:7.1%} "
              f"{tokens:13,.0f} {r.tokens_per_gpu:8,.0f} {r.tokens_per_gpu / tokens - 1:+7.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
