"""A sweep's grid: its parameters, their defaults, and the scenarios it expands to (each
parameter read by some scenario)."""

from __future__ import annotations

import itertools
import math

import topologies as tp

from . import _checks
from .routing import policy_of

__all__ = ["expand_grid", "TOPOLOGY_KEYS", "COMMON_KEYS", "COLLECTIVE_KEYS", "TRAIN_KEYS", "DEFAULTS", "MAX_SCENARIOS"]

TOPOLOGY_KEYS = tp.FAMILIES
COMMON_KEYS = ("task", "family", "link", "server", "oversubscription", "fail_fraction", "seed", "policy",
               "subflows", "ranks")
#: parameters whose value is itself a list: a flat list is one value, a list of lists a sweep
LIST_VALUED = ("dims", "ranks")
COLLECTIVE_KEYS = ("op", "size", "algorithm", "protocol", "channels")
TRAIN_KEYS = ("model", "tp", "pp", "dp", "ep", "cp", "vp", "global_batch", "micro_batch", "zero", "dp_overlap",
              "compute_efficiency", "precision")
#: metric columns that only one task fills (a sweep without that task has no such column)
COLLECTIVE_METRICS = ("time", "algbw", "busbw")
TRAIN_METRICS = ("step_time", "tokens_per_s", "speedup", "comm_overhead")
DEFAULTS = dict(task="collective", family="rail_optimized", link="ib_ndr", server=None, oversubscription=1.0,
                fail_fraction=0.0, seed=0, policy="ecmp", subflows=1, ranks=None, op="all_reduce", size=2**30,
                algorithm="auto", protocol=None, channels=None,
                model="llama-3-70b", tp=8, pp=1, dp=None, ep=1, cp=1, vp=1,
                global_batch=None, micro_batch=1, zero=1, dp_overlap=1.0, compute_efficiency=None,
                precision="bf16")
#: the most scenarios a grid may expand to unless told (``max_scenarios=``): each is a dict in
#: memory while the sweep runs, ~1.1 kB and ~40 us to expand (20,000 took 22.5 MB and 0.73 s
#: on the development machine, 2026-12-06), so 100,000 are ~0.1 GB and ~4 s before the first
#: runs; a grid of six lists of 8-50 values is 19.2 M scenarios and ran out of memory expanding
MAX_SCENARIOS = 100_000


def expand_grid(grid, *, max_scenarios: int = MAX_SCENARIOS) -> list:
    """Scenarios of a grid: a dict of lists (their product, in key order) or a list of
    dicts; each completed with :data:`DEFAULTS`. More than ``max_scenarios`` (default
    :data:`MAX_SCENARIOS`) is a ValueError giving the count, before any is made.

    Examples
    --------
    >>> [s["nodes"] for s in expand_grid({"nodes": [1, 2], "link": ["ib_ndr"]})]
    [1, 2]
    """
    if isinstance(grid, dict):
        keys = list(grid)

        def choices(key, v):
            if not isinstance(v, (list, tuple)):
                return [v]
            if key in LIST_VALUED and not any(isinstance(x, (list, tuple)) for x in v):
                return [list(v)]             # dims = [4, 4], ranks = [0, 1, 2, 3]: one value
            return list(v)

        values = [choices(k, v) for k, v in grid.items()]
        if empty := [k for k, v in zip(keys, values) if not v]:
            raise ValueError(f"{empty[0]}: an empty list of values gives no scenarios (leave the key out for its "
                             "default)")
        _check_count(math.prod(map(len, values)), max_scenarios, " x ".join(
            f"{len(v)} {k}" for k, v in zip(keys, values) if len(v) > 1))
        rows = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    elif isinstance(grid, (list, tuple)) and all(isinstance(r, dict) for r in grid):
        _check_count(len(grid), max_scenarios, "listed")
        rows = [dict(r) for r in grid]
    else:
        raise ValueError("grid must be a dict of lists or a list of dicts")
    known = set(COMMON_KEYS) | set(COLLECTIVE_KEYS) | set(TRAIN_KEYS) | {k for ks in TOPOLOGY_KEYS.values() for k in ks}
    out, read, cache = [], set(), {}        # the keys some scenario reads (k: fat_tree's, tp: training's)
    for r in rows:
        unknown = sorted(set(r) - known)
        if unknown:
            raise ValueError(f"unknown sweep parameter(s) {unknown}; known: {', '.join(sorted(known))}")
        s = {**DEFAULTS, **r}
        if s["family"] not in TOPOLOGY_KEYS:
            raise ValueError(f"family must be one of {', '.join(TOPOLOGY_KEYS)}, got {s['family']!r}")
        if s["task"] not in ("collective", "train"):
            raise ValueError(f"task must be 'collective' or 'train', got {s['task']!r}")
        read |= set(r) & _reads(s["family"], s["policy"], bool(s["fail_fraction"]), s["task"], cache)
        out.append(s)
    # an unread key is an error where it says something: several values (rows differing in the
    # label only) or one that is not the default (a setting that would be ignored)
    said = {k for r in rows for k in r if k not in read and not _is_default(k, r[k])}
    if unused := sorted(said):
        raise ValueError(f"sweep parameter(s) {unused} apply to no scenario of the grid (another family's size or "
                         "the other task's, an oversubscription the family does not take, subflows of a policy "
                         "without them, a seed with no failed links): they would be ignored")
    return out


def _check_count(count: int, max_scenarios, how: str) -> None:
    """ValueError where a grid of ``count`` scenarios (``how``: the values that multiply to it)
    is more than ``max_scenarios``."""
    limit = _checks.integer("max_scenarios", max_scenarios)
    if count > limit:
        raise ValueError(f"grid: {count:,} scenarios ({how}), more than max_scenarios={limit:,}: sweep fewer "
                         "values, or pass a larger max_scenarios ([sweep] max_scenarios in a sweep file)")


def _is_default(key, value) -> bool:
    """Whether ``value`` is :data:`DEFAULTS`' for ``key`` (1 and 1.0 alike, a bool not a number)."""
    if key not in DEFAULTS:
        return False
    default = DEFAULTS[key]
    try:
        return isinstance(value, bool) == isinstance(default, bool) and bool(value == default)
    except (TypeError, ValueError):             # an array or another value with no plain ==
        return False


def _reads(family_name, policy, failures: bool, task, cache: dict) -> set:
    """The parameters a scenario reads (remembered per ``cache`` key): the common ones its
    family, policy and failures use, its family's size and its task's."""
    key = (family_name, repr(policy), failures, task)
    if key not in cache:
        family = tp.get_family(family_name)
        try:
            subflows = policy_of(policy).subflows
        except (ValueError, TypeError):             # the scenario's error row names the policy
            subflows = True
        skip = {k for k in ("link", "server", "oversubscription") if not family.takes(k)} | \
            ({"subflows"} if not subflows else set()) | ({"seed"} if not failures else set())
        keys = COLLECTIVE_KEYS if task == "collective" else TRAIN_KEYS
        cache[key] = (set(COMMON_KEYS) - skip) | set(family.parameter_names) | set(keys)
    return cache[key]
