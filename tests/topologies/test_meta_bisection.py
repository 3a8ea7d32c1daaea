"""meta_24k's recorded bisection is the cut between the server halves (adv17d F3: with an odd
pod count it was floor(pods/2) pods' uplinks, the cut between unequal halves). Expected values
worked by hand: a rack is 16 GPUs of 400G (50 GB/s) NICs under a ToR of 16 uplinks, one to each
of 16 cluster switches; a cluster switch of 8 racks has 8 down and ceil(8 / 7) = 2 up at 1:7."""

import pytest

import topologies as tp

NIC = 50e9          # RoCE 400G: 50 GB/s


@pytest.mark.parametrize("pods, expected", [
    (2, 1 * 16 * 2 * NIC),                  # one pod's 16 x 2 uplinks: 1,600 GB/s
    (3, 1 * 16 * 2 * NIC + 64 * NIC),       # + the middle pod's halves, 64 GPUs each: 4,800
    (5, 2 * 16 * 2 * NIC + 64 * NIC),       # two whole pods a side + the middle pod: 6,400
])
def test_bisection_between_the_server_halves(pods, expected):
    g = tp.meta_24k(pods=pods, racks_per_pod=8)
    d = tp.describe(g)
    assert d["bisection_method"].startswith("formula")
    assert d["bisection_bandwidth"] == pytest.approx(expected, rel=1e-12)
    assert tp.bisection_max_flow(g) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kw", [
    dict(pods=2, cluster_switches=3, aggregation_oversubscription=1.0),   # 16 ToR uplinks over 3
    dict(pods=3, cluster_switches=6),                                     # 16 over 6
    dict(pods=3, aggregation_per_plane=3),                                # 2 uplinks over 3 switches
])
def test_uneven_spreads_report_the_max_flow(kw):
    # a cluster switch taking 42 or 43 ToR cables cannot fill 43 uplinks (2 pods at 1:1 over 3
    # cluster switches: the formula's 3 x 43 x 50 = 6,450 GB/s exceeds a pod's 128 NICs, 6,400)
    g = tp.meta_24k(racks_per_pod=8, **kw)
    d = tp.describe(g)
    assert not d["bisection_method"].startswith("formula")
    assert d["bisection_bandwidth"] == pytest.approx(tp.bisection_max_flow(g), rel=1e-12)
    assert d["bisection_bandwidth"] <= 128 * NIC * (kw["pods"] / 2)
