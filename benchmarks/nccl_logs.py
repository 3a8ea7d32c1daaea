"""The model (NCCL's choice, uncalibrated) against every shared nccl-tests log: median and
maximum relative error of the time per log, and a busbw-against-size figure per log.

    python benchmarks/nccl_logs.py              # table
    python benchmarks/nccl_logs.py --plot DIR   # and DIR/<log>.png
    python benchmarks/nccl_logs.py --calibrate  # and the error after calibrating on one half, predicting the other

Logs are read from ../shared/data/nccl-tests (beside the repository). Each log's hardware
is its sidecar's (.json); where the sidecar leaves something out the assumption is
printed with the row. Labelled-slow logs (misconfigured RoCE runs) are shown but are not
expected to match.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import topologies as tp
from flowsolver import busbw_factor, collective, nccl_tests

LOGS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nccl-tests"

# log stem -> (graph builder, ranks or None, algorithm, what is assumed)
A100_ROCE = tp.get_server("dgx_a100").with_(name="oci_b4_8", nic="roce_200g")   # 8 x 2 x 100G RoCE VFs per node
P4DE = tp.get_server("dgx_a100").with_(name="p4de", nics=4, nic="eth_100g")     # AWS spec: 4 x 100G EFA
P5 = tp.get_server("dgx_h100").with_(name="p5", nic="eth_400g")                  # AWS spec: 3200G EFA = 8 x 400G
CASES = {
    "oci_oke_2xA100-40GB_allreduce_8B-8G": (lambda: tp.rail_optimized(2, server=A100_ROCE, link="roce_200g"),
                                            None, "auto", "16 x 100G RoCE per node as 8 x 200G"),
    "oci_oke_2xA100-40GB_allreduce_1G-10G_nccl2.14": (lambda: tp.rail_optimized(2, server=A100_ROCE,
                                                                                 link="roce_200g"), None, "auto", ""),
    "oci_oke_2xA100-40GB_allreduce_1G-4G_nccl2.29": (lambda: tp.rail_optimized(2, server=A100_ROCE,
                                                                                link="roce_200g"), None, "auto", ""),
    "aws_2xp4de_A100-80GB_allreduce_8B-2G": (lambda: tp.rail_optimized(2, server=P4DE, link="eth_100g"), None,
                                             "auto", "EFA as 4 x 100G Ethernet (not in the file)"),
    "aws_2xp5_H100_allreduce_8B-16G": (lambda: tp.rail_optimized(2, server=P5, link="eth_400g"), None, "auto",
                                       "EFA as 8 x 400G Ethernet (not in the file)"),
    "datacrunch_2xH200_allreduce_1M-1G": (lambda: tp.rail_optimized(2), None, "auto",
                                          "NICs not stated: 8 x NDR assumed; H200 as H100"),
    "nccl1047_1xH100_reducescatter_ring": (lambda: tp.rail_optimized(1), None, "ring", "NCCL_ALGO=Ring"),
    "moc_roce_2xH100_all_reduce_roce_1gpu": (lambda: tp.rail_optimized(2, link="roce_400g"), [0, 8], "ring",
                                             "labelled slow; NCCL_ALGO=Ring"),
    "moc_roce_2xH100_sendrecv_roce_1gpu": (lambda: tp.rail_optimized(2, link="roce_400g"), [0, 8], "direct",
                                           "labelled slow"),
}
SKIPPED = {"moc_roce_2xH100_sendrecv_roce_4gpu": "nccl-tests sendrecv shifts all 8 ranks by one; flowsolver's "
                                                 "send_recv is one pair"}


def compare(stem):
    """(rows of size, measured s, model CollectiveResult) of one log."""
    build, ranks, algorithm, _ = CASES[stem]
    df = nccl_tests.read(LOGS / f"{stem}.txt")
    rows = df[df["placement"] == "out-of-place"]
    graph = build()
    out = []
    for size, time_us in zip(rows["size"], rows["time"]):
        r = collective(graph, df.attrs["op"], float(size), ranks=ranks, algorithm=algorithm)
        out.append((float(size), float(time_us) * 1e-6, r))
    return df.attrs["op"], out


def calibrated_errors(stem) -> tuple[float, float]:
    """Median relative error on the upper half of a log's sizes after calibrating on the lower,
    and on the lower after calibrating on the upper (``benchmarks/calibrate_halves.py`` prints
    the worst rows and what each half constrained)."""
    import json

    from flowsolver import calibrate

    build, ranks, algorithm, _ = CASES[stem]
    path = LOGS / f"{stem}.txt"
    df = nccl_tests.read(path)
    if ranks is None:                # a table that does not say its rank count: its sidecar's
        ranks = list(range(json.loads(path.with_suffix(".json").read_text())["ranks"]))
    rows = df[df["placement"] == "out-of-place"].sort_values("size")
    half = len(rows) // 2
    graph = build()
    out = []
    for fit, test in ((rows.iloc[:half], rows.iloc[half:]), (rows.iloc[half:], rows.iloc[:half])):
        part = fit.copy()
        part.attrs.update(df.attrs)
        cal = calibrate(graph, [part], ranks=ranks, algorithm=algorithm)
        out.append(statistics.median(
            abs(collective(graph, df.attrs["op"], float(s), ranks=ranks, algorithm=algorithm, model=cal).time
                / (t * 1e-6) - 1) for s, t in zip(test["size"], test["time"])))
    return out[0], out[1]


def _plot(path, stem, op, rows):
    from matplotlib.figure import Figure

    from flowsolver.plot import busbw_vs_size

    fig = Figure(figsize=(7, 4))
    p = rows[0][2].ranks
    ax = busbw_vs_size(fig.subplots(), {"model": [r for _, _, r in rows]},
                       measured={"nccl-tests": ([s for s, _, _ in rows],
                                                [s / t * busbw_factor(op, p) for s, t, _ in rows])})
    ax.set_title(stem, fontsize="small")
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", metavar="DIR", default=None, help="write one PNG per log into DIR")
    parser.add_argument("--calibrate", action="store_true",
                        help="also calibrate on the lower half of each log's sizes and report the upper half's error "
                             "(cal.up), and the other way round (cal.dn)")
    args = parser.parse_args(argv)
    if not LOGS.is_dir():
        print(f"skipped: {LOGS} is absent (optional data, not shipped: docs/guide/data.md)")
        return 0
    print(f"{'log':48s} {'rows':>4s} {'median':>7s} {'max':>7s} {'>=64M':>7s} {'cal.up':>7s} {'cal.dn':>7s}  "
          "choice at the largest size; assumptions")
    for stem in sorted(CASES):
        op, rows = compare(stem)
        errors = [abs(r.time / t - 1) for _, t, r in rows]
        large = [e for (s, _, _), e in zip(rows, errors) if s >= 2**26]
        last = rows[-1][2]
        note = CASES[stem][3]
        held = " ".join(f"{e:7.1%}" for e in calibrated_errors(stem)) if args.calibrate and len(rows) >= 4 \
            else f"{'-':>7s} {'-':>7s}"
        print(f"{stem:48s} {len(rows):4d} {statistics.median(errors):7.1%} {max(errors):7.1%} "
              f"{statistics.median(large) if large else float('nan'):7.1%} {held}  "
              f"{last.algorithm}/{last.protocol}/{last.channels}ch; {note}")
        if args.plot:
            Path(args.plot).mkdir(parents=True, exist_ok=True)
            _plot(Path(args.plot) / f"{stem}.png", stem, op, rows)
    for stem, why in SKIPPED.items():
        print(f"{stem:48s} skipped: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
