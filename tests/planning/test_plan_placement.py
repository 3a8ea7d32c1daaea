"""Placement (issue 32): which GPUs a job gets and which GPUs form each group, checked by hand
on a 4-server cluster of two racks (rail_optimized with 2 servers per scalable unit)."""

import pytest

import topologies as tp
import flowsolver as fs
from flowsolver.planning import PLACEMENTS, place_job, server_racks
from flowsolver.training import ParallelLayout


@pytest.fixture(scope="module")
def cluster():
    return tp.rail_optimized(4, servers_per_unit=2)      # racks: {s0, s1}, {s2, s3}


def _named(graph, lay, kind):
    names = tp.gpus(graph)
    return [[names[r] for r in group] for group in lay.groups(kind)]


def test_racks_are_the_scalable_units(cluster):
    racks = server_racks(cluster)
    assert {r: sorted(s) for r, s in racks.items()} == {0: [0, 1], 1: [2, 3]}


def test_packed_fills_one_rack_and_keeps_rails(cluster):
    g = place_job(cluster, 16, "packed")
    lay = ParallelLayout(tp=8, pp=1, dp=2)
    assert _named(g, lay, "tp") == [[f"s0/gpu{i}" for i in range(8)], [f"s1/gpu{i}" for i in range(8)]]
    assert _named(g, lay, "dp") == [[f"s0/gpu{i}", f"s1/gpu{i}"] for i in range(8)]


def test_spread_takes_one_server_per_rack(cluster):
    g = place_job(cluster, 16, "spread")
    assert _named(g, ParallelLayout(tp=8, pp=1, dp=2), "dp") == [[f"s0/gpu{i}", f"s2/gpu{i}"] for i in range(8)]


def test_rail_aligned_takes_the_same_gpu_indices_of_every_server(cluster):
    g = place_job(cluster, 16, "rail_aligned")
    lay = ParallelLayout(tp=4, pp=1, dp=4)
    assert _named(g, lay, "tp") == [[f"s{s}/gpu{i}" for i in range(4)] for s in range(4)]
    assert _named(g, lay, "dp") == [[f"s{s}/gpu{i}" for s in range(4)] for i in range(4)]
    rails = [{g.nodes[v]["rail"] for v in group} for group in _named(g, lay, "dp")]
    assert rails == [{0}, {1}, {2}, {3}]


def test_rail_aligned_is_k_gpus_of_every_server_or_whole_servers_as_its_text_says(cluster):
    # adv17a: PLACEMENTS said "GPUs 0 .. k-1 of every server, then k .. 2k-1, ...", a second
    # round the code never takes. By hand on 4 servers of 8 GPUs: 4, 8, 16 GPUs are k = 1, 2, 4
    # of every server; 24 is no k of every server (6 does not divide 8): 3 whole servers, the
    # ones packed takes; 12 neither (3 does not divide 8, 12 is not whole servers): refused
    for gpus, k in ((4, 1), (8, 2), (16, 4), (32, 8)):
        assert tp.gpus(place_job(cluster, gpus, "rail_aligned")) == [f"s{s}/gpu{i}" for s in range(4)
                                                                      for i in range(k)]
    assert tp.gpus(place_job(cluster, 24, "rail_aligned")) == tp.gpus(place_job(cluster, 24, "packed")) \
        == [f"s{s}/gpu{i}" for s in range(3) for i in range(8)]
    with pytest.raises(ValueError, match="cannot be placed rail_aligned"):
        place_job(cluster, 12, "rail_aligned")
    text = PLACEMENTS["rail_aligned"]
    assert "2k-1" not in text and "0 .. k-1 of each" in text and "whole servers" in text


def test_plans_docstring_names_the_placements_place_job_takes():
    # adv17a: plan's docstring offered "rail-unaligned" (place_job refuses it) and left out
    # rail_aligned
    import re

    doc = fs.plan.__doc__
    section = doc[doc.index("placement : "):doc.index("**step_options")]
    assert set(re.findall(r'``"(\w[\w-]*)"``', section)) == set(PLACEMENTS)


def test_rail_unaligned_puts_dp_peers_on_other_rails(cluster):
    g = place_job(cluster, 16, "rail_unaligned")
    groups = _named(g, ParallelLayout(tp=8, pp=1, dp=2), "dp")
    # local rank i: GPU i on the job's first server, GPU (i + 1) mod 8 on its second
    assert groups == [[f"s0/gpu{i}", f"s1/gpu{(i + 1) % 8}"] for i in range(8)]
    assert all(len({g.nodes[v]["rail"] for v in group}) == 2 for group in groups)


def test_a_full_cluster_packed_is_the_cluster_in_rank_order(cluster):
    g = place_job(cluster, None, "packed")
    assert tp.gpus(g) == tp.gpus(cluster)


def test_bad_placements_are_refused(cluster):
    with pytest.raises(ValueError, match="placement must be one of"):
        place_job(cluster, 16, "random")
    with pytest.raises(ValueError, match="whole servers"):
        place_job(cluster, 12, "packed")
    with pytest.raises(ValueError, match="more than the cluster"):
        place_job(cluster, 64, "packed")
    assert set(PLACEMENTS) == {"packed", "rail_aligned", "spread", "rail_unaligned"}


def test_plan_over_placements_matches_training_step_on_each_placement(cluster):
    kw = dict(model="llama-3-8b", global_batch=32, seq_len=2048, cp=1, zero=1, micro_batch=1, vp=1,
              recompute="selective", sequence_parallel=True, orders="tp-cp-dp-pp", tp=4, pp=1)
    p = fs.plan(cluster, top=2, gpus=16, placement=("packed", "spread"), **kw)
    assert p.proven and p.gpus == 16
    assert {r.layout.placement for r in p.timed} == {"packed", "spread"}
    steps = [r.step_time for r in p.rows]
    assert steps == sorted(steps)
    for row in p.rows:
        graph = place_job(cluster, 16, row.layout.placement)
        r = fs.training_step(graph, model="llama-3-8b", global_batch=32, seq_len=2048, **row.layout.step_kwargs())
        assert r.step_time == row.step_time
    # the same search one placement at a time gives the same rows
    alone = fs.plan(place_job(cluster, 16, "spread"), top=2, **kw)
    assert [r.step_time for r in alone.timed] == sorted(r.step_time for r in p.timed
                                                        if r.layout.placement == "spread")


def test_cli_plan_searches_placements(capsys):
    from flowsolver.cli import main

    main(["plan", "--model", "llama-3-8b", "--nodes", "4", "--global-batch", "16", "--seq-len", "2048", "--tp", "8",
          "--cp", "1", "--pp", "1", "--vp", "1", "--micro-batch", "1", "--zero", "1", "--recompute", "selective",
          "--sequence-parallel", "on", "--orders", "tp-cp-dp-pp", "--job-gpus", "16",
          "--placement", "packed", "rail_unaligned", "--top", "2", "--json"])
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == 16 and out["proven"]
    assert {r["placement"] for r in out["rows"]} == {"packed", "rail_unaligned"}
