"""Presets for the families of the largest published training clusters, each built from its
published shape: Meta's 24,576-GPU RoCE cluster (Llama 3) and GB200 NVL72 racks joined by a
rail-optimised scale-out fabric (NVIDIA DGX SuperPOD with DGX GB200).

Both are three-tier Clos fabrics of *units* (Meta's pods, NVIDIA's scalable units): every
unit has its leaves and spines, leaf ``l`` spreads its uplinks over the unit's spines, and
spine ``s`` of every unit joins core group ``s`` (a "plane"), spreading its uplinks over the
group's cores. Where a source gives no switch count the rule that fills it is stated.
"""

from __future__ import annotations

import math

import networkx as nx

from ._endpoints import attach_servers, endpoint_rate, server_params
from ._graph import cable_spread, check_int, check_ratio, finish, resolve_link
from .links import get_link
from .servers import get_server

__all__ = ["meta_24k", "nvl72_cluster"]


def _units_of_clos(g, *, units, leaves, spines, leaf_uplinks, spine_uplinks, cores_per_group, tech) -> None:
    """Leaves ``u{u}/leaf{l}``, spines ``u{u}/spine{s}`` and, with more than one unit, cores
    ``plane{s}/core{c}``; cables as in the module docstring."""
    for u in range(units):
        for s in range(spines):
            g.add_node(f"u{u}/spine{s}", kind="switch", role="spine", tier=2, unit=u)
        for l in range(leaves):
            g.add_node(f"u{u}/leaf{l}", kind="switch", role="leaf", tier=1, unit=u)
            cable_spread(g, f"u{u}/leaf{l}", [f"u{u}/spine{s}" for s in range(spines)], leaf_uplinks, l, tech,
                          "leaf-spine")
    if units == 1:
        return
    for s in range(spines):
        cores = [f"plane{s}/core{c}" for c in range(cores_per_group)]
        for c in cores:
            g.add_node(c, kind="switch", role="core", tier=3, group=s)
        for u in range(units):
            cable_spread(g, f"u{u}/spine{s}", cores, spine_uplinks, u, tech, "spine-core")


def meta_24k(pods: int = 8, *, racks_per_pod: int = 192, link="roce_400g", cluster_switches: int = 16,
             aggregation_oversubscription: float = 7.0, aggregation_per_plane: int = 1) -> nx.DiGraph:
    """Meta's 24K-GPU training cluster (the RoCE one Llama 3 405B was trained on).

    Published shape (Llama 3 paper, Dubey et al. 2024, section 3.3.1 "Network"): a three-layer
    Clos; each rack hosts 16 GPUs in two servers under one top-of-rack switch; 192 racks joined
    by *cluster switches* form a pod of 3,072 GPUs with full bisection bandwidth; 8 pods joined
    by *aggregation switches* form the 24,576-GPU cluster, the aggregation layer oversubscribed
    1:7. Servers: 8 H100 and eight 400G NICs (Grand Teton).

    Counts the paper does not give, and the rule used here: every ToR has 16 uplinks (full
    bisection), one to each of ``cluster_switches`` = 16 cluster switches per pod; a cluster
    switch has ``racks_per_pod`` downlinks and ``ceil(racks_per_pod / aggregation_oversubscription)``
    uplinks (192 / 28 = 6.9, the closest whole count at or under 1:7) to the aggregation
    switches of its plane, ``aggregation_per_plane`` of them. Meta's cluster and aggregation
    switches are modular chassis: :func:`topologies.bill` counts one as several 64-port boxes
    and says so in a warning.

    Parameters
    ----------
    pods : int
        Pods of 3,072 GPUs (with the default racks); 8 in the paper.
    racks_per_pod : int
        Racks (ToRs) per pod; 192 in the paper.
    link : str or LinkTech
        Every fabric cable (default RoCE 400G; ``"ib_ndr"`` gives the InfiniBand twin).
    cluster_switches, aggregation_oversubscription, aggregation_per_plane
        See above.

    Examples
    --------
    >>> g = meta_24k(pods=2, racks_per_pod=4)
    >>> roles = [d.get("role") for _, d in g.nodes(data=True) if d["kind"] == "switch"]
    >>> roles.count("leaf"), roles.count("spine"), roles.count("core"), g.graph["params"]["gpus"]
    (8, 32, 16, 128)
    """
    pods = check_int("pods", pods, 1)
    racks = check_int("racks_per_pod", racks_per_pod, 1)
    planes = check_int("cluster_switches", cluster_switches, 1)
    per_plane = check_int("aggregation_per_plane", aggregation_per_plane, 1)
    ratio = check_ratio("aggregation_oversubscription", aggregation_oversubscription)
    tech = resolve_link("link", link)
    model = get_server("dgx_h100").with_(name="grand_teton")
    tor_uplinks = 2 * model.nics                      # 16 GPUs per rack, full bisection in the pod
    if tor_uplinks < planes:
        raise ValueError(f"cluster_switches ({planes}) must be <= a ToR's {tor_uplinks} uplinks")
    up = math.ceil(racks * tor_uplinks / planes / ratio)
    g = nx.DiGraph()
    _units_of_clos(g, units=pods, leaves=racks, spines=planes, leaf_uplinks=tor_uplinks, spine_uplinks=up,
                   cores_per_group=per_plane, tech=tech)
    ports = [f"u{p}/leaf{r}" for p in range(pods) for r in range(racks) for _ in range(2 * model.nics)]
    servers = attach_servers(g, model, ports, tech)
    down = racks * tor_uplinks // planes
    params = dict(pods=pods, racks_per_pod=racks, link=tech.name, cluster_switches=planes,
                  cluster_uplinks=up if pods > 1 else 0, aggregation_per_plane=per_plane,
                  aggregation_oversubscription=down / up, server=server_params(model), servers=servers,
                  gpus=servers * model.gpus,
                  source="Llama 3 paper (arXiv:2407.21783) section 3.3.1: 16 GPUs per ToR, 192 racks per "
                         "3,072-GPU pod, 8 pods, 1:7 at the aggregation layer")
    # bisection between the server halves: pods // 2 whole pods a side send through their
    # cluster switches' uplinks (a pod is non-blocking within); an odd count splits the middle
    # pod, whose halves add half its NICs (racks x 8) inside it (3 pods of 8 racks: 1,600 +
    # 64 x 50 = 4,800 GB/s, not the one-pod cut 1,600). Uneven spreads (ToR uplinks over the
    # cluster switches, a cluster switch's over its aggregation switches) leave some switches
    # fewer cables than the formula counts, or pods apart: describe() finds the max flow
    even = tor_uplinks % planes == 0 and up % per_plane == 0
    bisection = None
    if pods > 1 and even:
        middle = racks * model.nics * endpoint_rate(model, tech)       # half a pod's 16 NICs a rack
        bisection = pods // 2 * planes * up * tech.bandwidth + pods % 2 * middle
    return finish(g, "meta_24k", params, bisection=bisection,
                  bisection_method="formula: floor(pods/2) pods x cluster switches x their uplinks"
                  + (" + half the middle pod's NICs, split between the halves (pods odd)" if pods % 2 else ""),
                  network_diameter=6 if pods > 1 else 4 if racks > 1 else 2)   # one pod: NIC-ToR-cluster-ToR-NIC


def nvl72_cluster(racks: int, *, link="ib_ndr", racks_per_unit: int = 8, radix: int = 64) -> nx.DiGraph:
    """GB200 NVL72 racks joined by a rail-optimised scale-out fabric.

    Published shape: NVIDIA DGX SuperPOD with DGX GB200 (reference architecture, "DGX SuperPOD
    Architecture"): a scalable unit is 8 DGX GB200 rack systems (576 GPUs), "up to and beyond
    128 racks with 9216 GPUs"; a rack is one 72-GPU NVLink domain (18 compute trays of 4 GPUs,
    9 NVLink switch trays) with one 400G NIC per GPU (the ``nvl72`` server model).

    Rules here (NVIDIA's switch counts for this fabric were not found): leaf ``j`` of a unit
    serves compute tray ``j`` (its 4 NICs) of every rack of the unit, ``4 x racks_per_unit``
    = 32 ports down and as many up (non-blocking), so a unit has 18 leaves; 18 spines per unit
    take every leaf's uplinks (``radix/2`` down; fewer racks than a unit: as many spines as a
    leaf's uplinks, each leaf cabled to every spine); with more than one unit, spine ``s`` of every
    unit joins plane ``s`` of ``ceil(units x radix/2 / radix)`` cores. ``racks`` is at most
    ``racks_per_unit`` or a multiple of it.

    Examples
    --------
    >>> g = nvl72_cluster(16)                     # 2 units, 1,152 GPUs
    >>> roles = [d.get("role") for _, d in g.nodes(data=True) if d["kind"] == "switch"]
    >>> roles.count("leaf"), roles.count("spine"), roles.count("core")
    (36, 36, 18)
    """
    racks = check_int("racks", racks, 1)
    per_unit = check_int("racks_per_unit", racks_per_unit, 1)
    radix = check_int("radix", radix, 4, "switch ports")
    if racks > per_unit and racks % per_unit:
        raise ValueError(f"racks ({racks}) must be <= racks_per_unit ({per_unit}) or a multiple of it")
    tech = resolve_link("link", link)
    model = get_server("nvl72")
    trays, per_tray = model.gpus // model.gpus_per_tray, model.nics // (model.gpus // model.gpus_per_tray)
    units = max(1, racks // per_unit)
    in_unit = min(racks, per_unit)
    down = per_tray * in_unit
    if 2 * down > radix:
        raise ValueError(f"a leaf serves {down} NICs ({per_tray} per tray x {in_unit} racks) and as many uplinks: "
                         f"more than radix {radix}; use fewer racks_per_unit")
    # every spine: radix/2 down when the unit is full; a unit of fewer racks has fewer uplinks a
    # leaf, and as many spines (18 spines for a rack's 4 uplinks a leaf left leaves sharing none)
    spines = min(trays, down)
    cores = math.ceil(units * down / radix) if units > 1 else 0
    g = nx.DiGraph()
    _units_of_clos(g, units=units, leaves=trays, spines=spines, leaf_uplinks=down,
                   spine_uplinks=trays * down // spines, cores_per_group=cores, tech=tech)
    ports = [f"u{r // per_unit}/leaf{i // per_tray}" for r in range(racks) for i in range(model.nics)]
    servers = attach_servers(g, model, ports, tech)
    params = dict(racks=racks, link=tech.name, racks_per_unit=per_unit, radix=radix, units=units,
                  leaves_per_unit=trays, spines_per_unit=spines, cores_per_plane=cores,
                  server=server_params(model), servers=servers, gpus=servers * model.gpus,
                  source="NVIDIA DGX SuperPOD GB200 reference architecture: 8 racks per scalable unit, "
                         "up to 128 racks (9,216 GPUs)")
    # Bisection between whole racks (server_halves: a cut never goes through a server):
    # floor(racks/2) racks' NICs at the NIC cable's rate (the slower of NIC and fabric: a 400G
    # CX-7 on ib_xdr carries 50 GB/s, not 100), the fabric being non-blocking (3 racks: 1
    # rack's 72 NICs against 2 racks'). One rack is one server: server_halves cuts its NVLink
    # domain in GPU rank halves (36 x 900 GB/s, rail_optimized(1, server="nvl72")'s figure),
    # and the halves' 36 NICs (9 compute trays) also reach the other 36 through the leaves.
    rate = endpoint_rate(model, tech)
    if racks == 1:
        bisection = model.gpus // 2 * get_link(model.nvlink).bandwidth + model.nics // 2 * rate
        method = "formula: gpus/2 x NVLink bandwidth per GPU + half the NICs (one rack)"
    else:
        bisection = racks // 2 * model.nics * rate
        method = "formula: non-blocking, the NICs of floor(racks/2) whole racks"
    return finish(g, "nvl72_cluster", params, bisection=bisection,
                  bisection_method=method, network_diameter=6 if units > 1 else 4)
