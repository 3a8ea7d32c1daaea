"""Published kernel measurements the compute model is fitted to: GEMM throughput by shape and
precision, flash-attention throughput, achieved HBM bandwidth and power-capped GEMMs.

Nothing here comes from a training run: every figure is a kernel benchmark printed in the
source named beside it, copied verbatim (the printed line is kept in ``verbatim``), so that
opening the URL and searching for the line finds the figure. The fits of
:mod:`flowsolver.training._kernels` read these tables only; tests recompute the fits from
them (``tests/training/test_training_kernels.py``).

Units as printed: TFLOP/s (1e12 FLOP/s), TB/s (1e12 bytes/s); shapes ``(m, n, k)``: an
``m x k`` by ``k x n`` product, ``2 m n k`` FLOPs.
"""

from __future__ import annotations

__all__ = ["GEMM_POINTS", "MAMF", "SUSTAINED_GEMM", "STREAM_TRIAD", "TORCHAO_ROOFLINE", "POWER_CAPPED_GEMM",
           "ATTENTION_POINTS",
           "ATTENTION_SEQ_RAMP", "ATTENTION_HEAD_DIM", "SOURCES"]

#: where each source lives (pinned to a commit where the source is a repository)
SOURCES = {
    "mamf": "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/"
            "accelerator/README.md (section 'Maximum Achievable Matmul FLOPS comparison table'; mamf-finder.py: "
            "torch.mm, mean of 100 iterations after 50 warm-up, best shape of a brute-force sweep)",
    "azure": "https://github.com/Azure/AI-benchmarking-guide/tree/8fd0c6e1bd0f853ef8f0500a3640a7d80a2a92ef/"
             "Azure_Results (ND_A100_v4 / ND_H100_v5 / ND_H200_v5_results.md, 'GEMM CuBLASLt': random "
             "initialization, 10,000 warm-up iterations; 'HBM Bandwidth': BabelStream)",
    "azure-gb200": "https://github.com/samuel-bohman/AI-benchmarking-guide/blob/"
                   "3862f8f47c7a8293981a9c0a3699c7531a13b09b/Azure_Results/ND_GB200_v6_results.md (Azure's "
                   "GB200 page, carried by this fork of Azure/AI-benchmarking-guide)",
    "xla": "https://github.com/tensorflow/tensorflow/blob/372d578bb861cc5804e56d37d93aec931a59762c/third_party/xla/"
           "xla/service/gpu/model/matmul_interpolator_data.h (OpenXLA's measured matmul table, key sm_90 = H100, "
           "'bf16xbf16->bf16' FLOP/s)",
    "torchao": "https://github.com/pytorch/ao/blob/36027d82d1ad9949597ea16002ff4940374b1b94/torchao/testing/training/"
               "roofline_utils.py (the PyTorch team's float8 roofline: gpu_name_to_specs, "
               "KERNEL_LAUNCH_OVERHEAD_SEC, get_tensor_memory_traffic_ovhd_s)",
    "fbgemm-500w": "https://github.com/pytorch/FBGEMM/pull/2546 (description, 'H100 500W')",
    "fa-1791": "https://github.com/Dao-AILab/flash-attention/pull/1791 (description, 'Results of python "
               "benchmark_attn.py', main branch, H100)",
    "tritonbench-2391": "https://github.com/pytorch/benchmark/pull/2391 (test plan, tritonbench flash_attention, "
                        "H100 SXM, bf16, FA3 paper sizes B x S = 16k, H x D = 2048)",
    "fa-2280": "https://github.com/Dao-AILab/flash-attention/pull/2280 (description, B200, 2CTA backward)",
    "fa2-paper": "Dao 2023, FlashAttention-2 (arXiv 2307.08691), section 4.1 and Figures 6-7 (A100 80GB SXM4); "
                 "the figure values as transcribed in the paper's published summaries",
    "fa3-paper": "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608), Figure 5 (H100 80GB SXM5, BF16 forward, "
                 "16k tokens); values as transcribed in github.com/viktor-shcherb/msc_thesis/blob/"
                 "a6577d10fb277f0ceae4327a2d0b6de951bed76b/references/2024-12-flashattention-3/sections/"
                 "04a_benchmarking-attention.md",
    "te-gemm-profiling": "https://github.com/NVIDIA/TransformerEngine/blob/8f2e63578e103ce1d41503102f47504c129b94d2/"
                         "docs/examples/gemm_profiling/gemm_profiling.rst (benchmarks/gemm/benchmark_gemm.py, 'GEMM "
                         "Benchmark (Model Config Mode) on NVIDIA B300 SXM6 AC', CUDA events, 100 timed iterations; "
                         "'--pre-quantize': the GEMM kernels alone, inputs quantized once)",
    "fa-2605": "https://github.com/Dao-AILab/flash-attention/pull/2605 (description, FA4 forward table, GB200: "
               "MFU% = TFLOPS / 2500)",
    "nvidia-h200": "https://www.nvidia.com/en-us/data-center/h200/ (NVIDIA H200 product page, 'Technical "
                   "Specifications', H200 SXM and H200 NVL columns; footnote 2 on the tensor-core rows: 'With "
                   "sparsity', so the dense figures are half; Max TDP 'Up to 700W' (SXM), 'Up to 600W' (NVL))",
}

# --- GEMM throughput by shape -------------------------------------------------------------------
#: (source, gpu family, precision, m, n, k, TFLOP/s, verbatim). Azure prints m | n | k; XLA's
#: entries are b: 1 (no batch) with the value in FLOP/s (each proto entry, five lines in the
#: file, condensed to one in ``verbatim``).
GEMM_POINTS = (
    # Azure ND A100 v4: "FP16" (A100's dense FP16 and BF16 tensor-core rates are the same, 312 TFLOP/s)
    ("azure", "a100", "bf16", 1024, 1024, 1024, 119.4, "| 1024        | 1024      | 1024     | 119.4                   |"),
    ("azure", "a100", "bf16", 2048, 2048, 2048, 221.8, "| 2048        | 2048      | 2048     | 221.8               |"),
    ("azure", "a100", "bf16", 4096, 4096, 4096, 228.0, "| 4096        | 4096      | 4096     | 228.0                 |"),
    ("azure", "a100", "bf16", 8192, 8192, 8192, 253.7, "| 8192        | 8192      | 8192     | 253.7                |"),
    ("azure", "a100", "bf16", 16384, 16384, 16384, 256.5, "| 16384       | 16384     | 16384    | 256.5                |"),
    ("azure", "a100", "bf16", 1024, 2145, 1024, 132.8, "| 1024        | 2145      | 1024     | 132.8                   |"),
    ("azure", "a100", "bf16", 6144, 12288, 12288, 250.8, "| 6144        | 12288     | 12288    | 250.8                |"),
    ("azure", "a100", "bf16", 802816, 192, 768, 157.8, "| 802816      | 192       | 768      | 157.8                  |"),
    # Azure ND H100 v5: FP8
    ("azure", "h100", "fp8", 1024, 1024, 1024, 274.1, "| 1024        | 1024      | 1024     | 274.1                   |"),
    ("azure", "h100", "fp8", 2048, 2048, 2048, 1011.3, "| 2048        | 2048      | 2048     | 1011.3                |"),
    ("azure", "h100", "fp8", 4096, 4096, 4096, 1216.9, "| 4096        | 4096      | 4096     | 1216.9                 |"),
    ("azure", "h100", "fp8", 8192, 8192, 8192, 1290.1, "| 8192        | 8192      | 8192     | 1290.1                 |"),
    ("azure", "h100", "fp8", 16384, 16384, 16384, 1377.3, "| 16384       | 16384     | 16384    | 1377.3                |"),
    ("azure", "h100", "fp8", 32768, 32768, 32768, 1382.2, "| 32768       | 32768     | 32768    | 1382.2                 |"),
    ("azure", "h100", "fp8", 1024, 2145, 1024, 410.7, "| 1024        | 2145      | 1024     | 410.7                   |"),
    ("azure", "h100", "fp8", 6144, 12288, 12288, 1351.4, "| 6144        | 12288     | 12288    | 1351.4                 |"),
    ("azure", "h100", "fp8", 802816, 192, 768, 663.8, "| 802816      | 192       | 768      | 663.8                  |"),
    # Azure ND H200 v5: FP8
    ("azure", "h200", "fp8", 1024, 1024, 1024, 290.8, "| 1024        | 1024      | 1024     | 290.8                  |"),
    ("azure", "h200", "fp8", 2048, 2048, 2048, 1013.4, "| 2048        | 2048      | 2048     | 1013.4                 |"),
    ("azure", "h200", "fp8", 4096, 4096, 4096, 1249.1, "| 4096        | 4096      | 4096     | 1249.1                 |"),
    ("azure", "h200", "fp8", 8192, 8192, 8192, 1300.6, "| 8192        | 8192      | 8192     | 1300.6                 |"),
    ("azure", "h200", "fp8", 16384, 16384, 16384, 1366.3, "| 16384       | 16384     | 16384    | 1366.3                 |"),
    ("azure", "h200", "fp8", 32768, 32768, 32768, 1349.5, "| 32768       | 32768     | 32768    | 1349.5                 |"),
    ("azure", "h200", "fp8", 1024, 2145, 1024, 407.9, "| 1024        | 2145      | 1024     | 407.9                  |"),
    ("azure", "h200", "fp8", 6144, 12288, 12288, 1318.0, "| 6144        | 12288     | 12288    | 1318.0                 |"),
    ("azure", "h200", "fp8", 802816, 192, 768, 717.5, "| 802816      | 192       | 768      | 717.5                  |"),
    # Azure ND GB200 v6: FP8
    ("azure-gb200", "gb200", "fp8", 1024, 1024, 1024, 349.4, "| 1024        | 1024      | 1024     | 349.4                  |"),
    ("azure-gb200", "gb200", "fp8", 2048, 2048, 2048, 1676.1, "| 2048        | 2048      | 2048     | 1676.1                |"),
    ("azure-gb200", "gb200", "fp8", 4096, 4096, 4096, 2694.7, "| 4096        | 4096      | 4096     | 2694.7                |"),
    ("azure-gb200", "gb200", "fp8", 8192, 8192, 8192, 2781.5, "| 8192        | 8192      | 8192     | 2781.5                 |"),
    ("azure-gb200", "gb200", "fp8", 16384, 16384, 16384, 2819.5, "| 16384       | 16384     | 16384    | 2819.5                 |"),
    ("azure-gb200", "gb200", "fp8", 32768, 32768, 32768, 2755.3, "| 32768       | 32768     | 32768    | 2755.3                 |"),
    ("azure-gb200", "gb200", "fp8", 1024, 2145, 1024, 627.2, "| 1024        | 2145      | 1024     | 627.2                   |"),
    ("azure-gb200", "gb200", "fp8", 6144, 12288, 12288, 2798.7, "| 6144        | 12288     | 12288    | 2798.7                |"),
    ("azure-gb200", "gb200", "fp8", 802816, 192, 768, 1482.5, "| 802816      | 192       | 768      | 1482.5                  |"),
    # OpenXLA sm_90 (H100) bf16, b: 1 entries
    ("xla", "h100", "bf16", 4096, 4096, 4096, 783.328793548203, 'm: 4096 n: 4096 k: 4096 flops { key: "bf16xbf16->bf16" value: 783328793548203 }'),
    ("xla", "h100", "bf16", 2048, 2048, 2048, 631.984593290170, 'm: 2048 n: 2048 k: 2048 flops { key: "bf16xbf16->bf16" value: 631984593290170 }'),
    ("xla", "h100", "bf16", 1024, 2048, 2048, 524.288000000000, 'm: 1024 n: 2048 k: 2048 flops { key: "bf16xbf16->bf16" value: 524288000000000 }'),
    ("xla", "h100", "bf16", 2048, 1024, 2048, 523.265996101364, 'm: 2048 n: 1024 k: 2048 flops { key: "bf16xbf16->bf16" value: 523265996101364 }'),
    ("xla", "h100", "bf16", 4096, 2048, 512, 447.019910074937, 'm: 4096 n: 2048 k: 512 flops { key: "bf16xbf16->bf16" value: 447019910074937 }'),
    ("xla", "h100", "bf16", 4096, 4096, 256, 392.162828341855, 'm: 4096 n: 4096 k: 256 flops { key: "bf16xbf16->bf16" value: 392162828341855 }'),
    ("xla", "h100", "bf16", 512, 4096, 1024, 373.345557719054, 'm: 512 n: 4096 k: 1024 flops { key: "bf16xbf16->bf16" value: 373345557719054 }'),
    ("xla", "h100", "bf16", 4096, 512, 1024, 370.767204419889, 'm: 4096 n: 512 k: 1024 flops { key: "bf16xbf16->bf16" value: 370767204419889 }'),
    ("xla", "h100", "bf16", 1024, 1024, 2048, 349.981037809648, 'm: 1024 n: 1024 k: 2048 flops { key: "bf16xbf16->bf16" value: 349981037809648 }'),
    ("xla", "h100", "bf16", 2048, 512, 2048, 347.714321243523, 'm: 2048 n: 512 k: 2048 flops { key: "bf16xbf16->bf16" value: 347714321243523 }'),
    ("xla", "h100", "bf16", 4096, 1024, 512, 343.707370038412, 'm: 4096 n: 1024 k: 512 flops { key: "bf16xbf16->bf16" value: 343707370038412 }'),
    ("xla", "h100", "bf16", 256, 4096, 2048, 324.589426844014, 'm: 256 n: 4096 k: 2048 flops { key: "bf16xbf16->bf16" value: 324589426844014 }'),
    ("xla", "h100", "bf16", 4096, 256, 2048, 304.694047673098, 'm: 4096 n: 256 k: 2048 flops { key: "bf16xbf16->bf16" value: 304694047673098 }'),
    ("xla", "h100", "bf16", 256, 2048, 4096, 285.873755058572, 'm: 256 n: 2048 k: 4096 flops { key: "bf16xbf16->bf16" value: 285873755058572 }'),
    ("xla", "h100", "bf16", 4096, 512, 512, 238.821580071174, 'm: 4096 n: 512 k: 512 flops { key: "bf16xbf16->bf16" value: 238821580071174 }'),
    ("xla", "h100", "bf16", 512, 2048, 1024, 232.613046793760, 'm: 512 n: 2048 k: 1024 flops { key: "bf16xbf16->bf16" value: 232613046793760 }'),
    ("xla", "h100", "bf16", 1024, 512, 2048, 220.029062295081, 'm: 1024 n: 512 k: 2048 flops { key: "bf16xbf16->bf16" value: 220029062295081 }'),
    ("xla", "h100", "bf16", 256, 1024, 4096, 172.294901155327, 'm: 256 n: 1024 k: 4096 flops { key: "bf16xbf16->bf16" value: 172294901155327 }'),
    ("xla", "h100", "bf16", 1024, 2048, 256, 139.519467775467, 'm: 1024 n: 2048 k: 256 flops { key: "bf16xbf16->bf16" value: 139519467775467 }'),
    ("xla", "h100", "bf16", 2048, 256, 1024, 135.847902834008, 'm: 2048 n: 256 k: 1024 flops { key: "bf16xbf16->bf16" value: 135847902834008 }'),
    ("xla", "h100", "bf16", 256, 512, 4096, 91.678775956284, 'm: 256 n: 512 k: 4096 flops { key: "bf16xbf16->bf16" value: 91678775956284 }'),
    ("xla", "h100", "bf16", 1024, 256, 1024, 68.338965376782, 'm: 1024 n: 256 k: 1024 flops { key: "bf16xbf16->bf16" value: 68338965376782 }'),
    ("xla", "h100", "bf16", 256, 2048, 256, 41.838443890274, 'm: 256 n: 2048 k: 256 flops { key: "bf16xbf16->bf16" value: 41838443890274 }'),
)

#: Maximum Achievable Matmul FLOPS (mle table): (gpu family, precision, MAMF TFLOP/s, spec
#: TFLOP/s, best shape (m, n, k), verbatim row). "H200 is the same" as H100 in bf16 (the row's note).
MAMF = (
    ("a100", "bf16", 271.2, 312, (1024, 10240, 5120),
     "| NVIDIA A100 SXM  |  271.2 |    312 |      86.9% |  1024x10240x5120 | 2.6.0+cu126"),
    ("h100", "bf16", 794.5, 989, (2048, 2048, 13312),
     "| NVIDIA H100 SXM  |  794.5 |    989 |      80.3% |  2048x2048x13312 | 2.7.0+cu126                    | H200 is the same"),
    ("b200", "bf16", 1745.0, 2250, (1792, 16128, 3072),
     "| NVIDIA B200 SXM  | 1745.0 |   2250 |      77.6% |  1792x16128x3072 | 2.7.1+cu128"),
    ("gb200", "bf16", 1822.0, 2500, (4096, 9728, 2048),
     "| NVIDIA GB200 SXM | 1822.0 |   2500 |      72.9% |   4096x9728x2048 | 2.10.0.dev20250916+cu130"),
    ("h200", "fp8", 1453.4, 1979, (1280, 4096, 12032),
     "| NVIDIA H200 SXM  | 1453.4 |   1979 |      73.4% |  1280x4096x12032 | 2.7.1+cu128"),
    ("h100", "fp8", 1402.6, 1979, (1024, 9216, 14336),
     "| NVIDIA H100 SXM  | 1402.6 |   1979 |      70.9% |  1024x9216x14336 | 2.7.0+cu126"),
    ("b200", "fp8", 3432.5, 4500, (15360, 4096, 3072),
     "| NVIDIA B200 SXM  | 3432.5 |   4500 |      76.3% |  15360x4096x3072 | 2.7.1+cu128"),
    ("gb200", "fp8", 3615.6, 5000, (19456, 5120, 1536),
     "| NVIDIA GB200 SXM | 3615.6 |   5000 |      72.3% |  19456x5120x1536 | 2.10.0.dev20250916+cu130"),
)

# --- sustained GEMMs at training shapes (Blackwell: B300; Hopper: H200 NVL) -----------------------
#: Transformer Engine's GEMM benchmark on a B300 (source "te-gemm-profiling"): a layer's 12 GEMMs
#: (4 forward, 4 data-gradient, 4 weight-gradient) of hidden 4096, FFN 16,384 (not gated), 32
#: heads, M = 31 x 512 = 15,872 tokens, inputs pre-quantized, run back to back: precision ->
#: (milliseconds per layer, verbatim). FP8 is per-tensor current scaling ("FP8Current"), the
#: library's "te" recipe; MXFP8's kernels printed beside it: 7.161 ms. FLOPs per layer
#: 3 x 2 x 15,872 x 4096 x (12,288 + 4096 + 16,384 + 16,384) (QKV, proj, FC1, FC2 forward and the
#: two transposed products of each). With MAMF's own B300 rows (ml-engineering at 744d01e1: BF16
#: 1769.0, FP8 3353.3 TFLOP/s, the same SMs and dense peaks as B200, 2250 / 4500) it gives what a
#: Blackwell GPU sustains in training's GEMMs against its MAMF figure.
SUSTAINED_GEMM = {
    "tokens": (15872, "Tokens per step: M = 31 x 512 = 15,872"),
    "shapes": ((4096, 12288), (4096, 4096), (4096, 16384), (16384, 4096)),
    "shapes_verbatim": "QKV Proj 15872x4096x12288 / Attn Out 15872x4096x4096 / MLP Up 15872x4096x16384 / "
                       "MLP Down 15872x16384x4096",
    "bf16": (13.102, "Per-layer total:                   13.102      6.812      8.123      7.161      3.764"),
    "fp8": (6.812, "Per-layer total:                   13.102      6.812      8.123      7.161      3.764"),
    "mamf_b300": {"bf16": (1769.0, "| NVIDIA B300 SXM  | 1769.0 |   2250 |      78.6% | 12288x18432x1024 | 2.9.1+cu130"),
                  "fp8": (3353.3, "| NVIDIA B300 SXM  | 3353.3 |   4500 |      74.5% |   3072x6144x7168 | 2.9.1+cu130")},
    #: the same benchmark, same layer, pre-quantized, on an H200 NVL (the page's "Worked Example: 5B
    #: Model on H200"): ms per layer, BF16 and FP8 current scaling. The NVL is the GH100 die of the
    #: H100 / H200 SXM (132 SMs) at lower clocks and 600 W (source "nvidia-h200": dense BF16 / FP8
    #: 1671 / 3341 TFLOP/s "with sparsity" halved, against the SXM's 1979 / 3958 halved, 989 / 1979).
    #: A cross-check of the Hopper curves (tests/training/test_kernel_hopper_level.py), not a level:
    #: its FP8 share of the peak is the SXM's sustained one, its BF16 share is 14 % under the SXM's
    #: curve (flowsolver/training/_kernels.py, the comment above ``_SAME_AS``)
    "h200_nvl": {"bf16": (31.968, "Per-layer total:                   31.968     16.785     19.099"),
                 "fp8": (16.785, "Per-layer total:                   31.968     16.785     19.099"),
                 "peak_sparse": {"bf16": (1671.0, "BFLOAT16 Tensor Core | 1,979 TFLOPS | 1,671 TFLOPS"),
                                 "fp8": (3341.0, "FP8 Tensor Core | 3,958 TFLOPS | 3,341 TFLOPS")}},
}

# --- achieved HBM bandwidth ---------------------------------------------------------------------
#: BabelStream Triad (TB/s) measured on Azure's VMs (source "azure"), against the datasheet
#: bandwidth of the GPU (A100 80GB 2.039, H100 SXM 3.35, H200 4.8 TB/s).
STREAM_TRIAD = {
    "a100": (1.70, "| Triad | 1.70              |  (ND A100 v4)"),
    "h100": (2.97, "| Triad | 2.97              |  (ND H100 v5)"),
    "h200": (4.15, "| Triad | 4.15              |  (ND H200 v5)"),
}

#: torchao's float8 roofline (source "torchao"), verbatim constants: H100 "Meta's H100 variant"
#: (2.4 TB/s HBM2e) "pct_achievable_mem_bw": 0.92 ("pointwise triton kernels with large inputs ...
#: about 2.2k GBPS"); B300 "pct_achievable_mem_bw": 0.84 ("From measurement on hardware", the only
#: Blackwell measurement); KERNEL_LAUNCH_OVERHEAD_SEC = 0.002 * 0.001 ("a triton kernel with a single
#: element read/write on an H100").
TORCHAO_ROOFLINE = {
    "h100_hbm2e_mem_fraction": (0.92, '"pct_achievable_mem_bw": 0.92,'),
    "blackwell_mem_fraction": (0.84, '"pct_achievable_mem_bw": 0.84,  (NVIDIA B300 SXM6 AC, From measurement on hardware)'),
    "launch_seconds": (0.002 * 0.001, "KERNEL_LAUNCH_OVERHEAD_SEC = 0.002 * 0.001"),
}

# --- GEMMs on a power-capped H100 ---------------------------------------------------------------
#: (gpu family, power cap W, precision, m, n, k, TFLOP/s, verbatim), source "fbgemm-500w": cuBLAS
#: bf16 and FBGEMM's FP8 row-wise GEMM ("fp8 row gemm only": the GEMM without the quantization
#: kernels) on an H100 capped at 500 W. The shapes are printed (m, n, k).
POWER_CAPPED_GEMM = (
    ("h100", 500, "bf16", 8192, 8192, 8192, 585.23, "bf16:                   shape (8192, 8192, 8192)   tflops 585.23   ms 1.879"),
    ("h100", 500, "bf16", 65536, 8192, 7168, 575.12, "bf16:                   shape (65536, 8192, 7168)  tflops 575.12   ms 13.383"),
    ("h100", 500, "bf16", 65536, 3584, 8192, 546.31, "bf16:                   shape (65536, 3584, 8192)  tflops 546.31   ms 7.044"),
    ("h100", 500, "fp8", 8192, 8192, 8192, 1125.51, "fp8 row gemm only:      shape (8192, 8192, 8192)   tflops 1125.51  ms 0.977"),
    ("h100", 500, "fp8", 65536, 8192, 7168, 1082.75, "fp8 row gemm only:      shape (65536, 8192, 7168)  tflops 1082.75  ms 7.108"),
    ("h100", 500, "fp8", 65536, 3584, 8192, 1141.38, "fp8 row gemm only:      shape (65536, 3584, 8192)  tflops 1141.38  ms 3.372"),
)

# --- attention ----------------------------------------------------------------------------------
#: (source, gpu family, kernel, causal, head dim, tokens per sequence, direction, TFLOP/s,
#: verbatim). FLOPs as flash-attention counts them: forward 4 s^2 d heads per sequence (halved
#: with the causal mask), backward 2.5 x forward.
ATTENTION_POINTS = (
    ("fa-1791", "h100", "fa2", False, 128, 8192, "fwd", 369.9, "Fav2 fwd: 2.972ms, 369.9 TFLOPS"),
    ("fa-1791", "h100", "fa2", False, 128, 8192, "bwd", 290.6, "Fav2 bwd: 9.460ms, 290.6 TFLOPS"),
    ("fa-1791", "h100", "fa3", False, 128, 8192, "fwd", 659.1, "Fav3 fwd: 1.668ms, 659.1 TFLOPS"),
    ("fa-1791", "h100", "fa3", False, 128, 8192, "bwd", 553.9, "Fav3 bwd: 4.962ms, 553.9 TFLOPS"),
    ("fa-1791", "h100", "fa2", True, 128, 8192, "fwd", 284.1, "Fav2 fwd: 1.935ms, 284.1 TFLOPS"),
    ("fa-1791", "h100", "fa2", True, 128, 8192, "bwd", 287.1, "Fav2 bwd: 4.788ms, 287.1 TFLOPS"),
    ("fa-1791", "h100", "fa3", True, 128, 8192, "fwd", 630.0, "Fav3 fwd: 0.873ms, 630.0 TFLOPS"),
    ("fa-1791", "h100", "fa3", True, 128, 8192, "bwd", 531.6, "Fav3 bwd: 2.585ms, 531.6 TFLOPS"),
    ("fa-2280", "b200", "fa3", True, 128, 8192, "fwd", 1418.1, "FA Python fwd: 0.775ms, 1418.1 TFLOPS"),
    ("fa-2280", "b200", "fa3", True, 128, 8192, "bwd", 1208.6, "[2CTA] FA Python bwd: 2.274ms, 1208.6 TFLOPS"),
    ("fa2-paper", "a100", "fa2", False, 128, 16384, "fwd", 225.0,
     "up to 225 TFLOPs/s forward (73% of 312 TFLOPs/s)"),
    ("fa2-paper", "a100", "fa2", False, 128, 16384, "bwd", 196.0, "up to 196 TFLOPs/s backward (63%)"),
)

#: How the rate grows with the sequence length: (source, gpu family, kernel, causal, head dim,
#: [(tokens, TFLOP/s)], verbatim). FA3 forward on H100 (tritonbench, B x S = 16k) and FA4's
#: causal forward on GB200 (the only causal sweep found: the kernels' causal ramp).
ATTENTION_SEQ_RAMP = (
    ("tritonbench-2391", "h100", "fa3", False, 128,
     ((512, 430.32), (1024, 517.099), (2048, 565.544), (4096, 590.233), (8192, 614.234), (16384, 620.73)),
     "(32, 16, 512, 128) 430.32 / (16, 16, 1024, 128) 517.099 / (8, 16, 2048, 128) 565.544 / "
     "(4, 16, 4096, 128) 590.233 / (2, 16, 8192, 128) 614.234 / (1, 16, 16384, 128) 620.73"),
    ("fa-2605", "gb200", "fa3", True, 128, ((1024, 829.0), (2048, 1172.0), (4096, 1431.0)),
     "128   True    32   1024    0.17/829/33.2% / 128   True    16   2048   0.23/1172/46.9% / "
     "128   True     8   4096   0.38/1431/57.2%"),
)

#: FA3 forward with the causal mask at 16k tokens by head dimension (source "fa3-paper"):
#: head dim -> (TFLOP/s, verbatim)
ATTENTION_HEAD_DIM = {
    64: (475.0, "For head dim 64 with causal mask (b): FA-3 reaches ~475 TFLOPS/s at 16k seqlen"),
    128: (616.0, "For head dim 128 with causal mask (d): FA-3 reaches ~616 TFLOPS/s at 16k seqlen"),
    256: (642.0, "For head dim 256 with causal mask (f): FA-3 reaches ~642 TFLOPS/s at 16k seqlen"),
}
