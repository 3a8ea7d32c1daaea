"""``algorithm=`` and ``protocol=`` given as several names: NCCL's choice among them (as a run
with ``NCCL_ALGO=Ring,Tree`` or ``NCCL_PROTO=^LL128`` chooses), checked and put in one form."""

from __future__ import annotations

from ._algorithms import ALGORITHMS, NCCL_ALGORITHMS
from ._nccl import PROTOCOLS

__all__ = ["algorithm_choice", "protocol_choice", "only_of", "log_choices", "own_algorithms", "setting_choices"]

_SETS = (list, tuple, set, frozenset)


def _names(value, label, kind) -> list:
    if isinstance(value, _SETS) and all(isinstance(v, str) for v in value):
        if not value:
            raise ValueError(f"{label} must name at least one {kind}, got an empty {type(value).__name__}")
        return list(value)
    raise ValueError(f"{label} must be a name or a list / tuple of names, got {value!r}")


def algorithm_choice(op, algorithm, label: str = "algorithm"):
    """``"auto"``, one algorithm's name, or a tuple of names (``ALGORITHMS[op]``'s order):
    NCCL's choice among them, least time under its cost model (the per-step model's for the
    algorithms NCCL lacks). A name that is no algorithm is a ValueError naming ``label``; the
    names that do not run ``op`` are dropped (``Ring,Tree`` for an all-gather is ring), and none
    left is a ValueError; one left is that algorithm.

    >>> algorithm_choice("all_reduce", ["tree", "ring"]), algorithm_choice("all_gather", ("ring", "tree"))
    (('ring', 'tree'), 'ring')
    >>> algorithm_choice("all_gather", ["tree"])
    Traceback (most recent call last):
    ...
    ValueError: algorithm for all_gather: none of tree runs all_gather (it runs ring, halving_doubling, nvls, pat)
    """
    if isinstance(algorithm, str):
        return algorithm
    names = _names(algorithm, label, "algorithm")
    known = {a for algos in ALGORITHMS.values() for a in algos}
    if unknown := [a for a in names if a not in known]:
        raise ValueError(f"{label} names {', '.join(map(repr, unknown))}, not an algorithm (the algorithms: "
                         f"{', '.join(sorted(known))})")
    chosen = tuple(a for a in ALGORITHMS[op] if a in names)
    if not chosen:
        raise ValueError(f"{label} for {op}: none of {', '.join(names)} runs {op} (it runs "
                         f"{', '.join(ALGORITHMS[op])})")
    return chosen[0] if len(chosen) == 1 else chosen


def protocol_choice(protocol, label: str = "protocol"):
    """``"auto"``, one protocol, or a tuple of two or three (``PROTOCOLS``' order): NCCL's
    choice among them; one is that protocol. A list naming all three is not ``"auto"``: NCCL_PROTO
    set at all makes LL128 a protocol the user asked for (``parseList`` sets it to 1, and NCCL's
    path rule for LL128 runs only on its unset default 2: ``tuning.cc``), so LL128 runs where
    NCCL's default would leave it off (GPUs with no NVLink). A name not in ``PROTOCOLS`` or an
    empty list is a ValueError naming ``label``.

    >>> protocol_choice(["Simple", "LL"]), protocol_choice(("LL", "LL128", "Simple")), protocol_choice(["LL128"])
    (('LL', 'Simple'), ('LL', 'LL128', 'Simple'), 'LL128')
    """
    if isinstance(protocol, str):
        if protocol != "auto" and protocol not in PROTOCOLS:
            raise ValueError(f"{label} must be 'auto' or one of {', '.join(PROTOCOLS)}, got {protocol!r} (or a list "
                             "of them: NCCL's choice among those)")
        return protocol
    names = _names(protocol, label, "protocol")
    if unknown := [p for p in names if p not in PROTOCOLS]:
        raise ValueError(f"{label} names {', '.join(map(repr, unknown))}, not a protocol (the protocols: "
                         f"{', '.join(PROTOCOLS)})")
    chosen = tuple(p for p in PROTOCOLS if p in names)
    return chosen[0] if len(chosen) == 1 else chosen


def only_of(algorithm):
    """The algorithms a pick may return for ``algorithm`` (as :func:`algorithm_choice` gives it):
    None for ``"auto"`` (any candidate), else a tuple of names."""
    if algorithm == "auto":
        return None
    return (algorithm,) if isinstance(algorithm, str) else tuple(algorithm)


def _chosen(sets, key, op, said, label):
    """What ``collective(..., <key>=)`` of ``op`` takes for ``sets`` (flowsolver's names a
    setting allowed; None where it set nothing); ``said`` / ``label`` name the setting."""
    if sets is None:
        return "auto"
    if not sets:
        none = "only what flowsolver does not model (CollNet)" if key == "algorithm" else "no protocol"
        raise ValueError(f"{said} allowed {op} {none}")
    if key == "protocol":
        return protocol_choice(list(sets), label)
    if {a for a in sets if a in ALGORITHMS[op]} == set(NCCL_ALGORITHMS[op]):
        return "auto"                   # everything NCCL runs: its own choice
    return algorithm_choice(op, list(sets), label)


def log_choices(df, op) -> tuple:
    """``(algorithm, protocol)`` for :func:`flowsolver.collective` of an nccl-tests log of ``op``
    (a DataFrame of :func:`flowsolver.nccl_tests.read`): what its ``NCCL_ALGO`` / ``NCCL_PROTO``
    allowed ``op`` (``"auto"`` where they set nothing for it or allowed everything NCCL runs);
    ValueError where they allowed only what flowsolver does not model (CollNet) or nothing that
    runs ``op``."""
    from .._nccl_env import ALGO_NAMES, PROTO_NAMES, allowed

    attrs = df.attrs
    where = attrs.get("source", "log")
    out = []
    for what, names, key in (("NCCL_ALGO", ALGO_NAMES, "algorithm"), ("NCCL_PROTO", PROTO_NAMES, "protocol")):
        value = attrs.get("nccl_" + key[:4])                # nccl_algo, nccl_proto
        if key + "s" in attrs and attrs.get("op") == op:    # what read found they allowed the log's op
            sets = attrs[key + "s"]
        elif value is not None:
            sets = allowed(value, op, names, what, attrs.get("nccl_version"))
        else:                                               # (a frame whose attrs name only the one forced)
            sets = (attrs[key],) if attrs.get(key) else None
        out.append(_chosen(sets, key, op, f"{where}: {what}={value}", f"{where}: the {key}s {what}={value} allowed"))
    return tuple(out)


def own_algorithms() -> dict:
    """flowsolver's algorithm names, lower-case -> as registered (halving_doubling, pairwise,
    nvls_tree; registered ones too), which its settings take beside NCCL's names."""
    return {a.lower(): a for algos in ALGORITHMS.values() for a in algos}


def setting_choices(algorithm: str, protocol: str, op: str, options=("--algorithm", "--protocol")) -> tuple:
    """``(algorithm, protocol)`` for :func:`flowsolver.collective` of ``op`` from values written
    as ``NCCL_ALGO`` / ``NCCL_PROTO`` take them (``"Ring,Tree"``, ``"^LL128"``,
    ``"allreduce:tree;allgather:ring"``, in any case; ``"auto"``; also flowsolver's own
    algorithms, ``"halving_doubling"``), as the command line's ``options`` give them: a list is
    NCCL's choice among those. NCCL's settings govern its five functions; for all-to-all and
    send / receive a value that names functions sets nothing, and a list must name what runs
    them. ValueError naming the option where a value is refused or allows nothing that runs ``op``.

    >>> setting_choices("Ring,TREE", "^LL128", "all_reduce"), setting_choices("allgather:ring", "ll", "all_reduce")
    ((('ring', 'tree'), ('LL', 'Simple')), ('auto', 'LL'))
    >>> setting_choices("pairwise", "auto", "all_to_all")
    ('pairwise', 'auto')
    """
    from .._nccl_env import ALGO_NAMES, NCCL_FUNCTIONS, PROTO_NAMES, allowed

    function = op if op in NCCL_FUNCTIONS else None     # None: a plain list applies, per-function entries do not
    out = []
    for value, names, also, key, option in ((algorithm, ALGO_NAMES, own_algorithms(), "algorithm", options[0]),
                                            (protocol, PROTO_NAMES, None, "protocol", options[1])):
        if value.strip().lower() == "auto":
            out.append("auto")
            continue
        said = f"{option} {value!r}"
        sets = allowed(value, function, names, option, also=also)
        out.append(_chosen(sets, key, op, said, said))
    return tuple(out)

