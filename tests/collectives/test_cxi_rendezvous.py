"""libfabric CXI's rendezvous on HPE Slingshot (topologies/transports.py ``rendezvous_above`` /
``rendezvous_cost``): aws-ofi-nccl posts each NCCL step as one tagged send, and the CXI provider
pulls a message larger than FI_CXI_RDZV_THRESHOLD + FI_CXI_RDZV_GET_MIN (16384 + 2049 bytes by
default, libfabric man/fi_cxi.7.md) with a Get once its header is matched: each inter-node hop
NCCL's latency counts waits the Get's round trip (2 x NCCL's 2.7 us network hop). Expected
figures are hand counts from those constants, never the model's output."""

from dataclasses import replace

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants
from flowsolver.collectives._pipeline import step_message

ROUND_TRIP = 2 * 2.7e-6          # NCCL tuning.cc hwLat[NET][ring][LL] = 2.7 us, twice


def _cluster(link, nodes=2):
    server = tp.get_server("dgx_h100").with_(nic=link)
    return tp.rail_optimized(nodes, server=server, link=link)


def _without_rendezvous(name):
    """A copy of the catalogue's slingshot_200g whose transport has the same protocols and no
    rendezvous."""
    alps = tp.get_transport("alps_ofi_cxi")
    tp.register_transport(replace(alps, name=name, rendezvous_above=None, rendezvous_cost=0.0), overwrite=True)
    return replace(tp.get_link("slingshot_200g"), name=f"{name}_link", transport=name)


def test_catalogue_thresholds_and_cost():
    # fi_cxi.7: eager up to FI_CXI_RDZV_THRESHOLD (cxip.h 16384) + FI_CXI_RDZV_GET_MIN (cxip_info.c 2049)
    for name in ("alps_ofi_cxi", "ofi_cxi"):
        t = tp.get_transport(name)
        assert t.rendezvous_above == 16384 + 2049
        assert t.rendezvous_cost == pytest.approx(ROUND_TRIP)
    # HPE's ccl_env.sh sets the threshold, the Get minimum and the eager size to 0
    assert tp.get_transport("ofi_cxi_rdzv_all").rendezvous_above == 0
    assert tp.get_transport("ofi_cxi").protocols == ("LL", "LL128", "Simple")
    # NCCL's own transports and the cloud plugins have none
    for name in ("nccl_builtin", "aws_ofi_p5", "gcp_tcpxo"):
        assert tp.get_transport(name).rendezvous_above is None
    assert tp.get_link("slingshot_200g").transport == "alps_ofi_cxi"


@pytest.mark.parametrize("kwargs,match", [
    (dict(rendezvous_above=-1), "rendezvous_above"),
    (dict(rendezvous_above=float("inf")), "rendezvous_above"),
    (dict(rendezvous_above="16k"), "rendezvous_above"),
    (dict(rendezvous_cost=-1e-6), "rendezvous_cost"),
    (dict(rendezvous_cost=float("nan")), "rendezvous_cost"),
    (dict(rendezvous_cost=None), "rendezvous_cost"),
    (dict(rendezvous_cost=True), "rendezvous_cost"),
])
def test_bad_rendezvous_figures_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tp.Transport("bad", **kwargs)


def test_step_message_hand_counts():
    # ring LL all-reduce of 1 MiB on 8 ranks, 8 channels: 16 KiB a rank a channel (under LL's
    # 32 KiB chunk), 16-byte lines for 8 bytes of data: 32 KiB on the wire
    assert step_message("ring", "LL", "all_reduce", 1 << 20, 8, 2, 8) == 32 * 1024
    # ring Simple beyond a loop: the 4 MiB buffer's 512 KiB step x 4 chunk steps
    assert step_message("ring", "Simple", "all_reduce", 1 << 30, 8, 2, 8) == 2 * 1024 * 1024
    # LL128: 120 data bytes in a 128-byte line
    assert step_message("ring", "LL128", "all_gather", 8 * 8 * 1200, 8, 2, 8) == pytest.approx(1200 * 16 / 15)
    # tree Simple: a channel's share when under the 512 KiB chunk
    assert step_message("tree", "Simple", "all_reduce", 1 << 20, 8, 2, 8) == 128 * 1024
    assert step_message("nvls", "Simple", "all_reduce", 1 << 20, 8, 2, 8) == 0


def test_nccl_chooses_as_before():
    cxi, plain = _cluster("slingshot_200g"), _cluster(_without_rendezvous("test_cxi_eager_only"))
    for size in (8, 1 << 16, 4 << 20, 64 << 20):
        a, b = fs.collective(cxi, "all_reduce", size), fs.collective(plain, "all_reduce", size)
        assert (a.algorithm, a.protocol) == (b.algorithm, b.protocol), size     # the tuner does not know
        assert a.estimates == pytest.approx(b.estimates), size


@pytest.mark.parametrize("algorithm,protocol,nodes,hops", [
    ("ring", "Simple", 2, 2),      # a ring all-reduce crosses 2 (nodes - 1) inter-node hops
    ("ring", "LL", 4, 6),
    ("tree", "Simple", 2, 2),      # a tree 2 log2(nodes)
    ("tree", "LL", 4, 4),
])
def test_long_messages_wait_a_round_trip_per_inter_node_hop(algorithm, protocol, nodes, hops):
    cxi, plain = _cluster("slingshot_200g", nodes), _cluster(_without_rendezvous("test_cxi_eager_only"), nodes)
    size = 64 << 20                 # chunk steps far above 18,433 bytes in every protocol
    a = fs.collective(cxi, "all_reduce", size, algorithm=algorithm, protocol=protocol)
    b = fs.collective(plain, "all_reduce", size, algorithm=algorithm, protocol=protocol)
    assert (a.time - b.time) == pytest.approx(hops * ROUND_TRIP, rel=1e-6)


def test_short_messages_go_eager():
    cxi, plain = _cluster("slingshot_200g"), _cluster(_without_rendezvous("test_cxi_eager_only_small"))
    for size in (8, 4096):          # one 16-byte-line step of a few KiB at most: under 18,433 bytes
        assert fs.collective(cxi, "all_reduce", size).time == pytest.approx(
            fs.collective(plain, "all_reduce", size).time, rel=1e-12)


def test_every_message_by_rendezvous_under_hpe_settings():
    link = replace(tp.get_link("slingshot_200g"), name="test_hpe_env_link", transport="ofi_cxi_rdzv_all")
    eager = replace(tp.get_transport("ofi_cxi_rdzv_all"), name="test_hpe_env_eager", rendezvous_above=None,
                    rendezvous_cost=0.0)
    tp.register_transport(eager, overwrite=True)
    plain = replace(link, name="test_hpe_env_eager_link", transport="test_hpe_env_eager")
    a, b = fs.collective(_cluster(link), "all_reduce", 8), fs.collective(_cluster(plain), "all_reduce", 8)
    assert (a.algorithm, a.protocol) == (b.algorithm, b.protocol) == ("tree", "LL")
    assert (a.time - b.time) == pytest.approx(2 * ROUND_TRIP, rel=1e-6)   # up and down the tree


def test_one_node_is_untouched():
    one = tp.rail_optimized(1, server=tp.get_server("dgx_h100").with_(nic="slingshot_200g"), link="slingshot_200g")
    ranks, layout = participants(one, "all_reduce", None, None)
    assert describe(one, ranks, layout).rendezvous_above is None


def test_a_calibrations_latency_scale_leaves_the_rendezvous_alone():
    # review21 F1: the Get was added before a calibration's latency scale, which fits NCCL's
    # constants: at scale 3 a 4-node tree's 4 hops cost 3 x 21.6 us and NCCL's estimates moved
    cal = fs.Calibration(efficiency={}, latency_scale=3.0, ranks=32, ops=("all_reduce",))
    cxi, plain = _cluster("slingshot_200g", 4), _cluster(_without_rendezvous("test_cxi_eager_only"), 4)
    a = fs.collective(cxi, "all_reduce", 16 << 20, algorithm="tree", protocol="Simple", model=cal)
    b = fs.collective(plain, "all_reduce", 16 << 20, algorithm="tree", protocol="Simple", model=cal)
    assert a.time - b.time == pytest.approx(2 * 2 * ROUND_TRIP, rel=1e-6)    # 2 log2(4) hops, unscaled
    assert a.estimates == pytest.approx(b.estimates, rel=1e-12)
