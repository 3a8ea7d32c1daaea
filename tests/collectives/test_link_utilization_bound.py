"""A link's mean utilization during the transfers is bytes / (capacity x time): at most 1. NVLS,
NVLSTree and PAT are timed by NCCL's cost model from the ring's flow solve (their steps are the
ring's); where NCCL's time is shorter than the ring's bytes allow, those bytes are not what the
links carried (NVLS reduces in the switch), so the links are shown as the ring's solve had them,
never above their rate (2 x DGX H100, 1 GiB all-reduce on NVLSTree read 1.27 before)."""

import numpy as np
import pytest

import topologies as tp
from flowsolver import collective

GIB = 1 << 30


@pytest.mark.parametrize("server, nodes, link, size", [("dgx_h100", 2, "ib_ndr", GIB), ("dgx_b200", 2, "ib_ndr", GIB),
                                                        ("dgx_h100", 2, "eth_100g", 16 << 20)])
def test_an_nccl_modelled_algorithm_never_shows_a_link_above_its_rate(server, nodes, link, size):
    g = tp.rail_optimized(nodes, server=server, link=link)
    r = collective(g, "all_reduce", size, algorithm="nvls_tree")
    ring = collective(g, "all_reduce", size, algorithm="ring", protocol="Simple")
    assert r.time < ring.time               # NCCL's NVLSTree faster than the ring's bytes allow here
    util = np.asarray(r.link_utilization)
    assert util.max() <= 1.0 + 1e-9
    assert util.max() > 0.5                 # still the ring's busy links, not zeros


def test_the_same_bytes_over_a_longer_time_are_less_busy():
    """A ring's own bytes, timed by NCCL's model with LL128 (slower than Simple on these links at
    1 GiB) instead of Simple: each link's utilization scales with the inverse of the transfer time."""
    g = tp.rail_optimized(1)
    simple = collective(g, "all_reduce", GIB, algorithm="ring", protocol="Simple")
    ll128 = collective(g, "all_reduce", GIB, algorithm="ring", protocol="LL128")
    moved = lambda r: sum(st.count * st.transfer for st in r.steps)  # noqa: E731
    assert moved(ll128) > moved(simple)
    np.testing.assert_allclose(np.asarray(ll128.link_utilization) * moved(ll128),
                               np.asarray(simple.link_utilization) * moved(simple), rtol=1e-9, atol=1e-12)
