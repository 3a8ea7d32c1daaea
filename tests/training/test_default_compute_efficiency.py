"""DEFAULT_COMPUTE_EFFICIENCY derived as flowsolver/training/_compute.py's comment says: from
Megatron-Bridge 25.11's Llama 3 8B FP8 DGX-H100 row (744 TFLOP/s = 14,451 tokens/s per GPU, 8
GPUs, data parallel only, recompute_num_layers=5 full), the layers' GEMMs at the FP8 peak (1979
TFLOP/s), the logits at the bf16 peak (989), attention at DEFAULT_ATTENTION_EFFICIENCY of the
bf16 peak, taken off first; the 5 recomputed layers run their forward (GEMMs and attention) a
third again. 0.438 since fix19a (0.461 while all 32 layers were charged the attention forward
again)."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import DEFAULT_ATTENTION_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
from flowsolver.training._schedule import resolve_compute

H, KV, FFN, VOCAB, SEQ, LAYERS, RECOMPUTED = 4096, 1024, 14336, 128256, 8192, 32, 5
G = 6 * (H * (H + 2 * KV) + H * H + 3 * H * FFN)          # a layer's weight GEMMs per token
A = 6 * H * SEQ                                            # a layer's causal attention per token
OUT = 6 * VOCAB * H                                        # the logits per token
BF16, FP8 = 989e12, 1979e12                                # H100 SXM dense peaks, datasheet
PUBLISHED = 14451                                          # tokens/s per GPU (744 TFLOP/s)
LAYERS_RUN = LAYERS + RECOMPUTED / 3                       # a recomputed layer's forward: a third


def _at_peak():
    """(GEMM and logits seconds per token at their peaks, attention seconds per token)."""
    return LAYERS_RUN * G / FP8 + OUT / BF16, LAYERS_RUN * A / (DEFAULT_ATTENTION_EFFICIENCY * BF16)


def test_the_default_is_the_published_rows_efficiency_rounded():
    assert (DEFAULT_ATTENTION_EFFICIENCY, 744e12 / PUBLISHED) == (0.62, pytest.approx(51.47e9, rel=1e-3))
    gemms, attention = _at_peak()
    efficiency = gemms / (1 / PUBLISHED - attention)
    assert efficiency == pytest.approx(0.4377, abs=1e-4)
    assert round(efficiency, 2) == DEFAULT_COMPUTE_EFFICIENCY == 0.44
    # "auto" on a GPU without kernel tables is the flat model at it
    assert resolve_compute("auto", tp.get_gpu("h100_pcie")) == 0.44


def test_the_calibration_row_comes_back_at_the_default():
    # the row at the rounded 0.44: compute-bound, its one exposed DP bucket a few ms of a 9 s step,
    # and the compute NCCL's 24 CTAs (of 132 SMs) take beside the hidden rest: the 16 GB
    # reduce-scatter and all-gather, ~40 ms each over NVLink, cost 24/132 x ~80 ms ~ 15 ms (0.16 %)
    gemms, attention = _at_peak()
    bound = 1 / (gemms / DEFAULT_COMPUTE_EFFICIENCY + attention)           # 14,515 tokens/s per GPU
    r = training_step(tp.rail_optimized(1), "llama-3-8b", Parallelism(dp=8),
                      Schedule(128, precision="fp8", recompute="full", recompute_layers=5,
                               compute_efficiency=DEFAULT_COMPUTE_EFFICIENCY))
    assert r.tokens_per_gpu <= bound and r.tokens_per_gpu == pytest.approx(bound, rel=2.5e-3)
    assert r.global_batch * 8192 / r.compute_time / 8 == pytest.approx(bound, rel=1e-3)   # the compute alone
    assert r.tokens_per_gpu == pytest.approx(PUBLISHED, rel=0.01)
