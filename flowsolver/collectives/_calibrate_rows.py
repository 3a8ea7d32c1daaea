"""The rows a calibration fits: an nccl-tests log's sizes and out-of-place times per op,
its rank count read from the log (or from the ratio of its bus and algorithm bandwidths)
and checked against the graph's; and the options the rows are timed with (:func:`fit_over`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .. import _checks, nccl_tests
from .._nccl_log import BUSBW_SCALE, busbw_range
from ..routing import gpu_nodes
from ._allowed import log_choices
from ._host import log_gpus_per_thread
from .._nccl_env import NCCL_FUNCTIONS
from ._algorithms import NCCL_ALGORITHMS
from ._nccl import GPU_GENERATION, OPS, reduction

__all__ = ["ranks_from_busbw", "log_reduction", "log_ranks", "LogRows", "log_rows"]

_US = 1e-6


#: the largest deviation from the expected result an older nccl-tests' ``error`` column may show
#: per rank beyond the first, by type (NVIDIA/nccl-tests src/common.cu before 51af557, NCCL 2.13:
#: DeltaMaxValue, a row failed where maxDelta > DeltaMaxValue(type) * (nranks - 1)); others 1e-200
_DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}


def ranks_from_busbw(df, op):
    """(the rank count the log's busbw / algbw ratios allow, or None, and why not).

    nccl-tests prints ``busbw = algbw x s (p - 1) / p`` (s = 2 for all-reduce, 1 for
    all-gather, reduce-scatter, all-to-all), both rounded to 2 decimals: every row bounds
    the ratio, so ``p``; the rows together give the range of ``p``, and the count when
    one integer is left.

    >>> import pandas as pd
    >>> ranks_from_busbw(pd.DataFrame(dict(algbw=[355.81], busbw=[311.34])), "reduce_scatter")
    (8, '')
    """
    if op not in BUSBW_SCALE:
        return None, f"busbw / algbw is 1 for {op} whatever the rank count"
    span = busbw_range(df, op)
    if span is None:
        return None, "busbw / algbw disagree between rows"
    if span[0] == span[1]:
        return int(span[0]), ""
    return None, "busbw / algbw is printed too coarsely to tell"


def log_reduction(rows, where="log") -> list:
    """Each of ``rows``' (a :func:`flowsolver.nccl_tests.read` table's) ``(redop, dtype)`` as
    :func:`flowsolver.collective` takes them (its ``redop`` and ``type`` columns, nccl-tests'
    names; ``none``, an op that reduces nothing, and a table without the columns: sum, float);
    a name flowsolver does not know is a ValueError naming the log.

    >>> import pandas as pd
    >>> log_reduction(pd.DataFrame({"type": ["float", "char"], "redop": ["avg", "none"]}))
    [('avg', 'float'), ('sum', 'int8')]
    """
    redops = rows["redop"].astype(str) if "redop" in rows.columns else ["sum"] * len(rows)
    types = rows["type"].astype(str) if "type" in rows.columns else ["float"] * len(rows)
    return [reduction("sum" if r == "none" else r, t, f"{where}: the row's ") for r, t in zip(redops, types)]


def _server(graph, gpu):
    """The server a GPU node is on (a compute tray of it, where its NVLink domain spans trays: NVL72)."""
    return graph.nodes[gpu].get("server", gpu), graph.nodes[gpu].get("tray")


def log_ranks(df, op, graph, ranks=None):
    """The GPUs (ranks of ``graph``) of ``ranks`` (default every GPU) in a log's rank order, as
    calibrate and ``--compare`` time its rows. A sendrecv log's ring shift (rank r sends to
    r + 1, nccl-tests src/sendrecv.cu) runs between the hosts its device list
    (``df.attrs["devices"]``) puts each rank on: where that is not in blocks (``mpirun --map-by
    node``: rank r on host r mod 2, every pair across the network) rank r takes a GPU of the
    server standing for its host (hosts in the order of their first rank, servers in the order
    of their first GPU in ``ranks``, a host's ranks its server's GPUs in order). ``ranks`` as
    given for a block placement, for a list that does not match the servers one to one (cut
    short; containers of one machine each a host) and for the other ops: NCCL orders its rings
    and trees by node whatever the ranks' placement, and ``ranks[0]`` (nccl-tests' root) is on
    the first host either way.

    >>> import topologies as tp, pandas as pd
    >>> df = pd.DataFrame()
    >>> df.attrs["devices"] = {r: (f"host{r % 2}", r // 2, "H100") for r in range(4)}     # round-robin
    >>> log_ranks(df, "send_recv", tp.rail_optimized(nodes=2), ranks=[0, 1, 8, 9])
    [0, 8, 1, 9]
    """
    devices = df.attrs.get("devices") or {}
    gpus = gpu_nodes(graph)
    chosen = list(range(len(gpus))) if ranks is None else _checks.rank_indices(graph, ranks, nodes=gpus)
    if op != "send_recv" or sorted(devices) != list(range(len(chosen))):
        return ranks
    servers, hosts = {}, {}
    for g in chosen:
        servers.setdefault(_server(graph, gpus[g]), []).append(g)
    for r in range(len(chosen)):
        hosts.setdefault(devices[r][0], []).append(r)
    if [len(v) for v in hosts.values()] != [len(v) for v in servers.values()]:
        return ranks
    placed = dict(pair for on_host, on_server in zip(hosts.values(), servers.values())
                  for pair in zip(on_host, on_server))
    placed = [placed[r] for r in range(len(chosen))]
    return ranks if placed == chosen else placed


_NVLS = ("nvls", "nvls_tree")


def _without_nvls(op, algorithm, where):
    """``algorithm`` (:func:`~._allowed.log_choices`' form) less NVLS and NVLSTree
    (``NCCL_NVLS_ENABLE=0``); ValueError where nothing is left."""
    names = NCCL_ALGORITHMS[op] if algorithm == "auto" else (algorithm,) if isinstance(algorithm, str) else algorithm
    kept = tuple(a for a in names if a not in _NVLS)
    if kept == tuple(names):
        return algorithm
    if not kept:
        raise ValueError(f"{where}: NCCL_NVLS_ENABLE=0 and NCCL_ALGO allowed {op} only {', '.join(names)}: "
                         "NCCL had no algorithm to run it (a log of another run?)")
    return kept[0] if len(kept) == 1 else kept


def _default_channels(graph, op, ranks) -> tuple:
    """``(ring and tree, NVLS)`` channel counts the model sets for ``op`` on ``ranks``
    (:func:`~._hardware.describe`)."""
    from ._hardware import describe, laid_out

    chosen, layout = laid_out(graph, op, ranks, None)
    hw = describe(graph, chosen, layout)
    return hw.channels, hw.nvls_run


def log_settings(df, op, graph, ranks, allowed) -> tuple:
    """``(allowed, keywords, notes)`` of a log's NCCL settings (``df.attrs["nccl_env"]``, read
    as NCCL reads them: :func:`flowsolver._nccl_env.log_environment`) and its ``coll channels``
    line: ``allowed`` (:func:`~._allowed.log_choices`' ``(algorithm, protocol)``) less NVLS and
    NVLSTree under ``NCCL_NVLS_ENABLE=0``; ``keywords`` of :func:`flowsolver.collective`:
    ``pxn=False`` under ``NCCL_PXN_DISABLE=1``, ``channels`` the model's count bounded by
    ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` as NCCL bounds its own, or the printed
    count where that differs (both are the run's, :func:`~._channels.nccl_channels`),
    ``nvls_channels`` NVLS's count under ``NCCL_NVLS_NCHANNELS`` and ``NCCL_MIN_CTAS`` /
    ``NCCL_MAX_CTAS`` (:func:`flowsolver._nccl_env.nvls_channels`) where it differs from NCCL's own,
    ``nccl_version`` the release its ``NCCL version`` line prints; ``notes``: a
    warning (issued here) per setting the model cannot express, naming it (the times compared, or a calibration, carry its effect)."""
    from .._nccl_env import bounded_channels, log_environment, nvls_channels

    where = df.attrs.get("source", "log")
    env = log_environment(df.attrs.get("nccl_env") or {})
    algorithm, protocol = allowed
    if not env["nvls"]:
        algorithm = _without_nvls(op, algorithm, where)
    keywords, notes = {}, []
    if not env["pxn"]:
        keywords["pxn"] = False
    printed = df.attrs.get("coll_channels")
    if op not in NCCL_FUNCTIONS:        # P2P ops: NCCL's coll channels are not theirs
        printed = None
    ring_set = op in NCCL_FUNCTIONS and (env["channels"] is not None or printed is not None)
    nvls_set = op in NCCL_FUNCTIONS and (env["nvls_channels"] is not None or env["ctas"] is not None)
    count, own = _default_channels(graph, op, ranks) if ring_set or nvls_set else (None, None)   # one describe
    if env["channels"] is not None and op not in NCCL_FUNCTIONS:
        notes.append(f"NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (bounds {env['channels']}) also bound NCCL's P2P "
                     f"channels (src/graph/paths.cc ncclTopoComputeP2pChannels), which flowsolver sets its own way "
                     f"for {op}: not applied")
    elif ring_set:
        bounded = count if env["channels"] is None else bounded_channels(count, env["channels"])
        if printed is not None and printed != bounded:      # both the run's count (nccl_channels)
            notes.append(f"NCCL printed {printed} coll channels, {'fewer' if printed < bounded else 'more'} than the "
                         f"{bounded} the model sets: the log's {printed} are used")
            bounded = printed
        if bounded != count:
            keywords["channels"] = bounded
    if nvls_set and (nvls := nvls_channels(own, env)) != own:
        keywords["nvls_channels"] = nvls
    if df.attrs.get("nccl_version"):        # the run's release (its "NCCL version" line): its rules
        keywords["nccl_version"] = str(df.attrs["nccl_version"])
    notes += [f"{name}={value}: {why}; flowsolver does not model it, so the times compared (and a fit to the log: "
              "calibrate) carry its effect" for name, value, why in env["unmodelled"]]
    for note in notes:
        _checks.warn_at_caller(f"{where}: {note}")
    return (algorithm, protocol), keywords, notes


@dataclass(frozen=True)
class LogRows:
    """An nccl-tests log's out-of-place rows as calibrate and ``flowsolver collective --compare``
    time them: ``rows`` (:func:`measured_rows`: ``size`` bytes, ``time`` us, ...), ``allowed``
    (the ``(algorithm, protocol)`` its NCCL_ALGO / NCCL_PROTO allowed, :func:`~._allowed.log_choices`),
    ``per_thread`` (the GPUs one thread drove, :func:`~._host.log_gpus_per_thread`; None where
    the header does not say), ``reductions`` (each row's ``(redop, dtype)``, :func:`log_reduction`)
    and ``ranks`` (its ranks in the log's order, :func:`log_ranks`); ``allowed`` heeds the log's
    other NCCL settings, whose :func:`flowsolver.collective` keywords are ``keywords`` and
    whose unmodelled ones ``notes`` name (:func:`log_settings`)."""

    rows: object
    allowed: tuple
    per_thread: int | None
    reductions: list
    ranks: object
    keywords: dict = field(default_factory=dict)
    notes: tuple = ()


def log_rows(df, op, graph, ranks=None) -> LogRows:
    """:class:`LogRows` of a log (a :func:`flowsolver.nccl_tests.read` table) of ``op``, checked
    against ``graph`` and ``ranks`` (:func:`checked_log`: the log ran on as many ranks, hosts)."""
    n = len(gpu_nodes(graph)) if ranks is None else len(list(ranks))
    checked_log(df, op, n, ranks is not None, graph, ranks)
    rows = measured_rows(df)
    _say_left_out(df, rows)
    allowed, keywords, notes = log_settings(df, op, graph, ranks, log_choices(df, op))
    return LogRows(rows, allowed, log_gpus_per_thread(df.attrs), log_reduction(rows, df.attrs.get("source", "log")),
                   log_ranks(df, op, graph, ranks), keywords, tuple(notes))


def _rows(logs, graph, ranks, op):
    """((op, size bytes, measured time s) of every out-of-place row, the rank count, each row's
    (algorithm, protocol) its log's NCCL_ALGO / NCCL_PROTO allowed (:func:`~._allowed.log_choices`)
    and its (redop, dtype) (:func:`log_reduction`), the GPUs a thread drove that each states,
    None where one does not, each row's ranks in its log's order (:func:`log_ranks`), each row's
    :func:`flowsolver.collective` keywords of its log's other NCCL settings and the notes on the
    settings not modelled (:func:`log_settings`), logs
    checked against the graph; ValueError where the rows of one op mix data types or reduction
    ops (nccl-tests ``-d all``, ``-o all``: calibrate each on its own, e.g.
    ``df[df["type"] == "float"]``)."""
    n = len(gpu_nodes(graph)) if ranks is None else len(list(ranks))
    out, choices, per_thread, kinds, reductions, placed, keywords, notes = [], [], set(), {}, [], [], [], []
    one = isinstance(logs, str) or not hasattr(logs, "__iter__") or hasattr(logs, "columns")   # a DataFrame is one log
    for log in ([logs] if one else list(logs)):
        df = log if hasattr(log, "attrs") and hasattr(log, "columns") else nccl_tests.read(log, op=op)
        log_op = df.attrs.get("op") or op
        where = df.attrs.get("source", "log")
        if log_op not in OPS:
            raise ValueError(f"{where}: the log does not say which collective it ran; pass op=")
        if op is not None and log_op != op:
            raise ValueError(f"{where}: the log tests {log_op}, not {op}")
        got = log_rows(df, log_op, graph, ranks)
        rows = got.rows
        per_thread.add(got.per_thread)                  # nGpus (-g), 1 under CUDA graphs (-G)
        for column in ("type", "redop"):
            if column in rows.columns:
                kinds.setdefault((log_op, column), {}).update(dict.fromkeys(rows[column].astype(str), where))
        out += [(log_op, float(s), float(t) * _US) for s, t in zip(rows["size"], rows["time"])]
        choices += [got.allowed] * len(rows)
        reductions += got.reductions
        placed += [got.ranks] * len(rows)
        keywords += [got.keywords] * len(rows)
        notes += [f"{where}: {note}" for note in got.notes]
    if not out:
        raise ValueError("logs hold no result rows to calibrate on")
    _check_kinds(kinds)
    return out, n, choices, reductions, per_thread, placed, keywords, notes


def _check_kinds(kinds) -> None:
    """ValueError where the rows of one op (``kinds``: (op, column) -> {value: log}) mix data
    types or reduction ops (nccl-tests ``-d all``, ``-o all``): they time different kernels."""
    for (log_op, column), seen in kinds.items():
        if len(seen) > 1:
            raise ValueError(f"{', '.join(sorted(set(seen.values())))}: the {log_op} rows mix {column}s "
                             f"({', '.join(sorted(seen))}; nccl-tests -d all / -o all): calibrate one, e.g. "
                             f"df[df[{column!r}] == {sorted(seen)[0]!r}] of nccl_tests.read")


def _check_hosts(df, graph, ranks, where) -> None:
    """The log's hosts (its device list's) against the servers the modelled ranks are on: fewer
    hosts than servers is a ValueError (GPUs of two servers are on two hosts); more is a
    warning (a 2 x 4 log fitted to one server's 8 GPUs derated NVLink to 0.51, but containers
    of one GPU each, as Kubernetes runs them, name a host per GPU on one machine)."""
    hosts = df.attrs.get("nodes")
    if not hosts:
        return
    gpus = gpu_nodes(graph)
    chosen = gpus if ranks is None else [gpus[r] for r in _checks.rank_indices(graph, ranks, nodes=gpus)]
    servers = len({_server(graph, g) for g in chosen})
    said = (f"{where}: the log ran on {hosts} hosts, the ranks modelled are on {servers} servers (or trays): "
            "pass ranks= (or --ranks) naming GPUs on as many servers as the log's hosts")
    if hosts < servers:
        raise ValueError(said)
    if hosts > servers:
        _checks.warn_at_caller(said + " (unless the hosts are containers sharing those servers)")


def _check_gpus(df, graph, ranks, where) -> None:
    """The log's GPUs (its device list's names, :func:`flowsolver._nccl_log.device_gpu`) against
    the graph's (``gpu_type`` of the ranks modelled): another generation (NCCL's tuning, NVLink's
    rate) is a ValueError, another part of one generation (SXM against PCIe) a warning; names
    not known here, or a graph without GPU types, are not checked."""
    from .._nccl_log import device_gpu

    said = {d[2] for d in (df.attrs.get("devices") or {}).values() if len(d) > 2 and d[2]}
    known = {name: device_gpu(name) for name in said}
    known = {k: v for k, v in known.items() if v is not None}
    if not known:
        return
    gpus = gpu_nodes(graph)
    chosen = gpus if ranks is None else [gpus[r] for r in _checks.rank_indices(graph, ranks, nodes=gpus)]
    types = {graph.nodes[g].get("gpu_type") for g in chosen} - {None}
    if not types:
        return
    ours = {t: GPU_GENERATION.get(t) for t in types}
    names = ", ".join(sorted(known))
    fix = "model the log's GPUs: --server (or gpu= of a server file) on the command line, a graph of them in the API"
    servers = _servers_of({g for _, g in known.values()}, {t for parts, _ in known.values() for t in parts})
    if servers:
        fix += f" (servers of them: {', '.join(servers)})"
    if any(g is not None and gen != g for _, gen in known.values() for g in ours.values()):
        theirs, mine = sorted({g for _, g in known.values()}), sorted(set(map(str, ours.values())))
        raise ValueError(f"{where}: the log ran on {names} ({', '.join(theirs)}), the graph's GPUs are "
                         f"{', '.join(sorted(types))} ({', '.join(mine)}): {fix}")
    if any(parts and not types & set(parts) for parts, _ in known.values()):
        _checks.warn_at_caller(f"{where}: the log ran on {names}, the graph's GPUs are {', '.join(sorted(types))}, "
                               f"another part of the generation (its links may differ): {fix}")


def _servers_of(generations, parts) -> list:
    """The registered server models whose GPU is one of ``parts``, else of one of ``generations``."""
    import topologies as tp

    gpus = {name: str(getattr(tp.servers.get_server(name).gpu, "name", tp.servers.get_server(name).gpu))
            for name in tp.server_names()}
    exact = [n for n, g in gpus.items() if g in parts]
    return exact or [n for n, g in gpus.items() if GPU_GENERATION.get(g) in generations]


def measured_rows(df):
    """The rows of a :func:`flowsolver.nccl_tests.read` table that time a collective: out of
    place, of a size > 0 (nccl-tests prints size 0 where a size is below the ranks times the
    type's bytes: nothing ran) and a time > 0."""
    return df[(df["placement"] == "out-of-place") & (df["time"] > 0) & (df["size"] > 0)]


def _say_left_out(df, rows) -> None:
    """Say which of a log's rows calibrate and ``--compare`` leave out where they are not what
    a reader expects: out-of-place rows of a size > 0 timed 0 us (a warning naming how many and
    their lines, :func:`flowsolver.nccl_tests.read`'s ``zero_time_lines``, else their sizes), and
    a log timed in place only (its out-of-place columns ``N/A``: a ValueError, the rows used
    are the out-of-place ones). ``rows``: :func:`measured_rows` of ``df``."""
    where = df.attrs.get("source", "log")
    out = df[df["placement"] == "out-of-place"]
    zero = out[(out["time"] == 0) & (out["size"] > 0)]
    if len(zero):
        lines = df.attrs.get("zero_time_lines")
        said = (f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines[:8]))}"
                f"{', ...' if len(lines) > 8 else ''}" if lines and len(lines) == len(zero) else
                f"size{'s' if len(zero) > 1 else ''} {', '.join(str(int(x)) for x in zero['size'][:8])}"
                f"{', ...' if len(zero) > 8 else ''} B")
        _checks.warn_at_caller(f"{where}: {len(zero)} out-of-place row{'s' if len(zero) > 1 else ''} "
                               f"({said}) time{'' if len(zero) > 1 else 's'} 0 us: no measurement, left out "
                               f"({len(rows)} row{'' if len(rows) == 1 else 's'} used)")
    if not len(rows):
        placed = df[(df["placement"] == "in-place") & (df["time"] > 0) & (df["size"] > 0)]
        if len(placed):
            raise ValueError(f"{where}: the log times its {len(placed)} rows in place only (its out-of-place "
                             "time, algbw and busbw are N/A): calibrate and flowsolver collective --compare use "
                             "the out-of-place rows (nccl-tests' first time / algbw / busbw columns); to use the "
                             "in-place times, in the API pass df[df['placement'] == 'in-place']"
                             ".assign(placement='out-of-place')")


def checked_log(df, op, n, given, graph=None, ranks=None):
    """``df`` (a :func:`flowsolver.nccl_tests.read` table of ``op``) as a measurement of ``n``
    ranks (``given``: the caller named them), refused as :func:`flowsolver.calibrate` refuses
    it: another rank count, rows nccl-tests counted wrong, or (with ``graph``) fewer hosts than
    the servers of ``ranks`` (default all its GPUs; more hosts: a warning, :func:`_check_hosts`).
    Returns ``df``.

    >>> from flowsolver import nccl_tests
    >>> head = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\\n"
    >>> df = nccl_tests.read(head + "8 2 float sum -1 30.1 0.00 0.00 5 29.9 0.00 0.00 0\\n", op="all_reduce")
    >>> checked_log(df, "all_reduce", 8, True)
    Traceback (most recent call last):
    ...
    ValueError: <text>: nccl-tests counted wrong results in 1 rows (sizes 8 B): they time a collective that did not work; drop them or fix the run
    """
    where = df.attrs.get("source", "log")
    _check_ranks(df, op, where, n, given, graph)
    _check_correct(df, where, n)
    _check_kinds({(op, c): dict.fromkeys(measured_rows(df)[c].astype(str), where) for c in ("type", "redop")
                  if c in df.columns})
    if graph is not None:
        _check_hosts(df, graph, ranks, where)
        _check_gpus(df, graph, ranks, where)
    return df


def _check_correct(df, where, n) -> None:
    """ValueError where nccl-tests found wrong results: ``#wrong`` > 0, a footer ``Out of bounds
    values : N FAILED``, or (older nccl-tests) an ``error`` above float round-off for ``n``
    ranks (:data:`_DELTA_MAX`). Those rows time a collective that did not work, no measurement."""
    failed = df.attrs.get("out_of_bounds")
    if failed:
        raise ValueError(f"{where}: the log's footer says 'Out of bounds values : {failed} FAILED': nccl-tests found "
                         "wrong results, the run timed a collective that did not work; fix the run")
    bad = df[df["#wrong"] > 0] if "#wrong" in df.columns else df[:0]
    if "error" in df.columns:
        limit = df["type"].map(lambda t: _DELTA_MAX.get(t, 1e-200)) * max(n - 1, 1) if "type" in df.columns else 0.0
        bad = df[df["error"] > limit]
    if len(bad):
        sizes = ", ".join(str(int(x)) for x in sorted(set(bad["size"]))[:4])
        raise ValueError(f"{where}: nccl-tests counted wrong results in {len(bad)} rows (sizes {sizes} B): "
                         "they time a collective that did not work; drop them or fix the run")


def _check_ranks(df, op, where, n, given, graph=None):
    """ValueError unless the log ran on ``n`` ranks (the graph's GPUs, or ``ranks=`` when
    ``given``): the count its device list or NCCL INFO lines state, else the one its busbw /
    algbw ratios allow; a log that says none is taken at ``ranks=`` only. A log of more ranks
    than the graph has GPUs is told to take a graph of that many (servers of ``graph``'s size)."""
    said, how = df.attrs.get("ranks"), df.attrs.get("ranks_from") or "its device list"
    span = busbw_range(df, op)               # (a table read without its op was not checked against it)
    if said is not None and span is not None and not span[0] <= said <= span[1]:
        raise ValueError(f"{where}: the log's rank counts disagree ({how} says {said}, busbw / algbw of {op} "
                         f"allows {span[0]} to {span[1]}): is the table of another op or run? Mend the log")
    if said is None:
        said, why = ranks_from_busbw(df, op)
        how = "busbw / algbw"
        if said is None:
            if given:
                return
            raise ValueError(f"{where}: the log does not say how many ranks it ran on (no device list, no NCCL INFO "
                             f"nranks; {why}): pass ranks= the GPU ranks it ran on (the graph has {n} GPUs; "
                             "--ranks on the command line)")
    total = None if graph is None else len(gpu_nodes(graph))
    if said != n and total is not None and said > total:
        per = _gpus_per_server(graph)
        hosts = df.attrs.get("nodes")
        how_many = f" (nodes={said // per}: {said // per} servers of {per} GPUs)" if per and said % per == 0 else ""
        raise ValueError(f"{where}: the log ran on {said} ranks ({how}"
                         + (f"; its device list names {hosts} hosts" if hosts else "")
                         + f"), the graph has {total} GPUs: time it on a graph of {said} GPUs{how_many}")
    if said != n:
        ours = "given by ranks=" if given else "the graph's GPUs"
        raise ValueError(f"{where}: the log ran on {said} ranks, the graph (ranks=) has {n} ({said} from {how}, {n} "
                         f"{ours}): pass ranks= the {said} GPU ranks it ran on (e.g. ranks=range({said}); --ranks on "
                         f"the command line) or a graph of {said} GPUs")


def _gpus_per_server(graph):
    """The GPUs of the server of GPU rank 0 (None where GPUs carry no ``server``)."""
    kinds, nodes = graph.nodes, gpu_nodes(graph)
    server = kinds[nodes[0]].get("server") if nodes else None
    return None if server is None else sum(1 for g in nodes if kinds[g].get("server") == server)


def fit_over(graph, opts):
    """``cal -> (options, calibration)`` that time a log's rows with the fit in ``cal`` over the
    call's own ``efficiency=`` (where a calibration is used, the call's own efficiency wins:
    inside calibrate the rows must see the fit, or a factor is fitted again on top of one the
    rows never ran at: efficiency=0.9 on a log made at 0.824 calibrated 0.755)."""
    given = opts.efficiency
    if given is None:
        return lambda cal: (opts, cal)
    if isinstance(given, (int, float)):          # one number for every link: per technology
        given = {d.get("tech"): float(given) for *_, d in graph.edges(data=True) if d.get("tech")}
    return lambda cal: (replace(opts, efficiency={**given, **cal.efficiency}), replace(cal, efficiency={}))
