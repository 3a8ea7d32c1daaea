"""Goodput over a whole run: failures, degraded links, stragglers and neighbouring jobs.

A step time says how fast a job trains when everything works; this package says how many
useful tokens a month of it gives. Components fail (the job stops and restarts from its last
checkpoint), links degrade (the fabric is re-solved with them slower), GPUs straggle (every
synchronous step waits), and other jobs share the fabric.

- :class:`Component`, :func:`default_components`: failure and degradation processes, with
  the Llama 3 paper's interruption rates as defaults;
- :class:`JobResponse`, :func:`young_interval`, :func:`daly_interval`,
  :func:`daly_useful_fraction`, :func:`checkpoint_write_time`: checkpointing and restarts;
- :func:`simulate_goodput`: the Monte Carlo over failure trajectories (numpy, seeded);
- :func:`goodput`: the same on a cluster graph, each distinct degraded fabric solved once;
  :func:`degradation_impact`: which tier's degraded cable slows a step, exactly and by the
  sensitivities;
- :func:`place_jobs`, :func:`placement_slowdowns`: several jobs placed on one cluster, their
  collectives concurrent on the shared fabric.
"""

from ._checkpoint import JobResponse, checkpoint_write_time, daly_interval, daly_useful_fraction, young_interval
from ._components import Component, default_components, job_units
from ._fabric import StateTimes, state_graphs, state_step_times
from ._impact import degradation_impact
from ._montecarlo import Process, RunSample, simulate_goodput
from ._placement import PLACEMENTS, fixed_algorithm, place_jobs, placement_slowdowns
from ._run import GoodputResult, goodput

__all__ = ["Component", "default_components", "job_units", "JobResponse", "young_interval", "daly_interval",
           "daly_useful_fraction", "checkpoint_write_time", "Process", "RunSample", "simulate_goodput",
           "GoodputResult", "goodput", "StateTimes", "state_graphs", "state_step_times", "PLACEMENTS", "place_jobs",
           "placement_slowdowns", "fixed_algorithm", "degradation_impact"]
