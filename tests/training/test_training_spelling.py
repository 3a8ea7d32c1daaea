"""training_step(graph, model, Parallelism, Schedule, ...): the record's checks, the same
results as one release's keywords (which warn), and ``vp`` / ``micro_batch`` "auto" against
brute force."""

import dataclasses
import itertools
import warnings

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import get_model, step_arguments
from flowsolver.training._pipeline import pass_order, peak_in_flight


@pytest.fixture(scope="module")
def g16():
    return tp.rail_optimized(2)


@pytest.mark.parametrize("field, value, error, words", [
    ("tp", 0, ValueError, "tp must be an integer >= 1"),
    ("dp", 1.5, ValueError, "dp must be an integer"),
    ("vp", "best", ValueError, "vp must be an integer >= 1, 'auto'"),
    ("micro_batch", (), ValueError, "micro_batch: the candidates"),
    ("micro_batch", (1, 0), ValueError, "micro_batch must be an integer >= 1"),
    ("zero", 4, ValueError, "zero must be 0, 1, 2 or 3"),
    ("sequence_parallel", 1, TypeError, "sequence_parallel must be True or False"),
    ("capacity_factor", -1.0, ValueError, "capacity_factor"),
    ("reduce_dtype", "fp16", ValueError, "reduce_dtype must be one of bf16, fp32"),
    ("fp8_param_gather", "yes", TypeError, "fp8_param_gather must be True or False"),
    ("order", "tp-dp", ValueError, "order must be a permutation"),
    ("ranks", 3, TypeError, "ranks must be a sequence"),
])
def test_parallelism_names_the_bad_field(field, value, error, words):
    with pytest.raises(error, match=words):
        Parallelism(**{field: value})


def test_parallelism_normalises_its_fields():
    p = Parallelism(tp=np.int64(2), order="tp-cp-pp-dp", ranks=[1, 0], vp=[1, 2, 2], micro_batch="auto")
    assert (type(p.tp), p.order, p.ranks, p.vp, p.micro_batch) == (int, ("tp", "cp", "pp", "dp"), (1, 0), (1, 2),
                                                                   "auto")
    assert p.open == ("vp", "micro_batch") and Parallelism().open == ()
    hash(Parallelism(tp=2))                      # frozen and hashable


# one release's keywords -> (the model, the Parallelism, the Schedule) spelled by hand
CASES = [
    (dict(model="llama-3-8b", tp=8, global_batch=16, dp_overlap=0.5),
     ("llama-3-8b", Parallelism(tp=8), Schedule(global_batch=16, dp_overlap=0.5)), {}),
    (dict(model="llama-3-8b", tp=2, pp=4, vp=2, micro_batch=2, global_batch=32, recompute="full", recompute_layers=1,
          tp_overlap=0.3, zero=0, order="tp-cp-pp-dp", reduce_dtype="fp32"),
     ("llama-3-8b", Parallelism(tp=2, pp=4, vp=2, micro_batch=2, zero=0, order="tp-cp-pp-dp", reduce_dtype="fp32"),
      Schedule(global_batch=32, recompute="full", recompute_layers=1, tp_overlap=0.3)), {}),
    (dict(model="llama-3-8b", tp=4, cp=2, zero=3, seq_len=16384, compute_efficiency=None, precision="fp8",
          fp8_param_gather=True, sequence_parallel=False, ranks=list(range(15, -1, -1))),
     ("llama-3-8b", Parallelism(tp=4, cp=2, zero=3, fp8_param_gather=True, sequence_parallel=False,
                                ranks=tuple(range(15, -1, -1))), Schedule(compute_efficiency=None, precision="fp8")),
     dict(seq_len=16384)),
]


@pytest.mark.parametrize("old, new, extra", CASES)
def test_the_new_spelling_gives_what_the_keywords_gave_and_only_they_warn(g16, old, new, extra):
    with pytest.warns(DeprecationWarning, match=r"pass parallelism=Parallelism\(.*\) and schedule=Schedule\("):
        before = training_step(g16, **old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = training_step(g16, *new, **extra)
        again = training_step(g16, **step_arguments(**old))
    for r in (after, again):
        assert r.step_time == before.step_time and r.breakdown == before.breakdown
        assert r.stage_memory == before.stage_memory and r.schedule == before.schedule
        assert (r.tp, r.cp, r.pp, r.vp, r.dp, r.micro_batch, r.zero) == \
               (before.tp, before.cp, before.pp, before.vp, before.dp, before.micro_batch, before.zero)


def test_top_k_moves_to_the_model_with_the_same_step():
    g = tp.rail_optimized(4)
    with pytest.warns(DeprecationWarning, match=r"model=dataclasses.replace\(get_model\(model\), top_k=...\)"):
        before = training_step(g, model="mixtral-8x7b", tp=4, ep=2, top_k=1, capacity_factor=1.5)
    spec = dataclasses.replace(get_model("mixtral-8x7b"), top_k=1)
    after = training_step(g, spec, Parallelism(tp=4, ep=2, capacity_factor=1.5))
    assert after.step_time == before.step_time and after.memory_per_gpu == before.memory_per_gpu


def test_defaults_are_the_keywords_defaults(g16):
    with pytest.warns(DeprecationWarning):
        before = training_step(g16, model="llama-3-8b", tp=8)
    after = training_step(g16, "llama-3-8b", Parallelism(tp=8), Schedule())
    assert after.step_time == before.step_time
    # unset: 512 sequences rounded up to dp x micro_batch = 2, TP overlap (tp - 1) / tp
    assert (after.global_batch, after.tp_overlap, after.dp_overlap) == (512, 7 / 8, 1.0)
    # compose fills an unset Schedule the same way
    assert fs.training.compose(after.profile, Schedule()).step_time == after.step_time


def test_mixed_or_unknown_keywords_are_refused(g16):
    with pytest.raises(TypeError, match="tp given beside parallelism="):
        training_step(g16, "llama-3-8b", Parallelism(tp=8), tp=8)
    with pytest.raises(TypeError, match="global_batch given beside schedule="):
        training_step(g16, "llama-3-8b", schedule=Schedule(), global_batch=8)
    with pytest.raises(TypeError, match="unexpected keyword arguments tpp"):
        training_step(g16, "llama-3-8b", tpp=8)
    with pytest.raises(TypeError, match="parallelism must be a flowsolver.Parallelism"):
        training_step(g16, "llama-3-8b", dict(tp=8))
    with pytest.raises(TypeError, match="schedule must be a flowsolver.Schedule"):
        training_step(g16, "llama-3-8b", Parallelism(tp=8), dict(global_batch=8))
    # a Parallelism beside the Schedule's keywords is one migration step: allowed, warned
    with pytest.warns(DeprecationWarning, match=r"schedule=Schedule\(global_batch=...\)"):
        r = training_step(g16, "llama-3-8b", Parallelism(tp=8), global_batch=16)
    assert r.global_batch == 16 and r.tp == 8


def test_auto_picks_the_best_candidate_timed_one_by_one(g16):
    # llama-3-8b: 32 layers on pp = 4 stages -> 4 vp divides 32 (or 34): vp in {1, 2} of 1 - 3;
    # 16 GPUs / (tp 2 x pp 4) -> dp 2, 8 sequences -> 4 per replica: micro_batch in {1, 2, 4} of 1, 2, 4, 8;
    # vp 2 interleaves only with 4 microbatches (a multiple of pp = 4: Megatron-Core's interleaved
    # schedule refuses 2 and 1), micro_batch 1
    r = training_step(g16, "llama-3-8b", Parallelism(tp=2, pp=4, vp=(1, 2, 3), micro_batch="auto"),
                      Schedule(global_batch=8))
    c = r.chosen
    runnable = [(1, 1), (1, 2), (1, 4), (2, 1)]
    assert c.open == ("vp", "micro_batch")
    assert sorted((t.vp, t.micro_batch) for t in c.timed) == runnable
    assert sorted((e.vp, e.micro_batch) for e in c.excluded) == \
        sorted([(3, b) for b in (1, 2, 4, 8)] + [(v, 8) for v in (1, 2)] + [(2, 2), (2, 4)])
    for e in c.excluded:
        assert ("pp x vp" in e.reason and "divide the model's 32 layers" in e.reason) if e.vp == 3 else \
            "global_batch must be a positive multiple of dp x micro_batch = 16" in e.reason if e.micro_batch == 8 \
            else "must be at least pp (4) and a multiple of it" in e.reason
    brute = {(v, b): training_step(g16, "llama-3-8b", Parallelism(tp=2, pp=4, vp=v, micro_batch=b),
                                   Schedule(global_batch=8))
             for v, b in runnable}
    fitting = {k: s for k, s in brute.items() if s.fits}
    best = min(fitting or brute, key=lambda k: (brute[k].step_time, k))
    assert (c.vp, c.micro_batch) == best == (r.vp, r.micro_batch)
    assert r.step_time == brute[best].step_time and r.breakdown == brute[best].breakdown
    for t in c.timed:
        assert t.step_time == brute[(t.vp, t.micro_batch)].step_time
        assert t.fits == brute[(t.vp, t.micro_batch)].fits
    assert "picked vp=" in str(c) and "excluded" in str(c)


def test_auto_without_pipeline_or_batch(g16):
    # pp = 1: only vp = 1 runs; no global batch: 512 (a multiple of dp = 2) for every micro-batch
    with pytest.warns(DeprecationWarning):                  # one release's keywords take "auto" too
        r = training_step(g16, model="llama-3-8b", tp=8, vp="auto", micro_batch="auto")
    assert {t.vp for t in r.chosen.timed} == {1} and r.global_batch == 512
    assert {(e.vp, "it needs pp > 1" in e.reason) for e in r.chosen.excluded} == {(v, True) for v in range(2, 9)}
    assert {t.micro_batch for t in r.chosen.timed} == {1, 2, 4, 8}
    with pytest.raises(ValueError, match="no candidate of vp can run this job"):
        training_step(g16, "llama-3-8b", Parallelism(tp=8, vp=(2, 3)))


@pytest.mark.parametrize("pp, vp, m", [(4, 1, 8), (4, 1, 2), (4, 2, 8), (3, 3, 3), (2, 4, 6), (4, 2, 4)])
def test_peak_in_flight_is_the_walk_of_the_pass_order(pp, vp, m):
    # the memory model's closed form against the trace writer's order, walked pass by pass
    # (interleaved: microbatches a multiple of pp, as Megatron-Core's interleaved schedule takes them)
    weights = np.random.default_rng(pp * 100 + vp * 10 + m).uniform(0.5, 2.0, vp)
    for stage in range(pp):
        held, peak = {}, 0.0
        for d, mb, chunk in pass_order(stage, pp, vp, m):
            if d == "F":
                held[(mb, chunk)] = weights[chunk]
            else:
                del held[(mb, chunk)]           # each backward frees its own forward's activations
            peak = max(peak, sum(held.values()))
        assert not held
        assert peak_in_flight(tuple(weights), stage, pp, vp, m) == pytest.approx(peak, rel=1e-12)


def test_step_arguments_passes_todays_spelling_through():
    p, s = Parallelism(tp=8), Schedule(global_batch=16)
    assert step_arguments(model="llama-3-8b", parallelism=p, schedule=s) == \
        dict(model="llama-3-8b", parallelism=p, schedule=s)
    assert step_arguments(parallelism=p, global_batch=16) == dict(parallelism=p, schedule=s)
    with pytest.raises(TypeError, match="tp given beside parallelism="):
        step_arguments(parallelism=p, tp=4)
    spec = step_arguments(model="mixtral-8x7b", top_k=1)["model"]
    assert (spec.name, spec.top_k) == (get_model("mixtral-8x7b").name, 1)
    with pytest.raises(ValueError, match="top_k and capacity_factor need a mixture-of-experts model"):
        step_arguments(model="llama-3-8b", top_k=2)


def test_fp8_param_gather_needs_an_fp8_step(g16):
    """adv26 F4: fp8_param_gather=True in a bf16 step was taken and changed nothing (no FP8 copy
    of the weights exists to gather; Megatron's --fp8-param-gather needs --fp8-format): refused
    by name, in a step and in plan; with precision="fp8" it halves the linears' gather."""
    from flowsolver import plan
    with pytest.raises(ValueError, match=r"fp8_param_gather=True needs precision='fp8'.*got precision='bf16'"):
        training_step(g16, "llama-3-8b", Parallelism(zero=3, fp8_param_gather=True))
    with pytest.raises(ValueError, match=r"fp8_param_gather=True needs precision='fp8'"):
        plan(g16, model="llama-3-8b", global_batch=32, fp8_param_gather=True)
    fp8 = Schedule(precision="fp8")
    on = training_step(g16, "llama-3-8b", Parallelism(zero=3, fp8_param_gather=True), fp8)
    off = training_step(g16, "llama-3-8b", Parallelism(zero=3), fp8)
    assert on.step_time < off.step_time          # half the linears' gather bytes: a shorter step
