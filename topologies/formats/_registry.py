"""Private: a registry of file readers that picks one for a path by the file's first bytes
and its suffix (the machine readers here, the workload readers in ``flowsolver.traces``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: bytes of a file a sniffer sees
HEAD_BYTES = 4096


@dataclass(frozen=True)
class Reader:
    """A registered file format: its ``name``, the ``reader`` (a path and the caller's
    keywords in, what the file holds out), the ``suffixes`` its files usually carry (lower
    case, with the dot; ``".et.gz"`` works), ``sniff`` (``sniff(path, head) -> bool``:
    whether ``head``, the file's first :data:`HEAD_BYTES` bytes, ``b""`` for a folder or a
    path that is no file, is in this format) and ``kind`` (what it returns, e.g. ``"cluster"``)."""

    name: str
    reader: Callable
    suffixes: tuple = ()
    sniff: Callable | None = None
    kind: str = ""


class ReaderRegistry:
    """Readers by name, in registration order; :meth:`read` picks one for a path.

    A reader whose ``sniff`` accepts the file's first bytes wins (one whose suffix also
    matches first), else the first whose suffix matches; none is a ValueError naming the path
    and every known format.

    >>> import tempfile, os
    >>> formats = ReaderRegistry({}, "demo")
    >>> _ = formats.register("words", lambda p: open(p).read().split(), suffixes=(".words",))
    >>> path = os.path.join(tempfile.mkdtemp(), "a.words")
    >>> _ = open(path, "w").write("two words")
    >>> formats.read(path)
    ['two', 'words']
    """

    def __init__(self, entries: dict, what: str):
        self._entries = entries
        self.what = what
        #: the library's own formats (set once they are registered): never replaced
        self.builtin: tuple = ()

    def register(self, name: str, reader: Callable, *, suffixes=(), sniff: Callable | None = None,
                 kind: str = "", overwrite: bool = False) -> Reader:
        """Add format ``name`` (see :class:`Reader`); a name already known needs
        ``overwrite=True``, and built-in formats (:attr:`builtin`) cannot be replaced."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not callable(reader):
            raise TypeError(f"reader must be callable (a path in, what the file holds out), got {type(reader).__name__}")
        if sniff is not None and not callable(sniff):
            raise TypeError(f"sniff must be callable (path, first bytes) -> bool or None, got {type(sniff).__name__}")
        suffixes = (suffixes,) if isinstance(suffixes, str) else tuple(suffixes)
        bad = [s for s in suffixes if not (isinstance(s, str) and s.startswith(".") and len(s) > 1)]
        if bad:
            raise ValueError(f"suffixes must be strings starting with '.', such as '.json', got {bad}")
        if not suffixes and sniff is None:
            raise ValueError(f"{self.what} format {name!r}: give suffixes=, sniff= or both (how a file is known)")
        if name in self.builtin:
            raise ValueError(f"{self.what} format {name!r} is built in and cannot be replaced; "
                             "register it under another name")
        if name in self._entries and not overwrite:
            raise ValueError(f"{self.what} format {name!r} is already registered; pass overwrite=True to replace it")
        entry = Reader(name, reader, tuple(s.lower() for s in suffixes), sniff, kind)
        self._entries[name] = entry
        return entry

    def names(self, kind: str | None = None) -> tuple:
        """The registered formats' names (those of ``kind`` only, if given)."""
        return tuple(n for n, r in self._entries.items() if kind is None or r.kind == kind)

    def choose(self, path, kind: str | None = None) -> Reader:
        """The reader :meth:`read` uses for ``path``."""
        path = Path(path)
        readers = [r for r in self._entries.values() if kind is None or r.kind == kind]
        head = _head(path)
        name = path.name.lower()
        by_suffix = [r for r in readers if any(name.endswith(s) for s in r.suffixes)]
        by_content = [r for r in readers if r.sniff is not None and _sniffs(r, path, head)]
        both = [r for r in by_content if r in by_suffix]
        chosen = (both or by_content or by_suffix or [None])[0]
        if chosen is None:
            known = "; ".join(f"{r.name} ({', '.join(r.suffixes) or 'by content'})" for r in readers)
            raise ValueError(f"{path}: not a {self.what} file of a known format by its content or its suffix "
                             f"(known formats: {known or 'none'})")
        return chosen

    def read(self, path, *, kind: str | None = None, **options):
        """What the file at ``path`` holds, read by the format :meth:`choose` picks
        (``options`` go to its reader)."""
        return self.choose(path, kind).reader(path, **options)


def _head(path: Path) -> bytes:
    """The file's first bytes; ``b""`` for a folder, a missing path or one that cannot be read
    (its reader says why)."""
    try:
        if not path.is_file():
            return b""
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return b""


def _sniffs(reader: Reader, path: Path, head: bytes) -> bool:
    """Whether ``reader`` recognises the file; a sniffer that fails does not."""
    try:
        return bool(reader.sniff(path, head))
    except Exception:       # a user's sniffer that trips on an odd file says no, never fails read()
        return False
