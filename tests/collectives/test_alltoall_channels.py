"""``channels=`` on an all-to-all sets NCCL's P2P channels, as it does a send's: NCCL runs an
all-to-all as a send to every peer on its P2P channels, ``p2pnChannels = pow2Up(min(nChannels,
NCCL_MAX_P2P_NCHANNELS))`` (src/graph/paths.cc, ncclTopoComputeP2pChannels). It was accepted and
changed nothing."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives._p2p import P2P_CHANNEL_SHARE

GIB = 2**30
# what NCCL sees of an H100's NVLink: 18 links x ncclTopoNVLinkBw 20.6 GB/s (src/graph/topo.h, sm90)
H100_NVLINK_VIEW = 18 * 20.6e9


def test_one_p2p_channel_carries_a_rank_s_whole_all_to_all():
    g = tp.rail_optimized(nodes=1)
    one = collective(g, "all_to_all", GIB, channels=1)
    # channels=1: one P2P channel; each rank sends 7/8 of its buffer (the self chunk stays) through
    # it at one channel's rate: 939.5 MB / (0.057 x 370.8 GB/s = 21.1 GB/s) = 44.4 ms
    least = GIB * 7 / 8 / (P2P_CHANNEL_SHARE * H100_NVLINK_VIEW)
    assert least == pytest.approx(44.44e-3, rel=1e-3)
    assert least <= one.time <= least * 1.01
    assert one.channels == 1
    two = collective(g, "all_to_all", GIB, channels=2)          # 2 channels: half the time
    assert two.time == pytest.approx(least / 2, rel=0.01)


def test_nccl_s_own_channel_count_leaves_a_large_all_to_all_to_the_links():
    # 32 P2P channels on one NVSwitch node move 32 x 21.1 = 676 GB/s, more than NVLink's 450:
    # the flow solve's time stands, as with the most channels
    g = tp.rail_optimized(nodes=1)
    default, most = (collective(g, "all_to_all", GIB, channels=c) for c in (None, 64))
    assert default.time == pytest.approx(most.time, rel=1e-9)
    assert default.time > GIB * 7 / 8 / (32 * P2P_CHANNEL_SHARE * H100_NVLINK_VIEW)
    # a rank's 7/8 GiB out over its NVLink: 450 GB/s at the catalogue's efficiency
    nvlink = tp.get_link("nvlink4")
    assert default.time == pytest.approx(GIB * 7 / 8 / (nvlink.bandwidth * nvlink.efficiency), rel=0.02)
    # step_latency= is the pure flow model: no channel bound
    flat = [collective(g, "all_to_all", GIB, channels=c, step_latency=1e-6).time for c in (1, 64)]
    assert flat[0] == pytest.approx(flat[1], rel=1e-9)
