"""NCCL's tuner rules that depend on the host and the communicator's shape, written out from
NCCL 2.30 src/graph/tuning.cc and search.cc: the tree correction of its estimate, the plain
TREE pattern of one-GPU nodes, AMD hosts' LL cap and network overhead, LL128 only over NVLink,
PAT only at one GPU per node and the float ppn of uneven communicators."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants
from flowsolver.collectives._nccl_model import Hardware, predict

KIB = 1024


def _hw(graph, op="all_reduce", ranks=None):
    ranks, layout = participants(graph, op, ranks, None)
    return describe(graph, ranks, layout)


def test_tree_correction_moves_nccls_pick_on_two_dgx_h100():
    # 2 x 8 H100, 256 KiB all-reduce (logSize = log2(256 KiB / 64) = 12): NCCL's estimates,
    # REFERENCE's latencies (tree LL 25.2, tree LL128 48.5, ring LL 40.0 us) plus the transfer
    # at the tuner's bandwidth, the tree's times treeCorrectionFactor[proto][12] (LL 0.4,
    # LL128 0.6): tree LL 25.2 + 13.44 / 0.4 = 58.8, tree LL128 48.5 + 1.79 / 0.6 = 51.5 (its bus
    # min(0.92 x 370.8, 8 graph channels x 41.4) x 120 / 128, at most 8 x 36.7 = 293.6 GB/s, halved),
    # ring LL 52.6 us: NCCL runs tree LL128 (uncorrected, tree LL's 38.6 us would win)
    r = collective(tp.rail_optimized(nodes=2), "all_reduce", 256 * KIB)
    est = {k: v * 1e6 for k, v in r.estimates.items()}
    assert est["tree/LL"] == pytest.approx(58.8, abs=0.1)
    assert est["tree/LL128"] == pytest.approx(48.5 + 256 * KIB / (8 * 36.7e9 / 2) * 1e6 / 0.6, abs=0.01)
    assert est["ring/LL"] == pytest.approx(52.6, abs=0.1)
    assert (r.algorithm, r.protocol) == ("tree", "LL128")
    # at 1 GiB (logSize 24, past the table) none: the estimate's transfer is the size over the
    # tuner's bandwidth; at 1 MiB (logSize 14) tree Simple's 0.5 doubles it
    hw = _hw(tp.rail_optimized(nodes=2))
    zero = predict("all_reduce", 0.0, 300e9, hw)[("tree", "Simple")]
    big = predict("all_reduce", 2.0 ** 30, 300e9, hw)[("tree", "Simple")] - zero
    mid = predict("all_reduce", 2.0 ** 20, 300e9, hw)[("tree", "Simple")] - zero
    assert mid == pytest.approx(big / 2 ** 10 / 0.5, rel=1e-9)


def test_one_gpu_nodes_take_the_plain_tree_pattern():
    # fat_tree(4): 16 one-GPU hosts: search.cc sets NCCL_TOPO_PATTERN_TREE (ngpus == 1), and
    # tuning.cc charges the tree 0.85 of its bandwidth
    hw = _hw(tp.fat_tree(4))
    assert hw.single_gpu_node and hw.one_per_node
    size = 2.0 ** 30
    lat = {k: v for k, v in predict("all_reduce", 1.0, 100e9, hw).items()}
    with_tree = predict("all_reduce", size, 100e9, hw)[("tree", "Simple")] - lat[("tree", "Simple")]
    without = predict("all_reduce", size, 100e9, Hardware(**{**hw.__dict__, "single_gpu_node": False}))
    assert with_tree == pytest.approx((without[("tree", "Simple")] - lat[("tree", "Simple")]) / 0.85, rel=1e-6)
    assert not _hw(tp.rail_optimized(nodes=2)).single_gpu_node


def test_amd_hosts_cap_ll_lower_and_post_sends_slower():
    # DGX A100: two AMD EPYC 7742 (datasheet). 2 x 8 ranks, all-gather (15 steps, 1 across
    # nodes): ring LL's intra-node hop is at least the AMD network overhead, 2 us (getNetOverhead),
    # not Intel's 1: 6.6 + 14 x 2.0 + 2.7 = 37.3 us; LL's bandwidth is llMaxBws' AMD row on 2
    # nodes, 22.5 GB/s (Intel 39.0), x 16 / 15 for all-gather's algorithm bandwidth
    g = tp.rail_optimized(nodes=2, server="dgx_a100", link="ib_hdr")
    assert _hw(g).cpu == "amd" and _hw(tp.rail_optimized(nodes=2)).cpu == "intel"
    r = collective(g, "all_gather", 1024, protocol="LL", algorithm="ring")
    assert r.estimates["ring/LL"] * 1e6 == pytest.approx(37.3 + 1024 / (22.5e9 * 16 / 15) * 1e6, abs=0.01)
    # the same servers on Intel hosts: 6.6 + 14 x 1.0 + 2.7 = 23.3 us
    intel = tp.rail_optimized(nodes=2, server=tp.get_server("dgx_a100").with_(cpu="intel"), link="ib_hdr")
    r = collective(intel, "all_gather", 1024, protocol="LL", algorithm="ring")
    assert r.estimates["ring/LL"] * 1e6 == pytest.approx(23.3 + 1024 / (39.0e9 * 16 / 15) * 1e6, abs=0.01)
    with pytest.raises(ValueError, match="cpu must be one of intel, amd, arm"):
        tp.get_server("dgx_a100").with_(cpu="epyc")


def test_ll128_only_where_a_nodes_gpus_meet_over_nvlink():
    # tuning.cc: LL128 needs typeIntra <= PATH_NVB; PCIe-only servers' GPUs are PIX / PXB / PHB
    # / SYS apart, a one-GPU node's PATH_LOC (search.cc, ngpus == 1)
    pcie = collective(tp.rail_optimized(nodes=1, server="pcie_8gpu"), "all_reduce", 2 * 2 ** 20)
    assert not any(k.endswith("/LL128") for k in pcie.estimates) and pcie.protocol != "LL128"
    assert any(k.endswith("/LL128") for k in collective(tp.fat_tree(4), "all_reduce", 2 ** 20).estimates)


def test_pat_needs_one_gpu_per_node_and_uneven_nodes_use_the_rings_own_network_constant():
    # 3 ranks on 2 nodes: NCCL's ppn = 1.5, so no PAT (nNodes != nRanks) and the ring's own
    # network latency (ring LL 2.7 us, not the tree's 5.0): all-gather, 2 steps, 1 across nodes:
    # 6.6 + 1 x max(0.6, 1.0) + 1 x 2.7 = 10.3 us
    r = collective(tp.rail_optimized(nodes=2), "all_gather", 48, ranks=[0, 1, 8])
    assert not any(k.startswith("pat") for k in r.estimates)
    assert r.estimates["ring/LL"] * 1e6 == pytest.approx(10.3, abs=0.01)
    with pytest.raises(ValueError):
        collective(tp.rail_optimized(nodes=2), "all_gather", 48, ranks=[0, 1, 8], algorithm="pat")


def test_ll128_stays_where_gpus_meet_over_direct_nvlink_or_the_user_names_it(tmp_path):
    # two A100s joined GPU to GPU by 12 NVLink 3 links, no NVSwitch (an NCCL topology file):
    # NCCL's typeIntra is PATH_NVL <= PATH_NVB, LL128 stays on by default
    def pci(busid, cls, inner=""):
        return f'<pci busid="{busid}" class="{cls}" link_speed="32.0 GT/s PCIe" link_width="16">{inner}</pci>'

    def gpu(busid, rank, peer):
        nv = f'<nvlink target="{peer}" count="12" tclass="0x030200"/>'
        return pci(busid, "0x030200", f'<gpu dev="{rank}" sm="80" rank="{rank}" gdr="1">{nv}</gpu>')

    a, b = "0000:02:00.0", "0000:05:00.0"
    nic = pci("0000:03:00.0", "0x020700", '<nic><net name="mlx5_0" dev="0" speed="200000" port="1"/></nic>')
    body = pci("0000:01:00.0", "0x060400", gpu(a, 0, b) + gpu(b, 1, a) + nic)
    path = tmp_path / "direct.xml"
    path.write_text(f'<system version="1"><cpu numaid="0" vendor="GenuineIntel" arch="x86_64">{body}</cpu></system>')
    g = tp.rail_optimized(1, server=tp.from_nccl_xml(path))
    assert not _hw(g).pcie_only
    assert "ring/LL128" in collective(g, "all_reduce", 2 ** 20).estimates
    # on PCIe-only GPUs the check applies to NCCL's default only: NCCL_PROTO naming LL128 runs it
    # (tuning.cc: the path test only where LL128's enable is still 2, the default)
    pcie = tp.rail_optimized(nodes=1, server="pcie_8gpu")
    assert _hw(pcie).pcie_only
    named = collective(pcie, "all_reduce", 2 ** 18, protocol=["LL128", "Simple"])
    assert {k.split("/")[1] for k in named.estimates} == {"LL128", "Simple"}
    assert collective(pcie, "all_reduce", 2 ** 18, protocol="LL128").protocol == "LL128"


def test_arm_and_x86_hosts_mixed_are_not_x86_for_the_nvlstree_correction():
    # init.cc: ranks of several CPU architectures make cpuArch MIXED (and the vendor MIXED: the
    # AMD row of llMaxBws); tuning.cc corrects NVLSTree's estimate on Blackwell only where
    # cpuArch is x86
    b200 = tp.get_server("dgx_b200")
    g = tp.rail_optimized(nodes=2, server=b200)
    for n, d in g.nodes(data=True):
        if d.get("kind") == "gpu" and d.get("server") == 1:
            d["cpu"] = "arm"
    hw = _hw(g)
    assert hw.cpu == "mixed_arch"
    from flowsolver.collectives._nccl_model import _ll_max, tree_correction
    assert tree_correction("nvls_tree", "Simple", "all_reduce", 2 ** 20, hw) == 1.0
    assert tree_correction("nvls_tree", "Simple", "all_reduce", 2 ** 20, _hw(tp.rail_optimized(nodes=2, server=b200))) == 0.5
    assert _ll_max(hw) == pytest.approx(22.5e9)
