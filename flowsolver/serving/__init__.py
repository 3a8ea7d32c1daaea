"""Serving on the fabric: prefill and decode steps, their communication, KV-cache transfers
between disaggregated pools, and a request stream with continuous batching.

:func:`serve` times a model instance's prefill step (compute-bound: the model's FLOPs at the
GPU's rate) and decode step (memory-bound: weights and KV cache read at the achieved HBM
bandwidth) from its shape (``_steps``), the TP all-reduces, EP all-to-alls and PP sends of
each step with every instance of the pool running them at once on the graph (tables over
message sizes, built once per layout), the KV transfers of a disaggregated pool pair as
max-min fair flows (``_kv``), and runs a Poisson request stream through a discrete-event
simulation with continuous batching (``_events``) whose events cost a table look-up.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "._serve": ("DEFAULT_MEMORY_UTILIZATION", "serve"),
    "._result": ("ServeResult", "request_stream", "MAX_REQUESTS"),
    "._steps": ("InstanceLayout", "StepModel"),
    "._kv": ("KvTransfer", "kv_transfer"),
    "._events": ("Trace", "simulate"),
    "._static": ("StaticBatch",),
})

if TYPE_CHECKING:   # what the names above are, for type checkers, readers and tests/test_package.py
    from ._serve import DEFAULT_MEMORY_UTILIZATION, serve
    from ._result import MAX_REQUESTS, ServeResult, request_stream
    from ._steps import InstanceLayout, StepModel
    from ._kv import KvTransfer, kv_transfer
    from ._events import Trace, simulate
    from ._static import StaticBatch

__all__ = ["serve", "ServeResult", "request_stream", "DEFAULT_MEMORY_UTILIZATION", "InstanceLayout", "StepModel",
           "KvTransfer", "kv_transfer", "Trace", "simulate", "StaticBatch", "MAX_REQUESTS"]
