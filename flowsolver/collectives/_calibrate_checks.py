"""The checks a calibration makes of an nccl-tests log before fitting it: its rank count (stated,
or read from the ratio of its bus and algorithm bandwidths) against the graph's, its hosts against
the servers modelled, its GPUs against the graph's, rows nccl-tests counted wrong, mixed data types
or reduction ops, and the rows it measured (:func:`measured_rows`)."""

from __future__ import annotations

from .. import _checks
from .._nccl_log import BUSBW_SCALE, busbw_range
from ..routing import gpu_nodes
from ._nccl import GPU_GENERATION

__all__ = ["ranks_from_busbw", "checked_log", "measured_rows"]


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


def _server(graph, gpu):
    """The server a GPU node is on (a compute tray of it, where its NVLink domain spans trays: NVL72)."""
    return graph.nodes[gpu].get("server", gpu), graph.nodes[gpu].get("tray")


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
