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


def test_a_partial_unit_fills_just_enough_spines_to_the_radix():
    # 40 DGX H100: 8 leaves x 32 uplinks + 8 leaves x 8 = 320 uplinks = 5 spines x 64 exactly;
    # 48: 256 + 128 = 384 = 6 x 64; 88: 2 x 256 + 8 x 24 = 704 = 11 x 64
    for nodes, spines in [(40, 5), (48, 6), (88, 11)]:
        g = tp.rail_optimized(nodes)
        ports = _ports(g)
        assert sorted(ports[s] for s, d in g.nodes(data=True) if d.get("role") == "spine") == [64] * spines
        assert _switch_models(g) == {"quantum2_qm9700"}
