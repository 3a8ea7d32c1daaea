"""The memory model against every published memory figure of benchmarks/validation/memory.csv
(issue 32): the error of each row, and the rows outside 10 %.

    python benchmarks/memory_published.py            # every row
    python benchmarks/memory_published.py --terms    # also the breakdown of each measured peak

Kinds: ``model_states`` (the ZeRO paper's Figure 1 and GPT-2 figure, GB), ``bytes_per_param``
(Megatron-LM's distributed-optimizer table), ``activations_per_layer`` (Korthikanti et al.'s
Table 2 at GPT-3 175B's shape, bytes), ``measured_peak`` (BLOOM's topology search, the peak
nvidia-smi showed on the first node, GB), ``fits`` (published runs on 80 GB H100: the estimate
against the device's 85.52e9 bytes as NVML reports them). ``tables only`` is the estimate of
model states and activations alone (what the published tables count); ``model`` adds the
source's overheads (tests/training/test_memory_published.py's ``RUNTIME``: for BLOOM the CUDA
context, DeepSpeed's ZeRO-1 step buffers and kept stage outputs, the caching allocator's
reserved view, and the run's embedding layer norm).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.training.test_memory_published import (OUTLIERS, ROWS, RUNTIME, _key, _spec, modelled,  # noqa: E402
                                                  published)


def _terms(row) -> str:
    from flowsolver.training._memory import memory_breakdown
    i = lambda k: int(row[k]) if row[k] else 1      # noqa: E731
    stages = memory_breakdown(_spec(row), tp=i("tp"), pp=i("pp"), dp=i("dp"), zero=int(row["zero"]),
                              micro_batch=i("micro_batch"), microbatches=i("microbatches"),
                              recompute=row["recompute"], sequence_parallel=row["sequence_parallel"] == "True",
                              grad_bytes=i("grad_bytes"), dropout=row["dropout"] == "True", **RUNTIME[row["source"]])
    worst = max(stages, key=lambda s: sum(s.values()))
    return "    " + "  ".join(f"{k} {v / 1e9:.2f}" for k, v in worst.items() if v)


def main() -> int:
    outside, terms = 0, "--terms" in sys.argv[1:]
    print(f"{'source':18s} {'kind':22s} {'row':52s} {'published':>10s} {'tables only':>11s} {'model':>10s} "
          f"{'error':>7s}")
    for row in ROWS:
        pub, mod, alone = published(row), modelled(row), modelled(row, runtime=False)
        err = mod / pub - 1
        what = (f"{row['model'] or ''} tp{row['tp'] or 1} pp{row['pp'] or 1} dp{row['dp'] or 1} "
                f"mb{row['micro_batch'] or 1} zero{row['zero'] or 0} {row['recompute']}").strip()
        flag = ""
        if row["kind"] == "fits":
            flag = "fits" if mod <= pub else "DOES NOT FIT"
        elif abs(err) > 0.10:
            outside += 1
            flag = "outside 10 %" + (f" (outlier: {OUTLIERS[_key(row)]})" if row["kind"] == "measured_peak"
                                     and _key(row) in OUTLIERS else "")
        print(f"{row['source']:18s} {row['kind']:22s} {what[:52]:52s} {pub:10.4g} {alone:11.4g} {mod:10.4g} "
              f"{err:+7.1%} {flag}")
        if terms and row["kind"] == "measured_peak":
            print(_terms(row))
    print(f"\n{len(ROWS)} rows, {outside} outside 10 % (fits rows: the estimate against the device's capacity)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
