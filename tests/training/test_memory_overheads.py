"""The terms of memory_breakdown beyond model states and activations (issue 32): each checked
against a hand count, the caching allocator's rule on small sequences, and the defaults
leaving every published-table comparison as it was."""

import pytest

from flowsolver.training import ModelSpec, get_model, stage_memory
from flowsolver.training._memory import (CUDA_CONTEXT_A100, DEEPSPEED_ZERO_NVIDIA_SMI_A100, TERMS, MemoryOverheads,
                                         caching_allocator_reserved, memory_breakdown)

#: a small tied-embedding GPT: attention 4 h^2, plain MLP 2 h ffn per layer
SMALL = ModelSpec("small", layers=2, hidden=1024, ffn=4096, heads=8, kv_heads=8, vocab=32000, seq_len=1024,
                  gated_mlp=False, tied_embeddings=True)


def test_the_allocator_takes_the_smallest_cached_block_that_fits():
    # free cached blocks of 3 and 5: a request of 3 takes the 3, so the next 5 fits the 5
    assert caching_allocator_reserved([("a", 3.0), ("b", 5.0), ("a", None), ("b", None), ("c", 3.0),
                                       ("d", 5.0)]) == (8.0, 8.0)
    # a cached block too small for the request: a new segment; the freed one stays reserved
    assert caching_allocator_reserved([("a", 2.0), ("a", None), ("b", 3.0)]) == (3.0, 5.0)


def test_the_allocator_merges_free_neighbours_within_a_segment_only():
    split = [("x", 4.0), ("x", None), ("a", 1.0), ("b", 1.0), ("a", None), ("b", None)]
    assert caching_allocator_reserved(split + [("c", 4.0)]) == (4.0, 4.0)      # 1 + 1 + 2 merged back into 4
    apart = [("a", 2.0), ("b", 2.0), ("a", None), ("b", None), ("c", 4.0)]    # two segments of 2: no merge
    assert caching_allocator_reserved(apart) == (4.0, 8.0)


def test_the_breakdown_sums_to_the_stage_memory_and_the_new_terms_default_to_zero():
    kw = dict(tp=2, pp=4, dp=4, microbatches=16, recompute="full")
    stages = memory_breakdown("llama-3-8b", **kw)
    assert all(tuple(s) == TERMS for s in stages)
    assert [sum(s.values()) for s in stages] == pytest.approx(stage_memory("llama-3-8b", **kw), rel=1e-12)
    assert all(s[k] == 0 for s in stages for k in ("embedding", "stage_outputs", "cuda_context"))


def test_the_embedding_keeps_its_norm_input_and_dropout_mask_per_microbatch_in_flight():
    m = get_model("llama-3-8b")
    kw = dict(tp=2, pp=2, dp=4, microbatches=16, sequence_parallel=False)
    stages = memory_breakdown(m, embedding_norm=True, dropout=True, **kw)
    # stage 0 holds pp = 2 microbatches; 2 bytes of norm input and 1 of mask per token and hidden value
    assert stages[0]["embedding"] == pytest.approx(2 * m.seq_len * m.hidden * 3, rel=1e-12)
    assert stages[1]["embedding"] == 0
    sp = memory_breakdown(m, embedding_norm=True, **{**kw, "sequence_parallel": True})
    assert sp[0]["embedding"] == pytest.approx(2 * m.seq_len * m.hidden * 2 / 2, rel=1e-12)   # split over tp


def test_deepspeed_keeps_each_in_flight_output_split_over_tp():
    m = get_model("llama-3-8b")
    stages = memory_breakdown(m, tp=2, pp=4, dp=2, microbatches=16, overheads=MemoryOverheads(stage_outputs=True))
    for q in range(3):                                  # 4 - q microbatches in flight, 2 s h / tp bytes each
        assert stages[q]["stage_outputs"] == pytest.approx((4 - q) * 2 * m.seq_len * m.hidden / 2, rel=1e-12)
    assert stages[3]["stage_outputs"] == 0             # the last stage's output is the loss


def test_deepspeed_zero1_step_through_the_caching_allocator():
    # SMALL on one stage, dp 2, ZeRO 1: the rank owns half of all parameters, and its largest
    # gradient view (the tied embedding, 32.8 M > the 29 M owned) is cut to what it owns
    layer = 4 * 1024 ** 2 + 2 * 1024 * 4096
    owned = (2 * layer + 32000 * 1024) / 2
    bucket = 1_000_000
    over = MemoryOverheads(deepspeed_zero=True, reduce_bucket=bucket, reserved=True)
    (stage,) = memory_breakdown(SMALL, tp=1, pp=1, dp=2, microbatches=4, overheads=over)
    # bucket (2 bytes each) and the 16-bit partition; then the fp32 check copy and the fp64 norm
    # copy do not fit the freed bucket: new segments; the flat 16-bit copy and its fp32 copy fit
    # the cached check and norm blocks
    assert stage["step"] == pytest.approx(2 * bucket + 2 * owned + 4 * owned + 8 * owned, rel=1e-12)
    plain = memory_breakdown(SMALL, tp=1, pp=1, dp=2, microbatches=4, overheads=MemoryOverheads(reserved=True))
    assert plain[0]["step"] == pytest.approx(4 * owned, rel=1e-12)     # Megatron's fp32 copy, on top


def test_the_bloom_preset_counts_the_a100_context():
    assert CUDA_CONTEXT_A100 == 1573 * 1024 ** 2
    (stage,) = memory_breakdown(SMALL, tp=1, pp=1, dp=2, overheads=DEEPSPEED_ZERO_NVIDIA_SMI_A100)
    assert stage["cuda_context"] == CUDA_CONTEXT_A100


def test_bad_overheads_are_refused():
    with pytest.raises(ValueError, match="cuda_context"):
        MemoryOverheads(cuda_context=-1.0)
    with pytest.raises(ValueError, match="reduce_bucket"):
        MemoryOverheads(reduce_bucket=-5)
    with pytest.raises(TypeError, match="reserved"):
        MemoryOverheads(reserved="yes")
    with pytest.raises(TypeError, match="overheads must be"):
        stage_memory(SMALL, tp=1, pp=1, dp=2, overheads={"cuda_context": 1.0})
    with pytest.raises(ValueError, match="zero must be 1 or 2"):
        stage_memory(SMALL, tp=1, pp=1, dp=2, zero=3, overheads=MemoryOverheads(deepspeed_zero=True))
