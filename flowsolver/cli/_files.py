"""The command line's file arguments: ``--server`` (a catalogue name or a server-model file)
and ``--cluster`` (a whole cluster graph in a file)."""

from __future__ import annotations

import re
from pathlib import Path

import topologies as tp

from ._words import CliError

__all__ = ["SERVER_FILE_OPTIONS", "cluster_file", "server_of"]


#: what ``--server FILE,key=value,...`` may tell an NCCL topology file's reader that the file
#: itself does not say (:func:`topologies.from_nccl_xml`'s arguments of the same names)
SERVER_FILE_OPTIONS = ("gpu", "nvlink")


def server_of(value):
    """``--server``: a catalogue name as it is, or a server-model file (an NCCL topology file,
    ``*.xml``) read by :func:`topologies.read` into its ServerModel; ``FILE,gpu=NAME,nvlink=GEN``
    gives the reader what a skeleton file leaves out (its GPU type, its NVLink generation or
    ``none``)."""
    if not isinstance(value, str) or value in tp.server_names():
        return value
    path, *pairs = value.split(",") if not Path(value).is_file() else (value,)
    options = {}
    for pair in pairs:
        key, sep, given = pair.partition("=")
        if not sep or key.strip() not in SERVER_FILE_OPTIONS or not given.strip():
            raise ValueError(f"--server {value!r}: after the file come key=value pairs, keys "
                             f"{', '.join(SERVER_FILE_OPTIONS)} (e.g. FILE,gpu=h100_sxm,nvlink=nvlink4); got {pair!r}")
        options[key.strip()] = given.strip()
    if Path(path).is_file():
        try:
            return tp.read(path, kind="server", **options)
        except ValueError as err:       # the reader's advice in the command line's words
            message = re.sub(r"pass (gpu|nvlink)=(\.\.\.)?", r"add ,\1= after the file name in --server",
                             str(err).splitlines()[0])
            raise ValueError(f"--server: {message}") from None
    if path.lower().endswith(".xml"):
        raise ValueError(f"--server {path!r}: no such NCCL topology file")
    return value


def cluster_file(value, max_bytes: int | None = None):
    """``--cluster``: the graph in a file, read by :func:`topologies.read` (chosen by the
    file's content, then its name): node-link JSON (:func:`topologies.load`), ASTRA-sim's
    analytical network YAML (:func:`topologies.from_astra_network`), a SimAI topology file
    (:func:`topologies.from_simai`) or a registered format. An NCCL topology file (one server,
    any name) is an error saying to pass it as ``--server``. ``max_bytes`` (bytes;
    ``--cluster-max-bytes``): the largest file read, None for the reader's own limit
    (node-link JSON 48 MiB, :data:`topologies.formats.node_link.MAX_JSON_BYTES`); a file over
    the limit is an error naming ``--cluster-max-bytes``.

    >>> import os, tempfile, topologies as tp
    >>> path = tp.save(tp.fat_tree(4), os.path.join(tempfile.mkdtemp(), "g.json"))
    >>> cluster_file(str(path), max_bytes=1000)
    Traceback (most recent call last):
    ...
    flowsolver.cli._words.CliError: --cluster ...g.json: the file has ... bytes, more than the limit of 1000 bytes: ...
    """
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"--cluster {value!r}: no such file")
    options = {} if max_bytes is None else {"max_bytes": max_bytes}
    try:
        return tp.read(path, kind="cluster", **options)
    except TypeError as err:           # a registered reader without a max_bytes keyword
        if "max_bytes" not in str(err):
            raise
        raise CliError(f"--cluster-max-bytes: the reader of {value!r} takes no max_bytes ({err}); leave "
                       "--cluster-max-bytes out") from None
    except ValueError as err:          # the readers' errors are one line naming the file
        server = _server_format(path)
        if server is not None:
            what = ("an NCCL topology file (NCCL_TOPO_DUMP_FILE's XML)" if server == "nccl_topology"
                    else f"a {server} file (a server-model format)")
            raise ValueError(f"--cluster {value!r}: {what} describes one server (its GPUs, "
                             f"NVLinks, PCIe and NICs), not a cluster: pass it as --server {value} with "
                             "--nodes (and --family, --link for the fabric between the servers)") from None
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        if (over := _too_large(message)) is not None:
            raise CliError(f"--cluster {value}: {over}") from None
        raise ValueError(f"--cluster: {message}" if str(path) in message
                         else f"--cluster {value!r}: {message}") from None


#: a reader's message for a file over its ``max_bytes`` (topologies.formats._common.read_bytes)
_OVER = re.compile(r"(?:the file has (?P<size>\d+) bytes, more than max_bytes=(?P<limit>\d+)"
                   r"|the file holds more than max_bytes=(?P<limit2>\d+) bytes) "
                   r"\(pass a larger max_bytes to read it\)")


def _too_large(message: str):
    """A reader's too-large message in the command line's words (``--cluster-max-bytes`` with a
    size that reads the file), or None where ``message`` is another error."""
    m = _OVER.search(message)
    if m is None:
        return None
    limit = int(m["limit"] or m["limit2"])
    need = int(m["size"]) if m["size"] else 2 * limit
    # the next whole binary multiple at or above the file's size, as parse_size reads it
    unit, suffix = next((u, x) for u, x in ((2**30, "G"), (2**20, "M"), (2**10, "K"), (1, ""))
                        if need >= u or u == 1)
    suggest = f"{-(-need // unit)}{suffix}"
    said = f"the file has {m['size']} bytes" if m["size"] else "the file holds more"
    return (f"{said}, more than the limit of {limit} bytes: pass --cluster-max-bytes {suggest} (a size; "
            "node-link JSON is read in up to ~30x the file's size of memory)")


def _server_format(path: Path):
    """The server-model format (an NCCL topology file) that knows ``path`` by its content, else
    None: a file given to ``--cluster`` that belongs to ``--server``, whatever its name."""
    from topologies.formats import HEAD_BYTES, READERS

    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
        reader = READERS.choose(path, kind="server")
        return reader.name if reader.sniff is not None and reader.sniff(path, head) else None
    except (OSError, ValueError):
        return None
