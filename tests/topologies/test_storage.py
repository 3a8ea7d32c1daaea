"""topologies.storage: front-end and compute-fabric storage."""

import networkx as nx
import pytest

import topologies as tp

from ..helpers import kind_count


def test_frontend_storage_is_a_separate_network():
    g = tp.rail_optimized(64)
    before = tp.describe(g)
    ids = tp.add_storage(g, 4, link="eth_400g", network="frontend")
    assert ids == [f"storage{i}" for i in range(4)]
    assert kind_count(g, "storage") == 4 and kind_count(g, "nic", "frontend") == 64
    # storage reaches a server's host memory without crossing the compute fabric
    path = nx.shortest_path(g, "storage0", "s17/cpu0")
    assert path == ["storage0", "frontend/switch", "s17/fe_nic", "s17/cpu0"]
    # on a DGX the front end ends in host memory: no GPU is reachable from storage
    assert not any(g.nodes[n]["kind"] == "gpu" for n in nx.descendants(g, "storage0"))
    after = tp.describe(g)
    assert after["bisection_bandwidth"] == before["bisection_bandwidth"]
    assert after["bisection_method"] == before["bisection_method"]
    tp.validate(g)


def test_compute_storage_shares_the_compute_fabric():
    g = tp.fat_tree(4)
    tp.add_storage(g, 2, link="ib_ndr", network="compute")
    cores = [n for n, d in g.nodes(data=True) if d.get("role") == "core"]
    assert sum(g["storage/leaf"][c]["cables"] for c in cores if g.has_edge("storage/leaf", c)) == 2
    path = nx.shortest_path(g, "storage1", "s3/gpu0")
    assert path[-2] == "s3/nic0"  # GPUDirect Storage: in through the compute NIC
    assert any(g.nodes[n].get("role") == "core" for n in path)
    assert tp.describe(g)["bisection_bandwidth"] == pytest.approx(8 * 50e9)
    tp.validate(g)
