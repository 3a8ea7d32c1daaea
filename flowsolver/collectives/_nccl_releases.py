"""NCCL releases as the model follows them (``nccl_version=``): the refinements of NCCL's tuner
(src/graph/tuning.cc) that changed between releases, and the first release of each algorithm
NCCL chooses among beside the ring and the tree. Releases are ``(major, minor)`` tuples (None:
the newest, NCCL 2.30's rules); ``hw`` is a :class:`~._nccl_model.Hardware` (units: GB/s where
a constant says so)."""

from __future__ import annotations

__all__ = ["FIRST_RELEASE", "FIRST_TUNED", "RING_LL_SHARE_BEFORE_2_21", "lacking_algorithms", "release_lacks",
           "release_predates"]

# --- Older releases' tuner (``nccl_version=``): the refinements of tuning.cc that changed since ---
#: ring LL's share of the bus bandwidth before NCCL 2.21: ``busBw * ((nNodes > 1 || coll ==
#: ncclFuncAllReduce || coll == ncclFuncReduce) ? 1.0/4.0 : 1.0/3.0)`` (v2.7.8-1 tuning.cc:113,
#: v2.8.3-1 / v2.9.9-1 / v2.11.4-1 / v2.12.12-1 tuning.cc:125-127, v2.18.3-1:178, v2.20.5-1:181);
#: v2.21.5-1 tuning.cc:180 ``busBw * .5`` (the LL kernel, src/device/prims_ll.h, unchanged between
#: the two: the estimate was re-fitted)
RING_LL_SHARE_BEFORE_2_21 = (1 / 4, 1 / 3)
#: ``if (compCap80) busBw = std::min(busBw, 235.0f);`` (GB/s; v2.7.8-1 tuning.cc:112, v2.8.3-1:124,
#: v2.12.12-1:126, v2.17.1-1:153 with ``if (compCapIndex == HOPPER_COMPCAP_IDX) busBw =
#: std::min(busBw, 370.0f);`` at :154); gone from v2.18.1-1
_BUS_CAP_BEFORE_2_18 = {"ampere": 235.0}
_BUS_CAP_2_17 = {"ampere": 235.0, "hopper": 370.0}
#: ``ll128MaxBwPerCh[NCCL_NUM_FUNCTIONS] = { 18.8, 12.0, 18.3, 15.2, 16.9 }`` (GB/s a channel,
#: ncclFuncBroadcast, Reduce, AllGather, ReduceScatter, AllReduce; v2.8.3-1 / v2.9.9-1 tuning.cc:74;
#: 16.7 for the all-reduce in v2.7.8-1:74); v2.10.3-1 tuning.cc:73 ``ll128MaxBwPerCh = 20.0`` for
#: every op and GPU, to v2.16.5-1:81; v2.17.1-1:84 ``{ 20.0, 20.0, 36.7 }`` (Volta, Ampere, Hopper)
_LL128_PER_OP_BEFORE_2_10 = {"broadcast": 18.8, "reduce": 12.0, "all_gather": 18.3, "reduce_scatter": 15.2,
                             "all_reduce": 16.9}
_LL128_BEFORE_2_17 = 20.0
#: Not applied (it made the held-out corpus worse, fix22a 2026-12-07: abci2-benchmark and
#: aws-efa-eks 18.2 % -> 18.6 %, ABCI's 16 nodes 11.1 % -> 12.1 %): before 2.10 the tree's per-channel
#: caps ``perChMaxTreeBws`` Ampere ``{24.0, 22.5, 16.0}`` (v2.8.3-1 tuning.cc:76; v2.10.3-1:75
#: ``{24.0, 23.6, 17.8}``) and tree LL128 across nodes ``0.915`` (v2.8.3-1:129; v2.10.3-1:132
#: ``120.0/128.0``)
#: ``llMaxBws`` Hopper row ``{87.7, 22.5, 19.0}`` (v2.15.5-1 .. v2.20.5-1 tuning.cc, the Ampere
#: row); v2.21.5-1 ``{141.0, 45.0, 35.0}``. One node only: across nodes the row is the CPU's
_LL_MAX_HOPPER_BEFORE_2_21 = 87.7


def _older(hw, nccl):
    """The tuner refinements of NCCL release ``nccl`` (``(major, minor)``; None: the model's, NCCL
    2.30) that differ from 2.30's on ``hw`` (ring LL's share: :func:`_ring_ll_share`): a dict with
    ``bus_cap`` (GB/s, every protocol's bus bandwidth), ``ring_ll128`` / ``tree_ll128`` (GB/s a
    channel, or ``"per-op"``), ``ll128_one_gpu`` (ring LL128's factor with one GPU a node),
    ``ll_max`` (GB/s), each None where 2.30's applies.

    >>> from ._nccl_model import Hardware
    >>> _older(Hardware(8, 1, "ampere"), (2, 8))["bus_cap"], _older(Hardware(8, 1, "ampere"), None)["bus_cap"]
    (235.0, None)
    """
    out = dict(bus_cap=None, ring_ll128=None, tree_ll128=None, ll128_one_gpu=None, ll_max=None)
    if nccl is None:
        return out
    if nccl < (2, 21):
        if hw.nodes == 1 and hw.generation == "hopper":
            out["ll_max"] = _LL_MAX_HOPPER_BEFORE_2_21
    if nccl < (2, 23):      # ``busBw * (ppn < 2 ? 0.7 : 0.92)``, v2.8.3-1:126 .. v2.22.3-1:179
        out["ll128_one_gpu"] = 0.7
    if nccl < (2, 18):
        out["bus_cap"] = (_BUS_CAP_2_17 if nccl >= (2, 17) else _BUS_CAP_BEFORE_2_18).get(hw.generation)
    if nccl < (2, 17):
        out["ring_ll128"] = out["tree_ll128"] = _LL128_BEFORE_2_17
    if nccl < (2, 10):
        out["ring_ll128"] = out["tree_ll128"] = "per-op"
    return out


#: The first NCCL release (``(major, minor)``) with each algorithm NCCL may choose beside the
#: ring and the tree (which every 2.x has), by op: NVLS from 2.17 (``#define NCCL_ALGO_NVLS 4``,
#: v2.17.1-1 src/include/devcomm.h:23; v2.16.5-1:18 ``NCCL_NUM_ALGORITHMS 4``, Tree, Ring, CollNet
#: only), its all-gather and reduce-scatter too (v2.17.1-1 tuning.cc:143-144); NVLSTree from 2.18
#: (``#define NCCL_ALGO_NVLS_TREE 5``, v2.18.1-1 devcomm.h:24); PAT from 2.23 (``#define
#: NCCL_ALGO_PAT 6``, v2.23.4-1 src/include/nccl_common.h:61)
FIRST_RELEASE = {("nvls", "all_reduce"): (2, 17), ("nvls", "all_gather"): (2, 17),
                 ("nvls", "reduce_scatter"): (2, 17), ("nvls_tree", "all_reduce"): (2, 18),
                 ("pat", "all_gather"): (2, 23), ("pat", "reduce_scatter"): (2, 23)}
#: 2.18's tuner times NVLS for no all-gather or reduce-scatter (``if (coll == ncclFuncAllGather
#: && a != NCCL_ALGO_RING) continue;``, v2.18.1-1 tuning.cc:159-160 .. v2.18.6-1:168-169: no
#: time, so NCCL never runs it, NCCL_ALGO=NVLS included); 2.19 times it again (v2.19.1-1:168-169)
_NVLS_GATHER_OFF = (2, 18)


def release_lacks(algorithm, op, nccl) -> str | None:
    """Why NCCL release ``nccl`` (``(major, minor)``; None: the newest, which has every algorithm)
    runs ``algorithm`` for ``op`` on no ranks at all (:data:`FIRST_RELEASE`), or None.

    >>> release_lacks("nvls", "all_reduce", (2, 16))
    'NCCL 2.16 has no NVLS (first in NCCL 2.17)'
    >>> release_lacks("nvls", "all_reduce", (2, 17)) is None, release_lacks("ring", "all_gather", (2, 8)) is None
    (True, True)
    """
    if nccl is None:
        return None
    name = {"nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT"}.get(algorithm, algorithm)
    first = FIRST_RELEASE.get((algorithm, op))
    if first is not None and nccl < first:
        return f"NCCL {nccl[0]}.{nccl[1]} has no {name} (first in NCCL {first[0]}.{first[1]})"
    if algorithm == "nvls" and op != "all_reduce" and nccl[:2] == _NVLS_GATHER_OFF:
        return f"NCCL 2.18 runs NVLS for all-reduce only (2.17 ran it for {op} too, and 2.19 on again)"
    return None



def lacking_algorithms(algorithms, op, version) -> tuple:
    """``(release, names)``: the NCCL release ``version`` names (``nccl_version``'s forms; None:
    the newest) and those of ``algorithms`` (a name or names) it runs on no ranks for ``op``
    (:func:`release_lacks`); the command line's header says them.

    >>> lacking_algorithms(("tree", "nvls", "nvls_tree"), "all_reduce", "2.16")
    ((2, 16), ['nvls', 'nvls_tree'])
    """
    from ._option_values import nccl_release

    release = nccl_release(version)
    names = [algorithms] if isinstance(algorithms, str) else list(algorithms)
    return release, [a for a in names if a != "auto" and release_lacks(a, op, release)]

#: The first NCCL release whose tuner has each GPU generation's own tables. Before it NCCL runs
#: the GPU through an older architecture's PTX and times it with another generation's figures,
#: which the model does not follow: Ampere from 2.7 (``compCap80``, v2.7.3-1 tuning.cc:89; in
#: v2.6.4-1 LL128 runs on Volta only, :165), Hopper from 2.15 (``HOPPER_COMPCAP_IDX``, v2.15.1-1
#: tuning.cc:111; v2.14.3-1 has Volta's and Ampere's tables only and enables LL128 on compute
#: capability 7.0 and 8.0 alone, :217), Blackwell from 2.25 (``BLACKWELL_COMPCAP_IDX``, v2.25.1-1
#: tuning.cc:215; v2.24.3-1:210 times compute capability 10.x as Hopper)
FIRST_TUNED = {"ampere": (2, 7), "hopper": (2, 15), "blackwell": (2, 25)}


def release_predates(generation, nccl) -> str | None:
    """Why NCCL release ``nccl`` (``(major, minor)``; None: the newest) cannot be modelled on GPUs
    of ``generation`` (:data:`FIRST_TUNED`: it predates that generation's tuning), or None.

    >>> release_predates("hopper", (2, 14))[:60]
    'NCCL 2.14 predates Hopper GPUs (first tuned for them in NCCL'
    >>> release_predates("hopper", (2, 15)) is None, release_predates(None, (2, 3)) is None
    (True, True)
    """
    first = FIRST_TUNED.get(generation)
    if nccl is None or first is None or nccl >= first:
        return None
    return (f"NCCL {nccl[0]}.{nccl[1]} predates {generation.capitalize()} GPUs (first tuned for them in NCCL "
            f"{first[0]}.{first[1]}; before it NCCL times them with another generation's figures, which flowsolver "
            "does not model)")


def _ring_ll_share(op, hw, nccl) -> float:
    """Ring LL's share of the bus bandwidth in NCCL's tuner (0.5 from 2.21; before, 1/4 across
    nodes or for an all-reduce / reduce, 1/3 otherwise: :data:`RING_LL_SHARE_BEFORE_2_21`)."""
    if nccl is None or nccl >= (2, 21):
        return 0.5
    share_all, share_other = RING_LL_SHARE_BEFORE_2_21
    return share_all if hw.nodes > 1 or op in ("all_reduce", "reduce") else share_other
