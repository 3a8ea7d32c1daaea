"""flowsolver: what a GPU cluster's network costs you.

Cluster graphs come from :mod:`topologies`; flowsolver routes traffic over them, solves
max-min fair bandwidth sharing and turns the rates into collective and training-step
times. Units everywhere: bytes, seconds, bytes/s.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__

# the public surface, layer by layer; each name loads its module on first use (flowsolver._lazy),
# so `import flowsolver` and `flowsolver --help` start without JAX
__getattr__, __dir__ = lazy_exports(__name__, {
    "._status": ("Status",),
    ".nccl_tests": ("nccl_tests",),
    ".traffic": ("Flows",),
    ".routing": ("POLICIES", "Bottleneck", "LinkTable", "MergedRouting", "RoutingError", "RoutingMatrix", "route",
                 "register_policy"),
    ".solver": ("Allocation", "RateSensitivity", "bucket_size", "fair_rates", "max_min_fair", "rate_sensitivity",
                "trace_count"),
    ".timing": ("Completion", "CompletionSensitivity", "completion_sensitivity", "completion_times", "fair_makespan"),
    ".collectives": ("ALGORITHMS", "NCCL_ALGORITHMS", "OPS", "PROTOCOLS", "Calibration", "CollectiveOptions",
                     "CollectiveResult",
                     "CollectiveStep", "ConcurrentResult", "busbw_factor", "calibrate", "collective",
                     "collective_time", "collective_variants", "concurrent", "register_algorithm"),
    ".training": ("MODELS", "ModelSpec", "Phase", "StepResult", "get_model", "memory_per_gpu", "training_step",
                  "Parallelism", "Schedule"),
    ".traces": ("ReplayResult", "TraceError", "Workload", "read_chakra", "read_simai_workload", "replay",
                "workload_from_step", "write_chakra"),
    "._sweep": ("default_cache_dir", "expand_grid", "sweep"),
    ".upgrade": ("Upgrade", "upgrade_plan", "what_if", "upgrade_cost"),
    "._design": ("Design", "design", "pareto_front"),
    ".planning": ("Plan", "plan"),
    ".reliability": ("Component", "GoodputResult", "JobResponse", "default_components", "goodput", "place_jobs",
                  "placement_slowdowns", "simulate_goodput"),
    ".serving": ("ServeResult", "serve"),
})   # flowsolver.plot and flowsolver.study (matplotlib) load on first use as submodules

if TYPE_CHECKING:   # what the names above are, for type checkers, readers and tests/test_package.py
    from ._status import Status
    from . import nccl_tests
    from .traffic import Flows
    from .routing import (POLICIES, Bottleneck, LinkTable, MergedRouting, RoutingError, RoutingMatrix,
                          register_policy, route)
    from .solver import (Allocation, RateSensitivity, bucket_size, fair_rates, max_min_fair, rate_sensitivity,
                         trace_count)
    from .timing import Completion, CompletionSensitivity, completion_sensitivity, completion_times, fair_makespan
    from .collectives import (ALGORITHMS, NCCL_ALGORITHMS, OPS, PROTOCOLS, Calibration, CollectiveOptions,
                              CollectiveResult,
                              CollectiveStep, ConcurrentResult, busbw_factor, calibrate, collective,
                              collective_time, collective_variants, concurrent, register_algorithm)
    from .training import (MODELS, ModelSpec, Parallelism, Phase, Schedule, StepResult, get_model, memory_per_gpu,
                           training_step)
    from .traces import (ReplayResult, TraceError, Workload, read_chakra, read_simai_workload, replay,
                         workload_from_step, write_chakra)
    from ._sweep import default_cache_dir, expand_grid, sweep
    from .upgrade import Upgrade, upgrade_cost, upgrade_plan, what_if
    from ._design import Design, design, pareto_front
    from .planning import Plan, plan
    from .reliability import (Component, GoodputResult, JobResponse, default_components, goodput, place_jobs,
                           placement_slowdowns, simulate_goodput)
    from .serving import ServeResult, serve

__all__ = [
    "__version__", "Status",
    "Flows",
    "route", "RoutingMatrix", "LinkTable", "MergedRouting", "Bottleneck", "RoutingError", "POLICIES", "register_policy",
    "max_min_fair", "Allocation", "bucket_size", "trace_count", "rate_sensitivity", "RateSensitivity", "fair_rates",
    "completion_times", "Completion", "completion_sensitivity", "CompletionSensitivity", "fair_makespan",
    "collective", "collective_time", "collective_variants", "concurrent", "calibrate", "Calibration", "CollectiveResult",
    "CollectiveOptions",
    "ConcurrentResult", "CollectiveStep",
    "OPS", "ALGORITHMS", "NCCL_ALGORITHMS", "PROTOCOLS", "busbw_factor", "nccl_tests", "register_algorithm",
    "training_step", "Parallelism", "Schedule", "StepResult", "Phase", "ModelSpec", "MODELS", "get_model", "memory_per_gpu",
    "read_chakra", "read_simai_workload", "write_chakra", "workload_from_step", "replay", "ReplayResult", "Workload",
    "TraceError",
    "sweep", "expand_grid", "default_cache_dir",
    "what_if", "upgrade_plan", "Upgrade", "upgrade_cost",
    "design", "Design", "pareto_front",
    "plan", "Plan",
    "goodput", "simulate_goodput", "GoodputResult", "JobResponse", "Component", "default_components", "place_jobs",
    "placement_slowdowns",
    "serve", "ServeResult",
]
