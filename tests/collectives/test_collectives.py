"""Collectives against the alpha-beta formulas of REFERENCE.md and measured figures."""

import math

import networkx as nx
import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives import DEFAULT_CHUNK

B = 50e9        # link bandwidth of the hand-built switch, bytes/s
ALPHA = 5e-6    # per-step latency used in the formulas, s


def single_switch(p):
    """p GPUs on one non-blocking switch, no tech attributes (taken at face value)."""
    g = nx.DiGraph()
    g.add_node("sw", kind="switch", role="leaf", tier=1)
    for i in range(p):
        g.add_node(f"gpu{i}", kind="gpu", rank=i)
        g.add_edge(f"gpu{i}", "sw", capacity=B, latency=0.0)
        g.add_edge("sw", f"gpu{i}", capacity=B, latency=0.0)
    return g


def formula(op, algorithm, p, n, chunk=None):
    beta = 1 / B
    if algorithm == "halving_doubling":     # Rabenseifner: 2 lg p alpha + 2 (p-1)/p n beta
        phases = 2 if op == "all_reduce" else 1
        return phases * (math.log2(p) * ALPHA + (p - 1) / p * n * beta)
    if op == "all_reduce":
        return 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * beta
    if op in ("reduce_scatter", "all_gather") or (op == "all_to_all" and algorithm == "pairwise"):
        return (p - 1) * ALPHA + (p - 1) / p * n * beta
    if op == "all_to_all":          # direct: one step, p-1 flows share each uplink
        return ALPHA + (p - 1) / p * n * beta
    if algorithm == "binomial":
        return math.ceil(math.log2(p)) * (ALPHA + n * beta)
    if op == "send_recv":
        return ALPHA + n * beta
    # pipelined ring broadcast / reduce: k chunks through p-1 hops; the pipeline's depth is
    # paid in latency once (NCCL keeps several chunks in flight)
    k = math.ceil(n / chunk)
    return (p - 1) * ALPHA + (k + p - 2) * n / k * beta


CASES = [("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"),
         ("all_to_all", "pairwise"), ("all_to_all", "direct"), ("broadcast", "binomial"),
         ("reduce", "binomial"), ("broadcast", "ring"), ("reduce", "ring"), ("send_recv", "direct"),
         ("all_reduce", "halving_doubling"), ("reduce_scatter", "halving_doubling"),
         ("all_gather", "halving_doubling")]


@pytest.mark.parametrize("p", [2, 3, 8, 16, 64])
@pytest.mark.parametrize("op,algorithm", CASES)
def test_time_matches_alpha_beta_formula_on_a_single_switch(op, algorithm, p):
    if algorithm == "halving_doubling" and p & (p - 1):
        with pytest.raises(ValueError, match="needs a power-of-two number of ranks, got 3"):
            collective(single_switch(p), op, 64.0, algorithm=algorithm)
        return
    n, chunk = 2**30, 2**24
    r = collective(single_switch(p), op, n, algorithm=algorithm, step_latency=ALPHA, base_latency=0.0,
                   chunk=chunk)
    assert r.time == pytest.approx(formula(op, algorithm, p, n, chunk), rel=0.01)


@pytest.mark.parametrize("op,algorithm", [c for c in CASES if c[1] != "binomial" and c != ("all_to_all", "direct")])
def test_bandwidth_optimal_algorithms_reach_link_bandwidth(op, algorithm):
    # (pipelined broadcast / reduce: (k + p - 2) / k of the ideal with k = 4096 chunks)
    r = collective(single_switch(16), op, 2**34, algorithm=algorithm, step_latency=0.0, base_latency=0.0,
                   chunk=2**22)
    assert r.busbw == pytest.approx(B, rel=0.01)


def test_eight_h100_ring_all_reduce_matches_measured_busbw():
    # ~365-370 GB/s measured on 8 x H100 (nccl-tests threads); NCCL models 18 x 20.6 GB/s
    for size in (2**30, 2**33):
        r = collective(tp.rail_optimized(nodes=1), "all_reduce", size, algorithm="ring")
        assert r.busbw == pytest.approx(370e9, rel=0.10)
        assert r.steps[0].bottleneck[0].tier == "nvlink" and r.bottleneck_tier == "nvlink"


def test_multi_server_ring_is_limited_by_the_smaller_of_nvlink_and_the_nics():
    g = tp.rail_optimized(nodes=4)
    r = collective(g, "all_reduce", 2**33, algorithm="ring")
    nic_total = 8 * tp.get_link("ib_ndr").effective_bandwidth        # 8 rails x 47 GB/s = 376
    nvlink = tp.get_link("nvlink4").effective_bandwidth             # 18 x 20.6 = 370.8
    assert r.busbw == pytest.approx(min(nic_total, nvlink), rel=0.03)
    # a single ring (one channel) crosses servers through one NIC (47 GB/s), and one channel (one
    # CTA) moves its share of NCCL's own 16 channels' bus bandwidth (min(376, 370.8) / 16 = 23.2
    # GB/s: NCCL's own drop to one channel at a small size runs the same kernel) or what one channel
    # is measured to move alone, the P2P channel's 5.7 % of 370.8 GB/s (21.1), whichever is more
    from flowsolver.collectives._p2p import P2P_CHANNEL_SHARE
    one = collective(g, "all_reduce", 2**33, algorithm="ring", channels=1)
    assert one.busbw == pytest.approx(max(min(nic_total, nvlink) / 16, P2P_CHANNEL_SHARE * nvlink), rel=0.03)


def test_oversubscribed_leaf_spine_slows_cross_leaf_all_to_all_by_the_ratio():
    def a2a(ratio):
        g = tp.leaf_spine(8, 2, 8, oversubscription=ratio)
        return collective(g, "all_to_all", 2**28, algorithm="direct", step_latency=0.0, base_latency=0.0)

    # 64 GPUs on 8 leaves: a share (p - h) / (p - 1) = 56/63 of each GPU's data crosses the
    # leaves; non-blocking, the NICs limit; at r:1 the uplinks carry r x that share of them
    assert a2a(2).time / a2a(1).time == pytest.approx(2 * 56 / 63, rel=0.01)
    assert a2a(4).time / a2a(1).time == pytest.approx(4 * 56 / 63, rel=0.01)


def test_auto_picks_the_fastest_and_reports_candidates():
    g = tp.rail_optimized(nodes=1)
    # candidates="all": binomial is no NCCL algorithm (NCCL's own choice is tested in test_nccl_model.py)
    small = collective(g, "broadcast", 2**12, candidates="all")
    large = collective(g, "broadcast", 2**32, candidates="all")
    assert not small.nccl and small.algorithm == "binomial" and large.nccl
    assert set(small.candidates) | set(small.pruned) == {"ring", "binomial"}
    assert small.algorithm == min(small.candidates, key=small.candidates.get)
    assert all(bound >= small.time for bound in small.pruned.values())
    assert large.algorithm == "ring"            # pipelined ring wins at large sizes
    assert small.time < large.time


def test_results_and_errors():
    g = tp.rail_optimized(nodes=2)
    r = collective(g, "all_gather", 2**28, ranks=range(8, 16), algorithm="ring")
    assert r.ranks == 8 and r.algbw == pytest.approx(r.size / r.time)
    assert r.link_utilization.shape == (g.number_of_edges(),)
    df = r.to_dataframe()
    assert list(df["count"]) == [7] and df["time"].sum() == pytest.approx(r.time - 8.4e-6)
    with pytest.raises(ValueError, match="op must be one of all_reduce"):
        collective(g, "allreduce", 1.0)
    with pytest.raises(ValueError, match="algorithm for all_reduce must be 'auto' or one of ring"):
        collective(g, "all_reduce", 1.0, algorithm="tree2")
    with pytest.raises(ValueError, match="size must be a finite number of bytes > 0"):
        collective(g, "all_reduce", -1.0)
    with pytest.raises(ValueError, match="ranks must be distinct GPU ranks: rank 0 is given twice"):
        collective(g, "all_reduce", 4.0, ranks=[0, 0, 1, 2])        # said "at least 2", of 3 distinct
    with pytest.raises(ValueError, match="ranks must be at least 2 distinct GPU ranks"):
        collective(g, "all_reduce", 4.0, ranks=[3])


def test_hash_collisions_slow_an_inter_server_all_reduce_and_are_named():
    g = tp.fat_tree(8, server="dgx_h100")
    fluid = collective(g, "all_reduce", 2**30, algorithm="ring")
    hashed = collective(g, "all_reduce", 2**30, algorithm="ring", policy="ecmp_hash",
                        policy_options=dict(seed=1))
    assert hashed.busbw < 0.9 * fluid.busbw
    assert hashed.steps[0].bottleneck[0].tier in ("edge-agg", "agg-core")   # a fabric link collided


@pytest.mark.parametrize("p", [4, 8, 16, 64])
def test_double_binary_tree_all_reduce_on_a_single_switch(p):
    # NCCL's tree model: algbw is half the link bandwidth (each rank forwards 4 half-buffer
    # chunks per pipeline step: up and two down in the tree where it is inner, up in the
    # other), and the pipeline depth, log2 p up and log2 p down, is paid in latency
    n = 2**30
    r = collective(single_switch(p), "all_reduce", n, algorithm="tree", step_latency=ALPHA, base_latency=0.0,
                   chunk=2**16)
    assert r.time == pytest.approx(2 * math.log2(p) * ALPHA + 2 * n / B, rel=0.01)


def test_hierarchical_all_reduce_matches_its_two_level_formula():
    # 4 DGX H100: reduce-scatter over NVLink (7 steps of n/8), ring all-reduce of n/8 per rail
    # across the 4 servers (6 steps of n/32 over one NDR NIC each), all-gather over NVLink
    g = tp.rail_optimized(nodes=4)
    n = 2**32
    r = collective(g, "all_reduce", n, algorithm="hierarchical", step_latency=0.0, base_latency=0.0)
    nvlink = tp.get_link("nvlink4").effective_bandwidth
    nic = tp.get_link("ib_ndr").effective_bandwidth
    assert r.time == pytest.approx(2 * 7 * n / 8 / nvlink + 6 * n / 32 / nic, rel=0.01)
    with pytest.raises(ValueError, match="'hierarchical' needs ranks on at least 2 servers"):
        collective(g, "all_reduce", n, algorithm="hierarchical", ranks=range(8))


def test_nvls_on_eight_h100_matches_measured_busbw():
    # measured: 8 x H100 NVLS all-reduce busbw ~480 GB/s, algbw ~275 GB/s (REFERENCE.md)
    g = tp.rail_optimized(nodes=1)
    for size in (2**30, 2**32, 2**33):
        r = collective(g, "all_reduce", size, algorithm="nvls")
        assert r.busbw == pytest.approx(480e9, rel=0.15)
        assert r.algbw == pytest.approx(275e9, rel=0.15)
    assert collective(g, "all_reduce", 2**32).algorithm == "nvls"
    with pytest.raises(ValueError, match="'nvls' needs every rank on one NVSwitch with NVLS: the ranks span 2"):
        collective(tp.rail_optimized(nodes=2), "all_reduce", 2**20, algorithm="nvls")
    a100 = tp.rail_optimized(nodes=1, server="dgx_a100", link="ib_hdr")
    assert "nvls" not in collective(a100, "all_reduce", 2**30).candidates
    with pytest.raises(ValueError, match="has no NVLS"):
        collective(a100, "all_reduce", 2**30, algorithm="nvls")


def test_auto_solves_at_most_two_batches_and_prunes_only_what_cannot_win(monkeypatch):
    import flowsolver.collectives._solve as fc

    calls = []
    real = fc.solve_steps
    monkeypatch.setattr(fc, "solve_steps", lambda *a, **k: calls.append(1) or real(*a, **k))
    g = tp.rail_optimized(nodes=2)
    r = collective(g, "all_reduce", 2**28, candidates="all")
    assert set(r.candidates) | set(r.pruned) == {"ring", "tree", "halving_doubling", "hierarchical", "nvls_tree"}
    assert len(calls) <= 2
    # each solved candidate's time is what it takes when solved on its own; each pruned one,
    # solved on its own, is no faster than the choice (its bound said so)
    for alg, t in r.candidates.items():
        assert collective(g, "all_reduce", 2**28, algorithm=alg).time == pytest.approx(t, rel=1e-9)
    for alg, bound in r.pruned.items():
        alone = collective(g, "all_reduce", 2**28, algorithm=alg).time
        assert alone >= bound * (1 - 1e-12) and bound >= r.time


def test_auto_prunes_pairwise_all_to_all_with_the_same_choice_and_time():
    g = tp.fat_tree(4)
    size = 2**20 * 15
    r = collective(g, "all_to_all", size, efficiency=1.0, candidates="all")
    assert r.algorithm == "direct" and "pairwise" in r.pruned and set(r.candidates) == {"direct"}
    every = {a: collective(g, "all_to_all", size, algorithm=a, efficiency=1.0).time for a in ("direct", "pairwise")}
    assert r.time == pytest.approx(min(every.values()), rel=1e-12)
    assert every["pairwise"] >= r.pruned["pairwise"] >= r.time


def test_variants_solved_together_equal_one_by_one_and_failures_are_per_scenario():
    from flowsolver import collective_variants
    from flowsolver._status import Status

    graphs = [tp.rail_optimized(2, link=link) for link in ("ib_ndr", "ib_hdr", "eth_100g")]
    broken = tp.rail_optimized(2)
    for u, v, d in broken.edges(data=True):
        if u == "s0/nic0" or v == "s0/nic0":
            d["capacity"] = 0.0            # rail 0 of server 0 cut: a single ring cannot complete
    together = collective_variants(graphs + [broken], "all_reduce", 2**28)
    for g, r in zip(graphs, together):
        alone = collective(g, "all_reduce", 2**28)
        assert r.time == pytest.approx(alone.time, rel=1e-9) and r.algorithm == alone.algorithm
    assert [r.status for r in together] == [Status.OK] * 3 + [Status.STALLED]
    assert "cannot complete" in together[-1].message and together[-1].time == float("inf")
    with pytest.raises(ValueError, match=r"graphs\[1\] has other nodes or edges"):
        collective_variants([graphs[0], tp.rail_optimized(3)], "all_reduce", 2**20)
    # a variant is checked as collective() checks a graph: a capacity of True ran at 1 byte/s, "5e10" and inf ran
    for bad in (True, "5e10", float("inf"), 1j):
        edited = tp.rail_optimized(2)
        edited.edges["s0/nic0", "su0/leaf0"]["capacity"] = bad
        with pytest.raises(tp.TopologyError, match="capacity must be a finite number"):
            collective_variants([graphs[0], edited], "all_reduce", 2**26)


def test_a_variant_is_timed_with_its_own_nvlink_rate():
    # NCCL's model reads the NVLink bandwidth from the graph: a variant with NVLink at half
    # rate must get the time collective() gives on that graph, not the first graph's rate
    from flowsolver import collective_variants

    g = tp.rail_optimized(2)
    half = g.copy()
    for _, _, d in half.edges(data=True):
        if str(d.get("tech", "")).startswith("nvlink"):
            d["capacity"] *= 0.5
    for op, size in (("all_reduce", 2**30), ("all_gather", 2**28)):
        base, slow = collective_variants([g, half], op, size)
        alone = collective(half, op, size)
        assert (slow.algorithm, slow.protocol) == (alone.algorithm, alone.protocol)
        assert slow.time == pytest.approx(alone.time, rel=1e-12)
        assert base.time == pytest.approx(collective(g, op, size).time, rel=1e-12) and slow.time > base.time


@pytest.mark.parametrize("build", [lambda: tp.rail_optimized(nodes=2), lambda: tp.torus((2, 2), server="dgx_h100")],
                         ids=["rail(2)", "torus of DGX"])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "broadcast", "all_to_all"])
@pytest.mark.parametrize("size", [2**12, 2**28])
def test_pruned_auto_equals_solving_every_candidate(build, op, size):
    from flowsolver import ALGORITHMS

    g = build()
    r = collective(g, op, size, candidates="all")
    every = {}
    for alg in ALGORITHMS[op]:
        try:
            every[alg] = collective(g, op, size, algorithm=alg).time
        except ValueError:          # not available on these ranks (NVLS across servers, ...)
            continue
    assert set(every) == set(r.candidates) | set(r.pruned)
    best = min(every, key=every.get)
    assert r.time == pytest.approx(every[best], rel=1e-9) and every[r.algorithm] == pytest.approx(every[best], rel=1e-9)
    for alg, bound in r.pruned.items():              # a bound is a bound
        assert every[alg] >= bound * (1 - 1e-12)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_ring_broadcast_and_reduce_across_servers_use_every_channel(op):
    """NCCL splits the buffer over its channels, each channel's ring from the root: on 4 x 8
    H100 (8 NDR NICs per server, 16 channels, two per rail) every NIC of the root's server
    carries 2/16 of the buffer, so busbw = 8 NICs x 47 GB/s (NDR at its catalogue efficiency
    0.94), less the pipeline's fill: k chunks through p - 1 hops take (k + p - 2) / k of the
    ideal. One ring (one NIC) gave 46.8 GB/s; 286 GB/s measured on such a machine."""
    g = tp.rail_optimized(4)
    size = 2**33
    r = collective(g, op, size, step_latency=0.0, base_latency=0.0)
    assert r.algorithm == "ring" and r.channels == 16
    k = math.ceil(size / 16 / DEFAULT_CHUNK)
    ideal = 8 * 50e9 * 0.94 * k / (k + 32 - 2)
    assert r.busbw == pytest.approx(ideal, rel=0.02)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_a_chains_latency_is_one_channels_hops_not_every_channels_slowest(op):
    """Each channel's chunks pipeline along its own chain: the depth is paid once per stage at
    one channel's hop. 8 B on 2 x 8 H100: one channel (the root's server entered at the root:
    one network hop) pays 14 NVLink hops and 1 network hop; with 2 or more channels, the chain
    that crosses between the servers most, 13 and 2 (both crossings of its ring). Every
    stage was paid at the slowest hop of any channel (some channel's network hop): 239 us,
    where these take about 80 and 92."""
    from flowsolver.collectives._nccl import hop_latency

    g = tp.rail_optimized(2)
    one, two, many = (collective(g, op, 8, channels=c, base_latency=0.0).time for c in (1, 2, 16))
    nvl, net = hop_latency("nvlink", "Simple"), hop_latency("network", "Simple")
    assert two == pytest.approx(many, rel=1e-5)        # (8 B's transfer: 1e-12 s apart)
    # the catalogue's cable latencies ride on top of NCCL's hop latencies: at most 1 us a hop here
    assert 14 * nvl + net <= one <= 14 * nvl + net + 15e-6
    assert 13 * nvl + 2 * net <= many <= 13 * nvl + 2 * net + 15e-6


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_to_all"])
def test_all_gather_reduce_scatter_and_all_to_all_across_servers_use_every_nic(op):
    """No one-ring shortcut across servers. On 2 x 8 H100 (8 NDR NICs a server at 47 GB/s,
    NDR's 50 GB/s at the catalogue's 0.94): the ring all-gather / reduce-scatter runs 16
    channels, each ring crossing between the servers twice, two rings on each NIC, so each
    NIC direction carries 2 x (15 / 16) x size / 16 and the transfer takes at least
    size x 15 / 128 / 47 GB/s (busbw 8 x 47 = 376 GB/s; one ring would leave 47). All-to-all:
    each GPU sends half its buffer to the other server, over its own rail's NIC, size / 2 /
    47 GB/s at least (one NIC for the server would take 8 times as long)."""
    g = tp.rail_optimized(2)
    size = 2**31
    r = collective(g, op, size, algorithm="direct" if op == "all_to_all" else "ring",
                   step_latency=0.0, base_latency=0.0)
    nic = 50e9 * 0.94
    bound = size * 15 / 128 / nic if op != "all_to_all" else size / 2 / nic
    assert bound <= r.time < 1.25 * bound
    if op != "all_to_all":
        assert r.channels == 16


def test_rings_spread_over_nics_that_two_gpus_share():
    # 4 GPUs and 2 NICs a server (NREL Kestrel's H100 nodes: 2 x 200 Gb/s): NCCL keeps each
    # channel on one NIC (in and out by GPUs of that NIC), so the 2 rings use both NICs. The rail
    # rule (every GPU its own NIC) sent both rings out of the second server through one NIC:
    # the ring all-reduce then moved one NIC's rate where two disjoint NICs move twice it
    from flowsolver.collectives._layout import participants
    model = tp.get_server("dgx_h100").with_(gpus=4, nics=2)
    g = tp.rail_optimized(2, server=model, link="ib_hdr")
    _, layout = participants(g, "all_reduce", None, None)
    assert layout.channels == 2
    rails = [g.nodes[n]["rail"] for n in tp.gpus(g)]
    for ring in layout.rings:
        for start in (0, 4):
            pos = ring.index(next(p for p in ring if p // 4 == start // 4))
            enter, leave = ring[pos], ring[pos + 3]
            assert rails[enter] == rails[leave]
    assert {rails[ring[0]] for ring in layout.rings} == {0, 1}
    both = collective(g, "all_reduce", 2 ** 32, algorithm="ring", protocol="Simple")
    assert both.busbw == pytest.approx(2 * tp.get_link("ib_hdr").effective_bandwidth, rel=0.03)


def test_trees_spread_over_nics_that_two_gpus_share():
    # 8 A100s and 4 EFA NICs a server (AWS p4d.24xlarge: a NIC per GPU pair). NCCL's search gives
    # channel c the NIC nets[c mod netCount] for trees as for rings (search.cc ncclTopoSearchRecNet)
    # and starts the chain at a GPU of it; started at GPU c on 4 channels, the trees left every
    # server through GPUs 0-3, i.e. NICs 0 and 1 only. A 2-node double binary tree moves each
    # buffer byte once each way between the servers (half up tree 0, half down tree 1, and back), so
    # with every NIC carrying it the algorithm bandwidth is the servers' 4 NICs' rate, 50 GB/s, or
    # what NCCL's tuner grants the tree, whichever is less: its 4 graph channels (one a 100G NIC, at
    # 12 GB/s: not doubled) x perChMaxTreeBw 23.6 GB/s (Ampere, 2 nodes), halved: 47.2 GB/s
    model = tp.get_server("dgx_a100").with_(nics=4, nic="efa1_100g")
    g = tp.rail_optimized(2, server=model, link="efa1_100g")
    r = collective(g, "all_reduce", 2 ** 30, algorithm="tree", protocol="Simple")
    nic_rate = tp.get_link("efa1_100g").effective_bandwidth
    assert 2 ** 30 / r.time == pytest.approx(min(4 * nic_rate, 4 * 23.6e9 / 2), rel=0.08)
    edges = list(g.edges())
    used = {a for i, (a, b) in enumerate(edges) if "nic" in str(a) and "leaf" in str(b) and r.link_utilization[i] > 0.5}
    assert len(used) == 8                                       # all 4 NICs of both servers


def _shared_nic_cluster():
    # 4 H100s and 2 NDR NICs a server (a NIC a GPU pair): the server model cables each NIC to the
    # pair's first GPU; on the machine both sit under the NIC's PCIe switch
    g = tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(gpus=4, nics=2), link="ib_ndr")
    return g, 2 * tp.get_link("ib_ndr").effective_bandwidth           # a server's 2 NICs, bytes/s


def test_second_gpu_of_a_shared_nic_counts_it_as_local():
    """NCCL counts a NIC under a GPU's PCIe switch as local (getLocalNetCountByBw): the pair's
    second GPU sends as fast as the first (it had no NIC in NCCL's view: 1 P2P channel, half the
    rate), and NVLSTree over the odd GPUs stays under the servers' NICs (its network bound was
    off: a 2-node all-reduce sends the whole buffer out of each server, algbw <= the NICs)."""
    g, nics = _shared_nic_cluster()
    first, second = (collective(g, "send_recv", 2 ** 30, ranks=r) for r in ([0, 4], [1, 5]))
    assert second.channels == first.channels           # its path adds an NVLink hop: 1.2 us of 25 ms
    assert second.time == pytest.approx(first.time, rel=1e-4)
    odd = collective(g, "all_reduce", 2 ** 30, ranks=[1, 3, 5, 7], algorithm="nvls_tree")
    assert 2 ** 30 / odd.time <= nics * (1 + 1e-9)


def test_lockstep_groups_sharing_nics_share_their_rate():
    """Two data-parallel groups (even and odd GPUs) leave each server through the same 2 NICs:
    run at once, each 2-node all-reduce moves its whole buffer out of a server, so each gets at
    most half the NICs' rate, whichever algorithm (NVLSTree's tuned time had the whole)."""
    from flowsolver import concurrent
    g, nics = _shared_nic_cluster()
    groups = [[0, 2, 4, 6], [1, 3, 5, 7]]
    for algorithm in ("nvls_tree", "auto"):
        c = concurrent(g, [dict(op="all_reduce", size=2 ** 30, ranks=r, algorithm=algorithm) for r in groups],
                       lockstep=True)
        assert all(2 ** 30 / t <= nics / 2 * (1 + 1e-9) for t in c.together)


def test_lockstep_groups_go_at_the_pace_of_the_group_with_the_least_nics():
    """Group A's GPUs are nearest NICs 0 and 1, group B's both nearest NIC 2: in lockstep both go
    at B's pace, one NIC's rate (a 2-node all-reduce sends its whole buffer out of a server),
    whichever group is listed first (A first took A's view for both: 62 GB/s, B first 46.6)."""
    from flowsolver import concurrent
    g = tp.rail_optimized(2, server=tp.get_server("dgx_h100").with_(nics=4), link="ib_ndr")
    nic = tp.get_link("ib_ndr").effective_bandwidth
    a, b = [0, 2, 8, 10], [4, 5, 12, 13]
    times = [concurrent(g, [dict(op="all_reduce", size=2 ** 30, ranks=r, algorithm="nvls_tree") for r in order],
                        lockstep=True).makespan for order in ((a, b), (b, a))]
    assert times[0] == pytest.approx(times[1], rel=1e-12) and 2 ** 30 / times[0] <= nic * (1 + 1e-9)


def test_a_gpu_on_a_cpu_root_port_keeps_its_nccl_view(tmp_path):
    """A machine file's GPUs and NICs straight on a CPU's root ports (Grace-like: no PCIe switch):
    no NIC is the GPU's through a switch, and none is cabled to a GPU, so no rail NIC is taken
    as local either (a send timed on NCCL's view of no local NIC, as before; it was a bare
    StopIteration)."""
    import warnings
    from topologies.formats.nccl import from_nccl_xml
    gpu = lambda b: f'<pci busid="{b}" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>'  # noqa: E731
    nic = lambda b: (f'<pci busid="{b}" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"><nic><net '  # noqa: E731
                     f'name="mlx5_{b[5:7]}" dev="0" speed="400000" port="1" gdr="1"/></nic></pci>')
    cpu = lambda n, inner: f'<cpu numaid="{n}" arch="aarch64" vendor="ARM">{inner}</cpu>'  # noqa: E731
    xml = ('<system version="1">' + cpu(0, gpu("0008:01:00.0") + gpu("0009:01:00.0") + nic("0000:03:00.0")
                                        + nic("0002:03:00.0"))
           + cpu(1, gpu("0018:01:00.0") + gpu("0019:01:00.0") + nic("0010:03:00.0") + nic("0012:03:00.0")) + '</system>')
    (tmp_path / "c2c.xml").write_text(xml)
    from flowsolver.collectives._layout import near_nics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # what the file leaves out (no NVLink element)
        server = from_nccl_xml(tmp_path / "c2c.xml", gpu="gb200", nvlink="nvlink5")
    g = tp.rail_optimized(2, server=server)
    assert near_nics(g, tp.gpus(g)[0]) == ()        # through PCIe switches alone: none
    r = collective(g, "send_recv", 2 ** 30, ranks=[0, 4])
    assert math.isfinite(r.time) and r.time > 0


def test_rings_keep_a_rail_across_servers_whatever_order_the_ranks_come_in():
    # NICs grouped by first appearance let a server listed as GPUs 3, 2, 1, 0 put ring 0 on its
    # other NIC: the hop between servers changed rails (640 of 1,200 hops with shuffled ranks)
    from flowsolver.collectives._layout import participants
    g = tp.rail_optimized(3, server=tp.get_server("dgx_h100").with_(gpus=4, nics=2), link="ib_hdr")
    rails = [g.nodes[n]["rail"] for n in tp.gpus(g)]
    order = [0, 1, 2, 3, 7, 6, 5, 4, 9, 11, 8, 10]
    _, layout = participants(g, "all_reduce", order, None)
    for ring in layout.rings:
        ranks = [order[p] for p in ring]
        hops = [(a, b) for a, b in zip(ranks, ranks[1:] + ranks[:1]) if a // 4 != b // 4]
        assert len(hops) == 3 and all(rails[a] == rails[b] for a, b in hops), hops
