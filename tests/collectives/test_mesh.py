"""Collectives on a 4-GPU NVLink mesh (no NVSwitch), as NCCL runs them.

The reference is NCCL's source (src/graph/search.cc of master 5067397c, whose rules NCCL 2.22
shares) and SURF Snellius' NCCL 2.22.3 log of 4 H100 on such a mesh
(odissei-benchmarks/nccl-tests runs/1node/all_gather_perf.log): "Channel 00/24 : 0 1 2 3",
"01/24 : 0 1 3 2", "02/24 : 0 2 3 1", "03/24 : 0 2 1 3", "04/24 : 0 3 1 2", "05/24 : 0 3 2 1",
then the same six again; "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p
channels, 16 p2p channels per peer"; "NVLS multicast support is not available".
"""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._hardware import describe, mesh_ring_channels
from flowsolver.collectives._layout import participants
from flowsolver.collectives._nccl_model import enabled
from flowsolver.collectives._p2p import p2p_comm

H100_LINK_VIEW = 20.6e9     # ncclTopoNVLinkBw on sm90 (src/graph/topo.h SM90_NVLINK_BW), bytes/s


def _quad(links=6, nics=4):
    return tp.ServerModel("test_quad", gpus=4, layout="nvlink_mesh", gpu="h100_sxm", nvlink="nvlink4",
                          links_per_pair=links, nics=nics)


def _pairs(links, gbs_a_link, gpus=4):
    return {(a, b): links * gbs_a_link for a in range(gpus) for b in range(gpus) if a != b}


@pytest.mark.parametrize("links,gen,gbs,expected", [
    # H100, 6 links a pair: path bw 6 x 20.6 = 123.6 (maxBw), a GPU's total 370.8 (totalBw).
    # sm90 speeds 60, 50, 40, 30, 24, ...: at 60 an arc carries floor(123.6 / 60) = 2 channels, and
    # the 6 directed Hamiltonian cycles of 4 GPUs use each arc twice: 6 channels, 360 < 370.8. Lower
    # speeds down to 0.49 x 60 give no more (50: 6 x 50; 40: 3 an arc, at most 8 rings as K4 has no
    # 3 arc-disjoint directed Hamiltonian cycles, 320; 30: 12 x 30 = 360, not more). Dup: 60 >= 25
    # and not < 50: 12 at 30. Pass 2: 40 fits 8 < 12 rings, 50 and 60 fit 6: 12 (NCCL prints 24).
    (6, "hopper", 20.6, 12),
    # 5 links: 103 a pair; 60 -> 2 rings (120), 50 -> 2 an arc, 6 rings (300), 40 -> 6 (240), 30 -> 8
    # (240), 24 / 50 < 0.49 stops; dup (50 is not < 50): 12 at 25; pass 2 finds no 12 at 30+.
    (5, "hopper", 20.6, 12),
    # 4 links: 82.4 a pair; 60 and 50 -> 1 an arc, 2 rings; 40 -> 2 an arc, 6 rings (240); 30 -> 6, 24 ->
    # 8 (192), 20 -> 12 (240, not more); no dup (sm90, 40 < 50, 6 > 4 channels): 6 (NCCL would print 12)
    (4, "hopper", 20.6, 6),
    # A100, 4 links: 80 a pair, total 240; sm80 speeds 40, 30, 20: at 40, 2 an arc, 6 rings = 240 =
    # totalBw, done; dup (sm80 is not > 80): 12 at 20; pass 2: 30 fits 2 an arc, 6 < 12
    (4, "ampere", 20.0, 12),
])
def test_ring_channels_follow_ncclTopoCompute(links, gen, gbs, expected):
    assert mesh_ring_channels(_pairs(links, gbs), 4, gen) == expected


def test_snellius_node_has_nccl_channels_rings_and_p2p_channels():
    g = tp.rail_optimized(1, server=_quad())
    ranks, layout = participants(g, "all_gather", None, None)
    # the log's six rings, one a channel of the flow solve (the order among them does not change
    # the flow solve: the log lists 0 2 3 1 before 0 2 1 3, the layout lexicographically)
    assert set(layout.rings) == {(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 3, 1), (0, 2, 1, 3), (0, 3, 1, 2), (0, 3, 2, 1)}
    assert len(layout.rings) == 6 and layout.nvls is None
    hw = describe(g, ranks, layout)
    # the log's 24 are the run's: the graph's 12 (the tuner's) and the run-time copy (connect.cc:460)
    assert (hw.graph_channels, hw.channels) == (12, 24)
    assert not hw.nvls and hw.intra == "nvlink" and not hw.pcie_only
    # a GPU's NVLink as NCCL sums it (getTotalBw): 3 pairs x 6 links x 20.6 GB/s
    assert hw.nvlink_bw == pytest.approx(18 * H100_LINK_VIEW)
    c = p2p_comm(g, ranks, hw)
    assert c.p2p_channels == 32 and c.per_peer == 16     # pow2(24); pow2(2 x 6 links), the log's
    # LL128 runs on NVLink paths (tuning.cc: typeIntra <= PATH_NVB)
    assert enabled("ring", "LL128", "all_gather", hw)


def test_every_ring_pair_carries_the_same_load():
    # 12 channels over the 6 cycles: each directed pair is in 2 of the 6, so every pair edge carries
    # 4 of the 48 ring hops and a GPU sends over all three of its pairs: the ring all-gather's
    # bus bandwidth is a GPU's 3 pairs x 150 GB/s at NCCL's view (20.6 / 25), 370.8 GB/s
    g = tp.rail_optimized(1, server=_quad())
    r = fs.collective(g, "all_gather", 1 << 34, algorithm="ring", protocol="Simple")
    assert r.channels == 24
    assert r.busbw <= 18 * H100_LINK_VIEW * 1.001
    assert r.busbw > 0.9 * 18 * H100_LINK_VIEW
    # 8 channels, a third of NCCL's 24, move a third
    eight = fs.collective(g, "all_gather", 1 << 34, algorithm="ring", protocol="Simple", channels=8)
    assert eight.busbw < 0.8 * r.busbw


def test_no_nvls_on_a_mesh():
    g = tp.rail_optimized(1, server=_quad())
    with pytest.raises(ValueError, match="NVSwitch"):
        fs.collective(g, "all_reduce", 1 << 28, algorithm="nvls")
    for size in (1 << 10, 1 << 20, 1 << 28, 1 << 32):
        assert fs.collective(g, "all_reduce", size).algorithm not in ("nvls", "nvls_tree")
    two = tp.rail_optimized(2, server=_quad(), link="ib_hdr")
    for size in (1 << 20, 1 << 30):
        assert fs.collective(two, "all_reduce", size).algorithm not in ("nvls", "nvls_tree")


def test_a_send_on_a_mesh_is_its_pairs_rate():
    # one pair's own edge: 6 links x 20.6 GB/s as NCCL sees them (the P2P channels, 8 x 5.7 % of the
    # GPU's 370.8, would allow 169); on an NVSwitch the same GPUs send at the GPU's whole NVLink
    g = tp.rail_optimized(1, server=_quad())
    mesh = fs.collective(g, "send_recv", 1 << 30, ranks=[0, 1])
    assert mesh.busbw == pytest.approx(6 * H100_LINK_VIEW, rel=0.01)
    switch = fs.collective(tp.rail_optimized(1, server=tp.get_server("dgx_h100").with_(gpus=4, nics=4)),
                           "send_recv", 1 << 30, ranks=[0, 1])
    assert switch.busbw > 2 * mesh.busbw


def test_an_nvswitch_node_keeps_its_channels():
    g = tp.rail_optimized(1, server=tp.get_server("dgx_h100").with_(gpus=4, nics=4))
    ranks, layout = participants(g, "all_gather", None, None)
    # NCCL's search over a GPU's 370.8 GB/s: 6 rings at 60, doubled to 12 at 30; 24 run (as 8 GPUs)
    hw = describe(g, ranks, layout)
    assert len(layout.rings) == 1 and (hw.graph_channels, hw.channels) == (12, 24)


def test_a_send_inside_a_wider_mesh_communicator_gets_the_communicators_channels():
    # NCCL's p2pnChannels comes from the communicator's channels (12 on 4 A100 of 4 links a pair,
    # paths.cc ncclTopoComputeP2pChannels: 2 x 12 rounded up, 32), and a peer's from its pair's
    # links (paths.cc ncclTopoGetNchannels: 2 x 4 links = 8); a communicator of the pair alone
    # has 4 channels, 8 P2P channels, 4 a peer
    g = tp.rail_optimized(1, server="polaris_a100")
    wide = fs.collective(g, "send_recv", 2**20, ranks=[0, 1, 2, 3])
    every = fs.collective(g, "send_recv", 2**20)
    pair = fs.collective(g, "send_recv", 2**20, ranks=[0, 1])
    assert wide.channels == every.channels == 8 and pair.channels == 4
    assert wide.time == pytest.approx(every.time, rel=1e-12) and wide.time < pair.time


def test_mesh_channels_are_ncclS_search_whatever_the_efficiency_option():
    # NCCL's search sees its own per-link rate (ncclTopoNVLinkBw), not a user's derating
    g = tp.rail_optimized(1, server="polaris_a100")
    counts = {e: fs.collective(g, "all_reduce", 2**30, efficiency=e).channels for e in (None, 0.5, 1.0)}
    assert set(counts.values()) == {24}


# NCCL's per-link NVLink bandwidth on A100 (ncclTopoNVLinkBw, src/graph/topo.h SM80_NVLINK_BW), GB/s
A100_LINK_GBS = 20.0
# the two directed Hamiltonian cycles of K4 from GPU 0 that use neither arc of pair 0-1
_AVOIDING_01 = {(0, 2, 1, 3), (0, 3, 1, 2)}


def _mesh_pair_down(g, factor):
    h = g.copy()
    for a, b in (("s0/gpu0", "s0/gpu1"), ("s0/gpu1", "s0/gpu0")):
        h.edges[a, b]["capacity"] *= factor
    return h


def test_mesh_rings_pack_the_cycles_at_the_search_speed():
    # 4 A100, 4 links a pair (80 GB/s); pair 0-1 at 1 link (20): at sm80's first speed, 40, a good
    # arc carries 2 channels, the slow one 0, so only the two cycles avoiding 0-1 fit, each arc of
    # theirs twice (the two are arc-disjoint): 4 rings, 160 < 180 (GPU 0's total); 30 gives 4 at 30,
    # 20 no more than 8 at 20: 4 at 40, doubled to 8 (mesh_ring_channels' count)
    from flowsolver.collectives._mesh_rings import mesh_rings
    pairs = _pairs(4, A100_LINK_GBS)
    assert set(mesh_rings(pairs, 4, "ampere")) == {(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3), (0, 2, 3, 1),
                                                   (0, 3, 1, 2), (0, 3, 2, 1)}
    pairs[0, 1] = pairs[1, 0] = A100_LINK_GBS
    rings = mesh_rings(pairs, 4, "ampere")
    assert sorted(rings) == sorted(2 * list(_AVOIDING_01))
    assert 2 * len(rings) == mesh_ring_channels(pairs, 4, "ampere") == 8
    pairs[0, 1] = pairs[1, 0] = 0.0                     # the pair failed: the same packing
    assert sorted(mesh_rings(pairs, 4, "ampere")) == sorted(2 * list(_AVOIDING_01))


@pytest.mark.parametrize("factor", [0.25, 0.0])
def test_a_slow_or_failed_mesh_pair_leaves_the_cycles_that_avoid_it(factor):
    # NCCL's search keeps no channel over a pair slower than its speed (followPath, search.cc:81):
    # its rings are the two cycles avoiding pair 0-1, whose arcs each carry half of a ring
    # collective's data where the healthy mesh's carry a third (each arc in 2 of the 6 cycles):
    # at the same link rates the bus bandwidth is 2/3 of the healthy mesh's
    g = tp.rail_optimized(1, server="polaris_a100")
    h = _mesh_pair_down(g, factor)
    ranks, layout = participants(h, "all_gather", None, None)
    assert set(layout.rings) == _AVOIDING_01 and layout.channels == 4
    if factor:
        hw = describe(h, ranks, layout)
        # 4 rings at 40 doubled to 8 (the tuner's), 16 run (connect.cc:460)
        assert (hw.graph_channels, hw.channels) == (8, 16) and hw.intra == "nvlink"
        # a GPU's NVLink is its pairs' (getTotalBw): 80 + 80 + 80 x factor GB/s
        assert hw.nvlink_bw == pytest.approx((2 + factor) * 4 * A100_LINK_GBS * 1e9)
    for op in ("all_gather", "all_reduce"):
        healthy = fs.collective(g, op, 1 << 34, algorithm="ring", protocol="Simple")
        slow = fs.collective(h, op, 1 << 34, algorithm="ring", protocol="Simple")
        assert slow.busbw / healthy.busbw == pytest.approx(2 / 3, rel=0.01)


def test_polaris_nics_on_the_cpu_make_typeinter_phb_and_take_ll128_off_across_nodes():
    # ALCF's affinity table: every GPU-NIC path of a Polaris node PHB or SYS, so NCCL's typeInter is
    # PATH_PHB (8) with or without PXN (no GPU has a PXB path to relay through, paths.cc); A100 keeps
    # LL128 only where typeInter <= PATH_PXB (tuning.cc, v2.18.5:285): no LL128 across nodes. The same
    # mesh with each NIC under its first GPU (PXB) keeps it.
    from flowsolver.collectives._nccl_model import PATH_PHB, PATH_PXB
    g = tp.rail_optimized(2, server="polaris_a100")
    near = tp.rail_optimized(2, server=tp.get_server("polaris_a100").with_(nics_on="gpu"))
    for pxn in (True, False):
        ranks, layout = participants(g, "all_reduce", None, None)
        assert describe(g, ranks, layout, pxn=pxn).nic_path == PATH_PHB
    ranks, layout = participants(near, "all_reduce", None, None)
    assert describe(near, ranks, layout).nic_path == PATH_PXB
    for op in ("all_reduce", "all_gather"):
        for size in (1 << 18, 1 << 22, 1 << 24):
            assert not any(k.endswith("/LL128") for k in fs.collective(g, op, size).estimates)
            assert any(k.endswith("/LL128") for k in fs.collective(near, op, size).estimates)
