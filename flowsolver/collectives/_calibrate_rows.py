"""The rows a calibration fits: an nccl-tests log's sizes and out-of-place times per op,
its rank count and ranks' order, the NCCL settings it states, checked against the graph
(:mod:`._calibrate_checks`); and the options the rows are timed with (:func:`fit_over`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import _checks, nccl_tests
from ..routing import gpu_nodes
from ._allowed import log_choices
from ._host import log_gpus_per_thread
from .._nccl_env import NCCL_FUNCTIONS
from ._algorithms import NCCL_ALGORITHMS
from ._calibrate_checks import _check_kinds, _say_left_out, _server, checked_log, measured_rows
from ._nccl import OPS, reduction

__all__ = ["log_reduction", "log_ranks", "LogRows", "log_rows"]

_US = 1e-6


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
