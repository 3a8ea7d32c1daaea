"""The options of a collective run, checked and resolved once at the entry and passed down."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .. import _checks
from ..routing import POLICIES, policy_of
from ._algorithms import ALGORITHMS
from ._allowed import algorithm_choice, protocol_choice
from ._host import host_floor, with_host
from ._nccl import DEFAULT_CHUNK, ELEMENT_BYTES, OPS, PROTOCOLS, base_latency, reduction
from ._option_values import (MAX_HOST_OVERHEAD, _efficiency, _real, _seconds, check_efficiency_keys,  # noqa: F401
                             nccl_release)

__all__ = ["CollectiveOptions", "Options", "check_call", "check_efficiency_keys", "checked_collective_options",
           "merged_options", "communicator_options", "ANY_RELAY", "MAX_CHANNELS",
           "POLICY_OPTIONS", "COLLECTIVE_OPTIONS", "SizeBelowElement"]

#: NCCL's MAXCHANNELS (src/include/device.h:91 of master 5067397c; 64 from NCCL 2.25, 32 before): a communicator never
#: runs more channels
MAX_CHANNELS = 64
#: the keyword options of :func:`flowsolver.route` a collective's ``policy_options`` may set
POLICY_OPTIONS = ("subflows", "seed", "pxn")
#: the least ``chunk`` (bytes): NCCL's smallest pipeline chunk at its default buffer size, NVLS's
#: 16 KiB (v2.19.3-1 src/enqueue.cc:1367 calcCollChunking; the trees stop at 32 KiB, :1339)
MIN_CHUNK = 16384
#: the options a training step passes to every collective (:func:`flowsolver.concurrent_kinds`'s)
COLLECTIVE_OPTIONS = ("policy", "policy_options", "pxn", "protocol", "chunk", "efficiency", "step_latency",
                      "base_latency", "model")


@dataclass(frozen=True)
class CollectiveOptions:
    """How collectives are routed and timed: one record that :func:`~flowsolver.collective`,
    :func:`~flowsolver.collective_variants`, :func:`~flowsolver.concurrent`,
    :func:`~flowsolver.collectives.concurrent_kinds`, :func:`~flowsolver.replay`,
    :func:`~flowsolver.sweep` (``options=``) and :func:`~flowsolver.training_step`
    (``collective_options=``) all take. Checked when built (a ValueError names the field).

    Attributes
    ----------
    policy : str
        Routing policy, one of ``flowsolver.POLICIES`` (default ``"ecmp"``).
    policy_options : dict, optional
        The policy's options: ``subflows`` (int >= 1), ``seed`` (int >= 0), ``pxn`` (bool).
    pxn : bool
        PXN for cross-rail hops (over NVLink to the right rail first; default True).
    protocol : {"auto", "LL", "LL128", "Simple"} or a list of them, optional
        NCCL protocol, or several: NCCL's choice among them (``NCCL_PROTO=LL,Simple``); None
        (default): the entry point's own default (``"auto"``, NCCL's choice by size, for
        :func:`~flowsolver.collective`; ``"Simple"`` for :func:`~flowsolver.concurrent` and a
        training step's collectives).
    chunk : float
        Pipeline chunk of tree all-reduce (a channel's) and ring broadcast / reduce (what their
        channels hold at a stage together, ``chunk / channels`` each), bytes (default 512 KiB, at
        least 16 KiB). Under NCCL's cost model (the default) a tree all-reduce runs NCCL's own
        chunk (:mod:`flowsolver.collectives._pipeline`); ``chunk`` sets the per-step model's
        (``step_latency=``) and the broadcast / reduce chains'.
    efficiency : float in (0, 1] or dict, optional
        Fraction of the raw link rate reached (all links, or by link technology); default
        the catalogue's.
    step_latency, base_latency : float >= 0, optional
        Per-step latency (s; turns NCCL's cost model off: a pure alpha-beta flow model) and
        per-collective base latency (s) overrides.
    channels : int in 1 ... 64, optional
        NCCL's channels (:func:`~flowsolver.collective` only; :func:`~flowsolver.concurrent`
        takes them per collective).
    nvls_channels : int in 1 ... 64, optional
        NVLS's and NVLSTree's channels, as ``NCCL_NVLS_NCHANNELS`` sets them (default: NCCL's
        own, 16 on Hopper; :func:`~flowsolver.collective` and
        :func:`~flowsolver.collective_variants` only).
    nccl_version : str, optional
        The NCCL release the call runs on, ``"2.18"`` or ``"2.18.3-1"`` (default: NCCL as of 2.30,
        whose rules the model follows): the rules that changed since and that the model keeps
        apply as that release had them (:data:`~flowsolver.collectives._pipeline.TREE_DEPTH_CHUNKS_UNTIL`:
        before 2.20 NCCL shrank a tree Simple all-reduce's chunk with the tree's depth), and NCCL
        chooses among the algorithms that release has (``_nccl_model.FIRST_RELEASE``). A release
        after 2.30 runs 2.30's rules, with a ``UserWarning`` saying so.
    candidates : {"nccl", "all"}
        What ``algorithm="auto"`` chooses from (:func:`~flowsolver.collective` only).
    model : Calibration, optional
        Fitted constants (:func:`flowsolver.calibrate`).
    gpus_per_thread : int >= 1
        GPUs one host thread issues each collective for (nccl-tests ``-g N``; default 1: a
        process or thread per GPU, as MPI and torchrun run). Above 1 the thread plans and
        launches the N calls one after another while the GPUs run the previous collective,
        so a collective takes at least ``N x`` NCCL's per-call host cost
        (:data:`~flowsolver.collectives._host.HOST_CALL`, 4.2 us): the time is the greater of
        the GPUs' time and that floor (:func:`~flowsolver.collective` and
        :func:`~flowsolver.collective_variants` only).
    host_overhead : float >= 0
        Seconds of host work added to each collective (default 0): a call timed on its own
        from an idle device pays the host's issuing before its kernel starts, which a loop
        whose host runs ahead hides. ``flowsolver.collectives.TORCH_CALL_OVERHEAD`` (25 us)
        is ``torch.distributed``'s (:func:`~flowsolver.collective` and
        :func:`~flowsolver.collective_variants` only).

    Examples
    --------
    >>> import topologies as tp
    >>> from flowsolver import CollectiveOptions, collective
    >>> opts = CollectiveOptions(protocol="Simple", step_latency=5e-6)
    >>> r = collective(tp.rail_optimized(1), "all_reduce", 2**20, algorithm="ring", options=opts)
    >>> r.time == collective(tp.rail_optimized(1), "all_reduce", 2**20, algorithm="ring", protocol="Simple",
    ...                      step_latency=5e-6).time
    True
    >>> ring_ll = CollectiveOptions(protocol="LL")
    >>> one = collective(tp.rail_optimized(1), "all_reduce", 4096, algorithm="ring", options=ring_ll)
    >>> g8 = CollectiveOptions(protocol="LL", gpus_per_thread=8)       # nccl-tests -g 8: one thread, 8 GPUs
    >>> eight = collective(tp.rail_optimized(1), "all_reduce", 4096, algorithm="ring", options=g8)
    >>> round(one.time * 1e6, 1), round(eight.time * 1e6, 1)    # 8 host calls of 4.2 us: 33.6 us
    (15.9, 33.6)
    >>> torch = CollectiveOptions(protocol="LL", host_overhead=25e-6)   # one torch call timed from idle
    >>> round(collective(tp.rail_optimized(1), "all_reduce", 4096, algorithm="ring", options=torch).time * 1e6, 1)
    40.9
    """

    policy: str = "ecmp"
    policy_options: dict | None = None
    pxn: bool = True
    protocol: str | None = None
    chunk: float = float(DEFAULT_CHUNK)
    efficiency: object = None
    step_latency: float | None = None
    base_latency: float | None = None
    channels: int | None = None
    nvls_channels: int | None = None
    candidates: str = "nccl"
    model: object = None
    nccl_version: str | None = None
    gpus_per_thread: int = 1
    host_overhead: float = 0.0

    def __post_init__(self):
        try:
            Options(policy=self.policy, policy_options=dict(self.policy_options or {}), pxn=self.pxn,
                    protocol="auto" if self.protocol is None else self.protocol, chunk=self.chunk,
                    efficiency=self.efficiency, step_latency=self.step_latency, base_latency=self.base_latency,
                    channels=self.channels, nvls_channels=self.nvls_channels, candidates=self.candidates,
                    nccl_version=self.nccl_version,
                    gpus_per_thread=self.gpus_per_thread,
                    host_overhead=self.host_overhead)
        except ValueError as err:
            raise ValueError(f"CollectiveOptions: {err}") from None
        if self.policy_options is not None and not isinstance(self.policy_options, dict):
            raise ValueError(f"CollectiveOptions: policy_options must be a dict, got {self.policy_options!r}")
        if self.model is not None and not callable(getattr(self.model, "apply", None)):
            raise ValueError(f"CollectiveOptions: model must be a Calibration (flowsolver.calibrate), got "
                             f"{type(self.model).__name__}")

    def keywords(self, entry: str, allowed=None) -> dict:
        """The keyword arguments of ``entry`` (its name, for messages) these options stand
        for: every field but a None ``protocol``; ValueError naming a field set away from
        its default that ``entry`` does not take (``allowed``: the names it takes)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if allowed is not None and f.name not in allowed:
                if value is not f.default and value != f.default:
                    raise ValueError(f"{entry} does not take CollectiveOptions.{f.name} (got {value!r}; "
                                     f"it takes {', '.join(allowed)})")
                continue
            if f.name == "protocol" and value is None:
                continue
            out[f.name] = value
        return out


def merged_options(entry: str, options, given: dict, defaults: dict, allowed=None) -> dict:
    """The option keywords of a call to ``entry``: ``given`` (the keyword values passed,
    ``defaults`` theirs in the signature), or ``options`` (a :class:`CollectiveOptions`),
    not both: a ValueError names the keywords passed beside ``options``."""
    if options is None:
        return dict(given)
    if not isinstance(options, CollectiveOptions):
        raise TypeError(f"options must be a flowsolver.CollectiveOptions, got {type(options).__name__}")
    both = [k for k, v in given.items() if not (v is defaults[k] or _same(v, defaults[k]))]
    if both:
        raise ValueError(f"{entry}: pass the options either as options= or as keywords, not both (also got "
                         f"{', '.join(both)})")
    return {**given, **options.keywords(entry, allowed)}


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Options:
    """How collectives are routed and timed (see :func:`flowsolver.collective`).

    ``policy`` / ``policy_options`` the routing policy and its options, ``pxn`` PXN for
    cross-rail hops (folded into the ECMP policies' options by :attr:`route_options`),
    ``protocol`` the NCCL protocol of the latency constants, ``chunk`` the pipeline chunk
    (bytes), ``efficiency`` the link efficiency override, ``step_latency`` /
    ``base_latency`` latency overrides (s), ``channels`` rings side by side (None: default).
    ``tuner``: time NCCL's algorithms with NCCL's cost model (:mod:`._nccl_model`; off where
    ``step_latency`` fixes an alpha per step, and for :func:`flowsolver.concurrent`'s event
    engine); ``candidates`` ``"nccl"`` (``"auto"`` picks among what NCCL runs) or ``"all"``;
    ``gpus_per_thread`` the GPUs one host thread issues a collective for (its floor:
    :func:`~._host.host_floor`); ``host_overhead`` seconds of host work added to each call;
    ``redop`` / ``dtype`` the reduction op and data type (nccl-tests' ``-o`` / ``-d`` names:
    which algorithms NCCL runs, :func:`~._nccl_model.enabled`); ``relays`` the communicator's
    GPU ranks, the only GPUs PXN relays through (None: the call's ranks; a send / receive's
    communicator is every rank given, its pair the first two; :data:`ANY_RELAY`: every GPU, for
    groups in lockstep each its own communicator: :func:`communicator_options`).
    """

    policy: str = "ecmp"
    policy_options: dict = field(default_factory=dict)
    pxn: bool = True
    protocol: str = "Simple"
    chunk: float = float(DEFAULT_CHUNK)
    efficiency: object = None
    step_latency: float | None = None
    base_latency: float | None = None
    channels: int | None = None
    nvls_channels: int | None = None
    nccl_version: tuple | None = None
    tuner: bool = False
    candidates: str = "nccl"
    gpus_per_thread: int = 1
    host_overhead: float = 0.0
    redop: str = "sum"
    dtype: str = "float"
    relays: tuple | None = None

    def __post_init__(self):
        _check_options(self)

    @property
    def protocols(self) -> tuple:
        """The protocols NCCL may choose among (``"auto"``: all of ``PROTOCOLS``)."""
        return PROTOCOLS if self.protocol == "auto" else (self.protocol,) if isinstance(self.protocol, str) \
            else self.protocol

    @property
    def step_protocol(self) -> str:
        """The protocol of the per-step latency constants: the largest-message one allowed
        (``"auto"`` counts as Simple, ``("LL", "LL128")`` as LL128)."""
        return self.protocols[-1]

    @property
    def route_options(self) -> dict:
        """Keyword options of :func:`flowsolver.route` (PXN for the policies registered with
        ``collective_pxn``: the ECMP ones)."""
        options = dict(self.policy_options or {})
        if policy_of(self.policy).collective_pxn:
            options.setdefault("pxn", self.pxn)
        if options.get("pxn") and self.relays is not None and self.relays != ANY_RELAY:
            options["relays"] = list(self.relays)
        return options

    @property
    def host_floor(self) -> float:
        """Seconds no collective beats when one thread issues it for ``gpus_per_thread`` GPUs."""
        return host_floor(self.gpus_per_thread)

    def with_host(self, seconds, greater=max):
        """``seconds`` on the GPUs as the host issues the call (:func:`~._host.with_host`)."""
        return with_host(seconds, self.gpus_per_thread, self.host_overhead, greater)

    @property
    def base(self) -> float:
        """The per-collective base latency (s)."""
        return base_latency(self.step_protocol, self.base_latency)


#: the largest collective (bytes): NCCL counts elements and bytes in size_t
MAX_SIZE = 2.0 ** 64


#: the ops whose size is split among the ranks (nccl-tests' count / nranks a rank)
SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")


class SizeBelowElement(ValueError):
    """A collective's size of less than one element (a rank, where the op splits it): such a
    call moves nothing (nccl-tests runs it as a call of 0 bytes)."""


def check_split(op, size, ranks: int, options: Options) -> None:
    """ValueError where ``size`` holds less than one ``options.dtype`` element, or, where ``op``
    splits it among ``ranks`` ranks, less than one a rank (nccl-tests: ``count / nranks``
    elements a rank, 0 below: all_gather.cu, reduce_scatter.cu, alltoall.cu): such a call moves
    nothing (adv22a, adv23 F3)."""
    element = ELEMENT_BYTES.get(options.dtype, 1)
    if op in SPLIT_OPS and ranks > 1 and size < ranks * element:
        raise SizeBelowElement(f"size must hold at least one {options.dtype} element ({element} B) a rank for {op}, which "
                         f"splits it among its {ranks} ranks: at least {ranks * element} B, got {size!r}")
    if size < element:
        # nccl-tests' count is size / wordSize: below one element it runs nothing (count 0)
        raise SizeBelowElement(f"size must hold at least one {options.dtype} element ({element} B), got {size!r} bytes: "
                         f"a collective of less moves nothing")


def check_call(op, algorithm, size, options: Options, several: bool = False):
    """ValueError naming the first bad argument of a collective call; the algorithm, several
    names (where ``several`` allows them) as :func:`~._allowed.algorithm_choice` puts them."""
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    if several and not isinstance(algorithm, str):
        algorithm = algorithm_choice(op, algorithm)
    if isinstance(algorithm, str) or not several:
        check_algorithm(op, algorithm)
    if _checks.positive_number("size", size, "bytes") > MAX_SIZE:
        raise ValueError(f"size must be at most 2**64 bytes (NCCL's and nccl-tests' counts are size_t), got {size!r}")
    check_split(op, size, 1, options)       # the ranks not known here: one element at least
    if op in ("broadcast", "reduce") and "Simple" not in options.protocols:
        raise ValueError(f"protocol for {op} must be 'auto' or 'Simple', got {options.protocol!r} (a list must allow "
                         "Simple): its chain is timed with the Simple protocol (LL's and LL128's bandwidth on it is not "
                         "modelled)")
    if op in ("send_recv", "all_to_all") and "Simple" not in options.protocols:
        # NCCL's point-to-point path takes no NCCL_PROTO: it runs Simple, and LL only for a send of at
        # most NCCL_P2P_LL_THRESHOLD (16 KiB) a channel on connections holding LL buffers (none across
        # the network unless NCCL_ALLOC_P2P_NET_LL_BUFFERS=1); never LL128 (src/enqueue.cc addP2pToPlan,
        # src/transport/net.cc, master 5067397c)
        raise ValueError(f"protocol for {op} must be 'auto' or 'Simple', got {options.protocol!r} (a list must allow "
                         "Simple): NCCL's point-to-point sends take no NCCL_PROTO; they run Simple, LL only below "
                         "NCCL_P2P_LL_THRESHOLD (16 KiB a channel) inside a node, never LL128, and LL's bandwidth on "
                         "a send is not modelled")
    return algorithm


def check_algorithm(op, algorithm, label: str | None = None) -> None:
    """ValueError unless ``algorithm`` is ``"auto"`` or runs ``op`` (one of OPS); ``label``
    names it in the message (default ``algorithm for <op>``)."""
    allowed = ALGORITHMS[op]
    if algorithm != "auto" and algorithm not in allowed:
        raise ValueError(f"{label or f'algorithm for {op}'} must be 'auto' or one of {', '.join(allowed)}, "
                         f"got {algorithm!r}")


def _check_options(o: Options) -> None:
    """ValueError naming the first option of ``o`` outside what it allows (before any work)."""
    if o.policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {o.policy!r}")
    if not isinstance(o.policy_options, dict) or set(o.policy_options) - set(POLICY_OPTIONS):
        got = sorted(map(str, o.policy_options)) if isinstance(o.policy_options, dict) else o.policy_options
        raise ValueError(f"policy_options must be a dict with keys among {', '.join(POLICY_OPTIONS)}, got {got!r}")
    if "subflows" in o.policy_options:
        _checks.integer("policy_options['subflows']", o.policy_options["subflows"])
    if "seed" in o.policy_options:
        _checks.integer("policy_options['seed']", o.policy_options["seed"], minimum=0)
    for name in ("pxn", "tuner"):
        if not isinstance(getattr(o, name), (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {getattr(o, name)!r}")
    if "pxn" in o.policy_options and not isinstance(o.policy_options["pxn"], (bool, np.bool_)):
        raise ValueError(f"policy_options['pxn'] must be True or False, got {o.policy_options['pxn']!r}")
    object.__setattr__(o, "protocol", protocol_choice(o.protocol))     # a list of names: a tuple, PROTOCOLS' order
    if o.candidates not in ("nccl", "all"):
        raise ValueError(f"candidates must be 'nccl' or 'all', got {o.candidates!r}")
    if _checks.positive_number("chunk", o.chunk, "bytes") < MIN_CHUNK:
        # a pipeline pays its depth in latencies, not one per chunk (CollectiveStep.time): smaller
        # chunks would only shrink its fill, down to the bandwidth bound (adv24 F3: a 64 MiB ring
        # broadcast in 1-byte chunks ran faster than at NCCL's 512 KiB)
        raise ValueError(f"chunk must be at least {MIN_CHUNK} bytes (16 KiB, NCCL's smallest pipeline chunk: "
                         f"calcCollChunking shrinks NVLS's to 16 KiB and the trees' to 32 KiB, no lower), "
                         f"got {o.chunk!r}")
    _efficiency(o.efficiency)
    _seconds("step_latency", o.step_latency)
    _seconds("base_latency", o.base_latency)
    if o.channels is not None:
        _checks.integer("channels", o.channels, maximum=MAX_CHANNELS)
    if o.nvls_channels is not None:
        _checks.integer("nvls_channels", o.nvls_channels, maximum=MAX_CHANNELS)
    object.__setattr__(o, "nccl_version", nccl_release(o.nccl_version))
    _checks.integer("gpus_per_thread", o.gpus_per_thread)
    if o.host_overhead is None or not _real(o.host_overhead) or not math.isfinite(float(o.host_overhead)) \
            or o.host_overhead < 0:
        raise ValueError(f"host_overhead must be a finite number of seconds >= 0, got "
                         f"{_checks._plain(o.host_overhead)!r}")
    if o.host_overhead > MAX_HOST_OVERHEAD:
        raise ValueError(f"host_overhead is seconds of host work per call (PyTorch's, TORCH_CALL_OVERHEAD, is "
                         f"25e-6); got {_checks._plain(o.host_overhead)!r}, above {MAX_HOST_OVERHEAD:g} s: "
                         f"microseconds given as seconds?")
    object.__setattr__(o, "host_overhead", float(o.host_overhead))      # numpy scalars: a plain float
    redop, dtype = reduction(o.redop, o.dtype)
    object.__setattr__(o, "redop", redop)
    object.__setattr__(o, "dtype", dtype)


def checked_collective_options(options, graph) -> dict:
    """A training step's ``collective_options`` (a :class:`CollectiveOptions` without
    ``channels`` or ``candidates``, or a dict of :data:`COLLECTIVE_OPTIONS`) as a dict,
    checked as :func:`flowsolver.concurrent_kinds` will use them, before any work: a
    ValueError names an unknown key or the first option outside what it allows.

    >>> checked_collective_options({"step_latency": -1e-6}, None)
    Traceback (most recent call last):
    ...
    ValueError: collective_options: step_latency must be None or a finite number of seconds >= 0, got -1e-06
    """
    if options is None:
        return {}
    if isinstance(options, CollectiveOptions):
        try:
            options = options.keywords("a training step", COLLECTIVE_OPTIONS)
        except ValueError as err:
            raise ValueError(f"collective_options: {err}") from None
    if not isinstance(options, dict):
        raise ValueError(f"collective_options must be a CollectiveOptions or a dict, got {type(options).__name__}")
    unknown = sorted(map(str, set(options) - set(COLLECTIVE_OPTIONS)))
    if unknown:
        raise ValueError(f"collective_options keys must be among {', '.join(COLLECTIVE_OPTIONS)}, got {unknown}")
    kw = {k: v for k, v in options.items() if k != "model" and not (k == "policy_options" and v is None)}
    try:
        built = Options(**kw)
        if graph is not None:
            check_efficiency_keys(built.efficiency, [graph])
    except ValueError as err:
        raise ValueError(f"collective_options: {err}") from None
    return dict(options)


#: ``Options.relays`` of groups solved in lockstep that are communicators of their own (a
#: training step's pipeline pairs, :func:`flowsolver.concurrent`'s groups): the relays are not
#: tracked per group, so every GPU may relay, as before relays were (each group's flows would
#: otherwise relay through the others' GPUs)
ANY_RELAY = "any"


def communicator_options(op: str, rank_groups, options: Options) -> Options:
    """``options`` with the GPUs PXN may relay through (NCCL's topology holds the
    communicator's GPUs only: ``src/graph/topo.cc``, ``src/graph/paths.cc``): one group's own
    ranks (the default, ``relays`` None), or for a send / receive, which moves data between its
    first two ranks in the communicator of all the ranks given (every GPU when None), all of
    them; groups in lockstep of different GPUs (each its own communicator): :data:`ANY_RELAY`."""
    if options.relays is not None or not rank_groups:
        return options
    def plain(r):       # a rank (numpy's too) or a GPU's node id
        return int(r) if isinstance(r, (int, np.integer)) and not isinstance(r, bool) else r
    sets = {None if g is None else frozenset(plain(r) for r in g) for g in rank_groups}
    if len(sets) > 1:
        return replace(options, relays=ANY_RELAY)
    given = rank_groups[0]
    if op != "send_recv" or given is None:
        return options
    return replace(options, relays=tuple(plain(r) for r in given))
