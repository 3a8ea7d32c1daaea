"""A prompt longer than token_budget runs as one prefill step (docs/serving.md), so its
activation, not a token_budget step's, is what the engines' profiling takes out of the KV cache
(vLLM without chunked prefill requires max_num_batched_tokens >= max_model_len): adv23 F2, a
100,000-token prompt at token_budget 512 kept 449,633 KV tokens where 100,000 kept 371,908."""

import dataclasses
import warnings

import pytest
import topologies as tp

import flowsolver as fs


@pytest.fixture(scope="module")
def long_llama():
    return dataclasses.replace(fs.MODELS["llama-3-8b"], context=131072)


def _kv(model, prompt, budget):
    g = tp.rail_optimized(nodes=1, server="dgx_h100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fs.serve(g, model, rate=0.5, duration=2.0, prompt=prompt, output=16, tp=1,
                        token_budget=budget).kv_capacity


def test_the_longest_prompt_sets_the_step_the_kv_cache_leaves_room_for(long_llama):
    # the peak step is 100,000 tokens either way: the same activation, the same KV cache
    assert _kv(long_llama, 100_000, 512) == _kv(long_llama, 100_000, 100_000)


def test_a_budget_above_the_prompts_still_sets_the_step(long_llama):
    # prompts of 512 tokens, a 100,000-token budget: the budget's step is the peak
    assert _kv(long_llama, 512, 100_000) == _kv(long_llama, 100_000, 100_000)
    assert _kv(long_llama, 512, 512) > _kv(long_llama, 512, 100_000)
