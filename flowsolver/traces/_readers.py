"""The workload readers in one registry: :func:`read` picks Chakra or SimAI (or a registered
format) for a path by its content and suffix."""

from __future__ import annotations

from topologies.formats import Reader, ReaderRegistry

from ._chakra import read_chakra
from ._simai import read_simai_workload

__all__ = ["read", "register_reader", "reader_names"]

_READERS: dict = {}
READERS = ReaderRegistry(_READERS, "workload")


def register_reader(name: str, reader, *, suffixes=(), sniff=None, overwrite: bool = False) -> Reader:
    """Make :func:`read` know workload format ``name``: ``reader(path, **options)`` returns a
    :class:`~flowsolver.traces.Workload`; paths are known by ``suffixes`` (``".txt"``) and/or
    ``sniff(path, head) -> bool`` (``head``: the file's first bytes, ``b""`` for a folder or a
    path that is no file). Built-in formats cannot be replaced; a user's can with
    ``overwrite=True``.

    >>> f = register_reader("doc_empty", lambda path: None, suffixes=(".empty",), overwrite=True)
    >>> f.name, f.suffixes
    ('doc_empty', ('.empty',))
    """
    return READERS.register(name, reader, suffixes=suffixes, sniff=sniff, kind="workload", overwrite=overwrite)


def read(path, **options):
    """The workload at ``path``: a Chakra trace (a folder of ``NAME.<rank>.et[.gz]`` files or
    the ``NAME`` prefix: :func:`read_chakra`), a SimAI workload file (its header line, or a
    ``.txt`` name: :func:`read_simai_workload`) or a registered format, chosen by the path's
    content, then its suffix; ``options`` go to the reader. A path of no known format is a
    ValueError naming it and the known formats.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.md")
    >>> _ = open(path, "w").write("# no workload")
    >>> read(path)
    Traceback (most recent call last):
    ...
    ValueError: ...notes.md: not a workload file of a known format by its content or its suffix (known formats: chakra (by content); simai_workload (.txt))
    """
    return READERS.read(path, **options)


def reader_names() -> tuple:
    """The workload formats :func:`read` knows, in the order it tries them.

    >>> reader_names()
    ('chakra', 'simai_workload')
    """
    return READERS.names()


# Chakra: a folder of per-rank files or their common prefix (never one file); SimAI: the
# header's "model_parallel_NPU_group:" field on the first line
register_reader("chakra", read_chakra, sniff=lambda path, head: not path.is_file())
register_reader("simai_workload", read_simai_workload, suffixes=(".txt",),
                sniff=lambda path, head: b"model_parallel_NPU_group:" in head.split(b"\n", 1)[0])
_BUILTIN = READERS.builtin = READERS.names()
