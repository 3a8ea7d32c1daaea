"""Where the ranks of each parallelism sit: a Megatron-style placement and its groups."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _checks

__all__ = ["ParallelLayout", "GROUP_KINDS"]

#: the kinds of rank group :meth:`ParallelLayout.groups` returns
GROUP_KINDS = ("tp", "pp", "ep", "dp", "dp_experts")


@dataclass(frozen=True)
class ParallelLayout:
    """``tp x pp x dp`` logical ranks placed on GPU ranks (``topologies.gpus`` order).

    Megatron-style order: logical rank ``i`` has TP index ``i mod tp``, DP index
    ``(i // tp) mod dp`` and PP stage ``i // (tp dp)``, so a TP group sits inside a server and
    a DP group spans servers on one rail. ``placement[i]`` is the GPU rank of logical rank
    ``i`` (default: the identity). ``ep`` (expert parallel degree) divides ``dp``: the experts
    are sharded over ``ep`` consecutive DP ranks.

    >>> lay = ParallelLayout(tp=2, pp=2, dp=2)
    >>> lay.gpus, lay.groups("tp"), lay.groups("dp")[:2]
    (8, [[0, 1], [2, 3], [4, 5], [6, 7]], [[0, 2], [1, 3]])
    """

    tp: int
    pp: int
    dp: int
    ep: int = 1
    placement: tuple = ()

    def __post_init__(self):
        for name in ("tp", "pp", "dp", "ep"):
            object.__setattr__(self, name, _checks.integer(name, getattr(self, name)))
        if self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp})")
        n = self.tp * self.pp * self.dp
        placement = tuple(range(n)) if not self.placement else tuple(int(r) for r in self.placement)
        if sorted(placement) != list(range(n)):
            raise ValueError(f"ranks must be a permutation of the {n} GPU ranks")
        object.__setattr__(self, "placement", placement)

    @property
    def gpus(self) -> int:
        """GPU count, ``tp x pp x dp``."""
        return self.tp * self.pp * self.dp

    def rank(self, t: int, d: int, q: int) -> int:
        """GPU rank of TP index ``t``, DP index ``d``, PP stage ``q``.

        >>> ParallelLayout(tp=2, pp=1, dp=2, placement=(3, 2, 1, 0)).rank(1, 0, 0)
        2
        """
        return self.placement[t + self.tp * (d + self.dp * q)]

    def groups(self, kind: str) -> list:
        """The rank groups of one parallelism, each a list of GPU ranks:

        * ``tp``: the ``tp`` ranks of one (stage, DP index);
        * ``pp``: neighbouring stages ``[q, q + 1]`` of one (DP, TP index): point-to-point pairs;
        * ``ep``: ``ep`` consecutive DP ranks of one (stage, TP index);
        * ``dp``: all ``dp`` ranks of one (stage, TP index);
        * ``dp_experts``: the DP ranks holding the same expert shard, ``dp / ep`` of them.

        >>> ParallelLayout(tp=1, pp=2, dp=4, ep=2).groups("dp_experts")
        [[0, 2], [1, 3], [4, 6], [5, 7]]
        """
        tp, pp, dp, ep, rank = self.tp, self.pp, self.dp, self.ep, self.rank
        if kind == "tp":
            return [[rank(t, d, q) for t in range(tp)] for q in range(pp) for d in range(dp)]
        if kind == "pp":
            return [[rank(t, d, q), rank(t, d, q + 1)] for q in range(pp - 1) for d in range(dp) for t in range(tp)]
        if kind == "ep":
            return [[rank(t, d, q) for d in range(e * ep, (e + 1) * ep)]
                    for q in range(pp) for t in range(tp) for e in range(dp // ep)]
        if kind == "dp":
            return [[rank(t, d, q) for d in range(dp)] for q in range(pp) for t in range(tp)]
        if kind == "dp_experts":
            return [[rank(t, d, q) for d in range(r, dp, ep)] for q in range(pp) for t in range(tp) for r in range(ep)]
        raise ValueError(f"kind must be one of {', '.join(GROUP_KINDS)}, got {kind!r}")
