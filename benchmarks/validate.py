"""The model against the whole validation corpus (benchmarks/validation/): every nccl-tests
curve and every published training row, each on the cluster an expert would build for it
with the public API and its default settings (the mapping, with the vendor specification
behind every assumption, is benchmarks/validation/setups.py).

    python benchmarks/validate.py                    # the whole corpus (a few minutes on 2 cores)
    python benchmarks/validate.py --quick            # a subset, under a minute
    python benchmarks/validate.py --source mle       # one source
    python benchmarks/validate.py --json out.json --plot figs/

Error convention, everywhere: ``model time / measured time - 1`` (positive: the model is
slower than the machine). Collectives compare with the out-of-place time of the nccl-tests
line (the in-place time is a second column; a source that prints one column only is
compared with that one); a time not printed is ``size / algbw`` or ``size x factor / busbw``.
Training rows compare step time; a throughput row (tokens/s per GPU, TFLOP/s per GPU) is a
time per token, so its error is ``measured / model - 1``.

A point whose printed figure gives its time to worse than +-5 % (``0.04`` GB/s: +-12 %) is
kept out of the medians (``excluded``), as are curves the corpus README flags as not the
hardware's performance; a setup the library cannot express is ``not modelled``. Both are
listed, counted and never dropped silently.

``loso(rows, fit, predict)`` is the leave-one-source-out machinery for fitted parameters.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))                      # the checkout's flowsolver, not an installed one
sys.path.insert(0, str(HERE / "validation"))

import setups as S  # noqa: E402
from pipeline_records import (OLDEST_FITTED_NCCL, Capture, P2pCapture, held_out, nccl_version, p2p_fit,  # noqa: E402
                              p2p_held_out, record)
from flowsolver import busbw_factor, collective, default_cache_dir, training_step  # noqa: E402
from flowsolver.training import step_arguments  # noqa: E402
from flowsolver.collectives._p2p import P2P_CHANNEL_SHARE  # noqa: E402

CORPUS = HERE / "validation"
KIB, MIB, GIB = 2**10, 2**20, 2**30
BANDS = (("< 64 KiB", 0, 64 * KIB), ("64 KiB-16 MiB", 64 * KIB, 16 * MIB), ("16 MiB-1 GiB", 16 * MIB, GIB),
         (">= 1 GiB", GIB, math.inf))
#: a printed figure that gives the time to worse than this is too coarse to compare with
PRECISION_LIMIT = 0.05


def read_csv(name: str) -> list[dict]:
    with open(CORPUS / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def band(size: float) -> str:
    return next(label for label, lo, hi in BANDS if lo <= size < hi)


def _half_unit(text: str) -> float:
    """Half a unit of the last printed digit of ``text`` (a decimal number)."""
    text = text.strip()
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0 ** -decimals


def measured_time(row: dict, p: int) -> tuple[float, float]:
    """(seconds, relative precision) of one corpus half-line: the printed time, else the time
    from algbw or busbw (GB/s = 1e9 bytes/s, nccl-tests' unit). Precision: half a unit of
    the last printed digit over the value. (nan, inf) when nothing gives a time."""
    size = float(row["size_bytes"])
    if row["time_us"].strip():
        v = float(row["time_us"])
        return v * 1e-6, _half_unit(row["time_us"]) / v if v > 0 else math.inf
    factor = busbw_factor(S.OPS[row["op"]], p)
    for col, f in (("algbw_gbs", 1.0), ("busbw_gbs", factor)):
        if row[col].strip():
            v = float(row[col])
            if v <= 0:
                return math.nan, math.inf
            return size * f / (v * 1e9), _half_unit(row[col]) / v
    return math.nan, math.inf


# --- collectives ------------------------------------------------------------------------------

def collective_points(rows: list[dict]) -> list[dict]:
    """One point per printed configuration: the out-of-place and in-place halves of a line merged."""
    points: dict = {}
    for row in rows:
        key = (row["curve"], int(row["size_bytes"]), int(row["nodes"]), int(row["gpus_per_node"]), row["env"])
        pt = points.setdefault(key, dict(kind="collective", source=row["source"], curve=row["curve"], op=row["op"],
                                         size=int(row["size_bytes"]), nodes=int(row["nodes"]),
                                         gpus_per_node=int(row["gpus_per_node"]), env=row["env"],
                                         nccl_version=row["nccl_version"], halves={}))
        placement = {"0": "out-of-place", "1": "in-place"}.get(row["in_place"].strip(), "unstated")
        pt["halves"][placement] = row
    return list(points.values())


def _fabric(cluster) -> str:
    """The between-rack fabric of an NVL72 cluster, for grouping: InfiniBand or RoCE by its link."""
    link = cluster.link if isinstance(cluster.link, str) else cluster.link.name
    return "InfiniBand" if link.startswith("ib_") else "RoCE"


def run_collective(pt: dict) -> dict:
    """Model the point and fill in its measured and model times and errors."""
    curve = pt["curve"]
    p = pt["nodes"] * pt["gpus_per_node"]
    for placement, row in pt["halves"].items():
        t, prec = measured_time(row, p)
        pt[f"measured_{placement.replace('-', '_')}"] = t
        pt[f"precision_{placement.replace('-', '_')}"] = prec
    primary = next(k for k in ("out-of-place", "unstated", "in-place") if k in pt["halves"])
    # the log's data type (nccl-tests -d): its element size and what NVLS reduces; "float32" as
    # some sources write it, none stated: nccl-tests' default float
    dtype = pt["halves"][primary].get("dtype") or "float"
    dtype = {"float32": "float", "float64": "double", "float16": "half"}.get(dtype, dtype)
    pt["dtype"] = dtype
    pt["placement"] = primary
    pt["measured"] = pt[f"measured_{primary.replace('-', '_')}"]
    pt["precision"] = pt[f"precision_{primary.replace('-', '_')}"]
    pt["band"] = band(pt["size"])
    pt["ranks"] = p
    del pt["halves"]
    if curve in S.NOT_MODELLED or curve not in S.CURVES:
        pt.update(status="not_modelled", reason=S.NOT_MODELLED.get(curve, "no mapping entry"))
        return pt
    setup = S.CURVES[curve]
    cluster = S.CLUSTERS[setup.cluster]
    algorithm = S.ROW_ALGORITHM.get((curve, pt["env"]), setup.algorithm)
    single = (setup.placement == "per_node" and pt["nodes"] == 1) or (setup.placement == "nvl72" and pt["nodes"] == 1)
    network = "NVLink (1 node)" if single else ("NVL72 MNNVL" if setup.placement == "nvl72" and setup.racks == 1
                                                else f"NVL72 MNNVL + {_fabric(cluster)}" if setup.placement == "nvl72"
                                                else cluster.kind)
    pt.update(setup=setup.cluster, algorithm=algorithm, gpu=cluster.gpu, network=network,
              note="; ".join(x for x in (setup.note,) if x))
    try:
        graph, ranks = S.curve_placement(setup, pt["nodes"], pt["gpus_per_node"])
        op = S.OPS[pt["op"]]
        runs = []
        per_thread = S.gpus_per_thread(pt["env"])       # nccl-tests -g N: one thread issues N calls
        overhead = S.host_overhead(pt["env"])           # one torch.distributed call timed from idle
        release = nccl_version(pt.get("nccl_version"))  # the run's NCCL where the source says it
        for a in (setup.candidates if algorithm == "auto" and setup.candidates else (algorithm,)):
            with Capture() as seen, P2pCapture() as sent:
                r = collective(graph, op, float(pt["size"]), ranks=ranks, algorithm=a, gpus_per_thread=per_thread,
                               host_overhead=overhead, nccl_version=release, dtype=dtype,
                               protocol=list(setup.protocol) if isinstance(setup.protocol, tuple) else setup.protocol)
            pipe = seen.pipe_of(r.algorithm, r.protocol)
            if pipe is not None:
                pipe = dict(pipe, gpus_per_thread=per_thread, host_overhead=overhead)
            p2p = None if sent.record is None else dict(sent.record, gpus_per_thread=per_thread,
                                                        host_overhead=overhead)
            runs.append((r, pipe, p2p))
        r, pipe, p2p = min(runs, key=lambda run: run[0].time)
    except ValueError as exc:
        pt.update(status="not_modelled", reason=f"the library refused it: {exc}")
        return pt
    pt.update(model=r.time, model_algorithm=r.algorithm, model_protocol=r.protocol, channels=r.channels, pipe=pipe,
              p2p=p2p, gpus_per_thread=per_thread, host_overhead=overhead)
    pt["err"] = r.time / pt["measured"] - 1 if pt["measured"] > 0 else math.nan
    if "measured_in_place" in pt and primary != "in-place":
        pt["err_in_place"] = r.time / pt["measured_in_place"] - 1
    if curve in S.EXCLUDED:
        pt.update(status="excluded", reason=S.EXCLUDED[curve])
    elif not pt["precision"] <= PRECISION_LIMIT:
        pt.update(status="excluded", reason=f"the printed figure gives the time to worse than +-{PRECISION_LIMIT:.0%}")
    else:
        pt["status"] = "ok"
    return pt


# --- training -------------------------------------------------------------------------------

_STEP_CACHE: dict = {}


def _freeze(kw: dict):
    return tuple(sorted((k, v if not isinstance(v, dict) else tuple(sorted(v.items()))) for k, v in kw.items()))


def compared_measurement(row: dict) -> tuple[str, float]:
    """``(metric, value)`` a training row is compared on: its printed metric and value, except a
    TFLOP/s per GPU of a source counting FLOPs its own way (``setups.TRAINING_FLOP_COUNTS``): that
    is compared as tokens/s per GPU, ``TFLOP/s x 1e12 / the publisher's FLOPs per token``.

    >>> compared_measurement({"source": "torchtitan", "metric": "tokens_per_s_per_gpu", "value": "6000"})
    ('tokens_per_s_per_gpu', 6000.0)
    >>> row = {"source": "megatron-lm-readme-a100-2021", "metric": "tflops_per_gpu", "value": "96",
    ...        "layers": "1", "hidden": "1", "seq_len": "0", "vocab": "0"}
    >>> compared_measurement(row)                               # 96 FLOPs a token: 1e12 tokens/s
    ('tokens_per_s_per_gpu', 1000000000000.0)
    """
    value = float(row["value"])
    if row["metric"] == "tflops_per_gpu" and row["source"] in S.TRAINING_FLOP_COUNTS:
        flops_per_token, _ = S.TRAINING_FLOP_COUNTS[row["source"]]
        return "tokens_per_s_per_gpu", value * 1e12 / flops_per_token(row)
    return row["metric"], value


def step_value(metric: str, result) -> float:
    """A training step's ``result`` in a corpus row's ``metric``."""
    return {"step_time_s": result.step_time, "tokens_per_s_per_gpu": result.tokens_per_gpu,
            "tflops_per_gpu": result.tflops_per_gpu}[metric]


def training_error(metric: str, measured: float, result) -> float:
    """model / measured - 1 on time: a throughput is the inverse of a time."""
    value = step_value(metric, result)
    return value / measured - 1 if metric == "step_time_s" else measured / value - 1


def run_training(row: dict, index: int, compute: str = "kernels") -> dict:
    pt = dict(kind="training", source=row["source"], row=index, model_name=row["model"], gpus=int(row["gpus"]),
              metric=row["metric"], measured_value=float(row["value"]), unit=row["unit"],
              precision_label=row["precision"])
    if (row["source"], index) in S.TRAINING_NOT_MODELLED:
        pt.update(status="not_modelled", reason=S.TRAINING_NOT_MODELLED[(row["source"], index)])
        return pt
    try:
        cluster, kw, assumed = S.training_call(row, compute)
    except (KeyError, StopIteration, ValueError) as exc:
        pt.update(status="not_modelled", reason=f"no mapping: {exc!r}")
        return pt
    c = S.CLUSTERS[cluster]
    servers = S.servers_for(cluster, pt["gpus"])
    pt.update(setup=cluster, gpu=c.gpu, network=c.kind, framework=S.training_framework(row), assumed=assumed,
              layout={k: (v.name if hasattr(v, "name") else v) for k, v in kw.items()})
    key = (cluster, servers, _freeze(kw))
    try:
        if key not in _STEP_CACHE:
            _STEP_CACHE[key] = training_step(c.graph(servers), **step_arguments(**kw))
        r = _STEP_CACHE[key]
    except (ValueError, TypeError) as exc:
        pt.update(status="not_modelled", reason=f"the library refused the layout: {exc}")
        return pt
    compared, measured = compared_measurement(row)
    pt.update(model_value=step_value(compared, r), compared_metric=compared, compared_value=measured)
    pt["err"] = training_error(compared, measured, r)
    pt["model_step_time"] = r.step_time
    pt["mfu"] = r.mfu
    if row["metric"] in S.TRAINING_DUPLICATE_METRICS and compared == row["metric"]:
        pt.update(status="excluded", reason=S.TRAINING_DUPLICATE_METRICS[row["metric"]])
    else:
        pt["status"] = "ok"
    return pt


def precision_pairs(points: list[dict], rows: list[dict]) -> list[tuple]:
    """Identical training jobs published in bf16 and in FP8 (same source, model, GPUs, layout,
    batch and framework, the precision aside; torchtitan's "+ Float8" technique counted as the
    precision): ``(source, model, gpus, recipe, published FP8 / bf16 speed-up, model's)``, the
    speed-up a time ratio (bf16 / FP8)."""
    by_row = {p["row"]: p for p in points if p.get("kind") == "training" and "model_step_time" in p}
    groups = defaultdict(dict)
    for i, r in enumerate(rows):
        if i not in by_row or r["metric"] == "tflops_per_gpu":
            continue
        fw = r["framework"].replace("FSDP + torch.compile + Float8", "FSDP + torch.compile")
        key = tuple(r[k] for k in ("source", "model", "gpus", "tp", "pp", "cp", "ep", "vp", "micro_batch",
                                   "global_batch", "seq_len")) + (fw,)
        prec = r["precision"].lower()
        tag = "bf16" if prec.startswith(("bf16", "amp")) else "rowwise" if "rowwise" in prec else "fp8"
        groups[key][tag] = i
    out = []
    for key, g in groups.items():
        for tag in ("fp8", "rowwise"):
            if "bf16" in g and tag in g:
                b, f = g["bf16"], g[tag]
                value = {i: float(rows[i]["value"]) for i in (b, f)}
                speed = {i: (1 / value[i] if rows[i]["metric"] == "step_time_s" else value[i]) for i in (b, f)}
                out.append((key[0], key[1], int(key[2]), tag, speed[f] / speed[b],
                            by_row[b]["model_step_time"] / by_row[f]["model_step_time"]))
    return out


# --- statistics ------------------------------------------------------------------------------

def summary(points: list[dict], key) -> list[tuple]:
    """(group, n, median |err|, median err) per group of the ``ok`` points, by ``key(point)``."""
    groups = defaultdict(list)
    for pt in points:
        if pt.get("status") == "ok":
            groups[key(pt)].append(pt["err"])
    out = []
    for g in sorted(groups, key=str):
        errs = groups[g]
        out.append((g, len(errs), statistics.median(abs(e) for e in errs), statistics.median(errs)))
    return out


def overall(points: list[dict]) -> dict:
    errs = [pt["err"] for pt in points if pt.get("status") == "ok"]
    if not errs:
        return dict(n=0, median_abs=math.nan, median=math.nan)
    return dict(n=len(errs), median_abs=statistics.median(abs(e) for e in errs), median=statistics.median(errs),
                within_10=sum(abs(e) <= 0.10 for e in errs) / len(errs),
                within_25=sum(abs(e) <= 0.25 for e in errs) / len(errs))


_BAND_ORDER = {label: i for i, (label, _, _) in enumerate(BANDS)}


def nccl_era(text) -> str:
    """The NCCL version group of a corpus row's ``nccl_version`` (the model is NCCL 2.30's; runs
    before 2.12, without PXN, are never fitted on: ``pipeline_records.OLDEST_FITTED_NCCL``).

    >>> nccl_era("2.8.4-1"), nccl_era("2.18.5"), nccl_era("2.29.2"), nccl_era("")
    ('before 2.12', '2.12-2.22', '2.23 or later', 'not stated')
    """
    version = nccl_version(text)
    if version is None:
        return "not stated"
    return "before 2.12" if version < OLDEST_FITTED_NCCL else "2.12-2.22" if version < (2, 23) else "2.23 or later"


GROUPINGS = {
    "collective": (("source", lambda p: p["source"]), ("size band", lambda p: p["band"]), ("op", lambda p: p["op"]),
                   ("GPU", lambda p: p["gpu"]), ("network", lambda p: p["network"]),
                   ("NCCL version", lambda p: nccl_era(p.get("nccl_version")))),
    "training": (("source", lambda p: p["source"]), ("GPU", lambda p: p["gpu"]), ("network", lambda p: p["network"]),
                 ("framework", lambda p: p["framework"]), ("precision", lambda p: "fp8" if "fp8" in
                                                                           p["precision_label"].lower() else "bf16")),
}


def _print_table(title: str, rows: list[tuple]) -> None:
    print(f"  by {title}:")
    if title == "size band":
        rows = sorted(rows, key=lambda r: _BAND_ORDER[r[0]])
    for g, n, mabs, med in rows:
        print(f"    {str(g):46s} {n:5d}   median |err| {mabs:7.1%}   bias {med:+8.1%}")


def describe_point(pt: dict) -> str:
    if pt["kind"] == "collective":
        return (f"{pt['curve']} {pt['op']} {_size(pt['size'])} on {pt['nodes']}x{pt['gpus_per_node']} "
                f"[{pt['setup']}, asked {pt['algorithm']}, model {pt.get('model_algorithm')}/"
                f"{pt.get('model_protocol')}]: model {pt['model'] * 1e6:.1f} us, measured {pt['measured'] * 1e6:.1f} us")
    lay = pt["layout"]
    layout = " ".join(f"{k}{lay[k]}" for k in ("tp", "pp", "cp", "ep", "vp", "dp") if k in lay and lay[k] != 1)
    return (f"{pt['source']} row {pt['row']} {pt['model_name']} {pt['gpus']} GPUs {layout} mb{lay.get('micro_batch')} "
            f"gbs{lay.get('global_batch')} {lay.get('precision')} [{pt['setup']}]: {pt['compared_metric']} model "
            f"{pt['model_value']:.4g}, published {pt['compared_value']:.4g}"
            + (f" (printed {pt['measured_value']:.4g} {pt['metric']})" if pt['compared_metric'] != pt['metric'] else ""))


def _size(n: float) -> str:
    for unit, div in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{int(n)} B"


# --- leave one source out -------------------------------------------------------------------

def loso(rows: list[dict], fit, predict) -> list[dict]:
    """Leave-one-source-out: for each source, ``params = fit(rows of every other source)``,
    then ``times = predict(rows of that source, params)``; returns one dict per held-out row:
    ``source``, ``index`` (position in ``rows``), ``measured``, ``predicted`` and ``err``
    (predicted / measured - 1). ``rows`` are dicts with at least ``source`` and ``measured``
    (seconds; whatever else ``fit`` and ``predict`` read, e.g. ``model`` and ``band``)."""
    out = []
    sources = sorted({r["source"] for r in rows})
    for held in sources:
        train = [r for r in rows if r["source"] != held]
        test = [(i, r) for i, r in enumerate(rows) if r["source"] == held]
        params = fit(train)
        times = predict([r for _, r in test], params)
        for (i, r), t in zip(test, times):
            out.append(dict(source=held, index=i, measured=r["measured"], predicted=float(t),
                            err=float(t) / r["measured"] - 1))
    return out


def fit_nothing(rows):
    """The model as it is: no parameter."""
    return None


def predict_model(rows, params):
    return [r["model"] for r in rows]


def fit_band_scale(rows):
    """One multiplicative factor per (kind, size band): the median of measured / model."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["kind"], r.get("band"))].append(r["measured"] / r["model"])
    return {k: statistics.median(v) for k, v in groups.items()}


def predict_band_scale(rows, params):
    return [r["model"] * params.get((r["kind"], r.get("band")), 1.0) for r in rows]


def loso_rows(points: list[dict]) -> list[dict]:
    """The ``ok`` points as loso rows (training throughputs as times per token)."""
    rows = []
    for pt in points:
        if pt.get("status") != "ok":
            continue
        if pt["kind"] == "collective":
            rows.append(dict(kind="collective", source=pt["source"], band=pt["band"], measured=pt["measured"],
                             model=pt["model"]))
        else:
            rows.append(dict(kind="training", source=pt["source"], band=None, measured=1.0, model=1.0 + pt["err"]))
    return rows


# --- plots ----------------------------------------------------------------------------------

def plot(points: list[dict], folder: Path) -> list[Path]:
    from matplotlib.figure import Figure

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    by_source = defaultdict(list)
    for pt in points:
        if "model" in pt or "model_value" in pt:
            by_source[(pt["kind"], pt["source"])].append(pt)
    for (kind, source), pts in sorted(by_source.items()):
        fig = Figure(figsize=(8, 5))
        ax = fig.subplots()
        if kind == "collective":
            curves = defaultdict(list)
            for pt in pts:
                curves[(pt["curve"], pt["gpus_per_node"] if pt["curve"].startswith("mle-") and "sweep" in pt["curve"]
                        else None, pt["env"] if "algos" in pt["curve"] else None)].append(pt)
            for i, (key, cps) in enumerate(sorted(curves.items(), key=lambda kv: str(kv[0]))):
                cps.sort(key=lambda p: p["size"])
                f = busbw_factor(S.OPS[cps[0]["op"]], cps[0]["ranks"])
                x = [p["size"] for p in cps]
                color = f"C{i % 10}"
                label = key[0] + (f" ({key[1]} GPUs)" if key[1] else "") + (f" [{key[2][:18]}]" if key[2] else "")
                ax.plot(x, [p["size"] * f / p["measured"] / 1e9 for p in cps], "o", color=color, ms=4,
                        label=f"{label} measured")
                ax.plot(x, [p["size"] * f / p["model"] / 1e9 for p in cps], "-", color=color, lw=1.2,
                        label="model")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("size (bytes, nccl-tests)")
            ax.set_ylabel("busbw (GB/s)")
        else:
            for metric, marker in (("step_time_s", "o"), ("tokens_per_s_per_gpu", "s"), ("tflops_per_gpu", "^")):
                for prec, color in (("bf16", "C0"), ("fp8", "C3")):
                    mp = [p for p in pts if p["compared_metric"] == metric
                          and ("fp8" in p["precision_label"].lower()) == (prec == "fp8")]
                    if mp:
                        ax.plot([p["compared_value"] for p in mp], [p["model_value"] for p in mp], marker,
                                color=color, ms=5, label=f"{metric}, {prec}")
            lo = min(min(p["compared_value"], p["model_value"]) for p in pts)
            hi = max(max(p["compared_value"], p["model_value"]) for p in pts)
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="model = published")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("published")
            ax.set_ylabel("model")
        ax.set_title(f"{source} ({kind})", fontsize="small")
        ax.legend(fontsize="xx-small", ncol=2)
        path = folder / f"{kind}_{source}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        written.append(path)
    return written


# --- main -------------------------------------------------------------------------------------

def _quick_collectives(points):
    """A subset that keeps every source and machine: the first curve of each (source, cluster,
    op, one node or several), at its smallest and largest size and every sixth in between
    (the largest only of a curve of four sizes or fewer: the NVL72 tails, whose multi-rack
    tree solves take seconds each)."""
    by_curve = defaultdict(list)
    for pt in points:
        by_curve[pt["curve"]].append(pt)
    keep, seen = [], set()
    for curve, pts in by_curve.items():
        setup = S.CURVES.get(curve)
        group = (pts[0]["source"], setup.cluster if setup else curve, pts[0]["op"], pts[0]["nodes"] > 1)
        if group in seen:
            continue
        seen.add(group)
        pts.sort(key=lambda p: (p["size"], p["gpus_per_node"], p["env"]))
        sizes = sorted({p["size"] for p in pts})
        chosen = {sizes[-1]} if len(sizes) <= 4 else set(sizes[::6]) | {sizes[0], sizes[-1]}
        keep.extend(p for p in pts if p["size"] in chosen)
    return keep


def _quick_training(indexed):
    """Per source, up to four rows: one per (model, precision), on the fewest GPUs."""
    best = {}
    for i, row in indexed:
        key = (row["source"], row["model"], row["precision"])
        if key not in best or int(row["gpus"]) < int(best[key][1]["gpus"]):
            best[key] = (i, row)
    per_source = defaultdict(list)
    for i, row in sorted(best.values(), key=lambda x: (int(x[1]["gpus"]), x[0])):
        if len(per_source[row["source"]]) < 4:
            per_source[row["source"]].append((i, row))
    return sorted((x for rows in per_source.values() for x in rows), key=lambda x: x[0])


def compilation_cache(folder) -> None:
    """Keep JAX's compiled solves in ``folder`` across runs (the project's $FLOWSOLVER_CACHE_DIR
    convention: nothing is written outside the outputs unless a folder is named)."""
    import jax

    Path(folder).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _hold_out(points: list[dict]) -> dict:
    """Make each collective point's ``err`` held out: the constants fitted on this corpus (the
    chunk pipeline's, ``pipeline_records.held_out``, and a P2P channel's share of the NVLink rate,
    ``pipeline_records.p2p_held_out``) refitted on the other sources; the shipped constants'
    error stays as ``err_in_sample``. Returns the P2P share's fit: in sample and per fold."""
    if not points:
        return {}
    for pt, t in zip(points, held_out([record(pt, pt.get("pipe")) for pt in points])):
        pt.update(err_in_sample=pt["err"], model_in_sample=pt["model"], model=t, err=t / pt["measured"] - 1)
    sends = [dict(record(pt, None), p2p=pt.get("p2p")) for pt in points]
    times, folds = p2p_held_out(sends)
    for pt, t in zip(points, times):
        if pt.get("p2p") is not None:
            pt.update(model=t, err=t / pt["measured"] - 1)
    return dict(in_sample=p2p_fit(sends), shipped=P2P_CHANNEL_SHARE, folds=folds)


def run(sources=None, quick=False, progress=False, compute="kernels") -> dict:
    """Every mapped point of the corpus (or of ``sources``), modelled (training rows with the
    ``compute`` model: ``"kernels"``, the library default, or ``"flat"``); the result dict that
    ``--json`` writes."""
    t0 = time.time()
    crow = [r for r in read_csv("collectives.csv") if not sources or r["source"] in sources]
    trows_all = list(enumerate(read_csv("training.csv")))
    trows = [(i, r) for i, r in trows_all if not sources or r["source"] in sources]
    cpoints = collective_points(crow)
    if quick:
        cpoints = _quick_collectives(cpoints)
        trows = _quick_training(trows)
    done = []
    for k, pt in enumerate(cpoints):
        done.append(run_collective(pt))
        if progress and k % 100 == 99:
            print(f"  ... {k + 1} / {len(cpoints)} collective points ({time.time() - t0:.0f} s)", file=sys.stderr)
    held = not quick and not sources
    p2p_share = _hold_out([p for p in done if p.get("status") == "ok"] if held else [])
    t1 = time.time()
    for k, (i, row) in enumerate(trows):
        done.append(run_training(row, i, compute))
        if progress and k % 50 == 49:
            print(f"  ... {k + 1} / {len(trows)} training rows ({time.time() - t0:.0f} s)", file=sys.stderr)
    t2 = time.time()
    coll = [p for p in done if p["kind"] == "collective"]
    train = [p for p in done if p["kind"] == "training"]
    result = dict(
        quick=quick, sources=sorted(sources) if sources else "all", collectives_held_out=held, compute=compute,
        p2p_share=p2p_share,
        runtime_s=dict(collectives=t1 - t0, training=t2 - t1, total=t2 - t0),
        collectives=dict(overall=overall(coll), **{name: summary(coll, key) for name, key in GROUPINGS["collective"]},
                         curve=summary(coll, lambda p: p["curve"])),
        training=dict(overall=overall(train), **{name: summary(train, key) for name, key in GROUPINGS["training"]}),
        counts={kind: {status: sum(p["status"] == status for p in pts) for status in ("ok", "excluded", "not_modelled")}
                for kind, pts in (("collective", coll), ("training", train))},
        points=done,
    )
    result["collective_rows_csv"] = len(crow)
    result["precision_pairs"] = precision_pairs(train, [r for _, r in trows_all]) if train else []
    lrows = loso_rows(done)
    result["loso"] = {}
    for name, (fit, predict) in {"model as is": (fit_nothing, predict_model),
                                 "median scale per (kind, size band)": (fit_band_scale, predict_band_scale)}.items():
        held = loso(lrows, fit, predict)
        per = defaultdict(list)
        for h in held:
            per[h["source"]].append(abs(h["err"]))
        result["loso"][name] = {s: (len(v), statistics.median(v)) for s, v in sorted(per.items())}
    return result


def print_report(result: dict, worst: int = 15, by_curve: bool = False) -> None:
    pts = result["points"]
    for kind, label in (("collective", "COLLECTIVES"), ("training", "TRAINING")):
        mine = [p for p in pts if p["kind"] == kind]
        if not mine:
            continue
        o = result["collectives" if kind == "collective" else "training"]["overall"]
        c = result["counts"][kind]
        unit = "points" if kind == "collective" else "rows"
        print(f"\n{label}: {len(mine)} {unit}: {c['ok']} compared, {c['excluded']} excluded, "
              f"{c['not_modelled']} not modelled")
        if kind == "collective":
            print("  errors held out: the chunk pipeline's constants refitted without each point's source"
                  if result.get("collectives_held_out") else
                  "  errors IN SAMPLE: the shipped pipeline constants were fitted on this corpus (the whole "
                  "corpus run reports them held out)")
            if share := result.get("p2p_share"):
                folds = ", ".join(f"{s} {v:.4f}" for s, v in share["folds"].items())
                print(f"  P2P channel's share of the NVLink rate: shipped {share['shipped']:.4f}, fitted "
                      f"{share['in_sample']:.4f}; without each source: {folds}")
        if o["n"]:
            print(f"  overall: median |err| {o['median_abs']:.1%}, bias {o['median']:+.1%}, within 10 %: "
                  f"{o['within_10']:.0%}, within 25 %: {o['within_25']:.0%}  (n = {o['n']})")
        for name, _ in GROUPINGS[kind]:
            _print_table(name, result["collectives" if kind == "collective" else "training"][name])
        if by_curve and kind == "collective":
            _print_table("curve", result["collectives"]["curve"])
        ok = sorted((p for p in mine if p["status"] == "ok"), key=lambda p: -abs(p["err"]))
        print(f"  {min(worst, len(ok))} worst:")
        for p in ok[:worst]:
            print(f"    {p['err']:+8.1%}  {describe_point(p)}")
        if kind == "collective":
            ip = [p for p in mine if p["status"] == "ok" and "err_in_place" in p]
            if ip:
                print(f"  against the in-place column instead ({len(ip)} points printing both): median |err| "
                      f"{statistics.median(abs(p['err_in_place']) for p in ip):.1%}")
        for status in ("excluded", "not_modelled"):
            reasons = defaultdict(list)
            for p in mine:
                if p["status"] == status:
                    reasons[p["reason"]].append(p.get("curve") or f"row {p['row']}")
            for reason, which in sorted(reasons.items()):
                names = sorted(set(which))
                shown = ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")
                print(f"  {status.replace('_', ' ').upper()} ({len(which)}): {reason} -- {shown}")
    pairs = result.get("precision_pairs") or []
    if pairs:
        ratio = [m / p for *_, p, m in pairs]
        print(f"\nFP8 / BF16 SPEED-UP on {len(pairs)} identical published jobs (model / published: median "
              f"{statistics.median(ratio):.2f}, range {min(ratio):.2f}-{max(ratio):.2f}):")
        for src, model, gpus, tag, p, m in sorted(pairs):
            print(f"    {src:26s} {model:16s} {gpus:5d} GPUs {tag:8s} published {p:4.2f}x  model {m:4.2f}x")
    print("\nLEAVE ONE SOURCE OUT (held-out median |err| per source):")
    for name, per in result["loso"].items():
        cells = ", ".join(f"{s} {m:.0%} ({n})" for s, (n, m) in per.items())
        print(f"  {name}: {cells}")
    rt = result["runtime_s"]
    print(f"\nruntime: collectives {rt['collectives']:.0f} s, training {rt['training']:.0f} s, total {rt['total']:.0f} s")


def _jsonable(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="a subset of every curve and source (< 1 minute)")
    parser.add_argument("--source", action="append", metavar="NAME", help="only this source (repeatable)")
    parser.add_argument("--json", metavar="PATH", help="write the summary and every point as JSON")
    parser.add_argument("--plot", metavar="DIR", help="one figure per source: busbw / published against the model")
    parser.add_argument("--worst", type=int, default=15, help="how many worst cases to list per kind")
    parser.add_argument("--by-curve", action="store_true", help="also print the collectives' medians per curve")
    parser.add_argument("--compute", choices=S.COMPUTE_MODELS, default="kernels",
                        help="training compute model: the kernel tables (compute_efficiency=None, the library "
                             "default), or the flat efficiency (DEFAULT_COMPUTE_EFFICIENCY)")
    parser.add_argument("--cache-dir", metavar="DIR", default=None,
                        help="JAX compilation cache folder (default $FLOWSOLVER_CACHE_DIR; none when unset)")
    args = parser.parse_args(argv)
    known = {r["source"] for r in read_csv("sources.csv")}
    if args.source and not set(args.source) <= known:
        parser.error(f"unknown source(s) {sorted(set(args.source) - known)}; known: {', '.join(sorted(known))}")
    cache = args.cache_dir or default_cache_dir()
    if cache:
        compilation_cache(cache)
    result = run(set(args.source) if args.source else None, quick=args.quick, progress=True, compute=args.compute)
    print_report(result, args.worst, args.by_curve)
    if args.json:
        Path(args.json).write_text(json.dumps(_jsonable(result), indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        paths = plot(result["points"], Path(args.plot))
        print(f"wrote {len(paths)} figures to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
