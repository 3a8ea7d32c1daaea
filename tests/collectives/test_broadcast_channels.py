"""Ring broadcast / reduce run one chain per NCCL channel (adv18a F1): the count the result
reports, so ``channels=`` set to it changes nothing (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS =
the count NCCL picks anyway is NCCL's own run)."""

import pytest

import topologies as tp
from flowsolver import collective


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize("server, nodes, size", [("dgx_h100", 1, 2 ** 24), ("nvl72", 2, 2 ** 30)])
def test_channels_set_to_the_reported_count_give_the_same_time(op, server, nodes, size):
    # before: 1 x DGX H100 reported 24 channels, timed 1 chain (90 us), channels=24 285 us; 2 x NVL72
    # reported 32 and timed 72 chains (8.71 ms; 72 > MAX_CHANNELS, a count channels= refuses), 32: 5.29 ms
    g = tp.rail_optimized(nodes, server=server)
    r = collective(g, op, size, algorithm="ring")
    assert 1 <= r.channels <= 64
    assert r.steps[0].flows == r.channels             # the first stage: one hop a chain, a chain a channel
    again = collective(g, op, size, algorithm="ring", channels=r.channels)
    assert again.time == pytest.approx(r.time, rel=1e-12) and again.steps[0].flows == r.channels


def test_on_one_nvswitch_node_the_chain_count_moves_nothing():
    # NCCL's rings on an NVSwitch node are one order repeated (its search's sameChannels): every
    # chain crosses the same GPU pairs, each stage moves one chunk over them whatever the count
    # (a chunk shared by the channels), so the time is the one-chain pipeline's at any count
    g = tp.rail_optimized(1)
    one = collective(g, "broadcast", 2 ** 24, algorithm="ring", channels=1).time
    for c in (2, 8, 24, 64):
        assert collective(g, "broadcast", 2 ** 24, algorithm="ring", channels=c).time == pytest.approx(one, rel=1e-9)
