"""flowsolver.reliability (flowsolver.goodput and friends): placement of neighbouring jobs (hand-checked small clusters) and the
`flowsolver goodput` command."""

import json

import pytest

import topologies as tp
from flowsolver.cli import main
from flowsolver.reliability import PLACEMENTS, place_jobs, placement_slowdowns


def test_placements_on_four_dgx_servers():
    g = tp.rail_optimized(4)            # 4 servers x 8 GPUs; rank = 8 x server + local index
    server = lambda s: list(range(8 * s, 8 * s + 8))            # noqa: E731
    packed = place_jobs(g, [16, 16], "packed")
    assert packed == [server(0) + server(1), server(2) + server(3)]
    # two jobs: servers dealt 0, 2 to the first, 1, 3 to the second
    assert place_jobs(g, [16, 16], "spread") == [server(0) + server(2), server(1) + server(3)]
    # the first job takes GPUs 0-3 (rails 0-3) of every server, the second GPUs 4-7
    rails = place_jobs(g, [16, 16], "rail_aligned")
    assert rails[0] == [8 * s + i for s in range(4) for i in range(4)]
    assert rails[1] == [8 * s + i for s in range(4) for i in range(4, 8)]
    # three jobs: server order 0, 3 (0 + 3), 1, 2, whole free servers taken in that order: 12
    # GPUs = server 0 and half of 3; 8 = server 1 (3 is no longer whole); 8 = server 2. No two
    # jobs share a server (4 GPUs of server 3 stay free)
    assert place_jobs(g, [12, 8, 8], "spread") == [server(0) + server(3)[:4], server(1), server(2)]
    for policy in PLACEMENTS:          # every GPU at most once
        jobs = place_jobs(g, [8, 8, 16], policy)
        flat = [r for job in jobs for r in job]
        assert sorted(flat) == list(range(32))


def test_packed_and_spread_take_a_whole_free_server_before_splitting_a_job():
    # 4 servers x 8 GPUs, jobs of 4, 8 and 8 GPUs (adv17b finding 5: packed gave the second job
    # GPUs 4-11, servers 0 and 1; spread gave jobs 0 and 1 a share of server 0)
    g = tp.rail_optimized(4)
    server = lambda s: list(range(8 * s, 8 * s + 8))            # noqa: E731
    # packed, by hand: 4 GPUs: the first server with room, 0 (GPUs 0-3); 8 GPUs: the first
    # with 8 free, server 1; then server 2; server 0's GPUs 4-7 and server 3 stay free
    assert place_jobs(g, [4, 8, 8], "packed") == [server(0)[:4], server(1), server(2)]
    # packed jobs of 4 share a server (first fit): 0-3, 4-7, then server 1
    assert place_jobs(g, [4, 4, 4], "packed") == [server(0)[:4], server(0)[4:], server(1)[:4]]
    # packed, 12 then 12: the first takes the fullest server (0, whole) and 4 GPUs of the first
    # with room (1); the second the fullest (2, whole) and 4 more of server 1 (4 free, the first
    # with room): 2 servers each, the fewest
    assert place_jobs(g, [12, 12], "packed") == [server(0) + server(1)[:4], server(1)[4:] + server(2)]
    # spread, by hand: order 0, 3, 1, 2 (three jobs); each job a whole free server in that
    # order: job 0 GPUs 0-3 of server 0, job 1 server 3, job 2 server 1
    assert place_jobs(g, [4, 8, 8], "spread") == [server(0)[:4], server(3), server(1)]
    # 2 servers, jobs of 4, 4, 8 (order 0, 1): a whole server for each of the first two, none left
    # whole for the third, which takes the free GPUs in that order: 4-7 of server 0 and of 1
    two = tp.rail_optimized(2)
    assert place_jobs(two, [4, 4, 8], "spread") == [[0, 1, 2, 3], [8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]
    for sizes in ([4, 8, 8], [4, 4, 4, 4, 8], [12, 12, 8], [1, 2, 3, 5, 7]):
        for policy in ("packed", "spread"):
            jobs = place_jobs(g, sizes, policy)
            assert [len(j) for j in jobs] == sizes
            assert len({r for j in jobs for r in j}) == sum(sizes)


def test_topology_aware_keeps_jobs_inside_scalable_units():
    # 64 servers: two scalable units of 32 (servers 0-31 and 32-63 under their own leaves).
    # Packed, jobs of 8, 30 and 8 servers take servers 0-7, 8-37 (across both units), 38-45.
    # Best fit, largest first: 30 servers in unit 0 (both have 32 free; the first), then each
    # 8-server job where it fits with the least room left: unit 1 (unit 0 has 2 left)
    g = tp.rail_optimized(64)
    servers = lambda ranks: sorted({r // 8 for r in ranks})        # noqa: E731
    sizes = [64, 240, 64]
    packed = [servers(r) for r in place_jobs(g, sizes, "packed")]
    assert packed == [list(range(0, 8)), list(range(8, 38)), list(range(38, 46))]
    aware = [servers(r) for r in place_jobs(g, sizes, "topology_aware")]
    assert aware == [list(range(32, 40)), list(range(0, 30)), list(range(40, 48))]
    # a job larger than a unit spills over the units with the most room first
    big = place_jobs(g, [8 * 40], "topology_aware")[0]
    assert servers(big) == list(range(0, 40))


def test_spread_jobs_share_oversubscribed_uplinks():
    # 4 leaves of 2 hosts (1 GPU each), one spine, 2:1 oversubscribed: each leaf's uplink
    # carries what one host link does. Packed, job 0 is hosts 0-3 (leaves 0, 1), job 1 hosts
    # 4-7 (leaves 2, 3): they share no link, slowdown 1. Spread, each job has one host on
    # every leaf: both rings cross every uplink, which each used alone, so with latencies
    # at 0 every transfer takes exactly twice as long
    g = tp.leaf_spine(leaves=4, spines=1, hosts_per_leaf=2, oversubscription=2.0)
    assert place_jobs(g, [4, 4], "spread") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    rows = placement_slowdowns(g, [4, 4], "all_reduce", 2**26, policies=["packed", "spread"], step_latency=0.0,
                               base_latency=0.0)
    slow = {(r["policy"], r["job"]): r["slowdown"] for r in rows}
    assert slow[("packed", 0)] == pytest.approx(1.0, rel=1e-9)
    assert slow[("packed", 1)] == pytest.approx(1.0, rel=1e-9)
    assert slow[("spread", 0)] == pytest.approx(2.0, rel=1e-9)
    assert slow[("spread", 1)] == pytest.approx(2.0, rel=1e-9)
    assert [r["servers"] for r in rows] == [4, 4, 4, 4]


@pytest.mark.parametrize("sizes, policy, match", [
    ([40], "packed", "cluster has 32"),
    ([0, 4], "packed", "sizes"),
    (8, "packed", "sizes"),
    ([], "packed", "at least one"),
    ([8], "random", "policy"),
])
def test_place_jobs_rejects_bad_input(sizes, policy, match):
    with pytest.raises(ValueError, match=match):
        place_jobs(tp.rail_optimized(4), sizes, policy)


def test_place_jobs_takes_numpy_counts_as_counts():
    import numpy as np

    g = tp.rail_optimized(4)
    got = place_jobs(g, list(np.array([16, 16])), "spread")    # was refused: "sizes must be a list of GPU counts"
    assert got == place_jobs(g, [16, 16], "spread") and all(type(r) is int for job in got for r in job)
    with pytest.raises(ValueError, match="sizes"):
        place_jobs(g, [np.float64(16.0)], "spread")


def test_cli_goodput(capsys):
    argv = ["goodput", "--nodes", "2", "--checkpoint-cost", "20", "--restart", "300", "--days", "5",
            "--trajectories", "50", "--degrade", "access=0.01,2,0.5", "--rate", "hbm=0", "--intervals", "auto",
            "--budget", "256G", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # 256e9 tokens (token counts are decimal) at 4,194,304 tokens a step: 61,035 steps of ~1 s,
    # under a day: every trajectory gets there, a little later than with nothing broken
    ideal = 256e9 / (4 * 2**20) * out["healthy_step_time"] / 86400
    assert out["budget_reached"] == 1.0
    assert ideal < out["days_to_train_p50"] < ideal / 0.5
    assert 0.5 < out["useful_fraction_mean"] <= 1.0 and out["trajectories"] == 50
    assert out["lost_fraction"]["hbm"] == 0.0 and "degraded:access" in out["lost_fraction"]
    # a budget of tokens need not be a whole number of bytes' worth: 0.25T = 2**38 tokens as above
    assert main(argv[:-3] + ["--budget", "0.25T", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["budget_reached"] == 1.0
    assert main(["goodput", "--nodes", "2", "--jobs", "8", "8", "--size", "16.5"]) == 2
    assert "--size must be a whole number of bytes" in capsys.readouterr().err
    assert main(["goodput", "--nodes", "2", "--jobs", "8", "8", "--size", "16M"]) == 0
    text = capsys.readouterr().out
    assert "rail_aligned" in text and "slowdown" in text
    # bad input: exit status 2 and one line naming what is wrong
    assert main(["goodput", "--nodes", "2"]) == 2
    assert "--checkpoint-cost" in capsys.readouterr().err
    assert main(["goodput", "--nodes", "2", "--checkpoint-cost", "1", "--restart", "1", "--degrade", "access=1,2"]) == 2
    assert "--degrade" in capsys.readouterr().err
    # an unknown kind was refused with its rate in events a second (1.157e-05), not the per-day 1 given
    assert main(["goodput", "--nodes", "2", "--checkpoint-cost", "1", "--restart", "1", "--rate", "bogus=1"]) == 2
    assert "--rate 'bogus=1': KIND must be one of gpu, hbm" in capsys.readouterr().err


def test_an_all_to_all_placement_and_goodput_run_without_naming_an_algorithm():
    """adv25 F6: the default algorithm was the ring for every op, so an all-to-all (NCCL runs it
    pairwise or direct, no ring) was refused over an --algorithm the user never gave. Now the
    ring where the op has one, else NCCL's choice: the rows equal concurrent()'s with "auto"."""
    from flowsolver import concurrent
    from flowsolver.cli import main
    from flowsolver.reliability import fixed_algorithm, place_jobs, placement_slowdowns
    assert (fixed_algorithm("all_reduce"), fixed_algorithm("all_to_all"), fixed_algorithm("send_recv")) == \
        ("ring", "auto", "auto")
    g = tp.rail_optimized(4)
    rows = placement_slowdowns(g, [16, 16], "all_to_all", 2**26, policies=["packed"])
    jobs = place_jobs(g, [16, 16], "packed")
    ref = concurrent(g, [dict(op="all_to_all", size=2.0**26, ranks=r, algorithm="auto") for r in jobs])
    assert [r["together"] for r in rows] == list(ref.together)
    assert main(["goodput", "--nodes", "4", "--jobs", "16", "16", "--op", "all_to_all", "--size", "64M"]) == 0
