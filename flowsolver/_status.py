"""The one status enumeration of every result: solver allocations, completion times,
collective variants and sweep rows report a :class:`Status` per scenario instead of a
raise, an exception list, a string or a flag."""

from __future__ import annotations

import enum

__all__ = ["Status"]


class Status(enum.IntEnum):
    """Per-scenario outcome. An ``IntEnum``, so batched results hold it as an int array
    (``alloc.status == Status.OK``); ``label`` is the lower-case name used in tables and
    sweep files, ``message`` a sentence for users.

    >>> Status.NOT_CONVERGED.label, int(Status.NOT_CONVERGED)
    ('not_converged', 1)
    >>> Status.from_label("error") is Status.FAILED
    True
    """

    OK = 0
    NOT_CONVERGED = 1       # max_rounds or max_events reached before the answer was complete
    UNBOUNDED = 2           # a flow crosses no link and has no demand cap: its rate is infinite
    STALLED = 3             # flows with bytes left get no bandwidth (failed links): time is inf
    FAILED = 4              # the scenario raised an error, or a batched solve refused its own input (its message
    #                         is kept beside the status, or warned: max_min_fair)
    ILL_CONDITIONED = 5     # float rounding could move its rates beyond the contract, too large to solve exactly
    OVERFLOW = 6            # a time past float64's range (size / rate > 1.8e308 s): reported inf

    @property
    def label(self) -> str:
        return "error" if self is Status.FAILED else self.name.lower()

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @classmethod
    def from_label(cls, label: str) -> "Status":
        for s in cls:
            if s.label == label:
                return s
        raise ValueError(f"status label must be one of {', '.join(s.label for s in cls)}, got {label!r}")


_MESSAGES = {
    Status.OK: "ok",
    Status.NOT_CONVERGED: "not converged (max_rounds or max_events reached)",
    Status.UNBOUNDED: "unbounded flow (no link, no cap)",
    Status.STALLED: "stalled: flows with bytes left get no bandwidth (a failed or zero-capacity link)",
    Status.FAILED: "the scenario raised an error (or, in a batched solve, its input was refused)",
    Status.ILL_CONDITIONED: ("ill-conditioned: weights x fractions on one link spread so widely that floating "
                             "point cannot give every rate to 1e-9, and too large to solve exactly"),
    Status.OVERFLOW: "overflow: a completion time is past float64's range (over 1.8e308 s); reported as inf",
}
