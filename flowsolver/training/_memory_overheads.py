"""What a training run allocates beyond model states and activations (off by default): the
CUDA context, DeepSpeed's ZeRO 1 / 2 optimizer-step buffers and kept stage outputs, and the
CUDA caching allocator's reserved view, as nvidia-smi shows memory. Used by
:func:`flowsolver.training.memory_breakdown` (``overheads=``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["MemoryOverheads", "CUDA_CONTEXT_A100", "DEEPSPEED_REDUCE_BUCKET", "DEEPSPEED_ZERO_NVIDIA_SMI_A100",
           "FITS_RESERVE", "caching_allocator_reserved", "usable_memory"]


#: CUDA context and loaded kernels of one PyTorch process on an A100 (40 GB) as nvidia-smi shows
#: them after ``torch.ones(1).cuda()``: 1573 MiB (BigScience, train/tr11-176B-ml/chronicles-prequel.md,
#: section "Possible topologies for 200B", February 2022; the same page counts 1271 MiB on a 32 GB V100):
#: https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles-prequel.md
CUDA_CONTEXT_A100 = 1573 * 2 ** 20

#: bytes of a GPU's memory that no allocation of the job can use, kept free by every "does it
#: fit" check (``StepResult.fits``, ``plan``'s pruning, ``training_step``'s ``"auto"`` choice):
#: the process's CUDA context and kernels, :data:`CUDA_CONTEXT_A100`, the one measured figure
#: the library holds. The memory estimates themselves (``memory_per_gpu``, the published-figure
#: checks) stay the allocator's peak without it. With CUDA 11.7's lazy kernel loading (PyTorch's
#: default since) the context is smaller, so on such a stack this is a margin beyond it; NCCL's
#: buffers, cuBLAS workspace and fragmentation are not in it (``plan``'s ``headroom``).
FITS_RESERVE = CUDA_CONTEXT_A100


def usable_memory(gpu_memory: float) -> float:
    """Bytes of a GPU of ``gpu_memory`` bytes a job's tensors can take: less :data:`FITS_RESERVE`.

    >>> round(usable_memory(81559 * 2 ** 20) / 2 ** 20)
    79986
    """
    return float(gpu_memory) - FITS_RESERVE

#: DeepSpeed ZeRO's default ``reduce_bucket_size`` in elements (deepspeed/runtime/zero/constants.py,
#: ZERO_OPTIMIZATION_REDUCE_BUCKET_SIZE_DEFAULT = 500000000, v0.5 to v0.6, February 2022; DeepSpeed's
#: configuration docs, zero_optimization.reduce_bucket_size, default 5e8)
DEEPSPEED_REDUCE_BUCKET = 500_000_000

@dataclass(frozen=True)
class MemoryOverheads:
    """What a run allocates beyond the model states and activations, each term off by default
    (the published tables of the ZeRO paper, Megatron-LM and Korthikanti et al. count neither).

    ``cuda_context``: bytes (finite, >= 0) of the CUDA context and kernels of the process
    (nvidia-smi counts them, PyTorch's ``memory_allocated`` / ``memory_reserved`` do not;
    :data:`CUDA_CONTEXT_A100`). ``deepspeed_zero``: the optimizer step of DeepSpeed's ZeRO stage
    1 / 2 (``stage_1_and_2.py``, February 2022, pipeline path, ``contiguous_gradients`` on by
    default), in order: a reduce bucket of ``reduce_bucket`` elements (an integer >= 1; each
    ``grad_bytes``: 2 for 16-bit gradients, DeepSpeed's case), a contiguous copy of the rank's
    partition of the gradients (``grad_bytes`` per element, freed with the step), the fp16
    overflow check's fp32 copy (``x.float()``) and the gradient norm's fp64 copy
    (``g.double()``) of one gradient tensor at a time (the largest of the stage: the
    vocabulary-parallel embedding on the end stages), the flattened partition (``grad_bytes``)
    and its fp32 copy for the step (this replaces the plain fp32 copy of ``at_step``).
    ``stage_outputs``: DeepSpeed's pipeline engine keeps each in-flight microbatch's output
    until its backward (``pipe_buffers["outputs"]``, partitioned over the TP group when
    ``tp > 1``: ``2 s b h / tp`` bytes); Megatron-Core frees it once sent
    (``deallocate_pipeline_outputs``). ``reserved``: the figure nvidia-smi shows, the caching
    allocator's reserved memory (PyTorch's CUDA semantics notes, "Memory management"): freed
    blocks stay cached, a request takes the smallest cached block that fits (split if larger) or
    a new ``cudaMalloc`` segment (c10/cuda/CUDACachingAllocator.cpp), so the step's buffers come
    on top of the activations' blocks rather than in their place (assumed: each is larger than
    any one activation tensor, as in BLOOM's runs, where the smallest, the 1 GB bucket, exceeds
    the largest, about 0.9 GB: with a smaller ``reduce_bucket`` the step could reuse activation
    blocks and the figure is an upper bound); the step's own sequence is replayed through that
    rule (so the figure is not monotone in ``reduce_bucket``: a bucket as large as a later
    buffer is reused by it). Not modelled: NCCL's buffers (per communicator and channel; the
    channel count comes from NCCL's topology search), cuBLAS workspace, and the fragmentation of
    the activations' own blocks.

    >>> MemoryOverheads().cuda_context, DEEPSPEED_ZERO_NVIDIA_SMI_A100.deepspeed_zero
    (0.0, True)
    """

    cuda_context: float = 0.0
    deepspeed_zero: bool = False
    reduce_bucket: int = DEEPSPEED_REDUCE_BUCKET
    stage_outputs: bool = False
    reserved: bool = False

    def __post_init__(self):
        context = self.cuda_context
        ok = isinstance(context, numbers.Real) and not isinstance(context, (bool, np.bool_))
        try:
            value = float(context) if ok else math.nan
        except OverflowError:               # an int beyond float64
            value = math.inf
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"MemoryOverheads: cuda_context must be a finite number of bytes >= 0, "
                             f"got {self.cuda_context!r}")
        object.__setattr__(self, "cuda_context", value)
        bucket = self.reduce_bucket
        if isinstance(bucket, (bool, np.bool_)) or not isinstance(bucket, numbers.Integral) or bucket < 1:
            raise ValueError(f"MemoryOverheads: reduce_bucket must be an integer number of elements >= 1, "
                             f"got {self.reduce_bucket!r}")
        object.__setattr__(self, "reduce_bucket", int(bucket))
        for name in ("deepspeed_zero", "stage_outputs", "reserved"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"MemoryOverheads: {name} must be True or False, got {getattr(self, name)!r}")


#: A Megatron-DeepSpeed run with ZeRO 1 on A100, measured with nvidia-smi (BLOOM's topology search)
DEEPSPEED_ZERO_NVIDIA_SMI_A100 = MemoryOverheads(cuda_context=CUDA_CONTEXT_A100, deepspeed_zero=True,
                                                 stage_outputs=True, reserved=True)


def caching_allocator_reserved(events) -> tuple:
    """Replay allocations through the CUDA caching allocator's rule and return ``(peak
    allocated, reserved)`` bytes. ``events``: ``(key, size)`` allocates ``size`` bytes under
    ``key``, ``(key, None)`` frees it. A request takes the smallest free cached block that fits
    (splitting off the rest) or a new segment of its size; a freed block merges with free
    neighbours of its own segment only, and no segment is given back (PyTorch's
    c10/cuda/CUDACachingAllocator.cpp; the 2 MiB rounding of large requests is left out).
    A size must be a finite number >= 0; allocating a key that is live, or freeing one that
    is not, is a ``ValueError``.

    >>> caching_allocator_reserved([("a", 4.0), ("a", None), ("b", 3.0), ("c", 2.0)])
    (5.0, 6.0)
    """
    segments, live, now, peak = [], {}, 0.0, 0.0      # a block: [size, in use], kept in address order
    try:
        events = list(events)
    except TypeError:
        raise TypeError(f"events must be an iterable of (key, size) pairs, got {type(events).__name__}") from None
    for n, event in enumerate(events):
        if not isinstance(event, (tuple, list)) or len(event) != 2:
            raise ValueError(f"events[{n}] must be a (key, size) pair, size bytes or None to free, got {event!r}")
        key, size = event
        try:
            hash(key)
        except TypeError:
            raise TypeError(f"events[{n}]: the key must be hashable, got {key!r}") from None
        if size is not None:
            ok = isinstance(size, numbers.Real) and not isinstance(size, (bool, np.bool_))
            try:
                size = float(size) if ok else math.nan
            except OverflowError:
                size = math.inf
            if not math.isfinite(size) or size < 0:
                raise ValueError(f"events[{n}]: size must be a finite number of bytes >= 0 or None (free), "
                                 f"got {event[1]!r}")
            if key in live:
                raise ValueError(f"events[{n}]: {key!r} is allocated already; free it first")
        elif key not in live:
            raise ValueError(f"events[{n}]: {key!r} is not allocated, nothing to free")
        if size is None:
            block = live.pop(key)
            now -= block[0]
            block[1] = False
            blocks = next(seg for seg in segments if any(blk is block for blk in seg))
            i = next(j for j, blk in enumerate(blocks) if blk is block)
            if i + 1 < len(blocks) and not blocks[i + 1][1]:          # merge free neighbours
                block[0] += blocks.pop(i + 1)[0]
            if i > 0 and not blocks[i - 1][1]:
                blocks[i - 1][0] += blocks.pop(i)[0]
            continue
        fits = [(blk[0], s, b) for s, blocks in enumerate(segments) for b, blk in enumerate(blocks)
                if not blk[1] and blk[0] >= size]
        if fits:
            _, s, b = min(fits)
            block, rest = segments[s][b], segments[s][b][0] - size
            block[:] = [size, True]
            if rest > 0:
                segments[s].insert(b + 1, [rest, False])
        else:
            block = [size, True]
            segments.append([block])
        live[key] = block
        now += size
        peak = max(peak, now)
    return peak, float(sum(blk[0] for blocks in segments for blk in blocks))


def _step_events(owned: float, largest: float, grad_bytes: int, over: MemoryOverheads) -> list:
    """The optimizer step's allocations after the backward passes (bytes), in order."""
    fp32_copy = 4.0 * owned if grad_bytes == 2 else 0.0
    if not over.deepspeed_zero:
        return [("fp32 gradients", fp32_copy)]
    view = min(largest, owned)                  # one gradient tensor, within the rank's partition
    return [("bucket", grad_bytes * float(over.reduce_bucket)), ("partition", grad_bytes * owned),
            ("bucket", None),
            ("overflow check", 4.0 * view), ("overflow check", None),
            ("norm", 8.0 * view), ("norm", None),
            ("flat", grad_bytes * owned), ("fp32 gradients", 4.0 * owned), ("flat", None), ("partition", None)]


def _peak_of(events) -> float:
    sizes, now, peak = {}, 0.0, 0.0
    for key, size in events:
        if size is None:
            now -= sizes.pop(key)
        else:
            sizes[key] = size
            now += size
            peak = max(peak, now)
    return peak
