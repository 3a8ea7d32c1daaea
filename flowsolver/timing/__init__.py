"""Flow completion times under max-min sharing, event by event, and their derivatives.

Between two events the rates are the max-min fair allocation of the flows running; an event
is a flow finishing, which releases its bandwidth to the rest (fluid processor sharing over
the network), or a step starting. Modules:

- ``_completion``: :func:`completion_times` (every flow starts at time 0: the transfer time
  of a collective step) and :func:`step_times` (steps of flows, each released by another
  after a delay: several collectives on one fabric), both on the one event engine;
- ``_events``: that engine (flows in steps, groups of flows on their own clocks, a leading
  batch axis; rates re-solved at each event, or kept where provably still max-min fair);
- ``_completion_sensitivity``: exact derivatives of a makespan with respect to link
  capacities through the events (:func:`completion_sensitivity`, :func:`fair_makespan`),
  and a forward run kept for them (:func:`kept_run`; at most :func:`keep_limit` entries);
- ``_event_split``: the one-sided derivative through an event whose finishing flows a
  change splits apart.

One tolerance, :data:`RTOL` (1e-9, relative; ``flowsolver._tolerance``), decides which flows
finish at an event, here and in the derivatives. Units: bytes, seconds, bytes/s.

>>> import scipy.sparse as sp
>>> from flowsolver.timing import completion_times
>>> c = completion_times(sp.csc_matrix([[1.0, 1.0]]), sizes=[1.0, 3.0], capacity=[2.0])
>>> c.finish.tolist(), float(c.makespan)       # both at 1 B/s until 1 s, then the second at 2 B/s
([1.0, 2.0], 2.0)
"""

from ._completion import RTOL, RTOL_MAX, Completion, StepTimes, completion_times, step_times
from ._completion_sensitivity import CompletionSensitivity, KeptRun, completion_sensitivity, fair_makespan, kept_run
from ._events import keep_limit

__all__ = ["completion_times", "Completion", "step_times", "StepTimes", "RTOL", "RTOL_MAX",
           "completion_sensitivity", "CompletionSensitivity", "fair_makespan", "KeptRun", "kept_run",
           "keep_limit"]
