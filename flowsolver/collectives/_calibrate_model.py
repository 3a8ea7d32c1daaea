"""What calibrate times for one nccl-tests row: the rank groups the test runs (one group of
every rank; ``sendrecv_perf``'s ring shift, one pair a rank, all at once) and a row's model,
solved once and re-timed at each trial of the fit (units: bytes, seconds)."""

from __future__ import annotations

from dataclasses import replace

from .._status import Status
from ..routing import unchanged
from ._allowed import only_of
from ._choice import is_tuned
from ._collective import _gathered, collective, collective_with, solve_collective
from ._planned import _plans
from ._lockstep import row_groups
from ._nccl_timing import nccl_pick, transfer_of, tuned_times
from ._solve import time_plans
from ._options import communicator_options

__all__ = ["row_groups", "row_time", "nccl_tests_collective"]


def row_time(graph, op, size, ranks, algorithm, options, model) -> float:
    """The seconds the model gives one row of ``op`` at ``size`` bytes on ``ranks`` (the rank
    groups of :func:`row_groups`, in lockstep) with the options and calibration ``model``."""
    result, = solve_collective(graph, op, float(size), row_groups(graph, op, ranks), algorithm,
                               model.apply(options), model=model)
    if result.status != Status.OK:
        raise ValueError(result.message)
    return result.time


def nccl_tests_collective(graph, op, size, *, ranks=None, algorithm="auto", **keywords):
    """:func:`flowsolver.collective` as nccl-tests' test of ``op`` runs it on ``ranks`` (in the
    log's rank order; default every GPU), which calibrate fits a log's rows to and
    ``flowsolver collective --compare`` sets beside them: the rank groups of :func:`row_groups`
    in lockstep, so a send / receive is ``sendrecv_perf``'s ring shift (every rank sending to
    the next at once; its slowest pair's time, every pair's flows on the links) where
    :func:`~flowsolver.collective` times the pair ``ranks[0] -> ranks[1]``; the other ops as
    :func:`~flowsolver.collective` times them. ``keywords``: :func:`~flowsolver.collective`'s options.

    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> shift, pair = nccl_tests_collective(g, "send_recv", 2**30), collective(g, "send_recv", 2**30)
    >>> shift.time > 2**30 / 50e9 > pair.time     # GPU 7 -> 8 crosses a 50 GB/s NIC; 0 -> 1 is NVLink
    True
    """
    defaults = {k: v for k, v in collective.__kwdefaults__.items() if k not in ("ranks", "algorithm", "options")}
    if unknown := sorted(set(keywords) - set(defaults)):
        raise TypeError(f"nccl_tests_collective() got unexpected keyword arguments {', '.join(unknown)}")
    options, model = _gathered("collective", collective, None, {**defaults, **keywords})
    return collective_with(graph, op, size, ranks, algorithm, options, model, as_tested=True)


class RowModel:
    """One log row's model, solved once: its time for a latency scale ``lam``, a factor ``m``
    on every flow-solved bandwidth, a factor ``ll`` on LL's bandwidth, one ``pp`` on a P2P
    channel's and a chunk ``pipeline`` (NCCL's choice and caps re-evaluated exactly); ``lam``,
    ``m``, ``ll`` and ``pp`` relative to the calibration the rows were solved with. The row's
    rank groups (:func:`row_groups`) are solved together; groups NCCL sees unlike (a ring
    shift's pairs inside a server and across the network) each take their own time under
    NCCL's view of them, and the row takes the slowest, as :func:`flowsolver.collective` does."""

    def __init__(self, graph, op, size, ranks, algorithm, options, cal):
        groups = row_groups(graph, op, ranks)
        options = communicator_options(op, groups, cal.apply(options))
        with unchanged(graph):
            planned = _plans(graph, op, size, groups, algorithm, options)
            self.p, self.hws = planned.p, planned.hws or (planned.hw,)
            scenario, = time_plans(graph, planned.ranks, planned.plans, options, [graph])
            self.links, self.results = scenario.links, scenario.results
        self.op, self.size, self.options, self.cal = op, size, options, cal
        self.only = only_of(algorithm)

    def time(self, lam=1.0, m=1.0, ll=1.0, pipeline=None, net=None, launch=None, pp=1.0):
        """(time s, algorithm) at latency scale ``lam``, bandwidth factor ``m``, LL factor ``ll``,
        ``pipeline``, network hop latency ``net``, launch latency ``launch`` (s; default the
        calibration's) and P2P channel factor ``pp``: the slowest of the groups' views."""
        scaled = {a: replace(r, steps=tuple(replace(st, transfer=st.transfer / m) for st in r.steps))
                  for a, r in self.results.items()}
        model = replace(self.cal, latency_scale=self.cal.latency_scale * lam,
                        ll_bandwidth=self.cal.ll_bandwidth * ll,
                        pipeline=self.cal.pipeline if pipeline is None else pipeline,
                        net_latency=self.cal.net_latency if net is None else net,
                        launch_latency=self.cal.launch_latency if launch is None else launch)
        return max(self._time(view, scaled, model, m, pp) for view in self.hws)

    def _time(self, view, scaled, model, m, pp):
        hw = replace(view, nvlink_bw=view.nvlink_bw * m)
        tuned = {k: v for k, v in tuned_times(self.op, self.size, self.p, scaled, hw, self.options, model).items()
                 if self.only is None or k[0] in self.only}
        pick = nccl_pick(tuned)
        entries = [] if pick is None else [(pick[1][0], pick[0][0])]
        for a, r in self.results.items():
            if (self.only is None or a in self.only) and not is_tuned(a, self.op, self.options):
                transfer = transfer_of(r.steps)
                moved = transfer / m
                if view.p2p is not None:     # a send: the P2P channels' rate bounds it
                    moved = max(moved, view.p2p.least_transfer(self.size, self.cal.p2p_bandwidth * pp))
                entries.append((self.options.with_host(model.flow_timed(r.time - transfer, moved)), a))
        return min(entries)

    def bottleneck_tech(self, algorithm) -> str:
        steps = self.results[algorithm].steps
        longest = max(steps, key=lambda st: st.count * st.transfer)
        return str(self.links.tech[longest.bottleneck[0].index]) if longest.bottleneck else ""
