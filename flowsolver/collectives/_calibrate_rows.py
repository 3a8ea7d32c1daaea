"""The rows a calibration fits: an nccl-tests log's sizes and out-of-place times per op,
its rank count read from the log (or from the ratio of its bus and algorithm bandwidths)
and checked against the graph's; and the options the rows are timed with (:func:`fit_over`)."""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import replace

from .. import _checks, nccl_tests
from ..routing import gpu_nodes
from ._nccl import OPS

__all__ = ["ranks_from_busbw"]

_US = 1e-6


#: busbw = algbw x SCALE (p - 1) / p (nccl-tests' PERFORMANCE.md); other ops' busbw is their algbw
_BUSBW_SCALE = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}
_PRINTED = 0.0050001        # nccl-tests prints algbw and busbw (GB/s) to 2 decimals (a hair over half a unit)


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
    scale = _BUSBW_SCALE.get(op)
    if scale is None:
        return None, f"busbw / algbw is 1 for {op} whatever the rank count"
    lo, hi = 1.0, math.inf
    for a, b in zip(df["algbw"], df["busbw"]):
        if not (a > _PRINTED and b >= 0):          # NaN, or printed as 0.00
            continue
        f_lo, f_hi = max(b - _PRINTED, 0.0) / (a + _PRINTED), (b + _PRINTED) / (a - _PRINTED)
        lo = max(lo, scale / (scale - f_lo) if f_lo < scale else math.inf)
        hi = min(hi, scale / (scale - f_hi) if f_hi < scale else math.inf)
    if lo > hi + 1e-9:
        return None, "busbw / algbw disagree between rows"
    first, last = math.ceil(lo - 1e-9), math.floor(hi + 1e-9) if hi < math.inf else math.inf
    if first == last:
        return int(first), ""
    return None, "busbw / algbw is printed too coarsely to tell"


def _rows(logs, graph, ranks, op):
    """((op, size bytes, measured time s) of every out-of-place row, the rank count, the
    algorithms the logs forced, the GPUs a thread drove that each states, None where one does
    not), logs checked against the graph."""
    n = len(gpu_nodes(graph)) if ranks is None else len(list(ranks))
    out, algorithms, per_thread = [], set(), set()
    one = isinstance(logs, str) or not hasattr(logs, "__iter__") or hasattr(logs, "columns")   # a DataFrame is one log
    for log in ([logs] if one else list(logs)):
        df = log if hasattr(log, "attrs") and hasattr(log, "columns") else nccl_tests.read(log, op=op)
        log_op = df.attrs.get("op") or op
        where = df.attrs.get("source", "log")
        if log_op not in OPS:
            raise ValueError(f"{where}: the log does not say which collective it ran; pass op=")
        if op is not None and log_op != op:
            raise ValueError(f"{where}: the log tests {log_op}, not {op}")
        checked_log(df, log_op, n, ranks is not None, graph, ranks)
        if df.attrs.get("algorithm"):
            algorithms.add(df.attrs["algorithm"])
        per_thread.add(df.attrs.get("gpus_per_thread") or None)
        rows = measured_rows(df)
        out += [(log_op, float(s), float(t) * _US) for s, t in zip(rows["size"], rows["time"])]
    if not out:
        raise ValueError("logs hold no result rows to calibrate on")
    return out, n, algorithms, per_thread


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
    # a host is a server, or one compute tray of a server whose NVLink domain spans trays (NVL72)
    servers = len({(graph.nodes[g].get("server", g), graph.nodes[g].get("tray")) for g in chosen})
    said = (f"{where}: the log ran on {hosts} hosts, the ranks modelled are on {servers} servers (or trays): "
            "pass ranks= (or --ranks) naming GPUs on as many servers as the log's hosts")
    if hosts < servers:
        raise ValueError(said)
    if hosts > servers:
        frame, level = sys._getframe(0), 1        # the warning names the caller's line, not the library's
        while frame is not None and frame.f_globals.get("__name__", "").startswith("flowsolver."):
            frame, level = frame.f_back, level + 1
        warnings.warn(said + " (unless the hosts are containers sharing those servers)", stacklevel=level)


def measured_rows(df):
    """The rows of a :func:`flowsolver.nccl_tests.read` table that time a collective: out of
    place, of a size > 0 (nccl-tests prints size 0 where a size is below the ranks times the
    type's bytes: nothing ran) and a time > 0."""
    return df[(df["placement"] == "out-of-place") & (df["time"] > 0) & (df["size"] > 0)]


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
    _check_ranks(df, op, where, n, given)
    _check_correct(df, where)
    if graph is not None:
        _check_hosts(df, graph, ranks, where)
    return df


def _check_correct(df, where) -> None:
    """ValueError where nccl-tests counted wrong results (``#wrong`` > 0): those rows time a
    collective that did not work, no measurement to fit."""
    if "#wrong" not in df.columns:
        return
    bad = df[df["#wrong"] > 0]
    if len(bad):
        sizes = ", ".join(str(int(x)) for x in sorted(set(bad["size"]))[:4])
        raise ValueError(f"{where}: nccl-tests counted wrong results in {len(bad)} rows (sizes {sizes} B): "
                         "they time a collective that did not work; drop them or fix the run")


def _check_ranks(df, op, where, n, given):
    """ValueError unless the log ran on ``n`` ranks (the graph's GPUs, or ``ranks=`` when
    ``given``): the count its device list or NCCL INFO lines state, else the one its busbw /
    algbw ratios allow; a log that says none is taken at ``ranks=`` only."""
    said, how = df.attrs.get("ranks"), df.attrs.get("ranks_from") or "its device list"
    if said is None:
        said, why = ranks_from_busbw(df, op)
        how = "busbw / algbw"
        if said is None:
            if given:
                return
            raise ValueError(f"{where}: the log does not say how many ranks it ran on (no device list, no NCCL INFO "
                             f"nranks; {why}): pass ranks= the GPU ranks it ran on (the graph has {n} GPUs; "
                             "--ranks on the command line)")
    if said != n:
        ours = "given by ranks=" if given else "the graph's GPUs"
        raise ValueError(f"{where}: the log ran on {said} ranks, the graph (ranks=) has {n} ({said} from {how}, {n} "
                         f"{ours}): pass ranks= the {said} GPU ranks it ran on (e.g. ranks=range({said}); --ranks on "
                         f"the command line) or a graph of {said} GPUs")


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
