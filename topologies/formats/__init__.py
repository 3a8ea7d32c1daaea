"""Machine descriptions in files, one module per format, and :func:`read`, which picks the
reader by the file's content and suffix.

* :mod:`~topologies.formats.node_link`: cluster graphs as networkx node-link JSON
  (:func:`save` / :func:`load`);
* :mod:`~topologies.formats.nccl`: NCCL topology XML (one server: :func:`from_nccl_xml`);
* :mod:`~topologies.formats.astra`: ASTRA-sim analytical network YAML (:func:`from_astra_network`);
* :mod:`~topologies.formats.simai`: SimAI topology files (:func:`from_simai`, :func:`to_simai`).

Every reader owes a bad file one clear error (``_common``: a ``ValueError`` whose one-line
message names the file and the field; sizes and announced counts bounded before allocating:
:func:`read_bytes` reads a file at most its limit, a pipe or a device too).
A new format is a module with its reader plus one :func:`register_reader` call.

>>> import os, tempfile, topologies as tp
>>> path = os.path.join(tempfile.mkdtemp(), "ring")          # no suffix: known by its content
>>> _ = tp.to_simai(tp.torus([4]), path)
>>> len(tp.gpus(read(path)))
4
"""

from __future__ import annotations

import re

from ._common import DuplicateKey, read_bytes, unique_keys
from ._registry import HEAD_BYTES, Reader, ReaderRegistry
from .astra import from_astra_network, parse_simple_yaml
from .nccl import NcclServer, from_nccl_xml
from .node_link import load, save
from .simai import from_simai, to_simai

__all__ = ["read", "register_reader", "reader_names", "Reader", "ReaderRegistry", "HEAD_BYTES",
           "load", "save", "from_nccl_xml", "NcclServer", "from_astra_network", "parse_simple_yaml",
           "from_simai", "to_simai", "unique_keys", "DuplicateKey", "read_bytes"]

_READERS: dict = {}
#: the machine-description formats: ``kind`` ``"cluster"`` (a graph) or ``"server"`` (a ServerModel)
READERS = ReaderRegistry(_READERS, "machine-description")


def register_reader(name: str, reader, *, suffixes=(), sniff=None, kind: str = "cluster",
                    overwrite: bool = False) -> Reader:
    """Make :func:`read` know format ``name``: ``reader(path, **options)`` returns what the
    file holds (a cluster graph for ``kind="cluster"``, a server model for ``"server"``);
    files are known by ``suffixes`` (``".json"``) and/or ``sniff(path, head) -> bool`` on their
    first :data:`HEAD_BYTES` bytes. Built-in formats cannot be replaced; a user's can with
    ``overwrite=True``.

    >>> import os, tempfile, topologies as tp
    >>> _ = register_reader("doc_ring", lambda path: tp.torus([int(open(path).read())]),
    ...                     suffixes=(".ring",), overwrite=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "six.ring")
    >>> _ = open(path, "w").write("6")
    >>> len(tp.gpus(read(path)))
    6
    """
    return READERS.register(name, reader, suffixes=suffixes, sniff=sniff, kind=kind, overwrite=overwrite)


def read(path, *, kind: str | None = None, **options):
    """What the machine-description file at ``path`` holds, read by the format its content
    shows (first bytes) or, failing that, its suffix: node-link JSON, NCCL topology XML (a
    server model), ASTRA-sim network YAML, a SimAI topology file, or a registered format.
    ``kind="cluster"`` (graphs) or ``"server"`` (server models) considers those formats
    only; ``options`` go to the reader (e.g. ``max_bytes=``). A file of no known format is a
    ValueError naming the path and the known formats.

    >>> import os, tempfile, topologies as tp
    >>> path = os.path.join(tempfile.mkdtemp(), "g.json")
    >>> _ = tp.save(tp.fat_tree(4), path)
    >>> read(path).graph["generator"]
    'fat_tree'
    """
    return READERS.read(path, kind=kind, **options)


def reader_names(kind: str | None = None) -> tuple:
    """The formats :func:`read` knows, in the order it tries them (``kind``: those only).

    >>> reader_names("cluster")
    ('node_link_json', 'astra_network', 'simai_topology')
    """
    return READERS.names(kind)


def _text(head: bytes) -> str:
    return head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")


_ASTRA_KEY = re.compile(r"(?m)^[ \t]*(topology|npus_count|bandwidth|latency)[ \t]*:")
# SimAI's header: node_num gpus_per_server nvswitch_num switch_num link_num gpu_type [...]
_SIMAI_HEADER = re.compile(r"[ \t]*\d+[ \t]+\d+[ \t]+\d+[ \t]+\d+[ \t]+\d+[ \t]+\S+([ \t]+\S+)?[ \t]*")

register_reader("node_link_json", load, suffixes=(".json",), kind="cluster",
                sniff=lambda path, head: _text(head).startswith("{"))
register_reader("nccl_topology", from_nccl_xml, suffixes=(".xml",), kind="server",
                sniff=lambda path, head: _text(head).startswith("<") and "<system" in _text(head))
register_reader("astra_network", from_astra_network, suffixes=(".yml", ".yaml"), kind="cluster",
                sniff=lambda path, head: bool(_ASTRA_KEY.search(_text(head))))
register_reader("simai_topology", from_simai, kind="cluster",
                sniff=lambda path, head: bool(_SIMAI_HEADER.fullmatch(_text(head).split("\n", 1)[0].rstrip("\r"))))
_BUILTIN = READERS.builtin = READERS.names()
