"""A send / receive runs on the channels NCCL gives it in its communicator, each moving a bounded
rate (flowsolver.collectives._p2p).

Hand-derived from NCCL 2.29's source (``src/graph/paths.cc`` ncclTopoComputeP2pChannels,
``src/enqueue.cc`` scheduleP2pTasksToPlan / addP2pToPlan):
- one 8-GPU NVSwitch node, 32 P2P channels, 32 a peer (2 x 18 NVLinks, at most the 32): a send
  starts at 32 halved while x 8 ranks > 32, i.e. 4, and doubles while its part exceeds 32 x
  512 KiB = 16 MiB: 4, 4, 8, 16, 32 channels at 32, 64, 128, 256, 512 MiB; with 4 ranks 8, 8,
  8, 16, 32;
- one GPU a node over 400 Gb/s NICs: a peer's channels max(1 NIC, ceil(50 / 14)) = 4, halved
  while 4 x ceil(ranks / 8) > 2 P2P channels: 1 for 10 ranks, 2 for 2 ranks.
Measured (xxrjun/nccl-tests-cluster, H100, NCCL 2.29.2): 8 ranks on one node move 79.5, 81.8,
162.6, 299.5 GB/s at 32, 64, 128, 256 MiB; the bandwidth doubles where the channels do.
"""

import numpy as np
import pytest

import topologies as tp
from flowsolver import collective, collective_variants
from flowsolver.collectives._p2p import (NET_CHANNEL_RATE, P2P_CHANNEL_SHARE, P2pComm, p2p_channels_per_peer,
                                         send_channels)
from ..helpers import corpus_curve

MIB = 1 << 20
NVL_CHUNK, NET_CHUNK = 512 * 1024, 128 * 1024
H100_NVLINK = 18 * 20.6e9            # NCCL's view of an H100's NVLink (18 links x ncclTopoNVLinkBw)


def test_a_send_on_one_node_runs_on_the_channels_nccl_gives_its_size():
    eight = [send_channels(s * MIB, 8, 1, 32, 32, NVL_CHUNK) for s in (32, 64, 128, 256, 512, 4096)]
    four = [send_channels(s * MIB, 4, 1, 32, 32, NVL_CHUNK) for s in (32, 64, 128, 256, 512, 4096)]
    assert eight == [4, 4, 8, 16, 32, 32]
    assert four == [8, 8, 8, 16, 32, 32]
    assert send_channels(0, 8, 1, 32, 32, NVL_CHUNK) == 1
    assert send_channels(100 * 1024, 8, 1, 32, 32, NVL_CHUNK) == 2      # 64 KiB parts at the least: 2


def test_a_peer_gets_fewer_channels_in_a_larger_communicator_across_nodes():
    one_nic = dict(nvlink_links=18, nic_count=1, nic_bw=50e9)
    assert p2p_channels_per_peer(10, 10, 2, **one_nic) == 1
    assert p2p_channels_per_peer(2, 2, 2, **one_nic) == 2
    assert p2p_channels_per_peer(16, 2, 16, **one_nic) == 4           # 4 x ceil(16 / 8) = 8 <= 16
    assert p2p_channels_per_peer(128, 16, 16, **one_nic) == 1         # 4 x 16 > 16, 2 x 16, 1
    # AWS p5: four 100 Gb/s EFA ports a GPU: one channel a port
    assert p2p_channels_per_peer(16, 2, 16, nvlink_links=18, nic_count=4, nic_bw=50e9) == 4
    # a 200 Gb/s NIC (A100 HDR): ceil(25 / 14) = 2
    assert p2p_channels_per_peer(16, 2, 16, nvlink_links=12, nic_count=1, nic_bw=25e9) == 2
    # one node: 2 a NVLink, at most the P2P channels; PCIe peers 2
    assert p2p_channels_per_peer(8, 1, 32, 18, 0, 0.0) == 32
    assert p2p_channels_per_peer(8, 1, 32, 0, 0, 0.0) == 2


def test_the_least_transfer_is_the_size_over_the_channels_rate():
    comm = P2pComm(ranks=10, nodes=10, per_peer=1, p2p_channels=2, chunk=NET_CHUNK, nvlink_view=H100_NVLINK,
                   crosses=True)
    assert comm.channels(1 << 30) == 1
    assert comm.least_transfer(1 << 30) == pytest.approx((1 << 30) / 14e9)        # NCCL's network channel
    assert comm.least_transfer(1 << 30, 2.0) == pytest.approx(comm.least_transfer(1 << 30) / 2)
    # inside a node: the NVLink share; no NVLink, no bound; no NVLink across the network: 14 GB/s
    one = P2pComm(8, 1, 1, 32, 512 * 1024, nvlink_view=H100_NVLINK)
    assert one.least_transfer(1 << 30) == pytest.approx((1 << 30) / (P2P_CHANNEL_SHARE * H100_NVLINK))
    assert P2pComm(8, 1, 1, 32, 512 * 1024).least_transfer(1 << 30) == 0.0
    assert P2pComm(10, 10, 1, 2, NET_CHUNK, crosses=True).least_transfer(1 << 30) == pytest.approx((1 << 30) / 14e9)


def test_an_all_to_alls_slowest_rank_is_on_the_node_with_fewest_ranks():
    """An all-to-all of 9 ranks, 1 on one node and 8 on the other: the lone rank sends all of
    its 8/9 across the network (remote share 1), not the even split's (9 - 4.5) / 8."""
    comm = P2pComm(9, 2, 1, 2, NET_CHUNK, nvlink_view=H100_NVLINK, all_to_all=True, crosses=True, fewest=1)
    assert comm.remote_share() == 1.0
    size = 9 * (1 << 27)
    assert comm.least_transfer(size) == pytest.approx(size * 8 / 9 / (comm.channels(size) * 14e9))
    even = P2pComm(16, 2, 1, 2, NET_CHUNK, nvlink_view=H100_NVLINK, all_to_all=True, crosses=True)
    assert even.remote_share() == pytest.approx(8 / 15)


@pytest.fixture(scope="module")
def ten_nodes():
    return tp.rail_optimized(nodes=10)


def test_ten_ranks_move_half_what_two_ranks_move_between_the_same_two_gpus(ten_nodes):
    size = 1 << 30
    pair = collective(ten_nodes, "send_recv", size, ranks=[0, 8])
    ring = collective(ten_nodes, "send_recv", size, ranks=[8 * i for i in range(10)])
    # one GPU a node: NCCL's ring graph finds 1 channel at 48 GB/s, doubles it (1 is not > 4) and
    # runs 4 (connect.cc:460): 4 P2P channels. A peer across the network starts from 4
    # (ceil(50 / 14 GB/s)); the pair keeps 4, the ring of ten halves them while 10 x n > 8 x 4: 2
    assert (pair.channels, ring.channels) == (4, 2)
    # each channel across the network moves NCCL's 14 GB/s (NCCL_P2P_PER_CHANNEL_NET_BW), less
    # than H100's NVLink share (21.1 GB/s): the ring's 2 move 28 GB/s (xxrjun's 10 x 1 H100 log: 24.9)
    lat = ring.time - sum(st.count * st.transfer for st in ring.steps)
    assert size / (ring.time - lat) == pytest.approx(2 * 14e9, rel=1e-9)
    # the pair's 4 channels would move 56 GB/s: the NIC (400 Gb/s at 0.94) sets its time
    lat = pair.time - sum(st.count * st.transfer for st in pair.steps)
    assert size / (pair.time - lat) == pytest.approx(50e9 * 0.94, rel=1e-6)


def test_one_node_bandwidth_doubles_with_the_channels_as_measured():
    server = tp.rail_optimized(nodes=1)
    measured = corpus_curve("xxrjun-c01-1x8H100-sendrecv")
    sizes = [32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB]
    model = {s: s / collective(server, "send_recv", s, ranks=list(range(8))).time for s in sizes}
    seen = {s: s / (measured[s] * 1e-6) for s in sizes}
    for a, b in zip(sizes, sizes[1:]):              # the bandwidth steps where NCCL's channels do
        assert model[b] / model[a] == pytest.approx(seen[b] / seen[a], rel=0.12), (a, b)
    # a pair alone in its communicator runs on more channels at these sizes: faster
    alone = collective(server, "send_recv", 64 * MIB, ranks=[0, 1])
    assert alone.time < 64 * MIB / model[64 * MIB]
    # from 1 GiB the NVLink, not the channels, sets the time: the communicator no longer matters
    big = [collective(server, "send_recv", 1 << 30, ranks=r).time for r in ([0, 1], list(range(8)))]
    assert big[0] == pytest.approx(big[1], rel=1e-12)


def test_no_link_changes_a_time_the_channels_set(ten_nodes):
    ranks = [8 * i for i in range(10)]
    ring = collective(ten_nodes, "send_recv", 1 << 30, ranks=ranks)
    assert not np.any(ring.time_gradient()) and not np.any(ring.time_gradient("down"))
    assert ring.time_directional(np.ones(ten_nodes.number_of_edges())) == 0.0
    assert ring.link_utilization.max() < 0.95         # the NIC moves 28 of its 47 GB/s
    # the channels' rate is the GPU's (NCCL's view of its NVLink), not its NVLink cable's
    faster = ten_nodes.copy()
    for u, v, d in faster.edges(data=True):
        if d.get("tier") == "nvlink":
            d["capacity"] *= 1.5
    assert collective(faster, "send_recv", 1 << 30, ranks=ranks).time == ring.time
    # NICs at a quarter (12.5 GB/s) bind below the channels' 28 GB/s: the flow sets the time again
    slow = tp.degrade_links(ten_nodes, tp.tier_cables(ten_nodes, "access"), 0.25)
    degraded = collective(slow, "send_recv", 1 << 30, ranks=ranks)
    assert degraded.time > 1.5 * ring.time
    assert degraded.time_directional(np.ones(slow.number_of_edges())) < 0
    # two 8-GPU nodes: 4 channels a peer move more than the 400 Gb/s NIC, which sets the time
    two = tp.rail_optimized(nodes=2)
    free = collective(two, "send_recv", 1 << 30, ranks=[0, 8] + [r for r in range(16) if r not in (0, 8)])
    assert free.time_directional(np.ones(two.number_of_edges())) < 0


def test_a_tie_between_the_channels_and_the_flows_is_one_sided():
    from flowsolver.collectives._sensitivity import _bounded

    v = np.array([-2.0, 0.0, 1.0])
    assert _bounded(v, "tie", "up").tolist() == [0.0, 0.0, 1.0]          # faster flows: the channels hold
    assert _bounded(v, "tie", "down").tolist() == [-2.0, 0.0, 0.0]
    assert _bounded(v, "binds", "up").tolist() == [0.0, 0.0, 0.0] and _bounded(-3.0, None, "up") == -3.0


def test_degraded_fabric_times_match_a_re_solve(ten_nodes):
    from flowsolver.reliability import state_step_times

    ranks = [8 * i for i in range(10)]
    work = dict(op="send_recv", size=1 << 30, ranks=ranks)
    n = len(tp.tier_cables(ten_nodes, "access"))
    for factor in (0.25, 0.9):                 # below the channels' rate, and above it (no change)
        st = state_step_times(ten_nodes, work, [("access", factor)], [], np.array([[n]]), compute_time=0.0)
        direct = collective(tp.degrade_links(ten_nodes, tp.tier_cables(ten_nodes, "access"), factor), **work)
        assert st.step_time[0] == pytest.approx(direct.time, rel=1e-9)


def test_collectives_side_by_side_keep_the_channels_bound(ten_nodes):
    from flowsolver import concurrent

    ranks = [8 * i for i in range(10)]
    alone = collective(ten_nodes, "send_recv", 1 << 30, ranks=ranks).time
    for lockstep in (False, True):
        r = concurrent(ten_nodes, [dict(op="send_recv", size=1 << 30, ranks=ranks)], lockstep=lockstep)
        assert r.together[0] == pytest.approx(alone, rel=1e-9)


def test_nccl_counts_a_gpu_s_nic_ports_up_to_its_pcie_bandwidth():
    from flowsolver.collectives._hardware import describe
    from flowsolver.collectives._layout import participants
    from flowsolver.collectives._p2p import p2p_comm

    def per_peer(server):
        g = tp.rail_optimized(nodes=2, server=server)
        ranks, layout = participants(g, "send_recv", list(range(16)), None)
        return p2p_comm(g, list(range(16)), describe(g, ranks, layout)).per_peer

    dgx = tp.get_server("dgx_h100")
    # one 400 Gb/s port: 48 GB/s over PCIe Gen5 (NCCL's view) -> ceil(48 / 14) = 4
    assert per_peer(dgx) == 4
    # two 400 Gb/s ports a GPU: the first already fills the GPU's 48 GB/s of PCIe -> 4, not 8
    assert per_peer(dgx.with_(nic_ports=2)) == 4
    # four 100 Gb/s EFA ports (AWS p5): 4 x 12.5 GB/s reach 48 GB/s at the fourth -> 4
    assert per_peer(dgx.with_(nic="efa_100g", nic_ports=4)) == 4


def test_variants_keep_the_communicator(ten_nodes):
    ranks = [8 * i for i in range(10)]
    alone = collective(ten_nodes, "send_recv", 1 << 28, ranks=ranks)
    both = collective_variants([ten_nodes, ten_nodes], "send_recv", 1 << 28, ranks=ranks)
    assert [r.time for r in both] == pytest.approx([alone.time] * 2, rel=1e-12)


def test_a_users_send_recv_log_calibrates_the_channel_rate(ten_nodes):
    pytest.importorskip("pandas")
    from flowsolver import calibrate

    measured = corpus_curve("xxrjun-c01-10x1H100-sendrecv")        # 24.9 GB/s at 16 GiB
    sizes = sorted(measured)
    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r} device 0 [0x0f] NVIDIA H100\n" for r in range(10))
    log = devices + header + "".join(f"{s:12d} {s // 4:12d} float sum -1 {measured[s]:10.2f} 0 0 0\n" for s in sizes)
    ranks = [8 * i for i in range(10)]
    cal = calibrate(ten_nodes, [log], ranks=ranks, op="send_recv")
    rate = sizes[-1] / (measured[sizes[-1]] * 1e-6)                 # 24.9 GB/s at 16 GiB
    # two channels a peer (test_ten_ranks_move_half_what_two_ranks_move_between_the_same_two_gpus),
    # each at NCCL's 14 GB/s across the network: the factor on a channel's rate 24.9 / 28
    assert cal.p2p_bandwidth == pytest.approx(rate / (2 * 14e9), rel=0.03)
    assert "p2p_bandwidth" not in cal.unconstrained
    assert cal.residuals["error"].abs().max() < 0.03
    fitted = collective(ten_nodes, "send_recv", sizes[-1], ranks=ranks, model=cal)
    assert fitted.time == pytest.approx(measured[sizes[-1]] * 1e-6, rel=0.03)


def test_channels_set_by_the_call_are_nccl_s_p2p_channels():
    server = tp.rail_optimized(nodes=1)
    # NCCL_MAX_NCHANNELS-like: 4 channels -> 4 P2P channels; 8 ranks: 4 halved while x 8 > 4 -> 1,
    # doubled up to the per-peer 4 while a part exceeds 16 MiB: 1 GiB runs on 4 channels
    few = collective(server, "send_recv", 1 << 30, ranks=list(range(8)), channels=4)
    lat = few.time - sum(st.count * st.transfer for st in few.steps)
    assert (1 << 30) / (few.time - lat) == pytest.approx(4 * P2P_CHANNEL_SHARE * H100_NVLINK, rel=1e-9)


def test_a_pure_flow_model_has_no_channel_bound(ten_nodes):
    # step_latency= turns NCCL's cost model off (an alpha-beta flow model): the channels with it
    ranks = [8 * i for i in range(10)]
    flow = collective(ten_nodes, "send_recv", 1 << 30, ranks=ranks, step_latency=0.0, base_latency=0.0)
    pair = collective(ten_nodes, "send_recv", 1 << 30, ranks=ranks[:2], step_latency=0.0, base_latency=0.0)
    assert flow.time == pair.time and (1 << 30) / flow.time > 40e9         # the 400 Gb/s NIC's flow


def test_a_send_reports_its_channels_and_variants_keep_the_first_graphs():
    # GPU 0's NIC derated to a quarter of NDR (11.75 GB/s): NCCL, creating the communicator on
    # that fabric, gives the peer ceil(11.75 / 14) = 1 P2P channel where 47 GB/s gave more. A
    # communicator of ranks 0 and 31 alone has no GPU on rail 7 of server 0 to relay through
    # (PXN relays through the communicator's GPUs only), so the send leaves by the derated NIC:
    # 2^28 bytes at 0.25 x 50 GB/s x 0.94. A variant keeps the channels of the communicator made
    # on the first graph.
    from topologies.failures import degrade_links
    g = tp.rail_optimized(nodes=4)
    h = degrade_links(g, [("su0/leaf0", "s0/nic0")], 0.25)
    healthy, derated = (collective(x, "send_recv", 2**28, ranks=[0, 31]) for x in (g, h))
    variant = collective_variants([g, h], "send_recv", 2**28, ranks=[0, 31])[1]
    assert (healthy.channels, derated.channels, variant.channels) == (4, 1, 4)
    nic = 0.25 * 50e9 * 0.94
    assert derated.time == pytest.approx(2**28 / nic, rel=0.01) and variant.time == pytest.approx(derated.time)
    # with GPU 7 of server 0 in the communicator the send relays through it (PXN) and its NIC,
    # off the derated one: the variant (the first graph's channels) takes the healthy time
    healthy, derated = (collective(x, "send_recv", 2**28, ranks=[0, 31, 7]) for x in (g, h))
    variant = collective_variants([g, h], "send_recv", 2**28, ranks=[0, 31, 7])[1]
    assert derated.channels == 1 < healthy.channels == variant.channels
    assert variant.time == pytest.approx(healthy.time, rel=1e-12) and derated.time > healthy.time

def test_a_channel_across_the_network_moves_nccls_14_gb_per_s_whatever_the_gpu():
    """NCCL gives a network peer ceil(NIC GB/s / 14) channels (NCCL_P2P_PER_CHANNEL_NET_BW,
    src/graph/paths.cc): a channel across the network moves ~14 GB/s, on B200 as on H100,
    where B200's NVLink share alone would be 5.7 % of 721.8 GB/s. Together AI's B200 ring
    shifts (held out: no constant was fitted on them): on 8 nodes NCCL halves a peer's channels
    to 2 (64 ranks, 8 rounds of 8 peers), and the measured time is within 10 % of 2 x 14 GB/s,
    where the NVLink share put it at the NIC's rate, 41-44 % fast."""
    assert NET_CHANNEL_RATE == 14e9
    for nodes, channels in ((2, 4), (8, 2)):
        g = tp.rail_optimized(nodes, server=tp.get_server("dgx_b200"), link="ib_ndr")
        measured = corpus_curve(f"together-b200-{nodes}x8-sendrecv")
        ranks = list(range(8 * nodes))
        ranks = [7, 8] + [r for r in ranks if r not in (7, 8)]       # the ring shift's pair across the network
        for size in (16 * MIB, 64 * MIB, 256 * MIB):
            r = collective(g, "send_recv", size, ranks=ranks)
            assert r.channels == channels
            assert r.time == pytest.approx(measured[size] * 1e-6, rel=0.10), (nodes, size)
    # 2 channels at 14 GB/s: the 8-node run's steady rate (its 128 -> 256 MiB slope)
    g = tp.rail_optimized(8, server=tp.get_server("dgx_b200"), link="ib_ndr")
    ranks = [7, 8] + [r for r in range(64) if r not in (7, 8)]
    t = [collective(g, "send_recv", s, ranks=ranks).time for s in (128 * MIB, 256 * MIB)]
    assert 128 * MIB / (t[1] - t[0]) == pytest.approx(2 * 14e9, rel=1e-6)


def test_a_gpu_cabled_straight_into_the_fabric_has_its_cables_as_ports():
    """adv24 F2: a torus of GPUs (no NIC node) counted no port, so its sends ran one P2P channel at
    NCCL's 14 GB/s whatever the cables' rate. Each GPU of a 4 x 4 torus has 4 cables to other
    servers' GPUs (a neighbour each way in each dimension), 400 Gb/s each on NDR."""
    import flowsolver as fs
    from flowsolver.collectives._p2p import _gpu_nics

    g = tp.torus((4, 4), link="ib_ndr")
    assert _gpu_nics(g, tp.gpus(g)[0]) == (4, 4 * 50e9)
    hdr = fs.collective(tp.torus((4, 4), link="ib_hdr"), "send_recv", 2**28, ranks=[0, 1])
    ndr = fs.collective(g, "send_recv", 2**28, ranks=[0, 1])
    assert ndr.channels > 1 and ndr.busbw > hdr.busbw      # the cable's rate matters again
