"""GPU types: compute peaks, memory, HBM bandwidth and power of the GPUs the server models hold
(units: FLOP/s, bytes, bytes/s, W).

The training and serving models read a GPU's peaks and memory from here; the collectives read
only its name (NCCL's generation, :data:`flowsolver.collectives.GPU_GENERATION`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuSpec", "get_gpu"]


@dataclass(frozen=True)
class GpuSpec:
    """A GPU type: dense bf16 peak (FLOP/s), memory (bytes), dense FP8 peak (FLOP/s; 0 for a GPU
    without FP8 tensor cores), HBM bandwidth (``hbm_bandwidth``, bytes/s, the datasheet's peak;
    0: unknown), maximum board power (``tdp``, W; 0: unknown) and ``family``, the kernel tables
    the training model times this GPU's GEMMs, attention and memory-bound work with
    (``"a100"``, ``"h100"``, ``"h200"``, ``"b200"``, ``"gb200"``; ``""``: none, so only the flat
    ``compute_efficiency`` model applies).

    >>> get_gpu("h100_sxm").peak_bf16_flops / 1e12, get_gpu("h100_sxm").peak_fp8_flops / 1e12
    (989.0, 1979.0)
    >>> get_gpu("h200").hbm_bandwidth / 1e12, get_gpu("h200").tdp
    (4.8, 700.0)
    """

    name: str
    peak_bf16_flops: float
    memory: float
    source: str = ""
    peak_fp8_flops: float = 0.0
    hbm_bandwidth: float = 0.0
    tdp: float = 0.0
    family: str = ""

    def __post_init__(self):
        if not self.peak_bf16_flops > 0:
            raise ValueError(f"GpuSpec {self.name!r}: peak_bf16_flops must be > 0 FLOP/s, "
                             f"got {self.peak_bf16_flops!r}")
        if not self.memory > 0:
            raise ValueError(f"GpuSpec {self.name!r}: memory must be > 0 bytes, got {self.memory!r}")
        if not self.peak_fp8_flops >= 0:
            raise ValueError(f"GpuSpec {self.name!r}: peak_fp8_flops must be >= 0 FLOP/s (0: no FP8), "
                             f"got {self.peak_fp8_flops!r}")
        for key in ("hbm_bandwidth", "tdp"):
            if not getattr(self, key) >= 0:
                raise ValueError(f"GpuSpec {self.name!r}: {key} must be >= 0 (0: unknown), got {getattr(self, key)!r}")


# Peaks (dense, no sparsity), memory, HBM bandwidth and power are the vendor figures as the
# ml-engineering book tabulates them with their datasheet links (github.com/stas00/ml-engineering,
# compute/accelerator/README.md at 744d01e18b79512572f64a6bbd8b5f4a725203a7: "TFLOPS comparison
# table", the memory table, the power table), unless a row says otherwise. Memory is the device's
# total as the driver reports it (nvidia-smi / NVML) where a public reading exists: the
# datasheets' "80 GB" is 81,559 MiB on an H100 SXM (85.52e9 bytes; nvidia-smi in
# github.com/NVIDIA/nccl/issues/1264, and modal-labs/modal-client pull 2797, which lists H100
# 81559MiB, A100 80GB 81920MiB, A100 40GB 40960MiB) and "180 GB" 183,359 MiB on a B200 (AWS
# DLAMI developer guide, "Software requirements for P6 instances", nvidia-smi on p6-b200):
# what published runs had to fit in (the Llama 3 paper's 8,192-GPU layout needs ~82 GB).
_MIB = 2.0 ** 20
_GPUS = {
    # H100 SXM5 datasheet: 989 TFLOP/s dense BF16 (1979 with sparsity), FP8 1979 dense
    # (3958 with sparsity), 80 GB HBM3 at 3.35 TB/s, up to 700 W (maximum TDP).
    "h100_sxm": GpuSpec("h100_sxm", 989e12, 81559 * _MIB, "NVIDIA H100 datasheet (SXM5), dense BF16 / FP8", 1979e12,
                        hbm_bandwidth=3.35e12, tdp=700.0, family="h100"),
    # Meta's H100 SXM variant (Grand Teton): "Each H100 GPU is equipped with 96GB HBM2e with 2.4
    # TB/sec peak memory bandwidth" and "the default 500W power limit, although tuning it up to 700W
    # TDP" (pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, b5bcd76c);
    # the same GH100 die and compute peaks as the H100 SXM.
    "h100_sxm_hbm2e": GpuSpec("h100_sxm_hbm2e", 989e12, 96e9,
                              "H100 SXM 96GB HBM2e (Meta Grand Teton, torchtitan benchmarks), dense BF16 / FP8",
                              1979e12, hbm_bandwidth=2.4e12, tdp=700.0, family="h100"),
    # H100 PCIe datasheet: 756 TFLOP/s dense BF16 (1513 with sparsity), FP8 1513 dense (3026
    # with sparsity), 80 GB HBM2e at 2.0 TB/s (mle memory table); 350 W (datasheet; not in the
    # mle power table). No kernel family: its clocks and power differ from the SXM tables.
    # Memory: no public driver reading of the PCIe part was found, so the datasheet's 80 GB as
    # 80e9 bytes (the SXM part's driver total, 81,559 MiB, is 7 % more: the same HBM may read so)
    "h100_pcie": GpuSpec("h100_pcie", 756e12, 80e9, "NVIDIA H100 datasheet (PCIe), dense BF16 / FP8", 1513e12,
                         hbm_bandwidth=2.0e12, tdp=350.0),
    # H200 SXM: the H100's compute (989 BF16, 1979 FP8 dense), 141 GB HBM3e at 4.8 TB/s, 700 W.
    # Memory as the driver reports it: 143,771 MiB (150.75e9 bytes; nvidia-smi 570.158.01 on eight
    # "NVIDIA H200" at a 700 W cap, the SXM part, "0MiB / 143771MiB" each: github.com/sungwon-chae/
    # arxiv_confi, tmp_memo.md at eda3877891fa524b7b210b4e677f803547670143), not the datasheet's 141e9.
    "h200": GpuSpec("h200", 989e12, 143771 * _MIB, "NVIDIA H200 datasheet (SXM), dense BF16 / FP8, 141 GB HBM3e",
                    1979e12, hbm_bandwidth=4.8e12, tdp=700.0, family="h200"),
    # A100 SXM4 80GB datasheet: 312 TFLOP/s dense BF16, 80 GB HBM2e at 2.039 TB/s, 400 W;
    # Ampere has no FP8 tensor cores.
    "a100_sxm": GpuSpec("a100_sxm", 312e12, 81920 * _MIB, "NVIDIA A100 datasheet (SXM4 80GB), dense BF16",
                        hbm_bandwidth=2.039e12, tdp=400.0, family="a100"),
    # A100 SXM4 40GB datasheet: the same 312 TFLOP/s dense BF16 and 400 W, 40 GB HBM2 at
    # 1,555 GB/s (NVIDIA A100 datasheet, "GPU Memory Bandwidth 1,555GB/s" for the 40GB part).
    "a100_40gb": GpuSpec("a100_40gb", 312e12, 40960 * _MIB, "NVIDIA A100 datasheet (SXM4 40GB), dense BF16",
                             hbm_bandwidth=1.555e12, tdp=400.0, family="a100"),
    # DGX B200 datasheet: 72 PFLOP/s FP8 training for 8 GPUs with sparsity -> 4.5 PFLOP/s
    # dense FP8 per GPU -> 2.25 PFLOP/s dense BF16; 1440 GB HBM3e / 8 = 180 GB at 8 TB/s; 1000 W
    # (maximum TGP).
    "b200": GpuSpec("b200", 2.25e15, 183359 * _MIB, "NVIDIA DGX B200 datasheet, per GPU, dense BF16 / FP8", 4.5e15,
                    hbm_bandwidth=8.0e12, tdp=1000.0, family="b200"),
    # GB200 NVL72 spec: 360 PFLOP/s FP16/BF16 and 720 PFLOP/s FP8 with sparsity for 72 GPUs
    # -> 2.5 PFLOP/s dense BF16 and 5 PFLOP/s dense FP8 per GPU; 13.4 TB HBM3e / 72 = 186 GB
    # at 8 TB/s; 1200 W per GPU (maximum power). Memory as NVML reports it, as for the other
    # GPUs: 189,471 MiB (the GPUs' capacity in NVIDIA's DRA driver ResourceSlice of an OCI
    # BM.GPU.GB200-v3.4 node, kubernetes-sigs/dranet f258477
    # examples/oci_oke_examples/BM.GPU.GB200-v3.4/resourceslice-gpu.yaml).
    "gb200": GpuSpec("gb200", 2.5e15, 189471 * _MIB, "NVIDIA GB200 NVL72 spec sheet, per GPU, dense BF16 / FP8", 5e15,
                     hbm_bandwidth=8.0e12, tdp=1200.0, family="gb200"),
}


def get_gpu(gpu: "str | GpuSpec") -> GpuSpec:
    """Look a GPU type up by name (``"h100_sxm"``, ...) or pass a GpuSpec through.

    >>> get_gpu("b200").memory / 2**20      # bytes of HBM, in MiB as nvidia-smi shows them
    183359.0
    """
    if isinstance(gpu, GpuSpec):
        return gpu
    if isinstance(gpu, str) and gpu in _GPUS:
        return _GPUS[gpu]
    raise ValueError(f"unknown gpu {gpu!r}; known: {', '.join(sorted(_GPUS))} (or pass a GpuSpec)")
