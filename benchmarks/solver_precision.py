"""Solver precision per method and dtype on random weighted instances with wide ranges
(weights 1e-6..1e6, fractions 1e-9..1, capacities 1e-3..1e3, failed links and caps), against
the NumPy progressive-filling oracle of the tests, plus the max-min certificate.

    python benchmarks/solver_precision.py          # 300 instances (~1 min)
    python benchmarks/solver_precision.py 1000

Prints the worst relative rate error per (method, dtype) and how many results failed the
certificate (float64: rtol 1e-9; float32: 1e-3). The routed all-to-all figures are printed
by benchmarks/solver_speed.py.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import flowsolver as fs  # noqa: E402
from flowsolver.solver._certificate import violation  # noqa: E402
from tests.oracle import progressive_filling  # noqa: E402
from tests.solver.test_frontier import wide_instance  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    count = int(argv[0]) if argv else 300
    warnings.simplefilter("error")          # a certificate fallback would be a finding
    worst: dict = {}
    failed: dict = {}
    for seed in range(count):
        A, cap, w, d = wide_instance(seed)
        ref = progressive_filling(A, cap, w, d)
        rm = fs.RoutingMatrix.from_scipy(sp.csc_matrix(A))
        for method in ("dense", "frontier"):
            for dtype in ("float64", "float32"):
                a = fs.max_min_fair(sp.csc_matrix(A), cap, weights=w, demands=d, method=method, dtype=dtype)
                x = np.asarray(a.rates, dtype=np.float64)
                err = float(np.max(np.abs(x - ref) / np.maximum(np.abs(ref), 1e-300), initial=0.0))
                key = (method, dtype)
                worst[key] = max(worst.get(key, 0.0), err)
                bad = violation(rm, cap, w, d, x, a.bottleneck, rtol=1e-9 if dtype == "float64" else 1e-3)
                failed[key] = failed.get(key, 0) + (bad is not None)
    print(f"{count} random weighted instances (weights 1e-6..1e6, fractions 1e-9..1)")
    for (method, dtype), err in sorted(worst.items()):
        print(f"  {method:8s} {dtype}: worst relative rate error {err:.2e}, certificate failures "
              f"{failed[method, dtype]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
