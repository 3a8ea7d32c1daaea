"""The command line's file arguments: ``--server`` (a catalogue name or a server-model file)
and ``--cluster`` (a whole cluster graph in a file)."""

from __future__ import annotations

import re
from pathlib import Path

import topologies as tp

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


def cluster_file(value):
    """``--cluster``: the graph in a file, read by :func:`topologies.read` (chosen by the
    file's content, then its name): node-link JSON (:func:`topologies.load`), ASTRA-sim's
    analytical network YAML (:func:`topologies.from_astra_network`), a SimAI topology file
    (:func:`topologies.from_simai`) or a registered format. An NCCL topology file (one server,
    any name) is an error saying to pass it as ``--server``."""
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"--cluster {value!r}: no such file")
    try:
        return tp.read(path, kind="cluster")
    except ValueError as err:          # the readers' errors are one line naming the file
        server = _server_format(path)
        if server is not None:
            what = ("an NCCL topology file (NCCL_TOPO_DUMP_FILE's XML)" if server == "nccl_topology"
                    else f"a {server} file (a server-model format)")
            raise ValueError(f"--cluster {value!r}: {what} describes one server (its GPUs, "
                             f"NVLinks, PCIe and NICs), not a cluster: pass it as --server {value} with "
                             "--nodes (and --family, --link for the fabric between the servers)") from None
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"--cluster: {message}" if str(path) in message
                         else f"--cluster {value!r}: {message}") from None


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
