"""Where the solver's kernels run and what they remember between processes.

Device. ``max_min_fair(..., device="auto")`` keeps small problems on the CPU and sends
large ones to the accelerator: a kernel call on a GPU costs a fixed launch, transfer and
synchronisation time that a few thousand flows never repay, and a training step solves
hundreds of such problems (the first H200 run: a 16,384-GPU Llama-3-405B step took
10.3 s on the GPU against 6.1 s on a 2-core CPU, while a 186,192-flow all-to-all solved
1.45x faster on the GPU than on that machine's 16 cores; ``benchmarks/gpu.py``).
``device="cpu"`` or ``"accelerator"`` forces one side; a ``jax.Device`` names one.

Compilation cache. JAX's persistent compilation cache is on by default, in the user's
cache folder (``$XDG_CACHE_HOME/flowsolver/jax``, else ``~/.cache/flowsolver/jax``), so that
a new process does not recompile what an earlier one compiled. ``FLOWSOLVER_CACHE_DIR``
names another folder, or switches it off (``off``, ``0``, ``none`` or empty); a cache the
user configured in JAX (``jax_compilation_cache_dir``, ``JAX_COMPILATION_CACHE_DIR``) is
left as it is. It is decided once per process, at the first solve. The test suite runs
with it off. JAX bounds the folder's size only with the ``filelock`` package installed
(``jax_compilation_cache_max_size``); the folder is a cache, safe to delete.

Memory mappings. Every program XLA compiles for the CPU keeps about 3.4 memory mappings
while JAX caches it (measured: 200 small jitted functions took a process from 424 to 1,091
mappings, 499 after ``jax.clear_caches()``), and Linux lets a process hold
``vm.max_map_count`` of them (65,530 by default): a long-lived process that compiles some
twenty thousand programs (a notebook sweeping many sizes, an in-process sweep) would
segfault inside XLA's next compile. Each solve therefore checks, at most once every
:data:`MAPS_CHECK_SECONDS`, and drops JAX's in-memory compiled programs once the process
holds more than :data:`MAPS_RELEASE_SHARE` of its limit; later solves recompile what they
use (from the persistent cache when it is on). Where a drop leaves the process above that
share (mappings that are not compiled programs), the next waits until half of what is left
up to the limit is taken again.
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from pathlib import Path

import jax

#: flow-slots x scenarios below which ``device="auto"`` solves on the CPU when an
#: accelerator is the default: the first H200 run (benchmarks/gpu.py, 2026-12-04) had the
#: GPU ahead from fat_tree(12)'s 186 k flows (0.71 M slots) up, and behind end to end on
#: training steps whose problems hold at most tens of thousands of slots
AUTO_CPU_SLOTS = 1 << 17
#: compiles shorter than this are not written to the persistent cache (seconds; JAX's
#: default of 1 s leaves out most of the solver's kernels, which compile in 0.1-1 s)
MIN_COMPILE_SECONDS = 0.05

#: share of ``vm.max_map_count`` past which a solve drops JAX's compiled programs
MAPS_RELEASE_SHARE = 0.5
#: seconds between two counts of the process's memory mappings (a count of 30,000 mappings
#: reads /proc/self/maps in a few milliseconds)
MAPS_CHECK_SECONDS = 2.0

_OFF = ("", "off", "none", "0", "false")
_STATE = {"decided": False, "path": None}
_MAPS = {"last": float("-inf"), "limit": None, "released": 0, "kept": 0.0}


def mapping_count() -> int | None:
    """Memory mappings this process holds (None where there is no /proc/self/maps).

    >>> n = mapping_count()
    >>> n is None or n > 0
    True
    """
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def mapping_limit() -> int | None:
    """Linux's per-process limit on memory mappings, ``vm.max_map_count`` (None: unknown).

    >>> n = mapping_limit()
    >>> n is None or n > 0
    True
    """
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def release_compiled_programs(count=mapping_count, limit=mapping_limit, now=time.monotonic) -> bool:
    """Drop JAX's in-memory compiled programs when the process holds more than
    :data:`MAPS_RELEASE_SHARE` of its mapping limit (checked at most once every
    :data:`MAPS_CHECK_SECONDS`; see the module docstring). Returns whether it dropped them.

    >>> release_compiled_programs(count=lambda: 10, limit=lambda: 65530, now=lambda: 1e12)
    False
    """
    t = now()
    if t - _MAPS["last"] < MAPS_CHECK_SECONDS:
        return False
    _MAPS["last"] = t
    if _MAPS["limit"] is None:
        _MAPS["limit"] = limit() or 0
    held = count() if _MAPS["limit"] else None
    above = max(MAPS_RELEASE_SHARE * _MAPS["limit"], _MAPS["kept"])
    if held is None or held <= above:
        return False
    jax.clear_caches()
    _MAPS["released"] += 1
    # what a drop leaves is not the compiled programs' (the process's own mappings): the next
    # drop waits until half of what is left up to the limit is taken again, not every check
    left = count()
    if left is not None:
        _MAPS["kept"] = left + (_MAPS["limit"] - left) / 2 if left > MAPS_RELEASE_SHARE * _MAPS["limit"] else 0.0
    return True


def cache_folder(environ=None) -> Path | None:
    """The folder the compilation cache goes to (None: off), from ``environ`` (default
    ``os.environ``).

    >>> cache_folder({"FLOWSOLVER_CACHE_DIR": "off"}) is None
    True
    >>> cache_folder({"XDG_CACHE_HOME": "/tmp/c"}).as_posix()
    '/tmp/c/flowsolver/jax'
    >>> cache_folder({"HOME": "/home/me"}).as_posix()
    '/home/me/.cache/flowsolver/jax'
    """
    env = os.environ if environ is None else environ
    if "FLOWSOLVER_CACHE_DIR" in env:
        value = env["FLOWSOLVER_CACHE_DIR"].strip()
        return None if value.lower() in _OFF else Path(os.path.expanduser(value))
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "flowsolver" / "jax"


def ensure_compilation_cache() -> Path | None:
    """Turn JAX's persistent compilation cache on in :func:`cache_folder` the first time it
    is called in a process (unless it is off, or JAX already has a cache folder); returns
    the folder in use (None: none)."""
    if _STATE["decided"]:
        return _STATE["path"]
    _STATE["decided"] = True
    own = jax.config.jax_compilation_cache_dir
    if own:
        _STATE["path"] = Path(own)
        return _STATE["path"]
    path = cache_folder()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:          # a read-only home: run without a cache rather than fail a solve
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      min(MIN_COMPILE_SECONDS, jax.config.jax_persistent_cache_min_compile_time_secs))
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()      # JAX opens its cache once, at the first compile: open this one
    _STATE["path"] = path
    return path


DEVICES = ("auto", "cpu", "accelerator")


def placement(device, slots: int):
    """The context a solve of ``slots`` flow-slots (all scenarios) runs in: the CPU or the
    default device (see the module docstring).

    >>> with placement("auto", 1000):      # a small problem: the CPU
    ...     pass
    """
    if isinstance(device, jax.Device):
        return jax.default_device(device)
    if device not in DEVICES:
        raise ValueError(f"device must be 'auto', 'cpu', 'accelerator' or a jax.Device, got {device!r}")
    accelerated = jax.default_backend() != "cpu"
    if device == "cpu" or (device == "auto" and accelerated and slots < AUTO_CPU_SLOTS):
        return jax.default_device(jax.devices("cpu")[0]) if accelerated else nullcontext()
    if device == "accelerator" and not accelerated:
        raise ValueError("device='accelerator': JAX has no accelerator here (its default backend is the CPU); use "
                         "device='auto' or 'cpu'")
    return nullcontext()


def local_devices() -> tuple:
    """The devices of the platform the solve runs on (the default device's, which
    :func:`placement` may have set to the CPU): what batches and large problems are
    sharded over."""
    chosen = jax.config.jax_default_device
    if chosen is None:
        return tuple(jax.devices())
    return tuple(jax.devices(chosen if isinstance(chosen, str) else chosen.platform))
