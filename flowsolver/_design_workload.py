"""What :func:`flowsolver.design` times on each fabric: the workload as a function of the graph
(a training step, a collective mix, or the user's function) and the routing policy each link
technology's fabrics are timed with."""

from __future__ import annotations

import math
import numbers

__all__ = ["link_policies", "timer", "workload_policies"]

#: the routing policies of fabrics design never builds (flowsolver/routing/_fabric.py refuses them
#: on any other graph): policy name -> the fabric it routes
_OTHER_FABRICS = {"dor": "a torus (topologies.torus)", "minimal": "a DragonFly (topologies.dragonfly)",
                  "valiant": "a DragonFly (topologies.dragonfly)", "ugal": "a DragonFly (topologies.dragonfly)"}


def timer(workload):
    """A function graph -> (seconds, tokens per step or NaN) for the workload."""
    if callable(workload):
        def user(g, policy=None):
            out = workload(g)
            seconds, tokens = (float(out[0]), float(out[1])) if isinstance(out, tuple) else (float(out), math.nan)
            if not (math.isfinite(seconds) and seconds > 0) or not (math.isnan(tokens) or 0 < tokens < math.inf):
                raise ValueError(f"the workload returned {out!r}: it must return seconds > 0, or (seconds > 0, "
                                 "tokens per step > 0)")
            return seconds, tokens

        return user
    if isinstance(workload, dict) and "model" in workload:
        from .training import step_arguments, training_step

        def step(g, policy=None):
            args = step_arguments(**workload)
            if policy is not None:          # link_policies checked it against the workload's own
                args["collective_options"] = {**(args.get("collective_options") or {}), "policy": policy}
            r = training_step(g, **args)
            return float(r.step_time), float(r.tokens_per_step)

        return step
    if isinstance(workload, (list, tuple)) and workload:
        from .collectives import collective

        items = []
        for item in workload:
            if isinstance(item, dict):
                items.append(dict(item))
            elif isinstance(item, (list, tuple)) and 2 <= len(item) <= 3:
                items.append(dict(op=item[0], size=item[1], **({"ranks": item[2]} if len(item) > 2 else {})))
            else:
                raise ValueError(f"workload item must be a dict of collective()'s keywords or (op, size[, ranks]), "
                                 f"got {item!r}")
            size = items[-1].get("size")
            if isinstance(size, bool) or not isinstance(size, numbers.Real) or not 0 < size < math.inf:
                # refused once here, not as every candidate's failure (adv21a)
                raise ValueError(f"workload item {item!r}: size must be a finite number of bytes > 0, got {size!r}")

        def timed(g, policy=None):
            total = 0.0
            for it in items:
                kw = dict(it) if policy is None else {"policy": policy, **it}
                total += float(collective(g, kw.pop("op"), kw.pop("size"), **kw).time)
            return total, math.nan

        return timed
    raise ValueError("workload must be a training dict with 'model' (training_step's keywords), a list of "
                     "collectives [(op, size[, ranks]) or dicts of collective()'s keywords], or a callable "
                     f"graph -> seconds (or (seconds, tokens per step)); got {workload!r}")


def link_policies(policy, links, workload) -> dict:
    """link technology -> the routing policy its fabrics are timed with (None: the collectives'
    default, ``ecmp``: every equal-cost path used fluidly, as adaptive routing spreads traffic).
    ``policy``: None, one policy name for every link, or a dict naming some links' policies
    (``{"roce_400g": "ecmp_hash"}``: RoCE hashing flows onto one path each, InfiniBand left
    adaptive). A function workload routes its own collectives: no policy for it."""
    from .routing import POLICIES

    if policy is None:
        _refuse_other_fabrics(workload_policies(workload))
        return dict.fromkeys(links)
    if callable(workload) and not isinstance(workload, (dict, list, tuple)):
        raise ValueError("policy= times a training step or a collective mix; a function workload chooses its "
                         "own routing (pass policy= to the collectives it calls)")
    if isinstance(policy, str):
        policy = dict.fromkeys(links, policy)
    elif isinstance(policy, dict):
        unknown = [k for k in policy if k not in links]
        if unknown:
            raise ValueError(f"policy names links the grid does not search: {', '.join(map(repr, unknown))} "
                             f"(links: {', '.join(links)})")
        policy = {link: policy.get(link) for link in links}
    else:
        raise ValueError(f"policy must be a policy name, a dict link -> policy name or None, got {policy!r}")
    for link, name in policy.items():
        if name is not None and name not in POLICIES:
            raise ValueError(f"policy for {link!r} must be one of {', '.join(POLICIES)}, got {name!r}")
    own = workload_policies(workload)
    _refuse_other_fabrics({*policy.values(), *own})
    clash = sorted({name for name in policy.values() if name is not None and own and own != {name}})
    if clash:
        raise ValueError(f"the workload's own policy ({', '.join(sorted(own))}: a collective item's 'policy' or a "
                         f"training step's collective_options) and design's policy {', '.join(map(repr, clash))} "
                         "disagree: give one")
    return policy


def _refuse_other_fabrics(names) -> None:
    """Refuse a routing policy of a fabric design never builds once, up front, rather than as
    every candidate's RoutingError (adv21c)."""
    for name in sorted(set(names) & set(_OTHER_FABRICS)):
        raise ValueError(f"policy {name!r} routes {_OTHER_FABRICS[name]}, and design builds none (its families: "
                         "Clos fabrics and DragonFly+): use 'ecmp' (adaptive), 'ecmp_hash' (RoCE hashing) or "
                         "'shortest'")


def workload_policies(workload) -> set:
    """The routing policies a workload names itself: a training step's ``collective_options``
    policy, the collective items' ``policy`` keys (empty: the collectives' default)."""
    if isinstance(workload, dict):
        named = [(workload.get("collective_options") or {}).get("policy")]
    elif isinstance(workload, (list, tuple)):
        named = [item.get("policy") for item in workload if isinstance(item, dict)]
    else:
        named = []
    return {name for name in named if name is not None}
