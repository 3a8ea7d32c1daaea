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

A collective adds NCCL's base latency once (``base_latency=`` overrides).

NCCL's cost model
-----------------
Ring, tree, NVLS, NVLSTree and PAT all-reduce / all-gather / reduce-scatter are timed as
NCCL 2.30's tuner times them (:mod:`._nccl_model`, :mod:`._nccl_timing`): NCCL's latency for the
(algorithm, protocol) plus the size over the bandwidth NCCL grants the protocol (LL,
LL128, Simple factors and per-channel caps by GPU generation and node count), the bus
bandwidth those apply to being the ring's flow solve on the real fabric (NCCL's
``nChannels x bw``); a tree or NVLS is in addition no faster than its own flow solve.
NCCL's latency counts hops inside and between nodes at constants measured on hardware
whose links have the catalogue's latencies; where the graph's paths are slower (a machine
file's latencies, an edited graph), each counted hop costs at least its kind's slowest path:
``max(0, min(path - constant, path's excess over the catalogue))`` is added per hop
(:func:`._nccl_timing.path_excess`, :attr:`CollectiveStep.slow_paths`). Catalogue graphs have no
such path: their times are NCCL's.
Channels are NCCL's: the ones it runs (:func:`nccl_channels`) and its graph's, which its tuner's
per-channel caps count (:func:`nccl_graph_channels`). ``algorithm="auto"`` and ``protocol="auto"``
take NCCL's argmin among what NCCL runs (``NCCL_ALGORITHMS``); ``candidates="all"`` adds
the algorithms NCCL lacks, timed by the per-step model above. ``step_latency=`` turns the
cost model off (a pure alpha-beta flow model); :func:`concurrent` uses the per-step model.
:func:`calibrate` fits efficiencies and a latency scale to nccl-tests logs.

Identical steps
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
  servers, else 1; broadcast and reduce: NCCL's channel count, the result's ``channels``, one chain each). Ring ``c`` visits the GPUs of the ``k``-th server starting from local GPU
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
* ``nvls_tree`` (NVLS inside each node, a tree across) and ``pat`` (all-gather /
  reduce-scatter at one rank per node), and ``nvls`` all-gather / reduce-scatter, are NCCL's
  cost model on the ring's flow solve: they have no schedule of their own.
* ``nvls``: NVLink SHARP in-switch reduction on one NVSwitch domain: each GPU sends its buffer
  and its reduced shard up (``n (1 + 1/m)``) and receives its reduced shard and the multicast
  result (the same), at NCCL's NVLS efficiency of the NVLink rate (``NVLS_EFFICIENCY``,
  counted as extra wire bytes).
* ``direct`` (every peer at once) and ``pairwise`` (p-1 shifted exchanges) all-to-all;
  ``binomial`` broadcast / reduce; ``direct`` send/recv.


Modules: ``_nccl`` (ops, NCCL constants), ``_nccl_model`` (NCCL's tuning model),
``_hardware`` (what NCCL sees of the ranks), ``_host`` (the host's floor and overhead),
``_nccl_timing`` (that model on the flow solve),
``_calibrate`` (fits to nccl-tests logs), ``_calibration`` (the fitted model), ``_layout`` (where the ranks sit),
``_trees`` (trees, pipeline, the :class:`Step` value), ``_algorithms`` (the algorithm registry:
:func:`register_algorithm`, ``ALGORITHMS``; built-ins in ``_builtin_algorithms``), ``_schedules`` (one schedule function
per built-in (op, algorithm)), ``_options`` (the public :class:`CollectiveOptions` and the run's
resolved options, built once),
``_bound`` (the pruning lower bound), ``_solve`` (routing and solving steps;
its records ``Job``, ``SolvedStep``, ``Timed``, ``TimedScenario``), ``_results``
(result types), ``_collective`` (:func:`collective`), ``_variants`` (:func:`collective_variants`) and
``_concurrent`` (:func:`concurrent`, on :func:`flowsolver.timing.step_times`; :func:`concurrent_kinds`, several kinds
of lockstep groups solved together).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# names load their module on first use (flowsolver._lazy): the command line reads the
# constants without importing JAX
__getattr__, __dir__ = lazy_exports(__name__, {
    "._calibrate": ("Calibration", "calibrate", "capped_efficiencies"),   # (capped_efficiencies: the CLI's note)
    "._collective": ("collective",),
    "._variants": ("collective_variants",),
    "._concurrent": ("concurrent", "concurrent_kinds"),
    "._channels": ("nccl_channels", "nccl_graph_channels"),
    "._jax": ("collective_time",),
    "._options": ("CollectiveOptions", "checked_collective_options", "check_algorithm", "SizeBelowElement"),   # (check_algorithm: for replay)
    "._algorithms": ("ALGORITHMS", "NCCL_ALGORITHMS", "register_algorithm", "algorithm_of"),   # (algorithm_of: the CLI)
    "._nccl": ("DEFAULT_CHUNK", "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY",
               "NVLS_EFFICIENCY", "OPS", "PROTOCOLS", "busbw_factor", "reduction"),   # (reduction: for the CLI)
    "._results": ("CollectiveResult", "CollectiveStep", "ConcurrentResult"),
    "._sensitivity": ("sensitivity_table",),   # (this and checked_collective_options: for training, not in __all__)
    "._bound": ("Capacities",),                 # (these two: for the plan search's bound, not in __all__)
    "._floor": ("kind_floors",),                # (the plan search's bound too, not in __all__)
    "._trees": ("StepFlows",),
    # (the CLI's --compare checks and reads a log as calibrate does; not in __all__)
    "._calibrate_checks": ("checked_log", "measured_rows"),
    "._calibrate_rows": ("log_ranks", "log_rows", "log_reduction"),
    "._calibrate_model": ("nccl_tests_collective",),
    "._allowed": ("log_choices", "own_algorithms", "setting_choices"),
    "._host": ("HOST_CALL", "TORCH_CALL_OVERHEAD", "log_gpus_per_thread"),
    "._nccl_releases": ("lacking_algorithms",),     # (the CLI's header; not in __all__)
    "._option_values": ("nccl_release",),           # (the CLI's newer-release note; not in __all__)
    "._nccl_timing": ("transfer_of",),              # (the CLI's share of a row's time in transfers)
})

if TYPE_CHECKING:   # what the names above are, for type checkers, readers and tests/test_package.py
    from ._calibrate import Calibration, calibrate, capped_efficiencies
    from ._collective import collective
    from ._variants import collective_variants
    from ._concurrent import concurrent, concurrent_kinds
    from ._channels import nccl_channels, nccl_graph_channels
    from ._host import HOST_CALL, TORCH_CALL_OVERHEAD, log_gpus_per_thread
    from ._nccl_releases import lacking_algorithms
    from ._jax import collective_time
    from ._algorithms import ALGORITHMS, NCCL_ALGORITHMS, algorithm_of, register_algorithm
    from ._options import CollectiveOptions, SizeBelowElement, check_algorithm, checked_collective_options
    from ._nccl_timing import transfer_of
    from ._nccl import (DEFAULT_CHUNK, NCCL_BASE_LATENCY, NCCL_HOP_LATENCY, NVLS_EFFICIENCY, OPS, PROTOCOLS,
                        busbw_factor, reduction)
    from ._results import CollectiveResult, CollectiveStep, ConcurrentResult
    from ._sensitivity import sensitivity_table
    from ._bound import Capacities
    from ._floor import kind_floors
    from ._trees import StepFlows
    from ._calibrate_checks import checked_log, measured_rows
    from ._calibrate_rows import log_ranks, log_reduction, log_rows
    from ._calibrate_model import nccl_tests_collective
    from ._allowed import log_choices, own_algorithms, setting_choices

# the built-in algorithms register themselves (ALGORITHMS' order); no JAX is imported
from . import _builtin_algorithms  # noqa: F401,E402

__all__ = ["register_algorithm", "collective", "collective_variants", "CollectiveOptions", "calibrate", "Calibration", "concurrent", "concurrent_kinds", "CollectiveResult", "ConcurrentResult", "CollectiveStep",
           "OPS", "ALGORITHMS", "NCCL_ALGORITHMS", "nccl_channels", "nccl_graph_channels", "PROTOCOLS", "busbw_factor", "NCCL_BASE_LATENCY", "NCCL_HOP_LATENCY", "NVLS_EFFICIENCY",
           "DEFAULT_CHUNK", "collective_time", "HOST_CALL", "TORCH_CALL_OVERHEAD"]
