"""A collective's time as a differentiable JAX function of the link capacities (a custom
JVP on :meth:`CollectiveResult.time_gradient` / ``time_directional``)."""

from __future__ import annotations

import numpy as np

from ..solver import host_scalar
from ._collective import collective
from ._sensitivity import any_one_sided

__all__ = ["collective_time"]


def collective_time(graph, op: str, size: float, capacity=None, **options):
    """A collective's time (s) as a JAX scalar with a custom JVP in the link capacities
    ``capacity`` (bytes/s, graph edge order; default the graph's): ``jax.grad`` of it is the
    exact per-link derivative through every step's event-driven solve
    (:meth:`CollectiveResult.time_gradient`). Where a tie or a new event order (flows
    finishing together that the change moves apart) makes the derivative one-sided,
    ``jax.grad`` gets each link's increase alone (``side="up"``) and a RuntimeWarning; an
    eager ``jax.jvp`` gets the exact one-sided derivative along its tangent. ``options``
    go to :func:`flowsolver.collective`. Call it outside ``jax.jit``.

    >>> import jax, topologies as tp
    >>> g = tp.rail_optimized(nodes=1)
    >>> c = jax.numpy.asarray([d["capacity"] for *_, d in g.edges(data=True)])
    >>> r = collective(g, "all_reduce", 2**26, algorithm="ring")
    >>> with jax.enable_x64(True):                 # every link x (1 + e): each transfer shrinks by e
    ...     t, dt = jax.jvp(lambda c: collective_time(g, "all_reduce", 2**26, c, algorithm="ring"), (c,), (c,))
    >>> round(-float(dt) / sum(s.count * s.transfer for s in r.steps), 6)
    1.0
    """
    import jax.numpy as jnp

    n = graph.number_of_edges()
    own = np.fromiter((c for *_, c in graph.edges(data="capacity")), dtype=np.float64, count=n)

    def solve(cap):
        if cap.shape != (n,):
            raise ValueError(f"capacity must have shape ({n},) - one entry per graph edge - got {cap.shape}")
        if np.array_equal(cap, own):
            return collective(graph, op, size, **options)   # the graph itself: its routes are cached
        g = graph.copy()
        for (u, v), c in zip(graph.edges, cap):
            g.edges[u, v]["capacity"] = float(c)
        return collective(g, op, size, **options)

    timed = host_scalar("collective_time", solve, lambda r: r.time, lambda r, dc: r.time_directional(dc),
                        lambda r: r.time_gradient("up"), lambda r: any_one_sided(r._derivation()))
    cap = own if capacity is None else capacity
    return timed(jnp.asarray(cap))
