"""Exact weighted max-min fair rates with demand caps, in JAX.

The problem: flows ``f`` with weights ``w_f > 0`` and caps ``d_f`` share links of capacity
``c_l``; flow ``f`` puts ``A[l, f]`` of its rate on link ``l``. The weighted max-min fair
allocation makes ``rate / weight`` lexicographically maximal subject to ``A rate <= c`` and
``rate <= d``; it is what progressive filling computes.

Both methods run rounds that freeze, at once, every link that is a local minimum of the
fair share (and every flow held by its cap): exactly progressive filling's result, with
many bottlenecks per round. Each method is a module with ``eligible(problem) -> bool``
(whether ``method="auto"`` picks it) and ``solve(problem) -> Raw``:

* ``_dense`` tests every link in every round (the algorithm is described there); batches
  run as one problem of disjoint copies, in chunks that fit, sharded over the devices;
* ``_frontier`` tests only the lowest-share links, so a round's cost does not grow with the
  number of flows (0.93 s instead of 5.2 s on a 1 M-flow all-to-all), keeps its per-link
  weight sums exact, and has every result checked against the max-min certificate
  (``_certificate``). ``method="auto"`` picks it for large single scenarios.

Arguments are checked in ``_problem`` before anything is traced; ``_allocation`` holds the
result type.

Precision: float64 by default (exactness; the solver turns on 64-bit mode only inside its
own calls, never globally). ``dtype="float32"``: the dense kernel runs in float32 (half the
memory and traffic; within 1e-5 .. 1e-3 relative of float64, worst on large all-to-alls
where the residual capacity cancels); a scenario whose residuals cancel further (many flows
frozen elsewhere sharing one link with a later flow: 7.5 % off before 2026-12-07) is
re-solved in float64 and rounded (``_float32``); the frontier computes in float64 and rounds
its output (within 6e-8). Values float32 cannot hold are an error.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from . import _dense, _exact, _frontier, _settle
from ..routing import MergedRouting
from ._allocation import Allocation, allocation, expand
from ._input_checks import per_item
from ._problem import _as_routing, bucket_size, problem, trace_count
from ._jax import make_fair_rates
from ._placement import ensure_compilation_cache, placement, release_compiled_programs
# for flowsolver's other packages (collectives, timing, the sweep's files), not in __all__
from ._allocation import utilization  # noqa: F401
from ._jax import host_scalar  # noqa: F401
from ._placement import cache_folder  # noqa: F401
from ._sensitivity import RateSensitivity
from ._structure import build as _build_structure

__all__ = ["max_min_fair", "Allocation", "bucket_size", "trace_count", "rate_sensitivity", "RateSensitivity",
           "fair_rates"]

#: the methods, in the order ``method="auto"`` asks them whether they are eligible
METHODS = {"frontier": _frontier, "dense": _dense, "exact": _exact}


def max_min_fair(routing, capacity=None, *, weights=None, demands=None, dtype=None,
                 max_rounds: int | None = None, inner_rounds: int = 4,
                 compact: bool | None = None, method: str = "auto", device="auto",
                 per_link: bool = True) -> Allocation:
    """Weighted max-min fair rates of the flows of ``routing``.

    Parameters
    ----------
    routing : RoutingMatrix, MergedRouting or scipy.sparse matrix (links x flows)
        Entry (l, f): fraction of flow f's rate on link l (>= 0).
    capacity : array (links,) or (batch, links), optional
        Bytes/s; >= 0 (0 = failed link). Default: the RoutingMatrix's link capacities.
    weights : array (flows,) or (batch, flows), optional
        Max-min weights, > 0; default the RoutingMatrix's (1 for a scipy matrix).
    demands : array (flows,) or (batch, flows), optional
        Rate caps in bytes/s, >= 0 (``inf`` = none); default the RoutingMatrix's.
    dtype : "float64" (default) or "float32"
    max_rounds : int, optional
        Bound on the rounds (default: enough in exact arithmetic: the number of flows for
        the dense method; flows + links + flow-link pairs for the frontier, whose rounds
        either freeze flows or recompute a link's sum).
    inner_rounds : int
        Rounds per convergence check (a host round trip per check on a GPU). The dense
        method on a CPU checks after every round (a check costs a pass, not a round trip).
    compact : bool, optional
        Dense method: shrink a single large problem on the host as its flows freeze
        (default: on for a single scenario of more than ``_dense.COMPACT_FLOWS`` flows;
        batches are never compacted).
    method : "auto", "dense", "frontier" or "exact"
        ``"dense"`` tests every link in every round (a batch runs as one problem of disjoint copies);
        ``"frontier"`` tests only the lowest-share links each round, at a cost independent
        of the number of flows (see ``flowsolver.solver._frontier``; a batch is solved
        scenario by scenario). Both give progressive filling's rates. ``"auto"``: frontier
        for a single scenario of at least ``_frontier.FRONTIER_FLOWS`` flows with paths of
        at most 32 links and few capped flows, dense otherwise. Wider paths (fluid ECMP over
        many spines) count their wide segments once each (``_frontier_paths.split_paths``), and
        auto runs dense rounds on them while each freezes at least 1 % of the flows left,
        then the frontier on the flows left (``_frontier.solve_auto``). ``"exact"``:
        progressive filling in rational arithmetic (at most 100,000 link-flow pairs).
    device : "auto", "cpu", "accelerator" or a jax.Device
        Where the kernels run. ``"auto"`` (default): on the CPU for problems of fewer than
        ``_placement.AUTO_CPU_SLOTS`` flow-slots over all scenarios, where an accelerator's
        fixed cost per call is not repaid, else on JAX's default device (see
        ``flowsolver.solver._placement``, which also holds the persistent compilation cache).
    per_link : bool
        ``False`` leaves the per-link results out: the Allocation's ``link_load`` and
        ``utilization`` are None (``A @ rates`` gives the loads). A batch then neither lays
        them out nor copies them back, which is most of the host's work per scenario of a
        large batch (a 1024-GPU ring's failure scenarios: 12 KB of rates and bottlenecks a
        scenario instead of 127 KB; docs/performance.md).

    Returns
    -------
    Allocation
        With a leading batch axis when any input had one. A single scenario with an
        unbounded flow raises; a batch reports ``Status.UNBOUNDED`` for that scenario.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0]])               # one link, two flows
    >>> a = max_min_fair(A, [3.0], weights=[1.0, 0.5])
    >>> [round(float(x), 6) for x in a.rates]
    [2.0, 1.0]
    >>> int(a.bottleneck[0]), bool(a.converged), a.status.label
    (0, True, 'ok')
    """
    if method != "auto" and method not in METHODS:
        raise ValueError(f"method must be 'auto', {', '.join(repr(m) for m in METHODS)}; got {method!r}")
    prob, merged = problem(routing, capacity, weights, demands, dtype, max_rounds, inner_rounds, compact, per_link)
    solve = METHODS[method].solve if method != "auto" else None
    if method == "auto":        # a method may run otherwise when auto picks it (``solve_auto``)
        method = next(name for name, m in METHODS.items() if m.eligible(prob))
        solve = getattr(METHODS[method], "solve_auto", METHODS[method].solve)
    ensure_compilation_cache()
    release_compiled_programs()
    slots = prob.routing.flow_seg.size * (prob.batch or 1)
    with placement(device, slots), jax.enable_x64(prob.dtype == np.float64):
        raw = solve(prob)
    raw, ill = _settle.settle(prob, raw, method)
    out = allocation(prob, raw, ill)
    return out if merged is None else expand(out, merged)


def rate_sensitivity(routing, allocation: Allocation, capacity=None, *, weights=None, demands=None):
    """Exact derivatives of an allocation's rates with respect to every link capacity and
    every demand cap, from its bottleneck structure (see ``flowsolver.solver._sensitivity``).

    Parameters
    ----------
    routing : RoutingMatrix or scipy.sparse matrix (links x flows)
        What ``allocation`` was solved on (a MergedRouting: pass its unmerged matrix).
    allocation : Allocation
        ``max_min_fair(routing, capacity, weights=..., demands=...)``'s result; it carries
        the capacity, weights and caps it was solved with, which are used by default.
    capacity, weights, demands : optional
        Needed only for an allocation that does not carry them (assembled by hand;
        otherwise they must equal what it carries); bytes/s, as :func:`max_min_fair` took
        them (defaults the RoutingMatrix's); a leading batch axis gives one result per
        scenario.

    Returns
    -------
    RateSensitivity, or a list of them (one per scenario) for a batch: a scenario whose status
    is not ok (FAILED, UNBOUNDED, not converged) has no bottleneck structure and gives None in
    its place, with a RuntimeWarning naming it (a single allocation not ok raises ValueError)
        ``gradient(g, side=None)``: d(sum g * rates)/d capacity and /d caps;
        ``capacity_jacobian(side=None)``: sparse (flows x links) d rate / d capacity;
        ``directional(dc, dd)``: the exact one-sided derivative along any direction;
        ``one_sided_links`` / ``one_sided_caps``: where a tie makes the derivative depend on
        the sign of the change (``side="up"`` or ``"down"`` then picks it; ``None`` raises).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])   # flow 1 crosses both links
    >>> a = max_min_fair(A, [3.0, 1.0])
    >>> sens = rate_sensitivity(A, a, [3.0, 1.0])
    >>> sens.capacity_jacobian().toarray().tolist()   # link 1 holds flow 1, flow 0 takes the rest
    [[1.0, -1.0], [0.0, 1.0]]
    """
    if isinstance(routing, MergedRouting):
        raise TypeError("routing: pass the unmerged RoutingMatrix (the allocation's rates are per original flow)")
    rm, _ = _as_routing(routing)
    if not isinstance(allocation, Allocation):
        raise TypeError(f"allocation must be an Allocation (max_min_fair's result), got {type(allocation).__name__}")
    cap = _solved_with("capacity", capacity, allocation.capacity, rm.n_links, rm.capacity, "link")
    w = _solved_with("weights", weights, allocation.weights, rm.n_flows, rm.weights, "flow")
    d = _solved_with("demands", demands, allocation.demands, rm.n_flows, rm.demands, "flow")
    rates = np.asarray(allocation.rates, dtype=np.float64)
    if rates.shape[-1] != rm.n_flows:
        raise ValueError(f"allocation has {rates.shape[-1]} flows, routing {rm.n_flows}")
    ok = np.asarray(allocation.ok)
    if rates.ndim == 1 and not np.all(ok):
        raise ValueError("allocation: only a converged, bounded allocation (status ok) has a bottleneck structure")
    if rates.ndim > 1 and not np.all(ok):
        bad = np.flatnonzero(~ok)
        warnings.warn(f"allocation: scenarios {bad.tolist()[:20]} are not ok (status "
                      f"{np.asarray(allocation.status)[bad].tolist()[:20]}): no bottleneck structure, None in their "
                      "place", RuntimeWarning, stacklevel=2)
    # the solver's float64 loads of these rates (float32 ones are too coarse to test saturation)
    load = np.asarray(allocation.link_load)
    load = load if load.dtype == np.float64 and load.shape == rates.shape[:-1] + (rm.n_links,) else None
    if rates.ndim == 1:
        return RateSensitivity(_build_structure(rm, cap, w, d, rates, allocation.bottleneck, load))
    B = rates.shape[0]
    pick = lambda a, i: a if a is None or a.ndim == 1 else a[i]  # noqa: E731
    return [RateSensitivity(_build_structure(rm, pick(cap, i), pick(w, i), pick(d, i), rates[i],
                                             allocation.bottleneck[i], pick(load, i))) if ok[i] else None
            for i in range(B)]


def _solved_with(name, given, carried, n, default, what):
    """The capacity, weights or caps of an allocation: what it carries (an argument given
    beside it must agree), else the argument, else the routing's."""
    if carried is None:
        return per_item(name, given, n, default, what=what)
    carried = np.asarray(carried, dtype=np.float64)
    if given is not None:
        mine = per_item(name, given, n, default, what=what)
        if mine.shape[-1] != carried.shape[-1] or not np.array_equal(np.broadcast_to(mine, np.broadcast_shapes(
                mine.shape, carried.shape)), np.broadcast_to(carried, np.broadcast_shapes(mine.shape, carried.shape))):
            raise ValueError(f"{name}: the allocation was solved with other {name} than those passed; leave "
                             f"{name}= out (the allocation carries its own)")
    return carried


def fair_rates(routing, capacity=None, demands=None, *, weights=None, method: str = "auto"):
    """Max-min fair rates (bytes/s) as a differentiable JAX array: ``jax.grad``, ``jax.jvp``
    and ``jax.jacfwd`` of any function of them with respect to ``capacity`` (links,) and
    ``demands`` (flows,) are exact (a custom JVP on the bottleneck structure, see
    :func:`rate_sensitivity`). At a tie the derivative is one-sided; JAX then gets each
    capacity's or cap's increase alone (``side="up"``) and a RuntimeWarning. The solve runs
    on the host: call it outside ``jax.jit``. Enable 64-bit JAX for float64 derivatives.

    >>> import jax, scipy.sparse as sp
    >>> A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])
    >>> with jax.enable_x64(True):
    ...     g = jax.grad(lambda c: fair_rates(A, c)[0])(jax.numpy.array([3.0, 1.0]))
    >>> g.tolist()
    [1.0, -1.0]
    """
    if isinstance(routing, MergedRouting):
        raise TypeError("routing: pass the unmerged RoutingMatrix")
    rm, _ = _as_routing(routing)
    w = per_item("weights", weights, rm.n_flows, rm.weights, what="flow")
    if w.ndim != 1:
        raise ValueError("weights: fair_rates solves one scenario (shape (flows,)); call it once per scenario "
                         "(the solve runs on the host: jax.vmap and jax.jit cannot trace it)")
    cap = rm.capacity if capacity is None else capacity
    d = rm.demands if demands is None else demands
    for name, value, n, what in (("capacity", cap, rm.n_links, "links"), ("demands", d, rm.n_flows, "flows")):
        if np.ndim(value) not in (0, 1):
            raise ValueError(f"{name}: fair_rates solves one scenario (shape ({n},), one per {what[:-1]}), got shape "
                             f"{np.shape(value)}; call it once per scenario")
    return make_fair_rates(rm, w, method, max_min_fair, rate_sensitivity)(jnp.asarray(cap), jnp.asarray(d))
