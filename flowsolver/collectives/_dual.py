"""One-sided dual numbers: NCCL's cost-model formula evaluated on a value and its
derivatives, so the derivative of a tuned time is the formula's own (the chain rule through
its arithmetic, the branch a ``min`` takes, and both sides at a tie of a ``min``).

A :class:`Dual` carries a value, its right derivatives ``up`` (d/de of f(c + e t) as e -> 0+)
and left derivatives ``down`` (e -> 0-) along any number of directions ``t`` (numpy arrays,
broadcast), and ``flag``: the directions along which the two may differ (a tie somewhere).
Sums, products and quotients carry both sides linearly; ``lesser`` is ``min`` that at a tie
takes the smaller right and the larger left derivative (a minimum is concave there).
"""

from __future__ import annotations

import numpy as np

from .._tolerance import RTOL       # a min's arguments this close (relative) are a tie: one-sided there

__all__ = ["Dual", "lesser", "greater"]


class Dual:
    """A value with its one-sided derivatives (see the module docstring).

    >>> x = Dual(2.0, np.array([1.0, 0.0]))             # d/dx and d/dy of 3 / x
    >>> (3 / x).up.tolist(), (3 / x).value
    ([-0.75, 0.0], 1.5)
    """

    __slots__ = ("value", "up", "down", "flag")

    def __init__(self, value, up, down=None, flag=False):
        self.value = float(value)
        self.up = np.asarray(up, dtype=np.float64)
        self.down = self.up if down is None else np.asarray(down, dtype=np.float64)
        self.flag = np.asarray(flag, dtype=bool)

    @staticmethod
    def of(x) -> "Dual":
        """``x`` as a Dual (a constant has derivative 0)."""
        return x if isinstance(x, Dual) else Dual(x, 0.0)

    def _scaled(self, value, factor, other=None, other_factor=0.0):
        up, down, flag = self.up * factor, self.down * factor, self.flag
        if other is not None:
            up, down, flag = up + other.up * other_factor, down + other.down * other_factor, flag | other.flag
        return Dual(value, up, down, flag)

    def __add__(self, other):
        o = Dual.of(other)
        return self._scaled(self.value + o.value, 1.0, o, 1.0)

    __radd__ = __add__

    def __neg__(self):
        return self._scaled(-self.value, -1.0)

    def __sub__(self, other):
        return self + (-Dual.of(other))

    def __rsub__(self, other):
        return Dual.of(other) + (-self)

    def __mul__(self, other):
        o = Dual.of(other)
        return self._scaled(self.value * o.value, o.value, o, self.value)

    __rmul__ = __mul__

    def __truediv__(self, other):
        # d(a / b) = (da - q db) / b with q = a / b: no b**2, which leaves float64 (an
        # OverflowError) while a / b and the derivative itself are still finite
        o = Dual.of(other)
        q = self.value / o.value
        return Dual(q, (self.up - q * o.up) / o.value, (self.down - q * o.down) / o.value, self.flag | o.flag)

    def __rtruediv__(self, other):
        return Dual.of(other) / self

    def __lt__(self, other):
        return self.value < Dual.of(other).value

    def __le__(self, other):
        return self.value <= Dual.of(other).value

    def __gt__(self, other):
        return self.value > Dual.of(other).value

    def __ge__(self, other):
        return self.value >= Dual.of(other).value

    def __repr__(self):
        return f"Dual({self.value!r}, up={self.up!r}, down={self.down!r})"


def lesser(*args):
    """``min(*args)``; with a :class:`Dual` among them, the Dual of the minimum: the smallest
    argument's, or at a tie (values within :data:`flowsolver._tolerance.RTOL`) the smallest right and the
    largest left derivative of the tied ones, flagged where those differ.

    >>> m = lesser(Dual(1.0, [2.0, 0.0]), 1.0)          # tied with a constant
    >>> m.up.tolist(), m.down.tolist(), m.flag.tolist()
    ([0.0, 0.0], [2.0, 0.0], [True, False])
    """
    if not any(isinstance(a, Dual) for a in args):
        return min(args)
    duals = [Dual.of(a) for a in args]
    low = min(d.value for d in duals)
    tied = [d for d in duals if abs(d.value - low) <= RTOL * abs(low)] if np.isfinite(low) else \
        [d for d in duals if d.value == low]
    if len(tied) == 1:
        return tied[0]
    up = np.minimum.reduce(np.broadcast_arrays(*[d.up for d in tied]))
    down = np.maximum.reduce(np.broadcast_arrays(*[d.down for d in tied]))
    flag = np.logical_or.reduce(np.broadcast_arrays(*[d.flag for d in tied])) | (up != down)
    return Dual(low, up, down, flag)


def greater(a, b):
    """``max(a, b)`` carrying a :class:`Dual`'s derivatives (:func:`lesser` of the negations).

    >>> greater(1.0, 2.0), greater(Dual(3.0, [1.0]), 2.0).value
    (2.0, 3.0)
    """
    if isinstance(a, Dual) or isinstance(b, Dual):
        return -lesser(-Dual.of(a), -Dual.of(b))
    return max(a, b)
