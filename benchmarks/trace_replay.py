"""A 1,024-rank Chakra trace of one training iteration, written by our writer, read back and
replayed on the cluster: wall-clock seconds per stage (not a timed test).

    python benchmarks/trace_replay.py              # 1,024 GPUs (128 DGX H100, rail-optimised NDR)
    python benchmarks/trace_replay.py --nodes 16   # a smaller cluster

Target (issue 19): the 1,024-rank trace replays in under a minute on CPU. The job is
Llama-3-8B with TP 8 x DP 128 (ZeRO-1, training_step's default TP overlap, 256 sequences:
2 microbatches per replica), so every rank runs 1,547 nodes (per microbatch and layer the
attention and MLP blocks forward and backward, each with its compute and its TP calls
beside the compute that hides them, 4 forward and 6 backward; the output projection; the
DP gradient and parameter calls).
"replay" counts the solves and the event loop; "read" the protobuf decoding and the DAG
checks and matching. Each stage prints its wall-clock and its CPU seconds (the process's
own time: on a shared machine the wall clock also counts the other processes' turns).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.traces import read_chakra, replay, workload_from_step, write_chakra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128, help="DGX H100 servers (8 GPUs each; default 128)")
    args = parser.parse_args()
    g = tp.rail_optimized(args.nodes)
    dp = args.nodes
    timings = {}

    def timed(name, f, *a, **kw):
        wall, cpu = time.perf_counter(), time.process_time()
        out = f(*a, **kw)
        timings[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return out

    step = timed("training_step", training_step, g, model="llama-3-8b", parallelism=Parallelism(tp=8, dp=dp),
                 schedule=Schedule(global_batch=2 * dp, dp_overlap=1.0))
    with tempfile.TemporaryDirectory() as folder:
        workload = timed("build", workload_from_step, step)
        timed("write", write_chakra, workload, folder)
        back = timed("read", read_chakra, folder)
    res = timed("replay", replay, g, back)
    print(f"{back.n_ranks} ranks, {back.n_nodes} nodes, {len(back.comms)} communications")
    print(f"  {'':14s} {'wall':>7s}   {'CPU':>7s}")
    for name, (wall, cpu) in timings.items():
        print(f"  {name:14s} {wall:7.2f} s {cpu:7.2f} s")
    both = [timings["read"][k] + timings["replay"][k] for k in (0, 1)]
    print(f"  read + replay  {both[0]:7.2f} s {both[1]:7.2f} s (target < 60 s)")
    print(f"iteration {res.iteration_time:.4f} s (training_step {step.step_time:.4f} s), exposed communication "
          f"{res.exposed_communication:.4f} s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
