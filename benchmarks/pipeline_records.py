"""The collective pipeline's fit machinery, shared by ``benchmarks/fit_pipeline.py`` (which fits
and reports) and ``benchmarks/validate.py`` (which reports every point held out): what NCCL's
cost model hands :func:`flowsolver.collectives._pipeline.pipeline_time` per corpus point
(:class:`Capture`), a point's fit record, the fit of the floors and fills and the
leave-one-source-out refit (units: seconds, steps).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import fields
from pathlib import Path
import sys

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from flowsolver.collectives import _nccl_timing as _tuned  # noqa: E402
from flowsolver.collectives._host import with_host  # noqa: E402
from flowsolver.collectives._nccl_timing import transfer_of  # noqa: E402
from flowsolver.collectives._pipeline import Pipeline, pipeline_time  # noqa: E402

#: the pipeline's constants fitted on the corpus: all but the NVLS step floor, which the corpus
#: cannot tell (the whole corpus fits it at 0 and so do the folds, but the one without Azure's
#: runs: 7.6 us, pricing Azure's 2-512 KiB NVLS all-reduces at 44 us against 26-43 measured); it
#: stays at the library's value, 0 (``_pipeline.PIPELINE``)
NAMES = [f.name for f in fields(Pipeline) if f.name != "floor_nvls"]
#: the optimiser works in microseconds and steps
SCALE = np.array([1e-6 if n.startswith("floor") else 1.0 for n in NAMES])
START = np.array([2.0 if n.startswith("floor") else 1.0 for n in NAMES])


class Capture:
    """While active, what NCCL's cost model hands the pipeline, per ``(algorithm, protocol)``
    of the last collective timed: ``with Capture() as seen: collective(...)``, then
    :func:`pipe_of` picks the chosen pair's."""

    def __enter__(self):
        self.seen: dict = {}

        def spy(a, proto, op, size, ranks, nodes, channels, latency, algbw, params=None, stage_algbw=None,
                share_of=None, channel_rate=0.0, nccl=None):
            self.seen[a, proto] = dict(algorithm=a, protocol=proto, op=op, size=size, ranks=ranks, nodes=nodes,
                                       channels=channels, latency=float(latency), algbw=float(algbw),
                                       stage_algbw=None if stage_algbw is None else [float(x) for x in stage_algbw],
                                       share_of=share_of, channel_rate=float(channel_rate),
                                       nccl=None if nccl is None else list(nccl))
            return pipeline_time(a, proto, op, size, ranks, nodes, channels, latency, algbw, params, stage_algbw,
                                 share_of, channel_rate, nccl)

        _tuned.pipeline_time = spy
        return self

    def __exit__(self, *exc):
        _tuned.pipeline_time = pipeline_time
        return False

    def pipe_of(self, algorithm, protocol):
        """The pipeline's inputs for the chosen pair (None: its time is not the pipeline's)."""
        return self.seen.get((algorithm, protocol))


#: the oldest NCCL whose runs the pipeline's constants are fitted on: 2.12, the first with PXN
#: (NCCL's release notes; ``src/graph/paths.cc`` ``ncclTopoPxnPaths``), which the model's routes
#: take by default. Older runs (the corpus's 2.8 / 2.9 logs of 2021) are modelled and reported,
#: always held out, never fitted on: their kernels and NIC paths are not the ones the model follows.
OLDEST_FITTED_NCCL = (2, 12)


def nccl_version(text) -> "tuple | None":
    """``(major, minor)`` of a corpus row's ``nccl_version`` text (None where it is not given).

    >>> nccl_version("2.8.4-1 (the repository's table)"), nccl_version("2.26.2+cuda12.8"), nccl_version("")
    ((2, 8), (2, 26), None)
    """
    import re
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def record(pt: dict, pipe) -> dict:
    """A fit record of a modelled ``ok`` corpus point (``fitted``: whether its NCCL is one the
    constants are fitted on, :data:`OLDEST_FITTED_NCCL`; a version not given counts as one)."""
    version = nccl_version(pt.get("nccl_version"))
    return dict(source=pt["source"], curve=pt["curve"], band=pt["band"], measured=pt["measured"],
                model=pt["model"], pipe=pipe, fitted=version is None or version >= OLDEST_FITTED_NCCL)


def held_out(records: list[dict]) -> list[float]:
    """Each record's model time with the pipeline fitted on the other sources only (and on
    runs of :data:`OLDEST_FITTED_NCCL` or later: :func:`fit`)."""
    out = [math.nan] * len(records)
    for source in sorted({r["source"] for r in records}):
        params = fit([r for r in records if r["source"] != source])
        for i, r in enumerate(records):
            if r["source"] == source:
                out[i] = predict(r, params)
    return out


def predict(rec: dict, params: Pipeline) -> float:
    p = rec["pipe"]
    if p is None:
        return rec["model"]
    # the host's floor where one thread issued the call for several GPUs (nccl-tests -g N), and
    # the host's work before a call timed on its own from an idle device (torch.distributed)
    return with_host(pipeline_time(p["algorithm"], p["protocol"], p["op"], p["size"], p["ranks"], p["nodes"],
                                   p["channels"], p["latency"], p["algbw"], params, p.get("stage_algbw"),
                                   p.get("share_of"), p.get("channel_rate", 0.0),
                                   None if p.get("nccl") is None else tuple(p["nccl"])),
                     p.get("gpus_per_thread", 1), p.get("host_overhead", 0.0))


def estimate(rec: dict) -> float:
    """NCCL's estimate of its pick (the model before the pipeline)."""
    p = rec["pipe"]
    return rec["model"] if p is None else p["latency"] + p["size"] / p["algbw"]


def fit(records: list[dict], start=START) -> Pipeline:
    from scipy.optimize import least_squares

    use = [r for r in records if r["pipe"] is not None and r["pipe"]["protocol"] != "LL" and r.get("fitted", True)]
    weight = Counter(r["source"] for r in use)

    def residual(x):
        params = Pipeline(**dict(zip(NAMES, x * SCALE)))
        return np.array([math.log(predict(r, params) / r["measured"]) / math.sqrt(weight[r["source"]]) for r in use])

    res = least_squares(residual, start, bounds=(np.zeros(len(NAMES)), np.full(len(NAMES), 1e3)),
                        loss="soft_l1", f_scale=0.1)
    x = np.array(res.x)
    base = residual(x)
    for i in range(len(NAMES)):                 # a parameter whose removal no point feels: 0 (none)
        moved = x.copy()
        moved[i] = 0.0
        if np.max(np.abs(residual(moved) - base)) < 1e-9:
            x[i] = 0.0
    return Pipeline(**dict(zip(NAMES, x * SCALE)))


# --- the P2P channel's rate (flowsolver.collectives._p2p.P2P_CHANNEL_SHARE) ---------------------

class P2pCapture:
    """While active, what the send / receive's channel bound was handed for the last call:
    ``with P2pCapture() as seen: collective(...)``, then ``seen.record`` (None: no bound)."""

    def __enter__(self):
        from flowsolver.collectives import _choice, _p2p
        self._choice, self.record = _choice, None

        def spy(steps, time, size, hw, model=None):
            if getattr(hw, "p2p", None) is not None:
                transfer = transfer_of(steps)
                comm = hw.p2p          # an all-to-all's rank moves (ranks - 1) / ranks of its buffer
                moved = float(size) * (comm.ranks - 1) / comm.ranks if comm.all_to_all else float(size)
                self.record = dict(other=float(time) - transfer, transfer=transfer, size=moved,
                                   channels=comm.channels(size), nvlink_bw=float(comm.nvlink_view),
                                   remote=comm.remote_share())
            return _p2p.p2p_bound(steps, time, size, hw, model)

        _choice.p2p_bound = spy
        return self

    def __exit__(self, *exc):
        from flowsolver.collectives import _p2p
        self._choice.p2p_bound = _p2p.p2p_bound
        return False


def p2p_predict(rec: dict, share: float) -> float:
    """A send / receive point's time with a P2P channel moving ``share`` of the NVLink rate (and
    across the network, the ``remote`` share of its bytes, no more than NCCL's per-channel
    network rate, ``_p2p.NET_CHANNEL_RATE``), as ``P2pComm.least_transfer`` prices it."""
    from flowsolver.collectives._p2p import NET_CHANNEL_RATE
    p = rec["p2p"]
    transfer = p["transfer"]
    remote = p.get("remote", 0.0)
    local = share * p["nvlink_bw"] if p["nvlink_bw"] > 0 else math.inf
    per_byte = (1.0 - remote) / local + (remote / min(local, NET_CHANNEL_RATE) if remote > 0 else 0.0)
    if per_byte > 0 and p["size"] > 0:
        transfer = max(transfer, p["size"] * per_byte / p["channels"])
    return with_host(p["other"] + transfer, p.get("gpus_per_thread", 1), p.get("host_overhead", 0.0))


def p2p_fit(records: list[dict]) -> float:
    """The share least soft-L1 in log error over ``records`` (each source weighted by
    1/sqrt(its points), as :func:`fit`); NaN where no record has a bound to feel it."""
    from scipy.optimize import least_squares

    use = [r for r in records if r.get("p2p") is not None and r["p2p"]["nvlink_bw"] > 0 and r.get("fitted", True)]
    if not use:
        return math.nan
    weight = Counter(r["source"] for r in use)

    def residual(x):
        return np.array([math.log(p2p_predict(r, x[0]) / r["measured"]) / math.sqrt(weight[r["source"]])
                         for r in use])

    return float(least_squares(residual, [0.05], bounds=([1e-3], [1.0]), loss="soft_l1", f_scale=0.1).x[0])


def p2p_held_out(records: list[dict]) -> tuple[list[float], dict]:
    """Each send / receive record's time with the share fitted on the other sources (the
    others' own ``model``), and the share per left-out source."""
    out = [r["model"] for r in records]
    folds = {}
    for source in sorted({r["source"] for r in records if r.get("p2p") is not None}):
        share = p2p_fit([r for r in records if r["source"] != source])
        folds[source] = share
        for i, r in enumerate(records):
            if r["source"] == source and r.get("p2p") is not None and math.isfinite(share):
                out[i] = p2p_predict(r, share)
    return out, folds
