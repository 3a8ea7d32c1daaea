"""The memory model against every published memory figure of benchmarks/validation/memory.csv
(issue 32): the error of each row, and the rows outside 10 %.

    python benchmarks/memory_published.py

Kinds: ``model_states`` (the ZeRO paper's Figure 1 and GPT-2 figure, GB), ``bytes_per_param``
(Megatron-LM's distributed-optimizer table), ``activations_per_layer`` (Korthikanti et al.'s
Table 2 at GPT-3 175B's shape, bytes), ``measured_peak`` (BLOOM's topology search, the peak
each run reported, GB), ``fits`` (published runs on 80 GB H100: the estimate against the
device's 85.52e9 bytes as NVML reports them).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.training.test_memory_published import ROWS, modelled, published  # noqa: E402


def main() -> int:
    outside = 0
    print(f"{'source':18s} {'kind':22s} {'row':58s} {'published':>12s} {'model':>12s} {'error':>8s}")
    for row in ROWS:
        pub, mod = published(row), modelled(row)
        err = mod / pub - 1
        what = (f"{row['model'] or ''} tp{row['tp'] or 1} pp{row['pp'] or 1} dp{row['dp'] or 1} "
                f"mb{row['micro_batch'] or 1} zero{row['zero'] or 0} {row['recompute']}").strip()
        flag = ""
        if row["kind"] == "fits":
            flag = "fits" if mod <= pub else "DOES NOT FIT"
        elif abs(err) > 0.10:
            flag, outside = "outside 10 %", outside + 1
        print(f"{row['source']:18s} {row['kind']:22s} {what[:58]:58s} {pub:12.4g} {mod:12.4g} {err:+8.1%} {flag}")
    print(f"\n{len(ROWS)} rows, {outside} outside 10 % (fits rows: the estimate against the device's capacity)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
