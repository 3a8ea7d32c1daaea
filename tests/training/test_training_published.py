"""Every published training run of ../shared/REFERENCE.md ("Training"), with its published
parallelism and the model's defaults (the same for every row: the kernel tables), within 10 % in
tokens/s per GPU and in MFU, but for the Llama 3 paper's 8,192- and 16,384-GPU runs, which the
default puts 12-14 % fast (docs/accuracy.md, "The kernel tables, the default"): NVIDIA's DGX
Cloud recipe runs the same bf16 405B job at 517 TFLOP/s per GPU, the paper at 400-430, so the
paper's own stack runs its kernels about 20 % slower than NVIDIA's on one job. They are held
between +10 and +25 %: a change that moves them either way is seen. Megatron-Bridge's 70B FP8
row is held 5-15 % slow (KNOWN_FAST's note says why).

Published tokens/s per GPU: the Megatron-Bridge rows give it; the Llama 3 rows give TFLOP/s
per GPU, so tokens/s = TFLOP/s / the model FLOPs per token (Megatron's count, the one the
Megatron-Bridge rows' TFLOP/s use: 744e12 / 14,451 = 51.5 GFLOP per token for Llama 3 8B).
MFU: the Llama 3 rows publish it (bf16 peak); for the FP8 rows it is their TFLOP/s over the
H100's dense FP8 peak, 1979 TFLOP/s. The Llama 3 paper does not publish its number of
virtual stages; the rows take vp = 8, one layer per model chunk: the paper (section 3.3.2)
says the first stage's first model chunk holds the embedding alone, which Megatron's split of
126 + 2 layers on 16 stages gives only with one layer per chunk. Its data parallelism is FSDP
sharding the optimizer state and the gradients, not the weights: zero=2, timed as ZeRO-2 (a
reduce-scatter of the sharded gradients in every microbatch's backward; until 2026-12-06 it was
timed as zero=1, one a step, and the two rows came out 18-19 % fast; with zero=1 the 8,192-GPU
row is still +17.8 %).
Each row runs as published: the Llama 3 8B FP8 row recomputes 5 of its 32 layers fully
(Megatron-Bridge's recompute_num_layers=5 for it). The 8,192- and 16,384-GPU rows take 10-30 s
each: marked slow.
"""

import pytest

import topologies as tp
from flowsolver import get_model, training_step

FP8_PEAK = 1979e12          # H100 SXM dense FP8, datasheet

ROWS = {
    # Llama 3 paper, table 4: TP8 CP1 PP16 DP64, 32 sequences of 8192 per DP rank; its FSDP
    # (zero 2) and its rank order, TP, CP, PP, DP from fastest (section 3.3.2)
    "llama3-405b-8k-gpus": (1024, dict(model="llama-3-405b", tp=8, pp=16, dp=64, vp=8, zero=2,
                                       order="tp-cp-pp-dp", global_batch=64 * 32), dict(tflops=430, mfu=0.43)),
    # same, DP128, 16 sequences per DP rank
    "llama3-405b-16k-gpus": (2048, dict(model="llama-3-405b", tp=8, pp=16, dp=128, vp=8, zero=2,
                                        order="tp-cp-pp-dp", global_batch=128 * 16), dict(tflops=400, mfu=0.41)),
    # same, 128 K context: TP8 CP16 PP16 DP8, 16 M tokens per step = 16 sequences per DP rank
    "llama3-405b-128k": (2048, dict(model="llama-3-405b", tp=8, cp=16, pp=16, dp=8, vp=8, zero=2,
                                    order="tp-cp-pp-dp", seq_len=131072, global_batch=8 * 16),
                         dict(tflops=380, mfu=0.38)),
    # Megatron-Bridge performance summary 25.11, DGX-H100; the 70B and 405B recipes recompute
    # nothing (recompute_granularity = None in NVIDIA-NeMo/Megatron-Bridge 067f987df03b8355b03192d88d70f1709fedf51a
    # src/megatron/bridge/recipes/llama/h100/llama3.py, the configs the H100 FP8 perf recipes start from)
    "mbridge-70b-fp8": (8, dict(model="llama-3-70b", tp=4, pp=8, vp=5, global_batch=128, precision="fp8",
                                recompute="none"), dict(tokens=1602, tflops=719)),
    "mbridge-405b-fp8": (128, dict(model="llama-3-405b", tp=8, pp=8, cp=2, vp=8, global_batch=512,
                                   precision="fp8", recompute="none"), dict(tokens=292, tflops=737)),
    "mbridge-8b-fp8": (1, dict(model="llama-3-8b", dp=8, global_batch=128, precision="fp8",
                                                   recompute="full", recompute_layers=5),
                       dict(tokens=14451, tflops=744)),
}
SLOW = {"llama3-405b-16k-gpus", "llama3-405b-128k", "llama3-405b-8k-gpus"}
#: the rows the default puts fast, and the band they are held in (tokens/s per GPU over published)
KNOWN_FAST = {"llama3-405b-8k-gpus": (1.10, 1.25), "llama3-405b-16k-gpus": (1.10, 1.25),
              # 11.7 % slow since NCCL's own NVLS channel count, 16 on sm90 whatever the GPUs
              # (src/transport/nvls.cc), replaced 2 a GPU: its TP-4 all-reduces (NVLS on 4 GPUs) take
              # 23 % longer under the chunk pipeline's NVLS fill, fitted on 8-GPU nodes (xxrjun's
              # 4-GPU NVLS all-reduce is 22 % slow at 32 MiB the same way: docs/accuracy.md)
              "mbridge-70b-fp8": (0.85, 0.95)}


def _published(kw, pub):
    spec = get_model(kw["model"])
    flops = spec.flops_per_token if "seq_len" not in kw else \
        spec.layers * (spec.layer_linear_flops + spec.layer_attention_flops(kw["seq_len"])) + spec.output_flops
    tokens = pub.get("tokens", pub["tflops"] * 1e12 / flops)
    mfu = pub.get("mfu", pub["tflops"] * 1e12 / FP8_PEAK)
    return tokens, mfu


def _row(name):
    nodes, kw, pub = ROWS[name]
    marks = [pytest.mark.slow] if name in SLOW else []
    return pytest.param(name, nodes, kw, pub, marks=marks, id=name)


@pytest.mark.parametrize("name,nodes,kw,pub", [_row(n) for n in ROWS])
def test_published_training_run_is_reproduced(name, nodes, kw, pub):
    r = training_step(tp.rail_optimized(nodes), **kw)
    tokens, mfu = _published(kw, pub)
    if name in KNOWN_FAST:
        low, high = KNOWN_FAST[name]
        assert low < r.tokens_per_gpu / tokens < high and low < r.mfu / mfu < high
        return
    assert r.tokens_per_gpu == pytest.approx(tokens, rel=0.10)
    assert r.mfu == pytest.approx(mfu, rel=0.10)


def test_the_model_flop_count_is_the_one_the_published_tflops_use():
    # Megatron-Bridge: TFLOP/s / tokens/s per GPU = model FLOPs per token
    for model, tokens, tflops in (("llama-3-8b", 14451, 744), ("llama-3-70b", 1602, 719), ("llama-3-405b", 292, 737)):
        assert get_model(model).flops_per_token == pytest.approx(tflops * 1e12 / tokens, rel=0.01)
