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


@pytest.mark.parametrize("per_node", [2, 4])
def test_part_of_each_node_sends_through_its_own_gpus_nics(per_node):
    # the first per_node GPUs of each of two servers: their own per_node NICs carry the buffer
    # (a whole server's 8 would let NVLSTree beat them 2-4x)
    size = 2**34
    g = tp.rail_optimized(nodes=2, link="eth_100g")
    ranks = [*range(per_node), *range(8, 8 + per_node)]
    r = collective(g, "all_reduce", size, ranks=ranks)
    assert r.time >= size / _node_egress("eth_100g", nics=per_node) * (1 - 1e-9)
