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

__all__ = ["ALGO_NAMES", "PROTO_NAMES", "NCCL_FUNCTIONS", "QUIET", "allowed", "forced", "log_sets", "log_environment",
           "bounded_channels"]

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


#: NCCL settings a log may print that leave a collective's time alone: not applied, no warning
#: (every other setting the model does not express is named in a warning, :func:`log_environment`)
QUIET = {
    "NCCL_ALGO": "applied apart: the algorithms the run allowed (log_sets)",
    "NCCL_PROTO": "applied apart: the protocols the run allowed (log_sets)",
    "NCCL_DEBUG": "what NCCL logs",
    "NCCL_DEBUG_SUBSYS": "which of NCCL's parts log",
    "NCCL_DEBUG_FILE": "where NCCL's log goes",
    "NCCL_SOCKET_IFNAME": "the bootstrap's interface (data only on the socket transport: NCCL_IB_DISABLE=1 warns)",
    "NCCL_SOCKET_FAMILY": "IPv4 or IPv6 for the bootstrap's sockets",
    "NCCL_COMM_ID": "the bootstrap root's address",
    "NCCL_IB_GID_INDEX": "which RoCE GID (address) the queue pairs use, not their rate",
    "NCCL_IB_ADDR_FAMILY": "which GID address family is picked",
    "NCCL_IB_ADDR_RANGE": "which GID address range is picked",
    "NCCL_IB_TIMEOUT": "the retransmission timeout, used only after a loss",
    "NCCL_IB_TC": "the traffic class (QoS), which tells only against other traffic",
    "NCCL_IB_SL": "the service level (QoS), which tells only against other traffic",
    "NCCL_IB_RETRY_CNT": "retries after a loss",
    "NCCL_IBVERBS_LIB": "the path of libibverbs",
    "NCCL_TOPO_DUMP_FILE": "writes the topology NCCL found to a file",
    "NCCL_GRAPH_DUMP_FILE": "writes NCCL's graphs to a file",
}
#: settings whose value here is NCCL's default (or keeps its default behaviour): quiet at that value
_DEFAULTS = {"NCCL_IB_DISABLE": "0", "NCCL_P2P_DISABLE": "0", "NCCL_SHM_DISABLE": "0", "NCCL_COLLNET_ENABLE": "0",
             "NCCL_PXN_DISABLE": "0", "NCCL_NET_GDR_READ": "1"}
#: why a setting the model cannot express changes a run's time (the rest: "changes how NCCL runs")
_UNMODELLED = {
    "NCCL_NET_GDR_LEVEL": "how close a GPU must be to its NIC for GPUDirect RDMA; beyond it the network stages "
                          "through host memory",
    "NCCL_NET_GDR_READ": "whether sends read GPU memory directly over GPUDirect RDMA",
    "NCCL_IB_HCA": "which NICs NCCL uses (a subset runs on fewer rails)",
    "NCCL_BUFFSIZE": "the protocols' buffer size, so the chunk pipeline's steps",
    "NCCL_NTHREADS": "the threads per channel, so a channel's rate",
    "NCCL_P2P_DISABLE": "P2P between a node's GPUs off: NCCL goes through host memory (SHM) or the network",
    "NCCL_P2P_LEVEL": "how close two GPUs must be for P2P; beyond it NCCL goes through host memory",
    "NCCL_SHM_DISABLE": "host-memory transport off: where a node's GPUs cannot use P2P, NCCL uses the network",
    "NCCL_IB_DISABLE": "InfiniBand / RoCE off: the data goes over TCP sockets",
    "NCCL_COLLNET_ENABLE": "CollNet (in-network reduction, SHARP), which flowsolver does not model",
    "NCCL_CROSS_NIC": "whether rings may cross rails between nodes",
    "NCCL_TOPO_FILE": "the topology NCCL searches its rings and trees on",
    "NCCL_TUNER_PLUGIN": "a tuner plugin chooses algorithms and protocols in place of NCCL's cost model",
}
_CHANNELS_MAX = 64          # MAXCHANNELS (src/include/device.h of master 5067397c)
_CTAS = ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS")


def _ctas(least, most):
    """``(minCTAs, maxCTAs)`` of ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` as NCCL keeps them
    (src/init.cc:2013-2033, 2178-2194 of master 5067397c): a value <= 0 left unset (defaults 1 and
    MAXCHANNELS), each at most MAXCHANNELS, a minimum above the maximum lowered to it; None where
    neither is set to a value NCCL takes.

    >>> _ctas(None, 4), _ctas(80, None), _ctas(8, 4), _ctas(0, -1)
    ((1, 4), (64, 64), (4, 4), None)
    """
    least = least if least is not None and least > 0 else None
    most = most if most is not None and most > 0 else None
    if least is None and most is None:
        return None
    high = min(most or _CHANNELS_MAX, _CHANNELS_MAX)
    return min(least or 1, _CHANNELS_MAX, high), high


def log_environment(settings: dict) -> dict:
    """What a log's NCCL settings (``{"NCCL_X": "V"}``, :func:`flowsolver.nccl_tests.read`'s
    ``attrs["nccl_env"]``) ask of the model, as NCCL reads them: ``nvls`` False where
    ``NCCL_NVLS_ENABLE=0`` (no NVLS nor NVLSTree: src/transport/nvls.cc ``ncclNvlsInit``
    returns before NVLS is set up), ``pxn`` False where ``NCCL_PXN_DISABLE=1``
    (src/graph/paths.cc: PXN only where ``ncclPxnDisable() != 1``), ``channels`` the bounds
    ``(least, most)`` of ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (or the older
    ``NCCL_MIN_NRINGS`` / ``NCCL_MAX_NRINGS``, which the new names override: src/graph/connect.cc
    ``ncclMinNchannels`` / ``ncclMaxNchannels``) and of ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``, which
    bound the same count (connect.cc:498-505), None where none is set: NVLS's channels are none of
    these: ``nvls_channels`` is ``NCCL_NVLS_NCHANNELS`` (None: NCCL's own count) and ``ctas`` the
    ``(minCTAs, maxCTAs)`` NCCL clamps it to (``nvls.cc`` ``ncclNvlsTuning``; None: not set, and
    :func:`nvls_channels` applies both), and ``unmodelled``:
    ``(name, value, why)`` of each setting that may change the time but the model cannot
    express; :data:`QUIET` settings and settings at their default are in none.

    >>> env = log_environment({"NCCL_NVLS_ENABLE": "0", "NCCL_MAX_NCHANNELS": "4", "NCCL_DEBUG": "INFO",
    ...                        "NCCL_IB_HCA": "mlx5_0"})
    >>> env["nvls"], env["pxn"], env["channels"], [u[0] for u in env["unmodelled"]]
    (False, True, (0, 4), ['NCCL_IB_HCA'])
    """
    def integer(name, default):
        try:
            return int(settings[name]) if name in settings else default
        except ValueError:
            return default

    def count(name, default):           # -2 is NCCL's "not set" (connect.cc NCCL_PARAM defaults)
        value = integer(name, default)
        return default if value == -2 else value

    most = count("NCCL_MAX_NCHANNELS", count("NCCL_MAX_NRINGS", None))
    least = count("NCCL_MIN_NCHANNELS", count("NCCL_MIN_NRINGS", None))
    ctas = _ctas(integer("NCCL_MIN_CTAS", None), integer("NCCL_MAX_CTAS", None))
    channels = None
    if most is not None or least is not None or ctas is not None:
        # connect.cc:498-505: min(ncclMaxNchannels(), n, maxCTAs), copied up to max(ncclMinNchannels(),
        # minCTAs); the maximum at least 1, both at most MAXCHANNELS
        low, high = ctas or (0, _CHANNELS_MAX)
        channels = (min(max(least or 0, 0, low), _CHANNELS_MAX),
                    min(high, _CHANNELS_MAX if most is None else min(max(most, 1), _CHANNELS_MAX)))
    applied = {"NCCL_NVLS_ENABLE", "NCCL_PXN_DISABLE", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS",
               "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS", "NCCL_NVLS_NCHANNELS", *_CTAS}
    unmodelled = [(name, value, _UNMODELLED.get(name, "changes how NCCL runs; flowsolver does not model it"))
                  for name, value in sorted(settings.items())
                  if name not in QUIET and name not in applied and _DEFAULTS.get(name) != value]
    nvls_set = integer("NCCL_NVLS_NCHANNELS", None)          # config.nvlsCTAs: unset (or <= 0) keeps NCCL's
    return dict(nvls=integer("NCCL_NVLS_ENABLE", 2) != 0, pxn=integer("NCCL_PXN_DISABLE", 0) != 1,
                channels=channels, nvls_channels=nvls_set if nvls_set is not None and nvls_set > 0 else None,
                ctas=ctas, unmodelled=unmodelled)


def nvls_channels(own: int, env: dict) -> int:
    """NVLS's channel count as NCCL sets it from ``own`` (its default for the machine,
    :func:`flowsolver.collectives._channels.nvls_channel_count`) and a log's settings ``env``
    (:func:`log_environment`): ``NCCL_NVLS_NCHANNELS`` in its place where set, then clamped to
    ``[minCTAs, maxCTAs]`` (src/transport/nvls.cc ``ncclNvlsTuning``, master 5067397c).

    >>> nvls_channels(16, log_environment({"NCCL_MAX_CTAS": "8"})), nvls_channels(16, log_environment({}))
    (8, 16)
    >>> nvls_channels(16, log_environment({"NCCL_NVLS_NCHANNELS": "32", "NCCL_MAX_CTAS": "24"}))
    24
    """
    n = own if env.get("nvls_channels") is None else int(env["nvls_channels"])
    if env.get("ctas") is not None:
        least, most = env["ctas"]
        n = max(least, min(most, n))
    return n


def bounded_channels(count: int, bounds) -> int:
    """NCCL's channel count ``count`` under ``bounds`` (``(least, most)`` of
    :func:`log_environment`): capped at the most, then copied up to the least
    (src/graph/connect.cc: ``min(ncclMaxNchannels(), n)`` then ``copyChannels`` to
    ``max(ncclMinNchannels(), ...)``).

    >>> bounded_channels(16, (0, 4)), bounded_channels(16, (24, 64)), bounded_channels(16, (8, 4))
    (4, 24, 8)
    """
    least, most = bounds
    return max(least, min(most, count))
