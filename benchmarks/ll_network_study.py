"""Test mechanisms for the ring LL / LL128 mid-size deficit across nodes against a corpus run,
held out leave-one-source-out (units: bytes, seconds, bytes/s).

    python benchmarks/validate.py --by-curve --json run.json      # the corpus run (minutes)
    python benchmarks/ll_network_study.py run.json                # seconds

Between 64 KiB and ~1 MiB NCCL adds ring channels as the size grows, so the model's time stays flat
while the measured one grows as ``t0 + size / R`` with ``R`` a per-GPU rate that does not grow
with the channels. Each candidate adds a term to multi-node ring LL (or LL and LL128) and has one
constant, refitted on the other sources for each source held out (soft-L1 log error, each source
weighted by 1/sqrt(its points), as ``pipeline_records.fit``); the pipeline's own constants are the
folds' of ``pipeline_records.fit``. Printed per candidate: the held-out median |error| overall, by
size band, by network, by protocol, and of the multi-node rings per protocol; then, as a
diagnostic only, each source's own rate ``R`` (the byte term fitted to that source alone).

Candidates (NCCL at 5067397c, 2.30):

* ``A``: a network connection's LL buffer is in host memory (``src/transport/net.cc:917``: device
  memory only for protocols other than LL, with GDR), which the receiving GPU polls line by line
  (``src/device/prims_ll.h:108-118``, ``ld.volatile`` of each 16-byte line) across its path to host
  memory. A GPU's ring connections carry ``line x loop_steps x size / (ranks x ppn)`` bytes across
  the network on average (:func:`network_bytes`); the path's rate is :data:`HOST_PATH` times a fitted
  efficiency. ``A max``: the transfer is no faster than that; ``A add``: it adds.
* ``B``: one proxy thread a GPU progresses every network send and receive in turn
  (``src/proxy.cc:801-810`` ``progressOps``; ``net.cc:1303-1468`` ``sendProxyProgress``: a flag scan
  of every LL line, ``isend``, ``test``), a fitted cost per message: ``B gpu`` the GPU's own
  channels' messages (``steps x ceil(channels / ppn)``), ``B all`` every channel's in turn.
* ``rate``: a per-GPU byte rate of one fitted constant, the form the data suggests, no path named.
* ``S&F``: no constant; the network hop stores and forwards a whole LL step (``sendProxyProgress``
  sends a step once all its lines carry their flag) and a ring's chain of steps crosses the network
  ``nodes / ranks`` of its steps, waiting a step at each: ``steps x nodes / ranks`` steps more
  (tree LL's :func:`~flowsolver.collectives._pipeline.ll_depth` carried over to rings).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pipeline_records import fit, predict, record  # noqa: E402
from flowsolver.collectives._pipeline import _chunking, channel_split, channels_used  # noqa: E402

GB = 1e9
#: a GPU's share of its path to host memory, one direction (bytes/s): PCIe Gen4 x16 32 GB/s (A100
#: SXM datasheet, 64 GB/s both ways), Gen5 x16 64 GB/s (H100 / H200 / B200 datasheets, 128 both
#: ways), each shared by 2 GPUs under one PCIe switch (DGX A100 user guide: 4 switches for 8
#: GPUs; assumed for the others); NVLink-C2C 450 GB/s (GH200 / GB200 / GB300 datasheets, 900 both
#: ways), its own. An assumption of this study only: the library's graph carries no such figure.
HOST_PATH = {"A100": 16 * GB, "H100": 32 * GB, "H200": 32 * GB, "B200": 32 * GB, "B300": 32 * GB,
             "GH200": 450 * GB, "GB200": 450 * GB, "GB300": 450 * GB}


def network_class(network: str) -> str:
    """The brief's network classes of a corpus point's ``network``."""
    for key, name in (("NVLink (1", "NVLink one node"), ("MNNVL", "MNNVL"), ("Spectrum", "Spectrum-X"),
                      ("RoCE", "RoCE"), ("GCP RDMA", "RoCE"), ("EFA", "EFA"), ("TCPXO", "TCPXO")):
        if key in network:
            return name
    return network


def geometry(pipe: dict) -> dict:
    """The channels NCCL runs (``k``: given data; ``share``: size over the largest share), a
    channel's chunk steps and the ranks per node of a point's pipeline inputs."""
    n, nodes, size = pipe["ranks"], pipe["nodes"], pipe["size"]
    nc = channels_used(pipe["algorithm"], pipe["protocol"], size, n, pipe["channels"])
    k, largest = channel_split(pipe["op"], pipe["protocol"], size, n, nc)
    share = size / largest if largest > 0 else nc
    steps = _chunking(pipe["algorithm"], pipe["protocol"], pipe["op"], size, n, nodes, share)[0]
    return dict(n=n, ppn=max(1, n // nodes), k=k, share=share, steps=steps)


def network_bytes(pipe: dict, g: dict) -> float:
    """Bytes of lines one GPU's ring connections carry across the network: a ring loop's steps
    each move ``size / ranks`` a GPU (all-gather's ``size`` its output), 1 of ``ppn`` GPUs a
    ring's crossing on each node; LL lines twice their data, LL128's 16/15.

    >>> network_bytes({"protocol": "LL", "op": "all_reduce", "size": 1 << 20}, {"n": 16, "ppn": 8})
    491520.0
    """
    line = 2.0 if pipe["protocol"] == "LL" else 16 / 15
    loop = 2 * (g["n"] - 1) if pipe["op"] == "all_reduce" else g["n"] - 1
    return line * loop * pipe["size"] / (g["n"] * g["ppn"])


def transfer(pipe: dict, g: dict) -> float:
    """The model's LL transfer: the size at the bandwidth of the channels NCCL runs."""
    return pipe["size"] / (pipe["algbw"] * g["share"] / pipe["channels"])


CANDIDATES = {
    "A max": (lambda r, g, x, t: t + max(0.0, network_bytes(r["pipe"], g) / (x * HOST_PATH[r["gpu"]])
                                         - transfer(r["pipe"], g)), 0.5, (1e-3, 10.0)),
    "A add": (lambda r, g, x, t: t + network_bytes(r["pipe"], g) / (x * HOST_PATH[r["gpu"]]), 0.5, (1e-3, 10.0)),
    "B gpu": (lambda r, g, x, t: t + x * 1e-6 * g["steps"] * math.ceil(g["k"] / g["ppn"]), 1.0, (0.0, 1e3)),
    "B all": (lambda r, g, x, t: t + x * 1e-6 * g["steps"] * g["k"], 0.2, (0.0, 1e3)),
    "rate": (lambda r, g, x, t: t + network_bytes(r["pipe"], g) / (x * GB), 10.0, (0.1, 1e4)),
    "S&F": (lambda r, g, x, t: t + x * r["pipe"]["nodes"] / g["n"] * transfer(r["pipe"], g), 1.0, None),
}


def load(path) -> list[dict]:
    points = [p for p in json.loads(Path(path).read_text())["points"]
              if p.get("kind") == "collective" and p.get("status") == "ok"]
    out = []
    for p in points:
        rec = record(p, p.get("pipe"))
        rec.update(model=p.get("model_in_sample", p["model"]), network=network_class(p["network"]), gpu=p["gpu"])
        out.append(rec)
    return out


def ring_across(protocols):
    return lambda r: (r["pipe"] is not None and r["pipe"]["algorithm"] == "ring" and r["pipe"]["nodes"] > 1
                      and r["pipe"]["protocol"] in protocols and r["gpu"] in HOST_PATH)


def held_out(records, folds, term=None, applies=None) -> list[float]:
    """Each record's time with the pipeline's fold for its source, plus ``term`` where it
    applies, its constant fitted on the other sources."""
    from scipy.optimize import least_squares

    geo = [geometry(r["pipe"]) if r["pipe"] is not None else None for r in records]
    out = [math.nan] * len(records)
    for source, params in folds.items():
        base = [predict(r, params) for r in records]
        x = None
        if term is not None:
            fn, start, bounds = term
            use = [i for i, r in enumerate(records) if r["source"] != source and r["fitted"] and applies(r)]
            weight = Counter(records[i]["source"] for i in use)

            def residual(v):
                return np.array([math.log(fn(records[i], geo[i], v[0], base[i]) / records[i]["measured"])
                                 / math.sqrt(weight[records[i]["source"]]) for i in use])

            x = least_squares(residual, [start], bounds=([bounds[0]], [bounds[1]]), loss="soft_l1",
                              f_scale=0.1).x[0] if use and bounds else start
        for i, r in enumerate(records):
            if r["source"] == source:
                out[i] = fn(r, geo[i], x, base[i]) if x is not None and applies(r) else base[i]
    return out


def summary(records, times, title) -> None:
    med = lambda xs: statistics.median(abs(e) for e in xs)  # noqa: E731
    errs = [t / r["measured"] - 1 for r, t in zip(records, times)]
    print(f"{title}: {len(errs)} points, held out {med(errs) * 100:.2f} % "
          f"(bias {statistics.median(errs) * 100:+.1f} %)")
    keys = (("band", lambda r: r["band"]), ("network", lambda r: r["network"]),
            ("protocol", lambda r: r["pipe"]["protocol"] if r["pipe"] else "other"),
            ("rings across nodes", lambda r: r["pipe"]["protocol"] if ring_across(("LL", "LL128", "Simple"))(r)
             else None))
    for name, key in keys:
        groups = defaultdict(list)
        for r, e in zip(records, errs):
            if key(r) is not None:
                groups[key(r)].append(e)
        print(f"  {name}: " + "  ".join(f"{k} {len(v)} {med(v) * 100:.1f}" for k, v in sorted(groups.items())))


def source_rates(records, folds, protocol) -> None:
    """Diagnostic: the byte term's rate fitted to each source's own rings (GB/s)."""
    from scipy.optimize import least_squares

    fn = CANDIDATES["rate"][0]
    groups = defaultdict(list)
    for r in records:
        if ring_across((protocol,))(r):
            groups[r["source"], r["gpu"], r["network"]].append(r)
    for key, recs in sorted(groups.items()):
        params, geo = folds[key[0]], [geometry(r["pipe"]) for r in recs]
        base = [predict(r, params) for r in recs]
        res = least_squares(lambda v: np.array([math.log(fn(r, g, v[0], b) / r["measured"])
                                                for r, g, b in zip(recs, geo, base)]),
                            [10.0], bounds=([0.05], [1e4]), loss="soft_l1", f_scale=0.1).x[0]
        print(f"  {protocol:5s} {' / '.join(key):52s} {len(recs):3d} points  R {res:8.1f} GB/s")


def beside_large(path) -> None:
    """Diagnostic: each multi-node shape's median error (held out) on its ring LL / LL128 points at
    64 KiB-16 MiB beside its points of 16 MiB and more (any algorithm and protocol): where both are
    short alike the platform's network rate is, not a mechanism of LL."""
    points = [p for p in json.loads(Path(path).read_text())["points"]
              if p.get("kind") == "collective" and p.get("status") == "ok" and p["nodes"] > 1]
    groups = defaultdict(lambda: ([], []))
    for p in points:
        pipe = p.get("pipe") or {}
        key = (p["source"], f"{p['nodes']} x {p['gpus_per_node']}")
        if pipe.get("algorithm") == "ring" and pipe.get("protocol") in ("LL", "LL128") and p["band"] == "64 KiB-16 MiB":
            groups[key][0].append(p["err"])
        elif p["size"] >= 16 << 20:
            groups[key][1].append(p["err"])
    for key, (mid, large) in sorted(groups.items()):
        if mid:
            big = f"{statistics.median(large) * 100:+5.0f} % ({len(large)})" if large else "   -"
            print(f"  {' / '.join(key):44s} ring LL/LL128 mid {statistics.median(mid) * 100:+5.0f} % ({len(mid)})"
                  f"   >= 16 MiB {big}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="benchmarks/validate.py --json output")
    args = ap.parse_args(argv)
    records = load(args.run)
    folds = {s: fit([r for r in records if r["source"] != s]) for s in sorted({r["source"] for r in records})}
    summary(records, held_out(records, folds), "as is")
    for name, term in CANDIDATES.items():
        for protocols in (("LL",), ("LL", "LL128")):
            summary(records, held_out(records, folds, term, ring_across(protocols)), f"{name} on {'+'.join(protocols)}")
    print("each source's own rate (diagnostic, not a model):")
    for protocol in ("LL", "LL128"):
        source_rates(records, folds, protocol)
    print("each multi-node shape's median error, mid-size rings beside its large sizes (diagnostic):")
    beside_large(args.run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
