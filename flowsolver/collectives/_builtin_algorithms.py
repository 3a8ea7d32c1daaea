"""The built-in collective algorithms, each one :func:`~._algorithms.register_algorithm`
call (its schedules in :mod:`._schedules`; NCCL's cost model of NCCL's own algorithms in
:mod:`._nccl_model`). The order of registration is the order of ``ALGORITHMS[op]``."""

from __future__ import annotations

from . import _schedules as s
from ._algorithms import mark_builtin, register_algorithm


def _power_of_two(p, layout):
    return f"needs a power-of-two number of ranks, got {p}" if p & (p - 1) else None


def _nvswitch_domain(p, layout):
    return None if layout.nvls is not None else \
        f"needs every rank on one NVSwitch with NVLS: {layout.nvls_unavailable}"


def _servers_alike(p, layout):
    sizes = {len(g) for g in layout.groups}
    if len(layout.groups) < 2 or len(sizes) != 1:
        return ("needs ranks on at least 2 servers with the same number of ranks on each, got "
                f"{len(layout.groups)} server(s) with {sorted(sizes)} ranks")
    return None


_RING_OPS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")
register_algorithm("ring", dict(zip(_RING_OPS, (s._ring_all_reduce, s._ring_one_way, s._ring_one_way,
                                                 s._ring_broadcast, s._ring_reduce))),
                   nccl_ops=_RING_OPS, nccl_model=True)
register_algorithm("tree", {"all_reduce": s._tree}, nccl_ops=("all_reduce",), nccl_model=True)
register_algorithm("halving_doubling", {"all_reduce": s._halving_doubling, "reduce_scatter": s._halving_only,
                                        "all_gather": s._doubling_only}, unavailable=_power_of_two)
register_algorithm("hierarchical", {"all_reduce": s._hierarchical}, unavailable=_servers_alike)
# NVLS all-gather / reduce-scatter: NCCL's cost model on the ring's flow solve
register_algorithm("nvls", {"all_reduce": s._nvls, "reduce_scatter": None, "all_gather": None},
                   nccl_ops=("all_reduce", "reduce_scatter", "all_gather"), unavailable=_nvswitch_domain,
                   reads_nvswitch=True, nccl_model=True)
register_algorithm("nvls_tree", {"all_reduce": None}, nccl_ops=("all_reduce",), nccl_model=True)
register_algorithm("pat", {"reduce_scatter": None, "all_gather": None}, nccl_ops=("reduce_scatter", "all_gather"),
                   nccl_model=True)
register_algorithm("pairwise", {"all_to_all": s._all_to_all_pairwise})
register_algorithm("direct", {"all_to_all": s._all_to_all_direct, "send_recv": s._send_recv},
                   nccl_ops=("all_to_all", "send_recv"))
register_algorithm("binomial", {"broadcast": s._binomial_broadcast, "reduce": s._binomial_reduce})
mark_builtin()
