"""Sensitivity speed: d(total throughput)/d(every link capacity) on the 1024-GPU fat-tree
all-to-all (fat_tree(16), 1 M flows) against the solve itself.

    python benchmarks/sensitivity_speed.py            # fat_tree(16), ecmp_hash and ecmp
    python benchmarks/sensitivity_speed.py --quick    # fat_tree(8)

Targets: the sensitivities of all links (structure, adjoint solve, and at ties each link's
one-sided derivative) in at most 3x the solve time (best of two calls after the first); a
``jax.grad`` of a collective's time (``collective_time``) in at most 3x the collective itself
(fat_tree(8): an all-to-all, the all-reduce NCCL's cost model picks (tree / LL128, its
derivative through the cost model's formula) and a ring all-reduce). The gradient reuses
the forward's events (each event's allocation kept by ``completion_times(keep_phases=True)``):
no step is solved again.
With ``ecmp_hash`` the hash collisions make core links bottlenecks and nothing ties (one
triangular adjoint solve); with even ``ecmp`` splitting every flow is held by both its NICs
(a tie at every NIC link, so each link gets its one-sided derivative for an increase).
"""

from __future__ import annotations

import sys
import time

import numpy as np

import flowsolver as fs
import topologies as tp


def best_of(fn, n=2):
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, min(times)


def one(k: int, policy: str) -> float:
    g = tp.fat_tree(k)
    rm = fs.route(g, fs.Flows.all_to_all(len(tp.gpus(g)), 1e6), policy=policy)
    alloc, t_solve = best_of(lambda: fs.max_min_fair(rm))

    def sensitivities():
        sens = fs.rate_sensitivity(rm, alloc)
        side = "up" if sens.one_sided_links.any() else None
        return sens, sens.gradient(np.ones(rm.n_flows), side=side)

    (sens, (grad_c, _)), t_sens = best_of(sensitivities)
    ratio = t_sens / t_solve
    print(f"fat_tree({k}) all-to-all, {policy}: {rm.n_flows} flows, {rm.n_links} links; solve {t_solve:.3f} s, "
          f"sensitivities of all links {t_sens:.3f} s: {ratio:.2f}x the solve "
          f"({int(sens.one_sided_links.sum())} one-sided links, {int(np.count_nonzero(grad_c))} links with a "
          f"nonzero derivative)")
    return ratio


def collective_grad(k: int, op: str, size: float, **options) -> float:
    """Forward time, ``jax.grad`` time and their ratio, measured in this one run (best of
    five after a first call each; the gradient includes its own forward solve)."""
    import warnings

    import jax
    import jax.numpy as jnp

    g = tp.fat_tree(k)
    timed = lambda c: fs.collective_time(g, op, size, c, **options)  # noqa: E731
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # one-sided ties: reported by the function
        cap = jnp.asarray([d["capacity"] for *_, d in g.edges(data=True)])
        r, t_forward = best_of(lambda: fs.collective(g, op, size, **options), n=5)
        _, t_grad = best_of(lambda: jax.grad(timed)(cap), n=5)
    ratio = t_grad / t_forward
    print(f"fat_tree({k}) {op} of {size:.3g} B ({r.algorithm}/{r.protocol}, {len(r.steps)} distinct steps): "
          f"forward {t_forward:.3f} s, jax.grad {t_grad:.3f} s: {ratio:.2f}x")
    return ratio


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    k = 8 if "--quick" in argv else 16
    ratios = [one(k, policy) for policy in ("ecmp_hash", "ecmp")]
    print(f"target <= 3x the solve: {'met' if max(ratios) <= 3 else 'NOT met'} (worst {max(ratios):.2f}x)")
    grads = [collective_grad(8, "all_to_all", 2**24), collective_grad(8, "all_reduce", 2**28),
             collective_grad(8, "all_reduce", 2**28, algorithm="ring", protocol="Simple")]
    print(f"target jax.grad <= 3x the collective: {'met' if max(grads) <= 3 else 'NOT met'} (worst {max(grads):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
