"""NCCL's ``NCCL_ALGO`` and ``NCCL_PROTO`` values read as NCCL reads them: the algorithms and
protocols a run allowed each collective.

NCCL's parser (``parseList``, NCCL 2.24 and later: src/graph/tuning.cc:55-131 of master
5067397c, applied at tuning.cc:453-462) reads a value as entries separated by ``;``, each
``list`` or ``function:list``. A list is names separated by ``,``; a leading ``^`` turns it
into an exclusion (every name but those listed). An entry without a function applies to
every function and may only be the first; a later entry replaces, for the functions it names,
what an earlier one set. Names and functions are matched without regard to case
(``strcasecmp``); an unknown name or function is an error (``ncclInvalidUsage``: the run does
not start). Empty pieces (``Ring,,Tree``, ``;;``) are skipped (``strtok_r``). A function no
entry names keeps every algorithm and protocol. The functions are ``ncclFuncStr`` (src/init.cc:52):
Broadcast, Reduce, AllGather, ReduceScatter, AllReduce; send / receive and all-to-all are not
among them (NCCL runs them on its P2P channels with the protocol their size sets,
src/enqueue.cc:932-933), so these settings do not apply to them. NCCL before 2.24
(tuning.cc ``parseList(str, elems, nelems, list)`` of 2.23) read one list for every function,
a leading ``^`` its only syntax, and ignored a name it did not know.
"""

from __future__ import annotations

__all__ = ["ALGO_NAMES", "PROTO_NAMES", "NCCL_FUNCTIONS", "allowed", "forced", "log_sets"]

#: flowsolver's ops -> NCCL's function names (src/init.cc:52 ``ncclFuncStr``)
NCCL_FUNCTIONS = {"broadcast": "Broadcast", "reduce": "Reduce", "all_gather": "AllGather",
                  "reduce_scatter": "ReduceScatter", "all_reduce": "AllReduce"}
#: NCCL's algorithm names (src/init.cc:53 ``ncclAlgoStr``; ``CollNet``: NCCL 2.7-2.13's one
#: CollNet algorithm) -> flowsolver's names; CollNet needs NCCL's CollNet plugin (SHARP), which
#: flowsolver does not model: None
ALGO_NAMES = {"tree": "tree", "ring": "ring", "collnetdirect": None, "collnetchain": None, "collnet": None,
              "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
#: NCCL's protocol names (src/init.cc:55 ``ncclProtoStr``) -> flowsolver's
PROTO_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
_PREFIXED = (2, 24)          # the first NCCL whose parser reads "function:list" entries (2.24.3)


def _pieces(text: str, sep: str) -> list:
    """``strtok_r``'s tokens: the non-empty pieces between separators."""
    return [t for t in text.split(sep) if t]


def _refused(what: str, value: str, detail: str) -> ValueError:
    """The ValueError of a value NCCL refuses; ``what`` a command-line option (``--algorithm``,
    named by argparse's own message) gives the reason alone."""
    if what.startswith("-"):
        return ValueError(detail if detail.startswith(repr(value)) else f"{detail} (in {value!r})")
    return ValueError(f"{what}={value!r}: {detail}; NCCL refuses the value (src/graph/tuning.cc parseList)")


def _parsed_list(text: str, names: dict, value: str, what: str, lenient: bool, also: dict) -> set:
    """The names (keys of ``names`` or ``also``) one list enables: those listed, or with a
    leading ``^`` every name of ``names`` but those (and those meaning what they mean)."""
    exclude = text.startswith("^")
    known = {**names, **also}
    listed = set()
    for name in _pieces(text[1:] if exclude else text, ","):
        if name.lower() not in known:
            if lenient:
                continue
            own = f" nor flowsolver's ({', '.join(also)})" if also else ""
            raise _refused(what, value, f"{name!r} is not one of NCCL's names "
                                        f"({', '.join(n for n in names if n != 'collnet')}, in any case){own}")
        listed.add(name.lower())
    if not exclude:
        return listed
    gone = {known[n] for n in listed} - {None}
    return {n for n in names if n not in listed and names[n] not in gone}


def _one_list(version: str | None) -> bool:
    """Whether NCCL ``version`` (``"2.21.5"``; None: the current one) read one list for all its
    functions (before 2.24: no ``function:list`` entries)."""
    try:
        return version is not None and tuple(int(x) for x in version.split(".")[:2]) < _PREFIXED
    except ValueError:
        return False


def parse(value: str, names: dict, what: str = "NCCL_ALGO", version: str | None = None, also=None) -> dict:
    """``{NCCL function: set of enabled names}`` (lower-case keys of ``names``) of a value of
    ``what`` as NCCL reads it; ``version`` (``"2.21.5"``) below 2.24 reads it as those NCCL
    versions did. ValueError where NCCL refuses the value. ``also``: names beside NCCL's
    (flowsolver's own algorithms, for its command line's ``--algorithm``), taken where listed;
    an exclusion keeps to NCCL's.

    >>> r = parse("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", ALGO_NAMES)
    >>> sorted(r["AllReduce"]), sorted(r["Broadcast"]), sorted(r["AllGather"])
    (['collnetdirect', 'tree'], ['ring'], ['collnetdirect', 'ring'])
    >>> sorted(parse("^LL128;allreduce:LL128", PROTO_NAMES)["AllReduce"])
    ['ll128']
    """
    also = {k: v for k, v in (also or {}).items() if k not in names}
    enabled = {f: set(names) for f in NCCL_FUNCTIONS.values()}
    if _one_list(version):
        return {f: _parsed_list(value, names, value, what, True, also) for f in enabled}
    for i, entry in enumerate(_pieces(value, ";")):
        parts = _pieces(entry, ":")
        if len(parts) < 2:                      # no function: every function's, first entry only
            if i > 0 or value.startswith(";"):
                raise _refused(what, value, "every entry but the first must name its function (function:list)")
            functions, text = list(enabled), parts[0] if parts else ""
        else:
            functions = [f for f in enabled if f.lower() == parts[0].lower()]
            text = parts[1]
            if not functions:
                raise _refused(what, value, f"{parts[0]!r} is not one of NCCL's functions "
                                            f"({', '.join(enabled)}, in any case)")
        chosen = _parsed_list(text, names, value, what, False, also)
        for f in functions:
            enabled[f] = set(chosen)
    return enabled


def _named(value: str, version: str | None) -> set:
    """NCCL's functions a (well-formed) value sets: every one for an entry with no function or
    a version before 2.24 (one list for all), else those its ``function:list`` entries name
    (tuning.cc parseList writes only the named prefix's entries: the others keep their
    defaults)."""
    old = _one_list(version)
    out = set()
    for entry in _pieces(value, ";"):
        parts = _pieces(entry, ":")
        if old or len(parts) < 2:
            return set(NCCL_FUNCTIONS.values())
        out |= {f for f in NCCL_FUNCTIONS.values() if f.lower() == parts[0].lower()}
    return out


def allowed(value: str | None, op: str | None, names: dict, what: str = "NCCL_ALGO",
            version: str | None = None, also=None):
    """flowsolver's names of what ``value`` (of ``what``) allowed ``op`` (flowsolver's name), in
    ``names``' order: a tuple, empty where it allowed only what flowsolver does not model
    (CollNet); None where it sets nothing for ``op`` (no value; ``function:list`` entries that
    do not name ``op``'s function, which keeps NCCL's defaults, LL128's path rule among them;
    all-to-all or send / receive, which NCCL's setting does not govern; an unknown ``op`` of a
    value that names functions).
    ``also``: names beside NCCL's (:func:`parse`).

    >>> allowed("Ring,Tree", "all_reduce", ALGO_NAMES), allowed("^NVLS", "all_reduce", ALGO_NAMES)
    (('tree', 'ring'), ('tree', 'ring', 'nvls_tree', 'pat'))
    >>> allowed("allreduce:ring;allgather:nvls", "all_gather", ALGO_NAMES)
    ('nvls',)
    >>> allowed("LL,LL128", "send_recv", PROTO_NAMES) is None       # not one of NCCL's functions
    True
    >>> allowed("allgather:LL", "all_reduce", PROTO_NAMES) is None  # all-reduce keeps NCCL's defaults
    True
    """
    if value is None:
        return None
    table = parse(value, names, what, version, also)
    if op in NCCL_FUNCTIONS and NCCL_FUNCTIONS[op] not in _named(value, version):
        return None                     # NCCL keeps its defaults for it (LL128's 2: its path rule)
    names = {**names, **(also or {})}
    if op is None:
        kinds = {frozenset(s) for s in table.values()}
        if len(kinds) > 1:
            return None
        chosen = kinds.pop()
    elif op in NCCL_FUNCTIONS:
        chosen = table[NCCL_FUNCTIONS[op]]
    else:
        return None
    return tuple(dict.fromkeys(names[n] for n in names if n in chosen and names[n] is not None))


def log_sets(algo, proto, op, version, source) -> dict:
    """A log's attrs ``algorithms`` / ``protocols`` (what its ``NCCL_ALGO`` value ``algo`` and
    ``NCCL_PROTO`` value ``proto`` allowed ``op``: :func:`allowed`) and ``algorithm`` /
    ``protocol`` (the one name where they allowed one, else None); ValueError naming the log
    (``source``) where NCCL refuses a value.

    >>> log_sets("Ring,Tree", None, "all_reduce", None, "log")["algorithms"]
    ('tree', 'ring')
    """
    out = {}
    for key, value, names, what in (("algorithm", algo, ALGO_NAMES, "NCCL_ALGO"),
                                    ("protocol", proto, PROTO_NAMES, "NCCL_PROTO")):
        try:
            sets = allowed(value, op, names, what, version)
        except ValueError as err:
            raise ValueError(f"{source}: {err}") from None
        out[key + "s"] = sets
        out[key] = sets[0] if sets is not None and len(sets) == 1 else None
    return out


def forced(value: str, names: dict):
    """``names``' entry for the one choice an NCCL_* value forces; None for a list (``,``), an
    exclusion (``^``) or per-collective settings (``;``, ``:``)."""
    value = value.strip().lower()
    return None if any(c in value for c in ",^;:") else names.get(value)
