"""A two-tier rail fabric at 1:1 with a partial last unit is non-blocking between the server
halves: the max flow is half the servers' NICs at their rate. With the full units' uneven
extra uplinks laid end to end over the spines, 28 of the sizes 33-256 DGX H100 fell 1-8
cables short (66: 2, 69: 1, 133: 2, 195: 8); the second half of an even count of full units
now lays them as the first half did, on the same spines."""

import pytest

import topologies as tp

NDR, HDR = 50e9, 25e9           # one cable per direction, bytes/s (NDR 400 Gb/s, HDR 200 Gb/s)


def _spines(g):
    return sum(1 for _, d in g.nodes(data=True) if d.get("role") == "spine")


# nodes, spines (as built before the change: the fewest that hold the uplinks, or one or two
# more where the partial unit's shared spines would overfill)
@pytest.mark.parametrize("nodes, spines", [(66, 9), (67, 9), (69, 10), (71, 10), (131, 18), (133, 19), (145, 19),
                                           (194, 25), (195, 25), (199, 26), (203, 27), (207, 28), (64, 8),
                                           (127, 16)])
def test_partial_unit_is_non_blocking_dgx_h100(nodes, spines):
    g = tp.rail_optimized(nodes)
    nic_bound = nodes // 2 * 8 * NDR                 # half the servers' 8 NDR NICs
    d = tp.describe(g)
    assert d["bisection_bandwidth"] == pytest.approx(tp.bisection_max_flow(g))
    assert d["bisection_bandwidth"] == pytest.approx(nic_bound)
    assert _spines(g) == spines


@pytest.mark.parametrize("nodes, kw, per_server", [(35, dict(radix=32), 8 * NDR),
                                                   (133, dict(server="dgx_a100", link="ib_hdr"), 8 * HDR),
                                                   (203, dict(server="dgx_a100", link="ib_hdr"), 8 * HDR)])
def test_partial_unit_is_non_blocking_other_builds(nodes, kw, per_server):
    # were 6,750 / 13,150 / 20,000 GB/s against 6,800 / 13,200 / 20,200
    g = tp.rail_optimized(nodes, **kw)
    assert tp.bisection_max_flow(g) == pytest.approx(nodes // 2 * per_server)
