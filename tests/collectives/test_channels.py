"""NCCL's two channel counts: its ring graph's (what the tuner's per-channel caps count) and the
run's (what the kernels split a buffer over, the "N coll channels" NCCL prints).

Expected values are worked by hand from NCCL's source (master 5067397c): the speed arrays
(src/graph/search.cc:1051-1065), the search's passes (search.cc:1170-1281), ncclTopoDupChannels
(search.cc:1036-1047), the run-time copies (src/graph/connect.cc:460 and :476), the tuner's caps
(src/graph/tuning.cc:324-335) and NVLS's channels (src/transport/nvls.cc:155-157), and from the
counts NCCL prints in published logs.
"""

import warnings
from pathlib import Path

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver import nccl_tests
from flowsolver.collectives import nccl_channels, nccl_graph_channels
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants
from flowsolver.collectives._nccl_model import Hardware, tuner_algbw

LOGS = Path(__file__).resolve().parents[3] / "shared" / "data" / "nccl-tests"


@pytest.mark.parametrize("generation,nvlink_gbs,graph,run", [
    # H100: 18 NVLinks x 20.6 = 370.8 GB/s a GPU. sm90 speeds 60, 50, 40, 30, 24: at 60 floor(370.8 /
    # 60) = 6 rings (360 < 370.8); 50 -> 7 (350), 40 -> 9 (360), 30 -> 12 (360): none more; 24 / 60 <
    # 0.49 stops. Dup: 60 >= 50 -> 12 at 30; pass 2 finds no 12 at 40+. Run: 24, as NCCL prints
    # for 8-GPU H100 nodes ("24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels")
    ("hopper", 370.8, 12, 24),
    # A100: 12 x 20 = 240. sm80 speeds 40, 30, 20: 6 at 40 = 240 reaches totalBw; dup (sm80) -> 12
    ("ampere", 240.0, 12, 24),
    # B200: 18 x 40.1 = 721.8. sm100 speeds 90, 80, 70, 60, 50, 45, 40: 8 at 90 (720); 80 -> 9 (720),
    # 70 -> 10, 60 -> 12 (720), 50 -> 14, 45 -> 16 (720): none more; 40 / 90 < 0.49 stops. Dup -> 16 at 45
    ("blackwell", 721.8, 16, 32),
])
def test_one_nvswitch_node_follows_the_search(generation, nvlink_gbs, graph, run):
    kw = dict(generation=generation, nvlink_gbs=nvlink_gbs)
    assert nccl_graph_channels(1, 8, 8, True, **kw) == graph
    assert nccl_channels(1, 8, 8, True, **kw) == run


@pytest.mark.parametrize("gpus,nics,generation,net_gbs,graph,run", [
    # 8 NDR NICs behind PCIe Gen5 (min(50, 48) = 48): one ring a NIC at 48; sm90, < 50 and 8 > 4
    # channels: no dup; run 2 x 8 (and 16 is not < 16: no second copy)
    (8, 8, "hopper", 48.0, 8, 16),
    # 4 of them for 8 GPUs: 4 rings at 48, 4 is not > 4: doubled to 8 at 24; run 16
    (8, 4, "hopper", 48.0, 8, 16),
    # one GPU and one NIC a node: 1 ring at 48, doubled to 2 at 24, run 4 (24 is not > 45)
    (1, 1, "hopper", 48.0, 2, 4),
    # 8 HDR NICs behind PCIe Gen4 (min(25, 24) = 24): 24 < 25, no dup; run 16
    (8, 8, "ampere", 24.0, 8, 16),
    # B300's 800 Gb/s NICs behind PCIe Gen6 (96): sm100 speed 96 >= 50: doubled to 16 at 48, run 32
    (8, 8, "blackwell", 96.0, 16, 32),
])
def test_across_nodes_one_ring_a_nic_doubled_as_nccl_does(gpus, nics, generation, net_gbs, graph, run):
    kw = dict(generation=generation, net_gbs=net_gbs)
    assert nccl_graph_channels(2, gpus, nics, True, **kw) == graph
    assert nccl_channels(2, gpus, nics, True, **kw) == run


def test_the_second_run_time_copy_on_hopper_below_16_channels():
    # connect.cc:476: sm >= 90, across nodes, bwIntra > 45 and fewer than 16: copied again. 5 NICs at
    # 48 GB/s (sm90, < 50, 5 > 4: no dup): 5, run 10 -> 20; at 45 GB/s (not > 45): 10
    assert nccl_channels(2, 8, 5, True, generation="hopper", net_gbs=48.0) == 20
    assert nccl_channels(2, 8, 5, True, generation="hopper", net_gbs=45.0) == 10


def test_a_published_log_prints_the_run_count():
    # CCI-MOC's 2 x 4 H100 on one 400 Gb/s RoCE NIC a node (NCCL 2.26.2): 1 ring at 48 GB/s (PCIe
    # Gen5, 50 GB/s NIC), doubled to 2 at 24 (1 is not > 4), run 4
    path = LOGS / "moc_roce_2xH100_sendrecv_roce_4gpu.txt"
    if not path.exists():
        pytest.skip("../shared is absent")
    printed = nccl_tests.read(path).attrs["coll_channels"]
    assert printed == nccl_channels(2, 4, 1, False, generation="hopper", net_gbs=48.0) == 4


def test_describe_gives_both_counts_and_nvls_its_own():
    one = tp.rail_optimized(nodes=1)
    ranks, layout = participants(one, "all_reduce", None, None)
    hw = describe(one, ranks, layout)
    assert (hw.graph_channels, hw.channels, hw.nvls_channels) == (12, 24, 16)    # NVLS_NCHANNELS_SM90 = 16
    two = tp.rail_optimized(nodes=2)
    ranks, layout = participants(two, "all_reduce", None, None)
    hw = describe(two, ranks, layout)
    assert (hw.graph_channels, hw.channels, hw.nvls_channels) == (8, 16, 16)
    # sm100 (nvls.cc:156-157): 24 inside one NVLink domain, 32 across nodes
    for nodes, nvls in ((1, 24), (2, 32)):
        g = tp.rail_optimized(nodes=nodes, server="dgx_b200")
        ranks, layout = participants(g, "all_reduce", None, None)
        assert describe(g, ranks, layout).nvls_channels == nvls


def test_a_given_count_is_the_runs_and_bounds_the_tuners():
    g = tp.rail_optimized(nodes=1)
    ranks, layout = participants(g, "all_reduce", None, None)
    assert (describe(g, ranks, layout, channels=4).graph_channels, describe(g, ranks, layout, channels=4).channels) == (4, 4)
    assert describe(g, ranks, layout, channels=16).graph_channels == 12
    assert fs.collective(g, "all_reduce", 1 << 20, channels=4).channels == 4


def test_the_tuners_caps_count_the_graphs_channels():
    # tuning.cc:329: ring LL128 busBw = min(busBw x 0.92, nChannels x perChMaxRingLL128Bw), the
    # graph's nChannels; Hopper's cap 36.7 GB/s a channel. A bus of 400 GB/s on 2 nodes:
    # min(368, 8 x 36.7 = 293.6), algbw x 16 / 30 ranks/steps
    hw = Hardware(16, 2, "hopper", channels=16, graph_channels=8)
    assert tuner_algbw("ring", "LL128", "all_reduce", 400e9, hw) == pytest.approx(8 * 36.7e9 * 16 / 30)
    wide = Hardware(16, 2, "hopper", channels=16)        # no graph count: the run's
    assert tuner_algbw("ring", "LL128", "all_reduce", 400e9, wide) == pytest.approx(400e9 * 0.92 * 16 / 30)


def test_fewer_channels_than_nccls_move_their_share():
    # a channel is one CTA: NCCL_MAX_NCHANNELS=2 on one DGX H100 runs 2 of its 24 channels, each
    # moving its share among 24 (365 / 24 = 15.2 GB/s) or what one channel moves alone, the P2P
    # channel's measured 5.7 % of 370.8 GB/s = 21.1 GB/s, whichever is more: 2 x 21.1 = 42.3 GB/s
    # (uccl-project/uccl issue #205: MIN = MAX = 8 "significantly reduced" bus bandwidth on 8 H100
    # nodes); more channels than NCCL's own move no more than the links carry
    from flowsolver.collectives._p2p import P2P_CHANNEL_SHARE
    g = tp.rail_optimized(nodes=1)
    size = 1 << 30
    default = fs.collective(g, "all_reduce", size, algorithm="ring", protocol="Simple")
    two = fs.collective(g, "all_reduce", size, algorithm="ring", protocol="Simple", channels=2)
    assert default.channels == 24 and two.channels == 2
    per = max(default.busbw / 24, P2P_CHANNEL_SHARE * 18 * 20.6e9)
    assert two.busbw == pytest.approx(2 * per, rel=0.03)
    more = fs.collective(g, "all_reduce", size, algorithm="ring", protocol="Simple", channels=48)
    assert more.busbw <= default.busbw * 1.01


def test_bad_figures_are_refused_naming_them():
    with pytest.raises(ValueError, match="nodes"):
        nccl_channels(0, 8, 8, True)
    with pytest.raises(ValueError, match="net_gbs"):
        nccl_channels(2, 8, 8, True, generation="hopper", net_gbs=-48.0)
    with pytest.raises(ValueError, match="generation"):
        nccl_graph_channels(1, 8, 8, True, generation="h100", nvlink_gbs=370.8)


def test_bad_arguments_are_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="nvswitch"):
        nccl_graph_channels(1, 8, 8, "no", nvlink_gbs=370.8)
    with pytest.raises(ValueError, match="nvswitch"):
        nccl_channels(1, 8, 8, 1, nvlink_gbs=370.8)
    with pytest.raises(ValueError, match="nics_per_node"):
        nccl_graph_channels(2, 8, 0, True, net_gbs=48.0)
    with pytest.raises(ValueError, match="nics_per_node"):
        nccl_channels(2, 8, 0, True)
    # one node needs no NIC
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nccl_graph_channels(1, 8, 0, True, generation="hopper", nvlink_gbs=370.8) == 12


def test_across_nodes_the_rings_fit_the_nvlink_inside_a_node():
    # A ring through G GPUs of an NVSwitch node sends its speed s over NVLink out of every GPU but
    # the one it leaves the node by: r rings take r (G - 1) of the G floor(nvlink / s) NVLink sends,
    # r <= G floor(nvlink / s) / (G - 1). GB200 NVL72 (18 NVLinks x 40.1 = 721.8 GB/s, topo.h
    # SM100_NVLINK_BW) over 400 Gb/s NICs (48 GB/s a path; sm100SpeedArrayInter, search.cc:1064):
    #   48 GB/s: floor(721.8 / 48) = 15, 72 x 15 / 71 = 15.2 -> 15 rings, 720 GB/s
    #   45.1:    16,                  72 x 16 / 71 = 16.2 -> 16 rings, 721.6 (best: more than 720)
    #   42: 17 -> 714; 40: 18 -> 720; 30: 24 -> 720; 24: 30 -> 720; 22 / 45.1 < 0.49: the search stops
    # no ncclTopoDupChannels (sm100 > 80, 45.1 < 50, 16 > 4), pass 2: 48 carries 15 < 16; run 2 x 16 = 32,
    # no second copy (connect.cc:476: 32 >= 16). 800 Gb/s NICs (96 GB/s): 96: 7 rings (672), 86: 8 (688),
    # 80: 9 (720), 48: 15 (720), 45.1: 16 (721.6): the same 16. NVL36: 36 x 15 / 35 = 15.4 at 48, 36 x 16 / 35
    # = 16.5 at 45.1, 17.5 at 42 (714): 16 too.
    for gpus, net in ((72, 48.0), (72, 96.0), (36, 48.0)):
        kw = dict(generation="blackwell", nvlink_gbs=721.8, net_gbs=net)
        assert (nccl_graph_channels(2, gpus, gpus, True, **kw), nccl_channels(2, gpus, gpus, True, **kw)) == (16, 32)
    # 8-GPU nodes: 8 x floor(370.8 / 48) / 7 = 8 rings at 48 (and 8 x 15 / 7 = 17 on B200): the NICs bind
    for gen, nvlink in (("hopper", 370.8), ("blackwell", 721.8)):
        assert nccl_graph_channels(2, 8, 8, True, generation=gen, nvlink_gbs=nvlink, net_gbs=48.0) == 8


def test_an_nvl72_pair_of_racks_gets_ncclss_counts_and_p2p_channels():
    from flowsolver.collectives._p2p import p2p_comm
    g = tp.rail_optimized(2, server=tp.get_server("nvl72"))
    ranks, layout = participants(g, "all_reduce", None, None)
    hw = describe(g, ranks, layout)
    assert (hw.graph_channels, hw.channels) == (16, 32)     # derived above
    # P2P (paths.cc ncclTopoComputeP2pChannels): pow2Up(32) = 32 channels; a peer's least is the
    # network's ceil(50 GB/s / 14) = 4 (NCCL_P2P_PER_CHANNEL_NET_BW; NVLink's 2 x 18 is more), halved
    # while it x ceil(144 / 8) rounds exceeds 32: 4 x 18 = 72, 2 x 18 = 36, then 1 (18 <= 32). With the
    # 64 the unbounded search gave, 2 a peer
    c = p2p_comm(g, ranks, hw)
    assert (c.p2p_channels, c.per_peer) == (32, 1)


def _pcie_counts(nodes, cpu, make):
    g = tp.rail_optimized(nodes, server=tp.get_server("pcie_8gpu").with_(cpu=cpu, cpu_make=make))
    ranks, layout = participants(g, "all_reduce", None, None)
    hw = describe(g, ranks, layout)
    return hw.graph_channels, hw.channels


@pytest.mark.parametrize("cpu, make, one, two", [
    # NCCL's socket link X (topo.h:26-34: SRP_QPI_BW 22, ERP_QPI_BW 40, SKL_QPI_BW 10, AMD_BW 16, BDW_QPI_BW 6,
    # Intel's default for a make topo.cc:71-74 does not name) against 8 H100 PCIe, 2 a switch, 2 switches a
    # socket, each GPU's Gen5 x16 at NCCL's 48 GB/s. One node: a ring crosses X once each way, so
    # rings(s) = min(floor(48 / s), floor(X / s)) over speedArrayIntra sm90 (60 50 40 30 24 20 15 12 11 6 3),
    # from 40 (<= 48). Across two nodes each ring crosses X once (in on one socket, out on the other,
    # half each way): rings(s) = min(8 NICs, 2 floor(X / s)) over sm90SpeedArrayInter (48 45 42 40 30 24 22
    # 20 17.5 15 12 6 3 2.4 1.2 ...).
    # SPR 22, one node: nothing at 40-24; 20: 1 (20); 15, 12: 1; 11: 2 (22, best); 6: 3 (18); 3/11 < .49: stop;
    #   11 < 25: no dup: 2 graph, 4 run. Two nodes: nothing at 48-24; 22: 2 (44); 20 .. 12: 2 (less); 6/22 <
    #   .49: stop; no dup (22 < 25): 2, 4.
    ("intel", "sapphire_rapids", (2, 4), (2, 4)),
    # EMR 40, one node: 40: 1 (40); 30, 24: 1; 20: 2 (40, not more); 15/40 < .49 stop; dup (40 >= 25, 1 <= 4):
    #   2 at 20; pass 2: 24, 30, 40 carry 1 < 2: 2, 4. Two nodes: 40: 2 (80); 30 .. 22: 2; 20: 4 (80, not more);
    #   17.5/40 < .49 stop; dup (2 <= 4): 4 at 20; pass 2: 22 .. 40 carry 2 < 4: 4, run 8
    ("intel", "emerald_rapids", (2, 4), (4, 8)),
    # SKL 10, one node: nothing at 40-11; 6: 1 (6); 3: 3 (9, best; 3/6 = .5 > .49): 3, 6. Two nodes: 6: 2
    #   (12); 3: 6 (18); 2.4: 8 (19.2, the 8 NICs); 1.2: 8 (9.6); .24/2.4 < .49 stop: 8, 16
    ("intel", "skylake", (3, 6), (8, 16)),
    # a make NCCL does not name: Broadwell's 6. One node: 6: 1 (6); 3: 2 (6, not more): 1, 2. Two nodes:
    #   6: 2 (12); 3: 4 (12); 2.4/6 < .49 stop: 2, 4
    ("intel", None, (1, 2), (2, 4)),
    # AMD 16, one node: 15: 1 (15); 12, 11: 1; 6/15 < .49 stop: 1, 2. Two nodes: 15: 2 (30); 12: 2; 6/15
    #   < .49 stop: 2, 4
    ("amd", None, (1, 2), (2, 4)),
])
def test_a_ring_through_two_sockets_fits_ncclss_socket_link(cpu, make, one, two):
    assert _pcie_counts(1, cpu, make) == one
    assert _pcie_counts(2, cpu, make) == two


def test_the_pcie_server_says_each_gpus_socket_and_its_cpu_make():
    g = tp.rail_optimized(1, server="pcie_8gpu")
    gpus = [n for n, d in g.nodes(data=True) if d.get("kind") == "gpu"]
    assert [g.nodes[n]["socket"] for n in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]      # 2 switches a socket
    assert {g.nodes[n]["cpu_make"] for n in gpus} == {"sapphire_rapids"}
    with pytest.raises(ValueError, match="cpu_make"):
        tp.get_server("pcie_8gpu").with_(cpu_make="zen4")
    with pytest.raises(ValueError, match="cpu_make"):
        tp.get_server("pcie_8gpu").with_(cpu="amd", cpu_make="sapphire_rapids")
    # one socket's GPUs only: no socket link crossed, the PCIe link alone, whatever the CPU (48 GB/s: 1 ring
    # at 40, dup to 2 at 20; pass 2: 24 carries 2, 48 > 40 -> 2 at 24)
    ranks, layout = participants(g, "all_reduce", [0, 1, 2, 3], None)
    slow = tp.rail_optimized(1, server=tp.get_server("pcie_8gpu").with_(cpu_make="skylake"))
    assert describe(slow, *participants(slow, "all_reduce", [0, 1, 2, 3], None)).graph_channels == \
        describe(g, ranks, layout).graph_channels == 2


def _six_nic_pair(gbs):
    """Two servers of 6 H100 and 6 NICs of ``gbs`` GB/s: NCCL's six rings, doubled (connect.cc:460),
    copied again on sm90 above 45 GB/s a channel (connect.cc:476)."""
    import dataclasses
    name = f"ib_copy_test_{int(gbs * 10)}"
    tp.register_link(dataclasses.replace(tp.get_link("ib_ndr"), name=name, bandwidth=gbs * 1e9), overwrite=True)
    return tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(gpus=6, nics=6, nic=name), link=name)


def test_a_faster_nic_is_never_slower_across_the_sm90_copy():
    # The copies connect.cc:476 adds run on their rings' links (channel c + 12 on channel c's):
    # the channels NCCL keeps at small sizes are the same links with or without them, and a NIC
    # just over 45 GB/s cannot make a collective slower than one just under
    rates = (44.0, 46.0, 48.0, 52.0)
    hws = []
    for gbs in rates:
        g = _six_nic_pair(gbs)
        r, lay = participants(g, "all_reduce", None, None)
        hws.append(describe(g, r, lay))
    assert [h.channels for h in hws] == [12, 12, 24, 24]        # the copy is there from 48
    assert [h.pipeline_channels for h in hws] == [12, 12, 12, 12]
    for size in (4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20):
        for algorithm in ("ring", "tree"):
            times = [fs.collective(_six_nic_pair(gbs), "all_reduce", size, algorithm=algorithm).time
                     for gbs in rates]
            assert all(b <= a * (1 + 1e-9) for a, b in zip(times, times[1:])), (size, algorithm, times)


def test_nccls_own_count_given_as_channels_times_as_none():
    g = _six_nic_pair(48.0)
    for size in (64 << 10, 1 << 20, 16 << 20):
        for algorithm in ("ring", "tree"):
            none = fs.collective(g, "all_reduce", size, algorithm=algorithm).time
            given = fs.collective(g, "all_reduce", size, algorithm=algorithm, channels=24).time
            assert given == pytest.approx(none, rel=1e-12), (size, algorithm)
