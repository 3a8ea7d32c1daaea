"""A fixed set of outputs for before/after comparisons of a refactor (issue 14 used it:
161 outputs, identical within 1e-12 relative before and after the redesign).

    python benchmarks/outputs_snapshot.py write before.json     # on the old commit
    python benchmarks/outputs_snapshot.py write after.json      # on the new one
    python benchmarks/outputs_snapshot.py compare before.json after.json

Covers every collective op at three sizes on six graphs and every algorithm, variants,
concurrent and lockstep runs, five training configurations and their recompose, both
solver methods, completion times, describe() and every printed line of the quick study.
"""
import hashlib
import json
import math
import sys
import numpy as np
import topologies as tp
import flowsolver as fs
from flowsolver import collective, collective_variants, concurrent, training_step, max_min_fair, completion_times, route, Flows

POL = "policy"

def compare(a_path, b_path) -> int:
    """Every output equal, numbers within 1e-12 relative; prints the differences."""
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    bad = []

    def eq(x, y, path):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12 * max(abs(x), abs(y))):
                bad.append(f"{path}: {x!r} != {y!r}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                eq(u, v, f"{path}[{i}]")
        elif isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys():
            for k in x:
                eq(x[k], y[k], f"{path}.{k}")
        elif x != y:
            bad.append(f"{path}: {str(x)[:200]!r} != {str(y)[:200]!r}")

    eq(a, b, "")
    exact = sum(1 for k in a if k in b and a[k] == b[k])
    print("\n".join(bad[:40]) if bad else f"IDENTICAL ({exact} of {len(a)} bit for bit)")
    return 1 if bad else 0


def write(path) -> int:
    out = {}

    def h(a):
        a = np.asarray(a, float)
        return [float(np.nansum(a)), float(np.nanmax(a)) if a.size else 0.0, hashlib.sha1(np.round(a, 9).tobytes()).hexdigest()[:12]]

    def bt(b):
        # bottleneck entries (src, dst, tier, util) as strings
        return [str((x.src, x.dst, x.tier) if hasattr(x, "tier") else tuple(x[:3])) for x in b][:3]

    graphs = {"ro2": tp.rail_optimized(2), "ft4": tp.fat_tree(4), "df": tp.dragonfly(4, 2, 2) if True else None,
              "torus": tp.torus((4, 4)), "ro1": tp.rail_optimized(1), "pcie": tp.rail_optimized(2, server="pcie_8gpu")}
    for gname, g in graphs.items():
        for op in fs.OPS:
            for size in (1e3, 2**20, 2**30):
                key = f"coll/{gname}/{op}/{size:g}"
                try:
                    r = collective(g, op, size)
                    out[key] = dict(alg=r.algorithm, t=r.time, busbw=r.busbw, cand=sorted((k, v) for k, v in r.candidates.items()),
                                    steps=[(s.count, s.flows, s.bytes, s.transfer, s.latency, bt(s.bottleneck)) for s in r.steps],
                                    util=h(r.link_utilization))
                except Exception as e:
                    out[key] = "ERR " + type(e).__name__ + str(e)[:80]
    g = graphs["ro2"]
    for op, algs in fs.ALGORITHMS.items():
        for alg in algs:
            key = f"alg/{op}/{alg}"
            try:
                r = collective(g, op, 2**24, algorithm=alg, **{POL: "ecmp_hash"}, protocol="LL128")
                out[key] = [r.time, r.busbw]
            except Exception as e:
                out[key] = "ERR " + type(e).__name__
    out["variants"] = [[r.time, r.busbw] if hasattr(r, "time") else str(r) for r in
                       collective_variants([tp.rail_optimized(2), tp.rail_optimized(2, link="ib_hdr")], "all_reduce", 2**30)]
    c = concurrent(g, [dict(op="all_reduce", size=2**26, ranks=range(0, 16, 2), algorithm="ring"),
                       dict(op="all_to_all", size=2**24, ranks=range(1, 16, 2)), dict(op="broadcast", size=2**22, ranks=range(4), algorithm="binomial")])
    out["concurrent"] = [list(map(float, c.alone)), list(map(float, c.together)), float(c.makespan)]
    c = concurrent(g, [dict(op="all_reduce", size=2**26, ranks=range(0, 16, 2)), dict(op="all_reduce", size=2**26, ranks=range(1, 16, 2))], lockstep=True)
    out["lockstep"] = [list(map(float, c.alone)), list(map(float, c.together)), float(c.makespan)]

    d = tp.default_cluster()
    cfgs = [dict(tp=8), dict(tp=8, pp=2), dict(tp=4, pp=2, zero=3), dict(tp=8, dp_overlap=0.5, global_batch=1024), dict(tp=2, pp=4, zero=0)]
    for i, cfg in enumerate(cfgs):
        s = training_step(d, **cfg)
        out[f"train/{i}"] = dict(step=s.step_time, tps=s.tokens_per_s, sp=s.speedup, ov=s.comm_overhead, mem=s.memory_per_gpu,
                                bd={k: float(v) for k, v in s.breakdown.items()}, mfu=s.achieved_mfu)
        r = s.recompose(global_batch=2048, dp_overlap=0.25)
        out[f"train/{i}/re"] = [r.step_time, r.tokens_per_s]
    s = training_step(tp.rail_optimized(4), model="mixtral-8x7b", tp=4, ep=2, collective_options={POL: "ecmp_hash"}) if "mixtral-8x7b" in fs.MODELS else None
    if s is not None:
        out["train/moe"] = [s.step_time, s.tokens_per_s]
    # solver
    ft = tp.fat_tree(8)
    rm = route(ft, Flows.permutation(len(tp.gpus(ft)), size=1.0, seed=3))
    for m in ("dense", "frontier"):
        a = max_min_fair(rm, method=m)
        out[f"solve/{m}"] = h(a.rates)
    ct = completion_times(rm, np.linspace(1e6, 5e6, rm.n_flows) if hasattr(rm, "n_flows") else None)
    out["completion"] = [float(ct.makespan), h(ct.finish)]
    # describe
    out["describe"] = {k: str(v) for k, v in tp.describe(tp.default_cluster()).items()}
    # study quick
    lines = []
    fs.study.run(out=None, quick=True, echo=lines.append)
    out["study"] = lines
    json.dump(out, open(path, "w"), indent=1, sort_keys=True, default=str)
    print(len(out), "outputs")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        sys.exit(write(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    sys.exit(__doc__)
