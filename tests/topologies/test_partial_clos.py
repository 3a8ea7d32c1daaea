"""A fat-tree of fewer pods than k and a leaf-spine of one leaf and no spine (what the design
search buys for a GPU count below the full fabric)."""

import pytest

import topologies as tp

NDR = 400e9 / 8          # an NDR port: 400 Gb/s one direction, bytes/s


def _cables_at(g, node):
    return sum(d.get("cables", 1) for *_, d in g.out_edges(node, data=True))


def test_a_fat_tree_of_fewer_pods_keeps_the_pods_and_the_cores_they_use():
    # k = 64, 3 pods: 3 x 32 edge and aggregation switches; each core group takes 3 pods x 32
    # uplinks = 96 cables, ceil(96 / 64) = 2 cores of 48 ports; 32 groups
    g = tp.fat_tree(64, pods=3, server="dgx_h100")
    d = tp.describe(g)
    assert d["switches_by_role"] == {"aggregation": 96, "core": 64, "edge": 96}
    assert d["servers"] == 3 * 32 * 32 // 8
    cores = [n for n, x in g.nodes(data=True) if x.get("role") == "core"]
    assert {_cables_at(g, c) for c in cores} == {48}
    # non-blocking between the pods: half the servers' NICs (1,536 x 50 GB/s = 76.8 TB/s)
    assert d["bisection_bandwidth"] == pytest.approx(3 * 32 * 32 // 2 * NDR, rel=1e-12)
    # 5 pods of k = 8: ceil(5 x 4 / 8) = 3 cores a group of 20 uplinks: 7, 7, 6 cables; 80 hosts
    g = tp.fat_tree(8, pods=5)
    cores = sorted(_cables_at(g, n) for n, x in g.nodes(data=True) if x.get("role") == "core")
    assert cores == [6] * 4 + [7] * 8
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(40 * NDR, rel=1e-12)
    # pods = k is the whole fat-tree, cable for cable
    assert tp.fingerprint(tp.fat_tree(8, pods=8)) == tp.fingerprint(tp.fat_tree(8))
    for bad, match in ((9, "pods must be at most k = 8, got 9"), (1, "pods must be an integer >= 2")):
        with pytest.raises(ValueError, match=match):
            tp.fat_tree(8, pods=bad)


def test_a_leaf_spine_of_one_leaf_is_a_single_switch():
    g = tp.leaf_spine(1, 0, 64, server="dgx_h100")
    d = tp.describe(g)
    assert (d["switches"], d["servers"], d["network_diameter"]) == (1, 8, 2)
    assert g.graph["params"]["uplinks"] == 0 and g.graph["params"]["oversubscription"] == 1.0
    assert d["bisection_bandwidth"] == pytest.approx(4 * 8 * NDR, rel=1e-12)    # 4 servers' NICs
    with pytest.raises(ValueError, match="spines must be >= 1 with 2 leaves"):
        tp.leaf_spine(2, 0, 8)
