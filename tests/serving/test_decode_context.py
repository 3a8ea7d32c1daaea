"""decode_step refuses a context no batch can hold (adv20a F5): it returned 5,516 s for
``decode_step(1, 1e12)`` on Llama 3 8B, whose sequences hold at most 8,192 tokens."""

import warnings

import pytest
import topologies as tp

import flowsolver as fs


@pytest.fixture(scope="module")
def run():
    warnings.simplefilter("ignore")
    return fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=2.0, prompt=128, output=8, tp=8)


def test_context_beyond_the_sequences_model_context_is_refused(run):
    context = fs.MODELS["llama-3-8b"].context                 # 8,192 (max_position_embeddings)
    with pytest.raises(ValueError, match=r"context 1e\+12 tokens .* 1 x llama-3-8b's context of 8192 tokens = 8192"):
        run.decode_step(1, 1e12)
    with pytest.raises(ValueError, match=r"256 x llama-3-8b's context of 8192 tokens = 2097152"):
        run.decode_step(256, 1e15)
    with pytest.raises(ValueError, match="llama-3-8b's context"):
        run.decode_step(3, 3 * context + 1)
    seconds, _ = run.decode_step(3, 3 * context)              # exactly full: allowed
    assert seconds > 0


def test_context_beyond_the_instances_kv_cache_is_refused():
    # a model with no context limit: the instance's KV cache bounds a step's context
    import dataclasses

    warnings.simplefilter("ignore")
    m = dataclasses.replace(fs.MODELS["llama-3-8b"], context=None)
    r = fs.serve(tp.rail_optimized(nodes=1), m, rate=1.0, duration=2.0, prompt=128, output=8, tp=8)
    free = tp.get_gpu("h100_sxm").memory * 0.9 - 2 * m.params / 8     # bf16 weights over TP 8
    # less (fix22c) one layer's activations for the 8,192-token step (2 B x 8,192 x (2 x 4,096 + 3 x 14,336 / 8),
    # the MLP's as large as the attention's (2 x 32 / 8 + 2) x 128 + 4,096) and vLLM's logged runtime memory at TP > 1
    free -= 2 * 8192 * (2 * 4096 + 3 * 14336 / 8) + 3.58 * 1024**3
    held = int(free // (131072 / 8))                                           # 4,327,083 KV tokens a GPU (was 4,575,270)
    with pytest.raises(ValueError, match=f"KV cache of a decoding instance: {held} tokens"):
        r.decode_step(1, held + 1)
    assert r.decode_step(1, held)[0] > 0
