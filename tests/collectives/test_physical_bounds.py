"""Collective times against bounds that follow from the links alone, whatever NCCL's tuner
grants (units: bytes, seconds)."""

import pytest

import topologies as tp
from flowsolver import collective


def _node_egress(link: str, nics: int = 8) -> float:
    """What a server's NICs send into the fabric (bytes/s): the catalogue's rate at its
    efficiency (1 where the catalogue states none)."""
    tech = tp.get_link(link)
    return nics * tech.bandwidth * (tech.efficiency or 1.0)


@pytest.mark.parametrize("link, size", [("eth_100g", 2**36), ("ib_hdr", 2**33)])
@pytest.mark.parametrize("algorithm", ["auto", "nvls_tree"])
def test_two_node_all_reduce_sends_the_whole_buffer_through_the_nics(link, size, algorithm):
    # two nodes, no reduction in the network: each node sends at least 2 (2 - 1) / 2 = 1 buffer
    # out of its 8 NICs, so no algorithm beats size / egress. NCCL's tuner grants NVLSTree on two
    # nodes twice the ring's network bus bandwidth, 16/15 of this bound on 2 x 8 GPUs.
    g = tp.rail_optimized(nodes=2, link=link)
    r = collective(g, "all_reduce", size, algorithm=algorithm)
    bound = size / _node_egress(link)
    assert r.time >= bound * (1 - 1e-9)
    assert r.algbw <= _node_egress(link) * (1 + 1e-9)


def test_four_node_all_reduce_bound_holds():
    # 4 nodes: each sends at least 2 x 3 / 4 of the buffer
    size = 2**34
    g = tp.rail_optimized(nodes=4, link="eth_100g")
    r = collective(g, "all_reduce", size, algorithm="nvls_tree")
    assert r.time >= 1.5 * size / _node_egress("eth_100g") * (1 - 1e-9)
