"""adv26 F1: with ``communicator="each"`` every graph is its own communicator, and one whose
network transport's NCCL settings leave the asked algorithm or protocol off (NVLSTree over GCP
TCPXO, LL128 over Slingshot) failed the whole batch: listed second, an internal ``min() arg is
an empty sequence``; listed first, its refusal for every variant; a sweep over links lost every
row of the batch. Each variant now reports its own status: the refused one FAILED with what
``collective`` on it raises, the others their time alone (compared with ``collective``)."""

import math

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver import Status, collective, collective_variants

MIB = 1 << 20


def _alone(g, **kw):
    try:
        return collective(g, "all_reduce", 16 * MIB, **kw).time, None
    except ValueError as err:
        return None, str(err)


@pytest.mark.parametrize("refused_link, kw", [("tcpxo_200g", dict(algorithm="nvls_tree")),
                                              ("slingshot_200g", dict(algorithm="ring", protocol="LL128")),
                                              ("slingshot_200g", dict(protocol="LL128"))])
@pytest.mark.parametrize("refused_first", [False, True])
def test_a_refused_variant_fails_alone(refused_link, kw, refused_first):
    ok_g, bad_g = tp.rail_optimized(2), tp.rail_optimized(2, link=refused_link)
    time, _ = _alone(ok_g, **kw)
    _, why = _alone(bad_g, **kw)
    assert time is not None and why is not None          # the premise: one runs it, the other refuses
    graphs = [bad_g, ok_g] if refused_first else [ok_g, bad_g]
    out = collective_variants(graphs, "all_reduce", 16 * MIB, communicator="each", **kw)
    bad, ok = (out[0], out[1]) if refused_first else (out[1], out[0])
    assert ok.status == Status.OK and ok.time == time
    assert bad.status == Status.FAILED and bad.message == why and math.isnan(bad.time)


def test_every_variant_refused_still_raises():
    bad = tp.rail_optimized(2, link="tcpxo_200g")
    with pytest.raises(ValueError, match="algorithm 'nvls_tree' is not run by NCCL"):
        collective_variants([bad, bad], "all_reduce", 16 * MIB, algorithm="nvls_tree", communicator="each")


def test_a_sweep_over_links_keeps_the_rows_that_run():
    df = fs.sweep({"family": ["rail_optimized"], "nodes": [2], "link": ["ib_ndr", "tcpxo_200g"],
                   "op": ["all_reduce"], "size": [16 * MIB], "algorithm": ["nvls_tree"]}, progress=False)
    rows = {r.link: r for r in df.itertuples()}
    assert rows["ib_ndr"].status == "ok"
    assert rows["ib_ndr"].time == collective(tp.rail_optimized(2), "all_reduce", 16 * MIB, algorithm="nvls_tree").time
    assert rows["tcpxo_200g"].status != "ok" and "is not run by NCCL" in rows["tcpxo_200g"].error


@pytest.mark.parametrize("link, kw, said", [
    ("tcpxo_200g", dict(algorithm="nvls_tree"), "the network transport gcp_tcpxo's NCCL settings run Simple only, "
                                                "NVLS off"),
    ("slingshot_200g", dict(algorithm="ring", protocol="LL128"), "the network transport alps_ofi_cxi's NCCL settings "
                                                                 "run LL, Simple only")])
def test_a_refusal_names_the_transports_settings(link, kw, said):
    """newuser26 #1: the refusal named ranks, GPUs and channels, not the link's NCCL_PROTO /
    NCCL_NVLS_ENABLE that set it (GCP's TCPXO profile: NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0;
    Alps' hook: NCCL_PROTO=^LL128)."""
    with pytest.raises(ValueError, match=said):
        collective(tp.rail_optimized(2, link=link), "all_reduce", 16 * MIB, **kw)
    with pytest.raises(ValueError) as plain:        # a link whose transport limits nothing says nothing of one
        collective(tp.rail_optimized(2), "all_reduce", 16 * MIB, algorithm="tree", protocol="LL128", nccl_version="2.3")
    assert "network transport" not in str(plain.value)


def test_a_transports_settings_hold_on_one_node_too():
    """newuser26 #1: GCP's TCPXO profile (NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0) and the Alps hook
    (NCCL_PROTO=^LL128) are the job's environment, yet one node under them ran NVLS and LL: 465
    GB/s busbw at 1 GiB on one A3 Mega VM where its ring runs ~360. Every communicator of the
    job now runs under them: a one-node cluster's, and a node's TP group in a larger one."""
    one = tp.rail_optimized(1, link="tcpxo_200g")
    r = collective(one, "all_reduce", 1 << 30)
    assert (r.algorithm, r.protocol) == ("ring", "Simple")
    assert r.time == collective(tp.rail_optimized(1), "all_reduce", 1 << 30, algorithm="ring", protocol="Simple").time
    with pytest.raises(ValueError, match="gcp_tcpxo's NCCL settings run Simple only, NVLS off"):
        collective(one, "all_reduce", 1 << 30, algorithm="nvls")
    two = tp.rail_optimized(2, link="tcpxo_200g")
    inside = collective(two, "all_reduce", 1 << 20, ranks=list(range(8)))       # one node of two
    assert inside.protocol == "Simple" and inside.algorithm != "nvls"
    alps = collective(tp.rail_optimized(1, link="slingshot_200g"), "all_reduce", 1 << 24, algorithm="ring")
    assert alps.protocol != "LL128"
    assert collective(tp.rail_optimized(1), "all_reduce", 1 << 24, algorithm="ring").protocol == "LL128"


@pytest.mark.parametrize("order", [0, 1])
def test_auto_on_each_graph_chooses_among_its_own_candidates(order):
    """review26 F1: with algorithm="auto" the candidates came from the first graph that planned
    the call: a TCPXO graph first (NVLS off) left an NDR graph without NVLSTree (285 us as a tree
    against 208 alone); a sweep over links gave the NDR row that number. Graphs whose transports
    set other NCCL settings are planned apart: each as alone, in either order."""
    graphs = [tp.rail_optimized(2, link="tcpxo_200g"), tp.rail_optimized(2)]
    graphs = graphs if order == 0 else graphs[::-1]
    for r, g in zip(collective_variants(graphs, "all_reduce", 16 * MIB, communicator="each"), graphs):
        alone = collective(g, "all_reduce", 16 * MIB)
        assert (r.algorithm, r.protocol, r.time) == (alone.algorithm, alone.protocol, alone.time)
    out = collective_variants(graphs, "all_reduce", 16 * MIB, algorithm="nvls_tree", communicator="each")
    bad = out[0] if order == 0 else out[1]
    assert bad.status == Status.FAILED and bad.protocol == "" and "NVLS off" in bad.message
