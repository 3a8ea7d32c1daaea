"""The "nvlink_mesh" server layout: GPUs joined pairwise by NVLink, no NVSwitch."""

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from topologies import ServerModel, get_server

from ..helpers import kind_count

# Datasheets (topologies/links.py): A100 12 NVLink 3 of 25 GB/s a direction (300 GB/s); H100 18
# NVLink 4 of 25 GB/s (450 GB/s). ALCF Polaris' device-affinity table: NV4 between every A100 pair.
A100_LINK = 300e9 / 12
H100_LINK = 450e9 / 18


def _quad(links=6, nics=4, **kw):
    return ServerModel("test_quad", gpus=4, layout="nvlink_mesh", gpu="h100_sxm", nvlink="nvlink4",
                       links_per_pair=links, nics=nics, **kw)


def _gpu_edges(g):
    return {(u, v): d for u, v, d in g.edges(data=True)
            if g.nodes[u]["kind"] == "gpu" and g.nodes[v]["kind"] == "gpu"}


def test_polaris_mesh_edges_are_four_nvlink3_a_pair():
    g = tp.rail_optimized(1, server="polaris_a100")
    assert kind_count(g, "gpu") == 4 and kind_count(g, "nvswitch") == 0 and kind_count(g, "nic") == 2
    pairs = _gpu_edges(g)
    assert len(pairs) == 4 * 3                              # every ordered pair, both ways
    for (u, v), d in pairs.items():
        assert d["capacity"] == pytest.approx(4 * A100_LINK)    # 100 GB/s a direction
        assert d["cables"] == 4 and d["tier"] == "nvlink" and d["tech"] == "nvlink3"
    # the GPU's 12 links all used: 3 peers x 4 = its datasheet aggregate
    for i in range(4):
        out = sum(d["capacity"] for (u, _), d in pairs.items() if u == f"s0/gpu{i}")
        assert out == pytest.approx(300e9)
    # 2 NICs on the CPU's root ports (ALCF's affinity table: PHB or SYS from every GPU, none under a
    # GPU's PCIe switch), every GPU and NIC on its own PCIe 4 link to the one CPU
    assert kind_count(g, "cpu") == 1 and kind_count(g, "pcie_switch") == 0
    for node in [f"s0/gpu{i}" for i in range(4)] + ["s0/nic0", "s0/nic1"]:
        assert g[node]["s0/cpu0"]["tech"] == g["s0/cpu0"][node]["tech"] == "pcie4"
    assert not any(g.has_edge(f"s0/gpu{i}", f"s0/nic{j}") for i in range(4) for j in range(2))
    assert [g.nodes[f"s0/gpu{i}"]["rail"] for i in range(4)] == [0, 0, 1, 1]


def test_polaris_has_the_a100_40gb_parts():
    # ALCF's Polaris machine overview (argonne-lcf/user-guides 0a867f3), its "A100 HGX (Polaris)" column:
    # "GPU Memory | 160 GiB HBM2", "GPU Memory BW | 6.4 TB/s" for the node's 4 GPUs
    spec = get_server("polaris_a100").gpu_spec
    assert 4 * spec.memory == 160 * 2**30
    assert 4 * spec.hbm_bandwidth == pytest.approx(6.4e12, rel=0.03)      # the datasheet's 1,555 GB/s a GPU


def test_nics_on_the_cpu_only_for_nvlink_servers():
    assert get_server("dgx_h100").with_(nics_on="cpu").to_dict()["nics_on"] == "cpu"
    with pytest.raises(ValueError, match="nics_on must be one of gpu, cpu"):
        _quad(nics_on="switch")
    with pytest.raises(ValueError, match="nics_on is for layouts"):
        get_server("pcie_8gpu").with_(nics_on="cpu")


def test_h100_quad_uses_all_18_links():
    g = tp.rail_optimized(2, server=_quad(), link="ib_hdr")
    pairs = _gpu_edges(g)
    assert len(pairs) == 2 * 12                             # no edge between the servers' GPUs
    assert all(d["capacity"] == pytest.approx(6 * H100_LINK) for d in pairs.values())
    for s in range(2):
        for i in range(4):
            assert sum(d["capacity"] for (u, _), d in pairs.items() if u == f"s{s}/gpu{i}") == pytest.approx(450e9)
            assert g[f"s{s}/gpu{i}"][f"s{s}/nic{i}"]["tier"] == "pcie"


def test_ring_rate_on_the_mesh_is_the_pairs_not_the_gpus():
    # a ring 0 -> 1 -> 2 -> 3 -> 0 of four flows: each flow alone on its pair's edge, so its
    # max-min rate is links_per_pair x one link (6 x 25 = 150 GB/s), a third of the GPU's
    # 450 GB/s that the same ring gets on an NVSwitch (each GPU sends one flow into the switch)
    ring = fs.Flows(src=np.array([0, 1, 2, 3]), dst=np.array([1, 2, 3, 0]), sizes=np.ones(4))
    mesh = fs.max_min_fair(fs.route(tp.rail_optimized(1, server=_quad()), ring))
    assert np.allclose(mesh.rates, 6 * H100_LINK)
    switch = fs.max_min_fair(fs.route(tp.rail_optimized(1, server=get_server("dgx_h100").with_(gpus=4, nics=4)), ring))
    assert np.allclose(switch.rates, 450e9)
    # all-to-all of 12 flows: every ordered pair on its own edge, 150 GB/s each, 450 a GPU
    src, dst = zip(*[(a, b) for a in range(4) for b in range(4) if a != b])
    a2a = fs.max_min_fair(fs.route(tp.rail_optimized(1, server=_quad()), fs.Flows(np.array(src), np.array(dst),
                                                                                   np.ones(12))))
    assert np.allclose(a2a.rates, 6 * H100_LINK)


def test_mesh_flags_and_description():
    m = get_server("polaris_a100")
    assert m.has_nvlink and m.links_per_pair == 4 and m.to_dict()["links_per_pair"] == 4
    assert m.to_dict()["layout"] == "nvlink_mesh" and "polaris_a100" in tp.server_names()
    assert get_server("dgx_h100").to_dict()["links_per_pair"] == 0


@pytest.mark.parametrize("changes,match", [
    (dict(links_per_pair=0), "links_per_pair"),                 # required: no default count
    (dict(links_per_pair=7), "NVLinks a GPU"),                  # 3 x 7 = 21 > 18
    (dict(gpus=5, nics=5, links_per_pair=4), "2 to 4 GPUs"),
    (dict(nvlink=None), "needs nvlink"),
    (dict(nvlink="pcie5"), "nvlink must be one of"),
    (dict(nics=3), "must divide gpus"),
])
def test_bad_mesh_is_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        _quad().with_(**changes)


def test_links_per_pair_only_for_the_mesh():
    with pytest.raises(ValueError, match="links_per_pair is for layout 'nvlink_mesh'"):
        get_server("dgx_h100").with_(links_per_pair=6)


def test_polaris_nics_at_the_fabric_rate():
    g = tp.rail_optimized(2, server="polaris_a100", link="ib_hdr")
    assert g["s1/nic1"]["su0/leaf1"]["capacity"] == pytest.approx(25e9)


def test_one_mesh_server_states_its_bisection_as_its_least_balanced_cut():
    # brute force over the balanced splits of the 4 GPUs: the least capacity crossing one way
    # (an NVSwitch's formula, gpus/2 x a GPU's NVLink, would say 2 x 300 GB/s for 4 A100s)
    from itertools import combinations
    g = tp.rail_optimized(1, server="polaris_a100")
    gpus = tp.gpus(g)
    cuts = []
    for side in combinations(gpus, len(gpus) // 2):
        a = set(side)
        cuts.append(sum(d["capacity"] for u, v, d in g.edges(data=True) if u in a and v in gpus and v not in a))
    assert g.graph["bisection_bandwidth"] == pytest.approx(min(cuts), rel=1e-12)
    assert min(cuts) == pytest.approx(4 * 4 * 25e9, rel=1e-12)      # 4 pairs cross, 4 NVLink 3 links each
