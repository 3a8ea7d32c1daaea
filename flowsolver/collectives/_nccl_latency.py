"""NCCL's latency model (NCCL 2.30, src/graph/tuning.cc): its base and per-hop latencies by
algorithm, protocol and link, the hops an algorithm counts inside and between nodes, and the
latency NCCL predicts from them (units: s; the tables in us). ``hw`` is a
:class:`~._nccl_model.Hardware`."""

from __future__ import annotations

from ._nccl import PROTOCOLS

__all__ = ["TUNER_ALGORITHMS", "log2i", "tuner_hops", "tuner_latency"]

#: flowsolver names of NCCL's algorithms (CollNet is left out: no fabric here offers
#: in-network reduction, so NCCL would never enable it)
TUNER_ALGORITHMS = ("tree", "ring", "nvls", "nvls_tree", "pat")
_US = 1e-6

# NCCL 2.30 tuning.cc baseLat, microseconds, (LL, LL128, Simple)
_BASE = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0),
         "nvls_tree": (0.0, 0.0, 0.0), "pat": (8.0, 8.0, 8.0)}
# NCCL 2.30 tuning.cc hwLat[NVLINK | PCI | NET][algorithm], microseconds, (LL, LL128, Simple)
_HW = {
    "tree": {"nvlink": (0.6, 1.25, 4.0), "pcie": (1.0, 1.9, 4.0), "network": (5.0, 8.5, 14.0)},
    "ring": {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7), "network": (2.7, 4.0, 14.0)},
    "nvls": {"nvlink": (0.0, 0.0, 25.0), "pcie": (0.0, 0.0, 0.0), "network": (0.0, 0.0, 18.0)},
    "nvls_tree": {"nvlink": (0.0, 0.0, 25.0), "pcie": (0.0, 0.0, 0.0), "network": (0.0, 0.0, 20.9)},
    "pat": {"nvlink": (0.0, 0.0, 4.0), "pcie": (0.0, 0.0, 4.0), "network": (0.0, 0.0, 14.0)},
}
# NCCL_NET_OVERHEAD (tuning.cc getNetOverhead): 2 us on x86 AMD hosts, else 1 us; x3 for Simple
_NET_OVERHEAD = {"amd": 2.0}

def _steps(op, n):
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def _hop_constants(algorithm, protocol, hw: Hardware, cost: bool = False):
    """(intra, inter): NCCL's latency of one hop inside a node and between nodes (us) for
    ``algorithm`` / ``protocol`` on ``hw`` (a ring across nodes pays at least the network
    overhead inside one; one GPU per node crosses nodes with the tree's constant). A network
    hop adds the latency the plugin reports (``cost`` False: what NCCL's tuner chooses by) or
    what a hop costs on the platform (``cost`` True: :attr:`Hardware.hop_cost`)."""
    i = PROTOCOLS.index(protocol)
    intra = _HW[algorithm][hw.intra][i]
    inter_alg = "tree" if hw.one_per_node else algorithm        # tuning.cc: float ppn == 1
    net = hw.hop_cost if cost else hw.net_latency
    inter = _HW[inter_alg]["network"][i] + net / _US * (2 if protocol == "Simple" else 1)
    if algorithm == "ring" and hw.nodes > 1:
        intra = max(intra, _NET_OVERHEAD.get(hw.cpu, 1.0) * (3 if protocol == "Simple" else 1))
    return intra, inter


def log2i(n: int) -> int:
    """NCCL's ``log2i``: the floor of ``log2(n)`` (src/include/utils.h, ``log2Down``), which its
    tuner's tree, NVLSTree and PAT latencies count network hops by (NCCL 2.30 ``tuning.cc``:
    ``log2i(nNodes) * interLat``; 3 nodes count 1, not 1.58).

    >>> [log2i(n) for n in (1, 2, 3, 4, 7, 8, 10)]
    [0, 1, 1, 2, 2, 3, 3]
    """
    return int(n).bit_length() - 1


def tuner_hops(algorithm, protocol, op, hw: Hardware, cost: bool = False) -> tuple:
    """``((n_intra, intra), (n_inter, inter))``: how many hops inside a node and between
    nodes NCCL's latency of ``algorithm`` / ``protocol`` counts one after the other, and
    what it charges for one (s), as :func:`tuner_latency` adds them up (ring: ``2 (n - 1)``
    steps for all-reduce, ``n - 1`` otherwise, ``2 (nodes - 1)`` of them between nodes; tree:
    ``2 (ppn - 1)`` inside and ``2 log2i(nodes)`` between; NVLS one of each; NVLSTree one
    inside and ``2 log2i(nodes)`` between; PAT ``log2i(nodes)`` between at a third and a half
    of the network constant; :func:`log2i` the floor, as NCCL counts them). ``cost``: a network
    hop at what it costs on the platform (:attr:`Hardware.hop_cost`), not at what the plugin reports.

    >>> from ._nccl_model import Hardware
    >>> [(n, round(c * 1e6, 6)) for n, c in tuner_hops("ring", "Simple", "all_reduce", Hardware(16, 2))]
    [(28, 3.4), (2, 14.0)]
    """
    intra, inter = _hop_constants(algorithm, protocol, hw, cost)
    nodes, log_nodes = hw.nodes, log2i(hw.nodes)
    if algorithm == "ring":
        n_inter = 0 if nodes == 1 else _steps(op, nodes)
        n_intra = _steps(op, hw.ranks) - n_inter
    elif algorithm == "tree":
        n_intra, n_inter = 2 * (hw.ppn - 1), 2 * log_nodes
    elif algorithm == "nvls":
        n_intra, n_inter = 1, (1 if nodes > 1 else 0)
    elif algorithm == "nvls_tree":
        n_intra, n_inter = 1, 2 * log_nodes
    elif algorithm == "pat":
        n_intra, n_inter, inter = 0, log_nodes, inter / 3.5
    else:
        raise ValueError(f"algorithm must be one of {', '.join(TUNER_ALGORITHMS)}, got {algorithm!r}")
    return (n_intra, intra * _US), (n_inter, inter * _US)


def tuner_latency(algorithm, protocol, op, hw: Hardware, size: float | None = None,
                  cost: bool = False) -> float:
    """NCCL's predicted latency (s) of ``algorithm`` / ``protocol`` for ``op`` on ``hw``
    (``size`` bytes turns on the ring Simple all-reduce factor of large messages). ``cost``:
    its network hops at what they cost on the platform (:attr:`Hardware.hop_cost`) rather than
    at the latency the plugin reports, which is what NCCL chooses by.

    >>> from ._nccl_model import Hardware
    >>> round(tuner_latency("ring", "LL", "all_reduce", Hardware(8, 1)) * 1e6, 6)   # 6.6 + 14 x 0.6
    15.0
    >>> hw = Hardware(16, 2, net_latency=75e-6, hop_latency=22e-6)
    >>> round(tuner_latency("tree", "LL", "all_reduce", hw) * 1e6, 6)   # 6.8 + 2 x (7 x 0.6 + 5.0 + 75)
    175.2
    >>> round(tuner_latency("tree", "LL", "all_reduce", hw, cost=True) * 1e6, 6)   # ... + 22
    69.2
    """
    i = PROTOCOLS.index(protocol)
    simple = protocol == "Simple"
    lat = _BASE[algorithm][i]
    intra, inter = _hop_constants(algorithm, protocol, hw, cost)
    nodes, log_nodes = hw.nodes, log2i(hw.nodes)
    if algorithm == "ring":
        inter_steps = 0 if nodes == 1 else _steps(op, nodes)
        lat += (_steps(op, hw.ranks) - inter_steps) * intra + inter_steps * inter
        if simple and op == "all_reduce" and nodes > 1 and size is not None \
                and size / (hw.channels * hw.ranks) >= 64:
            lat *= 1.9 if hw.generation == "volta" else 1.4
    elif algorithm == "tree":
        lat += 2 * ((hw.ppn - 1) * intra + log_nodes * inter)
    elif algorithm == "nvls":
        lat = intra + (inter if nodes > 1 else 0.0)
    elif algorithm == "nvls_tree":
        lat += intra + 2 * log_nodes * inter
    elif algorithm == "pat":
        lat += log_nodes * inter / 3.5 + hw.ranks * 2.8
    return lat * _US
