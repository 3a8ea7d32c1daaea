"""Parallelism: how a training job is laid out over the GPUs, one checked record."""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import _checks
from ._layout import checked_etp, checked_order
from ._memory import check_zero

__all__ = ["Parallelism", "REDUCE_DTYPES", "AUTO", "AUTO_CANDIDATES", "PARAM_SYNC", "check_param_sync"]

#: gradient reduction dtypes: bytes per value on the wire (Megatron-Bridge's recipes reduce in
#: bf16, ``grad_reduce_in_fp32=False``; torchtitan's FSDP2 reduces in fp32,
#: ``mixed_precision_reduce = "float32"``, its default and only choice)
REDUCE_DTYPES = {"bf16": 2.0, "fp32": 4.0}

#: how ZeRO 1 / 2 return the updated parameters to the DP ranks (``Parallelism.param_sync``)
PARAM_SYNC = ("all_gather", "broadcast")


def check_param_sync(param_sync, zero: int) -> str:
    """``param_sync`` checked: one of :data:`PARAM_SYNC`; ``"broadcast"`` only with ZeRO 1 or 2
    (the distributed optimizer's shards; ZeRO 0 keeps every parameter, ZeRO 3 gathers per layer).

    >>> check_param_sync("broadcast", 1)
    'broadcast'
    >>> check_param_sync("broadcast", 3)
    Traceback (most recent call last):
    ...
    ValueError: param_sync='broadcast' needs zero 1 or 2 (the optimizer's shards broadcast by their owners), got zero 3
    """
    if param_sync not in PARAM_SYNC:
        raise ValueError(f"param_sync must be one of {', '.join(PARAM_SYNC)}, got {param_sync!r}")
    if param_sync == "broadcast" and zero not in (1, 2):
        raise ValueError(f"param_sync='broadcast' needs zero 1 or 2 (the optimizer's shards broadcast by their "
                         f"owners), got zero {zero}")
    return param_sync


#: the value that leaves a field open for :func:`flowsolver.training_step` to choose
AUTO = "auto"
#: the values ``"auto"`` tries (training_step's own choice); :func:`flowsolver.plan` searches
#: wider by default: vp 1 to 12, micro-batch 1 to 32 (``flowsolver.planning.layout_space``)
AUTO_CANDIDATES = {"vp": tuple(range(1, 9)), "micro_batch": (1, 2, 4, 8)}


def _open_or_integer(name: str, value):
    """``"auto"``, a tuple of candidate integers, or one integer."""
    if isinstance(value, str):
        if value != AUTO:
            raise ValueError(f"{name} must be an integer >= 1, 'auto' or a sequence of candidates, got {value!r}")
        return value
    if isinstance(value, (tuple, list, range)):
        if not value:
            raise ValueError(f"{name}: the candidates must not be empty")
        return tuple(dict.fromkeys(_checks.integer(name, v) for v in value))
    return _checks.integer(name, value)


@dataclass(frozen=True)
class Parallelism:
    """How a training job is laid out over the GPUs: what :func:`flowsolver.training_step`
    solves the communication for (the :class:`~flowsolver.training.Schedule` says how the
    solved step is run: batch, overlaps, compute, precision, recompute).

    Degrees: ``tp`` tensor, ``cp`` context, ``pp`` pipeline, ``dp`` data parallel
    (``tp x cp x pp x dp`` = the GPU count; ``None``: the quotient), ``ep`` expert parallel
    (divides ``dp`` and the experts; ``tp x dp`` at ``etp=1``), ``etp`` the expert layers' tensor
    parallel degree (``None``: ``tp``, Megatron-Core's default ``expert_tensor_parallel_size``;
    1: each expert whole on its GPU, no token-dispatcher TP collectives, the EP groups laid out
    over the TP ranks too, as NeMo's MoE recipes' ``etp_size 1``; no other degree), ``vp`` virtual stages (model chunks) per pipeline stage
    (interleaved 1F1B). ``micro_batch`` sequences per microbatch. ``vp`` and ``micro_batch``
    may be ``"auto"`` (training_step times every candidate of ``AUTO_CANDIDATES``, vp 1 to 8,
    micro_batch 1, 2, 4, 8, and keeps the fastest that fits in memory) or a tuple of
    candidates. ``zero``: 0 all-reduce, 1 distributed optimizer, 2 sharded gradients too (a reduce-scatter
    each microbatch), 3 FSDP;
    ``reduce_dtype`` (``bf16`` / ``fp32``) the gradients' dtype on the wire;
    ``fp8_param_gather`` FSDP's parameter all-gather in FP8 (with ``precision="fp8"``).
    ``param_sync`` (ZeRO 1 / 2) how the updated parameters go back to every DP rank:
    ``"all_gather"`` (Megatron-Core's distributed optimizer, DeepSpeed: gradients
    reduce-scattered, parameters all-gathered, both in buckets beside the compute) or
    ``"broadcast"`` (InternLM's ``HybridZeroOptimizer``, from Colossal-AI's low-level ZeRO:
    gradients all-reduced in buckets beside the backward, then every shard's owner broadcasts
    its updated parameters to the DP group after the optimizer step, ``dp`` broadcasts one
    after the other, not overlapped).
    ``sequence_parallel``: TP all-reduces as reduce-scatter + all-gather. ``capacity_factor``:
    each expert takes ``c x`` its even share of the routed tokens (default 1, dropless): above
    1 the all-to-alls and expert GEMMs carry the padding, below 1 the rest are dropped (not
    sent, not computed, and out of the step's model FLOPs, ``StepResult.flops_per_token``). Placement:
    ``order`` (fastest-varying first, default ``"tp-cp-dp-pp"``) or ``ranks`` (the GPU rank
    of each logical rank).

    Every field is checked on construction (a ``ValueError`` / ``TypeError`` naming it);
    what depends on the cluster and the model (the GPU count, the layers, the experts) is
    checked by training_step.

    >>> Parallelism(tp=8, pp=4, vp=5).pp
    4
    >>> Parallelism(tp=0)
    Traceback (most recent call last):
    ...
    ValueError: tp must be an integer >= 1, got 0
    >>> Parallelism(tp=4, etp=2)
    Traceback (most recent call last):
    ...
    ValueError: etp must be None (= tp), 1 or tp (4), got 2: only expert TP 1 and expert TP = TP are modelled
    """

    tp: int = 1
    pp: int = 1
    dp: int | None = None
    cp: int = 1
    ep: int = 1
    vp: int | str | tuple = 1
    micro_batch: int | str | tuple = 1
    zero: int = 1
    sequence_parallel: bool = True
    capacity_factor: float | None = None
    reduce_dtype: str = "bf16"
    fp8_param_gather: bool = False
    param_sync: str = "all_gather"
    order: str | tuple | None = None
    ranks: tuple | None = None
    etp: int | None = None

    def __post_init__(self):
        put = lambda name, value: object.__setattr__(self, name, value)   # noqa: E731 (frozen)
        for name in ("tp", "pp", "cp", "ep"):
            put(name, _checks.integer(name, getattr(self, name)))
        if self.dp is not None:
            put("dp", _checks.integer("dp", self.dp))
        if self.etp is not None:
            checked_etp(self.etp, self.tp)
            put("etp", _checks.integer("etp", self.etp))
        for name in ("vp", "micro_batch"):
            put(name, _open_or_integer(name, getattr(self, name)))
        put("zero", check_zero(self.zero))
        if not isinstance(self.sequence_parallel, bool):
            raise TypeError(f"sequence_parallel must be True or False, got {self.sequence_parallel!r}")
        if self.capacity_factor is not None:
            put("capacity_factor", _checks.positive_number("capacity_factor", self.capacity_factor))
        if self.reduce_dtype not in REDUCE_DTYPES:
            raise ValueError(f"reduce_dtype must be one of {', '.join(REDUCE_DTYPES)}, got {self.reduce_dtype!r}")
        if not isinstance(self.fp8_param_gather, bool):
            raise TypeError(f"fp8_param_gather must be True or False, got {self.fp8_param_gather!r}")
        check_param_sync(self.param_sync, self.zero)
        if self.order is not None:
            put("order", checked_order(self.order))
        if self.ranks is not None:       # checked against the cluster by training_step
            if isinstance(self.ranks, (str, bytes)) or not hasattr(self.ranks, "__iter__"):
                raise TypeError(f"ranks must be a sequence of GPU ranks, got {self.ranks!r}")
            put("ranks", tuple(self.ranks))

    @property
    def open(self) -> tuple:
        """The fields left for training_step to choose (``"auto"`` or candidates)."""
        return tuple(name for name in ("vp", "micro_batch") if not isinstance(getattr(self, name), int))

    def keywords(self) -> dict:
        """The fields as training_step's keyword arguments of one release (``prepare_step``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: training_step's keyword arguments that are fields of Parallelism
PARALLELISM_FIELDS = tuple(f.name for f in fields(Parallelism))
