"""kv_bytes, the bytes a cached key or value element takes, has a floor: one bit (adv18b
finding 4: kv_bytes=1e-9 was accepted and gave 9.15e15 tokens of KV cache a rank)."""

import warnings

import pytest

import topologies as tp
import flowsolver as fs


def _run(kv_bytes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)          # a 2 s run is not steady
        return fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=2.0, duration=2.0, prompt=128, output=8, tp=8,
                        kv_bytes=kv_bytes)


@pytest.mark.parametrize("kv_bytes", [1e-9, 0.1, 0.124])
def test_less_than_one_bit_per_cached_value_is_refused_naming_kv_bytes(kv_bytes):
    with pytest.raises(ValueError, match=r"^kv_bytes must be at least 0\.125 bytes \(1 bit\) per cached key or value"):
        _run(kv_bytes)


def test_one_bit_per_cached_value_holds_the_hand_count():
    # Llama 3 8B at TP 8 on an H100 SXM (the catalogue's memory, an input): 0.9 of it less a
    # GPU's eighth of the 8.03e9 bf16 weights, over a GPU's share of the K and V of a token:
    # 2 (K, V) x 32 layers x 8 KV heads x 128 x 1/8 byte / 8 GPUs
    params = 32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 2 * 128256 * 4096
    free = 0.9 * tp.get_gpu("h100_sxm").memory - 2 * params / 8
    # fix22c: less one layer's activations for the 8,192-token step, 2 B x 8,192 x (2 x 4,096 + 3 x 14,336 / 8),
    # and vLLM's logged 3.58 GiB of runtime memory a GPU at TP > 1
    free -= 2 * 8192 * (2 * 4096 + 3 * 14336 / 8) + 3.58 * 1024**3
    per_token = 2 * 32 * 8 * 128 * 0.125 / 8
    assert _run(0.125).kv_capacity == int(free // per_token)
