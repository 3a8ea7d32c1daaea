"""NCCL-style collectives on a cluster graph: completion time, algbw, busbw, bottlenecks.

Time model
----------
An algorithm is a sequence of steps; a step is a set of concurrent flows. A step's time is

    latency + transfer,

* ``transfer``: all flows of the step start together and share the links max-min fairly;
  a flow that finishes releases its bandwidth to the others (:func:`flowsolver.completion_times`);
  the step ends with its last flow. Link capacities are the raw rates times each
  technology's measured efficiency from the catalogue (1 where none is known, or where the
  graph has no ``tech``); ``efficiency=`` overrides it (one number, or a dict by tech):
  this is the calibration hook, applied once here and nowhere else.
* ``latency``: NCCL's per-hop software latency for the slowest kind of hop in the step
  (NVLink, PCIe or network; NCCL 2.30 src/graph/tuning.cc, Simple protocol by default) plus
  the largest path latency of the step's flows (sum of link latencies along the path,
  fluid-weighted). ``step_latency=`` replaces it by a fixed alpha per step.

A collective adds NCCL's base latency once (``base_latency=`` overrides). Identical steps
(a ring's 2(p-1) steps, say) are solved once, and the distinct steps of every candidate
algorithm are solved together in one batched call (each step on its own copy of the links,
with its own event clock). Pipelined algorithms (tree all-reduce, ring broadcast / reduce)
move ``chunk``-byte pieces (default 512 KiB, NCCL's Simple step) through their stages and pay
their depth in latencies once, not once per chunk: NCCL keeps 8 chunks in flight per channel.
Sizes follow nccl-tests: all-reduce the per-rank buffer, all-gather / reduce-scatter the
full array, all-to-all the per-rank buffer (``size / p`` to each peer, the self chunk stays
local), broadcast / reduce / send-recv the message. ``busbw = algbw x factor`` with
nccl-tests' factors.

Algorithms (``ALGORITHMS[op]``):

* ``ring``: all-reduce, reduce-scatter, all-gather, and pipelined broadcast / reduce. A ring
  uses ``channels`` rings (default: the NIC count of a server, at most the ranks per server, when the ranks span several
  servers, else 1). Ring ``c`` visits the GPUs of the ``k``-th server starting from local GPU
  ``(c - k) mod m``, so it leaves a server from the GPU whose rail the next server is entered
  on: every cross-server hop but the wrap-around stays on one rail. Hops that change rail
  are routed with PXN (over NVLink to the right rail first).
* ``tree``: NCCL's double binary tree all-reduce: two trees, each carrying half the buffer,
  the second the first mirrored (even size) or shifted (odd), so a rank inner in one is a
  leaf in the other; across servers the trees join servers and each server is a chain
  starting at the GPU of the channel's rail. Reduce up and broadcast down are pipelined.
* ``halving_doubling``: Rabenseifner (recursive-halving reduce-scatter, recursive-doubling
  all-gather), power-of-two ranks.
* ``hierarchical``: reduce-scatter inside each server (ring over NVLink), all-reduce of the
  ``1/m`` shards across servers (one ring per local index, i.e. per rail), all-gather inside.
* ``nvls``: NVLink SHARP in-switch reduction on one NVSwitch domain: each GPU sends its buffer
  and its reduced shard up (``n (1 + 1/m)``) and receives its reduced shard and the multicast
  result (the same), at NCCL's NVLS efficiency of the NVLink rate (``NVLS_EFFICIENCY``,
  counted as extra wire bytes).
* ``direct`` (every peer at once) and ``pairwise`` (p-1 shifted exchanges) all-to-all;
  ``binomial`` broadcast / reduce; ``direct`` send/recv.


Modules: ``_nccl`` (NCCL constants and cost model), ``_layout`` (where the ranks sit),
``_trees`` (trees, pipeline, the :class:`Step` value), ``_schedules`` (one schedule function
per (op, algorithm) in a registry), ``_options`` (the run's options, built once),
``_bound`` (the pruning lower bound), ``_solve`` (routing and solving steps), ``_results``
(result types), ``_collective`` (:func:`collective`, :func:`collective_variants`) and
``_concurrent`` (:func:`concurrent`, on :func:`flowsolver.timing.step_times`).
"""

from ._collective import collective, collective_variants
from ._concurrent import concurrent
from ._jax import collective_time
from ._nccl import (ALGORITHMS, DEFAULT_CHUNK, NCCL_BASE_LATENCY, NCCL_HOP_LATENCY, NVLS_EFFICIENCY, OPS, PROTOCOLS,
                    busbw_factor)
from ._results import CollectiveResult, CollectiveStep, ConcurrentResult

__all__ = ["collective", "collective_variants", "concurrent", "CollectiveResult", "ConcurrentResult", "CollectiveStep",
           "OPS", "ALGORITHMS", "PROTOCOLS", "busbw_factor", "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY", "NVLS_EFFICIENCY",
           "DEFAULT_CHUNK", "collective_time"]
