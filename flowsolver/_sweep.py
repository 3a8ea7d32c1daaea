"""Batch sweeps over cluster families, technologies, routing, collectives, training and failures.

:func:`sweep` expands a grid into scenarios, runs each and returns a tidy pandas DataFrame,
one row per scenario: its parameters, ``status`` (a :class:`~flowsolver.Status` label:
``"ok"``, ``"stalled"``, ``"not_converged"``, or ``"error"`` with the message in ``error``) and
the metrics, named as the result fields they copy. Scenarios that differ only in link technology share a routing
pattern and are solved in one batched call (:func:`flowsolver.collective_variants`); the
solver buckets shapes, so a sweep compiles a handful of times, and with the persistent JAX
compilation cache (the solver's, on by default in the user's cache folder, or a folder named
by ``cache_dir``) a rerun compiles nothing. Results stream to CSV or Parquet (``out``) after every batch, each time
replacing the file atomically; a rerun skips the scenarios already there and runs again any
row that a cut or damaged file left incomplete.
``shard=(i, n)`` keeps every n-th scenario from the i-th (a Slurm array task, say);
``distributed=True`` calls ``jax.distributed.initialize()`` first, for jobs whose batched
arrays span processes.
"""

from __future__ import annotations

import json
import threading
from dataclasses import fields, replace

import numpy as np

import topologies as tp

from . import _checks
from ._status import Status
from ._sweep_grid import (COLLECTIVE_KEYS, COLLECTIVE_METRICS, MAX_SCENARIOS, TOPOLOGY_KEYS, TRAIN_KEYS,  # noqa: F401
                          TRAIN_METRICS, expand_grid)         # (COLLECTIVE_METRICS, TRAIN_METRICS: tests read them here)
from ._sweep_files import (CACHE_ENV, METRICS, cache_path, compilation_cache_for, default_cache_dir,  # noqa: F401
                           scenario_id, _catalogued)          # (scenario_id: tests read it here)
from ._sweep_table import _Table
from .collectives import CollectiveOptions, collective, collective_variants
from .routing import policy_of
from .training import step_arguments, training_step

__all__ = ["sweep", "expand_grid", "default_cache_dir", "CACHE_ENV", "TOPOLOGY_KEYS", "COLLECTIVE_KEYS", "TRAIN_KEYS",
           "METRICS", "MAX_SCENARIOS"]


def _build(s: dict):
    """The cluster of scenario ``s``; scenarios of one cluster share one graph (the last
    few built are kept), so the routes compiled for one are reused by the next."""
    size = {k: s[k] for k in TOPOLOGY_KEYS[s["family"]] if k in s}
    params = dict(link=s["link"], server=s["server"], oversubscription=s["oversubscription"],
                  fail_fraction=s["fail_fraction"], seed=s["seed"], **size)
    if not all(isinstance(v, (str, int, float, bool, type(None), list, tuple)) for v in params.values()):
        return tp.build(s["family"], **params)       # an object (a ServerModel, ...): built afresh
    # the catalogue entries the names stand for too: a link or server re-registered under its
    # name (overwrite=True) was served the cluster built with the old one
    key = json.dumps([s["family"], params, _catalogued(params)], sort_keys=True)
    graph = _BUILT.get(key)
    if graph is None:
        graph = tp.build(s["family"], **params)
        with _BUILT_LOCK:           # an executor's threads add and evict one at a time
            if key not in _BUILT:
                while len(_BUILT) >= BUILT_KEPT:
                    _BUILT.pop(next(iter(_BUILT)))
                _BUILT[key] = graph
            graph = _BUILT[key]
    return graph


#: clusters a sweep keeps built (by their parameters), oldest dropped first
BUILT_KEPT = 2
_BUILT: dict = {}
_BUILT_LOCK = threading.Lock()


#: the CollectiveOptions fields a sweep's grid sets per scenario (``policy``, ``subflows``, ``channels``)
GRID_OPTIONS = ("policy", "policy_options", "channels")


def _collective_kw(s, options=None):
    opts = {"subflows": _checks.integer("subflows", s["subflows"])} if policy_of(s["policy"]).subflows else None
    base = {} if options is None else options.keywords("sweep")
    # the grid's protocol where it names one (newuser26 #3: a sweep could not set it), else the options'
    protocol = {} if s.get("protocol") is None else {"protocol": s["protocol"]}
    return {**base, **dict(algorithm=s["algorithm"], policy=s["policy"], policy_options=opts, ranks=s["ranks"],
                           channels=None if s["channels"] is None else _checks.integer("channels", s["channels"])),
            **protocol}


def _metrics_collective(r, g) -> dict:
    # the longest step's bottleneck tier (CollectiveResult.bottleneck_tier, as the CLI prints it)
    return dict(status=Status.OK.label, error="", gpus=len(tp.gpus(g)), time=r.time, algbw=r.algbw,
                busbw=r.busbw, chosen_algorithm=r.algorithm, chosen_protocol=r.protocol,
                bottleneck_tier=r.bottleneck_tier)


def _run_train(s, g, options=None) -> dict:
    kw = {k: s[k] for k in ("tp", "pp", "dp", "ep", "cp", "vp", "micro_batch", "zero", "dp_overlap", "precision")
          if s[k] is not None}
    if s["global_batch"] is not None:
        kw["global_batch"] = _checks.integer("global_batch", s["global_batch"])
    if s["compute_efficiency"] is not None:         # "auto" (None: the same) or the flat model's fraction
        v = s["compute_efficiency"]
        # (a bool goes as it is, for training_step to refuse: float(True) ran as 1.0)
        kw["compute_efficiency"] = v if isinstance(v, (str, bool, np.bool_)) else float(v)
    collective_options = dict(policy=s["policy"]) if options is None else replace(options, policy=s["policy"])
    r = training_step(g, **step_arguments(model=s["model"], ranks=s["ranks"],
                                         collective_options=collective_options, **kw))
    worst = max(r.phases.values(), key=lambda p: p.exposed) if r.phases else None
    return dict(status=Status.OK.label, error="", gpus=r.gpus, step_time=r.step_time,
                tokens_per_s=r.tokens_per_s, speedup=r.speedup, comm_overhead=r.comm_overhead,
                chosen_algorithm=worst.algorithm if worst else "", bottleneck_tier=r.bottleneck_tier)


def _error(err) -> dict:
    return dict(status=Status.FAILED.label, error=f"{type(err).__name__}: {err}".splitlines()[0][:500])


def _batches(scenarios):
    """Groups of scenario indices that share a routing pattern (same everything but ``link``;
    collectives on unfailed graphs), in order of first appearance."""
    groups: dict = {}
    for i, s in enumerate(scenarios):
        if s["task"] == "collective" and not s["fail_fraction"]:
            key = json.dumps({k: v for k, v in s.items() if k != "link"}, sort_keys=True, default=str)
        else:
            key = f"single-{i}"
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _run_task(scenarios, options=None) -> list:
    """Metrics of scenarios that share one routing pattern: what an executor's worker runs
    (a module-level function, so that it pickles)."""
    return _run_batch(scenarios, list(range(len(scenarios))), options)


def _run_batch(scenarios, idx, options=None) -> list:
    """Metrics of the scenarios ``idx`` (one routing pattern)."""
    graphs, out = {}, {}
    for i in idx:
        try:
            graphs[i] = _build(scenarios[i])
        except Exception as err:    # a broken scenario is recorded, the sweep goes on
            out[i] = _error(err)
    live = [i for i in idx if i in graphs]
    if not live:
        return [out[i] for i in idx]
    first = scenarios[live[0]]
    try:          # a size checked as collective checks it (float(True) ran 1 byte), counts likewise
        size = None if first["task"] == "train" else _checks.positive_number("size", first["size"], "bytes")
        if first["task"] == "train":
            for i in live:
                out[i] = _run_train(scenarios[i], graphs[i], options)
        elif len(live) == 1:
            g = graphs[live[0]]
            out[live[0]] = _metrics_collective(collective(g, first["op"], size,
                                                          **_collective_kw(first, options)), g)
        else:
            structure = {}
            for i in live:   # technology swaps keep the structure; a different port count does not
                structure.setdefault(tuple(graphs[i].edges()), []).append(i)
            for members in structure.values():
                # each row its own cluster: its own communicator, as collective() on it
                res = collective_variants([graphs[i] for i in members], first["op"], size, communicator="each",
                                          **_collective_kw(first, options))
                for i, r in zip(members, res):
                    out[i] = _metrics_collective(r, graphs[i]) if r.status == Status.OK else \
                        dict(status=r.status.label, error=r.message)
    except Exception as err:
        for i in live:
            out.setdefault(i, _error(err))
    return [out[i] for i in idx]


def sweep(grid, *, out=None, resume: bool = True, progress: bool = True, shard=None,
          cache_dir="default", distributed: bool = False, executor=None, options=None,
          max_scenarios: int = MAX_SCENARIOS):
    """Run every scenario of ``grid`` and return a tidy DataFrame (needs pandas).

    Parameters
    ----------
    grid : dict of lists or list of dicts
        Scenario parameters: ``task`` (``"collective"`` or ``"train"``), ``ranks`` (GPU ranks
        or node ids taking part, as :func:`~flowsolver.collective` takes them; a flat list
        is one rank set, a list of lists sweeps over them, as for ``dims``), ``family`` and its
        size (``nodes``; ``k``; ``leaves``, ``spines``, ``hosts_per_leaf``; ``p``, ``a``, ``h``,
        ``g``; ``dims``, ``wrap``), ``link``, ``server``, ``oversubscription``,
        ``fail_fraction`` and ``seed`` (switch cables failed at random; routes avoid them),
        ``policy``, ``subflows``; collectives: ``op``, ``size`` (bytes), ``algorithm``, ``protocol``
        (what ``collective`` takes; None: the options' or NCCL's choice),
        ``channels``; training: ``model``, ``tp``, ``pp``, ``dp``, ``ep``, ``cp``, ``vp``,
        ``global_batch``, ``micro_batch``, ``zero``, ``dp_overlap``, ``compute_efficiency``
        (``"auto"`` or None: training_step's default, the kernel tables where the GPU has them; a
        fraction: the flat model), ``precision``. Missing ones take ``DEFAULTS``.
    out : str or Path, optional
        ``.csv`` or ``.parquet`` file the rows stream to, rewritten after every batch: into a
        temporary file beside it, then renamed over it, so that a run stopped at any moment
        leaves every row finished before the last write readable.
    resume : bool
        Skip scenarios already in ``out`` with status ok (failed ones are run again). CSV rows
        that a cut or damaged file left incomplete (no final newline, a wrong number of
        fields, a metric that is not a number) are dropped with a ``RuntimeWarning`` and run
        again, and so are rows with status ok whose metric is empty, NaN, infinite or out of
        its range (a time or bandwidth <= 0, ``comm_overhead`` outside [0, 1]: ``OK_RANGES``
        in ``flowsolver._sweep_files``), and, with a ``RuntimeWarning``, rows another flowsolver version computed
        (column ``flowsolver_version``; a row without one counts as another version); a file that cannot be read,
        or is not a sweep's, is a ValueError naming it (pass ``resume=False`` to overwrite it).
    progress, distributed : bool
        A tqdm progress bar (when tqdm is installed); ``jax.distributed.initialize()`` first
        (multi-process jobs).
    shard : (i, n), optional
        Run only scenarios ``i, i + n, i + 2n, ...`` (deterministic order).
    cache_dir : str, Path or None
        Persistent JAX compilation cache folder for this call only (JAX's settings restored
        after); ``"default"``: :func:`default_cache_dir` (``$FLOWSOLVER_CACHE_DIR``'s folder,
        else none of its own); None or ``"off"``: none of its own. The solver's own cache
        applies either way (``FLOWSOLVER_CACHE_DIR=off`` turns it off: ``solver._placement``).
    executor : concurrent.futures.Executor, optional
        Run the scenarios there: a Dask ``Client.get_executor()``, a Ray or MPI pool
        executor, a process pool started with ``spawn`` or ``forkserver``
        (``ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn"))``; one that
        forks, Linux's default before Python 3.14, is refused: forked workers deadlock once
        JAX has run). Scenarios that share a routing are one task (they stay
        batched); rows, the ``out`` file and resume are as in a serial run (the file in
        scenario order); the progress bar advances as tasks finish. A task that dies
        records its scenarios as errors.
    options : CollectiveOptions, optional
        The collective options of every scenario (:class:`flowsolver.CollectiveOptions`:
        protocol, chunk, efficiency, latencies, calibration) but those the grid sets
        (``policy``, ``subflows``, ``channels``: leave them at their defaults here).
        Training scenarios take it as ``training_step``'s ``collective_options``. Rows of
        ``out`` computed under other options are not resumed.
    max_scenarios : int
        The most scenarios the grid may expand to (default ``MAX_SCENARIOS``, 100,000); a
        larger grid is a ValueError giving its count, before any scenario is made.

    Returns
    -------
    pandas.DataFrame
        One row per scenario: ``id``, the parameters, ``status``, ``error`` and the metrics
        ``gpus``, ``chosen_algorithm`` (what ``"auto"`` picked; for training
        the phase with the most exposed time), ``chosen_protocol`` (a collective's),
        ``bottleneck_tier``; with collectives in the
        grid ``time`` (s), ``algbw``, ``busbw`` (bytes/s); with training ``step_time`` (s),
        ``tokens_per_s``, ``speedup``, ``comm_overhead``; last ``flowsolver_version``.

    Examples
    --------
    >>> df = sweep({"nodes": [1, 2], "link": ["ib_ndr", "ib_hdr"], "size": [2**26]}, progress=False,
    ...            cache_dir=None)
    >>> df[["nodes", "link", "status"]].values.tolist()[:2], bool((df["busbw"] > 0).all())
    ([[1, 'ib_ndr', 'ok'], [1, 'ib_hdr', 'ok']], True)
    """
    try:
        import pandas  # noqa: F401   (fail before any scenario runs)
    except ImportError:
        raise ImportError("sweep needs pandas: install the 'analysis' extra (pip install 'flowsolver[analysis]')") \
            from None
    _check_executor(executor)
    _check_options(options)
    options = None if options == CollectiveOptions() else options        # the defaults: the rows of no options
    if bad := [f"{n}={v!r}" for n, v in (("resume", resume), ("progress", progress), ("distributed", distributed))
               if not isinstance(v, bool)]:
        raise ValueError(f"resume, progress and distributed must be True or False, got {', '.join(bad)}")
    scenarios = _shard(expand_grid(grid, max_scenarios=max_scenarios), shard)
    cache = cache_path(cache_dir)
    table = _Table(scenarios, out, resume, options)
    if distributed:
        import jax

        jax.distributed.initialize()
    bar = _progress_bar(progress, len(scenarios), len(scenarios) - len(table.todo))
    batches = _batches(table.pending)
    try:
        with compilation_cache_for(cache):
            if executor is None:
                for batch in batches:
                    rows = _run_batch(table.pending, batch) if options is None else \
                        _run_batch(table.pending, batch, options)
                    table.record(batch, rows, bar)
            else:                        # one task per routing pattern, so batching survives
                import concurrent.futures

                futures = {executor.submit(_run_task, [table.pending[j] for j in batch], options): batch
                           for batch in batches}
                for future in concurrent.futures.as_completed(futures):
                    batch = futures[future]
                    try:
                        metrics = future.result()
                    except Exception as err:      # the task itself died (a lost worker): its rows say so
                        metrics = [_error(err)] * len(batch)
                    table.record(batch, metrics, bar)
    finally:
        if bar is not None:
            bar.close()
    return table.frame()


def _check_options(options) -> None:
    """TypeError for ``options`` that is not a CollectiveOptions; ValueError for one that
    sets what the grid sets per scenario."""
    if options is None:
        return
    if not isinstance(options, CollectiveOptions):
        raise TypeError(f"options must be a flowsolver.CollectiveOptions, got {type(options).__name__}")
    options.keywords("sweep (the grid sets policy, subflows and channels)",
                     [f.name for f in fields(options) if f.name not in GRID_OPTIONS])


def _check_executor(executor):
    """A ValueError for an executor a sweep cannot use: one without ``submit``, or a process
    pool that forks (its workers inherit the locks JAX's threads held at the fork and
    deadlock on their first JAX call, and the sweep waits for them for ever)."""
    if executor is None:
        return
    if not callable(getattr(executor, "submit", None)):
        raise ValueError(f"executor must be a concurrent.futures.Executor (e.g. a Dask Client.get_executor()), "
                         f"got {type(executor).__name__}")
    import concurrent.futures
    import multiprocessing

    if isinstance(executor, concurrent.futures.ProcessPoolExecutor):
        context = getattr(executor, "_mp_context", None)
        method = context.get_start_method() if context is not None else multiprocessing.get_start_method()
        if method == "fork":
            raise ValueError("executor: a ProcessPoolExecutor that starts its workers with 'fork' deadlocks once "
                             "JAX has run in this process (JAX is multithreaded); create it with "
                             "ProcessPoolExecutor(mp_context=multiprocessing.get_context(\"spawn\"))")


def _shard(scenarios, shard):
    if shard is None:
        return scenarios
    i, n = shard
    if not (isinstance(i, int) and isinstance(n, int) and n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard!r}")
    return scenarios[i::n]


def _progress_bar(progress, total, initial):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="scenario", desc="sweep")
