"""Where the ranks of each parallelism sit: a Megatron-style placement and its groups."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import _checks

__all__ = ["ParallelLayout", "GROUP_KINDS", "DEFAULT_ORDER"]

#: the kinds of rank group :meth:`ParallelLayout.groups` returns
GROUP_KINDS = ("tp", "cp", "pp", "ep", "dp", "dp_experts")
#: the default rank order, fastest-varying first: TP inside a server, then CP, DP, PP
#: (Megatron-Core's default ``tp-cp-ep-dp-pp``: its attention ranks take ``tp-cp-dp-pp``, ep
#: being 1 there; its expert ranks ``tp-ep-dp-pp`` with cp 1, DP x CP folded into EP x expert
#: DP: :meth:`ParallelLayout.groups`)
DEFAULT_ORDER = ("tp", "cp", "dp", "pp")


def checked_order(order) -> tuple:
    """A rank order: a permutation of ``tp``, ``cp``, ``dp``, ``pp`` (a tuple or a string
    joined by ``-``), fastest-varying first.

    >>> checked_order("tp-cp-pp-dp")
    ('tp', 'cp', 'pp', 'dp')
    """
    names = tuple(order.split("-")) if isinstance(order, str) else tuple(order)
    if sorted(names) != sorted(DEFAULT_ORDER):
        raise ValueError(f"order must be a permutation of tp, cp, dp, pp (fastest-varying first, e.g. "
                         f"'tp-cp-dp-pp'), got {order!r}")
    return names


@dataclass(frozen=True)
class ParallelLayout:
    """``tp x cp x pp x dp`` logical ranks placed on GPU ranks (``topologies.gpus`` order).

    ``order`` (default ``tp, cp, dp, pp``, fastest-varying first) sets the logical rank of
    each (TP, CP, DP, PP) index: by default rank ``i`` has TP index ``i mod tp``, CP index
    ``(i // tp) mod cp``, DP index ``(i // (tp cp)) mod dp`` and PP stage ``i // (tp cp dp)``,
    so a TP group sits inside a server, then CP, and a DP group spans servers on one rail.
    ``placement[i]`` is the GPU rank of logical rank ``i`` (default: the identity). ``ep``
    (expert parallel degree) divides ``dp x cp`` (``tp x dp x cp`` at expert TP 1): the
    experts are sharded over ``ep`` consecutive ranks of a stage's DP x CP ranks (of its TP x
    DP x CP ranks at expert TP 1; :meth:`groups`). ``etp``: the expert layers' TP degree,
    ``None`` (Megatron-Core's default, ``tp``) or 1 (``expert_tensor_parallel_size = 1``:
    each expert whole on its GPU). ``vp`` is the number of virtual pipeline stages (model
    chunks) per stage.

    >>> lay = ParallelLayout(tp=2, pp=2, dp=2)
    >>> lay.gpus, lay.groups("tp"), lay.groups("dp")[:2]
    (8, [[0, 1], [2, 3], [4, 5], [6, 7]], [[0, 2], [1, 3]])
    """

    tp: int
    pp: int
    dp: int
    ep: int = 1
    placement: tuple = ()
    cp: int = 1
    vp: int = 1
    order: tuple = DEFAULT_ORDER
    etp: int | None = None

    def __post_init__(self):
        for name in ("tp", "pp", "dp", "ep", "cp", "vp"):
            object.__setattr__(self, name, _checks.integer(name, getattr(self, name)))
        object.__setattr__(self, "order", checked_order(self.order))
        object.__setattr__(self, "etp", checked_etp(self.etp, self.tp))
        if self.expert_ranks % self.ep:
            folded = (f"dp x cp ({self.dp} x {self.cp})" if self.etp == self.tp else
                      f"tp x dp x cp at etp 1 ({self.tp} x {self.dp} x {self.cp})")
            raise ValueError(f"ep ({self.ep}) must divide {folded}: the expert layers "
                             f"fold the CP ranks into their data parallel ranks (Megatron-Core's MoE folding)")
        if self.vp > 1 and self.pp == 1:
            raise ValueError(f"vp ({self.vp}) needs pipeline stages to interleave: pp must be > 1")
        n = self.gpus
        placement = tuple(range(n)) if not self.placement else tuple(int(r) for r in self.placement)
        if sorted(placement) != list(range(n)):
            raise ValueError(f"ranks must be a permutation of the {n} GPU ranks")
        object.__setattr__(self, "placement", placement)

    @property
    def expert_ranks(self) -> int:
        """The ranks of a stage that one expert-TP rank's experts are laid out over, ``ep x``
        expert DP: ``dp x cp``, or ``tp x dp x cp`` at expert TP 1 (Megatron-Core's
        ``expert_data_parallel_size = world / (etp x ep x pp)``).

        >>> ParallelLayout(tp=2, pp=1, dp=8, ep=8, etp=1).expert_ranks
        16
        """
        return self.tp * self.dp * self.cp // self.etp

    @property
    def gpus(self) -> int:
        """GPU count, ``tp x cp x pp x dp``."""
        return self.tp * self.cp * self.pp * self.dp

    def rank(self, t: int, d: int, q: int, c: int = 0) -> int:
        """GPU rank of TP index ``t``, DP index ``d``, PP stage ``q``, CP index ``c``.

        >>> ParallelLayout(tp=2, pp=1, dp=2, placement=(3, 2, 1, 0)).rank(1, 0, 0)
        2
        """
        index, stride = 0, 1
        for name in self.order:
            index += dict(tp=t, cp=c, dp=d, pp=q)[name] * stride
            stride *= getattr(self, name)
        return self.placement[index]

    @functools.cached_property
    def _rank_table(self) -> np.ndarray:
        """Every rank at once, ``[t, d, q, c]`` (what :meth:`rank` gives one by one)."""
        sizes = dict(tp=self.tp, dp=self.dp, pp=self.pp, cp=self.cp)
        axis = dict(tp=0, dp=1, pp=2, cp=3)
        index, stride = np.zeros((self.tp, self.dp, self.pp, self.cp), dtype=np.int64), 1
        for name in self.order:
            shape = [1, 1, 1, 1]
            shape[axis[name]] = sizes[name]
            index = index + np.arange(sizes[name]).reshape(shape) * stride
            stride *= sizes[name]
        return np.asarray(self.placement, dtype=np.int64)[index]

    def groups(self, kind: str) -> list:
        """The rank groups of one parallelism, each a list of GPU ranks:

        * ``tp``: the ``tp`` ranks of one (stage, DP, CP index);
        * ``cp``: the ``cp`` ranks of one (stage, DP, TP index): a ring-attention ring;
        * ``pp``: neighbouring stages ``[q, q + 1]`` of one (DP, CP, TP index): point-to-point pairs;
        * ``ep``: ``ep`` consecutive ranks, in rank order, of the ``dp x cp`` ranks of one
          (stage, TP index); at expert TP 1 (``etp = 1``), of the ``tp x dp x cp`` ranks of
          one stage;
        * ``dp``: the gradient group, all ``dp x cp`` ranks of one (stage, TP index)
          (CP ranks hold the same weights, so their gradients are reduced with DP's);
        * ``dp_experts``: the ranks of those ``dp x cp`` (``tp x dp x cp`` at expert TP 1)
          holding the same expert shard, ``dp x cp / ep`` (``tp x dp x cp / ep``) of them.

        The expert layers see no CP: Megatron-Core builds their groups from a second rank
        generator with ``cp=1`` and the ``dp x cp`` ranks as ``ep x`` expert DP, EP fastest
        after TP ("MoE parallel folding": ``expert_decoder_rank_generator`` in
        ``megatron/core/parallel_state.py``, NVIDIA/Megatron-LM at
        d98e8a64ddf34856e74b24714e3bedb2f5a39553), so an EP group sits inside a server where
        the ``dp x cp`` ranks do: here the ``dp x cp`` ranks of a (stage, TP index) in the
        order's rank order, cut into runs of ``ep``. That is Megatron-Core's placement for the
        orders that end in ``pp`` (or with ``pp = 1``); Megatron refuses the others unless
        ``ep = cp`` (the expert and attention DP sizes must match), which this placement then
        equals; for the rest it extends the same folding. At expert TP 1 the generator's TP is
        1 (``expert_tensor_parallel_size``; ``expert_data_parallel_size = world_size // (etp x
        ep x pp)``, the same file), so its EP groups are runs of ``ep`` consecutive ranks of a
        stage's ``tp x dp x cp`` ranks: a TP2 x EP8 layout on 16 GPUs has EP groups 0-7 and
        8-15 (at expert TP 2: the even and the odd ranks).

        >>> ParallelLayout(tp=1, pp=2, dp=4, ep=2).groups("dp_experts")
        [[0, 2], [1, 3], [4, 6], [5, 7]]
        >>> ParallelLayout(tp=2, pp=1, dp=2, cp=2).groups("cp")
        [[0, 2], [1, 3], [4, 6], [5, 7]]
        >>> ParallelLayout(tp=1, pp=1, dp=4, cp=2, ep=4).groups("ep")
        [[0, 1, 2, 3], [4, 5, 6, 7]]
        >>> ParallelLayout(tp=2, pp=1, dp=2, ep=4, etp=1).groups("ep")
        [[0, 1, 2, 3]]
        >>> ParallelLayout(tp=2, pp=1, dp=4, ep=4, etp=1).groups("dp_experts")
        [[0, 4], [1, 5], [2, 6], [3, 7]]
        """
        tp, pp, dp, ep, cp = self.tp, self.pp, self.dp, self.ep, self.cp
        R = self._rank_table                     # R[t, d, q, c]: the GPU rank, as rank() gives it
        if kind == "tp":
            return R.transpose(2, 1, 3, 0).reshape(-1, tp).tolist()
        if kind == "cp":
            return R.transpose(2, 1, 0, 3).reshape(-1, cp).tolist()
        if kind == "pp":
            pairs = np.stack([R[:, :, :-1, :], R[:, :, 1:, :]], axis=-1)      # stage q and q + 1
            return pairs.transpose(2, 1, 3, 0, 4).reshape(-1, 2).tolist()
        if kind == "dp":
            return R.transpose(2, 0, 1, 3).reshape(-1, dp * cp).tolist()
        if kind in ("ep", "dp_experts") and self.etp == 1 and tp > 1:
            # a stage's tp x dp x cp ranks in rank order: [q, slowest, ..., fastest]
            axis = dict(tp=0, dp=1, pp=2, cp=3)
            inner = [axis[name] for name in reversed(self.order) if name != "pp"]
            stage = R.transpose(2, *inner).reshape(pp, tp * dp * cp // ep, ep)
            if kind == "ep":
                return stage.reshape(-1, ep).tolist()
            return stage.transpose(0, 2, 1).reshape(-1, tp * dp * cp // ep).tolist()
        if kind not in ("ep", "dp_experts"):
            raise ValueError(f"kind must be one of {', '.join(GROUP_KINDS)}, got {kind!r}")
        # the dp x cp ranks of a (TP index, stage) in rank order (CP faster where the order has it
        # first), as [t, q, k, e]: the folded index j = k x ep + e
        cp_first = self.order.index("cp") < self.order.index("dp")
        folded = R.transpose(0, 2, 1, 3) if cp_first else R.transpose(0, 2, 3, 1)
        by_expert = folded.reshape(tp, pp, dp * cp // ep, ep)
        if kind == "ep":
            return by_expert.transpose(1, 0, 2, 3).reshape(-1, ep).tolist()
        return by_expert.transpose(1, 0, 3, 2).reshape(-1, dp * cp // ep).tolist()


def checked_etp(etp, tp: int) -> int:
    """The expert layers' TP degree: ``None`` gives ``tp`` (Megatron-Core's default:
    ``expert_tensor_parallel_size = tensor_model_parallel_size`` when not set,
    ``megatron/core/parallel_state.py`` at NVIDIA/Megatron-LM d98e8a64); 1 (each expert whole
    on its GPU: NeMo's MoE recipes' ``etp_size 1``) or ``tp``; another degree is refused (not
    modelled).

    >>> checked_etp(None, 4), checked_etp(1, 4), checked_etp(4, 4)
    (4, 1, 4)
    >>> checked_etp(2, 4)
    Traceback (most recent call last):
    ...
    ValueError: etp must be None (= tp), 1 or tp (4), got 2: only expert TP 1 and expert TP = TP are modelled
    """
    if etp is None:
        return tp
    etp = _checks.integer("etp", etp)
    if etp not in (1, tp):
        raise ValueError(f"etp must be None (= tp), 1 or tp ({tp}), got {etp}: only expert TP 1 and expert TP = TP "
                         f"are modelled")
    return etp


def check_sequence_split(seq_len: int, tp: int, cp: int) -> None:
    """Sequence parallelism shards each CP rank's ``seq_len / cp`` tokens over the ``tp`` ranks
    (Megatron-Core's scatter to the sequence-parallel region splits the sequence dimension in
    ``tp`` equal parts): ``tp x cp`` must divide ``seq_len``.

    >>> check_sequence_split(1001, 8, 1)
    Traceback (most recent call last):
    ...
    ValueError: tp (8) must split the sequence of 1001 tokens ... tp x cp (8) must divide seq_len
    """
    if seq_len % (tp * cp):
        raise ValueError(f"tp ({tp}) must split the sequence of {seq_len} tokens (over cp {cp}) into tp equal shards "
                         f"(sequence parallelism shards each CP rank's tokens over the TP ranks): tp x cp "
                         f"({tp * cp}) must divide seq_len")
