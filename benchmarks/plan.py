"""flowsolver.plan's speed and its answers against the published layouts.

    python benchmarks/plan.py               # 405B on 16,384 GPUs, 70B on 1,024, the published runs
    python benchmarks/plan.py --targets     # only the two speed targets
    python benchmarks/plan.py --published   # only the published runs
    python benchmarks/plan.py --max-solves N  # a solve budget for the 405B search (default none: proven)
    python benchmarks/plan.py --published --slow   # with the Llama 3 paper's 8,192- and 16,384-GPU rows
    python benchmarks/plan.py --placement   # a 256-GPU job on a 1,024-GPU cluster, by placement policy

Speed targets (issue 32): Llama 3 405B on 16,384 H100 (rail_optimized, 2,048 DGX H100 on
InfiniBand NDR), every feasible layout bounded and the exact top 20 timed in < 60 s; a 70 B model
on 1,024 GPUs in < 10 s; peak memory < 4 GiB (the process's peak resident set, printed).

Published runs: each row of tests/training/test_training_published.py (the runs the model is checked
against) and each training.csv row with a layout (benchmarks/validation): is the published
layout feasible in the model (memory estimate <= the GPU's memory), and is plan's best layout,
searched with the run's own fixed settings (precision, batch, sequence, compute model; 12
profile solves, 80 when the plan is still behind), at least as fast in the model as the
published layout. A published layout that comes out infeasible, or
far behind the plan, is a finding about the model, printed as such. The published runs are
planned on their GPU's memory as NVML reports it (H100 81,559 MiB = 85.52e9 bytes, A100 80GB
81,920 MiB; the datasheet's "80 GB" is 80 GiB less the driver's reserve:
benchmarks/validation/memory.csv cites it; validation/setups.NVML_MEMORY), the capacity those
runs had; the fit against the GpuSpec's bytes is printed beside it.
"""

from __future__ import annotations

import csv
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dataclasses  # noqa: E402

import topologies as tp  # noqa: E402
from flowsolver import plan, training_step  # noqa: E402
from flowsolver.training import checked_gpu, step_arguments  # noqa: E402
from validation.setups import NVML_MEMORY  # noqa: E402
from flowsolver.planning import STEP_OPTIONS  # noqa: E402


SEARCHED = ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "recompute", "zero", "order", "sequence_parallel")


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2 ** 30      # Linux: KiB


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} on {os.cpu_count()} CPUs"


def targets(max_solves: int | None) -> None:
    for label, nodes, model, batch, solves, tolerance, target in (
            ("Llama 3 405B, 16,384 H100", 2048, "llama-3-405b", 2048, max_solves, 0.0, 60),
            ("Llama 3 70B, 1,024 H100", 128, "llama-3-70b", 2048, None, 0.0, 10),
            ("Llama 3 70B, 1,024 H100, top 20 within 1 %", 128, "llama-3-70b", 2048, None, 0.01, 10)):
        g = tp.rail_optimized(nodes)
        print(f"\n## {label} (rail_optimized, ib_ndr), global batch {batch}; {_load()}", flush=True)
        t = time.perf_counter()
        p = plan(g, model=model, global_batch=batch, top=20, max_solves=solves, tolerance=tolerance)
        wall = time.perf_counter() - t
        print(p)
        print(f"wall {wall:.1f} s (target < {target} s); peak resident memory {_peak_gib():.2f} GiB "
              f"(target < 4 GiB); {p.profiles_solved} profiles, {p.kinds_solved} kinds in {p.solver_calls} solver "
              f"calls (load-independent); {_load()}", flush=True)
        if not p.proven:
            print(f"not proven within {solves} profile solves: the 20th row {p.rows[-1].step_time:.3f} s, the best "
                  f"layout not timed is bounded at {p.next_bound:.3f} s")


def _compare(name, graph, kw) -> str:
    """A published layout in the model against plan's best with the same fixed settings."""
    gpu = kw["gpu"] if "gpu" in kw else checked_gpu(graph, None)      # the run's, else the cluster's
    datasheet = gpu.memory
    kw = dict(kw, gpu=dataclasses.replace(gpu, memory=NVML_MEMORY.get(gpu.name, gpu.memory)))
    pub = training_step(graph, **step_arguments(**kw))
    fixed = {k: v for k, v in kw.items() if k in STEP_OPTIONS}
    rest = {k: kw[k] for k in ("model", "global_batch", "seq_len", "precision", "gpu") if k in kw}
    t = time.perf_counter()
    p = plan(graph, top=1, max_solves=12, **rest, **fixed)
    if p.rows and p.best.step_time > pub.step_time * (1 + 1e-9) and not p.proven:
        p = plan(graph, top=1, max_solves=80, **rest, **fixed)      # behind within 12 solves: search on
    wall = time.perf_counter() - t
    best = p.best if p.rows else None
    verdict = ("plan faster or equal" if best and best.step_time <= pub.step_time * (1 + 1e-9) else
               "PLAN BEHIND (search budget or model)" if best else "NO FEASIBLE LAYOUT FOUND")
    gap = f"{best.step_time / pub.step_time - 1:+7.1%}" if best else "   n/a"
    sheet = "yes" if pub.memory_per_gpu <= datasheet else "NO "
    return (f"{name:34s} fits {'yes' if pub.fits else 'NO '} ({sheet} in {datasheet / 1e9:.0f} GB) "
            f"{pub.memory_per_gpu / 1e9:6.1f} GB  published "
            f"{pub.step_time:8.3f} s  plan {best.step_time if best else float('nan'):8.3f} s {gap}  "
            f"{'proven' if p.proven else 'budget'} {wall:5.1f} s  {verdict}\n"
            f"{'':34s} plan's best: {best.layout.label if best else '-'}")


def published(include_slow: bool) -> None:
    from tests.training.test_training_published import ROWS, SLOW

    print(f"\n## published runs of tests/training/test_training_published.py; {_load()}", flush=True)
    for name, (nodes, kw, _) in ROWS.items():
        if name in SLOW and not include_slow:
            print(f"{name:34s} (8,192+ GPUs: --slow to run)")
            continue
        kw = dict(kw)
        print(_compare(name, tp.rail_optimized(nodes), kw), flush=True)

    import validation.setups as S

    print(f"\n## training.csv rows with a layout: feasibility in the model (memory estimate <= the GPU's memory as "
          f"NVML reports it)", flush=True)
    path = Path(__file__).resolve().parent / "validation" / "training.csv"
    rows = list(csv.DictReader(path.open()))
    seen, infeasible, checked, compared = set(), [], 0, 0
    for index, row in enumerate(rows):
        try:
            found = S.layout_memory(row)
        except ValueError:
            continue
        if found is None:
            continue
        m, gpu_memory, kw = found
        checked += 1
        cluster = S.training_call(row)[0]
        c, gpus, spec = S.CLUSTERS[cluster], int(row["gpus"]), kw["model"]
        key = (row["source"], spec.name, gpus, kw.get("tp", 1), kw.get("pp", 1), kw.get("cp", 1), kw["dp"],
               kw.get("vp", 1), kw.get("micro_batch", 1), kw["global_batch"], kw["precision"])
        if m > gpu_memory:
            infeasible.append(f"  {row['source']} {spec.name} {gpus} GPUs TP{kw.get('tp', 1)} PP{kw.get('pp', 1)} "
                              f"CP{kw.get('cp', 1)} DP{kw['dp']} VP{kw.get('vp', 1)} mb{kw.get('micro_batch', 1)} "
                              f"zero{kw.get('zero', 1)} {kw.get('recompute', 'selective')}: {m / 1e9:.1f} GB > "
                              f"{gpu_memory / 1e9:.0f} GB (row {index})")
        if gpus <= 64 and key not in seen and "--csv-plan" in sys.argv:
            seen.add(key)
            compared += 1
            print(_compare(f"{row['source'][:14]} {spec.name[:10]} {gpus}", c.graph(S.servers_for(cluster, gpus)),
                           kw), flush=True)
    print(f"{checked} rows checked, {len(infeasible)} published layouts over the GPU's memory in the model:")
    print("\n".join(infeasible) or "  none")


def placement() -> None:
    """Llama 3 8B on 256 GPUs (32 servers) of a 1,024-GPU cluster (4 scalable units of 32
    servers, spines 4:1 oversubscribed), the DP communication not overlapped (dp_overlap 0, so
    that the network shows), the best layout per placement policy."""
    g = tp.rail_optimized(128, oversubscription=4.0)
    print(f"\n## placement: llama-3-8b, 256 of 1,024 GPUs (4:1 spines), global batch 256, dp_overlap 0; "
          f"{_load()}", flush=True)
    t = time.perf_counter()
    p = plan(g, model="llama-3-8b", global_batch=256, top=40, gpus=256, cp=1, zero=1, micro_batch=1,
             recompute="selective", sequence_parallel=True, vp=1, pp=(1, 2), tp=(1, 8), dp_overlap=0.0,
             placement=("packed", "rail_aligned", "spread", "rail_unaligned"))
    print(f"{p.summary()}\nwall {time.perf_counter() - t:.1f} s")
    best = {}
    for row in p.timed:
        best.setdefault(row.layout.placement, row)
    print(p.table(sorted(best.values(), key=lambda r: r.step_time)))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    solves = int(argv[argv.index("--max-solves") + 1]) if "--max-solves" in argv else None
    if "--placement" in argv:
        placement()
        return 0
    if "--published" not in argv:
        targets(solves)
    if "--targets" not in argv:
        published("--slow" in argv)
    print(f"\npeak resident memory {_peak_gib():.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
