"""Everything issue 31 asks of a GPU, measured in one call (at most about 5 minutes), each row
beside the CPU figure of the same machine.

    python benchmarks/gpu.py                       # every section, table + JSON
    python benchmarks/gpu.py --json out.json       # where the JSON goes (default gpu.json)
    python benchmarks/gpu.py --only solver,batch   # some sections
    python benchmarks/gpu.py --quick               # small sizes (a smoke run, e.g. on a CPU)

Sections: ``solver`` (fat_tree(12) and (16) all-to-all: methods x dtypes after compilation,
rounds, the rates' largest relative difference from the CPU's), ``round`` (a dense round's
time and the fixed cost per call), ``equal`` (1 M independent equal bottlenecks),
``batch`` (failure scenarios of a 1024-GPU ring, 1,024 to 65,536 a call, with the device's
peak memory and the host's own time per scenario, :func:`host_seconds`; on this repository's
2-core CPU, with the gathers around the kernel replayed too, 57-93 us a scenario, 81-145
before the host's gathers and padding moved to the device: ``benchmarks/batch_host.py``),
``large`` (16.7 M flows), ``e2e`` (a Llama-3-405B step on 16,384 GPUs and the default
all-to-all over 4,096 GPUs in fresh processes, with and without a warm compilation cache),
``reduce`` (segment reductions of the dense round in isolation: what a round's pieces cost
on this device, beside the layout whose padding entries all went to one link). Sections run
in this order: solver, round, reduce, equal, batch, e2e, large.

The CPU figures come from ``jax.devices("cpu")`` in the same process (``device="cpu"``);
on a machine without an accelerator both columns are the CPU. Targets (issue 31, one H200):
fat_tree(16) float64 <= 60 ms, a dense round <= 100 us, 1 M equal bottlenecks <= 5 ms,
16.7 M flows <= 1.5 s, >= 50,000 failure scenarios/s and 65,536 in one call, every
end-to-end row at least as fast as the CPU, a fresh process's first 16,384-GPU step <= 3 s
with a warm compilation cache.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

import flowsolver as fs  # noqa: E402
import topologies as tp  # noqa: E402

ROWS: list[dict] = []
START = time.perf_counter()
#: stop starting new sections past this many seconds (the call's budget is 5 minutes)
BUDGET_S = 285.0


def row(section, work, device_s=None, cpu_s=None, unit="s", target=None, **extra):
    """Record and print one table row (times in seconds unless ``unit`` says otherwise)."""
    r = dict(section=section, work=work, device=device_s, cpu=cpu_s, unit=unit, target=target, **extra)
    ROWS.append(r)
    fmt = (lambda v: "-" if v is None else f"{v * 1e3:9.2f} ms" if unit == "s" else f"{v:12.0f}")
    ratio = f"{cpu_s / device_s:6.2f}x" if unit == "s" and device_s and cpu_s else ""
    more = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"  {work:58s} dev {fmt(device_s)}  cpu {fmt(cpu_s)} {ratio} {more}", flush=True)


def best(fn, repeat=3):
    """(result, best wall time of ``repeat`` calls after one warm-up call)."""
    out = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, min(times)


def accel() -> bool:
    return jax.default_backend() != "cpu"


def solve(rm, device, **kw):
    """``device``: "cpu" (this machine's CPU) or "device" (the accelerator where there is one)."""
    return fs.max_min_fair(rm, device="cpu" if device == "cpu" else "accelerator" if accel() else "auto", **kw)


@functools.lru_cache(maxsize=2)
def all_to_all(k):
    """fat_tree(k)'s all-to-all routed once (the solver, round and reduce sections share it)."""
    g = tp.fat_tree(k)
    n = len(tp.gpus(g))
    t = time.perf_counter()
    rm = fs.route(g, fs.Flows.all_to_all(n, 1e6), policy="ecmp_hash")
    return rm, time.perf_counter() - t


# --------------------------------------------------------------------------- sections
def section_solver(quick):
    for k in ((6, 8) if quick else (12, 16)):
        rm, t_route = all_to_all(k)
        print(f"fat_tree({k}) all-to-all: {rm.n_flows:,} flows, {rm.n_links:,} links, routed in {t_route:.1f} s")
        ref, t_cpu = best(lambda: solve(rm, "cpu"), repeat=2)
        ref_rates = np.asarray(ref.rates, np.float64)
        for method in ("auto", "dense", "frontier"):
            for dtype in ("float64", "float32"):
                if method == "frontier" and dtype == "float32":
                    continue
                a, t = best(lambda: solve(rm, "device", method=method, dtype=dtype))
                diff = float(np.max(np.abs(np.asarray(a.rates, np.float64) - ref_rates) / ref_rates))
                row("solver", f"fat_tree({k}) {method} {dtype}", t, t_cpu if (method, dtype) == ("auto", "float64")
                    else None, target=0.060 if (k, method, dtype) == (16, "auto", "float64") else None,
                    rounds=int(a.rounds), rel_diff=f"{diff:.1e}", ok=bool(a.converged))


def section_round(quick):
    rm, _ = all_to_all(8 if quick else 16)
    out = {}
    for n in (1, 11):
        _, out[n] = best(lambda: solve(rm, "device", method="dense", max_rounds=n, compact=False))
    per_round = (out[11] - out[1]) / 10
    row("round", f"dense round, {rm.n_flows:,} flows (from 1 and 11 rounds)", per_round, target=100e-6)
    row("round", "dense fixed cost per call", out[1] - per_round)
    import copy

    _, same = best(lambda: solve(rm, "device", method="frontier"))
    _, fresh = best(lambda: solve(copy.copy(rm), "device", method="frontier"))
    row("round", "frontier, same matrix again (layout kept)", same)
    row("round", "frontier, a new matrix (host set-up included)", fresh)


def section_equal(quick):
    import scipy.sparse as sp

    n = 1 << (14 if quick else 20)
    rm = fs.RoutingMatrix.from_scipy(sp.identity(n, format="csc"), np.full(n, 50e9))
    _, t = best(lambda: solve(rm, "device"))
    _, t_cpu = best(lambda: solve(rm, "cpu"))
    row("equal", f"{n:,} independent equal bottlenecks", t, t_cpu, target=0.005)


def failure_caps(rm, batch, seed=0, fraction=0.01):
    rng = np.random.default_rng(seed)
    fail = max(1, int(round(fraction * rm.n_links)))
    caps = np.tile(rm.capacity, (batch, 1))
    idx = rng.integers(0, rm.n_links, (batch, fail))          # about 1 %: a repeat now and then
    np.put_along_axis(caps, idx, 0.0, axis=1)
    return caps


def device_peak():
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def host_seconds(call, repeat=1, replay=("_JITTED",)):
    """Best wall seconds over ``repeat`` calls of ``call()`` (a batched solve) with the ``replay``
    functions of ``flowsolver.solver._batch`` (the kernel; also ``"_prepare"``, ``"_layout"``: the
    gathers around it) and the sharded kernel answered from a recording of the same call (fresh
    device copies of their results): the host's own work (checks, transfers both ways, copies of
    the rows) and whatever is not replayed, without the solve. Returns (seconds, what the real
    call returned)."""
    from flowsolver.solver import _batch

    real = {name: getattr(_batch, name) for name in (*replay, "_batch_sharded")}
    recorded, queue = [], []

    def recording(fn):
        def call_fn(*a, **k):
            if queue:
                return queue.pop(0)
            out = jax.block_until_ready(fn(*a, **k))
            recorded.append(out)
            return out
        return call_fn

    for name in replay:
        setattr(_batch, name, recording(real[name]))
    _batch._batch_sharded = lambda *a: (lambda fn, *put: (recording(fn), *put))(*real["_batch_sharded"](*a))
    try:
        out = call()
        best = np.inf
        for _ in range(repeat):
            # fresh device copies: the timed call copies them to the host as it would the real ones
            queue[:] = jax.block_until_ready([jax.tree.map(lambda x: x.copy(), o) for o in recorded])
            t = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t)
        return best, out
    finally:
        for name, fn in real.items():
            setattr(_batch, name, fn)


def section_batch(quick):
    g = tp.rail_optimized(16 if quick else 128)
    n = len(tp.gpus(g))
    rm = fs.route(g, fs.Flows.ring(n, 1e9))
    from flowsolver.solver import _batch
    from flowsolver.solver._problem import CompactRouting

    full = CompactRouting.of(rm)
    used = np.unique(full.seg_link[full.seg_frac > 0])
    sizes = (*full.on_links(used).buckets(len(used), coarse=False), full.flow_seg.shape[1], rm.n_links)
    print(f"failure scenarios: ring over {n} GPUs, {rm.n_links:,} links ({len(used):,} used), 1 % failed per "
          f"scenario; padded sizes (links, flows, segments, entries, K, all links) {sizes}: "
          f"{_batch.bytes_per_scenario(sizes) / 1024:.0f} KiB a scenario estimated")
    caps = failure_caps(rm, 1024)
    _, t_cpu = best(lambda: solve(rm, "cpu", capacity=caps), repeat=1)
    _, t_cpu_rates = best(lambda: solve(rm, "cpu", capacity=caps, per_link=False), repeat=1)
    for batch in ((256, 1024) if quick else (1024, 4096, 16384, 65536)):
        if time.perf_counter() - START > BUDGET_S - 30:
            print(f"  (batch {batch} skipped: budget)")
            break
        caps = failure_caps(rm, batch)
        try:
            a, t = best(lambda: solve(rm, "device", capacity=caps), repeat=1)
        except Exception as exc:   # noqa: BLE001 - the row reports what failed
            row("batch", f"{batch:,} scenarios float64", None, None, unit="scenarios/s", error=repr(exc)[:160])
            continue
        ok = int(np.sum(np.asarray(a.status) == 0))
        try:                        # the replay holds every call's results on the device at once
            host, _ = host_seconds(lambda: solve(rm, "device", capacity=caps))
        except Exception:           # noqa: BLE001 - the row still reports the throughput
            host = float("nan")
        row("batch", f"{batch:,} scenarios float64", batch / t, 1024 / t_cpu if batch == 1024 else None,
            unit="scenarios/s", target=50_000, ok=f"{ok}/{batch}", rounds=int(np.max(a.rounds)),
            chunk=_batch.chunk_size(batch, sizes, 1, _batch.free_memory()),
            peak_MB=None if device_peak() is None else round(device_peak() / 2**20),
            host_us_per_scenario=round(host / batch * 1e6, 1))
        # rates and bottlenecks only (per_link=False): no per-link rows laid out or copied back
        try:
            b, t2 = best(lambda: solve(rm, "device", capacity=caps, per_link=False), repeat=1)
            same = bool(np.array_equal(b.rates, a.rates))
            host2, _ = host_seconds(lambda: solve(rm, "device", capacity=caps, per_link=False))
        except Exception as exc:   # noqa: BLE001 - the row reports what failed
            row("batch", f"{batch:,} scenarios float64, per_link=False", None, None, unit="scenarios/s",
                error=repr(exc)[:160])
            continue
        row("batch", f"{batch:,} scenarios float64, per_link=False", batch / t2,
            1024 / t_cpu_rates if batch == 1024 else None, unit="scenarios/s", target=50_000,
            rates_equal=same, host_us_per_scenario=round(host2 / batch * 1e6, 1))
    caps = failure_caps(rm, 1024)
    _, t = best(lambda: solve(rm, "device", capacity=caps, dtype="float32"), repeat=1)
    row("batch", "1,024 scenarios float32", 1024 / t, unit="scenarios/s")


def section_large(quick):
    g = tp.rail_optimized(64 if quick else 512)
    n = len(tp.gpus(g))
    t = time.perf_counter()
    rm = fs.route(g, fs.Flows.all_to_all(n, 1e6), policy="ecmp_hash")
    t_route = time.perf_counter() - t
    t = time.perf_counter()
    a = solve(rm, "device")
    first = time.perf_counter() - t
    t = time.perf_counter()
    a = solve(rm, "device")
    again = time.perf_counter() - t
    solve(rm, "cpu")                 # compiles for the CPU device
    t = time.perf_counter()
    solve(rm, "cpu")
    t_cpu = time.perf_counter() - t
    row("large", f"{rm.n_flows:,} flows solve (again; first {first:.2f} s)", again, t_cpu, target=1.5,
        rounds=int(a.rounds), route_s=round(t_route, 1))


CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import topologies as tp
from flowsolver import Parallelism, collective, training_step
kind, nodes = sys.argv[1], int(sys.argv[2])
g = tp.rail_optimized(nodes)
def once():
    if kind == "train":
        return training_step(g, "llama-3-405b", Parallelism(tp=8, pp=16, dp=nodes // 16)).step_time
    return collective(g, "all_to_all", 2**20 * (8 * nodes - 1)).time
times = []
for _ in range(2):
    t = time.perf_counter()
    result = once()
    times.append(time.perf_counter() - t)
import jax
print(json.dumps(dict(first=times[0], again=times[1], result=result, backend=jax.default_backend(),
                      total=time.perf_counter() - t0)))
"""


def child(kind, nodes, env_extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    done = subprocess.run([sys.executable, "-c", CHILD, kind, str(nodes)], capture_output=True, text=True, env=env,
                          timeout=240)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def section_e2e(quick):
    cases = (("train", 64, "Llama-3-405B step, 512 GPUs"), ("a2a", 16, "default all-to-all, 128 GPUs")) if quick \
        else (("train", 2048, "Llama-3-405B step, 16,384 GPUs"), ("a2a", 512, "default all-to-all, 4,096 GPUs"))
    with tempfile.TemporaryDirectory() as cache:
        for kind, nodes, name in cases:
            if time.perf_counter() - START > BUDGET_S - 40:
                print(f"  ({name} skipped: budget)")
                continue
            off = {"FLOWSOLVER_CACHE_DIR": "off"}
            dev = child(kind, nodes, off)
            cpu = child(kind, nodes, dict(off, JAX_PLATFORMS="cpu"))
            row("e2e", f"{name}: first call, fresh process", dev.get("first"), cpu.get("first"),
                **({"error": dev["error"]} if "error" in dev else {}))
            row("e2e", f"{name}: again", dev.get("again"), cpu.get("again"))
            if kind == "train":
                warm = {"FLOWSOLVER_CACHE_DIR": cache}               # the solver's own default cache, here
                child(kind, nodes, warm)                            # fills the cache
                hot = child(kind, nodes, warm)
                row("e2e", f"{name}: first call, warm compilation cache", hot.get("first"), None, target=3.0,
                    **({"error": hot["error"]} if "error" in hot else {}))


def section_reduce(quick):
    """The dense round's segment reductions in isolation, on the real structure of a
    fat_tree all-to-all: each variant x 20 inside one jitted loop, per call."""
    import jax.numpy as jnp
    from flowsolver.solver._problem import CompactRouting

    rm, _ = all_to_all(8 if quick else 16)
    seg = CompactRouting.of(rm)
    sizes = seg.buckets(rm.n_links)
    Lp, Np, Sp, Ep = sizes
    el, es, ef, ss, _ = seg.padded(sizes, rm.n_links)
    K = ss.shape[1]
    flat = ss.reshape(-1)
    order = np.argsort(flat, kind="stable").astype(np.int32)
    print(f"structure: Np={Np:,} K={K} Sp={Sp:,} Ep={Ep:,} Lp={Lp:,}; slots/segment max "
          f"{np.bincount(flat).max():,}, segments/link max {np.bincount(el).max():,}")
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(0).random(Np))
        flat_j, order_j, sorted_j = jnp.asarray(flat), jnp.asarray(order), jnp.asarray(flat[order])
        es_j, el_j, ef_j = jnp.asarray(es), jnp.asarray(el), jnp.asarray(ef)
        flow_of_sorted = jnp.asarray((order // K).astype(np.int32))

        def scatter(v):
            return jax.ops.segment_sum(jnp.repeat(v, K), flat_j, Sp)

        def scatter_sorted(v):
            return jax.ops.segment_sum(v[flow_of_sorted], sorted_j, Sp, indices_are_sorted=True)

        def blocked(block):
            M = len(order)
            Mp = -(-M // block) * block
            ids = np.full(Mp, Sp, np.int32)
            ids[:M] = flat[order]
            src = np.zeros(Mp, np.int32)
            src[:M] = order // K
            ids_j, src_j = jnp.asarray(ids.reshape(-1, block)), jnp.asarray(src.reshape(-1, block))
            tail = np.ones_like(ids, dtype=bool).reshape(-1, block)
            tail[:, :-1] = ids.reshape(-1, block)[:, 1:] != ids.reshape(-1, block)[:, :-1]
            drop_j = jnp.asarray(np.where(tail, ids.reshape(-1, block), Sp + 1).reshape(-1))

            def fn(v):
                y = jnp.where(ids_j < Sp, v[src_j], 0.0)
                d = 1
                while d < block:
                    prev = jnp.pad(y[:, :-d], ((0, 0), (d, 0)))
                    same = jnp.pad(ids_j[:, :-d], ((0, 0), (d, 0)), constant_values=-1) == ids_j
                    y = y + jnp.where(same, prev, 0.0)
                    d *= 2
                return jax.ops.segment_sum(y.reshape(-1), drop_j, Sp, indices_are_sorted=True)
            return fn

        def seg_to_link(s, links=el_j):
            return jax.ops.segment_sum(ef_j * s[es_j], links, Lp)

        # the layout before padding was spread: every padding entry onto one link
        one_pad_j = jnp.asarray(np.where(ef > 0, el, Lp - 1).astype(np.int32))

        def seg_min(v):
            return jax.ops.segment_min(jnp.repeat(v, K), flat_j, Sp)

        def gather_only(v):
            return jnp.sum(v[flat_j // K] * 2.0)

        variants = {"gather (bandwidth reference)": gather_only, "slot->segment sum (scatter)": scatter,
                    "slot->segment sum (sorted scatter)": scatter_sorted,
                    "slot->segment sum (blocked 32)": blocked(32), "slot->segment sum (blocked 256)": blocked(256),
                    "segment->link sum (scatter)": lambda v: seg_to_link(scatter(v)),
                    "segment->link sum (padding on one link)": lambda v: seg_to_link(scatter(v), one_pad_j),
                    "slot->segment min (scatter)": seg_min}
        ref = np.asarray(scatter(x))
        for name, fn in variants.items():
            def loop(v, fn=fn):
                def body(i, acc):
                    return acc + jnp.sum(fn(v + i * 1e-9))
                return jax.lax.fori_loop(0, 20, body, 0.0)
            jitted = jax.jit(loop)
            _, t = best(lambda: jitted(x).block_until_ready())
            agree = ""
            if "sum" in name and "->link" not in name:
                got = np.asarray(jax.jit(fn)(x))
                agree = f"{float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300))):.1e}"
            row("reduce", name, t / 20, None, agree=agree)


SECTIONS = {"solver": section_solver, "round": section_round, "reduce": section_reduce, "equal": section_equal,
            "batch": section_batch, "e2e": section_e2e, "large": section_large}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--json", default="gpu.json", help="where to write the rows")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds after which no section starts")
    args = ap.parse_args(argv)
    globals()["BUDGET_S"] = args.budget
    os.environ.setdefault("FLOWSOLVER_CACHE_DIR", "off")     # compile times stay in the first-call figures
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}")
    for name in args.only.split(","):
        if name not in SECTIONS:
            raise SystemExit(f"--only: unknown section {name!r}; choose from {', '.join(SECTIONS)}")
        if time.perf_counter() - START > BUDGET_S:
            print(f"== {name}: skipped (past the {BUDGET_S:.0f} s budget)")
            continue
        print(f"== {name}", flush=True)
        try:
            SECTIONS[name](args.quick)
        except Exception as exc:   # noqa: BLE001 - one section's failure must not lose the others
            import traceback
            traceback.print_exc()
            row(name, "section failed", None, None, error=repr(exc)[:200])
    Path(args.json).write_text(json.dumps(dict(jax=jax.__version__, backend=jax.default_backend(),
                                               device=str(jax.devices()[0]), wall_s=time.perf_counter() - START,
                                               rows=ROWS), indent=1, default=str))
    print(f"\n{'section':8s} {'work':58s} {'device':>12s} {'cpu':>12s} target")
    for r in ROWS:
        f = (lambda v: "-" if v is None else (f"{v * 1e3:.2f} ms" if r["unit"] == "s" else f"{v:,.0f}/s"))
        t = "" if r["target"] is None else (f"<= {r['target'] * 1e3:g} ms" if r["unit"] == "s" else f">= {r['target']:,}/s")
        print(f"{r['section']:8s} {r['work'][:58]:58s} {f(r['device']):>12s} {f(r['cpu']):>12s} {t}")
    print(f"wall {time.perf_counter() - START:.0f} s; rows in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
