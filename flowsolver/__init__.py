"""flowsolver: what a GPU cluster's network costs you.

Cluster graphs come from :mod:`topologies`; flowsolver routes traffic over them, solves
max-min fair bandwidth sharing and turns the rates into collective and training-step
times. Units everywhere: bytes, seconds, bytes/s.
"""

from ._version import __version__  # noqa: E402,F401

# the public surface, layer by layer (each name is re-exported from the module that owns it)
from ._status import Status  # noqa: E402
from . import nccl_tests  # noqa: E402
from .traffic import Flows  # noqa: E402
from .routing import (POLICIES, Bottleneck, LinkTable, MergedRouting, RoutingError, RoutingMatrix,  # noqa: E402
                      route)
from .solver import (Allocation, RateSensitivity, bucket_size, fair_rates, max_min_fair, rate_sensitivity,  # noqa: E402
                     trace_count)
from .timing import Completion, completion_times  # noqa: E402
from ._completion_sensitivity import CompletionSensitivity, completion_sensitivity, fair_makespan  # noqa: E402
from .collectives import (ALGORITHMS, NCCL_ALGORITHMS, OPS, PROTOCOLS, Calibration, CollectiveResult,  # noqa: E402
                          CollectiveStep, ConcurrentResult, busbw_factor, calibrate, collective,
                          collective_time, collective_variants, concurrent)
from .training import (MODELS, ModelSpec, Phase, StepResult, get_model, memory_per_gpu,  # noqa: E402
                       training_step)
from .traces import (ReplayResult, TraceError, Workload, read_chakra, read_simai_workload, replay,  # noqa: E402
                     workload_from_step, write_chakra)
from ._sweep import default_cache_dir, expand_grid, sweep  # noqa: E402
from .upgrade import Upgrade, upgrade_plan, what_if  # noqa: E402
from .goodput import (Component, GoodputResult, JobResponse, default_components, goodput,  # noqa: E402
                      place_jobs, placement_slowdowns, simulate_goodput)

__all__ = [
    "__version__", "Status",
    "Flows",
    "route", "RoutingMatrix", "LinkTable", "MergedRouting", "Bottleneck", "RoutingError", "POLICIES",
    "max_min_fair", "Allocation", "bucket_size", "trace_count", "rate_sensitivity", "RateSensitivity", "fair_rates",
    "completion_times", "Completion", "completion_sensitivity", "CompletionSensitivity", "fair_makespan",
    "collective", "collective_time", "collective_variants", "concurrent", "calibrate", "Calibration", "CollectiveResult",
    "ConcurrentResult", "CollectiveStep",
    "OPS", "ALGORITHMS", "NCCL_ALGORITHMS", "PROTOCOLS", "busbw_factor", "nccl_tests",
    "training_step", "StepResult", "Phase", "ModelSpec", "MODELS", "get_model", "memory_per_gpu",
    "read_chakra", "read_simai_workload", "write_chakra", "workload_from_step", "replay", "ReplayResult", "Workload",
    "TraceError",
    "sweep", "expand_grid", "default_cache_dir",
    "what_if", "upgrade_plan", "Upgrade",
    "goodput", "simulate_goodput", "GoodputResult", "JobResponse", "Component", "default_components", "place_jobs",
    "placement_slowdowns",
]


def __getattr__(name):
    # flowsolver.plot and flowsolver.study load on first use (plot needs matplotlib)
    if name in ("plot", "study"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'flowsolver' has no attribute {name!r}")
