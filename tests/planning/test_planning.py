"""flowsolver.plan: the pruning against hand-counted feasible sets, the search's ranking
against brute force (every feasible layout timed with training_step), the cached timing
against one-by-one training_step calls (identical numbers)."""

import numpy as np
import pytest

import topologies as tp
from flowsolver import ModelSpec, Parallelism, Schedule, get_model, memory_per_gpu, plan, training_step
from flowsolver.planning import PRUNE_REASONS, layout_space

# 4 layers, 4 heads: tp in (1, 2, 4) all divide the heads; small enough to time every layout
TOY = ModelSpec("toy", layers=4, hidden=512, ffn=2048, heads=4, kv_heads=4, vocab=1024, seq_len=512)
GRID = dict(tp=(1, 2, 4), cp=(1, 2), pp=(1, 2, 4), vp=(1, 2), ep=1, micro_batch=(1, 2), recompute="selective",
            zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")

# Hand count, 8 GPUs, global batch 4 (see the derivation in test_pruning_counts_by_hand):
# (tp, cp, pp, dp, vp, micro_batch)
FEASIBLE = {
    (1, 1, 2, 4, 1, 1),
    (1, 1, 4, 2, 1, 1), (1, 1, 4, 2, 1, 2),
    (1, 2, 1, 4, 1, 1),
    (1, 2, 2, 2, 1, 1), (1, 2, 2, 2, 1, 2), (1, 2, 2, 2, 2, 1),
    (1, 2, 4, 1, 1, 1), (1, 2, 4, 1, 1, 2),
    (2, 1, 1, 4, 1, 1),
    (2, 1, 2, 2, 1, 1), (2, 1, 2, 2, 1, 2), (2, 1, 2, 2, 2, 1),
    (2, 1, 4, 1, 1, 1), (2, 1, 4, 1, 1, 2),
    (2, 2, 1, 2, 1, 1), (2, 2, 1, 2, 1, 2),
    (2, 2, 2, 1, 1, 1), (2, 2, 2, 1, 1, 2), (2, 2, 2, 1, 2, 1), (2, 2, 2, 1, 2, 2),
    (4, 1, 1, 2, 1, 1), (4, 1, 1, 2, 1, 2),
    (4, 1, 2, 1, 1, 1), (4, 1, 2, 1, 1, 2), (4, 1, 2, 1, 2, 1), (4, 1, 2, 1, 2, 2),
    (4, 2, 1, 1, 1, 1), (4, 2, 1, 1, 1, 2),
}


def _key(lay):
    return (lay.tp, lay.cp, lay.pp, lay.dp, lay.vp, lay.micro_batch)


def test_pruning_counts_by_hand():
    # 3 tp x 2 cp x 3 pp x 2 vp x 2 micro-batch = 72 combinations.
    # gpus: tp cp pp = 16 or 32 does not divide 8: (2,2,4), (4,1,4), (4,2,2), (4,2,4), x 4 = 16.
    # layers: 4 layers (6 with Megatron's uneven split) on pp x vp: vp 2 needs pp > 1; pp 4 x vp 2 = 8
    #   divides neither; of the 14 (tp, cp, pp) left, 6 have pp 1 and 3 have pp 4: 9 x 2 micro-batches = 18.
    # batch: dp x micro_batch must divide 4: dp 8 (tp cp pp = 1) both micro-batches, dp 4 micro-batch 2
    #   ((1,1,2) x vp 1 and 2, (1,2,1), (2,1,1)): 2 + 2 + 1 + 1 = 6; and vp 2 (pp 2) needs an even count of
    #   at least 2 microbatches (Megatron-Core's interleaved schedule): one microbatch at (1,1,2) dp 4
    #   micro-batch 1, (1,2,2) and (2,1,2) dp 2 micro-batch 2: 3 more, 9.
    # feasible: 72 - 16 - 18 - 9 = 29, the set above.
    s = layout_space(TOY, 8, 4, gpu_memory=80e9, **GRID)
    assert {_key(lay) for lay in s.feasible} == FEASIBLE
    assert len(s.feasible) == 29
    assert s.pruned == dict(gpus=16, heads=0, sequence=0, layers=18, experts=0, batch=9, same=0, memory=0)
    assert s.total == 72
    assert set(s.pruned) == set(PRUNE_REASONS)


def test_heads_sequence_and_duplicates_are_pruned_by_hand():
    # tp 3 divides neither the 4 heads nor 8 GPUs: "gpus" comes first; on 12 GPUs it is "heads".
    s = layout_space(TOY, 12, 12, gpu_memory=80e9, tp=3, cp=1, pp=1, vp=1, micro_batch=1, recompute="none",
                     zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert s.pruned["heads"] == 1 and not s.feasible
    # 2 cp must divide 512 tokens: cp 512 does not (1024 > 512)
    s = layout_space(TOY, 512, 512, gpu_memory=80e9, tp=1, cp=(256, 512), pp=1, vp=1, micro_batch=1,
                     recompute="none", zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert s.pruned["sequence"] == 1 and [_key(lay) for lay in s.feasible] == [(1, 256, 1, 2, 1, 1)]
    # tp 1: sequence parallelism False is the same job; cp 1: tp-dp-cp-pp is tp-cp-dp-pp
    s = layout_space(TOY, 8, 8, gpu_memory=80e9, tp=1, cp=(1, 2), pp=1, vp=1, micro_batch=1, recompute="none",
                     zero=1, sequence_parallel=(True, False), orders=("tp-cp-dp-pp", "tp-dp-cp-pp"))
    # cp 1: 2 orders x 2 sp = 4 combinations, 1 kept; cp 2 (dp 4): the orders differ, sp False dropped: 2 kept
    assert s.pruned["same"] == 3 + 2 and len(s.feasible) == 3
    # dp x cp = 1 (tp 4 x pp 2 on 8 GPUs): ZeRO has no peers to shard over, stages 1-3 are one job
    s = layout_space(TOY, 8, 4, gpu_memory=80e9, tp=4, cp=1, pp=2, vp=1, micro_batch=1, recompute="none",
                     zero=(1, 2, 3), sequence_parallel=True, orders="tp-cp-dp-pp")
    assert [lay.zero for lay in s.feasible] == [1] and s.pruned["same"] == 2
    # one searched value as a NumPy integer; a float is refused by name
    s = layout_space(TOY, 8, 4, gpu_memory=80e9, tp=np.int64(4), cp=np.array(1), pp=2, vp=1, micro_batch=1,
                     recompute="none", zero=np.int64(1), sequence_parallel=True, orders="tp-cp-dp-pp")
    assert [(lay.tp, lay.zero) for lay in s.feasible] == [(4, 1)]
    with pytest.raises(ValueError, match="tp must be an integer >= 1, got 2.0"):
        layout_space(TOY, 8, 4, gpu_memory=80e9, tp=2.0, cp=1, pp=2, vp=1, micro_batch=1)


def test_experts_are_pruned_by_hand():
    moe = ModelSpec("moe", layers=2, hidden=256, ffn=512, heads=4, kv_heads=4, vocab=512, seq_len=256, experts=4,
                    top_k=2)
    # 8 GPUs, tp 1, pp 1: dp 8; ep in 1, 2, 4 (divide 4 experts and dp 8), 8 does not divide 4 experts
    s = layout_space(moe, 8, 8, gpu_memory=80e9, tp=1, cp=1, pp=1, vp=1, ep=(1, 2, 4, 8), micro_batch=1,
                     recompute="none", zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert sorted(lay.ep for lay in s.feasible) == [1, 2, 4] and s.pruned["experts"] == 1
    # a dense model with ep 2
    s = layout_space(TOY, 8, 8, gpu_memory=80e9, tp=1, cp=1, pp=1, vp=1, ep=(1, 2), micro_batch=1,
                     recompute="none", zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert s.pruned["experts"] == 1 and len(s.feasible) == 1


def test_memory_pruning_is_memory_per_gpu_against_the_usable_memory():
    # usable = 80 GB less 10 % less the CUDA context (1,573 MiB, nvidia-smi on an A100): Llama 3 8B
    # on 8 GPUs, tp 1/2/4/8, zero 0 (16 bytes per parameter unsharded: 8.03e9 x 16 = 128 GB at tp 1,
    # more than 70.35 GB; /2 = 64 GB + activations at tp 2, ...)
    usable = 72e9 - 1573 * 2 ** 20
    grid = dict(tp=(1, 2, 4, 8), cp=1, pp=1, vp=1, micro_batch=1, recompute="selective", zero=0,
                sequence_parallel=True, orders="tp-cp-dp-pp")
    s = layout_space(get_model("llama-3-8b"), 8, 8, gpu_memory=80e9, headroom=0.1, **grid)
    expect = {t for t in (1, 2, 4, 8) if memory_per_gpu("llama-3-8b", tp=t, pp=1, dp=8 // t, zero=0,
                                                        microbatches=8 // (8 // t)) <= usable}
    assert 1 not in expect and 8 in expect          # the closed form: tp 1 needs > 128 GB of state
    assert {lay.tp for lay in s.feasible} == expect and s.pruned["memory"] == 4 - len(expect)
    assert s.usable_memory == pytest.approx(usable, rel=1e-12)


def test_memory_is_counted_with_the_steps_attention():
    # without recompute an unfused attention keeps its bf16 probabilities (2 a s^2 / t bytes per
    # layer); the step's default flash attention keeps none: "none" then holds what "selective"
    # does, in the space and in the plan's timed rows alike
    spec = get_model("llama-3-8b")
    grid = dict(gpu_memory=1e12, tp=8, cp=1, pp=1, vp=1, micro_batch=1, recompute=("none", "selective"), zero=1,
                sequence_parallel=True, orders="tp-cp-dp-pp")
    by = {}
    for attention in (None, "auto"):
        s = layout_space(spec, 8, 8, attention=attention, **grid)
        by[attention] = {lay.recompute: m for lay, m in zip(s.feasible, s.memory)}
    assert by[None]["none"] - by[None]["selective"] == pytest.approx(32 * 2 * 32 * 8192 ** 2 / 8, rel=1e-12)
    # with the flash attention selective is none's job, counted once (pruned as "same")
    assert set(by["auto"]) == {"none"} and by["auto"]["none"] == by[None]["selective"]
    p = plan(tp.rail_optimized(1), model=spec, global_batch=8, top=4, tp=8, cp=1, pp=1, vp=1, micro_batch=1,
             recompute="none", zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    assert p.best.memory == by["auto"]["none"]


@pytest.fixture(scope="module")
def toy_plan():
    g = tp.rail_optimized(1)
    return g, plan(g, model=TOY, global_batch=4, top=5, **GRID)


def test_plan_ranking_equals_brute_force(toy_plan):
    g, p = toy_plan
    brute = []
    for lay in layout_space(TOY, 8, 4, gpu_memory=80e9, **GRID).feasible:
        r = training_step(g, model=TOY, global_batch=4, **lay.step_kwargs())
        brute.append((r.step_time, lay))
    brute.sort()
    assert p.proven
    assert [row.step_time for row in p.rows] == [t for t, _ in brute[:5]]
    assert p.best.layout == brute[0][1]
    # the bound never exceeds the exact step (it is what made the proof valid)
    assert all(row.bound <= row.step_time for row in p.timed)


def test_cached_timing_equals_one_by_one_training_step(toy_plan):
    g, p = toy_plan
    assert p.kinds_reused > 0                       # some collective kinds were shared
    for row in p.timed:
        r = training_step(g, model=TOY, global_batch=4, **row.layout.step_kwargs())
        assert row.step_time == r.step_time and row.result.breakdown == r.breakdown
        assert row.memory == r.memory_per_gpu and row.mfu == r.mfu


def test_pareto_front_is_not_dominated(toy_plan):
    _, p = toy_plan
    for f in p.front:
        assert not any(r.step_time <= f.step_time and r.memory <= f.memory
                       and (r.step_time, r.memory) != (f.step_time, f.memory) for r in p.timed)
    # and every timed row off the front is dominated by a front row
    front = {id(f) for f in p.front}
    for r in p.timed:
        if id(r) not in front:
            assert any(f.step_time <= r.step_time and f.memory <= r.memory for f in p.front)


def test_max_solves_stops_unproven_and_bad_input_is_named():
    g = tp.rail_optimized(1)
    p = plan(g, model=TOY, global_batch=4, top=5, max_solves=1, **GRID)
    assert not p.proven and p.profiles_solved == 1 and p.next_bound is not None
    with pytest.raises(TypeError, match="unknown argument.*ranks"):
        plan(g, model=TOY, global_batch=4, ranks=list(range(8)))
    for bad in (1.0, 1.5, -0.5):             # 1.5 and -0.5 said "[0, 1]", 1.0 "[0, 1)"
        with pytest.raises(ValueError, match=r"headroom must be a fraction in \[0, 1\), got"):
            plan(g, model=TOY, global_batch=4, headroom=bad)
    with pytest.raises(ValueError, match="micro_batch: give at least one value"):
        plan(g, model=TOY, global_batch=4, micro_batch=())
    assert "layout" in p.table() and "proven" in p.summary()


@pytest.mark.slow          # ~10 s of CPU: a few dozen layouts solved on 16 GPUs
def test_cut_bound_never_exceeds_the_exact_step_across_servers():
    # 2 servers: TP / CP / DP / PP groups that cross the servers get a non-zero cut bound; every
    # feasible layout timed (top = all of them), each bound below its exact step
    g = tp.rail_optimized(2)
    grid = dict(GRID, tp=(1, 8), cp=(1, 2), pp=(1, 2), vp=1, micro_batch=1, zero=(1, 3),
                orders=("tp-cp-dp-pp", "tp-cp-pp-dp"))
    space = layout_space(TOY, 16, 8, gpu_memory=80e9, **grid)
    p = plan(g, model=TOY, global_batch=8, top=len(space.feasible), **grid)
    assert len(p.timed) == len(space.feasible) and p.proven
    crossing = [r for r in p.timed if r.bound > r.compute + r.bubble]     # the cut bound added something
    assert crossing
    for r in p.timed:
        assert r.bound <= r.step_time
    for r in crossing[:6]:
        assert r.step_time == training_step(g, model=TOY, global_batch=8, **r.layout.step_kwargs()).step_time


def test_cli_plan_prints_the_ranked_layouts_and_rejects_a_bad_gpu_count(capsys):
    from flowsolver.cli import main

    args = ["plan", "--model", "llama-3-8b", "--gpus", "8", "--global-batch", "8", "--tp", "2", "4", "--cp", "1",
            "--pp", "1", "--vp", "1", "--micro-batch", "1", "--zero", "1", "--recompute", "selective",
            "--sequence-parallel", "on", "--orders", "tp-cp-dp-pp", "--top", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "TP2 DP4" in out and "TP4 DP2" in out and "proven" in out
    assert main(args + ["--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("layout,tp,") and len(lines) == 3
    assert main(["plan", "--gpus", "12", "--global-batch", "8"]) == 2
    assert "multiple of the server's 8 GPUs" in capsys.readouterr().err


def test_the_bound_builds_the_same_groups_as_parallel_layout():
    from flowsolver.planning._bound import layout_groups
    from flowsolver.training import ParallelLayout
    from flowsolver.training._profile import ring_pairs

    for tp_, cp, pp, dp, ep in ((2, 2, 2, 4, 2), (1, 4, 3, 2, 1), (4, 1, 2, 6, 3)):
        for order in (("tp", "cp", "dp", "pp"), ("tp", "cp", "pp", "dp"), ("dp", "tp", "pp", "cp")):
            lay = ParallelLayout(tp=tp_, pp=pp, dp=dp, ep=ep, cp=cp, order=order)
            key = (tp_, cp, pp, dp, ep, order)
            for kind in ("tp", "cp", "pp", "ep", "dp", "dp_experts"):
                assert layout_groups(key, kind).tolist() == lay.groups(kind), (key, kind)
            assert [tuple(p) for p in layout_groups(key, "cp_step").tolist()] == ring_pairs(lay.groups("cp"))


def test_a_tolerance_stops_earlier_within_it(toy_plan):
    g, exact = toy_plan
    loose = plan(g, model=TOY, global_batch=4, top=5, tolerance=0.5, **GRID)
    assert loose.proven and loose.profiles_solved <= exact.profiles_solved
    # its rows are timed exactly; the true 5th best is at most 50 % faster than its 5th row
    assert exact.rows[-1].step_time * 1.5 >= loose.rows[-1].step_time


def test_a_layout_s_parallelism_is_its_keywords(toy_plan):
    """``Layout.parallelism()`` (today's spelling) times every planned row as the layout's
    keywords do, and carries every degree and option the plan chose."""
    from flowsolver import Parallelism, Schedule

    g, p = toy_plan
    for row in p.rows:
        lay = row.layout
        par = lay.parallelism()
        assert isinstance(par, Parallelism)
        assert (par.tp, par.cp, par.pp, par.dp, par.ep, par.vp, par.micro_batch, par.zero) == \
            (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.vp, lay.micro_batch, lay.zero)
        r = training_step(g, TOY, par, Schedule(global_batch=4, recompute=lay.recompute))
        assert r.step_time == row.step_time


def test_the_default_micro_batches_are_those_dividing_each_replicas_batch():
    # global batch 48 on 8 GPUs: dp 8 leaves 6 sequences a replica (micro-batch 1, 2, 3, 6), dp 4
    # leaves 12 (1, 2, 3, 4, 6, 12), dp 2 leaves 24 (1, 2, 3, 4, 6, 8, 12, 24), dp 1 48 (... 16, 24)
    s = layout_space(get_model("llama-3-8b"), 8, 48, gpu_memory=1e15, cp=1, pp=1, vp=1, recompute="selective",
                     zero=1, sequence_parallel=True, orders="tp-cp-dp-pp")
    by_dp = {}
    for lay in s.feasible:
        by_dp.setdefault(lay.dp, set()).add(lay.micro_batch)
    want = {d: {m for m in range(1, 33) if (48 // d) % m == 0} for d in (1, 2, 4, 8)}
    assert by_dp == want and 32 not in by_dp[1] and 16 in by_dp[1]


def test_a_plan_with_no_feasible_layout_says_so():
    # 70B on 16 GPUs at a global batch of 4: nothing fits; the summary proved nothing of no rows
    p = plan(tp.rail_optimized(2), model="llama-3-70b", global_batch=4)
    assert p.feasible == 0 and not p.rows
    assert "no feasible layout" in p.summary() and "proven" not in p.summary()


def test_fp8_none_keeps_more_than_selective_so_selective_is_searched():
    # Transformer Engine's FP8 (recipe "te") keeps a flash attention's output twice without
    # recompute (16-bit + its 1-byte GEMM-input copy): "none" holds 2 s b h bytes a layer more
    # than "selective", which then is not none's job. Llama 3 8B on 16 H100, DP16 mb1 zero3 with
    # an FP8 all-gather: at headroom 0.41 (and the CUDA context) "none" (over) is dropped and
    # "selective", the next fastest (it runs the attention forward again), is the best layout --
    # not mb2 "full"
    spec, g = get_model("llama-3-8b"), tp.rail_optimized(2)
    kw = dict(model=spec, global_batch=32, precision="fp8", zero=3, fp8_param_gather=True, tp=1, cp=1, pp=1)
    wide = plan(g, top=4, headroom=0.0, micro_batch=1, **kw)
    mem = {row.layout.recompute: row.memory for row in wide.rows}
    assert mem["none"] - mem["selective"] == pytest.approx(spec.layers * 2 * 8192 * 1 * 4096, rel=1e-12)
    p = plan(g, top=2, headroom=0.41, **kw)
    best = p.best
    assert (best.layout.recompute, best.layout.micro_batch, best.layout.dp) == ("selective", 1, 16)
    r = training_step(g, spec, Parallelism(dp=16, micro_batch=1, zero=3, fp8_param_gather=True),
                      Schedule(global_batch=32, precision="fp8", recompute="selective"))
    assert best.step_time == pytest.approx(r.step_time, rel=1e-12)
    assert best.memory == pytest.approx(r.memory_per_gpu, rel=1e-12)
    assert best.memory <= tp.get_gpu("h100_sxm").memory * (1 - 0.41) - 1573 * 2 ** 20 < mem["none"]


def test_the_space_takes_an_ep_that_divides_dp_x_cp_but_not_dp():
    # Megatron-Core needs tp x ep x pp to divide the GPUs (its expert rank generator folds CP
    # into the expert data parallel ranks): Mixtral on 16 GPUs at TP 1, CP 4 (DP 4) takes EP 8
    from flowsolver.planning import layout_space
    from flowsolver.training import get_model
    s = layout_space(get_model("mixtral-8x7b"), 16, 16, gpu_memory=1e12, tp=1, cp=4, pp=1, vp=1, ep=8,
                     micro_batch=1, recompute="full", zero=1, sequence_parallel=False, orders="tp-cp-dp-pp")
    assert [lay.label for lay in s.feasible] == ["CP4 DP4 EP8 mb1 full zero1 tp-cp-dp-pp"] and s.pruned["experts"] == 0
    s3 = layout_space(get_model("mixtral-8x7b"), 16, 16, gpu_memory=1e12, tp=1, cp=2, pp=1, vp=1, ep=(8, 16),
                      micro_batch=1, recompute="full", zero=1, sequence_parallel=False, orders="tp-cp-dp-pp")
    assert s3.pruned["experts"] == 1          # ep 16 does not divide the 8 experts


def test_plan_keeps_the_cuda_context_free_and_ranks_equal_times_by_memory():
    # one DGX H100, Llama 3 8B, global batch 8, DP 8, no recompute: ZeRO 1 keeps whole 16-bit
    # gradients, ZeRO 2 shards them, and with one microbatch both take the same time. The H100's
    # 81,559 MiB (nvidia-smi / NVML) less the CUDA context, 1,573 MiB (nvidia-smi after
    # torch.ones(1).cuda(), BigScience), is what the job's tensors can take
    capacity, context = 81559 * 2 ** 20, 1573 * 2 ** 20
    g = tp.rail_optimized(1)
    zero1 = training_step(g, "llama-3-8b", Parallelism(tp=1, zero=1), Schedule(8, recompute="none"))
    assert zero1.memory_per_gpu <= capacity < zero1.memory_per_gpu + context        # fits only without it
    assert not zero1.fits and zero1.usable_memory == capacity - context
    kw = dict(model="llama-3-8b", global_batch=8, top=3, tp=1, cp=1, pp=1, vp=1, micro_batch=1, recompute="none",
              zero=(1, 2, 3), sequence_parallel=False, orders="tp-cp-dp-pp")
    p = plan(g, **kw)
    assert p.best.layout.zero == 2 and p.best.result.fits and p.pruned["memory"] == 1
    assert all(row.memory + context <= capacity for row in p.rows)
    # at 2,048 tokens both fit: the same time, the one that holds less (ZeRO 2) first
    short = plan(g, seq_len=2048, **kw)
    first, second = short.rows[:2]
    assert first.step_time == second.step_time and (first.layout.zero, second.layout.zero) == (2, 1)
    assert first.memory < second.memory
