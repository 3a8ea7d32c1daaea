"""PXN where the proxy GPU is out: NCCL has no proxy on a GPU whose links failed, so the
sending GPU uses its own rail's NIC, as without PXN."""

import numpy as np

import flowsolver as fs
import topologies as tp
from flowsolver import Flows, route


def _gpu0_out(g):
    """``g`` with every link of s0/gpu0 (NVLink and PCIe, both ways) at capacity 0."""
    h = g.copy()
    for u, v in list(h.out_edges("s0/gpu0")) + list(h.in_edges("s0/gpu0")):
        h[u][v]["capacity"] = 0.0
    return h


def _hops(rm, f=0):
    links, _ = rm.column(f)
    return {(str(rm.links.src[l]), str(rm.links.dst[l])) for l in links}


def test_a_flow_whose_pxn_proxy_failed_leaves_by_its_own_nic():
    g = tp.rail_optimized(2)
    flows = Flows([1], [8], 1.0)            # s0/gpu1 -> s1/gpu0: PXN's proxy is s0/gpu0 (rail 0)
    assert {("s0/nvswitch", "s0/gpu0"), ("s0/gpu0", "s0/nic0")} <= _hops(route(g, flows, pxn=True))
    hops = _hops(route(_gpu0_out(g), flows, pxn=True))      # was: RoutingError, no path s0/gpu1 -> s0/nic0
    assert {("s0/gpu1", "s0/nic1"), ("s0/nic1", "su0/leaf1"), ("s1/nic0", "s1/gpu0")} <= hops
    assert not any("s0/gpu0" in (u, v) for u, v in hops)
    # a proxy that works is still taken: s0/gpu2 -> s1/gpu3 through s0/gpu3 and s0/nic3
    assert ("s0/gpu3", "s0/nic3") in _hops(route(_gpu0_out(g), Flows([2], [11], 1.0), pxn=True))


def test_a_collective_on_the_working_gpus_of_a_cluster_with_one_gpu_out_is_timed():
    # ranks 1..15 of 2 x 8 with s0/gpu0 out: a ring entering server 1 at its GPU 0 was routed
    # through s0/gpu0 (RoutingError)
    r = fs.collective(_gpu0_out(tp.rail_optimized(2)), "all_reduce", 2**28, ranks=range(1, 16), algorithm="ring")
    assert np.isfinite(r.time) and r.time > 0
