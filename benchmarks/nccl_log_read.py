"""Seconds nccl_tests.read takes on generated logs of growing size, lines ending in \\n, in bare
\\r (where a pattern's ``.`` matches the line break) and run into one long line: the time must
grow with the size, not its square (a 0.4 MB log with \\r endings took 35 s before the readers'
patterns were kept to one line; tests/collectives/test_nccl_tests_lines.py checks the patterns).

    python benchmarks/nccl_log_read.py
"""

from __future__ import annotations

import time

from flowsolver import nccl_tests

HEAD = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20",
        "#  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid 2 on hostB device  0 [0x0f] NVIDIA H100 80GB HBM3",
        "hostA:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong"]
INFO = "hostA:1:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/1 some more words here to pad"
ROW = ("           8             2     float     sum      -1    20.10    0.00    0.00      0    20.00    0.00    "
       "0.00      0")


def log(sep, n, long_line=False):
    filler = [INFO + " " + "x" * (90 * n)] if long_line else [INFO] * n
    return sep.join(HEAD + filler + [ROW, "# Avg bus bandwidth    : 0.00", ""])


def main():
    nccl_tests.read(log("\n", 10), op="all_reduce")          # pandas imported outside the timing
    print(f"{'lines':>7s} {'MB':>5s} {'LF (s)':>8s} {'CR (s)':>8s} {'one line (s)':>13s}")
    for n in (2000, 8000, 32000, 128000):
        times = []
        for sep, long_line in (("\n", False), ("\r", False), ("\n", True)):
            text = log(sep, n, long_line)
            t = time.perf_counter()
            nccl_tests.read(text, op="all_reduce")
            times.append(time.perf_counter() - t)
        print(f"{n:7d} {len(text) / 1e6:5.1f} {times[0]:8.3f} {times[1]:8.3f} {times[2]:13.3f}")


if __name__ == "__main__":
    main()
