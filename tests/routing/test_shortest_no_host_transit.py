"""Policy ``shortest`` never forwards through a server's NIC or other parts between two
switches (adv21b F4: a dual-homed GPU's NIC, with a port on each of two leaves, carried half the
traffic between them; no RDMA NIC forwards between its ports)."""

import numpy as np
import pytest

import topologies as tp
from flowsolver.routing import route
from flowsolver.traffic import Flows

# GPUs 0, 1 on leaf 5; GPUs 2, 3 on leaf 6; GPU 4 dual-homed (leaves 5 and 6); both leaves to spine 7
LINKS = ["0 5", "1 5", "2 6", "3 6", "4 5", "4 6", "5 7", "6 7"]


def _dual_homed(tmp_path):
    path = tmp_path / "topo"
    path.write_text("8 1 0 3 8 H100\n5 6 7\n" + "".join(f"{ln} 400Gbps 0.0005ms 0\n" for ln in LINKS))
    return tp.from_simai(path)


def _loads(g, policy, src, dst):
    rm = route(g, Flows([src], [dst], [1.0]), policy)
    load = np.asarray(rm.link_loads(np.array([1.0]))).ravel()
    return {(rm.links.src[i], rm.links.dst[i]): float(load[i]) for i in np.flatnonzero(load > 0)}


@pytest.mark.parametrize("policy", ["shortest", "ecmp"])
def test_traffic_between_leaves_goes_by_the_spine_not_a_hosts_nic(tmp_path, policy):
    """Rank 0 (leaf 5) to rank 2 (leaf 6): by hand, GPU -> NIC -> sw5 -> sw7 -> sw6 -> NIC ->
    GPU, all of it (sw5 -> s4/nic0 -> sw6 is as short, but a NIC does not forward)."""
    g = _dual_homed(tmp_path)
    loads = _loads(g, policy, 0, 2)
    assert loads[("sw5", "sw7")] == pytest.approx(1.0) and loads[("sw7", "sw6")] == pytest.approx(1.0)
    assert not any("s4/" in u or "s4/" in v for u, v in loads)
    # 6 links, each carrying the whole flow
    assert sorted(loads.values()) == pytest.approx([1.0] * 6)


def test_the_dual_homed_gpu_still_uses_both_its_ports(tmp_path):
    """Its own traffic leaves by either leaf: to rank 0 (leaf 5) by one hop, to rank 2 by the
    other; a host's NIC is an endpoint for its own GPU, not closed to it."""
    g = _dual_homed(tmp_path)
    assert _loads(g, "shortest", 4, 0)[("s4/nic0", "sw5")] == pytest.approx(1.0)
    assert _loads(g, "shortest", 4, 2)[("s4/nic0", "sw6")] == pytest.approx(1.0)
    assert _loads(g, "shortest", 0, 4)[("sw5", "s4/nic0")] == pytest.approx(1.0)


def test_a_leaf_cut_off_from_the_spine_is_no_path_not_a_route_through_a_host(tmp_path):
    """With leaf 6's uplink failed, leaf 6 reaches leaf 5 only through GPU 4's NIC: no route
    (it went through the NIC)."""
    from flowsolver.routing import RoutingError

    g = _dual_homed(tmp_path)
    for u, v in (("sw6", "sw7"), ("sw7", "sw6")):
        g[u][v]["capacity"] = 0.0
    with pytest.raises(RoutingError):
        route(g, Flows([0], [2], [1.0]), "shortest")


def test_inside_a_server_and_across_rails_the_paths_are_unchanged():
    """rail_optimized(2) of DGX H100: GPU 0 to GPU 1 of its own server by NVLink (2 links);
    GPU 0 of server 0 to GPU 1 of server 1 (rank 9, another rail) by its own NIC, leaf 0, the
    spine, leaf 1 and the other GPU's NIC: 6 links of the whole flow (a GPU forwards nothing, so
    the NVSwitch leads to no NIC), none of another server's."""
    g = tp.rail_optimized(2)
    r = route(g, Flows([0], [1], [1.0]), "shortest")
    load = np.asarray(r.link_loads(np.array([1.0]))).ravel()
    used = [(r.links.src[i], r.links.dst[i]) for i in np.flatnonzero(load > 0)]
    assert sorted(used) == [("s0/gpu0", "s0/nvswitch"), ("s0/nvswitch", "s0/gpu1")]
    r = route(g, Flows([0], [9], [1.0]), "shortest")
    load = np.asarray(r.link_loads(np.array([1.0]))).ravel()
    used = sorted((r.links.src[i], r.links.dst[i]) for i in np.flatnonzero(load > 0))
    assert used == sorted([("s0/gpu0", "s0/nic0"), ("s0/nic0", "su0/leaf0"), ("su0/leaf0", "spine0"),
                           ("spine0", "su0/leaf1"), ("su0/leaf1", "s1/nic1"), ("s1/nic1", "s1/gpu1")])
    assert load[load > 0] == pytest.approx([1.0] * 6)
