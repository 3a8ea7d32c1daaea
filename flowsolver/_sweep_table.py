"""A sweep's table of rows: those resumed from its ``out`` file, then each batch's as it
finishes, written back in scenario order (:func:`flowsolver.sweep`)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from ._status import Status
from ._sweep_grid import COLLECTIVE_KEYS, COLLECTIVE_METRICS, DEFAULTS, TRAIN_KEYS, TRAIN_METRICS
from ._sweep_files import (METRICS, VERSION_COLUMN, empty, ok_row_problem, read_rows, scenario_id, typed_frame,
                           write_atomic, _user_definitions)
from ._version import __version__

#: per task, the parameter columns of the other task, which it never reads (a grid that sets
#: one is refused: ``_sweep_grid``): its rows leave them empty rather than show the defaults
_UNUSED = {"collective": frozenset(TRAIN_KEYS), "train": frozenset(COLLECTIVE_KEYS)}


class _Table:
    """The rows of a sweep: those resumed from ``out``, then each batch's as it finishes,
    streamed to ``out`` in scenario order."""

    def __init__(self, scenarios, out, resume, options=None):
        # rows run under options= say so in an "options" column (their ids differ too)
        self.options = None if options is None else repr(options)
        params = list(dict.fromkeys(k for s in scenarios for k in s)) + ([] if options is None else ["options"])
        tasks = {s.get("task", DEFAULTS["task"]) for s in scenarios}
        skip = (set() if "train" in tasks else set(TRAIN_METRICS)) | \
            (set() if "collective" in tasks else set(COLLECTIVE_METRICS))
        # each row names the version that computed it, after its metrics
        self.columns = ["id"] + params + [k for k in METRICS if k not in skip] + [VERSION_COLUMN]
        self.path = None if out is None else Path(out).expanduser()
        if self.path is not None:
            if self.path.suffix not in (".csv", ".parquet"):
                raise ValueError(f"out must end in .csv or .parquet, got {str(out)!r}")
            if self.path.is_dir():
                raise ValueError(f"out: {str(self.path)!r} is a folder; give a file name")
            if not self.path.resolve().parent.is_dir():
                raise ValueError(f"out: folder {str(self.path.resolve().parent)!r} does not exist")
        self.scenarios = scenarios
        # the options' repr made once; a user-registered link or server's values are in the id
        self.ids = [scenario_id(s, self.options, _user_definitions(s)) for s in scenarios]
        # a scenario given twice (nodes=[1, 2, 1]) has one id and a row at each of its places
        self.places = {}
        for k, sid in enumerate(self.ids):
            self.places.setdefault(sid, []).append(k)
        done = read_rows(self.path) if (self.path is not None and resume) else None
        # a resumed sweep keeps its finished rows (their parameters are the scenario's, the
        # metrics the file's) and runs again the scenarios that failed or are not there; each row
        # has the scenario place it fills (slots; None: another grid's or shard's row)
        self.rows, self.slots, filled, unfit, stale = [], [], set(), [], {}
        for r in done or []:
            places = self.places.get(r["id"])
            if places is None:
                self.rows.append(r)              # another grid's or shard's row: kept in the file
                self.slots.append(None)
            elif r["status"] == Status.OK.label:
                free = [k for k in places if k not in filled]
                if not free:                     # as many rows of this scenario as it has places
                    continue
                if (version := _version_of(r)) != __version__:      # another model's figures: run again
                    stale[version] = stale.get(version, 0) + 1
                    continue
                if problem := ok_row_problem(r, _FILLED[scenarios[free[0]]["task"]]):
                    unfit.append(f"{r['id']} ({problem})")       # an edited or damaged row: run again
                    continue
                filled.add(free[0])
                self.rows.append(self._row(free[0], r))
                self.slots.append(free[0])
        if unfit:
            warnings.warn(f"out {str(self.path)!r}: {len(unfit)} row(s) with status ok but a metric missing or out "
                          f"of range (id {'; '.join(unfit)}): not resumed, their scenarios will run again",
                          RuntimeWarning, stacklevel=3)
        if stale:
            said = ", ".join(f"{n} by {v or 'a version before rows named theirs'}" for v, n in stale.items())
            warnings.warn(f"out {str(self.path)!r}: {sum(stale.values())} finished row(s) computed by another "
                          f"flowsolver ({said}; this is {__version__}, column {VERSION_COLUMN}): not resumed, "
                          f"their scenarios will run again", RuntimeWarning, stacklevel=3)
        # the file keeps the parameter columns of the other grids' rows it holds (an "options" one too)
        extra = [key for r in self.rows for key in r if key not in self.columns and key not in METRICS]
        cut = self.columns.index(next(k for k in METRICS if k in self.columns))
        # ... and the metric columns of the other task's rows (a collective grid dropped a training
        # row's step_time from the file, and a training grid a collective row's time)
        held = {key for r in self.rows for key, v in r.items() if key in METRICS and not empty(v)}
        metrics = [k for k in METRICS if k in self.columns or k in held]
        self.file_columns = self.columns[:cut] + list(dict.fromkeys(extra)) + metrics + [VERSION_COLUMN]
        self.todo = [k for k in range(len(self.ids)) if k not in filled]
        self.pending = [scenarios[i] for i in self.todo]

    def _row(self, k, metrics):
        """The row of scenario ``k``: its id, its parameters (lists as JSON) and ``metrics``."""
        s = self.scenarios[k]
        # the other task's parameters (defaults it never read) are left empty, not shown as set
        unused = _UNUSED.get(s.get("task", DEFAULTS["task"]), ())
        row = {"id": self.ids[k], **{key: None if key in unused else json.dumps(v) if isinstance(v, (list, tuple))
                                     else v for key, v in s.items()}}
        if self.options is not None:
            row["options"] = self.options
        row.update({key: metrics.get(key, math.nan if METRICS[key] in (float, "Int64") else "") for key in METRICS})
        row[VERSION_COLUMN] = __version__
        return row

    def _in_order(self) -> list:
        """The rows, the other grids' first (in the file's order), then this sweep's in scenario order."""
        return [r for _, r in sorted(zip(self.slots, self.rows), key=lambda pair: -1 if pair[0] is None else pair[0])]

    def record(self, batch, metrics, bar=None):
        for j, m in zip(batch, metrics):
            self.rows.append(self._row(self.todo[j], m))
            self.slots.append(self.todo[j])
        if self.path is not None:     # in scenario order, whatever order the tasks finished in
            write_atomic(typed_frame(self._in_order(), self.file_columns), self.path)
        if bar is not None:
            bar.update(len(batch))

    def frame(self):
        mine = [r for k, r in sorted((k, r) for k, r in zip(self.slots, self.rows) if k is not None)]
        return typed_frame(mine, self.columns).reset_index(drop=True)



def _version_of(row) -> str:
    """The version a row read back names ("" where the file has no such column or cell)."""
    version = row.get(VERSION_COLUMN)
    return "" if empty(version) else str(version)


#: the metric columns a finished row of each task has filled, each in its range (OK_RANGES; a
#: row without them is run again)
_FILLED = {"collective": ("gpus", *COLLECTIVE_METRICS, "chosen_algorithm"), "train": ("gpus", *TRAIN_METRICS)}
