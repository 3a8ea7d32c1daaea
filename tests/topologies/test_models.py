"""Model presets against their published sizes."""

import pytest

from flowsolver import MODELS, get_model
from flowsolver.training import ModelSpec


@pytest.mark.parametrize("name,params,active", [
    ("llama-3-8b", 8.0e9, None), ("llama-3-70b", 70.6e9, None), ("llama-3-405b", 405e9, None),
    ("gpt-3-175b", 175e9, None), ("mixtral-8x7b", 46.7e9, 12.9e9)])
def test_presets_have_their_published_sizes(name, params, active):
    # Llama 3 paper, GPT-3 paper, Mixtral paper (total 46.7 B, 12.9 B active per token)
    m = get_model(name)
    assert m.params == pytest.approx(params, rel=0.01)
    if active:
        assert m.active_params == pytest.approx(active, rel=0.01)
    assert set(MODELS) >= {"llama-3-8b", "llama-3-70b", "llama-3-405b", "gpt-3-175b"}


def test_llama_70b_gradients_are_141_gb():
    assert get_model("llama-3-70b").params * 2 == pytest.approx(141e9, rel=0.01)


def test_mixtral_counts_its_experts_apart():
    # 8 experts of 3 x 4096 x 14336 per layer, 32 layers; 2 of them active per token
    m = get_model("mixtral-8x7b")
    assert m.expert_params == 32 * 8 * 3 * 4096 * 14336
    assert m.params - m.active_params == 32 * 6 * 3 * 4096 * 14336
    assert get_model("llama-3-8b").expert_params == 0


def test_model_spec_checks_its_shape():
    with pytest.raises(ValueError, match=r"ModelSpec 'x': layers must be an integer >= 1, got 0"):
        ModelSpec("x", 0, 64, 128, 4, 4, 100)
    with pytest.raises(ValueError, match="heads must divide hidden"):
        ModelSpec("x", 2, 65, 128, 4, 4, 100)
    with pytest.raises(ValueError, match=r"top_k \(3\) must be <= experts \(2\)"):
        ModelSpec("x", 2, 64, 128, 4, 4, 100, experts=2, top_k=3)
    with pytest.raises(ValueError, match="unknown model 'llama-2'; presets: llama-3-8b"):
        get_model("llama-2")
    spec = ModelSpec("x", 2, 64, 128, 4, 4, 100)
    assert get_model(spec) is spec
    # a model file's strings are not booleans: "false" counted the gated MLP's third matrix
    for key, value in (("gated_mlp", "false"), ("tied_embeddings", "no"), ("gated_mlp", 0)):
        with pytest.raises(ValueError, match=rf"ModelSpec 'x': {key} must be True or False, got {value!r}"):
            ModelSpec("x", 2, 64, 128, 4, 4, 100, **{key: value})
    # two matrices of 64 x 128 without the gate, three with it (per layer)
    assert ModelSpec("x", 2, 64, 128, 4, 4, 100, gated_mlp=False).mlp_params == 2 * 64 * 128
