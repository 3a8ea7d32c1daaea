"""Clos generators against port arithmetic done by hand: a leaf's oversubscription is its NICs'
bandwidth over its uplinks' (a dual-port NIC is two ports and twice the bandwidth; a 400G NIC
under 800G uplinks half an uplink), and no switch uses more than its radix ports, for every node
count and partial scalable unit.

Rates (one direction): NDR 400 Gb/s = 50 GB/s, XDR 800 Gb/s = 100 GB/s, HDR 200 Gb/s = 25 GB/s
(docs REFERENCE "Link technologies"); a DGX H100 has 8 single-port 400G NICs, a DGX A100 8
200G HDR NICs."""

from collections import Counter

import pytest

import topologies as tp

NDR, XDR, HDR = 50e9, 100e9, 25e9
DUAL = tp.get_server("dgx_h100").with_(nic_ports=2)         # 8 NICs of 2 x 400G


def _ports(g):
    """Cables at every switch (parallel cables counted one by one)."""
    out = Counter()
    for u, _, d in g.edges(data=True):
        if g.nodes[u]["kind"] == "switch":
            out[u] += d["cables"]
    return out


def _down_up(g, sw):
    """Bandwidth a switch has to its endpoints (down) and to switches of a higher tier (up)."""
    down = up = 0.0
    for v, d in g[sw].items():
        if g.nodes[v]["kind"] != "switch":
            down += d["capacity"]
        elif g.nodes[v]["tier"] > g.nodes[sw]["tier"]:
            up += d["capacity"]
    return down, up


def _leaves(g):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d["tier"] == 1]


def _switch_models(g):
    return {line.part.name for line in tp.bill(g).lines if line.part.category == "switch"}


def test_dual_port_nics_get_a_leaf_of_16_servers_at_1_to_1():
    # a leaf of s dual-port servers: 2s ports down (2s x 50 GB/s) and, non-blocking, 2s NDR
    # uplinks: 4s <= 64 ports -> s = 16. 64 servers: 4 units, 32 leaves (<= 64: two tiers),
    # 32 leaves x 32 uplinks / 64 ports = 16 spines; every switch a 64-port QM9700
    g = tp.rail_optimized(64, server=DUAL)
    p = g.graph["params"]
    assert (p["servers_per_unit"], p["units"], p["uplinks"], p["oversubscription"]) == (16, 4, 32, 1.0)
    roles = Counter(d["role"] for _, d in g.nodes(data=True) if d["kind"] == "switch")
    assert (roles["leaf"], roles["spine"]) == (32, 16)
    assert set(_ports(g).values()) == {64}
    for leaf in _leaves(g):
        assert _down_up(g, leaf) == (16 * 2 * NDR, 32 * NDR)
    assert _switch_models(g) == {"quantum2_qm9700"}
    # at 2:1: 2s down + s up <= 64 -> s = 21, 21 uplinks for 2100 GB/s: 2100 / 1050 = 2
    g = tp.rail_optimized(64, server=DUAL, oversubscription=2)
    assert (g.graph["params"]["servers_per_unit"], g.graph["params"]["uplinks"]) == (21, 21)
    down, up = _down_up(g, "su0/leaf0")
    assert (down, up) == (21 * 2 * NDR, 21 * NDR) and g.graph["params"]["oversubscription"] == 2.0


def test_a_unit_whose_leaf_exceeds_the_radix_is_an_error_naming_the_parameters():
    # 32 dual-port servers: 64 down + 64 up = 128 ports on a 64-port leaf
    with pytest.raises(ValueError, match=r"servers_per_unit=32 .* 64 ports down \(nic_ports=2 .* 64 up .* 128 "
                                         r"ports, more than radix=64; use servers_per_unit <= 16"):
        tp.rail_optimized(64, server=DUAL, servers_per_unit=32)
    with pytest.raises(ValueError, match=r"servers_per_unit=32 .*radix=64"):
        tp.rail_optimized_limit(server=DUAL, servers_per_unit=32)
    # the limit counts the unit that is built: 8192 servers of 32 become 64 pods x 4 units of 16
    assert tp.rail_optimized_limit(server=DUAL) == 8192 // 2
    # a 4-port NIC's leaf of one server: 4 down + 4 up > radix 4
    with pytest.raises(ValueError, match=r"not one server's leaf fits"):
        tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(nic_ports=4), radix=4)


@pytest.mark.parametrize("server,link,nic,spines", [("dgx_h100", "ib_xdr", NDR, 4), ("dgx_a100", "ib_ndr", HDR, 4),
                                                    ("dgx_h100", "ib_ndr", NDR, 8)])
def test_uplinks_carry_the_nics_bandwidth_not_their_count(server, link, nic, spines):
    # 32 servers a leaf: 32 x nic down; 1:1 needs 32 x nic / uplink rate uplinks. 400G NICs
    # under 800G: 16 uplinks; 200G NICs under 400G: 16; 400G under 400G: 32. Two units:
    # 16 leaves x uplinks / 64 ports spines (16 x 16 / 64 = 4; 16 x 32 / 64 = 8, the H100 RA)
    g = tp.rail_optimized(64, server=server, link=link)
    rate = tp.get_link(link).bandwidth
    uplinks = int(32 * nic / rate)
    for leaf in _leaves(g):
        assert _down_up(g, leaf) == (32 * nic, uplinks * rate)
    assert sum(1 for _, d in g.nodes(data=True) if d.get("role") == "spine") == spines
    assert max(_ports(g).values()) <= 64
    assert g.graph["params"]["uplinks"] == uplinks and g.graph["params"]["oversubscription"] == 1.0


def test_a_partial_unit_fills_just_enough_spines_to_the_radix():
    # 40 DGX H100: 8 leaves x 32 uplinks + 8 leaves x 8 = 320 uplinks = 5 spines x 64 exactly;
    # 48: 256 + 128 = 384 = 6 x 64; 88: 2 x 256 + 8 x 24 = 704 = 11 x 64
    for nodes, spines in [(40, 5), (48, 6), (88, 11)]:
        g = tp.rail_optimized(nodes)
        ports = _ports(g)
        assert sorted(ports[s] for s, d in g.nodes(data=True) if d.get("role") == "spine") == [64] * spines
        assert _switch_models(g) == {"quantum2_qm9700"}


# partial units of every size class at radix 16, 32 and 64, and the counts the first generator got wrong
SCAN = [2, 3, 5, 7, 9, 12, 17, 20, 25, 31, 33, 36, 40, 47, 48, 56, 72, 79, 88, 103, 116, 119, 139, 300]


@pytest.mark.parametrize("radix", [64, 32, 16])
@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
def test_no_switch_beyond_the_radix_and_leaves_at_the_ratio_asked(radix, ratio):
    # property: every built switch uses <= radix ports, every leaf's NIC / uplink bandwidth is at
    # most the ratio asked, and params state the worst leaf's ratio
    for nodes in SCAN:
        for full in (False, True) if nodes < 200 else (False,):
            try:
                g = tp.rail_optimized(nodes, radix=radix, oversubscription=ratio, full_units=full)
            except ValueError as err:           # only beyond the size limit of three tiers
                assert "nodes must be at most" in str(err) and nodes > 100
                continue
            assert max(_ports(g).values()) <= radix, (nodes, full)
            worst = max(down / up for down, up in map(lambda leaf: _down_up(g, leaf), _leaves(g)))
            assert worst <= ratio * (1 + 1e-12) and g.graph["params"]["oversubscription"] == pytest.approx(worst)
    # a leaf of s servers at ratio r: s down + ceil(s / r) up <= radix, s at most 32
    most = max(s for s in range(1, 33) if s + -(-s // int(ratio)) <= radix)
    assert g.graph["params"]["servers_per_unit"] == most


@pytest.mark.parametrize("server,link", [(DUAL, "ib_ndr"), ("dgx_h100", "ib_xdr")])
def test_other_nics_stay_within_the_radix_over_node_counts(server, link):
    for nodes in range(2, 70, 3):
        g = tp.rail_optimized(nodes, server=server, link=link)
        assert max(_ports(g).values()) <= 64, nodes
        assert max(d / u for d, u in map(lambda leaf: _down_up(g, leaf), _leaves(g))) <= 1.0, nodes


@pytest.mark.parametrize("k,servers", [(8, 8), (16, 64)])
def test_fat_tree_edge_switches_hold_dual_port_nics_in_k_ports(k, servers):
    # an edge switch has k/2 ports down: k/4 dual-port NICs (2 x 50 GB/s each) = k/2 x 50 GB/s,
    # as much as its k/2 uplinks. k = 8: 2 NICs an edge, 8 a pod = 1 DGX a pod, 8 pods;
    # k = 16: 4 an edge, 32 a pod = 4 DGX, 16 pods
    g = tp.fat_tree(k, server=DUAL)
    assert g.graph["params"]["servers"] == servers
    assert max(_ports(g).values()) == k
    for edge in _leaves(g):
        assert _down_up(g, edge) == (k / 2 * NDR, k / 2 * NDR)
    # bisection: the smaller of the k^3/8 core cables and half the servers' NICs at their
    # PCIe host link (a dual-port NIC's 100 GB/s is more than PCIe 5 x16 carries)
    pcie = tp.get_link(DUAL.host_link).bandwidth
    assert g.graph["bisection_bandwidth"] == pytest.approx(min(k ** 3 / 8 * NDR, servers // 2 * 8 * pcie))
    with pytest.raises(ValueError, match=r"k = 8 gives an edge switch k/2 = 4 ports down, fewer than one NIC's "
                                         r"nic_ports = 8"):
        tp.fat_tree(8, server=tp.get_server("dgx_h100").with_(nic_ports=8))


@pytest.mark.parametrize("radix", [64, 32, 16])
def test_multi_plane_planes_stay_within_the_radix(radix):
    # each plane is rail_optimized of single-port NICs: its unit is sized to the radix as theirs
    g = tp.multi_plane(64, planes=2, radix=radix)
    assert max(_ports(g).values()) <= radix
