"""Workloads from outside: Chakra execution traces and SimAI workload files, replayed on a
cluster graph event by event.

A workload is per rank a DAG of compute and communication nodes (:class:`Workload`);
:func:`replay` runs it on a cluster: a node starts when its dependencies are done, the
communication of all ranks shares the fabric (max-min fair, as
:func:`flowsolver.concurrent`), compute and communication overlap as the DAG allows.
:func:`workload_from_step` turns a :func:`flowsolver.training_step` into one, and
:func:`write_chakra` writes any workload as a Chakra trace (for the replay, or for ASTRA-sim). Reading and writing Chakra files needs ``protobuf``
(``pip install 'flowsolver[traces]'``).
"""

from ._chakra import read_chakra
from ._from_step import workload_from_step
from ._write import write_chakra
from ._replay import DEFAULT_COMPUTE_EFFICIENCY, replay
from ._result import PathNode, ReplayResult
from ._simai import read_simai_workload
from ._schema import SCHEMA_SOURCE, SCHEMA_VERSION, TraceError
from ._workload import Comm, RankTrace, TraceNode, Workload, build_workload

__all__ = ["read_chakra", "read_simai_workload", "write_chakra", "workload_from_step", "replay", "ReplayResult", "PathNode", "DEFAULT_COMPUTE_EFFICIENCY", "build_workload", "Workload", "RankTrace", "TraceNode", "Comm", "TraceError",
           "SCHEMA_VERSION", "SCHEMA_SOURCE"]
