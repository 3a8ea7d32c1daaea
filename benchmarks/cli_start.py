"""How long the command line takes to start and answer, each command in a fresh process.

    python benchmarks/cli_start.py            # 5 runs of each command
    python benchmarks/cli_start.py --runs 9

Targets (issue 30): ``flowsolver --help`` under 1 s, a small command under 2 s. A small command
is one that needs no solve (``topology``, ``--version``); ``collective`` on one server is
printed beside them for what a first solve costs (JAX's import and compilation), against no
target. Wall-clock seconds of ``python -m flowsolver ...`` (the installed ``flowsolver``
script runs the same function), best and median of the runs, and the median CPU time (user +
system) of the process, which a loaded machine inflates less; the load average is printed with
them. Also printed: which heavy
libraries ``--help`` imports (none of JAX, SciPy, pandas, matplotlib should be).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = [
    ("--help", ["--help"], 1.0),
    ("--version", ["--version"], 2.0),
    ("topology (fat_tree k=4)", ["topology", "--family", "fat_tree", "--k", "4"], 2.0),
    ("topology --json (default cluster)", ["topology", "--json"], 2.0),
    ("collective, 1 server, one size (JAX)", ["collective", "--nodes", "1", "-b", "1M", "-e", "1M"], None),
]

HEAVY = ("jax", "scipy", "pandas", "matplotlib", "networkx")


def _time(args) -> tuple[float, float]:
    """(wall-clock s, CPU s: user + system of the child) of one fresh ``flowsolver`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flowsolver", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"flowsolver {' '.join(args)} failed: {done.stderr.strip()[-300:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _imported_by_help() -> list[str]:
    code = ("import sys, contextlib, io\nfrom flowsolver.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command (default 5)")
    runs = parser.parse_args(argv).runs
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {runs} runs each")
    print(f"{'command':40} {'best s':>7} {'median s':>9} {'CPU s':>6} {'target s':>9}  met (median)")
    for label, args, target in COMMANDS:
        timed = [_time(args) for _ in range(runs)]
        walls = [w for w, _ in timed]
        best, median = min(walls), statistics.median(walls)
        cpu = statistics.median(c for _, c in timed)
        verdict = "" if target is None else ("yes" if median < target else "NOT met")
        print(f"{label:40} {best:7.2f} {median:9.2f} {cpu:6.2f} {'' if target is None else f'{target:.1f}':>9}  "
              f"{verdict}")
    heavy = _imported_by_help()
    print(f"libraries --help imports of {', '.join(HEAVY)}: {', '.join(heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
