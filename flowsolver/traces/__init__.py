"""Workloads from outside: Chakra execution traces and SimAI workload files, replayed on a
cluster graph event by event.

A workload is per rank a DAG of compute and communication nodes (:class:`Workload`);
:func:`replay` runs it on a cluster: a node starts when its dependencies are done, the
communication of all ranks shares the fabric (max-min fair, as
:func:`flowsolver.concurrent`), compute and communication overlap as the DAG allows.
:func:`workload_from_step` turns a :func:`flowsolver.training_step` into one, and
:func:`write_chakra` writes any workload as a Chakra trace. :func:`read` picks the reader for a path by its
content and suffix (:func:`register_reader` adds a format) (for the replay, or for ASTRA-sim). Reading and writing Chakra files needs ``protobuf``
(``pip install 'flowsolver[traces]'``).

The readers bound what a file can make them allocate, before they allocate it: keyword
limits ``max_file_bytes`` (bytes of one file, inflated: :data:`MAX_FILE_BYTES`, 1 GiB),
``max_nodes`` (nodes over all ranks: :data:`MAX_NODES`, 10 million) and ``max_ranks``
(:data:`MAX_RANKS`, 2**20). A file that passes one, or holds a value out of range, is a
:class:`TraceError` (a ValueError) naming the file, the line or node, and the field.
"""

from ._chakra import read_chakra
from ._from_step import workload_from_step
from ._write import write_chakra
from ._replay import DEFAULT_COMPUTE_EFFICIENCY, replay
from ._result import PathNode, ReplayResult
from ._simai import read_simai_workload
from ._readers import read, reader_names, register_reader
from ._schema import MAX_FILE_BYTES, MAX_NODES, MAX_RANKS, SCHEMA_SOURCE, SCHEMA_VERSION, TraceError
from ._workload import Comm, RankTrace, TraceNode, Workload, build_workload

__all__ = ["read", "register_reader", "reader_names", "read_chakra", "read_simai_workload", "write_chakra", "workload_from_step", "replay", "ReplayResult", "PathNode", "DEFAULT_COMPUTE_EFFICIENCY", "build_workload", "Workload", "RankTrace", "TraceNode", "Comm", "TraceError",
           "SCHEMA_VERSION", "SCHEMA_SOURCE", "MAX_FILE_BYTES", "MAX_NODES", "MAX_RANKS"]
