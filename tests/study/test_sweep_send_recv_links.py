"""A sweep's rows over several link technologies are each collective() on that row's own
cluster, whatever order the grid lists the links in (adv20b F1): a send's P2P channels are
NCCL's communicator's on that cluster (NCCL_P2P_PER_CHANNEL_NET_BW, 14 GB/s a channel in
src/graph/paths.cc: 100 GbE's 12.5 GB/s NIC gets 1 channel, NDR's 50 GB/s gets 4), so a send
batched with another technology must not take that one's channels."""
import warnings

import pytest

import flowsolver as fs
import topologies as tp

pytest.importorskip("pandas")

SIZE = 2**28


@pytest.mark.parametrize("order", [["ib_ndr", "eth_100g"], ["eth_100g", "ib_ndr"]])
@pytest.mark.parametrize("ranks", [[0, 8], None])
def test_send_rows_are_their_own_clusters(order, ranks):
    grid = {"family": ["rail_optimized"], "nodes": [2], "link": order, "op": ["send_recv"], "size": [SIZE]}
    if ranks:
        grid["ranks"] = [ranks]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = fs.sweep(grid, progress=False, cache_dir=None)
    times = {}
    for row in df.itertuples():
        alone = fs.collective(tp.rail_optimized(2, link=row.link), "send_recv", SIZE, ranks=ranks)
        assert row.time == pytest.approx(alone.time, rel=1e-9), row.link
        times[row.link] = row.time
    # 400 Gb/s against 100 Gb/s NICs: the NDR send at least 3x faster (4x the line rate, less latency)
    assert times["eth_100g"] > 3 * times["ib_ndr"]


def test_collective_variants_communicator():
    ndr, eth = tp.rail_optimized(2), tp.rail_optimized(2, link="eth_100g")
    each = fs.collective_variants([eth, ndr], "send_recv", SIZE, ranks=[0, 8], communicator="each")
    for graph, r in zip([eth, ndr], each):
        assert r.time == pytest.approx(fs.collective(graph, "send_recv", SIZE, ranks=[0, 8]).time, rel=1e-9)
    first = fs.collective_variants([eth, ndr], "send_recv", SIZE, ranks=[0, 8])
    assert first[1].time > each[1].time        # NDR held to 100 GbE's one P2P channel: the documented default
    with pytest.raises(ValueError, match="communicator must be"):
        fs.collective_variants([eth, ndr], "send_recv", SIZE, ranks=[0, 8], communicator="own")
