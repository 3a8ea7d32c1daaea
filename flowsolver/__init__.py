"""flowsolver: what a GPU cluster's network costs you.

Cluster graphs come from :mod:`topologies`; flowsolver routes traffic over them, solves
max-min fair bandwidth sharing and turns the rates into collective and training-step
times. Units everywhere: bytes, seconds, bytes/s.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

from .routing import POLICIES, LinkTable, MergedRouting, RoutingError, RoutingMatrix, route  # noqa: E402
from .traffic import Flows  # noqa: E402

__all__ += ["Flows", "route", "RoutingMatrix", "LinkTable", "MergedRouting", "RoutingError", "POLICIES"]
from ._status import Status  # noqa: E402
from .solver import Allocation, max_min_fair  # noqa: E402

__all__ += ["max_min_fair", "Allocation", "Status"]
from .timing import Completion, completion_times  # noqa: E402

__all__ += ["completion_times", "Completion"]
from .collectives import (ALGORITHMS, OPS, CollectiveResult, CollectiveStep, ConcurrentResult,  # noqa: E402
                          collective, collective_variants, concurrent)

__all__ += ["collective", "collective_variants", "concurrent", "CollectiveResult", "ConcurrentResult", "CollectiveStep", "OPS", "ALGORITHMS"]
from .training import MODELS, ModelSpec, Phase, StepResult, get_model, training_step  # noqa: E402

__all__ += ["training_step", "StepResult", "Phase", "ModelSpec", "MODELS", "get_model"]
from ._sweep import default_cache_dir, expand_grid, sweep  # noqa: E402

__all__ += ["sweep", "expand_grid", "default_cache_dir"]


def __getattr__(name):
    # flowsolver.plot and flowsolver.study load on first use (plot needs matplotlib)
    if name in ("plot", "study"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'flowsolver' has no attribute {name!r}")
