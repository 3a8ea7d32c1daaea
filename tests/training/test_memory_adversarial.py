"""Adversarial checks of memory_breakdown / MemoryOverheads / caching_allocator_reserved (issue
32 review): every figure counted by hand on a tiny model, the terms' sums and maxima, each
term only ever adding memory, the allocator's rule on short sequences, and bad input refused
with an error that names the parameter."""

import itertools
import math

import numpy as np
import pytest

from flowsolver.training import ModelSpec, memory_breakdown, memory_per_gpu, stage_memory
from flowsolver.training._memory import MemoryOverheads, caching_allocator_reserved, check_zero

# h = 8, ffn = 32, 2 heads of 4 (kv 2), vocab 16, 4 tokens, plain MLP, untied:
# attention Q, K, V, O = 4 x 8 x 8 = 256 parameters, MLP 2 x 8 x 32 = 512, each table 16 x 8 = 128
TINY = ModelSpec("tiny", layers=2, hidden=8, ffn=32, heads=2, kv_heads=2, vocab=16, seq_len=4,
                 gated_mlp=False, tied_embeddings=False)
ONE = dict(tp=1, pp=1, dp=2, zero=1, microbatches=1)
PARAMS = 2 * (256 + 512) + 2 * 128          # 1792 on the single stage
OWNED = PARAMS / 2                          # ZeRO 1 over dp = 2
STATES = PARAMS * (2 + 2) + PARAMS * 12 / 2  # bf16 weights and gradients, 12 bytes of Adam sharded
# selective recompute, sequence parallel, tp 1: per token 3 h + h (norms, QKV, FC1 inputs)
# + 2 h + 2 h (Q, attention out; K and V at kv = heads) + 2 ffn (FC1 out, activation), in bf16
LAYER = 2 * 4 * (4 * 8 + 4 * 8 + 2 * 32)    # 1024 bytes per layer
LOSS = 4 * 4 * 16                           # fp32 softmax over the vocabulary, 4 tokens


def test_tiny_model_term_by_term_by_hand():
    (stage,) = memory_breakdown(TINY, **ONE)
    assert stage == {"weights": 2 * PARAMS, "gradients": 2 * PARAMS, "optimizer": 6 * PARAMS,
                     "activations": 2 * LAYER, "loss": LOSS, "embedding": 0.0, "stage_outputs": 0.0,
                     "step": 4 * OWNED - (2 * LAYER + LOSS), "cuda_context": 0.0}
    # the step's fp32 copy (3584) exceeds the activations (2304): the stage needs the copy
    assert memory_per_gpu(TINY, **ONE) == STATES + 4 * OWNED == 21504


def test_dropout_grows_activations_but_the_step_copy_still_sets_the_peak():
    (stage,) = memory_breakdown(TINY, dropout=True, **ONE)
    mask = 2 * 4 * 8                                   # two 1-byte masks of s h per layer
    assert stage["activations"] == 2 * (LAYER + mask)
    assert stage["embedding"] == 4 * 8                 # the embedding's own 1-byte mask
    assert stage["step"] == 4 * OWNED - (2 * (LAYER + mask) + LOSS + 4 * 8)
    assert stage_memory(TINY, dropout=True, **ONE) == stage_memory(TINY, **ONE) == (21504,)


def test_embedding_norm_keeps_its_16_bit_input():
    (stage,) = memory_breakdown(TINY, embedding_norm=True, **ONE)
    assert stage["embedding"] == 2 * 4 * 8


def test_deepspeed_step_replayed_by_hand():
    bucket = 100                                       # elements, 200 bytes at 2 bytes
    view = 256                                         # the largest tensor: FC1, 8 x 32
    # bucket 200 and partition 1792: two segments; the bucket is freed; the fp32 check copy
    # (1024) and the fp64 norm copy (2048) do not fit the cached 200: two more segments; the
    # flat partition (1792) splits the cached 2048; its fp32 copy (3584) fits nothing
    reserved = 200 + 1792 + 4 * view + 8 * view + 4 * OWNED
    peak = 2 * OWNED + 2 * OWNED + 4 * OWNED           # partition + flat + fp32 copy
    over = MemoryOverheads(deepspeed_zero=True, reduce_bucket=bucket, reserved=True, cuda_context=1000)
    (stage,) = memory_breakdown(TINY, overheads=over, **ONE)
    assert stage["step"] == reserved == 8648
    assert stage["cuda_context"] == 1000
    assert stage_memory(TINY, overheads=over, **ONE) == (STATES + 2 * LAYER + LOSS + reserved + 1000,)
    (plain,) = memory_breakdown(TINY, overheads=MemoryOverheads(deepspeed_zero=True, reduce_bucket=bucket), **ONE)
    assert plain["step"] == peak - (2 * LAYER + LOSS) == 4864      # after the activations are freed
    (megatron,) = memory_breakdown(TINY, overheads=MemoryOverheads(reserved=True), **ONE)
    assert megatron["step"] == 4 * OWNED                             # the fp32 copy, on top


def test_two_stages_with_stage_outputs_by_hand():
    kw = dict(tp=1, pp=2, dp=2, zero=1, microbatches=4, embedding_norm=True)
    first, last = memory_breakdown(TINY, overheads=MemoryOverheads(stage_outputs=True), **kw)
    stage_params = 256 + 512 + 128                     # one layer and one table each
    for s in (first, last):
        assert (s["weights"], s["gradients"], s["optimizer"]) == (2 * stage_params, 2 * stage_params,
                                                                    6 * stage_params)
    # 1F1B: stage 0 holds pp = 2 microbatches, stage 1 one
    assert (first["activations"], first["embedding"], first["stage_outputs"], first["loss"]) == \
        (2 * LAYER, 2 * 2 * 4 * 8, 2 * 2 * 4 * 8, 0)
    assert (last["activations"], last["embedding"], last["stage_outputs"], last["loss"]) == (LAYER, 0, 0, LOSS)
    assert first["step"] == 0                          # 2304 held > the 1792 fp32 copy
    assert last["step"] == 4 * stage_params / 2 - (LAYER + LOSS)
    assert memory_per_gpu(TINY, overheads=MemoryOverheads(stage_outputs=True), **kw) == \
        10 * stage_params + 2 * LAYER + 4 * 2 * 4 * 8 == 11264


GRID = [dict(tp=t, pp=p, dp=8, zero=z, micro_batch=b, microbatches=m, vp=v, recompute=r, sequence_parallel=sp)
        for t, p, z, b, m, v, r, sp in itertools.product((1, 8), (1, 4), (1, 2), (1, 2), (4, 16), (1, 2),
                                                         ("none", "selective", "full"), (True, False))
        if not (v > 1 and p == 1)]
EVERYTHING = dict(dropout=True, embedding_norm=True,
                  overheads=MemoryOverheads(cuda_context=1e9, deepspeed_zero=True, stage_outputs=True, reserved=True))


@pytest.mark.parametrize("extra", [{}, EVERYTHING], ids=["off", "on"])
def test_terms_sum_to_stage_memory_and_the_job_takes_the_largest_stage(extra):
    for kw in GRID[::5]:
        stages = memory_breakdown("gpt-3-175b", **kw, **extra)
        sums = stage_memory("gpt-3-175b", **kw, **extra)
        assert len(stages) == len(sums) == kw["pp"]
        assert tuple(sum(s.values()) for s in stages) == sums
        assert memory_per_gpu("gpt-3-175b", **kw, **extra) == max(sums)
        assert all(v >= 0 and math.isfinite(v) for s in stages for v in s.values())


SWITCHES = [dict(dropout=True), dict(embedding_norm=True), dict(overheads=MemoryOverheads(cuda_context=1.0)),
            dict(overheads=MemoryOverheads(deepspeed_zero=True)), dict(overheads=MemoryOverheads(stage_outputs=True)),
            dict(overheads=MemoryOverheads(reserved=True))]


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: next(iter(s)) if "overheads" not in s else
                         next(k for k, v in vars(s["overheads"]).items() if v not in (0.0, False, 500_000_000)))
def test_turning_a_term_on_never_lowers_any_stage(switch):
    for kw in GRID[::3]:
        base = stage_memory("llama-3-8b", **kw)
        more = stage_memory("llama-3-8b", **kw, **switch)
        assert all(b <= m for b, m in zip(base, more)), kw


def test_default_overheads_equal_none_and_explicit_false():
    kw = dict(tp=2, pp=4, dp=2, microbatches=8, vp=2)
    assert stage_memory("llama-3-8b", **kw) == stage_memory("llama-3-8b", overheads=MemoryOverheads(), **kw) \
        == stage_memory("llama-3-8b", dropout=False, embedding_norm=False, overheads=None, **kw)


def test_breakdown_dicts_are_fresh_copies():
    first = memory_breakdown(TINY, **ONE)
    first[0]["weights"] = -1.0
    assert memory_breakdown(TINY, **ONE)[0]["weights"] == 2 * PARAMS


# --- the caching allocator, by hand -------------------------------------------------------------

def test_allocator_split_then_fill_the_rest():
    # 10 cached; 4 splits it (6 free left); 6 fits the rest exactly; 1 needs a new segment
    events = [("x", 10), ("x", None), ("a", 4), ("b", 6)]
    assert caching_allocator_reserved(events) == (10.0, 10.0)
    assert caching_allocator_reserved(events + [("c", 1)]) == (11.0, 11.0)


def test_allocator_merges_both_neighbours_when_the_middle_block_goes_last():
    events = [("x", 9), ("x", None), ("a", 3), ("b", 3), ("c", 3), ("a", None), ("c", None), ("b", None),
              ("y", 9)]
    assert caching_allocator_reserved(events) == (9.0, 9.0)       # unmerged, 9 would need a new segment


def test_allocator_never_gives_a_segment_back():
    events = [("a", 5), ("a", None), ("b", 7), ("b", None), ("c", 2)]
    assert caching_allocator_reserved(events) == (7.0, 12.0)     # c splits the 5 (smallest fit)


def test_allocator_best_fit_leaves_the_big_block_whole():
    # cached 8 and 4: a request of 3 takes the 4, so 8 still fits; first fit would split the 8
    events = [("a", 8), ("b", 4), ("a", None), ("b", None), ("c", 3), ("d", 8)]
    assert caching_allocator_reserved(events) == (12.0, 12.0)        # first fit: 8 + 4 + 8 = 20


def test_allocator_takes_any_iterable_and_numpy_sizes():
    assert caching_allocator_reserved(iter([("a", np.float32(2.0)), ["b", np.int64(3)]])) == (5.0, 5.0)
    assert caching_allocator_reserved([]) == (0.0, 0.0)


@pytest.mark.parametrize("events, error, match", [
    ([("a", -4.0)], ValueError, r"events\[0\]: size must be a finite number of bytes >= 0"),
    ([("a", math.nan)], ValueError, r"events\[0\]: size"),
    ([("a", math.inf)], ValueError, r"events\[0\]: size"),
    ([("a", 10 ** 400)], ValueError, r"events\[0\]: size"),
    ([("a", True)], ValueError, r"events\[0\]: size"),
    ([("a", "4")], ValueError, r"events\[0\]: size"),
    ([("a", 4.0), ("a", 4.0)], ValueError, r"events\[1\]: 'a' is allocated already"),
    ([("b", None)], ValueError, r"events\[0\]: 'b' is not allocated"),
    ([("a", 1.0), ("a", None), ("a", None)], ValueError, r"events\[2\]: 'a' is not allocated"),
    ([("a",)], ValueError, r"events\[0\] must be a \(key, size\) pair"),
    (["ab"], ValueError, r"events\[0\] must be a \(key, size\) pair"),
    ([(["k"], 4.0)], TypeError, r"events\[0\]: the key must be hashable"),
    (None, TypeError, "events must be an iterable"),
    (5, TypeError, "events must be an iterable"),
])
def test_allocator_refuses_bad_events(events, error, match):
    with pytest.raises(error, match=match):
        caching_allocator_reserved(events)


# --- bad input to the memory functions ----------------------------------------------------------

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, 10 ** 400, "1", None, True, np.bool_(True)])
def test_cuda_context_must_be_finite_bytes(value):
    with pytest.raises(ValueError, match="cuda_context must be a finite number of bytes >= 0"):
        MemoryOverheads(cuda_context=value)


def test_overheads_take_numpy_scalars_as_plain_numbers():
    over = MemoryOverheads(cuda_context=np.float32(2.0), reduce_bucket=np.int64(7))
    assert (over.cuda_context, over.reduce_bucket) == (2.0, 7)
    assert type(over.reduce_bucket) is int


@pytest.mark.parametrize("value", [0, -1, 2.5, 2.0, math.nan, True, "5", None])
def test_reduce_bucket_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match="reduce_bucket must be an integer number of elements >= 1"):
        MemoryOverheads(reduce_bucket=value)


FUNCTIONS = [memory_per_gpu, stage_memory, memory_breakdown]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", ["dropout", "embedding_norm", "sequence_parallel"])
@pytest.mark.parametrize("value", ["no", 0.1, 1, None, []])
def test_flags_must_be_booleans(function, name, value):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        function(TINY, **ONE, **{name: value})


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("keywords, match", [
    (dict(grad_bytes=2.0), "grad_bytes must be 2"),
    (dict(grad_bytes=True), "grad_bytes must be 2"),
    (dict(grad_bytes=8), "grad_bytes must be 2"),
    (dict(zero=1.0), "zero must be 0, 1, 2 or 3"),
    (dict(zero=True), "zero must be 0, 1, 2 or 3"),
    (dict(zero=-1), "zero must be 0, 1, 2 or 3"),
    (dict(tp=0), "tp must be an integer >= 1"),
    (dict(dp=2.0), "dp must be an integer >= 1"),
    (dict(microbatches=True), "microbatches must be an integer >= 1"),
    (dict(cp=3), r"cp \(3\) must divide the sequence of 4 tokens"),
    (dict(cp=8), r"cp \(8\) must divide the sequence of 4 tokens"),
    (dict(ep=2), r"ep \(2\) must divide the model's experts \(1"),
    (dict(pp=3), "pp must divide"),
    (dict(recompute="full", recompute_layers=3), r"recompute_layers must be an integer in 1 \.\.\. 2"),
    (dict(recompute="full", recompute_layers=0), "recompute_layers must be an integer"),
    (dict(attention="FA2"), "attention must be"),
    (dict(recompute="FULL"), "recompute must be"),
    (dict(zero=0, overheads=MemoryOverheads(deepspeed_zero=True)), "zero must be 1 or 2"),
])
def test_bad_arguments_name_the_parameter(function, keywords, match):
    with pytest.raises(ValueError, match=match):
        function(TINY, **{**ONE, **keywords})


def test_numpy_integers_are_accepted_where_ints_are():
    kw = dict(ONE, zero=np.int64(1), grad_bytes=np.int64(2), tp=np.int32(1))
    assert memory_per_gpu(TINY, **kw) == memory_per_gpu(TINY, **ONE)
    assert check_zero(np.int8(3)) == 3 and type(check_zero(np.int8(3))) is int


def test_mixture_of_experts_ep_must_divide_the_experts():
    moe = ModelSpec("moe", layers=2, hidden=8, ffn=32, heads=2, kv_heads=2, vocab=16, seq_len=4, experts=4,
                    top_k=2)
    assert memory_per_gpu(moe, tp=1, pp=1, dp=4, ep=4) > 0
    with pytest.raises(ValueError, match=r"ep \(3\) must divide the model's experts \(4"):
        memory_per_gpu(moe, tp=1, pp=1, dp=6, ep=3)


def test_reserved_step_is_not_monotone_in_the_bucket_by_hand():
    # 512 elements = 1024 bytes: the freed bucket takes the 1024-byte overflow copy; 511 (1022
    # bytes) cannot, so the copy gets a segment of its own and the reserve grows by 1022
    def step(bucket):
        over = MemoryOverheads(deepspeed_zero=True, reduce_bucket=bucket, reserved=True)
        return memory_breakdown(TINY, overheads=over, **ONE)[0]["step"]
    assert step(512) == 1024 + 1792 + 2048 + 3584 == 8448
    assert step(511) == 1022 + 1792 + 1024 + 2048 + 3584 == 9470


@pytest.mark.parametrize("tp", [3, 6, 12])
def test_tp_must_divide_the_heads(tp):
    """Llama 3 8B has 32 attention heads (Llama 3 paper, table 3): a TP rank holds whole heads,
    so tp = 3, 6 or 12 is refused (on 24 GPUs, which they divide) by the memory estimate and by training_step alike."""
    import topologies as tps
    from flowsolver import Parallelism, training_step
    with pytest.raises(ValueError, match="tp .* must divide the attention heads"):
        memory_per_gpu("llama-3-8b", tp=tp, pp=1, dp=1)
    with pytest.raises(ValueError, match="tp .* must divide the attention heads"):
        training_step(tps.rail_optimized(3), "llama-3-8b", Parallelism(tp=tp, pp=1),
                      seq_len=8192)


def test_tp_must_divide_the_kv_heads_as_megatron_core_requires():
    """Megatron-Core divides the query groups (KV heads) over the TP group as it divides the
    heads: llama-3-8b's 8 KV heads at tp 16 was accepted, with 1/2 a KV head's weights a GPU."""
    import topologies as tps
    from flowsolver import Parallelism, training_step
    from flowsolver.planning import layout_space
    with pytest.raises(ValueError, match=r"tp \(16\) must divide .* KV heads \(8\)"):
        memory_per_gpu("llama-3-8b", tp=16, pp=1, dp=1)
    with pytest.raises(ValueError, match=r"tp \(16\) must divide .* KV heads \(8\)"):
        training_step(tps.rail_optimized(2), "llama-3-8b", Parallelism(tp=16, pp=1))
    from flowsolver import get_model
    space = layout_space(get_model("llama-3-8b"), 16, 16, gpu_memory=1e15, tp=[8, 16], cp=[1], pp=[1],
                         micro_batch=[1], zero=[1])
    assert {c.tp for c in space.feasible} == {8} and space.pruned["heads"] > 0
