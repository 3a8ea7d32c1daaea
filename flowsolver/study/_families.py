"""The same job on the topology families: a rail-optimised Clos, a DragonFly, a 3-D torus."""

from __future__ import annotations

import functools

import topologies as tp

from ..training import DEFAULT_COMPUTE_EFFICIENCY, Parallelism, Schedule, training_step

__all__ = ["TOPOLOGIES", "FAMILY_SERVER", "FAMILY_LINK", "topology_study"]

FAMILY_SERVER = "dgx_h100"      # every family's server
FAMILY_LINK = "ib_ndr"          # every family's cable
_FAMILY_TP = 8                  # TP inside the server; DP across servers

# study label -> (registered family, {GPUs: its size parameters}): servers of 8 H100 on NDR;
# the fat-tree is the rail-optimised non-blocking Clos of a SuperPOD; DragonFly routers hold
# one server each (p = 8 ports), groups all-to-all with g - 1 dividing a h; the torus is 3-D
# with a server per router
_SIZES = {
    "fat-tree (rail Clos)": ("rail_optimized", {256: dict(nodes=32), 1024: dict(nodes=128), 4096: dict(nodes=512)}),
    "dragonfly": ("dragonfly", {256: dict(p=8, a=8, h=3, g=4), 1024: dict(p=8, a=16, h=7, g=8),
                                4096: dict(p=8, a=32, h=15, g=16)}),
    "torus 3-D": ("torus", {256: dict(dims=(4, 4, 2)), 1024: dict(dims=(8, 4, 4)), 4096: dict(dims=(8, 8, 8))}),
}
#: study label -> {GPUs: builder}: each a registered family (:func:`topologies.build`)
TOPOLOGIES = {label: {n: functools.partial(tp.build, family, server=FAMILY_SERVER, link=FAMILY_LINK, **size)
                      for n, size in sizes.items()}
              for label, (family, sizes) in _SIZES.items()}
#: the routing each family's study runs (the default, ecmp, for the others)
_POLICY = {"dragonfly": "minimal", "torus": "dor"}


def topology_study(*, sizes=(256, 1024, 4096), families=tuple(TOPOLOGIES), model="llama-3-70b",
                   sequences_per_replica: int = 64, dp_overlap: float = 1.0, compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY) -> list:
    """The same job (TP 8 in the server, DP across servers, ``sequences_per_replica``
    sequences per DP replica: weak scaling; ring DP collectives) on each family at each
    size. Returns dicts with the family, GPUs, the job's ``tp``, ``dp`` and
    ``sequences_per_replica``, switches, bisection (bytes/s), the DP time and its exposed
    part (s), its bottleneck tier, overhead, speed-up and scaling efficiency.

    >>> r = topology_study(sizes=(256,), families=("torus 3-D",))[0]
    >>> r["gpus"], r["speedup"] > 200
    (256, True)
    """
    rows = []
    for family in families:
        for size in sizes:
            g = TOPOLOGIES[family][size]()
            n = len(tp.gpus(g))
            dp = n // _FAMILY_TP
            policy = _POLICY.get(_SIZES[family][0], "ecmp")
            step = training_step(g, model, Parallelism(tp=_FAMILY_TP),
                                 Schedule(global_batch=dp * sequences_per_replica, dp_overlap=dp_overlap,
                                          compute_efficiency=compute_efficiency),
                                 algorithms=dict(dp="ring"), collective_options=dict(policy=policy))
            d = tp.describe(g)
            p = step.phases["dp"]
            rows.append(dict(family=family, gpus=n, tp=step.tp, dp=step.dp,
                             sequences_per_replica=step.global_batch // step.dp,
                             bisection=d.get("bisection_bandwidth"), switches=d.get("switches"),
                             dp_time=p.total, dp_exposed=p.exposed, dp_tier=p.bottleneck_tier,
                             overhead=step.comm_overhead, speedup=step.speedup,
                             efficiency=step.speedup / n, tokens_per_s=step.tokens_per_s))
    return rows
