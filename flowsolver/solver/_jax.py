"""Max-min fair rates as a differentiable JAX function: a custom JVP on the bottleneck
structure, so ``jax.jvp``, ``jax.grad`` and ``jax.jacfwd`` of any function of the rates are
exact (the tangent is a sparse linear map, transposable for reverse mode).

The solve runs on the host (the solver is a host loop around compiled kernels), so the
function takes concrete capacities: call it outside ``jax.jit``.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp


def _concrete(name, value):
    try:
        return np.asarray(value, dtype=np.float64)
    except jax.errors.TracerArrayConversionError:
        raise TypeError(f"{name}: fair_rates solves on the host and needs concrete values; call it outside "
                        "jax.jit (jax.grad, jax.jvp and jax.jacfwd work)") from None


def concrete_or_none(value):
    """``value`` as a float64 array when it is concrete (an eager ``jax.jvp``'s tangent),
    else None (a tracer: ``jax.grad``, ``jax.jacfwd``, which need a linear tangent map)."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError, TypeError):
        return None


def host_scalar(name, evaluate, value, directional, gradient, one_sided):
    """A JAX function of the link capacities (links,) whose value and derivatives are
    computed on the host: ``evaluate(cap)`` solves, ``value(res)`` is the scalar,
    ``directional(res, dc)`` its exact one-sided derivative along ``dc`` (an eager
    ``jax.jvp``), ``gradient(res)`` its per-link derivatives for a capacity increase
    (``jax.grad`` / ``jax.jacfwd``; where it is one-sided, ``one_sided(res)`` true anywhere, a
    RuntimeWarning says so).
    ``name`` prefixes the messages."""

    def host(cap):
        try:
            cap = np.asarray(cap, dtype=np.float64)
        except jax.errors.TracerArrayConversionError:
            raise TypeError(f"capacity: {name} solves on the host and needs concrete values; call it "
                            "outside jax.jit (jax.grad, jax.jvp and jax.jacfwd work)") from None
        return evaluate(cap)

    @jax.custom_jvp
    def scalar(cap):
        return jnp.asarray(value(host(cap)))

    @scalar.defjvp
    def scalar_jvp(primals, tangents):
        res = host(primals[0])
        exact = concrete_or_none(tangents[0])
        if exact is not None:                    # an eager jvp: the exact one-sided derivative along it
            return jnp.asarray(value(res)), jnp.asarray(directional(res, exact))
        up = gradient(res)
        if np.any(one_sided(res)):
            warnings.warn(f"{name}: the derivative is one-sided (a tie, or flows finishing together that a "
                          "change moves apart); JAX gets each link's increase alone (side='up'); an eager "
                          "jax.jvp gets the exact one-sided derivative along its tangent", RuntimeWarning,
                          stacklevel=3)
        out = jnp.asarray(value(res))
        return out, jnp.dot(jnp.asarray(up, out.dtype), jnp.asarray(tangents[0], out.dtype))

    return scalar


def _sparse_matvec(m: sp.spmatrix, v, n_out: int):
    """``m @ v`` in JAX from a host sparse matrix (linear in ``v``, so it transposes)."""
    coo = m.tocoo()
    if coo.nnz == 0:
        return jnp.zeros(n_out, dtype=v.dtype)
    vals = jnp.asarray(coo.data, dtype=v.dtype)
    return jax.ops.segment_sum(vals * v[jnp.asarray(coo.col)], jnp.asarray(coo.row), n_out)


def make_fair_rates(rm, weights, method, solve, sensitivity):
    """The custom-JVP function ``(capacity, demands) -> rates`` on ``rm`` (``solve`` and
    ``sensitivity`` are :func:`max_min_fair` and :func:`rate_sensitivity`)."""

    def host(cap, d):
        cap, d = _concrete("capacity", cap), _concrete("demands", d)
        return cap, d, solve(rm, cap, weights=weights, demands=d, method=method)

    @jax.custom_jvp
    def rates(cap, d):
        return jnp.asarray(host(cap, d)[2].rates)

    @rates.defjvp
    def rates_jvp(primals, tangents):
        cap, d, alloc = host(*primals)
        sens = sensitivity(rm, alloc, cap, weights=weights, demands=d)
        side = None
        dcap, dd = tangents
        if sens.one_sided_links.any() or sens.one_sided_caps.any():
            exact_c, exact_d = concrete_or_none(dcap), concrete_or_none(dd)
            if exact_c is not None and exact_d is not None:      # an eager jvp: the exact one-sided derivative
                exact_d = np.where(np.isfinite(d), exact_d, 0.0)
                return jnp.asarray(alloc.rates), jnp.asarray(sens.directional(exact_c, exact_d))
            warnings.warn(f"fair_rates: {int(sens.one_sided_links.sum())} links and {int(sens.one_sided_caps.sum())} "
                          "caps sit at a tie, where the rates have one-sided derivatives only; under jax.grad or "
                          "jax.jacfwd the derivative there is each one's increase alone (side='up'); an eager "
                          "jax.jvp gets the exact one-sided derivative along its tangent", RuntimeWarning,
                          stacklevel=4)
            side = "up"
        n = rm.n_flows
        out = jnp.asarray(alloc.rates)
        tangent = _sparse_matvec(sens.capacity_jacobian(side), jnp.asarray(dcap, out.dtype), n)
        if sens.structure.capped.any():
            dd = jnp.where(jnp.isfinite(jnp.asarray(d)), dd, 0.0)     # an infinite cap has no tangent
            tangent = tangent + _sparse_matvec(sens.demand_jacobian(side), jnp.asarray(dd, out.dtype), n)
        return out, tangent

    return rates
